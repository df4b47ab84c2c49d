"""End-to-end CLI behaviour on tiny models: exit codes, reports, one-line errors."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO, only_run, write_suite

import bertprobe.plugins
from bertprobe import Probe, ProbeResult, hookimpl
from bertprobe.cli import main


def invoke(*args: str):
    result = CliRunner().invoke(main, list(args))
    return result


def run_dirs(suite_path: Path) -> list[Path]:
    return sorted((suite_path.parent / "reports").glob("tiny-*"))


def one_line_error(result, code: int = 2) -> str:
    assert result.exit_code == code, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], result.stderr  # progress lines may precede it
    assert "Traceback" not in result.output
    return errors[0]


def error_lines(result, code: int = 2) -> tuple[str, list[str]]:
    """An error listing several problems: its headline and the numbered problems, one per line, in order."""
    assert result.exit_code == code, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.startswith("error: "))
    items = lines[start + 1:]
    assert items and all(line.startswith(f"  {i}. ") for i, line in enumerate(items, 1)), result.stderr
    assert "Traceback" not in result.output
    return lines[start], [line.split(". ", 1)[1] for line in items]


class Boom(Probe):
    name = "boom"
    description = "raises"

    def run(self, target, data, params, ctx):
        raise RuntimeError("probe exploded")


class Interrupt(Probe):
    name = "interrupt"
    description = "simulates Ctrl-C"

    def run(self, target, data, params, ctx):
        raise KeyboardInterrupt


class NeedsMlm(Probe):
    name = "needs-mlm"
    description = "requires a masked LM"
    requires = frozenset({"mlm"})

    def run(self, target, data, params, ctx):
        return ProbeResult(probe=self.name)


class SigTerm(Probe):
    name = "sigterm"
    description = "sends the process SIGTERM, as CI runners and Kubernetes do"

    def run(self, target, data, params, ctx):
        import os
        import signal
        import time

        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler interrupts this
        return ProbeResult(probe=self.name)


class Threads(Probe):
    name = "threads"
    description = "reports torch's thread count"

    def run(self, target, data, params, ctx):
        import torch

        result = ProbeResult(probe=self.name)
        result.add_metric("threads", torch.get_num_threads())
        result.add_metric("seed", ctx.seed)
        return result


class HarnessBug:
    """Breaks the harness itself (not a probe): the session hook raises."""

    @hookimpl
    def bertprobe_session_start(self, session):
        session.say("about to break")

    @hookimpl
    def bertprobe_probe_result(self, session, result):
        raise ValueError("reporter plugin bug")


class InterruptOnce(Probe):
    """Ctrl-C the first time it runs (class-level memory: both runs of a test share the process)."""

    name = "interrupt-once"
    description = "simulates Ctrl-C once"
    calls: list[str] = []

    def run(self, target, data, params, ctx):
        InterruptOnce.calls.append("run")
        if len(InterruptOnce.calls) == 1:
            raise KeyboardInterrupt
        result = ProbeResult(probe=self.name)
        result.add_metric("runs", len(InterruptOnce.calls))
        return result


class Sweep(Probe):
    """Six work units through ctx.map; Ctrl-C in unit 4 the first time."""

    name = "sweep"
    description = "a sweep of units"
    computed: list[str] = []

    def run(self, target, data, params, ctx):
        def unit(k: int) -> dict:
            if k == 4 and "u4" not in Sweep.computed and "interrupted" not in Sweep.computed:
                Sweep.computed.append("interrupted")
                raise KeyboardInterrupt
            Sweep.computed.append(f"u{k}")
            return {"value": k * k + ctx.unit_seed(f"u{k}") % 7, "pair": (k, k)}

        values = ctx.map(unit, [(f"u{k}", k) for k in range(6)])
        result = ProbeResult(probe=self.name)
        result.add_metric("total", sum(v["value"] for v in values))
        result.details["values"] = values
        return result


class TestProbes:
    @hookimpl
    def bertprobe_register_probes(self, registry):
        for cls in (Boom, Interrupt, NeedsMlm, SigTerm, Threads, InterruptOnce, Sweep):
            registry.add(cls)


@pytest.fixture
def with_test_probes(monkeypatch):
    real = bertprobe.plugins.build_plugins
    monkeypatch.setattr(bertprobe.plugins, "build_plugins", lambda **kw: real(extra=[TestProbes()], **kw))


def test_run_writes_reports_and_exits_zero(suite_factory):
    suite = suite_factory("  - probe: accuracy\n    expect: {accuracy: {min: 0.0}}\n")
    result = invoke("run", str(suite))
    assert result.exit_code == 0, result.output
    run_dir, report = only_run(suite.parent / "reports", "tiny")
    assert run_dir.name.startswith("tiny-") and run_dir.name.endswith("Z")
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    # (progress events come as the clock says: a loop past a second on a busy machine reports)
    assert [e["event"] for e in events if e["event"] != "progress"] == [
        "run_start", "data_loaded", "probe_start", "model_loaded", "probe_result", "run_finish"]
    assert report["suite"] == "tiny" and report["seed"] == 3 and report["status"] == "completed"
    assert report["device"] == "cpu" and report["dtype"] == "float32"
    assert set(report["versions"]) >= {"bertprobe", "torch", "transformers"}
    (probe,) = report["probes"]
    assert probe["probe"] == "accuracy" and probe["status"] == "passed" and probe["duration_s"] > 0
    acc = probe["metrics"]["accuracy"]
    assert 0 <= acc <= 1 and probe["metrics"]["examples"] == 6
    per_class = [probe["metrics"]["accuracy_negative"], probe["metrics"]["accuracy_positive"]]
    assert acc == pytest.approx(sum(per_class) / 2)  # 3 examples of each class
    md = (run_dir / "report.md").read_text()
    # the suite's one expectation and the probe's default per class (Wilson interval reaching 0.5)
    assert [(e["metric"], e["source"]) for e in probe["expectations"]] == [
        ("accuracy", "suite"), ("accuracy_negative", "default"), ("accuracy_positive", "default")]
    assert "3 of 3 expectations held (100%); probes: 1 passed, 0 failed" in md and "| accuracy " in md
    assert "<h1>bertprobe report: tiny</h1>" in (run_dir / "report.html").read_text()
    assert "3 of 3 expectations held (100%)" in result.stdout


def test_failed_expectation_exits_one_and_runs_never_overwrite(suite_factory):
    suite = suite_factory("  - probe: accuracy\n    expect: {accuracy: {max: -1}}\n")
    first = invoke("run", str(suite))
    second = invoke("run", str(suite))
    assert first.exit_code == 1 and second.exit_code == 1
    dirs = run_dirs(suite)
    assert len(dirs) == 2
    report = json.loads((dirs[0] / "report.json").read_text())
    assert report["probes"][0]["status"] == "failed"
    assert report["probes"][0]["expectations"][0]["passed"] is False
    assert "2 of 3 expectations held (67%)" in (dirs[0] / "report.md").read_text()  # the defaults per class held
    # the terminal says why it failed: the expectation and the value
    assert re.search(r"FAILED .*accuracy 0\.\d+ \(expected <= -1\)", first.output), first.output


def test_missing_suite_file():
    assert "not found" in one_line_error(invoke("run", "nope.yaml"))


def test_yaml_syntax_error_names_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("suite: x\nprobes:\n  - probe: [accuracy\n")
    assert "line" in one_line_error(invoke("run", str(bad)))


def test_unknown_probe_suggests(suite_factory):
    suite = suite_factory("  - probe: acuracy\n")
    assert "did you mean 'accuracy'" in one_line_error(invoke("run", str(suite)))
    assert "did you mean 'accuracy'" in one_line_error(invoke("validate", str(suite)))


def test_model_path_missing(suite_factory, tmp_path):
    suite = suite_factory(model=str(tmp_path / "no-model"))
    assert "does not exist" in one_line_error(invoke("run", str(suite)))


def test_hub_unreachable_suggests_model_path(suite_factory):
    suite = suite_factory(model="someone/uncached-model")
    assert "--model PATH" in one_line_error(invoke("run", str(suite)))


def test_pickle_only_checkpoint(suite_factory, tmp_path, tiny_clf_dir):
    pickled = tmp_path / "pickled"
    shutil.copytree(tiny_clf_dir, pickled)
    (pickled / "model.safetensors").unlink()
    (pickled / "pytorch_model.bin").write_bytes(b"x")
    suite = suite_factory(model=str(pickled))
    assert "allow_pickle" in one_line_error(invoke("run", str(suite)))


@pytest.mark.parametrize(
    "content, message",
    [(None, "does not exist"), ("", "is empty"), ("text\tgold\nhi\t1\n", "no column 'sentence'")],
)
def test_bad_data_files(suite_factory, tmp_path, content, message):
    data = tmp_path / "data.tsv"
    if content is not None:
        data.write_text(content)
    suite = suite_factory(data=str(data))
    assert message in one_line_error(invoke("run", str(suite)))


def test_unknown_label_aborts_but_keeps_earlier_results(suite_factory, tmp_path, sst_tsv):
    bad = tmp_path / "bad-labels.tsv"
    bad.write_text("sentence\tlabel\nthe movie\tneutral\n")
    suite = suite_factory(
        "  - probe: accuracy\n  - probe: accuracy\n    id: second\n"
        f"    data: {{path: '{bad}'}}\n"
    )
    line = one_line_error(invoke("run", str(suite)))
    assert "'neutral'" in line and "not one the model knows" in line
    run_dir, report = only_run(suite.parent / "reports", "tiny")
    assert f"partial report in {run_dir}" in line
    assert report["status"] == "aborted" and [p["id"] for p in report["probes"]] == ["accuracy"]


def test_probe_error_is_recorded_and_run_continues(suite_factory, with_test_probes):
    suite = suite_factory("  - probe: boom\n  - probe: accuracy\n  - probe: needs-mlm\n")
    result = invoke("run", str(suite))
    assert result.exit_code == 1
    run_dir, report = only_run(suite.parent / "reports", "tiny")
    status = {p["id"]: (p["status"], p["message"]) for p in report["probes"]}
    assert status["boom"] == ("error", "RuntimeError: probe exploded")
    assert status["accuracy"][0] == "passed"  # judged by its defaults alone
    assert status["needs-mlm"][0] == "skipped" and "lacks: mlm (a masked-LM head)" in status["needs-mlm"][1]
    assert "probe_traceback" in (run_dir / "events.jsonl").read_text()


def test_ctrl_c_leaves_partial_report(suite_factory, with_test_probes):
    suite = suite_factory("  - probe: accuracy\n  - probe: interrupt\n  - probe: accuracy\n    id: never\n")
    result = invoke("run", str(suite))
    assert result.exit_code == 130
    run_dir, report = only_run(suite.parent / "reports", "tiny")
    assert report["status"] == "interrupted"
    # the probe that was running is listed as interrupted; the one after it never ran
    assert [(p["id"], p["status"]) for p in report["probes"]] == [("accuracy", "passed"), ("interrupt", "interrupted")]
    assert "interrupted" in (run_dir / "report.md").read_text()


def test_only_selects_probes_and_rejects_unknown(suite_factory):
    suite = suite_factory("  - probe: accuracy\n  - probe: accuracy\n    id: again\n")
    assert invoke("run", str(suite), "--only", "again", "--allow-skips").exit_code == 0
    _, report = only_run(suite.parent / "reports", "tiny")
    assert [p["id"] for p in report["probes"]] == ["again"]
    assert "did you mean 'again'" in one_line_error(invoke("run", str(suite), "--only", "agian"))
    both = suite_factory("  - probe: accuracy\n  - probe: accuracy\n    id: again\n  - probe: accuracy\n    id: third\n")
    assert invoke("run", str(both), "--only", "again,third", "--allow-skips", "--out", str(both.parent / "c")).exit_code == 0
    _, report = only_run(both.parent / "c", "tiny")
    assert [p["id"] for p in report["probes"]] == ["again", "third"]  # comma-separated, as users type it


def test_model_and_data_overrides(suite_factory, tiny_clf_dir, sst_tsv, tmp_path):
    suite = suite_factory(model=str(tmp_path / "absent"), data=str(tmp_path / "absent.tsv"))
    result = invoke("run", str(suite), "--model", str(tiny_clf_dir), "--data", str(sst_tsv), "--limit", "4")
    assert result.exit_code == 0, result.output  # the probe's defaults held
    _, report = only_run(suite.parent / "reports", "tiny")
    assert report["model"] == str(tiny_clf_dir) and report["probes"][0]["metrics"]["examples"] == 4


def test_validate_does_not_load_the_model(suite_factory, tmp_path):
    suite = suite_factory(model="some-org/some-model")  # a hub id: nothing is fetched to validate
    result = invoke("validate", str(suite))
    assert result.exit_code == 0 and "ok" in result.output


def test_validate_reports_every_problem_at_once_with_the_file(suite_factory, tmp_path, tiny_clf_dir):
    suite = suite_factory(
        "  - probe: accuracy\n    params: {bootstrapp: 10}\n"
        "  - probe: universal-trigger\n    params: {target_label: postive}\n"
        "  - probe: accuracy\n    id: other\n    data: {loader: arcct, path: x}\n"
        "  - probe: accuracy\n    id: folder\n    data: {path: '" + str(tmp_path) + "'}\n",
        data=str(tmp_path / "absent.tsv"))
    head, problems = error_lines(invoke("validate", str(suite)))
    assert head == f"error: {suite}: 5 problems:" and len(problems) == 5  # numbered, one per line
    assert problems[0].startswith("probes[0].params.bootstrapp: unknown parameter (did you mean 'bootstrap'?)")
    line = " ".join(problems)
    assert "probes[1].params.target_label: 'postive' is not a class of" in line and "did you mean 'positive'" in line
    assert "probes[2].data.loader: no data loader 'arcct' (did you mean 'arct'?)" in line
    assert "is a folder, not a data file" in line and "absent.tsv' does not exist" in line
    # a run finds the same problems before it loads anything or creates a run folder
    assert error_lines(invoke("run", str(suite))) == (head, problems)
    assert not (suite.parent / "reports").exists()


def test_list_shows_plugins_and_probes():
    result = invoke("list")
    assert result.exit_code == 0
    assert "bertprobe.probes.accuracy.probe" in result.output and "built-in" in result.output
    assert "accuracy" in result.output and "predictions" in result.output


@pytest.mark.parametrize("columns", ["80", "200"])
def test_list_never_cuts_a_plugin_or_probe_name(monkeypatch, columns):
    from bertprobe.plugins import build_plugins

    monkeypatch.setenv("COLUMNS", columns)
    output = invoke("list").output
    plugins = build_plugins()
    words = {w for line in output.splitlines() for w in line.split()}
    assert {r["name"] for r in plugins.describe()} <= words
    assert set(plugins.probes.names()) <= words
    assert max(len(line) for line in output.splitlines()) <= max(int(columns), 100)


def test_debug_shows_traceback():
    result = CliRunner().invoke(main, ["--debug", "run", "nope.yaml"])
    assert result.exit_code == 2 and "Traceback" in result.stderr


@pytest.mark.parametrize(
    "argv, message",
    [(["run", "x.yaml", "--dtype", "float64"], "Invalid value for '--dtype'"),
     (["frobnicate"], "No such command 'frobnicate'"),
     (["run"], "missing SUITE")],
)
def test_usage_errors_are_one_line(argv, message, capsys):
    from bertprobe.cli import entry_point

    with pytest.raises(SystemExit) as exit_info:
        entry_point(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0] and "--help" in err[0]


def test_entry_point_passes_exit_codes(suite_factory, capsys):
    from bertprobe.cli import entry_point

    suite = suite_factory("  - probe: accuracy\n    expect: {accuracy: {max: -1}}\n")
    with pytest.raises(SystemExit) as exit_info:
        entry_point(["run", str(suite), "-q"])
    assert exit_info.value.code == 1
    with pytest.raises(SystemExit) as exit_info:
        entry_point(["--version"])
    assert exit_info.value.code == 0 and "0.1.0" in capsys.readouterr().out


def test_report_json_round_trips(suite_factory):
    from bertprobe.reporters.json_report import read_report

    suite = suite_factory("  - probe: accuracy\n    expect: {accuracy: {min: 0.0}}\n")
    assert invoke("run", str(suite)).exit_code == 0
    run_dir, raw = only_run(suite.parent / "reports", "tiny")
    report = read_report(run_dir / "report.json")
    assert report.ok and report.score() == 1.0 and report.probes[0].metrics["accuracy"].ci is not None
    decisions = raw.pop("decisions")  # derived from the rest: written for readers, rebuilt by decide()
    assert report.to_dict() == raw
    from bertprobe.results.verdict import decide

    assert decisions == [v.to_dict() for v in decide(report)] and decisions[0]["decision"] == "ship"


def test_nothing_checked_exits_5_unless_skips_are_allowed(suite_factory, with_test_probes):
    suite = suite_factory("  - probe: needs-mlm\n  - probe: accuracy\n    expect: {'*': off}\n")  # defaults off
    result = invoke("run", str(suite))
    assert result.exit_code == 5, result.output
    assert "nothing was checked" in result.stderr and "--allow-skips" in result.stderr
    assert "no expectation was checked; probes: 0 passed, 0 failed, 0 errored, 1 skipped, 1 measured" in result.stdout
    # a measured probe shows its key metric, a skipped one its reason
    assert re.search(r"accuracy\s+MEASURED\s+0/0\s+\S+\s+accuracy 0\.\d+", result.stdout), result.stdout
    assert "lacks: mlm" in result.stdout
    assert invoke("run", str(suite), "--allow-skips").exit_code == 0


def test_sigterm_finishes_the_report_as_interrupted_and_exits_143(suite_factory, with_test_probes):
    suite = suite_factory("  - probe: accuracy\n    expect: {accuracy: {min: 0}}\n  - probe: sigterm\n  - probe: accuracy\n    id: never\n")
    result = invoke("run", str(suite))
    assert result.exit_code == 143, result.output
    run_dir, report = only_run(suite.parent / "reports", "tiny")
    assert report["status"] == "interrupted" and "SIGTERM" in report["message"]
    assert [(p["id"], p["status"]) for p in report["probes"]] == [("accuracy", "passed"), ("sigterm", "interrupted")]
    assert f"partial report in {run_dir}" in result.stderr
    assert '"run_finish"' in (run_dir / "events.jsonl").read_text()


def test_internal_error_aborts_the_report_and_exits_3(suite_factory, monkeypatch):
    real = bertprobe.plugins.build_plugins
    monkeypatch.setattr(bertprobe.plugins, "build_plugins", lambda **kw: real(extra=[HarnessBug()], **kw))
    suite = suite_factory("  - probe: accuracy\n")
    result = invoke("run", str(suite))
    line = one_line_error(result, 3)
    assert "internal error: ValueError: reporter plugin bug" in line and "partial report in" in line
    run_dir, report = only_run(suite.parent / "reports", "tiny")
    assert report["status"] == "aborted" and "reporter plugin bug" in report["message"]
    assert "run_traceback" in (run_dir / "events.jsonl").read_text()


def test_seed_and_threads_reach_the_probe_and_the_report(suite_factory, with_test_probes):
    suite = suite_factory("  - probe: threads\n", head="threads: 2\n")
    assert invoke("run", str(suite), "--allow-skips").exit_code == 0
    _, report = only_run(suite.parent / "reports", "tiny")
    assert report["threads"] == 2 and report["probes"][0]["metrics"]["threads"] == 2 and report["seed"] == 3
    out = suite.parent / "again"
    assert invoke("run", str(suite), "--allow-skips", "--threads", "1", "--seed", "99", "--out", str(out)).exit_code == 0
    _, report = only_run(out, "tiny")
    assert report["threads"] == 1 and report["probes"][0]["metrics"] == {"threads": 1.0, "seed": 99.0}
    assert report["seed"] == 99


def test_default_threads_never_exceed_the_cores_available():
    import os

    from bertprobe.environment import default_threads

    assert 1 <= default_threads() <= len(os.sched_getaffinity(0))


def test_set_overrides_are_typed_like_yaml(suite_factory):
    suite = suite_factory("  - probe: accuracy\n    expect: {accuracy: {min: 0}}\n")
    result = invoke("run", str(suite), "--set", "probes.accuracy.params.bootstrap=0", "--set", "seed=42",
                    "--set", "data.limit=4")
    assert result.exit_code == 0, result.output
    _, report = only_run(suite.parent / "reports", "tiny")
    (probe,) = report["probes"]
    assert probe["params"]["bootstrap"] == 0 and report["seed"] == 42 and probe["metrics"]["examples"] == 4
    assert "did you mean 'accuracy'" in one_line_error(invoke("run", str(suite), "--set", "probes.acuracy.params.x=1"))
    assert "expected PATH=VALUE" in one_line_error(invoke("run", str(suite), "--set", "seed"))
    assert "params.bogus: unknown parameter" in one_line_error(
        invoke("validate", str(suite), "--set", "probes.accuracy.params.bogus=1"))


def test_column_flags_and_label_map(suite_factory, tmp_path):
    data = tmp_path / "reviews.csv"
    data.write_text("review,sentiment\nthe movie was good,pos\nboring and dull,neg\nit was fun,pos\nthe worst acting,neg\n")
    suite = suite_factory("  - probe: accuracy\n    expect: {accuracy: {min: 0}}\n", data=str(data))
    # the suite says text: sentence, label: label; the file has review/sentiment with pos/neg labels
    assert "no column 'sentence'" in one_line_error(invoke("run", str(suite)))
    line = one_line_error(invoke("run", str(suite)))
    assert "did you mean 'sentiment'" not in line and "--text COL" in line  # the label column is no hint for text
    _, problems = error_lines(invoke("run", str(suite), "--text", "review", "--label", "sentiment"))
    # every bad row, those with the same problem as one item
    assert [p.split(" of ")[0] for p in problems] == ["label 'pos' on lines 2 and 4", "label 'neg' on lines 3 and 5"]
    assert all("--label-map neg=negative,pos=positive" in p for p in problems)
    result = invoke("run", str(suite), "--text", "review", "--label", "sentiment", "--out", str(tmp_path / "flag"),
                    "--label-map", "neg=negative,pos=positive")
    assert result.exit_code == 0, result.output
    _, report = only_run(tmp_path / "flag", "tiny")
    assert report["probes"][0]["metrics"]["examples"] == 4
    result = invoke("run", str(suite), "--text", "review", "--label", "1", "--out", str(tmp_path / "ok"),
                    "--set", "data.label_map={pos: positive, neg: negative}")
    assert result.exit_code == 0, result.output
    _, report = only_run(tmp_path / "ok", "tiny")
    assert report["probes"][0]["metrics"]["examples"] == 4
    assert {"accuracy_positive", "accuracy_negative"} <= set(report["probes"][0]["metrics"])


def test_a_missing_label_column_stops_before_the_model_loads(suite_factory, tmp_path):
    data = tmp_path / "reviews.csv"
    data.write_text("review,sentiment\nthe movie was good,positive\nboring and dull,negative\n")
    unnamed = write_suite(tmp_path / "unnamed.yaml", suite_factory().read_text().replace(
        "text: sentence, label: label", "text: review"))
    result = invoke("run", str(unnamed), "--data", str(data))
    line = one_line_error(result)
    assert "probe accuracy needs labelled data" in line and "pass --label sentiment" in line
    assert "partial report" not in line and not list((tmp_path / "reports").glob("tiny-*"))  # no run folder
    checked = one_line_error(invoke("validate", str(unnamed), "--data", str(data)))  # validate reads it too
    assert "probe accuracy needs labelled data" in checked and "pass --label sentiment" in checked
    assert invoke("validate", str(unnamed), "--data", str(data), "--label", "sentiment").exit_code == 0
    # the same file with the label named on the command line runs
    result = invoke("run", str(unnamed), "--data", str(data), "--label", "sentiment", "--out", str(tmp_path / "ok"))
    assert result.exit_code == 0, result.output  # the accuracy probe's defaults held


def test_validate_takes_the_model_and_data_options_of_run(suite_factory, tmp_path, tiny_clf_dir):
    data = tmp_path / "reviews.csv"
    data.write_text("review,sentiment\ngood,pos\n")
    suite = suite_factory(model=str(tmp_path / "absent"))
    assert "does not exist" in one_line_error(invoke("validate", str(suite)))
    result = invoke("validate", str(suite), "--model", str(tiny_clf_dir), "--data", str(data), "--text", "review",
                    "--label", "sentiment", "--label-map", "pos=positive")
    assert result.exit_code == 0 and "ok" in result.output, result.output
    line = one_line_error(invoke("validate", str(suite), "--model", f"a={tiny_clf_dir}", "--model", f"b={tiny_clf_dir}",
                                 "--baseline", "c"))
    assert "--baseline: no model named 'c'" in line


def test_baseline_gates_an_ad_hoc_matrix_from_the_command_line(suite_factory, tmp_path, tiny_clf_dir):
    suite = suite_factory("  - probe: accuracy\n    expect: {accuracy: {min: 0}}\n")
    for how in (["--baseline", "deployed"], ["--set", "compare.baseline=deployed"]):
        out = tmp_path / how[0].strip("-")
        result = invoke("run", str(suite), "--model", f"deployed={tiny_clf_dir}", "--model", f"candidate={tiny_clf_dir}",
                        "--out", str(out), *how)
        assert result.exit_code == 0, result.output
        run_dir, report = only_run(out, "tiny")
        events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
        (gate,) = [e for e in events if e["event"] == "gate"]
        assert gate["baseline"] == "deployed" and gate["deltas"] and not gate["regressions"]
        assert "decision: candidate: may replace deployed" in result.output
        assert "may replace deployed" in (run_dir / "report.md").read_text()
        assert "Decision: candidate: may replace deployed" in (run_dir / "report.html").read_text()
        assert [d["decision"] for d in report["decisions"]] == ["baseline", "may replace"]


def test_describe_gives_each_param_its_meaning_and_list_fits_100_columns():
    from bertprobe.params import param_docs
    from bertprobe.probes.accuracy import AccuracyParams
    from bertprobe.probes.universal_trigger.params import TriggerParams

    result = invoke("describe", "universal-trigger")
    assert result.exit_code == 0 and "``" not in result.output
    assert re.search(r"target_label +str or int or null +None +the class whose examples are attacked", result.output)
    for params in (TriggerParams, AccuracyParams):
        import dataclasses

        assert set(param_docs(params)) == {f.name for f in dataclasses.fields(params)}
    cloze = invoke("describe", "cloze").output  # metric meanings too, by pattern
    assert re.search(r"top1_accuracy\*\s+higher is better\s+bertprobe's, not Ettinger's: share of items", cloze)
    assert "did you mean 'universal-trigger'" in one_line_error(invoke("describe", "trigger"))
    listing = invoke("list")
    assert listing.exit_code == 0 and max(len(line) for line in listing.output.splitlines()) <= 100


def test_every_builtin_probe_documents_every_param_and_metric():
    """What `describe` and the docs' probe pages show: no param or metric without its meaning."""
    import dataclasses

    from bertprobe.params import param_docs
    from bertprobe.plugins import build_plugins

    plugins = build_plugins()
    for name in plugins.probes.names():
        cls = plugins.probes.get(name)
        fields = {f.name for f in dataclasses.fields(cls.Params)}
        assert fields - set(param_docs(cls.Params)) == set(), name
        assert isinstance(cls.metrics, dict) and all(cls.metrics.values()), name


