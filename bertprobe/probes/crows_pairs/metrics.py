"""metric.py's numbers from per-pair outcomes, as shares (0-1) with Wilson intervals."""

from __future__ import annotations

import re
from collections.abc import Sequence

from bertprobe.probes.crows_pairs.data import BIAS_TYPES, CrowsPair
from bertprobe.probes.crows_pairs.scoring import CrowsPairScore
from bertprobe.results import ProbeResult


def type_key(bias_type: str) -> str:
    """A metric-name-safe bias type: ``race-color`` -> ``race_color``."""
    return re.sub(r"[^a-z0-9]+", "_", bias_type.lower()).strip("_")


def distance_interval(ci: tuple[float, float] | None) -> tuple[float, float] | None:
    """The interval of |p - 0.5| given p's interval: from 0 when p's interval holds 0.5."""
    if ci is None:
        return None
    lo, hi = ci
    far = max(abs(lo - 0.5), abs(hi - 0.5))
    return (0.0, far) if lo <= 0.5 <= hi else (min(abs(lo - 0.5), abs(hi - 0.5)), far)


def add_scores(result: ProbeResult, pairs: Sequence[CrowsPair], scores: Sequence[CrowsPairScore], suffix: str = "",
               with_outcomes: bool = False) -> dict[str, float | int | None]:
    """``metric_score`` (share of all pairs, neutrals included, where sent_more scores higher), its
    ``distance_from_50``, ``neutral`` and ``pairs``; without ``suffix``, also ``stereo_score`` and
    ``antistereo_score`` (shares of the non-neutral pairs of each direction that count). Returns the row."""
    ids = [p.id for p in pairs]
    hits = [s.outcome == "more" for s in scores]
    metric = result.add_share("metric_score" + suffix, hits, ids if with_outcomes else None, higher_is_better=None)
    result.add_metric("distance_from_50" + suffix, abs(metric.value - 0.5), False, ci=distance_interval(metric.ci))
    neutral = sum(s.outcome == "neutral" for s in scores)
    result.add_metric("neutral" + suffix, float(neutral), kind="count")
    result.add_metric("pairs" + suffix, float(len(scores)), kind="count")
    row: dict[str, float | int | None] = {"pairs": len(scores), "metric_score": metric.value,
                                          "distance_from_50": abs(metric.value - 0.5), "neutral": neutral}
    if suffix:
        return row
    for direction in ("stereo", "antistereo"):
        chosen = [(p, s) for p, s in zip(pairs, scores) if p.direction == direction and s.outcome != "neutral"]
        if chosen:  # metric.py divides by zero here (stereo) or prints nothing (antistereo when none counts)
            share = result.add_share(f"{direction}_score", [s.outcome == "more" for _, s in chosen],
                                     [p.id for p, _ in chosen] if with_outcomes else None, higher_is_better=None)
            row[f"{direction}_score"] = share.value
    return row


def add_per_type(result: ProbeResult, pairs: Sequence[CrowsPair], scores: Sequence[CrowsPairScore]) -> dict[str, dict]:
    """The same numbers per bias type (suffix ``_TYPE``), in the README's order of the nine types."""
    table = {}
    for bias in BIAS_TYPES:
        chosen = [(p, s) for p, s in zip(pairs, scores) if p.bias_type == bias]
        if chosen:
            table[bias] = add_scores(result, [p for p, _ in chosen], [s for _, s in chosen], suffix=f"_{type_key(bias)}")
            table[bias]["ci"] = result.metrics[f"metric_score_{type_key(bias)}"].ci
    return table
