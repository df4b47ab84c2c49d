"""Reporter ``markdown``: report.md with an overall score and one table per probe."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tabulate import tabulate

from bertprobe.hookspecs import hookimpl
from bertprobe.reporters.summary import (
    METRIC_HEADERS,
    OVERVIEW_HEADERS,
    fmt,
    header_rows,
    metric_rows,
    overview_rows,
    score_text,
)
from bertprobe.results import RunReport


def render_markdown(report: RunReport) -> str:
    counts = report.counts()
    lines = [
        f"# bertprobe report: {report.suite}",
        "",
        f"**Overall score: {score_text(report)}** of expectations held "
        f"({counts['passed']} passed, {counts['failed']} failed, {counts['error']} error, {counts['skipped']} skipped)",
        "",
        tabulate(header_rows(report), tablefmt="github", headers=["", ""]),
        "",
        "## Probes",
        "",
        tabulate(overview_rows(report), headers=OVERVIEW_HEADERS, tablefmt="github"),
    ]
    for result in report.probes:
        lines += ["", f"## {result.id or result.probe} ({result.status})", ""]
        if result.message:
            lines += [f"> {result.message}", ""]
        summary = result.details.get("summary") or {}
        if summary:
            lines += [tabulate([[k, _clip(str(v))] for k, v in summary.items()], tablefmt="github", headers=["", ""]), ""]
        if result.metrics or result.expectations:
            lines.append(tabulate(metric_rows(result), headers=METRIC_HEADERS, tablefmt="github"))
        if result.findings:
            lines += ["", f"### Findings ({len(result.findings)})", ""]
            rows = [
                [f.title, _clip(f.input), _clip(f.perturbed), fmt(f.expected), fmt(f.observed), fmt(f.score)]
                for f in result.findings[:20]
            ]
            lines.append(
                tabulate(rows, headers=["finding", "input", "perturbed", "expected", "observed", "score"], tablefmt="github")
            )
    return "\n".join(lines) + "\n"


def _clip(text: str | None, width: int = 90) -> str:
    if not text:
        return ""
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


class MarkdownReporter:
    name = "markdown"
    filename = "report.md"

    def write(self, report: RunReport, run_dir: Path) -> Path:
        path = run_dir / self.filename
        path.write_text(render_markdown(report), encoding="utf-8")
        return path


@hookimpl
def bertprobe_register_reporters(registry: Any) -> None:
    registry.add(MarkdownReporter())
