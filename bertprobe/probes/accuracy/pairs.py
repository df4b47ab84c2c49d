"""Exact match and F1 over a set of questions, as the accuracy probe's answers and adversarial sections write them:
two metrics with their intervals (over contexts where questions share one, ``tasks.qa_clusters``) and the
per-question outcomes a paired gate compares."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bertprobe.results import ProbeResult
from bertprobe.results.outcomes import Outcomes
from bertprobe.tasks.qa_clusters import cluster_keys, interval_over, mean_interval


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def add_pair(result: ProbeResult, prefix: str, suffix: str, picked: list[int], em: list[float], f1: list[float],
              ids: list[str], params: Any, seed: int, what: str, groups: Sequence[str] | None = None) -> None:
    """``{prefix}exact_match{suffix}`` and ``{prefix}f1{suffix}`` over the questions ``picked``, with their
    intervals (by context with ``groups``: each question's cluster) and outcomes (``em{tag}``, ``f1{tag}``) so a
    paired gate compares them question by question."""
    tag = "_" + (prefix + suffix).strip("_") if prefix or suffix else ""
    e, f = [em[i] for i in picked], [f1[i] for i in picked]
    within = [groups[i] for i in picked] if groups is not None else None
    chosen = [ids[i] for i in picked]
    keys = cluster_keys(within)  # a matrix pairs two readers' questions by context too
    result.outcomes += [Outcomes.from_values(f"em{tag}", chosen, e, groups=keys),
                        Outcomes.from_values(f"f1{tag}", chosen, f, "score", groups=keys)]
    result.add_metric(f"{prefix}exact_match{suffix}", _mean(e), True,
                      f"exact match on {what} (SQuAD v1.1 normalisation; {interval_over(e, within, params.bootstrap)})",
                      mean_interval(e, params, seed, within), outcome=f"em{tag}", cases=len(e))
    result.add_metric(f"{prefix}f1{suffix}", _mean(f), True,
                      f"token F1 on {what}, the mean over questions of each one's best F1 against its gold answers "
                      f"({interval_over(f, within, params.bootstrap)})", mean_interval(f, params, seed, within), outcome=f"f1{tag}",
                      cases=len(f))


def percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"
