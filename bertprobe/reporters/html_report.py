"""Reporter ``html``: a self-contained report.html (no scripts, no external assets).

Probes may put heatmaps in ``details["heatmaps"]`` as ``{title: {"matrix": [[...]], "rows": [...],
"cols": [...]}}``, and findings may carry ``extra = {"tokens": [...], "matrix": [[...]]}``; both are
drawn as shaded tables (head-importance maps, attention maps).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from tabulate import tabulate

from bertprobe.hookspecs import hookimpl
from bertprobe.reporters.summary import (
    METRIC_HEADERS,
    MODEL_HEADERS,
    REGRESSION_HEADERS,
    fmt,
    header_rows,
    metric_rows,
    model_notes,
    model_rows,
    multi_model,
    overview_headers,
    overview_rows,
    regression_rows,
    score_text,
    side_by_side,
)
from bertprobe.results import RunReport

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:72em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}
.passed{color:#176f2c}.measured{color:#1a4f8b}.interrupted{color:#b06000}.failed{color:#b00020}.error{color:#b00020}.skipped{color:#666}
.heat td{min-width:.8em;text-align:center;font-size:.75em;border:none;padding:.1em .25em}
"""


def _heatmap(title: str, spec: dict[str, Any]) -> str:
    matrix = spec.get("matrix") or []
    flat = [v for row in matrix for v in row if isinstance(v, (int, float))]
    if not flat:
        return ""
    lo, hi = min(flat), max(flat)
    span = (hi - lo) or 1.0
    rows = spec.get("rows") or [str(i) for i in range(len(matrix))]
    cols = spec.get("cols") or [str(j) for j in range(len(matrix[0]))]
    out = [f"<h4>{html.escape(title)}</h4><table class='heat'><tr><td></td>"]
    out += [f"<td>{html.escape(str(c))}</td>" for c in cols]
    out.append("</tr>")
    show_numbers = len(cols) <= 24  # big matrices (head x head) are drawn as colour only; values in tooltips
    for label, row in zip(rows, matrix):
        out.append(f"<tr><td>{html.escape(str(label))}</td>")
        for v in row:
            number = isinstance(v, (int, float))
            shade = int(255 - 200 * ((v - lo) / span)) if number else 255
            text = (f"{v:.2f}".replace("-0.00", "0.00") if number else "") if show_numbers else ""
            ink = "#fff" if shade < 120 else "#000"
            out.append(f"<td style='background:rgb({shade},{shade},255);color:{ink}' title='{fmt(v)}'>{text}</td>")
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def render_html(report: RunReport) -> str:
    esc = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>bertprobe: {esc(report.suite)}</title><style>{STYLE}</style></head><body>",
        f"<h1>bertprobe report: {esc(report.suite)}</h1>",
        f"<p><b>{esc(score_text(report))}</b></p>",
        tabulate(header_rows(report), tablefmt="html"),
    ]
    if report.models:
        parts += ["<h2>Models</h2>", tabulate(model_rows(report), headers=MODEL_HEADERS, tablefmt="html")]
        if model_notes(report):
            parts.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in model_notes(report)) + "</ul>")
    if report.gate:
        parts.append(f"<h2>Regressions against {esc(str(report.gate.get('baseline')))}</h2>")
        parts.append(tabulate(regression_rows(report), headers=REGRESSION_HEADERS, tablefmt="html")
                     if report.regressions else "<p>None.</p>")
    if multi_model(report):
        headers, rows = side_by_side(report)
        parts += ["<h2>Metrics side by side</h2>", tabulate(rows, headers=headers, tablefmt="html")]
    parts += ["<h2>Probes</h2>", tabulate(overview_rows(report), headers=overview_headers(report), tablefmt="html")]
    multi = multi_model(report)
    for result in report.probes:
        title = (result.id or result.probe) + (f" on {result.model}" if multi else "")
        parts.append(f"<h2 class='{result.status}'>{esc(title)}: {result.status}</h2>")
        if result.message:
            parts.append(f"<p>{esc(result.message)}</p>")
        summary = result.details.get("summary") or {}
        if summary:
            parts.append(tabulate([[k, str(v)] for k, v in summary.items()], tablefmt="html"))
        if result.metrics or result.expectations:
            parts.append(tabulate(metric_rows(result), headers=METRIC_HEADERS, tablefmt="html"))
        for title, spec in (result.details.get("heatmaps") or {}).items():
            parts.append(_heatmap(title, spec))
        if result.findings:
            rows = [[f.title, f.input or "", f.perturbed or "", fmt(f.expected), fmt(f.observed), fmt(f.score)] for f in result.findings]
            parts.append(f"<h3>Findings ({len(rows)})</h3>")
            parts.append(tabulate(rows, headers=["finding", "input", "perturbed", "expected", "observed", "score"], tablefmt="html"))
            for f in result.findings:  # findings that carry a map (tokens x tokens) are drawn
                if f.extra.get("matrix") and f.extra.get("tokens"):
                    tokens = f.extra["tokens"]
                    parts.append(_heatmap(f.title, {"matrix": f.extra["matrix"], "rows": tokens, "cols": tokens}))
    parts.append("</body></html>")
    return "\n".join(parts)


class HtmlReporter:
    name = "html"
    filename = "report.html"

    def write(self, report: RunReport, run_dir: Path) -> Path:
        path = run_dir / self.filename
        path.write_text(render_html(report), encoding="utf-8")
        return path


@hookimpl
def bertprobe_register_reporters(registry: Any) -> None:
    registry.add(HtmlReporter())
