"""Failure rates per test and capability, the run's summary and its figure: shared by the behaviour probe's own
code (``classes.py``) and its sections (``labelsets.py``, ``entities.py``, ``answers.py``, ``retrieval.py``)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from bertprobe.results import Finding, ProbeResult
from bertprobe.results.outcomes import Outcomes
from bertprobe.stats import clustered, clustered_wilson
from bertprobe.tasks.qa_clusters import cluster_keys, interval_over


def slug(name: str) -> str:
    """A metric-name part for a test or capability: lowercase words joined by underscores."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "test"


def case_ids(cases: Sequence[Any]) -> list[str]:
    """Ids unique within a test: the case's own id, numbered where two share one."""
    seen: dict[str, int] = {}
    out = []
    for i, case in enumerate(cases):
        base = case.id or str(i)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.append(base if n == 0 else f"{base}#{n}")
    return out


def failure_rates(result: ProbeResult, cases: Sequence[Any], passed: Sequence[bool], finding: Callable[[int], Finding],
                  findings: int, clusters: Sequence[str] | None = None) -> tuple[list[dict[str, Any]], int]:
    """Per test: a ``failed.<test>`` outcome per case and ``failure_rate.test.<test>`` (Wilson interval), the
    first ``findings`` failures as findings; per capability and over all: the failure rate. ``clusters`` (one key
    per case: a reader's cases by context) makes each interval one over clusters where two cases share one
    (``stats.clustered_wilson``: Wilson's on the cases' effective sample size over their contexts) and gives
    each outcome its cluster's key; each such description names the interval (``qa_clusters.interval_over``).
    Returns the rows of the tests table and the number of failed cases."""
    def rate(idx: list[int]) -> tuple[tuple[float, float], str]:
        hits = [0.0 if passed[i] else 1.0 for i in idx]
        groups = [clusters[i] for i in idx] if clusters is not None else None
        over = f" ({interval_over(hits, groups, unit='cases')})" if clustered(groups) else ""
        return clustered_wilson(hits, groups, 0.95), over

    by_test: dict[str, list[int]] = defaultdict(list)
    for i, case in enumerate(cases):
        by_test[case.test].append(i)
    tests, by_capability = [], defaultdict(list)
    total_failed = 0
    for test, idx in by_test.items():
        first = cases[idx[0]]
        failed = [i for i in idx if not passed[i]]
        total_failed += len(failed)
        interval, over = rate(idx)
        key = slug(test)
        keys = cluster_keys([clusters[i] for i in idx]) if clusters is not None else None
        result.outcomes.append(Outcomes.from_values(f"failed.{key}", case_ids([cases[i] for i in idx]),
                                                    [0 if passed[i] else 1 for i in idx], groups=keys))
        result.add_metric(f"failure_rate.test.{key}", len(failed) / len(idx), False,
                          f"share of failed cases of test '{test}'{over}", ci=interval, outcome=f"failed.{key}",
                          cases=len(idx))
        capability = first.capability or "other"
        by_capability[capability] += idx
        tests.append({"test": test, "type": first.type, "capability": capability, "cases": len(idx),
                      "failed": len(failed), "failure_rate": round(len(failed) / len(idx), 4),
                      "interval": [round(interval[0], 4), round(interval[1], 4)],
                      "source": first.source if not first.source.endswith(".jsonl") else f"cases {first.source}"})
        for i in failed[:findings]:
            result.findings.append(finding(i))
    for capability, idx in sorted(by_capability.items()):
        interval, over = rate(idx)
        result.add_metric(f"failure_rate.capability.{slug(capability)}", sum(not passed[i] for i in idx) / len(idx),
                          False, f"share of failed cases of the '{capability}' tests{over}", ci=interval, cases=len(idx))
    interval, over = rate(list(range(len(cases))))
    result.add_metric("failure_rate", total_failed / len(cases), False, f"share of failed cases over all tests{over}",
                      ci=interval)
    return tests, total_failed


def summarise(result: ProbeResult, tests: list[dict[str, Any]], n_cases: int, total_failed: int, predicted: int,
              fairness: str | None) -> None:
    """The counts, the summary lines, the key finding and the figure (``fairness``: the largest gap, said in
    words; "" when every group scored alike; None when no test had groups)."""
    result.add_metric("tests", len(tests), None, "tests run", kind="count")
    result.add_metric("cases", n_cases, None, "cases run", kind="count")
    result.add_metric("failed_cases", total_failed, None, "cases failed", kind="count")
    result.add_metric("predicted_texts", predicted, None, "distinct texts predicted (each once)", kind="count")
    tests.sort(key=lambda t: (t["capability"], t["test"]))
    result.details["tests"] = tests
    worst = max(tests, key=lambda t: (t["failure_rate"], t["cases"]))
    result.details["summary"] = {
        "tests": f"{len(tests)} tests, {n_cases} cases, {total_failed} failed ({total_failed / n_cases:.1%})",
        "worst test": f"{worst['test']}: {worst['failed']}/{worst['cases']} failed ({worst['failure_rate']:.1%})"}
    line = f"worst test: {worst['test']} ({worst['failed']}/{worst['cases']} failed)" if worst["failed"] else "no case failed"
    if fairness is not None:
        result.details["summary"]["largest fairness gap"] = fairness or "none: every group of every test scored alike"
        if fairness:
            line += f"; largest fairness gap: {fairness}"
    result.details["figures"] = [{
        "kind": "bars", "title": "failure rate per test (95% Wilson interval), grouped by capability",
        "metrics": ["failure_rate", "failure_rate.*"],
        "data": {"labels": [f"{t['capability']}: {t['test']}" for t in tests],
                 "series": [{"name": "failure rate", "values": [t["failure_rate"] for t in tests],
                             "errors": [t["interval"] for t in tests]}]},
        "axes": {"y": "failure rate"}}]
    result.details["key_finding"] = line


def add_origin_gaps(result: ProbeResult, fairness: dict[str, dict[str, Any]], score: str, metric: str,
                    what: Any, named: Any) -> str | None:
    """The fairness metrics of readers and taggers alike: per test, ``<metric>.<test>.<group>`` (the group's
    ``score``, with its interval) and ``fairness_gap.<test>``, then ``max_fairness_gap`` and the worst test's line
    (None without fairness tests). ``fairness``: per test, the gaps of its origin groups (``score`` per group,
    ``intervals``, ``gap``, ``interval``, ``higher``, ``lower``); ``what(gaps, test, group)`` describes a group's score
    (``group`` None: the gap), ``named(gaps)`` names the score in the worst test's line."""
    for test, gaps in fairness.items():
        for group, value in gaps[score].items():
            interval = gaps["intervals"].get(group)
            result.add_metric(f"{metric}.{slug(test)}.{slug(group)}", value, True, what(gaps, test, group),
                              ci=tuple(interval) if interval else None)
        result.add_metric(f"fairness_gap.{slug(test)}", gaps["gap"], False, what(gaps, test, None),
                          ci=tuple(gaps["interval"]) if gaps["interval"] else None, cases=gaps.get("cases"))
    if not fairness:
        return None
    name, worst = max(fairness.items(), key=lambda kv: kv[1]["gap"])
    result.add_metric("max_fairness_gap", worst["gap"], False, f"largest fairness gap (test '{name}')", kind="extreme")
    result.details["fairness"] = fairness
    return (f"{name}: {named(worst)} '{worst['higher']}' {worst[score][worst['higher']]:.3f} against '{worst['lower']}' "
            f"{worst[score][worst['lower']]:.3f}" if worst["gap"] > 0 else "")
