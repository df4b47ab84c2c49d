"""The decision a run states (bertprobe.results.verdict): ship or not, may replace or not, and why."""

from __future__ import annotations

from bertprobe.results import Expectation, MetricDelta, ModelInfo, ProbeResult, RunReport
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
    report.gate = {"baseline": gate} if gate else {}
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
    assert by_model["good"].decision == "may replace" and by_model["good"].headline() == "may replace old"
    assert by_model["bad"].decision == "do not ship"
    assert "1 regression(s) against old (accuracy.score -0.1)" in by_model["bad"].headline()


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


def test_a_gated_matrix_names_what_the_baseline_misses_too():
    """int8 and fp32 both miss the trigger bound: the candidate still may not replace (its own expectation failed),
    but its reason says the baseline misses it too, with the baseline's value, and the baseline's line says what
    it misses itself; a miss the baseline does not share is not marked."""
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
    assert "trigger: score 0.12 (expected >= 0.5) (fp32 misses it too: score 0.13)" in cand.headline()
    assert "accuracy: score 0.8 (expected >= 0.85)" in cand.headline()
    assert "accuracy: score 0.8 (expected >= 0.85) (fp32" not in cand.headline()
