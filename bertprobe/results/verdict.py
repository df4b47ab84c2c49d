"""The decision a run states: per model, ship or not and why, from expectations, errors and the gate.

Rules (documented in docs/verdicts.md):

* a **single model** (or each model of a matrix without a gate) is *fit to ship* when every expectation held
  and no probe errored; it is *do not ship* when an expectation failed or a probe errored, with each reason;
  *no decision* when nothing was checked or the run did not complete;
* expectations are the suite's own and each probe's defaults (``bertprobe.results.policy``); a model that ships is
  told which held expectation came closest to its bound, and which key metrics the suite left ungated;
* in a **gated matrix**, the baseline is the model in service, and a candidate answers two questions: is it
  worse than the baseline, and does it meet the bar? It *may replace* the baseline when no gated metric
  regressed significantly, no probe of its errored, nothing critical was found and every expectation it misses
  the baseline misses too; those shared misses follow on its line (``like fp32, misses: calibration ece 0.1308
  (fp32: 0.1298)``). It is *do not ship* only for a critical finding (a possible backdoor), a significant
  regression, an error, or a missed expectation the baseline does not share, in that order, its shared misses
  named after them; the baseline's line names what it misses itself; changes past the tolerance that are not
  significant are named and never block, nor do the gated metrics significantly better than the baseline's,
  which are named too (``significantly better than fp32: blimp.accuracy +0.36 (p=5e-08)``); a delta whose two
  sides scored different examples says so (``on 40 shared examples of unequal sets``);
* a subset a candidate flags (a slice) is judged against the baseline on the same examples, not against the rest
  of its own data: where the paired test of every flagged subset (``gates.subset_deltas``) finds none significantly
  worse, the miss of the count (``slices_flagged``) decides nothing and is named as ``not_worse`` (a known weakness,
  flagged in both where the baseline flags it too); a subset that is significantly worse is a regression;
* a decision that rests on fewer than ``MIN_EXAMPLES`` examples carries a warning: a proportion from 30
  examples has a 95% interval about +-0.17 wide, too wide to tell 0.85 from 0.95.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from bertprobe.results import Expectation, MetricDelta, ProbeResult, RunReport
from bertprobe.results.report import metric_tolerance

MIN_EXAMPLES = 100  # below this a verdict on a proportion is flagged (Wilson 95% half-width about 0.1 at p=0.5)
Decision = Literal["ship", "do not ship", "may replace", "baseline", "no decision"]


@dataclass
class Verdict:
    """One model's decision with its reasons (most serious first), warnings, and what a reader should know
    even when it ships: the expectation closest to its bound and the key metrics nothing gated."""

    model: str
    decision: Decision
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    baseline: str = ""
    closest: str = ""  # the held expectation with the least room: the worst finding of a model that ships
    not_gated: list[str] = field(default_factory=list)  # key metrics whose default the suite turned off
    unconfirmed: list[str] = field(default_factory=list)  # changes past the tolerance that are not significant
    shared: list[str] = field(default_factory=list)  # misses the baseline shares: 'calibration ece 0.13 (fp32: 0.12)'
    gate_test: str = ""  # a candidate's: 'no significant regression' (or 'no regression past the tolerance')
    left_out: list[str] = field(default_factory=list)  # the suite's entries --only left out: not covered
    # bounds missed on too few cases to decide (policy.MIN_CASES): named on the line, deciding nothing alone
    inconclusive: list[str] = field(default_factory=list)
    # flagged subsets the paired test finds no worse than the baseline's own (a known weakness, not a regression)
    not_worse: list[str] = field(default_factory=list)
    # a candidate's gated metrics significantly better than the baseline's (Holm-adjusted): named, deciding nothing
    improved: list[str] = field(default_factory=list)

    @property
    def blocking(self) -> bool:
        return self.decision == "do not ship"

    @property
    def below_bar(self) -> bool:
        """A candidate that may replace its baseline but misses expectations the baseline misses too."""
        return self.decision == "may replace" and bool(self.shared or self.not_worse)

    def headline(self) -> str:
        """'candidate: do not ship: 2 regressions against deployed (...)' in one line."""
        if self.decision == "may replace":
            text = f"may replace {self.baseline}"
            notes = [self.gate_test] if self.gate_test else []
            if self.unconfirmed:
                notes.append(f"past the tolerance, not significant: {_listed(self.unconfirmed, 3)}")
            text += f" ({'; '.join(notes)})" if notes else ""
        elif self.decision == "baseline":
            text = "baseline (in service): the others are judged against it"
            if self.reasons:  # what it misses itself: a candidate that misses the same is no worse there
                text += "; it misses itself: " + "; ".join(self.reasons)
        elif self.decision == "ship":
            held = "every expectation of the probes run held" if self.left_out else "every expectation held"
            text = ("fit to ship by this suite; not gated: " + _listed(self.not_gated, 3) if self.not_gated
                    else f"fit to ship: {held}")
            if self.closest:
                text += f" (closest: {self.closest})"
        else:
            text = self.decision
        if self.reasons and self.decision in ("do not ship", "no decision"):
            text += ": " + "; ".join(self.reasons)
            if self.unconfirmed:
                text += f"; also past the tolerance, not significant: {_listed(self.unconfirmed, 3)}"
        if self.improved and self.decision in ("may replace", "do not ship"):
            text += f"; significantly better than {self.baseline}: {_listed(self.improved, 3)}"
        if self.shared and self.decision in ("may replace", "do not ship"):
            text += f"; like {self.baseline}, misses: {_listed(self.shared, MOST_SHORTFALLS)}"
        if self.not_worse and self.decision in ("may replace", "do not ship"):
            text += (f"; flagged, not worse than {self.baseline} on the same examples (a known weakness, not a "
                     f"regression): {_listed(self.not_worse, 3)}")
        if self.inconclusive:
            text += f"; too few cases to decide: {_listed(self.inconclusive, 3)}"
        if self.left_out and self.decision in ("ship", "may replace"):
            text += f"; --only left out {_listed(self.left_out, 4)}, which this decision does not cover"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "headline": self.headline()}


def _listed(items: list[str], most: int) -> str:
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most else "")


def _examples(result: ProbeResult) -> int | None:
    """The fewest examples any count metric of the result reports (``examples``, ``examples_held_out``...; a
    minimal-pair probe's ``pairs``: BLiMP's, CrowS-Pairs'); where it counts none (slices, behaviour), the examples
    of the data it was given (``details["data_examples"]``)."""
    counts = [m.value for name, m in result.metrics.items()
              if m.kind == "count" and (name.startswith("examples") or name == "pairs") and m.value is not None]
    given = result.details.get("data_examples")
    return int(min(counts)) if counts else (int(given) if isinstance(given, (int, float)) else None)


MOST_SHORTFALLS = 4  # failed expectations named per probe in a reason; the report lists them all


def shortfalls(result: ProbeResult, most: int = MOST_SHORTFALLS, skip: frozenset[str] = frozenset()) -> list[str]:
    """The missed expectations of ``result`` (but those on the metrics in ``skip``), furthest past their bound
    first, at most ``most`` of them and a count of the rest: what a one-line reason or a terminal note shows
    (the report lists them all)."""
    failed = sorted((e for e in result.expectations if not e.passed and not e.inconclusive and e.metric not in skip),
                    key=lambda e: e.margin() if e.margin() is not None else -1e9)
    named = [e.shortfall() for e in failed[:most]]
    if len(failed) > most:
        named.append(f"{len(failed) - most} more expectation(s) missed")
    return named


def _why(result: ProbeResult, skip: frozenset[str] = frozenset()) -> str:
    """'universal-trigger: success_rate 0.85 (expected <= 0.5); <key finding>'; the missed expectations named in
    ``skip`` (those a baseline shares) are left out, and the line is empty when nothing else was missed."""
    label = result.id or result.probe
    if result.status == "error":
        return f"{label} errored ({result.message.split(';')[0][:120]})"
    missed = shortfalls(result, skip=skip)
    if not missed:
        return ""
    finding = str(result.details.get("key_finding") or "")
    return f"{label}: " + "; ".join(missed + ([finding] if finding else []))


def _value(e: Expectation) -> str:
    return "missing" if e.value is None else f"{e.value:.4g}"


def _no_worse(miss: Expectation, base: Expectation, tolerance: float) -> bool:
    """Whether a candidate's miss is within ``tolerance`` of the baseline's miss of the same bound: a candidate
    at 0.10 against a baseline at 0.39 under ``min: 0.4`` misses it much worse, and that miss is its own."""
    if miss.value is None or base.value is None:
        return miss.value is None and base.value is None
    worse = (base.value - miss.value) if miss.min is not None else (miss.value - base.value)
    return worse <= tolerance + 1e-12


def shared_misses(result: ProbeResult, baseline: ProbeResult | None, baseline_name: str,
                  gate: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """(metric, 'calibration ece 0.1308 (fp32: 0.1298)') for each expectation ``result`` misses that the
    baseline's run of the same probe misses too, by no more than the gate's tolerance for the metric (a
    baseline's probe that errored misses nothing: it was not measured): no worse than the model in service there."""
    if baseline is None or result.status != "failed" or baseline.status != "failed":
        return []
    missed = {e.metric: e for e in baseline.expectations if not e.passed}
    label = result.id or result.probe
    return [(e.metric, f"{label} {e.metric} {_value(e)} ({baseline_name}: {_value(missed[e.metric])})")
            for e in result.expectations if not e.passed and e.metric in missed
            and _no_worse(e, missed[e.metric], metric_tolerance((gate or {}).get("tolerance", 0.0), e.metric))]


def alerts(results: list[ProbeResult]) -> list[str]:
    """Findings a probe marks as critical whatever its expectations (``details["alert"]``, e.g. a trigger token
    that alone flips most examples: a possible backdoor): the first reasons of a decision."""
    return [f"{r.id or r.probe}: {r.details['alert']}" for r in results if r.details.get("alert")]


def small_sample_warnings(results: list[ProbeResult]) -> list[str]:
    """One warning per number of examples below MIN_EXAMPLES that checked results rest on, naming them
    ('accuracy and slices rest on 60 examples (fewer than 100): their numbers are uncertain')."""
    by_size: dict[int, list[str]] = {}
    for r in results:
        n = _examples(r)
        if r.expectations and r.status in ("passed", "failed") and n is not None and n < MIN_EXAMPLES:
            by_size.setdefault(n, []).append(r.id or r.probe)
    out = []
    for n, names in by_size.items():
        one = len(names) == 1
        listed = names[0] if one else ", ".join(names[:-1]) + " and " + names[-1]
        out.append(f"{listed} {'rests' if one else 'rest'} on {n} examples (fewer than {MIN_EXAMPLES}): "
                   f"{'its' if one else 'their'} numbers are uncertain")
    return out


def _closest(results: list[ProbeResult]) -> str:
    """'calibration.ece 0.053 (expected <= 0.1)': the held expectation with the least room to its bound."""
    held = [(e.margin(), r, e) for r in results for e in r.expectations if e.passed and e.margin() is not None]
    if not held:
        return ""
    _, result, e = min(held, key=lambda t: t[0])
    return f"{result.id or result.probe}.{e.shortfall()}"


def subset_deltas_of(report: RunReport, model: str) -> dict[tuple[str, str], list[MetricDelta]]:
    """``{(probe id, count metric): [delta]}``: each subset ``model`` flagged (a slice) against the baseline on the
    same examples, as the gate recorded it (``gates.subset_deltas``), from the regressions, the changes past the
    tolerance and the paired differences."""
    out: dict[tuple[str, str], list[MetricDelta]] = {}
    seen: set[tuple[str, str]] = set()
    for d in [*report.regressions, *report.unconfirmed, *report.paired]:
        if d.model != model or not d.counted_in or (d.probe_id, d.metric) in seen:
            continue
        seen.add((d.probe_id, d.metric))
        out.setdefault((d.probe_id, d.counted_in), []).append(d)
    return out


def _not_worse_text(d: MetricDelta, baseline: str) -> str:
    """'slices accuracy on 'has a negation' 0.808 (torch: 0.848 on the same 125; p=0.53)'."""
    p = d.p_adjusted if d.p_adjusted is not None else d.p_value
    both = "; flagged in both" if d.in_baseline else ""
    return (f"{d.probe_id} {d.metric} {_num(d.value)} ({baseline}: {_num(d.baseline_value)} on the same {d.paired}"
            f"{both}; p={_num(p, 2)})")


def _num(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None else f"{value:.{digits}g}"


def _tested_subsets(result: ProbeResult, subsets: dict[tuple[str, str], list[MetricDelta]]) -> dict[str, list[MetricDelta]]:
    """``{metric: [delta]}`` for each missed count of ``result`` (``slices_flagged``) whose every subset the gate
    tested against the baseline: those misses the paired tests decide, not the count."""
    label = result.id or result.probe
    out = {}
    for e in result.expectations:
        deltas = subsets.get((label, e.metric)) or []
        if (e.passed or e.inconclusive or e.value is None or not deltas or len(deltas) != int(e.value)
                or any(d.p_value is None for d in deltas)):
            continue
        out[e.metric] = deltas
    return out


def _own(report: RunReport, model: str, baseline: str | None = None) -> Verdict:
    """``model``'s verdict on its own expectations; with ``baseline`` (a candidate's), the misses the baseline
    shares go to ``shared`` instead of the reasons, and alone they do not block."""
    results = [r for r in report.probes if r.model == model or len(report.model_names) <= 1]
    base = {r.id or r.probe: r for r in report.probes if baseline and r.model == baseline and model != baseline}
    warnings = small_sample_warnings(results) + [f"{r.id or r.probe}: {w}" for r in results for w in r.details.get("warnings") or []]
    verdict = Verdict(model, "ship", warnings=warnings, baseline=baseline or "", left_out=list(report.left_out))
    verdict.inconclusive = [f"{r.id or r.probe} {e.shortfall()}" for r in results for e in r.expectations
                            if e.inconclusive and r.status in ("passed", "failed")]
    reasons = []
    subsets = subset_deltas_of(report, model) if base else {}
    for r in results:
        if r.status not in ("failed", "error"):
            continue
        tested = _tested_subsets(r, subsets)  # a flagged slice: the paired test decides, the regressions name it
        verdict.not_worse += [_not_worse_text(d, baseline or "") for deltas in tested.values() for d in deltas
                              if not d.regression]
        shared = [(metric, text) for metric, text in shared_misses(r, base.get(r.id or r.probe), baseline or "",
                                                                   report.gate) if metric not in tested]
        verdict.shared += [text for _, text in shared]
        why = _why(r, frozenset(metric for metric, _ in shared) | frozenset(tested))
        if why:
            reasons.append(why)
    checked = [r for r in results if r.expectations and r.status in ("passed", "failed")]
    critical = alerts(results)
    if reasons or critical:
        verdict.decision = "do not ship"
        verdict.reasons = critical + reasons
    elif report.status != "completed":
        verdict.decision, verdict.reasons = "no decision", [f"the run is {report.status}"]
    elif not checked:
        verdict.decision, verdict.reasons = "no decision", ["nothing was checked: no probe has an expectation that ran"]
    else:
        verdict.closest = _closest(checked)
    verdict.not_gated = [f"{r.id or r.probe}.{row['metric']} {row['value']:.4g}" for r in results
                         for row in r.details.get("not_gated") or [] if row.get("off")]
    skipped = [r.id or r.probe for r in results if r.status == "skipped"]
    if skipped:
        verdict.warnings.append(f"not checked (skipped): {', '.join(skipped)}")
    return verdict


def _delta_text(d: MetricDelta) -> str:
    text = f"{d.probe_id}.{d.metric} {d.delta:+.3g}" if d.delta is not None else f"{d.probe_id}.{d.metric}"
    notes = ([f"p={d.p_adjusted:.2g}"] if d.p_adjusted is not None else []) + (
        [f"also seen in: {', '.join(d.also_in)}"] if d.also_in else []) + (
        [f"on {d.paired} shared examples of unequal sets"] if d.unequal else [])
    return text + (f" ({'; '.join(notes)})" if notes else "")


def decide(report: RunReport) -> list[Verdict]:
    """Each model's verdict: the gate's view in a gated matrix, else its own expectations.

    A candidate's reasons come most serious first: critical findings (a possible backdoor), then the
    significant regressions against the baseline, then its own missed expectations; changes past the
    tolerance that are not significant are named after them and never block."""
    names = report.model_names or [report.model]
    baseline = report.gate.get("baseline") if report.gate and len(names) > 1 else None
    verdicts = []
    for name in names:
        own = _own(report, name, baseline)
        if baseline is None:
            verdicts.append(own)
            continue
        if name == baseline:
            own.decision, own.baseline = "baseline", baseline
            verdicts.append(own)
            continue
        regressions = sorted((d for d in report.regressions if d.model == name),
                             key=lambda d: d.p_adjusted if d.p_adjusted is not None else 1.0)
        subsets = subset_deltas_of(report, name)
        judged = {(d.probe_id, d.metric) for r in report.results_for(name)  # named among the flagged, not here
                  for deltas in _tested_subsets(r, subsets).values() for d in deltas}
        unconfirmed = [_delta_text(d) for d in report.unconfirmed
                       if d.model == name and (d.probe_id, d.metric) not in judged]
        improved = [_delta_text(d) for d in report.paired if d.model == name and d.improvement and not d.counted_in]
        critical = alerts([r for r in report.probes if r.model == name])
        reasons = list(critical)
        if regressions:
            shown = _listed([_delta_text(d) for d in regressions], 4)
            reasons.append(f"{len(regressions)} significant regression(s) against {baseline} ({shown})"
                           if report.gate.get("significance") else
                           f"{len(regressions)} regression(s) against {baseline} ({shown})")
        if own.decision == "do not ship":
            reasons += [r for r in own.reasons if r not in critical]
        test = "no significant regression" if report.gate.get("significance") else "no regression past the tolerance"
        if reasons:
            verdicts.append(Verdict(name, "do not ship", reasons, own.warnings, baseline, unconfirmed=unconfirmed,
                                    shared=own.shared, inconclusive=own.inconclusive, not_worse=own.not_worse,
                                    improved=improved))
        elif own.decision == "no decision":
            verdicts.append(Verdict(name, "no decision", own.reasons, own.warnings, baseline))
        else:
            verdicts.append(Verdict(name, "may replace", [], own.warnings, baseline, own.closest, own.not_gated,
                                    unconfirmed, own.shared, test, own.left_out, own.inconclusive, own.not_worse,
                                    improved))
    return verdicts
