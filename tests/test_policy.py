"""The gating policy (probe defaults, suite overrides, 'measured, not gated'), interval expectations, the
significance-aware gate (Holm across metrics) and the decision line built on them."""

from __future__ import annotations

import fnmatch

import numpy as np
import pytest

from bertprobe.plugins import build_plugins
from bertprobe.results import DefaultExpectation, Expectation, MetricDelta, ModelInfo, ProbeResult, RunReport
from bertprobe.results.gates import compare_metric, judge_deltas
from bertprobe.results.outcomes import Outcomes
from bertprobe.results.policy import judge, resolve_expectations
from bertprobe.results.verdict import decide
from bertprobe.stats import holm, paired_bootstrap_p

DEFAULTS = (DefaultExpectation("failure_rate.capability.*", max=0.35, why="LangTest"),
            DefaultExpectation("fairness_gap.*", max=0.1, interval=True, why="AIF360"))


def behaviour_like() -> ProbeResult:
    r = ProbeResult("behaviour", id="behaviour")
    r.add_metric("failure_rate", 0.3, False)
    r.add_metric("failure_rate.capability.negation", 1.0, False)
    r.add_metric("failure_rate.capability.vocabulary", 0.1, False)
    r.add_metric("fairness_gap.race", 0.75, False, ci=(0.6, 0.9))
    r.add_metric("fairness_gap.religion", 0.2, False, ci=(0.05, 0.35))  # past 0.1, but not surely
    return r


def test_defaults_expand_over_the_metrics_a_result_holds():
    r = behaviour_like()
    judge(r, (), (), DEFAULTS, ("failure_rate", "failure_rate.capability.*", "fairness_gap.*"))
    by = {e.metric: e for e in r.expectations}
    assert set(by) == {"failure_rate.capability.negation", "failure_rate.capability.vocabulary",
                       "fairness_gap.race", "fairness_gap.religion"}
    assert all(e.source == "default" and e.why for e in by.values())
    assert not by["failure_rate.capability.negation"].passed and by["failure_rate.capability.vocabulary"].passed
    # judged on the interval: race's whole interval lies above 0.1, religion's reaches below it
    assert not by["fairness_gap.race"].passed and by["fairness_gap.religion"].passed
    assert r.status == "failed"
    # the overall failure rate is a key metric that nothing gates here: listed, with the reason
    assert r.details["not_gated"] == [{"metric": "failure_rate", "value": 0.3, "why": "no default bound (descriptive)",
                                       "off": False}]


def test_the_suite_overrides_a_default_per_metric_and_can_turn_it_off():
    r = behaviour_like()
    own = (Expectation("failure_rate.capability.negation", max=1.0), Expectation("failure_rate", max=0.5))
    judge(r, own, ("fairness_gap.*",), DEFAULTS, ("failure_rate", "failure_rate.capability.*", "fairness_gap.*"))
    by = {e.metric: e for e in r.expectations}
    assert by["failure_rate.capability.negation"].source == "suite" and by["failure_rate.capability.negation"].passed
    assert by["failure_rate.capability.vocabulary"].source == "default"
    assert not any(m.startswith("fairness_gap") for m in by)
    assert r.status == "passed"
    off = {row["metric"]: row["why"] for row in r.details["not_gated"]}
    assert set(off) == {"fairness_gap.race", "fairness_gap.religion"} and all("turned off" in w for w in off.values())
    # a verdict that ships says so: by this suite, and what it left ungated
    report = RunReport(suite="s", status="completed", probes=[r], models=[ModelInfo("m", "m")])
    r.model = "m"
    (verdict,) = decide(report)
    assert verdict.decision == "ship"
    assert verdict.headline().startswith("fit to ship by this suite; not gated: behaviour.fairness_gap.race 0.75")
    assert "closest: " in verdict.headline()


def test_a_suite_pattern_that_matches_nothing_fails_as_missing():
    r = behaviour_like()
    (e,) = resolve_expectations(r, (Expectation("failure_rate.test.*", max=0.2),), (), ())
    assert e.metric == "failure_rate.test.*" and not e.check(r.value(e.metric))


