"""Reporter ``markdown``: report.md with an overall score and one table per probe."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tabulate import tabulate

from bertprobe.hookmarkers import hookimpl
from bertprobe.reporters.summary import (
    AGREEMENT_HEADERS,
    METRIC_HEADERS,
    MODEL_HEADERS,
    PAIRED_HEADERS,
    REGRESSION_HEADERS,
    agreement_rows,
    bracketed_marks,
    clip,
    decision_lines,
    finding_marks,
    fmt,
    header_rows,
    mark_labels,
    marks_legend,
    md_cell,
    metric_rows,
    model_notes,
    model_rows,
    multi_model,
    not_gated_headers,
    not_gated_rows,
    overview_headers,
    overview_rows,
    paired_rows,
    regression_rows,
    score_text,
    side_by_side,
)
from bertprobe.results import RunReport
from bertprobe.results.figures import figure_table
from bertprobe.results.report import score_header


def _table(rows: list[list[str]], headers: list[str]) -> str:
    """A GitHub table whose every cell went through the one Markdown escaper."""
    return tabulate([[md_cell(c) for c in row] for row in rows], headers=[md_cell(h) for h in headers], tablefmt="github")


MAX_FIGURE_ROWS = 20  # a figure with more points, or mostly empty cells, is drawn in report.html only


def _figure_block(spec: Any) -> list[str]:
    """A figure as a short table, or one line pointing at report.html where a table would not read."""
    if isinstance(spec, dict) and spec.get("tabulate") is False:  # another figure of the probe tabulates its data
        return []
    table = figure_table(spec) if isinstance(spec, dict) else None
    if table is None or not table[1]:
        return []
    headers, rows = table
    title = md_cell(spec.get("title", ""))
    cells = [c for row in rows for c in row[1:]]
    if len(rows) > MAX_FIGURE_ROWS or sum(c is None for c in cells) * 2 > len(cells):
        return ["", f"*Figure: {title} ({len(rows)} points): drawn in report.html.*"]
    return ["", f"**{title}**", "", _table([[fmt(c) for c in row] for row in rows], headers)]


def _cell(finding: Any, cell: str, text: Any, width: int | None, labels: list[str]) -> str:
    """A finding's cell: its marks in brackets (whole: the probe cut the excerpt), else clipped to ``width``."""
    marks = finding_marks(finding, cell, text) if isinstance(text, str) else []
    if marks:
        return clip(bracketed_marks(text, marks, labels))
    return clip(text, width) if width else fmt(text)


def render_markdown(report: RunReport) -> str:
    decisions = decision_lines(report)
    lines = [
        f"# bertprobe report: {md_cell(report.suite)}",
        "",
        *[f"> **Decision: {md_cell(line)}**" + ("  " if i < len(decisions) - 1 else "")
          for i, (_, line) in enumerate(decisions)],
        *[f"> - warning{f' ({md_cell(v.model)})' if len(decisions) > 1 else ''}: {md_cell(w)}"
          for v, _ in decisions for w in v.warnings],
        "",
        f"**{score_text(report)}**",
        "",
        _table(header_rows(report), ["", ""]),
    ]
    if report.models:
        lines += ["", "## Models", "", _table(model_rows(report), MODEL_HEADERS)]
        lines += [""] + [f"- {md_cell(n)}" for n in model_notes(report)] if model_notes(report) else []
    if report.gate:
        baseline = report.gate.get("baseline")
        lines += ["", f"## Regressions against {md_cell(baseline)}", ""]
        lines.append(_table(regression_rows(report), REGRESSION_HEADERS) if report.regressions else "None.")
        if report.unconfirmed:
            lines += ["", "Past the tolerance but not significant (listed, never gating):", "",
                      _table(regression_rows(report, unconfirmed=True), REGRESSION_HEADERS)]
        if report.paired:
            lines += ["", f"## Paired differences against {md_cell(baseline)}", "",
                      "Each candidate's change with a 95% paired bootstrap interval over the same examples:", "",
                      _table(paired_rows(report), PAIRED_HEADERS)]
        if report.agreement:
            lines += ["", f"## Predictions changed against {md_cell(baseline)}", "",
                      "How often each candidate predicts what the baseline predicts, and the examples that changed "
                      "(a class, a label set, an answer, a sentence's entities or a query's top 10, with the share of "
                      "its documents both retrieve; listed, never gating):", "",
                      _table(agreement_rows(report.agreement), AGREEMENT_HEADERS)]
    if multi_model(report):
        headers, rows = side_by_side(report)
        lines += ["", "## Metrics side by side", "", _table(rows, headers)]
    lines += ["", "## Probes", "", _table(overview_rows(report), overview_headers(report))]
    ungated = not_gated_rows(report)
    if ungated:
        lines += ["", "## Measured, not gated", "",
                  "Key metrics that no expectation judged: read them before you sign off.", "",
                  _table(ungated, not_gated_headers(report))]
    multi = multi_model(report)
    for result in report.probes:
        title = (result.id or result.probe) + (f" on {result.model}" if multi else "")
        lines += ["", f"## {md_cell(title)} ({result.status})", ""]
        if result.message:
            lines += [f"> {md_cell(result.message)}", ""]
        summary = result.details.get("summary") or {}
        if summary:
            lines += [_table([[k, clip(v, 90)] for k, v in summary.items()], ["", ""]), ""]
        if result.metrics or result.expectations:
            lines.append(_table(metric_rows(result), METRIC_HEADERS))
        for spec in result.details.get("figures") or []:  # short curves and bars as tables; the rest is drawn in report.html
            lines += _figure_block(spec)
        if result.findings:
            lines += ["", f"### Findings ({len(result.findings)})", ""]
            shown = result.findings[:20]
            extra = list(dict.fromkeys(k for f in shown for k in (f.extra.get("columns") or {})))
            labels = mark_labels(shown)
            rows = [
                [f.title, _cell(f, "input", f.input, 90, labels), _cell(f, "perturbed", f.perturbed, 90, labels),
                 _cell(f, "expected", f.expected, None, labels), _cell(f, "observed", f.observed, None, labels),
                 fmt(f.score)]
                + [_cell(f, k, fmt((f.extra.get("columns") or {}).get(k)), 60, labels) for k in extra]
                for f in shown
            ]
            lines.append(_table(rows, ["finding", "input", "perturbed", "expected", "observed", score_header(shown),
                                       *extra]))
            if labels:
                lines += ["", f"*{md_cell(marks_legend(labels))}*"]
    return "\n".join(lines) + "\n"


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