def test_offline_run_names_every_unreachable_hub_id_at_once_before_a_run_folder(suite_factory, monkeypatch):
    import bertprobe.hub as hub

    monkeypatch.setattr(hub, "hub_reachable", lambda timeout=3.0: False)
    for name in hub.OFFLINE_VARS:  # the tests run offline on purpose; here the user did not ask for it
        monkeypatch.delenv(name, raising=False)
    suite = suite_factory(model="someone/not-cached-model", data="someone/hub-dataset")
    error = one_line_error(invoke("run", str(suite)))
    assert "needs 2 source(s)" in error and "model 'someone/not-cached-model' (pass --model PATH)" in error
    assert "dataset 'someone/hub-dataset' (pass --data PATH)" in error and "HF_HUB_OFFLINE=1" in error
    assert run_dirs(suite) == []  # no "partial report" folder for a run that never started
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # caches on purpose: the loaders decide, one at a time
    assert "someone/hub-dataset" in one_line_error(invoke("run", str(suite)))


def test_suite_limit_zero_is_refused(suite_factory):
    suite = suite_factory()
    text = suite.read_text().replace("label: label}", "label: label, limit: 0}")
    suite.write_text(text)
    assert "limit must be at least 1" in one_line_error(invoke("validate", str(suite)))


def test_describe_teaches_a_probe_and_list_shows_reporters_and_loaders():
    result = invoke("describe", "universal-trigger")
    assert result.exit_code == 0
    assert "Wallace" in result.output and "Where we deviate" in result.output
    assert re.search(r"length\s+int\s+3", result.output) and "target_label" in result.output
    assert "accuracy_after" in result.output
    listing = invoke("list").output
    assert "junit" in listing and "report.junit.xml" in listing and "arct" in listing
    assert "did you mean" in one_line_error(invoke("describe", "universal-triger")) or \
        "unknown probe" in one_line_error(invoke("describe", "universal-triger"))


