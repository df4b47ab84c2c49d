"""``bertprobe compare RUN_A RUN_B``: two runs made apart, paired model by model, probe by probe."""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tabulate import tabulate

from bertprobe.errors import BertprobeError
from bertprobe.reporters.summary import AGREEMENT_HEADERS, agreement_rows, fmt, md_cell
from bertprobe.results import MetricDelta, RunReport
from bertprobe.results.gates import comparable, compare_results, judge_deltas, merge_repeats, repeat_key
from bertprobe.results.outcomes import Agreement, Outcomes, read_outcomes

HEADERS = ["model", "probe", "metric", "A", "B", "delta", "", "p", "p (Holm)", "paired", "verdict"]
AGREEMENT_TITLE = "Predictions changed from A to B (listed, never gating; compare.json lists them all):"


def load_run(run_dir: Path) -> RunReport:
    """A run folder's report: rebuilt from events.jsonl (the source of truth), else read from report.json."""
    if not run_dir.is_dir():
        raise BertprobeError(f"run folder '{run_dir}' does not exist; give two folders under reports/")
    events = run_dir / "events.jsonl"
    if events.is_file():
        return RunReport.from_events(events)
    summary = run_dir / "report.json"
    if summary.is_file():
        try:
            return RunReport.from_dict(json.loads(summary.read_text(encoding="utf-8")))
        except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise BertprobeError(f"{summary}: not a readable bertprobe report ({exc})") from None
    raise BertprobeError(f"'{run_dir}' has neither events.jsonl nor report.json; is it a bertprobe run folder?")


@dataclass
class Comparison:
    run_a: str
    run_b: str
    pairs: list[tuple[str, str]]
    deltas: list[MetricDelta] = field(default_factory=list)
    unpaired: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    agreement: list[Agreement] = field(default_factory=list)  # B's predictions against A's, where both published them

    @property
    def regressions(self) -> list[MetricDelta]:
        return [d for d in self.deltas if d.regression]

    def rows(self) -> list[list[str]]:
        rows = []
        for d in self.deltas:
            arrow = ""
            if d.delta is not None and d.higher_is_better is not None and abs(d.delta) > 1e-12:
                arrow = "better" if (d.delta > 0) == d.higher_is_better else "worse"
            model = d.model if d.model == d.baseline else f"{d.baseline} -> {d.model}"
            verdict = ("REGRESSION" if d.regression else "not significant" if d.past_tolerance
                       else "ok" if d.gated else "not gated")
            probe = d.probe_id + (f" (also: {', '.join(d.also_in)})" if d.also_in else "")
            rows.append([model, probe, d.metric, fmt(d.baseline_value), fmt(d.value),
                         "-" if d.delta is None else f"{d.delta:+.4g}", arrow, fmt(d.p_value), fmt(d.p_adjusted),
                         str(d.paired or ""), verdict])
        return rows

    def text(self) -> str:
        lines = [tabulate(self.rows(), headers=HEADERS, tablefmt="simple")]
        if self.agreement:
            lines += ["", AGREEMENT_TITLE, tabulate(agreement_rows(self.agreement, 5), headers=AGREEMENT_HEADERS,
                                                    tablefmt="simple")]
        lines += [f"note: {n}" for n in self.notes + [f"not paired: {u}" for u in self.unpaired]]
        lines.append(f"\n{len(self.regressions)} regression(s)" if self.regressions else "\nno regression")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"run_a": self.run_a, "run_b": self.run_b, "pairs": self.pairs, "notes": self.notes,
                "unpaired": self.unpaired, "regressions": len(self.regressions),
                "deltas": [asdict(d) for d in self.deltas],
                "agreement": [{**asdict(a), "rate": a.rate} for a in self.agreement]}


def _pair_models(a: RunReport, b: RunReport, baseline_model: str | None) -> list[tuple[str, str]]:
    names_a, names_b = a.model_names, b.model_names
    if baseline_model is not None:
        if baseline_model not in names_a:
            raise BertprobeError(f"--baseline-model {baseline_model}: RUN_A has no such model; it has {', '.join(names_a)}")
        return [(baseline_model, m) for m in names_b]
    common = [m for m in names_b if m in names_a]
    if common:
        return [(m, m) for m in common]
    if len(names_a) == 1 and len(names_b) == 1:
        return [(names_a[0], names_b[0])]
    raise BertprobeError(f"the runs share no model name (A: {', '.join(names_a) or 'none'}; B: {', '.join(names_b) or 'none'}); "
                         "pass --baseline-model NAME")


def _sizes(a: RunReport, b: RunReport) -> str:
    """'; 872 and 200 examples' from each run's accuracy-like ``examples`` count, where both have one."""
    def examples(report: RunReport) -> int | None:
        counts = [r.value("examples") for r in report.probes if r.value("examples") is not None]
        return int(max(counts)) if counts else None

    na, nb = examples(a), examples(b)
    return f"; {na} and {nb} examples" if na is not None and nb is not None else ""


