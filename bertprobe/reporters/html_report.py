"""Reporter ``html``: a self-contained report.html (no scripts, no external assets).

Figures are drawn from the specs probes put in ``details["figures"]`` (see ``bertprobe.results.figures``) as
inline SVG by matplotlib on the Agg backend (``drawing``); findings that carry
``extra = {"tokens": [...], "matrix": [[...]]}`` (attention maps) are drawn as heatmaps too, each with
its colour bar; a figure of kind ``table`` is an HTML table. Spans a finding marks (``extra["marks"]``: a QA
answer in its context) are <mark>ed, one colour per label. With several models, each probe gets side-by-side bars of its quality metrics.
"""

from __future__ import annotations

import hashlib
import html
import json
from pathlib import Path
from typing import Any

from tabulate import tabulate

from bertprobe.hookmarkers import hookimpl
from bertprobe.reporters.drawing import render_svg  # matplotlib itself loads on the first figure
from bertprobe.reporters.summary import (
    AGREEMENT_HEADERS,
    METRIC_HEADERS,
    MODEL_HEADERS,
    PAIRED_HEADERS,
    REGRESSION_HEADERS,
    agreement_rows,
    decision_lines,
    finding_marks,
    fmt,
    header_rows,
    mark_labels,
    mark_segments,
    metric_rows,
    model_notes,
    model_rows,
    multi_model,
    not_gated_headers,
    not_gated_rows,
    note,
    paired_rows,
    regression_rows,
    score_text,
    side_by_side,
)
from bertprobe.results import RunReport
from bertprobe.results.figures import TABLE, figure_specs, with_thresholds
from bertprobe.results.report import score_header

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:72em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}
.passed{color:#176f2c}.measured{color:#1a4f8b}.interrupted{color:#b06000}.failed{color:#b00020}.error{color:#b00020}.skipped{color:#666}
.heat td{min-width:.8em;text-align:center;font-size:.75em;border:none;padding:.1em .25em}
figure{margin:.5em 0;max-width:100%}.paper{font-style:italic;color:#444}
.badge{font-size:.7em;padding:.1em .5em;border-radius:.6em;color:#fff;background:#666;vertical-align:middle}
.badge.passed{background:#176f2c}.badge.failed,.badge.error{background:#b00020}.badge.measured{background:#1a4f8b}
.badge.interrupted{background:#b06000}
.banner{padding:.6em 1em;border-radius:.4em;margin:.5em 0 1em;font-size:1.1em;border-left:.5em solid}
.banner.go{background:#e6f4ea;border-color:#176f2c}.banner.stop{background:#fdecea;border-color:#b00020}
.banner.open{background:#eef1f5;border-color:#666}.banner p{margin:.2em 0}.banner .warn{font-size:.85em;color:#7a4b00}.toc li{margin:.2em 0}td{vertical-align:top}figure svg{max-width:100%;height:auto}.note{color:#666;font-size:.9em}
mark.m0{background:#fde68a}mark.m1{background:#bfdbfe}mark.m0.m1{background:#bbf7d0}mark.m2{background:#fbcfe8}mark.m3{background:#ddd6fe}
"""


def _figure(spec: dict[str, Any], cache: dict[str, str] | None = None) -> str:
    """One figure as inline SVG, or a one-line note when the spec cannot be drawn.

    ``cache`` (the reporter's, per run) keeps drawn figures: the report is rewritten after every probe,
    and earlier probes' figures are not drawn again.
    """
    if spec.get("kind") == TABLE:
        return _table_figure(spec)
    key = hashlib.sha1(json.dumps(spec, sort_keys=True, default=str).encode("utf-8")).hexdigest()
    if cache is not None and key in cache:
        return cache[key]
    try:
        out = f"<figure>{render_svg(spec)}</figure>"
        if cache is not None:
            cache[key] = out
        return out
    except Exception as exc:  # a plugin's malformed spec must not break the report
        return f"<p class='note'>figure {html.escape(str(spec.get('title', '')))!s} could not be drawn: {html.escape(str(exc))}</p>"


def _side_by_side_figure(report: RunReport, probe_id: str, cache: dict[str, str] | None = None) -> str:
    names = report.model_names
    results = [report.result(n, probe_id) for n in names]
    present = [(n, r) for n, r in zip(names, results) if r is not None and r.status not in ("skipped", "error")]
    if len(present) < 2:
        return ""
    metrics = [m for m, info in present[0][1].metrics.items() if info.gated and all(m in r.metrics for _, r in present)]
    if not metrics:
        return ""
    spec = {"kind": "bars", "title": f"{probe_id}: quality metrics side by side",
            "data": {"labels": metrics, "series": [{"name": n, "values": [r.value(m) for m in metrics]} for n, r in present]}}
    return _figure(spec, cache)


def _contents(report: RunReport) -> str:
    """The table of contents: each probe (and model) with its status badge and its key numbers."""
    multi = multi_model(report)
    items = []
    for number, r in enumerate(report.probes):
        title = (r.id or r.probe) + (f" on {r.model}" if multi else "")
        items.append(f"<li><a href='#p{number}'>{html.escape(title)}</a> <span class='badge {r.status}'>{r.status}"
                     f"</span> {html.escape(note(r))}</li>")
    return "<ol class='toc'>" + "".join(items) + "</ol>"


FINDING_COLUMNS = (("finding", "title"), ("input", "input"), ("perturbed", "perturbed"), ("expected", "expected"),
                   ("observed", "observed"), ("score", "score"))


def _cell(text: Any, highlight: list[str]) -> str:
    """One escaped cell; ``highlight`` substrings (a trigger, an inserted token) are marked; arrows never wrap."""
    out = html.escape("" if text is None else str(text))
    for part in highlight:
        if part:
            out = out.replace(html.escape(part), f"<mark>{html.escape(part)}</mark>")
    return out.replace(" -&gt; ", "&nbsp;&rarr;&nbsp;")


def _findings_table(result: Any) -> str:
    """Findings with only the columns that hold something (no empty input/perturbed columns), plus the
    columns a probe gives its findings in ``extra["columns"]`` (a cue's statistics, each ARCT warrant); text
    from the data and the model is escaped, and a finding's ``extra["highlight"]`` is marked in its cells."""
    columns = [(h, a) for h, a in FINDING_COLUMNS if any(getattr(f, a) not in (None, "") for f in result.findings)]
    extra = list(dict.fromkeys(k for f in result.findings for k in (f.extra.get("columns") or {})))
    head = "".join(f"<th>{html.escape(score_header(result.findings)) if a == 'score' else h}</th>" for h, a in columns) + "".join(f"<th>{html.escape(str(k))}</th>" for k in extra)
    rows = []
    labels = mark_labels(result.findings)
    for f in result.findings:
        marks = [str(m) for m in (f.extra.get("highlight") or [])]
        cells = "".join(f"<td>{fmt(f.score) if a == 'score' else _marked(f, a, getattr(f, a), marks, labels)}</td>"
                        for _, a in columns)
        own = f.extra.get("columns") or {}
        cells += "".join(f"<td>{_marked(f, k, fmt(own.get(k)) if k in own else '', marks, labels)}</td>" for k in extra)
        rows.append(f"<tr>{cells}</tr>")
    legend = ("<p class='note'>marked: " + " ".join(f"<mark class='m{k % 4}'>{html.escape(label)}</mark>"
                                                    for k, label in enumerate(labels)) + "</p>") if labels else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>{legend}"


def _marked(finding: Any, cell: str, text: Any, highlight: list[str], labels: list[str]) -> str:
    """A finding's cell with its marked spans (``extra["marks"]``) as <mark>s, one class per label (a piece
    under two marks carries both); a cell without marks goes through ``_cell``."""
    marks = finding_marks(finding, cell, text) if isinstance(text, str) else []
    if not marks:
        return _cell(text, highlight)
    out = []
    for piece, on in mark_segments(text, marks):
        if not on:
            out.append(html.escape(piece))
            continue
        classes = " ".join(f"m{(labels.index(x) if x in labels else 0) % 4}" for x in on)
        out.append(f"<mark class='{classes}' title='{html.escape(', '.join(on))}'>{html.escape(piece)}</mark>")
    return "".join(out)


def _table_figure(spec: dict[str, Any]) -> str:
    """A figure of kind ``table`` ({columns, rows}) as an HTML table under its title (nothing to draw)."""
    data = spec.get("data") or {}
    rows = [[fmt(c) for c in row] for row in data.get("rows") or []]
    title = f"<p><b>{html.escape(str(spec.get('title', '')))}</b></p>" if spec.get("title") else ""
    return title + tabulate(rows, headers=[str(c) for c in data.get("columns") or []], tablefmt="html")


def _collapsible(table: str, rows: int, open_up_to: int = 10) -> str:
    """Long tables fold under <details>."""
    if rows <= open_up_to:
        return table
    return f"<details><summary>{rows} rows</summary>{table}</details>"


def _banner(report: RunReport) -> str:
    """The verdict at the top: one line per model (ship, do not ship and why, may replace), its warnings,
    coloured by the most serious decision; the evidence is the regressions table and the probe sections below."""
    esc = html.escape
    decisions = decision_lines(report)
    tone = ("stop" if any(v.blocking for v, _ in decisions) else  # grey: undecided, or may replace below the bar
            "open" if any(v.decision == "no decision" or v.below_bar for v, _ in decisions) else "go")
    lines = "".join(f"<p><b>Decision: {esc(line)}</b></p>" for _, line in decisions)
    warnings = "".join(f"<p class='warn'>warning{f' ({esc(v.model)})' if len(decisions) > 1 else ''}: {esc(w)}</p>"
                       for v, _ in decisions for w in v.warnings)
    return f"<div class='banner {tone}' id='decision'>{lines}{warnings}</div>"


def render_html(report: RunReport, cache: dict[str, str] | None = None) -> str:
    esc = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>bertprobe: {esc(report.suite)}</title><style>{STYLE}</style></head><body>",
        f"<h1>bertprobe report: {esc(report.suite)}</h1>",
        _banner(report),
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
        if report.unconfirmed:
            parts += ["<p>Past the tolerance but not significant (listed, never gating):</p>",
                      tabulate(regression_rows(report, unconfirmed=True), headers=REGRESSION_HEADERS, tablefmt="html")]
        if report.paired:
            parts += [f"<h2>Paired differences against {esc(str(report.gate.get('baseline')))}</h2>",
                      "<p>Each candidate's change with a 95% paired bootstrap interval over the same examples:</p>",
                      tabulate(paired_rows(report), headers=PAIRED_HEADERS, tablefmt="html")]
        if report.agreement:
            parts += [f"<h2>Predictions changed against {esc(str(report.gate.get('baseline')))}</h2>",
                      "<p>How often each candidate predicts what the baseline predicts, and the examples that changed "
                      "(a class, a label set, an answer, a sentence's entities or a query's top 10, with the share of "
                      "its documents both retrieve; listed, never gating):</p>",
                      tabulate(agreement_rows(report.agreement), headers=AGREEMENT_HEADERS, tablefmt="html")]
    if multi_model(report):
        headers, rows = side_by_side(report)
        parts += ["<h2>Metrics side by side</h2>", tabulate(rows, headers=headers, tablefmt="html")]
    ungated = not_gated_rows(report)
    if ungated:
        parts += ["<h2>Measured, not gated</h2>", "<p>Key metrics that no expectation judged: read them before you sign off.</p>",
                  tabulate(ungated, headers=not_gated_headers(report), tablefmt="html")]
    parts += ["<h2>Contents</h2>", _contents(report)]
    multi = multi_model(report)
    if multi:
        for pid in dict.fromkeys(r.id or r.probe for r in report.probes):
            parts.append(_side_by_side_figure(report, pid, cache))
    for number, result in enumerate(report.probes):
        title = (result.id or result.probe) + (f" on {result.model}" if multi else "")
        parts.append(f"<h2 id='p{number}'>{esc(title)} <span class='badge {result.status}'>{result.status}</span></h2>")
        if result.details.get("paper"):
            parts.append(f"<p class='paper'>{esc(str(result.details['paper']))}</p>")
        if result.message:
            parts.append(f"<p>{esc(result.message)}</p>")
        summary = result.details.get("summary") or {}
        if summary:
            parts.append(tabulate([[k, str(v)] for k, v in summary.items()], tablefmt="html"))
        if result.metrics or result.expectations:
            parts.append(tabulate(metric_rows(result), headers=METRIC_HEADERS, tablefmt="html"))
        for spec in figure_specs(result.details):
            parts.append(_figure(with_thresholds(spec, result.expectations), cache))
        if result.findings:
            parts.append(f"<h3>Findings ({len(result.findings)})</h3>")
            parts.append(_collapsible(_findings_table(result), len(result.findings)))
            for f in result.findings:  # findings that carry a map (tokens x tokens) are drawn
                if f.extra.get("matrix") and f.extra.get("tokens"):
                    tokens = f.extra["tokens"]
                    parts.append(_figure({"kind": "heatmap", "title": f.title, "colorbar": "attention",
                                          "data": {"matrix": f.extra["matrix"], "rows": tokens, "cols": tokens},
                                          "axes": {"x": "attended token", "y": "query token"}}, cache))
    parts.append("</body></html>")
    return "\n".join(parts)


class HtmlReporter:
    name = "html"
    filename = "report.html"

    def __init__(self) -> None:
        self._figures: dict[str, str] = {}  # drawn figures of this plugin manager's runs

    def write(self, report: RunReport, run_dir: Path) -> Path:
        path = run_dir / self.filename
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(render_html(report, self._figures), encoding="utf-8")
        tmp.replace(path)
        return path


@hookimpl
def bertprobe_register_reporters(registry: Any) -> None:
    registry.add(HtmlReporter())