def test_resume_from_a_fresh_shell_expands_the_suite_as_the_run_did(suite_factory, with_test_probes, tiny_clf_dir,
                                                                    monkeypatch):
    InterruptOnce.calls.clear()
    suite = suite_factory("  - probe: accuracy\n    expect: {accuracy: {min: 0}}\n  - probe: interrupt-once\n",
                          model="${BP_TEST_MODEL}")
    suite.write_text(suite.read_text().replace("seed: 3", "seed: ${BP_TEST_SEED:-3}"))
    monkeypatch.setenv("BP_TEST_MODEL", str(tiny_clf_dir))
    monkeypatch.setenv("BP_TEST_SEED", "5")
    assert invoke("run", str(suite)).exit_code == 130
    run_dir, _ = only_run(suite.parent / "reports", "tiny")
    monkeypatch.delenv("BP_TEST_MODEL")  # a fresh shell: the run's variables are gone
    monkeypatch.delenv("BP_TEST_SEED")
    named = one_line_error(invoke("run", str(suite), "--resume", str(run_dir)))  # the suite as this shell reads it
    assert "environment variable BP_TEST_MODEL is not set" in named
    monkeypatch.setenv("BP_TEST_MODEL", str(tiny_clf_dir))
    changed = one_line_error(invoke("run", str(suite), "--resume", str(run_dir)))
    assert "the suite changed since the run" in changed and "${BP_TEST_SEED} was '5', now unset" in changed
    monkeypatch.delenv("BP_TEST_MODEL")
    resumed = invoke("run", "--resume", str(run_dir))  # bare: the run's own suite, options and variables
    assert resumed.exit_code == 0, resumed.output
    report = json.loads((run_dir / "report.json").read_text())
    assert report["status"] == "completed" and report["seed"] == 5