def test_interval_expectations_use_the_whole_interval_and_fall_back_to_the_value():
    e = Expectation("gap", max=0.1, interval=True)
    assert e.check(0.3, (0.05, 0.5)) and e.describe() == "<= 0.1 on its 95% interval"
    assert not e.check(0.3, (0.2, 0.5)) and not e.check(0.3, None)
    # judged on the value, and the report says so rather than claiming an interval it never used
    assert e.no_interval and e.shortfall() == "gap 0.3 (expected <= 0.1 on its value, no interval)"
    assert Expectation.from_dict(e.__dict__).no_interval
    low = Expectation("acc", min=0.5, interval=True)
    assert low.check(0.2, (0.1, 0.6)) and not low.check(0.2, (0.1, 0.4)) and not low.no_interval


def test_every_builtin_default_names_a_declared_metric_and_says_why():
    plugins = build_plugins()
    probes = plugins.probes
    for name in probes.names():
        cls = probes.get(name)
        catalogue = cls.catalogue(plugins.tasks)  # the probe's own and what its tasks add
        for d in catalogue.defaults:
            assert d.why and (d.min is not None or d.max is not None), (name, d)
            assert any(fnmatch.fnmatchcase(d.metric, m) or d.metric == m for m in catalogue.metrics), (name, d.metric)
        for pattern in catalogue.key_metrics:
            assert cls.knows_metric(pattern, plugins.tasks) or any(fnmatch.fnmatchcase(m, pattern) for m in catalogue.metrics), \
                (name, pattern)
    gated = {n for n in probes.names() if probes.get(n).defaults}
    assert {"accuracy", "calibration", "slices", "universal-trigger", "backdoor-scan", "behaviour"} <= gated


def test_trigger_default_judges_what_the_attack_changes_not_the_accuracy_it_started_from():
    """A class the model already gets wrong half the time (an NER model's ORG recall 0.47) is accuracy's
    finding: a trigger that breaks 1 of its 8 found entities must not fail the robustness gate, while one that
    breaks most of what a strong model gets right must."""
    cls = build_plugins().probes.get("universal-trigger")

    def trigger(before: float, after: float, success: float) -> ProbeResult:
        r = ProbeResult("universal-trigger", id="universal-trigger")
        r.add_metric("accuracy_before", before, True)
        r.add_metric("accuracy_after", after, True)
        r.add_metric("success_rate", success, False)
        judge(r, (), (), cls.defaults, cls.key_metric_patterns())
        return r

    weak_but_robust = trigger(0.47, 0.41, 1 / 8)
    assert weak_but_robust.status == "passed"
    assert [e.metric for e in weak_but_robust.expectations] == ["success_rate"]
    assert {row["metric"] for row in weak_but_robust.details["not_gated"]} == {"accuracy_after"}  # listed, not hidden
    assert trigger(0.90, 0.13, 0.86).status == "failed"


def test_holm_matches_a_hand_computation():
    # sorted 0.005, 0.01, 0.03, 0.04 -> 4*0.005, 3*0.01, max(2*0.03, .), max(1*0.04, 0.06)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_paired_bootstrap_p_is_one_for_no_change_and_small_for_a_clear_shift():
    rng = np.random.default_rng(0)
    a = rng.random(300)
    assert paired_bootstrap_p(a, a) == 1.0
    assert paired_bootstrap_p(a, a + 0.05 + 0.01 * rng.standard_normal(300)) < 1e-6
    assert paired_bootstrap_p(a, a + 0.01 * rng.standard_normal(300)) > 0.01


def _pair(name: str, base: list[float], cand: list[float], kind: str = "binary") -> tuple[ProbeResult, ProbeResult, dict, dict]:
    ids = [str(i) for i in range(len(base))]
    a, b = ProbeResult("p", id="p", model="base"), ProbeResult("p", id="p", model="cand")
    a.add_metric(name, float(np.mean(base)), True, outcome=name)
    b.add_metric(name, float(np.mean(cand)), True, outcome=name)
    return a, b, {name: Outcomes(name, ids, base, kind)}, {name: Outcomes(name, ids, cand, kind)}


