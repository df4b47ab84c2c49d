"""Tables shared by the Markdown, HTML, JUnit and terminal summaries."""

from __future__ import annotations

from typing import Any

from bertprobe.results import MetricDelta, ModelInfo, ProbeResult, RunReport
from bertprobe.results.outcomes import Agreement, ranking_ids
from bertprobe.results.verdict import Verdict, decide, shortfalls


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def size_text(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def score_text(report: RunReport) -> str:
    """Expectations and probes, each in their own unit: '1 of 2 expectations held (50%); probes: ...'."""
    held, total = report.expectation_counts()
    c = report.counts()
    expectations = (f"{held} of {total} expectations held ({held / total:.0%})" if total
                    else "no expectation was checked")
    probes = [f"{c['passed']} passed", f"{c['failed']} failed", f"{c['error']} errored", f"{c['skipped']} skipped",
              f"{c['measured']} measured"]
    if c.get("interrupted"):
        probes.append(f"{c['interrupted']} interrupted")
    text = f"{expectations}; probes: {', '.join(probes)}"
    if report.gate and len(report.model_names) > 1:
        text += f"; {len(report.regressions)} regression(s) against {report.gate.get('baseline')}"
    return text


def failed_note(result: ProbeResult) -> str:
    """Why a probe failed: its missed expectations with their values, furthest past first (at most
    ``MOST_SHORTFALLS`` and a count of the rest), e.g. 'accuracy_after 0.13 (expected >= 0.5)'."""
    return "; ".join(shortfalls(result))


def key_metric(result: ProbeResult) -> str:
    """The probe's first metric as 'name value': what a measured probe shows in the summary."""
    for name, metric in result.metrics.items():
        if metric.value is not None and metric.kind == "quality":
            return f"{name} {metric.value:.4g}"
    return ""


def note(result: ProbeResult) -> str:
    """The summary's note: the failed expectations, then the probe's own key finding
    (``details["key_finding"]``, one line); a measured or passed probe without one shows its first metric."""
    finding = str(result.details.get("key_finding") or "") if result.status not in ("error", "skipped") else ""
    if result.status == "failed":
        return "; ".join(p for p in (failed_note(result), finding) if p)
    if result.status in ("measured", "passed"):
        return finding or result.message or key_metric(result)
    return finding or result.message


def multi_model(report: RunReport) -> bool:
    return len(report.model_names) > 1


def overview_headers(report: RunReport) -> list[str]:
    return (["model"] if multi_model(report) else []) + OVERVIEW_HEADERS


def overview_rows(report: RunReport) -> list[list[str]]:
    """One row per result: (model,) probe id, status, expectations held, duration, message."""
    rows = []
    multi = multi_model(report)
    for r in report.probes:
        held = sum(1 for e in r.expectations if e.passed)
        row = [r.id or r.probe, r.status.upper(), f"{held}/{len(r.expectations)}", f"{r.duration_s:.1f}s", note(r)]
        rows.append(([r.model] if multi else []) + row)
    return rows


def last_column_widths(rows: list[list[str]], headers: list[str], width: int | None,
                       least: int = 30) -> list[int | None] | None:
    """tabulate's ``maxcolwidths`` that wrap a "simple" table's last column (the note) so each line fits
    ``width`` characters; None (no wrapping) without a width or when the table already fits."""
    if not width or not headers:
        return None
    cols = [max([len(h) + 2] + [len(str(r[i])) for r in rows]) for i, h in enumerate(headers)]  # tabulate pads headers by 2
    if sum(cols) + 2 * (len(cols) - 1) <= width:
        return None
    room = width - sum(cols[:-1]) - 2 * (len(cols) - 1)
    return [None] * (len(cols) - 1) + [max(least, room)]


OVERVIEW_HEADERS = ["probe", "status", "expectations", "time", "note"]
METRIC_HEADERS = ["metric", "value", "95% CI", "expected", "ok", "meaning"]
def data_prints(report: RunReport) -> str:
    """' (examples fingerprint 3fa2..., file sha256 9b1c...)': what the examples were as parsed, and the file."""
    prints = ([f"examples fingerprint {report.data_fingerprint[:12]}"] if report.data_fingerprint else []) + \
        ([f"file sha256 {report.data_sha256[:12]}"] if getattr(report, "data_sha256", "") else [])
    return f" ({', '.join(prints)})" if prints else ""


MODEL_HEADERS = ["model", "path", "variant", "dtype", "device", "parameters", "size", "examples/s", "sha256"]


def metric_rows(result: ProbeResult) -> list[list[str]]:
    """A row per metric (``METRIC_HEADERS``): its value, interval, expectation, verdict and meaning (the probe's
    catalogue's, which the run gave it); then each expectation whose metric was never produced."""
    expectations = {e.metric: e for e in result.expectations}
    rows = []
    for name, metric in result.metrics.items():
        exp = expectations.pop(name, None)
        ci = f"[{metric.ci[0]:.4g}, {metric.ci[1]:.4g}]" if metric.ci else ""
        rows.append([name, fmt(metric.value), ci, exp.describe() if exp else "",
                     "" if exp is None else ("yes" if exp.passed else "NO"), metric.description])
    for exp in expectations.values():  # expected but never produced
        rows.append([exp.metric, "missing", "", exp.describe(), "NO", ""])
    return rows


def task_text(model: ModelInfo) -> str:
    """'multi-label: threshold 0.5; thresholds toxic 0.3, insult 0.7': the task and how it decides (its settings:
    a multi-label model's decision thresholds, a tagger's scheme), as the model header shows it."""
    parts = []
    for key, value in model.task_settings.items():
        if isinstance(value, dict):
            if value:
                parts.append(f"{key} " + ", ".join(f"{k} {fmt(v)}" for k, v in value.items()))
        elif value is not None and value != "":
            parts.append(f"{key} {fmt(value)}")
    return model.task + (": " + "; ".join(parts) if parts else "")


def _task_row(report: RunReport) -> list[list[str]]:
    """One 'task' row: a single value where every model agrees, else each model's."""
    texts = {m.name: task_text(m) for m in report.models if m.task}
    if not texts:
        return []
    if len(set(texts.values())) == 1:
        return [["task", next(iter(texts.values()))]]
    return [["task", "; ".join(f"{name}: {text}" for name, text in texts.items())]]


def header_rows(report: RunReport) -> list[list[str]]:
    versions = ", ".join(f"{k} {v}" for k, v in report.versions.items())
    rows = [["suite", report.suite]]
    if len(report.models) == 1:
        m = report.models[0]
        rows.append(["model", f"{m.path}" + (f" ({m.name})" if m.name != m.path else "")])
        if m.sha256:
            rows.append(["weights sha256", m.sha256])
    else:
        rows.append(["models", ", ".join(report.model_names) or report.model])
    rows += _task_row(report)
    rows += [
        ["data", report.data + data_prints(report)],
        ["device / dtype", f"{report.device} / {report.dtype}"],
        ["seed", fmt(report.seed)],
        ["threads", fmt(report.threads) + (f" (warning: {report.busy})" if getattr(report, "busy", "") else "")],
        ["started (UTC)", report.started_at],
        ["status", report.status + (f" ({report.message})" if report.message else "")],
        ["versions", versions],
    ]
    if getattr(report, "resumed", None):  # finished over several processes: what each --resume took over
        rows.insert(-2, ["resumed", "; ".join(report.resumed)])
    if report.gate:
        significance = report.gate.get("significance")
        rows.append(["gate", f"baseline {report.gate.get('baseline')}, tolerance {report.gate.get('tolerance')}"
                     + (f", significant at {significance} (paired tests, Holm-corrected)" if significance
                        else ", on the delta alone (no significance test)")])
    return rows


def speed_text(report: RunReport, model: str) -> str:
    """Examples/s with its spread (``299 (287-305)``): warm passes, as the accuracy probe measures them."""
    for r in report.results_for(model):
        metric = r.metrics.get("examples_per_s")
        if metric is not None and metric.value is not None:
            def rate(value: float) -> str:
                return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"

            spread = f" ({rate(metric.ci[0])}-{rate(metric.ci[1])})" if metric.ci else ""
            return rate(metric.value) + spread
    return fmt(None)


def model_rows(report: RunReport) -> list[list[str]]:
    rows = []
    for m in report.models:
        variant = ", ".join(f"{k}={v}" for k, v in m.variant.items()) or "as stored"
        rows.append([m.name, m.path, variant, m.dtype, m.device, f"{m.parameters:,}", size_text(m.bytes),
                     speed_text(report, m.name), (m.sha256 or "-")[:12]])
    return rows


def side_by_side(report: RunReport) -> tuple[list[str], list[list[str]]]:
    """Every metric of every probe id, one column per model (the gate's baseline first)."""
    names = report.model_names
    baseline = report.gate.get("baseline")
    if baseline in names:
        names = [baseline] + [n for n in names if n != baseline]
    keys: list[tuple[str, str]] = []
    for r in report.probes:
        for metric in r.metrics:
            key = (r.id or r.probe, metric)
            if key not in keys:
                keys.append(key)
    rows = []
    for pid, metric in keys:
        row = [pid, metric]
        for name in names:
            result = report.result(name, pid)
            row.append(fmt(result.value(metric)) if result is not None and metric in result.metrics else "")
        rows.append(row)
    return ["probe", "metric"] + names, rows


def _probes(d: MetricDelta) -> str:
    """The probe that measured a delta, and the others that measured the same on the same examples."""
    return d.probe_id + (f" (also seen in: {', '.join(d.also_in)})" if d.also_in else "")


REGRESSION_HEADERS = ["model", "probe", "metric", "baseline", "value", "delta", "tolerance", "p", "p (Holm)", "test"]


def regression_rows(report: RunReport, unconfirmed: bool = False) -> list[list[str]]:
    """The significant regressions (or, with ``unconfirmed``, the changes past the tolerance that are not)."""
    return [[r.model, _probes(r), r.metric, fmt(r.baseline_value), fmt(r.value),
             f"{r.delta:+.4g}" if r.delta is not None else "-", f"{r.tolerance:g}", fmt(r.p_value), fmt(r.p_adjusted),
             r.test]
            for r in (report.unconfirmed if unconfirmed else report.regressions)]


PAIRED_HEADERS = ["model", "probe", "metric", "baseline", "value", "delta", "95% CI of the delta", "paired", "p (Holm)"]


def paired_rows(report: RunReport) -> list[list[str]]:
    """Every gated metric's change against the baseline with its paired interval (examples paired by id)."""
    return [[r.model, _probes(r), r.metric, fmt(r.baseline_value), fmt(r.value),
             f"{r.delta:+.4g}" if r.delta is not None else "-",
             f"[{r.ci[0]:+.4g}, {r.ci[1]:+.4g}]" if r.ci else "-", str(r.paired), fmt(r.p_adjusted)]
            for r in report.paired]


AGREEMENT_HEADERS = ["model", "probe", "agreement", "equal", "changed (example id: baseline -> candidate)"]


def _prediction(value: Any, other: Any, width: int = 60) -> str:
    """One prediction of the agreement table: a class code as a number (a run from before ``label`` outcomes), a
    text quoted, clipped to ``width`` around where it first differs from ``other`` (two long answers or entity
    lists that part late still show how)."""
    if isinstance(value, (int, float)):
        return f"{value:g}"
    text, theirs = _readable(value), _readable(other)
    if len(text) <= width:
        return repr(text)
    first = next((i for i, (a, b) in enumerate(zip(text, theirs)) if a != b), min(len(text), len(theirs)))
    start = max(0, min(first - width // 3, len(text) - width + 1))
    piece = text[start:start + width - 1 - (start > 0)]
    return repr(("…" if start else "") + piece + ("…" if start + len(piece) < len(text) else ""))


def _readable(value: Any) -> str:
    """A prediction as one line: a query's top 10 (``ranking_label``) as its ids in brackets, best first."""
    ids = ranking_ids(value)
    return "[" + ", ".join(" ".join(d.split()) for d in ids) + "]" if ids is not None else " ".join(str(value).split())


def agreement_rows(agreements: list[Agreement], shown: int = 20) -> list[list[str]]:
    """Each candidate's predictions against the baseline's: the share equal, and the examples that changed (the
    first ``shown``; report.json lists them all)."""
    rows = []
    for a in agreements:
        changed = "; ".join(f"{i}: {_prediction(b, c)} -> {_prediction(c, b)}" for i, b, c in a.changed[:shown])
        more = f" and {len(a.changed) - shown} more" if len(a.changed) > shown else ""
        rate = f"{a.rate:.2%}" if a.paired else "-"
        if a.overlap is not None:  # rankings: equal is an identical top k; the overlap counts shared documents
            ci = f" [{a.overlap_ci[0]:.3f}, {a.overlap_ci[1]:.3f}]" if a.overlap_ci else ""
            rate += f"; top-{a.overlap_depth} overlap {a.overlap:.3f}{ci}"
        rows.append([a.model, a.probe_id, rate, f"{a.agreed} of {a.paired}", (changed + more) or "none"])
    return rows


NOT_GATED_HEADERS = ["probe", "metric", "value", "95% CI", "why not gated"]


def not_gated_headers(report: RunReport) -> list[str]:
    return (["model"] if multi_model(report) else []) + NOT_GATED_HEADERS


def not_gated_rows(report: RunReport) -> list[list[str]]:
    """The key metrics no expectation judged (``details["not_gated"]``), with why: turned off, or no default."""
    rows = []
    for r in report.probes:
        for row in r.details.get("not_gated") or []:
            metric = r.metrics.get(str(row.get("metric")))
            ci = f"[{metric.ci[0]:.4g}, {metric.ci[1]:.4g}]" if metric is not None and metric.ci else ""
            rows.append(([r.model] if multi_model(report) else [])
                        + [r.id or r.probe, str(row.get("metric")), fmt(row.get("value")), ci, str(row.get("why"))])
    return rows


def clip(value: Any, width: int | None = None) -> str:
    """Whitespace folded and, with ``width``, clipped with an ellipsis; nothing escaped."""
    text = " ".join(str(value if value is not None else "").split())
    if width is not None and len(text) > width:
        text = text[: width - 1] + "…"
    return text


def md_cell(value: Any, width: int | None = None) -> str:
    """One Markdown table cell: whitespace folded, optionally clipped, each pipe escaped exactly once.

    The one escaper: text that goes into a table through the Markdown reporter's ``_table`` is given to it
    raw (or through ``clip``), never already escaped."""
    return clip(value, width).replace("|", "\\|")


def model_notes(report: RunReport) -> list[str]:
    """'name: note' for every model note (variants, load warnings), warnings first."""
    notes = [f"{m.name}: {n}" for m in report.models for n in m.notes]
    return sorted(notes, key=lambda n: "WARNING" not in n)


def decision_lines(report: RunReport) -> list[tuple[Verdict, str]]:
    """(verdict, 'decision: ...' line) per model: what the terminal, report.md and report.html lead with."""
    verdicts = decide(report)
    multi = len(verdicts) > 1
    return [(v, f"{v.model}: {v.headline()}" if multi else v.headline()) for v in verdicts]


# ---- marked spans in findings -----------------------------------------------------------------------
# A finding may mark character spans of its cells: ``extra["marks"] = {cell: [[start, end, label], ...]}``, where a
# cell is one of the finding's fields (input, perturbed, expected, observed) or a key of ``extra["columns"]`` and
# the offsets index that cell's text (QA: the gold and the predicted answer in a context excerpt). HTML draws them
# as <mark>s, Markdown as brackets, one kind of bracket per label, with a legend under the table.
MARK_BRACKETS = (("[", "]"), ("{", "}"), ("⟨", "⟩"), ("«", "»"))


def finding_marks(finding: Any, cell: str, text: str) -> list[tuple[int, int, str]]:
    """The well-formed marks of one cell of ``finding`` (inside ``text``, start before end)."""
    out = []
    for mark in (finding.extra.get("marks") or {}).get(cell) or []:
        if isinstance(mark, (list, tuple)) and len(mark) == 3 and all(isinstance(v, int) for v in mark[:2]):
            start, end, label = int(mark[0]), int(mark[1]), str(mark[2])
            if 0 <= start < end <= len(text):
                out.append((start, end, label))
    return out


def mark_labels(findings: list[Any]) -> list[str]:
    """Every mark label of ``findings``, in the order they first appear (what picks each label's bracket)."""
    return list(dict.fromkeys(str(m[2]) for f in findings for marks in (f.extra.get("marks") or {}).values()
                              for m in marks or [] if isinstance(m, (list, tuple)) and len(m) == 3))


def bracketed_marks(text: str, marks: list[tuple[int, int, str]], labels: list[str]) -> str:
    """``text`` with each mark in its label's brackets (``MARK_BRACKETS`` by the label's place in ``labels``);
    where marks meet, those that end close first, and spans of one place nest."""
    inserts: dict[int, list[tuple[int, int, str]]] = {}
    for start, end, label in marks:
        k = labels.index(label) if label in labels else len(labels)
        opening, closing = MARK_BRACKETS[k % len(MARK_BRACKETS)]
        inserts.setdefault(start, []).append((1, k, opening))
        inserts.setdefault(end, []).append((0, -k, closing))
    out, last = [], 0
    for at in sorted(inserts):
        out.append(text[last:at])
        out += [s for _, _, s in sorted(inserts[at])]
        last = at
    out.append(text[last:])
    return "".join(out)


def mark_segments(text: str, marks: list[tuple[int, int, str]]) -> list[tuple[str, list[str]]]:
    """``text`` cut at every mark's ends: (piece, the labels of the marks covering it) in order."""
    cuts = sorted({0, len(text), *(m[0] for m in marks), *(m[1] for m in marks)})
    out = []
    for a, b in zip(cuts, cuts[1:]):
        if a < b:
            out.append((text[a:b], list(dict.fromkeys(label for s, e, label in marks if s <= a and b <= e))))
    return out


def marks_legend(labels: list[str]) -> str:
    """'marked: [gold] {predicted}': how the Markdown report brackets each label."""
    return "marked: " + " ".join(f"{o}{label}{c}" for label, (o, c) in
                                 zip(labels, [MARK_BRACKETS[k % len(MARK_BRACKETS)] for k in range(len(labels))]))
