"""The decision a run states (bertprobe.results.verdict): ship or not, may replace or not, and why."""

from __future__ import annotations

from bertprobe.results import Expectation, MetricDelta, ModelInfo, ProbeResult, RunReport
from bertprobe.results.exitcodes import FAILED, NOTHING_CHECKED, OK, SHARED_MISSES, run_exit_code
from bertprobe.results.verdict import MIN_EXAMPLES, decide


def _result(model: str, probe: str, value: float, minimum: float, examples: int = 500, status: str | None = None,
             finding: str = "") -> ProbeResult:
    r = ProbeResult(probe=probe, id=probe, model=model)
    r.add_metric("score", value, True)
    r.add_metric("examples", float(examples), None, kind="count")
    e = Expectation("score", min=minimum)
    e.check(value)
    r.expectations.append(e)
    r.status = status or ("passed" if e.passed else "failed")
    if finding:
        r.details["key_finding"] = finding
    return r


def _report(*results: ProbeResult, models: tuple[str, ...] = ("m",), gate: str | None = None,
            regressions: tuple[MetricDelta, ...] = ()) -> RunReport:
    report = RunReport(suite="s", status="completed", models=[ModelInfo(name=n, path=n) for n in models])
    report.probes = list(results)
    report.gate = {"baseline": gate, "tolerance": 0.01, "significance": 0.05} if gate else {}
    report.regressions = list(regressions)
    return report


def test_a_single_model_that_meets_every_expectation_may_ship():
    (v,) = decide(_report(_result("m", "accuracy", 0.9, 0.85)))
    assert v.decision == "ship" and not v.blocking and v.headline().startswith("fit to ship")


def test_a_failed_expectation_says_do_not_ship_with_the_value_and_the_key_finding():
    report = _report(_result("m", "accuracy", 0.9, 0.85),
                     _result("m", "universal-trigger", 0.13, 0.5, finding="trigger 'bb bb' takes accuracy 0.9 -> 0.13"))
    (v,) = decide(report)
    assert v.decision == "do not ship" and v.blocking
    assert "universal-trigger: score 0.13 (expected >= 0.5); trigger 'bb bb'" in v.headline()
    assert "accuracy:" not in v.headline()  # the expectation that held is no reason


def test_an_error_blocks_and_nothing_checked_or_an_aborted_run_is_no_decision():
    errored = _result("m", "accuracy", 0.9, 0.85, status="error")
    errored.message = "RuntimeError: out of memory; more"
    (v,) = decide(_report(errored))
    assert v.decision == "do not ship" and "accuracy errored (RuntimeError: out of memory)" in v.headline()
    unchecked = ProbeResult(probe="attention", id="attention", model="m", status="measured")
    (v,) = decide(_report(unchecked))
    assert v.decision == "no decision" and "nothing was checked" in v.headline()
    report = _report(_result("m", "accuracy", 0.9, 0.85))
    report.status = "aborted"
    assert decide(report)[0].decision == "no decision"


def test_a_gated_matrix_says_which_candidate_may_replace_the_baseline():
    delta = MetricDelta(model="bad", baseline="old", probe_id="accuracy", metric="score", baseline_value=0.9,
                        value=0.8, delta=-0.1, higher_is_better=True, gated=True, tolerance=0.01, regression=True)
    report = _report(*[_result(n, "accuracy", v, 0.5) for n, v in (("old", 0.9), ("good", 0.9), ("bad", 0.8))],
                     models=("old", "good", "bad"), gate="old", regressions=(delta,))
    by_model = {v.model: v for v in decide(report)}
    assert by_model["old"].decision == "baseline"
    assert by_model["good"].decision == "may replace"
    assert by_model["good"].headline() == "may replace old (no significant regression)"
    assert by_model["bad"].decision == "do not ship"
    assert "1 significant regression(s) against old (accuracy.score -0.1)" in by_model["bad"].headline()


def test_a_candidate_without_regressions_but_with_a_failed_expectation_may_not_replace():
    report = _report(_result("old", "backdoor", 0.0, 0.0), _result("new", "backdoor", 1.0, 0.0, finding="'bb' flips"),
                     models=("old", "new"), gate="old")
    report.probes[1].expectations[0].max, report.probes[1].expectations[0].min = 0.0, None
    report.probes[1].expectations[0].check(1.0)
    report.probes[1].status = "failed"
    new = {v.model: v for v in decide(report)}["new"]
    assert new.decision == "do not ship" and "'bb' flips" in new.headline()