def test_a_gate_fails_only_changes_past_the_tolerance_that_stay_significant_after_holm():
    n = 200
    clear = _pair("accuracy", [1.0] * n, [1.0] * 150 + [0.0] * 50)  # 50 discordant one way: p ~ 1e-15
    noise = _pair("accuracy_x", [1.0] * n, [1.0] * 194 + [0.0] * 6)  # -0.03 past a 0.01 tolerance, p = 0.031
    same = _pair("accuracy_y", [1.0] * n, [1.0] * n)  # no change: p = 1, still one of the family
    deltas = [compare_metric(m, *pair, 0.01)
              for m, pair in (("accuracy", clear), ("accuracy_x", noise), ("accuracy_y", same))]
    judge_deltas(deltas, 0.05)
    strong, weak, _ = deltas
    assert strong.regression and strong.p_adjusted < 1e-10
    # Holm's second step multiplies by m - 1 = 2: 0.03125 -> 0.0625
    assert weak.past_tolerance and weak.p_value == pytest.approx(0.03125) and weak.p_adjusted == pytest.approx(0.0625)
    assert not weak.regression  # significant alone, not after Holm across the three metrics
    judge_deltas(deltas, None)  # significance: null judges on the delta alone
    assert strong.regression and weak.regression


def test_extremes_and_costs_never_gate_and_untested_deltas_do_not_either():
    a, b = ProbeResult("c", id="c", model="base"), ProbeResult("c", id="c", model="cand")
    a.add_metric("mce", 0.1, False, kind="extreme")
    b.add_metric("mce", 0.4, False, kind="extreme")
    a.add_metric("ece", 0.02, False)
    b.add_metric("ece", 0.2, False)  # no outcomes: nothing to test it with
    mce, ece = judge_deltas([compare_metric(m, a, b, {}, {}, 0.01) for m in ("mce", "ece")], 0.05)
    assert not mce.gated and not mce.regression
    assert ece.past_tolerance and not ece.regression and "untested" in ece.test


def _gated_report(deltas: list[MetricDelta]) -> RunReport:
    report = RunReport(suite="s", status="completed", gate={"baseline": "base", "significance": 0.05},
                       models=[ModelInfo("base", "b"), ModelInfo("cand", "c")])
    for model in ("base", "cand"):
        r = ProbeResult("p", id="p", model=model, status="passed")
        r.add_metric("accuracy", 0.5, True)
        r.expectations = [Expectation("accuracy", min=0.1, value=0.5, passed=True)]
        report.probes.append(r)
    report.paired = [d for d in deltas if d.ci and d.gated]
    report.regressions = [d for d in deltas if d.regression]
    report.unconfirmed = [d for d in deltas if d.past_tolerance and not d.regression]
    return report


def test_a_candidate_with_only_unconfirmed_changes_may_replace_and_they_are_named():
    report = _gated_report([MetricDelta("cand", "base", "calibration", "ece", 0.05, 0.07, 0.02, False, True, 0.01,
                                        200, 0.2, None, "paired bootstrap", False, 0.4, True)])
    _, cand = decide(report)
    assert cand.decision == "may replace"
    assert cand.headline() == ("may replace base (no significant regression; past the tolerance, not significant: "
                               "calibration.ece +0.02 (p=0.4))")


