"""The calibration probe: metrics against a direct numpy computation, temperature scaling, selective
prediction, and one prediction pass shared with accuracy under the harness."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bertprobe.data import Dataset, Example
from bertprobe.model.predictions import Predictions
from bertprobe.probe import ProbeContext
from bertprobe.probes.calibration.metrics import ece_parts, risk_coverage
from bertprobe.probes.calibration.probe import CalibrationParams, CalibrationProbe
from bertprobe.probes.calibration.scaling import fit_temperature, softmax
from bertprobe.tasks import SingleLabelClassification


def _direct_ece(conf: np.ndarray, correct: np.ndarray, bins: int) -> tuple[float, float]:
    """Guo et al.'s binning, written out: bin k holds (k/B, (k+1)/B]."""
    ece, mce = 0.0, 0.0
    edges = np.linspace(0, 1, bins + 1)
    for lo, hi in zip(edges[:-1], edges[1:]):
        sel = (conf > lo) & (conf <= hi)
        if sel.any():
            gap = abs(correct[sel].mean() - conf[sel].mean())
            ece += sel.mean() * gap
            mce = max(mce, gap)
    return ece, mce


class FixedLogits:
    """A stand-in target whose logits are given (the probe reads them through ctx.predictions)."""

    label_names = ["a", "b", "c"]
    task = SingleLabelClassification(label_names=("a", "b", "c"))  # what the logits mean: a softmax

    def __init__(self, logits: np.ndarray) -> None:
        import torch

        self.logits = torch.tensor(logits, dtype=torch.float32)


def _run(logits: np.ndarray, gold: np.ndarray, **params):
    target = FixedLogits(logits)
    data = Dataset([Example(f"t{i}", label=int(g), id=str(i)) for i, g in enumerate(gold)])
    ctx = ProbeContext(seed=5, predictions=lambda t, d, batch_size=None: Predictions(t.logits, 0.0))
    return CalibrationProbe().run(target, data, CalibrationParams(**{"bootstrap": 0, **params}), ctx)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def sample():
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 3, size=400)
    logits = rng.normal(size=(400, 3)) * 2
    logits[np.arange(400), gold] += rng.normal(1.5, 1.0, size=400)  # right more often than not, overconfident
    return logits, gold


def test_metrics_agree_with_a_direct_numpy_computation(sample):
    logits, gold = sample
    result = _run(logits, gold)
    probs = softmax(logits.astype(np.float32).astype(np.float64))
    conf, correct = probs.max(1), (probs.argmax(1) == gold).astype(float)
    ece, mce = _direct_ece(conf, correct, 15)
    onehot = np.eye(3)[gold]
    assert result.value("ece") == pytest.approx(ece, abs=1e-6)
    assert result.value("mce") == pytest.approx(mce, abs=1e-6)
    assert result.value("brier") == pytest.approx(((probs - onehot) ** 2).sum(1).mean(), abs=1e-6)
    assert result.value("nll") == pytest.approx(-np.log(probs[np.arange(400), gold]).mean(), abs=1e-6)
    assert result.value("accuracy") == pytest.approx(correct.mean())
    ece_vector = [o for o in result.outcomes if o.name == "ece_contribution"][0]
    assert np.mean(ece_vector.values) == pytest.approx(result.value("ece"), abs=1e-6)  # its mean is the ECE
    # but it is no outcome to pair: within a bin every example carries the same gap, so gates do not test ECE
    assert result.metrics["ece"].outcome is None and result.metrics["brier"].outcome == "brier"
    order = np.argsort(-conf, kind="stable")
    risks = np.cumsum(1 - correct[order]) / np.arange(1, 401)
    assert result.value("aurc") == pytest.approx(risks.mean(), abs=1e-9)
    assert result.value("accuracy_at_coverage_80") == pytest.approx(1 - risks[319], abs=1e-9)
    wrong = correct == 0
    assert result.value("overconfident_error_rate") == pytest.approx((conf[wrong] >= 0.9).mean())


def test_equal_mass_bins_hold_equal_counts_and_a_confidence_on_an_edge_goes_to_the_lower_bin():
    conf = np.array([0.2, 0.4, 0.4, 0.6, 0.8, 1.0])
    parts = ece_parts(conf, np.ones(6), 3, equal_mass=True)
    assert [b["count"] for b in parts["bins"]] == [2, 2, 2]
    width = ece_parts(np.array([1 / 3, 2 / 3]), np.array([1.0, 0.0]), 3)
    assert [b["bin"] for b in width["bins"]] == [0, 1]  # (0, 1/3] and (1/3, 2/3]