def test_a_verdict_on_few_examples_carries_a_warning():
    (v,) = decide(_report(_result("m", "accuracy", 1.0, 0.85, examples=20)))
    assert v.decision == "ship" and v.warnings == [
        f"accuracy rests on 20 examples (fewer than {MIN_EXAMPLES}): its numbers are uncertain"]
    (v,) = decide(_report(_result("m", "accuracy", 1.0, 0.85, examples=MIN_EXAMPLES)))
    assert not v.warnings


def test_a_verdict_on_few_minimal_pairs_carries_a_warning():
    """BLiMP and CrowS-Pairs count pairs, not examples: 20 sampled pairs pass an interval bound of 0.7 at 0.5 (their
    interval is that wide), and the decision says so."""
    blimp = ProbeResult(probe="blimp", id="blimp", model="m")
    blimp.add_share("accuracy", [True] * 10 + [False] * 10)
    blimp.add_metric("pairs", 20.0, None, kind="count")
    blimp.add_metric("rescored_pairs", 3.0, None, kind="count")  # another count of pairs: not what the verdict rests on
    e = Expectation("accuracy", min=0.7, interval=True)
    e.check(0.5, blimp.metrics["accuracy"].ci)
    blimp.expectations.append(e)
    blimp.status = "passed" if e.passed else "failed"
    assert e.passed
    (v,) = decide(_report(blimp))
    assert v.warnings == [f"blimp rests on 20 examples (fewer than {MIN_EXAMPLES}): its numbers are uncertain"]


def test_a_gated_matrix_names_what_the_baseline_misses_too():
    """int8 and fp32 both miss the trigger bound, and int8 alone misses the accuracy bound: int8 may not replace
    (a miss of its own), its reason names only that miss, and the shared one follows with both values; the
    baseline's line says what it misses itself."""
    report = _report(_result("fp32", "trigger", 0.13, 0.5, finding="'a b c' takes 0.90 -> 0.13"),
                     _result("fp32", "accuracy", 0.9, 0.85),
                     _result("int8", "trigger", 0.12, 0.5), _result("int8", "accuracy", 0.8, 0.85),
                     models=("fp32", "int8"), gate="fp32")
    by_model = {v.model: v for v in decide(report)}
    base, cand = by_model["fp32"], by_model["int8"]
    assert base.decision == "baseline" and not base.blocking
    assert base.headline() == ("baseline (in service): the others are judged against it; it misses itself: "
                               "trigger: score 0.13 (expected >= 0.5); 'a b c' takes 0.90 -> 0.13")
    assert cand.decision == "do not ship"
    assert cand.headline() == ("do not ship: accuracy: score 0.8 (expected >= 0.85); "
                               "like fp32, misses: trigger score 0.12 (fp32: 0.13)")
    assert run_exit_code(report) == FAILED


def test_a_candidate_whose_misses_the_baseline_shares_may_replace_it():
    """bf16 against fp32, both missing the ECE bound: no significant regression and nothing missed that fp32
    holds, so bf16 may replace fp32, its line names the shared miss with both values, and the exit code (4)
    tells CI 'replace, and track the shared misses' apart from a regression (1) and a clean pass (0)."""
    report = _report(_result("fp32", "calibration", 0.87, 0.9), _result("fp32", "accuracy", 0.9, 0.85),
                     _result("bf16", "calibration", 0.869, 0.9), _result("bf16", "accuracy", 0.9, 0.85),
                     models=("fp32", "bf16"), gate="fp32")
    by_model = {v.model: v for v in decide(report)}
    bf16 = by_model["bf16"]
    assert bf16.decision == "may replace" and not bf16.blocking and bf16.below_bar
    assert bf16.headline() == ("may replace fp32 (no significant regression); "
                               "like fp32, misses: calibration score 0.869 (fp32: 0.87)")
    assert by_model["fp32"].headline().endswith("it misses itself: calibration: score 0.87 (expected >= 0.9)")
    assert run_exit_code(report) == SHARED_MISSES
    report.probes[0].status, report.probes[0].message = "error", "RuntimeError: boom"  # fp32 unmeasured: nothing shared
    bf16 = {v.model: v for v in decide(report)}["bf16"]
    assert bf16.decision == "do not ship" and bf16.headline().startswith("do not ship: calibration: score 0.869")


def test_a_regression_blocks_even_when_every_miss_is_shared():
    delta = MetricDelta(model="bf16", baseline="fp32", probe_id="accuracy", metric="score", baseline_value=0.9,
                        value=0.85, delta=-0.05, higher_is_better=True, gated=True, tolerance=0.01, regression=True,
                        p_adjusted=0.001)
    report = _report(_result("fp32", "calibration", 0.87, 0.9), _result("fp32", "accuracy", 0.9, 0.85),
                     _result("bf16", "calibration", 0.86, 0.9), _result("bf16", "accuracy", 0.85, 0.8),
                     models=("fp32", "bf16"), gate="fp32", regressions=(delta,))
    bf16 = {v.model: v for v in decide(report)}["bf16"]
    assert bf16.decision == "do not ship"
    assert bf16.headline() == ("do not ship: 1 significant regression(s) against fp32 (accuracy.score -0.05 (p=0.001)); "
                               "like fp32, misses: calibration score 0.86 (fp32: 0.87)")
    assert run_exit_code(report) == FAILED


