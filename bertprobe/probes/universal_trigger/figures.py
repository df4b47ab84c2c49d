"""The figures of ``universal-trigger``: the attack loss per iteration and the held-out accuracies."""

from __future__ import annotations

from typing import Any

from bertprobe.results import ProbeResult


def trigger_figures(result: ProbeResult, history: list[dict[str, Any]], label: str) -> list[dict[str, Any]]:
    """The attack loss per iteration (one line per restart) and held-out accuracy before and after."""
    series = [{"name": f"restart {h['restart']}", "x": [0] + [i["iteration"] + 1 for i in h["iterations"]],
               "y": ([h["iterations"][0]["loss_before"]] if h["iterations"] else []) + [i["loss_after"] for i in h["iterations"]]}
              for h in history if h.get("iterations")]
    names = [n for n in ("accuracy_before", "accuracy_after", "baseline_trigger_accuracy_after",
                         "transfer_accuracy_before", "transfer_accuracy_after") if n in result.metrics]
    return [
        {"kind": "line", "title": "attack loss per iteration (lower is a stronger trigger)",
         "data": {"series": series}, "axes": {"x": "iteration", "y": "batch loss"}},
        {"kind": "bars", "title": f"held-out '{label}' accuracy before and after the trigger (95% bootstrap CIs)",
         "metrics": ["accuracy_after", "baseline_trigger_accuracy_after", "transfer_accuracy_after"],
         "data": {"labels": [n.replace("_", " ") for n in names],
                  "series": [{"name": "accuracy", "values": [result.value(n) for n in names],
                              "errors": [list(result.metrics[n].ci) if result.metrics[n].ci else None for n in names]}]},
         "axes": {"y": "accuracy"}},
    ]
