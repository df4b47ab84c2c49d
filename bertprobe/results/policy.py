"""The gating policy: which bounds a result is judged against, and what stays measured but not gated.

A probe declares default expectations for its key metrics (``Probe.defaults``); a suite's own ``expect:``
replaces a default metric by metric, and ``expect: {METRIC: off}`` turns one off. Patterns (fnmatch) expand
over the metrics the result holds, so ``failure_rate.capability.*`` gates every capability the run measured.
Whatever key metric ends up without a bound is listed as *measured, not gated*, with the reason, so no
finding goes silently ungated.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

from bertprobe.results import DefaultExpectation, Expectation, ProbeResult


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _is_pattern(metric: str) -> bool:
    return any(c in metric for c in "*?[")


def resolve_expectations(result: ProbeResult, own: Iterable[Expectation], off: Iterable[str],
                         defaults: Iterable[DefaultExpectation]) -> list[Expectation]:
    """The expectations ``result`` is judged against: the suite's own (a pattern expanded over the result's
    metrics; one that matches none stays, to fail as missing), then each default for a metric the suite
    neither set nor turned off."""
    names = list(result.metrics)
    off = tuple(off)
    out: list[Expectation] = []
    covered: set[str] = set()
    for e in own:
        matched = [n for n in names if fnmatch.fnmatchcase(n, e.metric)] if _is_pattern(e.metric) else [e.metric]
        for name in matched or [e.metric]:
            if name not in covered:
                out.append(Expectation(name, e.min, e.max, interval=e.interval))
                covered.add(name)
    for d in defaults:
        for name in names:
            if name in covered or _matches(name, off) or not fnmatch.fnmatchcase(name, d.metric):
                continue
            if result.metrics[name].value is None:
                continue
            out.append(Expectation(name, d.min, d.max, interval=d.interval, source="default", why=d.why))
            covered.add(name)
    return out


def not_gated(result: ProbeResult, key_patterns: Iterable[str], off: Iterable[str]) -> list[dict[str, object]]:
    """Key metrics of ``result`` that no expectation judges: ``{metric, value, why}`` each."""
    judged = {e.metric for e in result.expectations}
    off = tuple(off)
    rows = []
    for name, metric in result.metrics.items():
        if name in judged or metric.value is None or not _matches(name, key_patterns):
            continue
        turned_off = _matches(name, off)
        why = "its default was turned off by the suite" if turned_off else "no default bound (descriptive)"
        rows.append({"metric": name, "value": metric.value, "why": why, "off": turned_off})
    return rows


def judge(result: ProbeResult, own: Iterable[Expectation], off: Iterable[str] = (),
          defaults: Iterable[DefaultExpectation] = (), key_patterns: Iterable[str] = ()) -> None:
    """Set ``result.expectations`` and its status: passed or failed when anything judged it, measured when
    nothing did; skipped, errored and interrupted results keep their status (and the suite's own
    expectations, which count as failing for an error). Key metrics left unjudged go to
    ``details["not_gated"]``."""
    if result.status in ("skipped", "error", "interrupted"):
        result.expectations = [Expectation(e.metric, e.min, e.max, interval=e.interval) for e in own]
        return
    result.expectations = resolve_expectations(result, own, off, defaults)
    unjudged = not_gated(result, key_patterns, off)
    if unjudged:
        result.details["not_gated"] = unjudged
    if not result.expectations:  # measured, not judged: no expectation to hold or fail
        result.status = "measured"
        return
    ok = []
    for e in result.expectations:
        metric = result.metrics.get(e.metric)
        held = e.check(result.value(e.metric), metric.ci if metric is not None else None)
        e.cases = metric.cases if metric is not None else None
        # a miss on fewer than MIN_CASES cases is too few to decide: named, never failing the probe alone
        e.inconclusive = not held and e.cases is not None and e.cases < MIN_CASES
        ok.append(held or e.inconclusive)
    result.status = "passed" if all(ok) else "failed"


MIN_CASES = 10  # a bound missed on fewer cases decides nothing alone: a rate from 9 cases has a 95% interval ~0.6 wide

__all__ = ["MIN_CASES", "judge", "not_gated", "resolve_expectations"]