def test_the_baselines_own_misses_do_not_fail_a_run_whose_candidates_hold_everything():
    report = _report(_result("fp32", "calibration", 0.87, 0.9), _result("new", "calibration", 0.95, 0.9),
                     models=("fp32", "new"), gate="fp32")
    new = {v.model: v for v in decide(report)}["new"]
    assert new.headline().startswith("may replace fp32 (no significant regression)") and not new.shared
    assert run_exit_code(report) == OK
    single = _report(_result("m", "calibration", 0.87, 0.9))
    assert run_exit_code(single) == FAILED  # a model judged on its own: a miss is a miss
    unchecked = _report(_result("fp32", "calibration", 0.87, 0.9),
                        ProbeResult(probe="calibration", id="calibration", model="new", status="skipped"),
                        models=("fp32", "new"), gate="fp32")
    assert {v.model: v.decision for v in decide(unchecked)}["new"] == "no decision"
    assert run_exit_code(unchecked) == NOTHING_CHECKED and run_exit_code(unchecked, allow_skips=True) == OK


def test_a_run_whose_candidate_shares_the_baselines_miss_says_may_replace_everywhere_and_exits_4(suite_factory, tiny_clf_dir):
    """Two copies of one tiny model, both below an accuracy bound: the terminal, report.md, report.html,
    report.json and JUnit all say the candidate may replace the baseline and name the shared miss; exit code 4."""
    import json
    import xml.etree.ElementTree as ET

    from click.testing import CliRunner
    from conftest import only_run

    from bertprobe.cli import main

    suite = suite_factory("  - probe: accuracy\n    expect: {accuracy: {min: 0.99}}\n")
    suite.write_text(suite.read_text().replace("report: {dir: '", "report: {formats: [json, markdown, html, junit], dir: '"))
    result = CliRunner().invoke(main, ["run", str(suite), "--model", f"deployed={tiny_clf_dir}",
                                       "--model", f"candidate={tiny_clf_dir}", "--baseline", "deployed"])
    assert result.exit_code == SHARED_MISSES, result.output
    run_dir, report = only_run(suite.parent / "reports", "tiny")
    (line,) = [d["headline"] for d in report["decisions"] if d["model"] == "candidate"]
    assert line.startswith("may replace deployed (no significant regression); like deployed, misses: accuracy accuracy ")
    assert f"decision: candidate: {line}" in result.output
    assert f"Decision: candidate: {line}" in (run_dir / "report.md").read_text()
    html = (run_dir / "report.html").read_text()
    assert f"Decision: candidate: {line}" in html and "class='banner open'" in html  # grey, not green: exit 4 is not 0
    root = ET.parse(run_dir / "report.junit.xml").getroot()
    (decision,) = [c for c in root.iter("testcase") if c.get("name") == "decision"
                   and c.get("classname").endswith(".candidate")]
    assert decision.find("failure") is None and decision.find("system-out").text.splitlines()[0] == f"candidate: {line}"
    (probe,) = [c for c in root.iter("testcase") if c.get("name") == "accuracy" and c.get("classname").endswith(".candidate")]
    assert probe.find("failure").get("type") == "expectation shared with the baseline"
    assert json.loads((run_dir / "report.json").read_text())["decisions"][1]["shared"]


def test_a_miss_much_worse_than_the_baselines_is_the_candidates_own():
    """Both miss macro-F1 >= 0.4, but the candidate by far more than the gate's tolerance (0.01), on a metric that
    no paired test judged: that miss is its own, so it may not replace the baseline; within the tolerance it is
    shared."""
    report = _report(_result("fp32", "accuracy", 0.39, 0.4), _result("cand", "accuracy", 0.10, 0.4),
                     models=("fp32", "cand"), gate="fp32")
    cand = {v.model: v for v in decide(report)}["cand"]
    assert cand.decision == "do not ship" and not cand.shared
    assert cand.headline().startswith("do not ship: accuracy: score 0.1 (expected >= 0.4)")
    assert run_exit_code(report) == FAILED
    report.probes[1] = _result("cand", "accuracy", 0.385, 0.4)  # 0.005 worse: within the tolerance
    cand = {v.model: v for v in decide(report)}["cand"]
    assert cand.decision == "may replace" and cand.shared == ["accuracy score 0.385 (fp32: 0.39)"]
