"""The report's header says how the task decides: a multi-label model's global threshold and per-label
thresholds appear in report.md and report.html (not only report.json), a single value where models agree."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner
from conftest import only_run

from bertprobe.cli import main
from bertprobe.reporters.html_report import render_html
from bertprobe.reporters.markdown_report import render_markdown
from bertprobe.reporters.summary import header_rows
from bertprobe.results import ModelInfo, RunReport
from bertprobe.testing import save_tiny_model


def test_the_thresholds_are_in_the_header_of_both_reports():
    settings = {"threshold": 0.5, "thresholds": {"toxic": 0.3, "insult": 0.7}}
    report = RunReport(suite="s", status="completed",
                       models=[ModelInfo("m", "m", task="multi-label", task_settings=settings)])
    line = "multi-label: threshold 0.5; thresholds toxic 0.3, insult 0.7"
    assert ["task", line] in header_rows(report)
    assert re.search(rf"\| task +\| {re.escape(line)} +\|", render_markdown(report))
    assert re.search(rf"<td>task *</td><td>{re.escape(line)} *</td>", render_html(report))
    same = RunReport(suite="s", status="completed", models=[ModelInfo(n, "m", task="multi-label", task_settings=settings)
                                                            for n in ("a", "b")])
    assert ["task", line] in header_rows(same)  # one value where the models agree
    other = RunReport(suite="s", status="completed", models=[
        ModelInfo("a", "m", task="multi-label", task_settings={"threshold": 0.5, "thresholds": {}}),
        ModelInfo("b", "m", task="multi-label", task_settings={"threshold": 0.4, "thresholds": {}})])
    assert ["task", "a: multi-label: threshold 0.5; b: multi-label: threshold 0.4"] in header_rows(other)


def test_a_multi_label_runs_report_md_and_html_name_its_thresholds(tmp_path):
    model = save_tiny_model(tmp_path / "tagger", task="multi-label", labels=("toxic", "insult", "threat"), seed=3)
    data = tmp_path / "sets.jsonl"
    data.write_text("".join(json.dumps({"text": f"you are number {i}", "labels": ["toxic"] if i % 2 else []}) + "\n"
                            for i in range(12)), encoding="utf-8")
    suite = tmp_path / "ml.yaml"
    suite.write_text(f"suite: ml\nmodel: {{path: '{model}', device: cpu, threshold: 0.4, thresholds: {{toxic: 0.9}}}}\n"
                     f"data: {{path: '{data}', label: labels}}\nreport: {{dir: '{tmp_path / 'out'}'}}\n"
                     "probes:\n  - probe: accuracy\n    params: {bootstrap: 0, single_check: 0}\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code in (0, 1), result.output
    run_dir, report = only_run(tmp_path / "out", "ml")
    assert report["models"][0]["task_settings"] == {"threshold": 0.4, "thresholds": {"toxic": 0.9}}
    line = "multi-label: threshold 0.4; thresholds toxic 0.9"
    assert line in (run_dir / "report.md").read_text() and line in (run_dir / "report.html").read_text()