def test_resume_keeps_finished_probes_and_runs_the_rest(suite_factory, with_test_probes):
    InterruptOnce.calls.clear()
    suite = suite_factory("  - probe: accuracy\n    expect: {accuracy: {min: 0}}\n  - probe: interrupt-once\n"
                          "  - probe: accuracy\n    id: after\n    expect: {accuracy: {min: 0}}\n")
    first = invoke("run", str(suite))
    assert first.exit_code == 130 and "--resume" in json.loads(
        (only_run(suite.parent / "reports", "tiny")[0] / "report.json").read_text())["message"]
    run_dir, before = only_run(suite.parent / "reports", "tiny")
    kept_duration = before["probes"][0]["duration_s"]
    resumed = invoke("run", "--resume", str(run_dir))  # no SUITE: the run's own suite and options
    assert resumed.exit_code == 0, resumed.output
    assert "kept accuracy from the interrupted run" in resumed.stderr
    report = json.loads((run_dir / "report.json").read_text())
    assert report["status"] == "completed"
    assert [(p["id"], p["status"]) for p in report["probes"]] == [
        ("accuracy", "passed"), ("interrupt-once", "measured"), ("after", "passed")]
    assert report["probes"][0]["duration_s"] == kept_duration  # not run again
    assert InterruptOnce.calls == ["run", "run"]
    kinds = [json.loads(line)["event"] for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert kinds.count("run_start") == 1 and kinds.count("run_resumed") == 1
    assert len(list((suite.parent / "reports").glob("tiny-*"))) == 1  # the same folder, no new one
    assert len(report["resumed"]) == 1 and "1 result(s) kept" in report["resumed"][0]  # accuracy, kept
    markdown = (run_dir / "report.md").read_text()
    assert "| resumed" in markdown and "1 result(s) kept" in markdown  # a reader is told the run was finished later
    assert "nothing to resume" in one_line_error(invoke("run", "--resume", str(run_dir)))


def test_resume_continues_a_sweep_from_its_last_finished_unit(suite_factory, with_test_probes, tmp_path):
    Sweep.computed.clear()
    suite = suite_factory("  - probe: sweep\n    expect: {total: {min: 0}}\n")
    assert invoke("run", str(suite)).exit_code == 130
    assert Sweep.computed == ["u0", "u1", "u2", "u3", "interrupted"]
    run_dir, partial = only_run(suite.parent / "reports", "tiny")
    assert partial["probes"][0]["status"] == "interrupted" and partial["probes"][0]["details"]["units_finished"] == 4
    assert "4 work unit(s) it finished are kept" in partial["probes"][0]["message"]
    assert invoke("run", str(suite), "--resume", str(run_dir)).exit_code == 0
    assert Sweep.computed[5:] == ["u4", "u5"]  # units 0-3 were not computed again
    resumed = json.loads((run_dir / "report.json").read_text())["probes"][0]
    Sweep.computed.clear()
    Sweep.computed.append("u4")  # no interruption this time
    assert invoke("run", str(suite), "--out", str(tmp_path / "fresh")).exit_code == 0
    _, fresh = only_run(tmp_path / "fresh", "tiny")
    assert resumed["details"]["values"] == fresh["probes"][0]["details"]["values"]
    assert resumed["metrics"] == fresh["probes"][0]["metrics"]


def test_resume_refuses_when_the_suite_or_data_changed(suite_factory, with_test_probes, sst_tsv, tmp_path):
    InterruptOnce.calls.clear()
    suite = suite_factory("  - probe: accuracy\n  - probe: interrupt-once\n")
    assert invoke("run", str(suite)).exit_code == 130
    run_dir, _ = only_run(suite.parent / "reports", "tiny")
    other = tmp_path / "other.tsv"
    other.write_text(sst_tsv.read_text().replace("fun", "great fun"))
    line = one_line_error(invoke("run", str(suite), "--resume", str(run_dir), "--data", str(other)))
    assert "the suite changed since the run (data differ)" in line
    line = one_line_error(invoke("run", str(suite), "--resume", str(run_dir), "--seed", "7"))
    assert "(seed differ)" in line
    assert "not a bertprobe run folder" in one_line_error(invoke("run", "--resume", str(tmp_path)))
    sst_tsv.write_text(sst_tsv.read_text().replace("fun", "great fun"))  # same file, new content
    assert "the data changed since the run (fingerprint" in one_line_error(invoke("run", "--resume", str(run_dir)))


def test_resume_alone_works_for_a_suite_given_by_a_relative_path(tmp_path, tiny_clf_dir, sst_tsv, monkeypatch,
                                                                  with_test_probes):
    InterruptOnce.calls.clear()
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "s.yaml").write_text(
        f"suite: rel\nmodel: {{path: '{tiny_clf_dir}', device: cpu}}\ndata: {{path: '{sst_tsv}'}}\n"
        "report: {dir: ../reports}\nprobes:\n  - probe: accuracy\n    expect: {accuracy: {min: 0}}\n"
        "  - probe: interrupt-once\n")
    monkeypatch.chdir(tmp_path)
    assert invoke("run", "suites/s.yaml").exit_code == 130
    run_dir, _ = only_run(tmp_path / "reports", "rel")
    monkeypatch.chdir(tmp_path / "suites")  # resume from elsewhere, naming only the run folder
    result = invoke("run", "--resume", str(run_dir))
    assert result.exit_code == 0, result.output
    assert json.loads((run_dir / "report.json").read_text())["status"] == "completed"