def test_temperature_scaling_lowers_held_out_nll_and_keeps_the_predicted_classes(sample):
    logits, gold = sample
    result = _run(logits, gold)
    assert result.value("temperature") > 1  # the sample is overconfident
    assert result.value("nll_heldout_scaled") < result.value("nll_heldout")
    t = fit_temperature(logits, gold)
    assert (softmax(logits, t).argmax(1) == softmax(logits).argmax(1)).all()
    grid = np.exp(np.linspace(-3, 3, 2001))
    nlls = [-np.log(softmax(logits, g)[np.arange(len(gold)), gold]).mean() for g in grid]
    assert t == pytest.approx(grid[int(np.argmin(nlls))], rel=0.01)


def test_intervals_hold_the_point_estimate_and_margin_mode_differs(sample):
    logits, gold = sample
    result = _run(logits, gold, bootstrap=200)
    for name in ("ece", "mce", "brier", "nll", "aurc"):
        lo, hi = result.metrics[name].ci
        assert lo <= result.value(name) <= hi or name == "mce", name
    margin = _run(logits, gold, overconfidence="margin", high_confidence=0.5)
    assert margin.value("overconfident_error_rate") != result.value("overconfident_error_rate")


def test_risk_coverage_of_a_perfect_ranking_is_zero_until_the_errors():
    cov, risk = risk_coverage(np.array([0.9, 0.8, 0.7, 0.6]), np.array([1.0, 1.0, 0.0, 0.0]))
    assert cov.tolist() == [0.25, 0.5, 0.75, 1.0] and risk.tolist() == [0, 0, 1 / 3, 0.5]


def test_accuracy_and_calibration_share_one_prediction_pass(suite_factory, monkeypatch, tmp_path):
    from bertprobe.harness import run_suite
    from bertprobe.model.target import Target
    from bertprobe.plugins import build_plugins
    from bertprobe.suite import load_suite

    calls = []
    real = Target.logits

    def counting(self, *args, **kwargs):
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Target, "logits", counting)
    monkeypatch.setattr("bertprobe.probes.accuracy.classes.measure_throughput", lambda *a, **k: None)  # its timed passes aside
    suite = suite_factory("  - probe: accuracy\n    params: {single_check: 0}\n"  # no batch-of-one passes to count
                          "  - probe: calibration\n    params: {bootstrap: 20, bins: 5}\n")
    session = run_suite(load_suite(suite), build_plugins(entry_points=False))
    assert len(calls) == 1
    report = json.loads((session.run_dir / "report.json").read_text())
    acc, cal = report["probes"]
    assert acc["metrics"]["accuracy"] == pytest.approx(cal["metrics"]["accuracy"])
    assert "ECE" in cal["details"]["key_finding"]


def test_a_prediction_that_changes_alone_is_a_finding(tiny_clf):
    """The accuracy probe predicts a sample again one at a time; a class that differs is reported."""
    from bertprobe.probes.accuracy import AccuracyParams, AccuracyProbe
    from bertprobe.testing import sentiment_examples

    data = Dataset([Example(x, label=y, id=str(i)) for i, (x, y) in enumerate(sentiment_examples(30))])
    real = type(tiny_clf).predict_proba

    def odd_alone(self, encoded, batch_size=None, progress=None):
        probs = real(self, encoded, batch_size, progress)
        if batch_size == 1:  # a server that answers differently for a batch of one: flip the first example
            probs[0] = probs[0].flip(0)
        return probs

    target = tiny_clf
    try:
        type(target).predict_proba = odd_alone
        result = AccuracyProbe().run(target, data, AccuracyParams(bootstrap=0, single_check=30, findings=0),
                                     ProbeContext(seed=4))
    finally:
        type(target).predict_proba = real
    check = result.details["batch_of_one"]
    assert check["examples"] == 30 and check["max_probability_difference"] > 0  # every example: the first is flipped
    assert check["class_changes"] == 1
    (finding,) = [f for f in result.findings if f.extra.get("kind") == "batch_of_one"]
    assert finding.extra["id"] == "0" and finding.title == "prediction differs alone and in a batch"


