"""The decision a run states: per model, ship or not and why, from expectations, errors and the gate.

Rules (documented in docs/verdicts.md):

* a **single model** (or each model of a matrix without a gate) is *fit to ship* when every expectation held
  and no probe errored; it is *do not ship* when an expectation failed or a probe errored, with each reason;
  *no decision* when nothing was checked or the run did not complete;
* in a **gated matrix**, the baseline is the model in service; each candidate *may replace* it when no gated
  metric regressed and its own expectations held, else *do not ship* with the regressions first;
* a decision that rests on fewer than ``MIN_EXAMPLES`` examples carries a warning: a proportion from 30
  examples has a 95% interval about +-0.17 wide, too wide to tell 0.85 from 0.95.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from bertprobe.results import ProbeResult, RunReport

MIN_EXAMPLES = 100  # below this a verdict on a proportion is flagged (Wilson 95% half-width about 0.1 at p=0.5)
Decision = Literal["ship", "do not ship", "may replace", "baseline", "no decision"]


@dataclass
class Verdict:
    """One model's decision with its reasons (most serious first) and warnings."""

    model: str
    decision: Decision
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    baseline: str = ""

    @property
    def blocking(self) -> bool:
        return self.decision == "do not ship"

    def headline(self) -> str:
        """'candidate: do not ship: 2 regressions against deployed (...)' in one line."""
        if self.decision == "may replace":
            text = f"may replace {self.baseline}"
        elif self.decision == "baseline":
            text = "baseline (in service): the others are judged against it"
        elif self.decision == "ship":
            text = "fit to ship: every expectation held"
        else:
            text = self.decision
        if self.reasons and self.decision in ("do not ship", "no decision"):
            text += ": " + "; ".join(self.reasons)
        return text

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "headline": self.headline()}


def _examples(result: ProbeResult) -> int | None:
    """The fewest examples any count metric of the result reports (``examples``, ``examples_held_out``...)."""
    counts = [m.value for name, m in result.metrics.items()
              if m.kind == "count" and name.startswith("examples") and m.value is not None]
    return int(min(counts)) if counts else None


def _why(result: ProbeResult) -> str:
    label = result.id or result.probe
    if result.status == "error":
        return f"{label} errored ({result.message.split(';')[0][:120]})"
    failed = [e.shortfall() for e in result.expectations if not e.passed]
    finding = str(result.details.get("key_finding") or "")
    return f"{label}: " + "; ".join(failed + ([finding] if finding else []))


def small_sample_warnings(results: list[ProbeResult]) -> list[str]:
    """One warning per checked result whose expectations rest on fewer than MIN_EXAMPLES examples."""
    out = []
    for r in results:
        n = _examples(r)
        if r.expectations and r.status in ("passed", "failed") and n is not None and n < MIN_EXAMPLES:
            out.append(f"{r.id or r.probe} rests on {n} examples (fewer than {MIN_EXAMPLES}): its numbers are uncertain")
    return out


def _own(report: RunReport, model: str) -> Verdict:
    results = [r for r in report.probes if r.model == model or len(report.model_names) <= 1]
    verdict = Verdict(model, "ship", warnings=small_sample_warnings(results))
    bad = [r for r in results if r.status in ("failed", "error")]
    checked = [r for r in results if r.expectations and r.status in ("passed", "failed")]
    if bad:
        verdict.decision, verdict.reasons = "do not ship", [_why(r) for r in bad]
    elif report.status != "completed":
        verdict.decision, verdict.reasons = "no decision", [f"the run is {report.status}"]
    elif not checked:
        verdict.decision, verdict.reasons = "no decision", ["nothing was checked: no probe has an expectation that ran"]
    skipped = [r.id or r.probe for r in results if r.status == "skipped"]
    if skipped:
        verdict.warnings.append(f"not checked (skipped): {', '.join(skipped)}")
    return verdict


def decide(report: RunReport) -> list[Verdict]:
    """Each model's verdict: the gate's view in a gated matrix, else its own expectations."""
    names = report.model_names or [report.model]
    baseline = report.gate.get("baseline") if report.gate and len(names) > 1 else None
    verdicts = []
    for name in names:
        own = _own(report, name)
        if baseline is None:
            verdicts.append(own)
            continue
        if name == baseline:
            own.decision, own.baseline = "baseline", baseline
            verdicts.append(own)
            continue
        regressions = [d for d in report.regressions if d.model == name]
        reasons = []
        if regressions:
            shown = ", ".join(f"{d.probe_id}.{d.metric} {d.delta:+.3g}" if d.delta is not None else f"{d.probe_id}.{d.metric}"
                              for d in regressions[:4])
            more = f" and {len(regressions) - 4} more" if len(regressions) > 4 else ""
            reasons.append(f"{len(regressions)} regression(s) against {baseline} ({shown}{more})")
        if own.decision == "do not ship":
            reasons += own.reasons
        if reasons:
            verdicts.append(Verdict(name, "do not ship", reasons, own.warnings, baseline))
        elif own.decision == "no decision":
            verdicts.append(Verdict(name, "no decision", own.reasons, own.warnings, baseline))
        else:
            verdicts.append(Verdict(name, "may replace", [], own.warnings, baseline))
    return verdicts