def test_index_lists_every_run_latest_points_at_the_newest_and_clean_removes_aborted(suite_factory, tmp_path):
    suite = suite_factory("  - probe: accuracy\n    expect: {accuracy: {min: 0}}\n")
    reports = suite.parent / "reports"
    assert invoke("run", str(suite)).exit_code == 0
    bad = tmp_path / "bad.tsv"
    bad.write_text("sentence\tlabel\ngood\tmaybe\n")  # an unknown label in a probe's own data: found after the start
    aborting = write_suite(tmp_path / "aborting.yaml", suite.read_text().split("probes:")[0]
                           + f"probes:\n  - probe: accuracy\n    data: {{path: '{bad}'}}\n")
    assert invoke("run", str(aborting)).exit_code == 2  # aborted, nothing kept
    assert invoke("run", str(suite)).exit_code == 0
    runs = sorted(p.name for p in reports.glob("tiny-*"))
    assert len(runs) == 3
    index = (reports / "index.html").read_text()
    assert all(f"href='{name}/report.html'" in index for name in runs)
    assert index.count("<tr class='aborted'>") == 1
    newest = max(runs, key=lambda n: json.loads((reports / n / "report.json").read_text())["started_at"] + n)
    assert (reports / "latest").is_symlink() and (reports / "latest").resolve().name == newest
    result = invoke("clean", "--aborted", "--dir", str(reports))
    assert result.exit_code == 0 and "removed 1 run(s)" in result.output
    assert len(list(reports.glob("tiny-*"))) == 2 and "aborted" not in (reports / "index.html").read_text().split("</p>")[1]
    removed = invoke("clean", str(reports / newest))
    assert removed.exit_code == 0 and not (reports / newest).exists()
    assert (reports / "latest").resolve().name != newest
    assert "not a run folder" in one_line_error(invoke("clean", str(reports / "nope")))
    assert "pass --aborted" in one_line_error(invoke("clean"))