def _scaling(temperature: float, nll: tuple[float, float], ece: tuple[float, float], held: int, spread: float = 0.0,
             **params):
    """A result whose held-out NLL and ECE moved as given, each held-out example's change spread around the mean
    change by +-``spread`` (so its paired interval is as wide as the spread makes it), judged."""
    from bertprobe.probes.calibration.scaling import judge_scaling
    from bertprobe.results import ProbeResult

    result = ProbeResult("calibration", id="calibration", model="m", status="passed")
    for name, value in (("temperature", temperature), ("nll_heldout", nll[0]), ("nll_heldout_scaled", nll[1]),
                        ("ece_heldout", ece[0]), ("ece_heldout_scaled", ece[1])):
        result.add_metric(name, value)
    signs = np.resize([1.0, -1.0], held)
    per_nll, per_ece = nll[1] - nll[0] + spread * signs, ece[1] - ece[0] + spread * signs

    def change(idx):
        return float(per_nll[idx].mean()), float(per_ece[idx].mean())

    judge_scaling(result, held, change, CalibrationParams(**{"bootstrap": 1000, **params}), 7)
    return result


def test_a_temperature_that_worsens_the_held_out_nll_is_flagged_never_advised():
    from bertprobe.results import ModelInfo, RunReport
    from bertprobe.results.verdict import decide

    worse = _scaling(0.05, (0.085, 0.965), (0.03, 0.2), held=10, spread=0.05)  # the small-data case of the issue
    assert worse.value("temperature_helps") == -1.0
    assert worse.details["temperature_scaling"].startswith("temperature 0.05 is harmful (held-out NLL 0.085 -> 0.965 [Δ +0.8")
    assert "do not apply it" in worse.details["temperature_scaling"] and "few examples (10 held out)" in worse.details["temperature_scaling"]
    (warning,) = worse.details["warnings"]
    assert "measurably worsens the held-out NLL and ECE (held-out NLL 0.085 -> 0.965" in warning
    # the verdict carries it, whatever the expectations say
    (verdict,) = decide(RunReport(suite="s", status="completed", probes=[worse], models=[ModelInfo("m", "m")]))
    assert any("measurably worsens the held-out NLL" in w for w in verdict.warnings)
    # lower NLL but measurably higher ECE: harmful, not a help
    mixed = _scaling(1.3, (0.30, 0.28), (0.04, 0.05), held=400, spread=0.01)
    assert mixed.value("temperature_helps") == -1.0 and "worsens the held-out ECE" in mixed.details["warnings"][0]
    helps = _scaling(1.52, (0.30, 0.28), (0.041, 0.040), held=436, spread=0.02)
    assert helps.value("temperature_helps") == 1.0 and "warnings" not in helps.details
    assert helps.details["temperature_scaling"].startswith(
        "temperature 1.52 helps (held-out NLL 0.300 -> 0.280 [Δ -0.02")  # the ECE's change is noise, not harm


def test_a_change_within_noise_or_below_the_minimum_has_no_measurable_effect():
    """The issue's case: 0.119 -> 0.118 read 'helps' for bf16 and 0.119 -> 0.120 'does not help' for fp32."""
    for ece_after in (0.118, 0.120):
        noise = _scaling(1.22, (0.168, 0.1675), (0.119, ece_after), held=250, spread=0.05)
        assert noise.value("temperature_helps") == 0.0 and "warnings" not in noise.details
        text = noise.details["temperature_scaling"]
        assert text.startswith("temperature 1.22: no measurable effect (held-out NLL 0.168 -> 0.168 [Δ -0.00"), text
        lo, hi = noise.metrics["nll_heldout_change"].ci
        assert lo < 0 < hi
    # a change past its interval, but smaller than the stated minimum: no effect either
    tiny = _scaling(1.05, (0.2000, 0.1990), (0.05, 0.0499), held=400, spread=0.0001)
    assert tiny.metrics["nll_heldout_change"].ci[1] < 0 and tiny.value("temperature_helps") == 0.0
    assert tiny.details["temperature_scaling"].endswith("; a change under 0.005 counts as none)")
    assert "counts as none" not in noise.details["temperature_scaling"]  # there the interval decided
    assert _scaling(1.05, (0.2000, 0.1990), (0.05, 0.0499), held=400, spread=0.0001,
                    min_scaling_change=0.0005).value("temperature_helps") == 1.0