def compare_runs(run_a: Path, run_b: Path, tolerance_for: Callable[[str], float], significance: float | None,
                 baseline_model: str | None = None, allow_different_data: bool = False) -> Comparison:
    """Pair the models, probes (by id) and metrics of two runs and compare them; BertprobeError if nothing pairs.

    Runs on different data (their fingerprints differ) compare only with ``allow_different_data``, and then
    nothing gates: with no example in common there is no paired test, and a delta between two samples of
    different size is no evidence of a regression on its own."""
    a, b = load_run(run_a), load_run(run_b)
    comparison = Comparison(str(run_a), str(run_b), _pair_models(a, b, baseline_model))
    out_a: dict[tuple[str, str], dict[str, Outcomes]] = read_outcomes(run_a)
    out_b: dict[tuple[str, str], dict[str, Outcomes]] = read_outcomes(run_b)
    different = bool(a.data_fingerprint and b.data_fingerprint and a.data_fingerprint != b.data_fingerprint)
    if different:
        if not allow_different_data:
            raise BertprobeError(
                f"the runs used different data (fingerprints {a.data_fingerprint[:12]} and {b.data_fingerprint[:12]}"
                f"{_sizes(a, b)}), so their examples do not pair and a delta is no regression; rerun B on A's data, "
                "or pass --allow-different-data to see the deltas, which then never gate")
        comparison.notes.append("the runs used different data (--allow-different-data): nothing is paired and "
                                "nothing gates; the deltas compare means of different samples")
        out_a, out_b = {}, {}
    paired_probes = 0
    keyed: list[tuple[MetricDelta, tuple[object, ...] | None]] = []  # one quantity several probes measured: once
    for model_a, model_b in comparison.pairs:
        for cand in b.results_for(model_b):
            pid = cand.id or cand.probe
            base = a.result(model_a, pid)
            if base is None:
                comparison.unpaired.append(f"probe '{pid}' of {model_b} is not in RUN_A")
                continue
            if not (comparable(base) and comparable(cand)):
                comparison.unpaired.append(f"probe '{pid}': {base.status} in RUN_A, {cand.status} in RUN_B")
                continue
            paired_probes += 1
            vec_a, vec_b = out_a.get((model_a, pid), {}), out_b.get((model_b, pid), {})
            keyed += [(d, repeat_key(d, base, cand, vec_a, vec_b))
                      for d in compare_results(base, cand, vec_a, vec_b, tolerance_for)]
            if "prediction" in vec_a and "prediction" in vec_b:
                if Agreement.pairable(vec_a["prediction"], vec_b["prediction"]):
                    comparison.agreement.append(Agreement.between(model_b, model_a, pid, vec_a["prediction"],
                                                                  vec_b["prediction"]))
                else:
                    comparison.notes.append(f"probe '{pid}': one run recorded its predictions as class codes (an "
                                            "older bertprobe), the other by name: predictions not compared")
    comparison.deltas = merge_repeats(keyed)
    judge_deltas(comparison.deltas, significance)
    if different:
        for d in comparison.deltas:
            d.regression, d.gated = False, False
    if paired_probes == 0:
        details = "; ".join(comparison.unpaired[:5]) or "no probe results"
        raise BertprobeError(f"nothing to compare between '{run_a}' and '{run_b}': {details}")
    return comparison


def render_markdown(c: Comparison) -> str:
    rows = [[md_cell(x) for x in row] for row in c.rows()]
    lines = ["# bertprobe compare", "", f"A (baseline): `{md_cell(c.run_a)}`  ", f"B (candidate): `{md_cell(c.run_b)}`", "",
             f"**{len(c.regressions)} regression(s)**", "", tabulate(rows, headers=HEADERS, tablefmt="github")]
    if c.agreement:
        lines += ["", AGREEMENT_TITLE, "", tabulate([[md_cell(x) for x in row] for row in agreement_rows(c.agreement)],
                                                    headers=AGREEMENT_HEADERS, tablefmt="github")]
    lines += [""] + [f"- {md_cell(n)}" for n in c.notes + [f"not paired: {u}" for u in c.unpaired]]
    return "\n".join(lines) + "\n"


def render_html(c: Comparison) -> str:
    esc = html.escape
    return "\n".join([
        "<!doctype html><html><head><meta charset='utf-8'><title>bertprobe compare</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:2em auto;max-width:80em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:.2em .5em}</style></head><body>",
        f"<h1>bertprobe compare</h1><p>A (baseline): {esc(c.run_a)}<br>B (candidate): {esc(c.run_b)}</p>",
        f"<p><b>{len(c.regressions)} regression(s)</b></p>",
        tabulate(c.rows(), headers=HEADERS, tablefmt="html"),
        *([f"<p>{esc(AGREEMENT_TITLE)}</p>", tabulate(agreement_rows(c.agreement), headers=AGREEMENT_HEADERS,
                                                     tablefmt="html")] if c.agreement else []),
        "<ul>" + "".join(f"<li>{esc(n)}</li>" for n in c.notes + [f"not paired: {u}" for u in c.unpaired]) + "</ul>",
        "</body></html>",
    ])


def write_comparison(c: Comparison, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in (("compare.json", json.dumps(c.to_dict(), indent=2) + "\n"), ("compare.md", render_markdown(c)),
                       ("compare.html", render_html(c))):
        path = out / name
        tmp = path.with_name(name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        paths.append(path)
    return paths
