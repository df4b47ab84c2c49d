"""Regression gates: is a candidate model at least as good as the baseline, metric by metric?

One comparison serves the suite's ``compare:`` gate (models of one run) and ``bertprobe compare``
(two runs made apart). Only quality metrics with a direction (``Metric.gated``) are judged; timings,
counts and extremes over groups (``kind: extreme``, e.g. MCE, the worst slice) are listed but never gate.
Where both sides published the per-example outcome vector a metric summarises, the examples are paired
by id: McNemar's exact test for binary outcomes, a paired bootstrap (its standard error) for scores, and
a paired bootstrap CI of the difference for every kind.

A metric regresses when its change in the bad direction is past the tolerance **and** significant: its
p-value, Holm-corrected across the candidate's tested metrics, is below the level (``significance``, 0.05
by default). A change past the tolerance that is not significant, or that has no per-example outcomes to
test, is listed and never gates; ``significance: null`` judges on the delta alone.

A subset the candidate flags (a slice of the ``slices`` probe: an ``Outcomes`` with ``subset_of``) is paired with
the baseline's own outcomes on the same examples (``subset_deltas``): a weak slice both models share is no
regression, one where the candidate is significantly worse is. One quantity measured by several probes on the same
examples (accuracy, calibration's accuracy, slices' accuracy) is compared once, under the first probe, the others
named in ``also_in`` (``merge_repeats``), so it is neither listed nor Holm-counted three times.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import numpy as np

from bertprobe.results import MetricDelta, ProbeResult, RunReport
from bertprobe.results.outcomes import Agreement, Outcomes
from bertprobe.stats import (
    cluster_members,
    clustered,
    clustered_mcnemar,
    holm,
    mcnemar_exact,
    paired_bootstrap_diff,
    paired_bootstrap_p,
)

EPS = 1e-12
DEFAULT_SIGNIFICANCE = 0.05


def _paired(a: Outcomes, b: Outcomes) -> tuple[np.ndarray, np.ndarray, list[str] | None]:
    """The two vectors over the ids both hold, in ``a``'s order, and the pairs' clusters where ``a`` names them
    and two pairs share one (else None: independent pairs)."""
    bmap = b.as_map()
    common = [i for i in a.ids if i in bmap]
    amap, groups = a.as_map(), a.groups_map()
    keys = [groups[i] for i in common] if groups is not None else None
    return (np.array([amap[i] for i in common]), np.array([bmap[i] for i in common]),
            keys if clustered(keys) else None)


def mcnemar(a: np.ndarray, b: np.ndarray, groups: list[str] | None) -> tuple[float, str]:
    """McNemar's test on paired 0/1 outcomes, and its description: exact where no cluster holds two discordant
    pairs (the discordant pairs are then independent), else the clustered statistic (Durkalski et al. 2003)."""
    better_a, better_b = (a > 0.5) & (b <= 0.5), (a <= 0.5) & (b > 0.5)
    n_a, n_b = int(better_a.sum()), int(better_b.sum())
    what = f"{n_a} vs {n_b} discordant of {a.size} paired"
    if groups is not None:
        members = cluster_members(groups)
        per_a, per_b = [int(better_a[m].sum()) for m in members], [int(better_b[m].sum()) for m in members]
        if max((x + y for x, y in zip(per_a, per_b)), default=0) > 1:
            return clustered_mcnemar(per_a, per_b), f"McNemar for clustered pairs (Durkalski 2003), {what} in {len(members)} clusters"
    return mcnemar_exact(n_a, n_b), f"McNemar exact, {what}"


def compare_metric(
    name: str, base: ProbeResult, cand: ProbeResult, base_outcomes: dict[str, Outcomes],
    cand_outcomes: dict[str, Outcomes], tolerance: float, seed: int = 0,
) -> MetricDelta | None:
    """The delta of metric ``name`` (None when either side lacks it), with its paired test; whether it is a
    regression is decided over all of a candidate's deltas at once (``judge_deltas``)."""
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
        a, b, groups = _paired(base_outcomes[outcome], cand_outcomes[outcome])
        out.paired = int(a.size)
        sizes = (len(base_outcomes[outcome].ids), len(cand_outcomes[outcome].ids))
        out.unequal = "" if sizes[0] == sizes[1] == a.size else (
            f"the two sides scored different examples ({sizes[0]} and {sizes[1]}, {a.size} shared): the delta "
            f"compares unequal sets, the test only the shared ones")
        if a.size:
            out.ci = paired_bootstrap_diff(a, b, 1000, 0.95, seed, groups)
            if base_outcomes[outcome].kind == "binary":
                out.p_value, out.test = mcnemar(a, b, groups)
            else:
                out.p_value = paired_bootstrap_p(a, b, 2000, seed, groups)
                out.test = (f"paired bootstrap, {a.size} paired" if groups is None else
                            f"paired cluster bootstrap, {a.size} paired in {len(set(groups))} clusters")
    if gated and delta is not None and hib is not None:
        out.past_tolerance = (-delta if hib else delta) > tolerance + EPS
    return out