def test_a_clearly_miscalibrated_model_is_told_to_scale_and_a_calibrated_one_is_not(sample):
    logits, gold = sample
    rng = np.random.default_rng(3)
    calibrated = rng.normal(size=(600, 3)) * 2
    drawn = np.array([rng.choice(3, p=p) for p in softmax(calibrated)])  # gold drawn from the model's own probabilities
    for scale in (1.0, 1.0 + 1e-3):  # and a copy of it that differs by a rounding (bf16 against fp32): the same advice
        same = _run(calibrated * scale, drawn, bootstrap=500)
        assert same.value("temperature_helps") == 0.0, same.details["temperature_scaling"]
        assert "no measurable effect" in same.details["key_finding"]
    overconfident = _run(logits * 5, gold, bootstrap=500)  # logits x5: far too sure
    assert overconfident.value("temperature") > 3 and overconfident.value("temperature_helps") == 1.0
    assert "helps" in overconfident.details["key_finding"] and "apply it" in overconfident.details["key_finding"]
    lo, hi = overconfident.metrics["nll_heldout_change"].ci
    assert hi < 0 and lo <= overconfident.value("nll_heldout_change") <= hi


def test_temperature_helps_is_what_the_held_out_metrics_say(tiny_clf):
    from bertprobe.data import Dataset, Example
    from bertprobe.probe import ProbeContext
    from bertprobe.probes.calibration.probe import CalibrationParams, CalibrationProbe
    from bertprobe.testing import sentiment_examples

    data = Dataset([Example(t, label=y, id=str(i)) for i, (t, y) in enumerate(sentiment_examples(40, 3))], name="s")
    r = CalibrationProbe().run(tiny_clf, data, CalibrationParams(bootstrap=0), ProbeContext(seed=0))
    said = {1.0: "helps", 0.0: "no measurable effect", -1.0: "is harmful"}[r.value("temperature_helps")]
    assert said in r.details["key_finding"]
    if r.value("temperature_helps") == 1.0:  # without intervals: a change of at least the minimum, none for the worse
        assert r.value("nll_heldout_scaled") <= r.value("nll_heldout") - 0.005 or \
            r.value("ece_heldout_scaled") <= r.value("ece_heldout") - 0.005


def test_a_plugin_tasks_calibration_section_registered_through_the_hook_fills_the_result():
    """A plugin's task gets its own calibration section by ``registry.add("calibration", SECTION, task=NAME)``: the
    probe calls its ``audit(result, target, data, params, ctx)`` instead of the classes' audit, and its
    ``catalogue`` joins the probe's; a model of another task keeps the classes' audit."""
    from dataclasses import dataclass
    from types import SimpleNamespace
    from typing import ClassVar

    import torch

    from bertprobe.hookmarkers import hookimpl
    from bertprobe.plugins import build_plugins
    from bertprobe.results import Catalogue

    @dataclass(frozen=True)
    class Stance(SingleLabelClassification):
        name: ClassVar[str] = "stance-calibration"

    calls = []

    class StanceSection:
        catalogue = Catalogue({"stance_ece": "the stance task's ECE"}, {"stance_ece": False})

        def audit(self, result, target, data, params, ctx):
            calls.append((target, data, params))
            result.add_metric("stance_ece", 0.25, False, "a plugin section's own measure")

    section = StanceSection()

    class StancePlugin:
        @hookimpl
        def bertprobe_register_tasks(self, registry):
            registry.add(Stance)

        @hookimpl
        def bertprobe_register_sections(self, registry):
            registry.add("calibration", section, task="stance-calibration")

    plugins = build_plugins(extra=[StancePlugin()], entry_points=False)
    logits, gold = np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 3.0]]), np.array([0, 1, 1, 1])
    data = Dataset([Example(text=f"t{i}", label=int(g), id=str(i)) for i, g in enumerate(gold)], name="d")
    params = CalibrationParams(bootstrap=0)
    for task, own in ((Stance(label_names=("against", "favour")), True),
                      (SingleLabelClassification(label_names=("against", "favour")), False)):
        target = SimpleNamespace(task=task, label_names=list(task.label_names), logits=torch.tensor(logits))
        ctx = ProbeContext(seed=5, predictions=lambda t, d, batch_size=None: Predictions(t.logits, 0.0),
                           section=plugins.sections.find)
        result = CalibrationProbe().run(target, data, params, ctx)  # type: ignore[arg-type]
        assert (list(result.metrics) == ["stance_ece"]) == own and ("ece" in result.metrics) != own
    assert len(calls) == 1 and calls[0][1] is data and calls[0][2] is params
    assert "stance_ece" in CalibrationProbe.catalogue(plugins.sections).metrics
    assert "stance_ece" not in CalibrationProbe.catalogue().metrics  # the built-in sections alone
