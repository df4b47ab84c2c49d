"""Figures are data first: probes describe them as small specs; the HTML reporter draws them.

A probe (built-in or third-party) puts specs in ``result.details["figures"]``, a list of mappings:

``{"kind": "heatmap", "title": ..., "data": {"matrix": [[...]], "rows": [...], "cols": [...]},
   "scale": {"center": 0, "min": ..., "max": ...}, "axes": {"x": "head", "y": "layer"}, "colorbar": "..."}``
``{"kind": "line", "title": ..., "data": {"series": [{"name": ..., "x": [...], "y": [...]}],
   "band": [lo, hi], "marks": [{"x": ..., "label": ...}]}, "axes": {...}}``
``{"kind": "bars", "title": ..., "data": {"labels": [...], "series": [{"name": ..., "values": [...],
   "errors": [[lo, hi], ...]}], "reference": {"value": 0.5, "label": "chance"}, "stacked": false}}``
``{"kind": "scatter", "title": ..., "data": {"points": [{"x": ..., "y": ..., "label": ...}],
   "reference": {"x": ..., "y": ...}}, "axes": {...}}``
``{"kind": "table", "title": ..., "data": {"columns": [...], "rows": [[...], ...]}}``: a small table (a QA audit's
   scores per question word), shown as a table in both reports, never drawn

Any spec may say ``"tabulate": false``: the Markdown report then leaves it out (another figure of the probe
already tabulates its data, as a bars figure beside the table of its numbers).

This module holds the specs only and never imports matplotlib; ``bertprobe.reporters.drawing`` draws
them for the HTML report (a spec that cannot be drawn becomes a short note there), and ``figure_table``
gives the Markdown report each figure as a table.
"""

from __future__ import annotations

from typing import Any

KINDS = ("heatmap", "line", "bars", "scatter")  # the kinds drawn
TABLE = "table"  # the kind shown as a table


def heatmap_spec(title: str, data: dict[str, Any]) -> dict[str, Any]:
    """A heatmap spec for ``data`` ({matrix, rows, cols}); a map with negative and positive values, or one
    titled as a change, is centred on 0."""
    flat = [v for row in data.get("matrix") or [] for v in row if isinstance(v, (int, float))]
    centre = 0.0 if flat and min(flat) < 0 < max(flat) or "change" in title else None
    return {"kind": "heatmap", "title": title, "data": data, "scale": {"center": centre} if centre is not None else {}}


def figure_specs(details: dict[str, Any]) -> list[dict[str, Any]]:
    """Every figure a result describes (``details["figures"]``; entries that are not mappings are ignored)."""
    return [s for s in details.get("figures") or [] if isinstance(s, dict)]


def with_thresholds(spec: dict[str, Any], expectations: list[Any]) -> dict[str, Any]:
    """``spec`` with a threshold line for each expectation on a metric its value axis shows.

    A probe names those metrics (fnmatch patterns) in ``spec["metrics"]``; each expectation's ``min`` or
    ``max`` on a matching metric becomes ``data["thresholds"]``, drawn as a dashed line labelled
    ``expected >= 0.85 (accuracy)``."""
    import fnmatch

    patterns = spec.get("metrics") or []
    lines = []
    for e in expectations:
        if not any(fnmatch.fnmatchcase(e.metric, p) for p in patterns):
            continue
        for bound, sign in ((e.min, ">="), (e.max, "<=")):
            if bound is not None:
                lines.append({"value": float(bound), "label": f"expected {sign} {bound:g} ({e.metric})"})
    if not lines:
        return spec
    return {**spec, "data": {**spec["data"], "thresholds": [*(spec["data"].get("thresholds") or []), *lines]}}


def figure_table(spec: dict[str, Any]) -> tuple[list[str], list[list[Any]]] | None:
    """A line or bars figure as a table (for the Markdown report): x or label, then one column per series; a
    table figure as it is."""
    data = spec.get("data") or {}
    series = data.get("series") or []
    if spec.get("kind") == TABLE and data.get("columns"):
        return [str(c) for c in data["columns"]], [list(row) for row in data.get("rows") or []]
    if spec.get("kind") == "bars" and series:
        labels = data.get("labels") or []
        return (["", *[str(s.get("name") or "value") for s in series]],
                [[label, *[s["values"][i] if i < len(s["values"]) else None for s in series]]
                 for i, label in enumerate(labels)])
    if spec.get("kind") == "line" and series:
        xs = list(dict.fromkeys(x for s in series for x in (s.get("x") or range(len(s["y"])))))
        lookup = [dict(zip(s.get("x") or range(len(s["y"])), s["y"])) for s in series]
        axes = spec.get("axes") or {}
        return ([str(axes.get("x", "x")), *[str(s.get("name") or "y") for s in series]],
                [[x, *[m.get(x) for m in lookup]] for x in xs])
    return None


def layer_head_heatmap(matrix: Any) -> dict[str, Any]:
    """Heatmap data ({matrix, rows, cols}) for a layers x heads tensor: rows L0, L1, ..., columns H0, H1, ..."""
    layers, heads = matrix.shape
    return {"matrix": matrix.tolist(), "rows": [f"L{i}" for i in range(layers)], "cols": [f"H{j}" for j in range(heads)]}