def _parent_metric(result: ProbeResult, outcome: str) -> str | None:
    """The name of ``result``'s metric that summarises the outcome vector ``outcome`` (None: no such metric)."""
    return next((name for name, m in result.metrics.items() if m.outcome == outcome), None)


def subset_deltas(
    base: ProbeResult, cand: ProbeResult, base_outcomes: dict[str, Outcomes], cand_outcomes: dict[str, Outcomes],
    tolerance_for: Callable[[str], float], seed: int = 0,
) -> list[MetricDelta]:
    """One delta per subset the candidate flagged (its ``Outcomes`` with ``subset_of``: a slice's examples), its
    value against the baseline's parent vector over the same examples, with the parent's paired test (McNemar's
    exact test for 0/1 outcomes, a paired bootstrap for scores): is the candidate worse on that slice than the
    baseline, not than the rest of its own data? Untested (no p) where the baseline has no parent vector."""
    out = []
    for sub in cand_outcomes.values():
        if not sub.subset_of:
            continue
        parent = _parent_metric(cand, sub.subset_of)
        hib = cand.metrics[parent].higher_is_better if parent else True
        tolerance = tolerance_for(parent or sub.subset_of)
        value = float(np.mean(sub.values)) if sub.values else None
        d = MetricDelta(cand.model, base.model, cand.id or cand.probe, sub.name, None, value, None,
                        True if hib is None else hib, True, tolerance, counted_in=sub.counted_in or "",
                        in_baseline=sub.name in base_outcomes)
        whole = base_outcomes.get(sub.subset_of)
        if whole is None:
            d.test = "the baseline has no per-example outcomes here: untested"
        else:
            a, b, groups = _paired(whole, sub)
            d.paired = int(a.size)
            if a.size:
                d.baseline_value, d.value = float(a.mean()), float(b.mean())
                d.delta = d.value - d.baseline_value
                d.ci = paired_bootstrap_diff(a, b, 1000, 0.95, seed, groups)
                if whole.kind == "binary":
                    d.p_value, d.test = mcnemar(a, b, groups)
                else:
                    d.p_value = paired_bootstrap_p(a, b, 2000, seed, groups)
                    d.test = f"paired bootstrap, {a.size} paired"
                d.past_tolerance = (-d.delta if d.higher_is_better else d.delta) > tolerance + EPS
        out.append(d)
    return out


def _digest(vector: Outcomes | None) -> int | None:
    return None if vector is None else hash((tuple(vector.ids), tuple(vector.values)))


def repeat_key(d: MetricDelta, base: ProbeResult, cand: ProbeResult, base_outcomes: dict[str, Outcomes],
               cand_outcomes: dict[str, Outcomes]) -> tuple[object, ...] | None:
    """What makes two deltas one: the same metric summarising equal outcome vectors on both sides (the same quantity
    measured on the same examples; the values may differ in their last bits, one probe averaging in float32);
    None where the delta has no outcome vectors to show it."""
    metric = cand.metrics.get(d.metric) or base.metrics.get(d.metric)
    if metric is None or not metric.outcome:
        return None
    a, b = _digest(base_outcomes.get(metric.outcome)), _digest(cand_outcomes.get(metric.outcome))
    if a is None or b is None:
        return None
    return (d.model, d.metric, a, b)


def merge_repeats(keyed: list[tuple[MetricDelta, tuple[object, ...] | None]]) -> list[MetricDelta]:
    """The deltas with each repeat (an equal key) folded into its first: the first probe's delta stays, naming
    the other probes in ``also_in``."""
    first: dict[tuple[object, ...], MetricDelta] = {}
    out = []
    for d, key in keyed:
        if key is not None and key in first:
            if d.probe_id not in first[key].also_in:
                first[key].also_in.append(d.probe_id)
            continue
        if key is not None:
            first[key] = d
        out.append(d)
    return out


