"""Regression gates: is a candidate model at least as good as the baseline, metric by metric?

One comparison serves the suite's ``compare:`` gate (models of one run) and ``bertprobe compare``
(two runs made apart). Only quality metrics with a direction (``Metric.gated``) are judged; timings
and counts are listed but never gate. Where both sides published the per-example outcome vector a
metric summarises, the examples are paired by id: McNemar's exact test for binary outcomes, and a
paired bootstrap CI of the difference for every kind.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bertprobe.outcomes import Outcomes
from bertprobe.results import MetricDelta, ProbeResult, RunReport
from bertprobe.stats import mcnemar_exact, paired_bootstrap_diff

EPS = 1e-12


def _paired(a: Outcomes, b: Outcomes) -> tuple[np.ndarray, np.ndarray]:
    bmap = b.as_map()
    common = [i for i in a.ids if i in bmap]
    amap = a.as_map()
    return np.array([amap[i] for i in common]), np.array([bmap[i] for i in common])


def compare_metric(
    name: str, base: ProbeResult, cand: ProbeResult, base_outcomes: dict[str, Outcomes],
    cand_outcomes: dict[str, Outcomes], tolerance: float, significance: float | None, seed: int = 0,
) -> MetricDelta | None:
    """The delta of metric ``name`` (None when either side lacks it)."""
    mb, mc = base.metrics.get(name), cand.metrics.get(name)
    if mb is None or mc is None:
        return None
    hib = mb.higher_is_better if mb.higher_is_better is not None else mc.higher_is_better
    gated = mb.gated and mc.kind == "quality"
    delta = None if mb.value is None or mc.value is None else mc.value - mb.value
    out = MetricDelta(cand.model, base.model, cand.id or cand.probe, name, mb.value, mc.value, delta, hib, gated,
                      tolerance)
    outcome = mb.outcome or mc.outcome
    if outcome and outcome in base_outcomes and outcome in cand_outcomes:
        a, b = _paired(base_outcomes[outcome], cand_outcomes[outcome])
        out.paired = int(a.size)
        if a.size:
            out.ci = paired_bootstrap_diff(a, b, 1000, 0.95, seed)
            if base_outcomes[outcome].kind == "binary":
                better_base = int(((a > 0.5) & (b <= 0.5)).sum())
                better_cand = int(((a <= 0.5) & (b > 0.5)).sum())
                out.p_value = mcnemar_exact(better_base, better_cand)
                out.test = f"McNemar exact, {better_base} vs {better_cand} discordant of {a.size} paired"
            else:
                out.test = f"paired bootstrap, {a.size} paired"
    if not gated or delta is None or hib is None:
        return out
    worse = -delta if hib else delta
    if worse <= tolerance + EPS:
        return out
    if significance is None:
        out.regression = True
    elif out.p_value is not None:
        out.regression = out.p_value < significance
    elif out.ci is not None:  # score outcomes: the CI of the difference must exclude 0 in the bad direction
        out.regression = out.ci[1] < 0 if hib else out.ci[0] > 0
    else:  # nothing to test with: a deployment gate errs on the side of flagging
        out.regression = True
        out.test = "no per-example outcomes to test; judged on the delta alone"
    return out


def compare_results(
    base: ProbeResult, cand: ProbeResult, base_outcomes: dict[str, Outcomes], cand_outcomes: dict[str, Outcomes],
    tolerance_for: Callable[[str], float], significance: float | None, seed: int = 0,
) -> list[MetricDelta]:
    """Every metric the two results share, in the candidate's order."""
    out = []
    for name in cand.metrics:
        delta = compare_metric(name, base, cand, base_outcomes, cand_outcomes, tolerance_for(name), significance, seed)
        if delta is not None:
            out.append(delta)
    return out


def comparable(result: ProbeResult | None) -> bool:
    return result is not None and result.status not in ("skipped", "error", "interrupted")


def gate_models(
    report: RunReport, outcomes: dict[tuple[str, str], dict[str, Outcomes]], baseline: str,
    tolerance_for: Callable[[str], float], significance: float | None, seed: int = 0,
) -> list[MetricDelta]:
    """Compare every other model of ``report`` with ``baseline``, probe by probe (paired by id)."""
    deltas: list[MetricDelta] = []
    for model in report.model_names:
        if model == baseline:
            continue
        for cand in report.results_for(model):
            pid = cand.id or cand.probe
            base = report.result(baseline, pid)
            if not (comparable(base) and comparable(cand)):
                continue
            assert base is not None
            deltas += compare_results(base, cand, outcomes.get((baseline, pid), {}), outcomes.get((model, pid), {}),
                                      tolerance_for, significance, seed)
    return deltas