def test_several_suites_run_one_after_another_and_exit_with_the_worst_code(tmp_path, tiny_clf_dir, sst_tsv):
    paths = []
    for name, bound in (("loose", 0.0), ("strict", 1.01)):
        text = (f"suite: {name}\nmodel: {{path: '{tiny_clf_dir}', device: cpu}}\n"
                f"data: {{path: '{sst_tsv}', text: sentence, label: label}}\n"
                f"report: {{dir: '{tmp_path / 'reports'}'}}\nprobes:\n  - probe: accuracy\n"
                f"    expect: {{accuracy: {{min: {bound}}}}}\n")
        paths.append(write_suite(tmp_path / f"{name}.yaml", text))
    result = invoke("run", *map(str, paths), "-q")
    assert result.exit_code == 1, result.output  # 'strict' fails; 'loose' passes
    assert only_run(tmp_path / "reports", "loose")[1]["probes"][0]["status"] == "passed"
    assert only_run(tmp_path / "reports", "strict")[1]["probes"][0]["status"] == "failed"
    assert result.output.count("== ") == 2
    # a bad suite among them stops everything before any runs
    bad = write_suite(tmp_path / "bad.yaml", "suite: bad\nprobes: []\n")
    before = len(list((tmp_path / "reports").iterdir()))
    result = invoke("run", str(paths[0]), str(bad))
    assert result.exit_code == 2 and "probes" in result.output
    assert len(list((tmp_path / "reports").iterdir())) == before
    result = invoke("run", str(paths[0]), str(paths[1]), "--resume", str(tmp_path))
    assert result.exit_code == 2 and "--resume continues one run" in result.output


