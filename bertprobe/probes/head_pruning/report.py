"""What the report of ``head-pruning`` shows beside its metrics: the curve and layer figures, and its key finding."""

from __future__ import annotations

from typing import Any

from bertprobe.results import ProbeResult


def head_figures(result: ProbeResult, tolerance: float) -> list[dict[str, Any]]:
    """The pruning curve with its tolerance band and prunable_fraction marked, and the layer-ablation bars
    (the importance and ablation maps are ``details["heatmaps"]``, drawn with a colour bar; changes
    centred on 0)."""
    figures: list[dict[str, Any]] = []
    metric = str(result.details.get("metric", "accuracy"))
    curve = result.details.get("pruning_curve")
    base = result.value("baseline")
    if curve and base is not None:
        marks = []
        prunable = result.metrics.get("prunable_fraction")
        if prunable is not None and prunable.value is not None:
            marks.append({"x": prunable.value, "label": f"prunable {prunable.value:.2f}"})
        figures.append({"kind": "line", "title": f"pruning curve: {metric} as heads are removed, least important first",
                        "data": {"series": [{"name": metric, "x": [p["fraction"] for p in curve],
                                             "y": [p["metric"] for p in curve]}],
                                 "band": [base - tolerance, base], "band_label": f"within {tolerance:g} of baseline",
                                 "marks": marks},
                        "axes": {"x": "fraction of heads pruned", "y": metric}})
    layers = result.details.get("layer_ablation")
    if layers:
        figures.append({"kind": "bars", "title": f"{metric} drop when all heads of one layer are removed",
                        "data": {"labels": [f"L{r['layer']}" for r in layers],
                                 "series": [{"name": "drop", "values": [r["drop"] for r in layers]}]},
                        "axes": {"x": "layer", "y": f"{metric} drop"}})
    return figures


def pruning_finding(result: ProbeResult, tolerance: float) -> str:
    """One line: the most harmful head, the most harmful layer, and how much may be pruned, in points of the
    probe's metric (accuracy, or entity F1 for a tagger)."""
    metric = result.details.get("metric", "accuracy")
    parts = []
    table = result.details.get("ablation") or []
    if table:
        worst = min(table, key=lambda r: r["delta"])
        parts.append(f"removing L{worst['layer']}H{worst['head']} costs {-100 * worst['delta']:.1f} points of "
                     f"{metric} (the most of {len(table)} heads)")
    layers = result.details.get("layer_ablation") or []
    if layers:
        worst_layer = max(layers, key=lambda r: r["drop"])
        parts.append(f"removing all of L{worst_layer['layer']} {100 * worst_layer['drop']:.1f}")
    prunable = result.metrics.get("prunable_fraction")
    if prunable is not None and prunable.value is not None:
        ci = f" [{prunable.ci[0]:.0%}, {prunable.ci[1]:.0%}]" if prunable.ci else ""
        points = f"{100 * tolerance:g} point" + ("" if 100 * tolerance == 1 else "s")
        parts.append(f"{prunable.value:.0%}{ci} of heads prunable within {points}")
    return "; ".join(parts)
