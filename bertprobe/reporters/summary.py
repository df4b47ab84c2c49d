"""Tables shared by the Markdown, HTML and terminal summaries."""

from __future__ import annotations

from typing import Any

from bertprobe.results import ProbeResult, RunReport


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def score_text(report: RunReport) -> str:
    score = report.score()
    return "n/a (no expectations checked)" if score is None else f"{score * 100:.0f}%"


def overview_rows(report: RunReport) -> list[list[str]]:
    """One row per probe: id, status, expectations held, duration, message."""
    rows = []
    for r in report.probes:
        held = sum(1 for e in r.expectations if e.passed)
        rows.append(
            [r.id or r.probe, r.status.upper(), f"{held}/{len(r.expectations)}", f"{r.duration_s:.1f}s", r.message]
        )
    return rows


OVERVIEW_HEADERS = ["probe", "status", "expectations", "time", "note"]
METRIC_HEADERS = ["metric", "value", "95% CI", "expected", "ok"]


def metric_rows(result: ProbeResult) -> list[list[str]]:
    expectations = {e.metric: e for e in result.expectations}
    rows = []
    for name, metric in result.metrics.items():
        exp = expectations.pop(name, None)
        ci = f"[{metric.ci[0]:.4g}, {metric.ci[1]:.4g}]" if metric.ci else ""
        rows.append(
            [name, fmt(metric.value), ci, exp.describe() if exp else "", "" if exp is None else ("yes" if exp.passed else "NO")]
        )
    for exp in expectations.values():  # expected but never produced
        rows.append([exp.metric, "missing", "", exp.describe(), "NO"])
    return rows


def header_rows(report: RunReport) -> list[list[str]]:
    versions = ", ".join(f"{k} {v}" for k, v in report.versions.items())
    return [
        ["suite", report.suite],
        ["model", report.model],
        ["data", report.data],
        ["device / dtype", f"{report.device} / {report.dtype}"],
        ["seed", fmt(report.seed)],
        ["started (UTC)", report.started_at],
        ["status", report.status + (f" ({report.message})" if report.message else "")],
        ["versions", versions],
    ]