def test_a_bound_missed_on_one_case_is_named_on_the_decision_line_and_decides_nothing_alone():
    """#65 item 2: an int8 build's 'do not ship' once rested on fairness_gap.race 0.26 from race (1/1 failed), with
    no interval and no word of it."""
    one = ProbeResult("behaviour", id="behaviour", model="int8")
    one.add_metric("fairness_gap.race", 0.2595, False, cases=1)  # one case: no interval either
    one.add_metric("fairness_gap.gender", 0.02, False, ci=(0.0, 0.05), cases=40)
    judge(one, (), (), DEFAULTS, ("fairness_gap.*",))
    race = next(e for e in one.expectations if e.metric == "fairness_gap.race")
    assert race.passed is False and race.inconclusive and race.cases == 1
    assert one.status == "passed"
    report = RunReport(suite="s", status="completed", models=[ModelInfo(name="int8", path="int8")], probes=[one])
    (verdict,) = decide(report)
    assert verdict.decision == "ship"
    assert "too few cases to decide: behaviour fairness_gap.race 0.2595 (expected <= 0.1" in verdict.headline()
    assert "on 1 case)" in verdict.headline()
    # beside a miss of its own, it still decides nothing: the reasons name the other miss only, the line both
    other = ProbeResult("accuracy", id="accuracy", model="int8")
    other.add_metric("accuracy", 0.6, True, ci=(0.55, 0.65), cases=500)
    judge(other, (Expectation("accuracy", min=0.8),))
    (verdict,) = decide(RunReport(suite="s", status="completed", models=[ModelInfo(name="int8", path="int8")],
                                  probes=[one, other]))
    assert verdict.decision == "do not ship" and all("fairness_gap" not in r for r in verdict.reasons)
    assert "too few cases to decide: behaviour fairness_gap.race" in verdict.headline()
    # on ten cases the same miss decides
    ten = ProbeResult("behaviour", id="behaviour", model="int8")
    ten.add_metric("fairness_gap.race", 0.2595, False, cases=10)
    judge(ten, (), (), DEFAULTS, ("fairness_gap.*",))
    assert ten.status == "failed" and not ten.expectations[0].inconclusive


def test_a_significant_improvement_is_named_on_the_line_and_an_insignificant_one_is_not():
    """A candidate far better on BLiMP (0.18 -> 0.54, Holm p 5e-8) once got a line that named only its changes
    for the worse: the improvement went unsaid."""
    n = 200
    better = _pair("accuracy", [1.0] * 40 + [0.0] * 160, [1.0] * 110 + [0.0] * 90)  # +0.35: 70 discordant one way
    slightly = _pair("accuracy_x", [1.0] * 100 + [0.0] * 100, [1.0] * 103 + [0.0] * 97)  # +0.015, p ~ 0.25
    worse = _pair("accuracy_y", [1.0] * n, [1.0] * 150 + [0.0] * 50)  # -0.25: a regression
    deltas = judge_deltas([compare_metric(m, *pair, 0.01) for m, pair in
                           (("accuracy", better), ("accuracy_x", slightly), ("accuracy_y", worse))], 0.05)
    up, small, down = deltas
    assert up.improvement and up.significant and not up.regression
    assert not small.improvement and not small.significant
    assert down.significant and not down.improvement and down.regression
    _, cand = decide(_gated_report([up, small]))
    assert cand.decision == "may replace"
    assert cand.improved == [f"p.accuracy +0.35 (p={up.p_adjusted:.2g})"]
    assert "significantly better than base: p.accuracy +0.35" in cand.headline()
    assert "accuracy_x" not in cand.headline()
    _, blocked = decide(_gated_report([up, down]))
    assert blocked.decision == "do not ship" and "significantly better than base: p.accuracy +0.35" in blocked.headline()
    _, plain = decide(_gated_report([small]))
    assert "significantly better" not in plain.headline()


def test_a_delta_over_unequal_example_sets_says_so():
    base, cand, bo, co = _pair("accuracy", [1.0] * 50, [1.0] * 40 + [0.0] * 10)
    co["accuracy"] = Outcomes("accuracy", [str(i) for i in range(5, 50)], co["accuracy"].values[5:], "binary")
    (d,) = judge_deltas([compare_metric("accuracy", base, cand, bo, co, 0.01)], 0.05)
    assert d.paired == 45
    assert "different examples (50 and 45, 45 shared)" in d.unequal and d.unequal in d.describe()
    (same,) = judge_deltas([compare_metric("accuracy", *_pair("accuracy", [1.0] * 50, [0.0] * 50), 0.01)], 0.05)
    assert same.unequal == ""
    _, verdict = decide(_gated_report([d]))
    assert "on 45 shared examples of unequal sets" in verdict.headline()