def test_executor_names_are_checked_with_did_you_mean(suite_factory):
    suite = suite_factory(head="executor: rey\n")
    result = invoke("validate", str(suite))
    assert result.exit_code == 2 and "no executor named 'rey'" in result.output and "did you mean 'ray'" in result.output
    result = invoke("run", str(suite_factory()), "--executor", "loca")
    assert result.exit_code == 2 and "did you mean 'local'" in result.output
    suite = suite_factory(head="executor: {name: ray, workers: 0}\n")
    result = invoke("validate", str(suite))
    assert result.exit_code == 2 and "executor.workers: expected a number >= 1" in result.output


def test_ray_executor_without_ray_installed_is_a_one_line_error(suite_factory, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # what an install without the [ray] extra looks like
    suite = suite_factory()
    result = invoke("run", str(suite), "--executor", "ray")
    assert result.exit_code == 2, result.output
    assert "executor 'ray' needs Ray" in result.output and "pip install -e '.[ray]'" in result.output
    assert "Traceback" not in result.output
    assert not (suite.parent / "reports").exists()  # nothing started, no empty run folder


def test_resume_refuses_when_the_weights_changed_and_names_both_hashes(suite_factory, with_test_probes, tmp_path):
    """The weights a model was loaded from are part of the run state folded from the events: a resumed run
    loading other weights under the same name stops with both hashes, before any probe runs again."""
    from bertprobe.testing import save_tiny_model

    InterruptOnce.calls.clear()
    model = save_tiny_model(tmp_path / "m", seed=1)
    suite = suite_factory("  - probe: accuracy\n  - probe: interrupt-once\n", model=str(model))
    assert invoke("run", str(suite)).exit_code == 130
    run_dir, before = only_run(suite.parent / "reports", "tiny")
    save_tiny_model(tmp_path / "m", seed=2)  # same folder, other weights
    line = one_line_error(invoke("run", str(suite), "--resume", str(run_dir)))
    assert "the weights of model 'm' changed since the run" in line
    assert before["models"][0]["sha256"][:12] in line


def test_terminal_notes_wrap_to_the_width_and_keep_every_word():
    """On a terminal the probe table's note column wraps so no line passes the width; every word stays, in order."""
    from tabulate import tabulate

    from bertprobe.reporters.summary import OVERVIEW_HEADERS, last_column_widths

    note = ("failure_rate.capability.fairness 0.6486 (expected <= 0.35 by default); fairness_gap.person_origin 0.2447 "
            "(expected <= 0.1 on its 95% interval by default); worst test: swap_organisation (22/24 failed)")
    rows = [["behaviour", "FAILED", "1/5", "12.1s", note], ["calibration", "PASSED", "1/1", "0.0s", "ECE 0.05"]]
    widths = last_column_widths(rows, OVERVIEW_HEADERS, 100)
    lines = tabulate(rows, headers=OVERVIEW_HEADERS, tablefmt="simple", maxcolwidths=widths).splitlines()
    assert max(len(line) for line in lines) <= 100 and len(lines) > 4  # the long note took several lines
    assert " ".join(line[len(lines[1].rsplit(" ", 1)[0]) + 1:].strip() for line in lines[2:]).split() == \
        (note + " ECE 0.05").split()
    assert last_column_widths(rows, OVERVIEW_HEADERS, None) is None  # piped: one line per probe
    assert last_column_widths(rows[1:], OVERVIEW_HEADERS, 100) is None  # fits already


def test_quiet_leaves_the_callers_environment_as_it_was(suite_factory, monkeypatch):
    """run -q keeps progress off the terminal for its own run only: a caller in the same process (an embedding
    program, a test) gets its environment back."""
    import os

    suite = suite_factory("  - probe: accuracy\n    expect: {accuracy: {min: 0.0}}\n")
    monkeypatch.delenv("BERTPROBE_NO_PROGRESS", raising=False)
    assert invoke("run", str(suite), "-q").exit_code == 0
    assert "BERTPROBE_NO_PROGRESS" not in os.environ
    monkeypatch.setenv("BERTPROBE_NO_PROGRESS", "yes")
    assert invoke("run", str(suite), "-q").exit_code == 0
    assert os.environ["BERTPROBE_NO_PROGRESS"] == "yes"


def test_a_runs_fingerprint_keeps_the_old_stride_default() -> None:
    """model.stride's default became None (the task's own: 32 for a tagger, 128 for a reader); a suite that never
    set it fingerprints as it did when the default was 32, so a run recorded then still resumes."""
    from dataclasses import replace

    from bertprobe.run.resume import suite_fingerprint
    from bertprobe.suite import load_suite

    suite = load_suite(REPO / "suites" / "sst2.yaml")
    assert suite.models and all(m.stride is None for m in suite.models)
    pinned = replace(suite, models=[replace(m, stride=32) for m in suite.models])
    other = replace(suite, models=[replace(m, stride=16) for m in suite.models])
    assert suite_fingerprint(suite)["models"] == suite_fingerprint(pinned)["models"] != suite_fingerprint(other)["models"]