def judge_deltas(deltas: list[MetricDelta], significance: float | None) -> list[MetricDelta]:
    """Decide which deltas are regressions, per candidate model: Holm-correct the p-values of its gated
    metrics, then flag those past the tolerance whose adjusted p is below ``significance`` (with
    ``significance`` None: every one past the tolerance). Returns ``deltas``."""
    by_model: dict[str, list[MetricDelta]] = defaultdict(list)
    for d in deltas:
        d.regression = False
        if d.gated and d.p_value is not None:
            by_model[d.model].append(d)
    for family in by_model.values():
        for d, adjusted in zip(family, holm([d.p_value for d in family])):  # type: ignore[misc]
            d.p_adjusted = adjusted
    for d in deltas:
        d.significant = bool(d.gated and significance is not None and d.p_adjusted is not None
                             and d.p_adjusted < significance)
        if not d.past_tolerance:
            continue
        if significance is None:
            d.regression = True
        elif d.p_adjusted is None:
            d.test = d.test or "no per-example outcomes: untested, so it does not gate"
        else:
            d.regression = d.p_adjusted < significance
    return deltas


def compare_results(
    base: ProbeResult, cand: ProbeResult, base_outcomes: dict[str, Outcomes], cand_outcomes: dict[str, Outcomes],
    tolerance_for: Callable[[str], float], seed: int = 0,
) -> list[MetricDelta]:
    """Every metric the two results share, in the candidate's order, then each subset the candidate flagged
    (``subset_deltas``)."""
    out = []
    for name in cand.metrics:
        delta = compare_metric(name, base, cand, base_outcomes, cand_outcomes, tolerance_for(name), seed)
        if delta is not None:
            out.append(delta)
    out += subset_deltas(base, cand, base_outcomes, cand_outcomes, tolerance_for, seed)
    return out  # not judged yet: judge_deltas decides over all of a candidate's deltas


def comparable(result: ProbeResult | None) -> bool:
    return result is not None and result.status not in ("skipped", "error", "interrupted")


def gate_models(
    report: RunReport, outcomes: dict[tuple[str, str], dict[str, Outcomes]], baseline: str,
    tolerance_for: Callable[[str], float], significance: float | None, seed: int = 0,
) -> list[MetricDelta]:
    """Compare every other model of ``report`` with ``baseline``, probe by probe (paired by id); a quantity that
    several probes measured on the same examples is compared once (``merge_repeats``)."""
    keyed: list[tuple[MetricDelta, tuple[object, ...] | None]] = []
    for model in report.model_names:
        if model == baseline:
            continue
        for cand in report.results_for(model):
            pid = cand.id or cand.probe
            base = report.result(baseline, pid)
            if not (comparable(base) and comparable(cand)):
                continue
            assert base is not None
            base_vecs, cand_vecs = outcomes.get((baseline, pid), {}), outcomes.get((model, pid), {})
            keyed += [(d, repeat_key(d, base, cand, base_vecs, cand_vecs))
                      for d in compare_results(base, cand, base_vecs, cand_vecs, tolerance_for, seed)]
    return judge_deltas(merge_repeats(keyed), significance)


def prediction_agreement(report: RunReport, outcomes: dict[tuple[str, str], dict[str, Outcomes]],
                         baseline: str) -> list[Agreement]:
    """Each other model's agreement with ``baseline``, per probe whose results both published a ``prediction``
    vector (the accuracy probe's), with the examples whose prediction changed. Listed, never gating: the
    decision rests on the paired tests of the metrics (a change of prediction may fix an error)."""
    out = []
    for model in report.model_names:
        if model == baseline:
            continue
        for cand in report.results_for(model):
            pid = cand.id or cand.probe
            if not (comparable(report.result(baseline, pid)) and comparable(cand)):
                continue
            base_vec = outcomes.get((baseline, pid), {}).get("prediction")
            cand_vec = outcomes.get((model, pid), {}).get("prediction")
            if base_vec is not None and cand_vec is not None and Agreement.pairable(base_vec, cand_vec):
                out.append(Agreement.between(model, baseline, pid, base_vec, cand_vec))
    return out
