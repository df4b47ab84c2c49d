"""Probe ``calibration``: is a 0.95 a 95%? Calibration error, proper scores, temperature scaling, selective prediction.

Guo, Pleiss, Sun & Weinberger 2017, "On Calibration of Modern Neural Networks" (ICML): expected
calibration error over equal-width confidence bins (bin k holds confidences in (k/B, (k+1)/B], as their
code bins them), maximum calibration error, reliability diagrams, and temperature scaling fitted by
minimising NLL on held-out data. Desai & Durrett 2020 ("Calibration of Pre-trained Transformers") report
RoBERTa's in-domain ECE of 1.93 (SNLI) falling to 0.84 after temperature scaling. Selective prediction:
the risk-coverage curve and its area (AURC; Geifman & El-Yaniv 2017).

Deviations: every metric has a percentile-bootstrap interval over examples; ECE is also given over
equal-mass bins (less sensitive to empty bins); the Brier score is the multi-class one (the sum over
classes of the squared error, so a binary model's is twice the positive-class form); temperature is fitted
by a golden-section search on log T (deterministic, no optimiser state). For paired comparisons each
example carries its own Brier score, NLL and ECE contribution (the gap of its bin: their mean is the ECE),
so two models are paired example by example with their bins held fixed. The fitted temperature is judged on
the held-out part: it is called helpful or harmful only when its change of the held-out NLL or ECE is at least
``min_scaling_change`` and past its 95% interval (a paired bootstrap over the held-out examples, or sentences);
otherwise it has no measurable effect, and the note says so with both intervals.

Sections (``bertprobe.sections``), each ``audit(result, target, data, params, ctx)`` filling the result in this
probe's place: ``labelsets`` (each (example, label) probability a binary forecast), ``entities`` (predicted
entities and words) and ``answers`` (extractive QA: the chosen span's probability among the n-best candidates of
all windows against exact match, on the same bins; selective QA's risk-coverage after Kamath, Jia & Liang 2020,
"Selective Question Answering under Domain Shift", ACL: F1 and EM of the answered questions as the least
confident are abstained from, AURC, and the coverage at which F1 reaches ``target_f1``). The math they share with
the classes' audit here: ``metrics`` (binning, ECE, risk-coverage) and ``scaling`` (proper scores, temperature).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from bertprobe.data.dataset import Dataset
from bertprobe.errors import ProbeError
from bertprobe.hookmarkers import hookimpl
from bertprobe.model.target import Target
from bertprobe.probe import Probe, ProbeContext
from bertprobe.progress import progress
from bertprobe.results import DefaultExpectation, ProbeResult
from bertprobe.results.outcomes import Outcomes, example_ids
from bertprobe.probes.calibration import answers, entities, labelsets
from bertprobe.probes.calibration.metrics import ece_parts, ece_value, risk_coverage
from bertprobe.probes.calibration.scaling import fit_temperature, judge_scaling, proper_scores, softmax


@dataclass(frozen=True)
class CalibrationParams:
    """``bins``: equal-width (and equal-mass) bins of the ECE. ``bootstrap``: resamples of the intervals
    (0: none). ``high_confidence``: what counts as an overconfident mistake (``overconfidence: confidence``:
    top probability >= it; ``margin``: top minus second probability >= it, Giskard's definition).
    ``coverages``: the coverages at which selective accuracy is reported. ``fit_share``: the seeded share of
    the data temperature scaling is fitted on (the rest measures it). ``min_scaling_change``: temperature
    scaling is called helpful or harmful only for a held-out change of NLL or ECE at least this large and, with
    ``bootstrap``, past its paired 95% interval; anything less is no measurable effect. ``target_f1`` (extractive
    QA): the F1 the answered questions must reach for ``coverage_at_f1_*`` (Kamath et al. 2020 report 80%)."""

    bins: int = 15
    bootstrap: int = 1000
    high_confidence: float = 0.9  # confidence (or margin) at and above which a wrong prediction counts as overconfident
    overconfidence: Literal["confidence", "margin"] = "confidence"  # confidence: top probability; margin: top minus second probability (Giskard's definition)
    coverages: tuple[float, ...] = (0.9, 0.8)
    fit_share: float = 0.5
    min_scaling_change: float = 0.005  # the smallest held-out change of NLL or ECE called an effect of temperature scaling
    target_f1: float = 0.8  # extractive QA: report the largest coverage whose answered questions reach this F1
    per_label_temperature: bool = False  # multi-label: also fit one temperature per label (as well as the shared one)
    batch_size: int | None = None  # examples per forward pass (default: sized to the device)

    def __post_init__(self) -> None:
        if self.bins < 1 or self.bootstrap < 0:
            raise ValueError("bins must be >= 1 and bootstrap >= 0")
        if not 0 < self.fit_share < 1 or not all(0 < c <= 1 for c in self.coverages) or not 0 < self.target_f1 <= 1:
            raise ValueError("fit_share, coverages and target_f1 lie in (0, 1]")
        if self.min_scaling_change < 0:
            raise ValueError("min_scaling_change must be >= 0")



class CalibrationProbe(Probe):
    name = "calibration"
    description = "Is a 0.95 a 95%? ECE, MCE, Brier, NLL, temperature scaling, overconfidence, risk-coverage"
    paper = "Guo et al. 2017, On Calibration of Modern Neural Networks (ICML); Desai & Durrett 2020 (EMNLP)"
    requires = frozenset({"predictions", "probabilities", "data:labels"})
    tasks = frozenset({"classification", "multiple-choice", "multi-label", "token-classification", "question-answering"})
    metrics = {
        "ece": "expected calibration error: mean |confidence - accuracy| over equal-width bins, weighted by size",
        "ece_equal_mass": "ECE over bins of equal size",
        "mce": "maximum calibration error: the worst bin's |confidence - accuracy|",
        "brier": "Brier score: mean squared error of the class probabilities",
        "nll": "negative log-likelihood of the gold labels",
        "temperature": "temperature fitted by NLL on the fitting half",
        "nll_heldout": "NLL on the held-out half",
        "nll_heldout_scaled": "NLL on the held-out half after temperature scaling",
        "ece_heldout": "ECE on the held-out half",
        "ece_heldout_scaled": "ECE on the held-out half after temperature scaling",
        "temperature_helps": "1 when the fitted temperature measurably lowers the held-out NLL or ECE and raises "
                             "neither (then apply it), -1 when it measurably raises one (do not), 0: no measurable effect",
        "nll_heldout_change": "held-out NLL after temperature scaling minus before, with its paired 95% interval",
        "ece_heldout_change": "held-out ECE after temperature scaling minus before, with its paired 95% interval",
        "overconfident_error_rate": "share of wrong predictions made with confidence (or margin) >= high_confidence",
        "aurc": "area under the risk-coverage curve (mean risk over coverages)",
        "accuracy_at_coverage_*": "accuracy of the N% most confident predictions",
        "accuracy": "share of examples predicted correctly",
        "examples": "examples evaluated",
    }  # and what a section writes instead (its catalogue: label sets' ece_*, a reader's aurc_em...): catalogue()
    metric_directions = {"ece": False, "ece_equal_mass": False, "mce": False, "brier": False, "nll": False,
                         "temperature": None, "nll_heldout": False, "nll_heldout_scaled": False, "ece_heldout": False,
                         "ece_heldout_scaled": False, "temperature_helps": None, "nll_heldout_change": None,
                         "ece_heldout_change": None, "overconfident_error_rate": False, "aurc": False,
                         "accuracy_at_coverage_*": True, "accuracy": True, "examples": None}
    Params = CalibrationParams
    defaults = (DefaultExpectation(
        "ece", max=0.1,
        why="Guo et al. 2017 measure ECE of 0.04-0.16 on modern uncalibrated networks and about 0.01 after temperature "
            "scaling: above 0.1 the confidence is off by ten points on average, the badly calibrated end"),)
    key_metrics = ("ece", "brier", "overconfident_error_rate")

    def run(self, target: Target, data: Dataset | None, params: CalibrationParams, ctx: ProbeContext) -> ProbeResult:
        assert data is not None
        if any(ex.label is None for ex in data.examples):
            raise ProbeError("calibration needs a gold label for every example")
        section = ctx.section(self.name, target.task)  # label sets, entities, answers: audited in their terms
        if section is not None:
            result = ProbeResult(probe=self.name)
            section.audit(result, target, data, params, ctx)
            return result
        logits = ctx.predictions(target, data, params.batch_size).logits.double().numpy()
        gold = np.asarray(data.labels(), dtype=int)
        if len(gold) < 2:
            raise ProbeError("calibration needs at least 2 examples")
        probs = softmax(logits)
        confidence, pred = probs.max(axis=1), probs.argmax(axis=1)
        correct = (pred == gold).astype(float)
        width, mass = ece_parts(confidence, correct, params.bins), ece_parts(confidence, correct, params.bins, True)
        brier, nll = proper_scores(probs, gold)
        result = ProbeResult(probe=self.name)
        ids = example_ids(data.examples)
        result.outcomes += [Outcomes.from_values("correct", ids, correct), Outcomes.from_values("confidence", ids, confidence, "score"),
                            Outcomes.from_values("brier", ids, brier, "score"), Outcomes.from_values("nll", ids, nll, "score"),
                            Outcomes.from_values("ece_contribution", ids, width["contribution"], "score")]
        intervals = self._intervals(probs, gold, params, ctx.seed)
        for name, value, description, outcome in (
            # no paired test for ECE: an example's contribution is its bin's gap, shared by the whole bin, so a
            # bootstrap over examples holds the gaps fixed and finds any difference 'significant'; ECE gates on
            # its own bound per model (the default 0.1), Brier and NLL (per-example proper scores) are paired
            ("ece", width["ece"], f"expected calibration error, {params.bins} equal-width bins", None),
            ("ece_equal_mass", mass["ece"], f"expected calibration error, {params.bins} equal-mass bins", None),
            ("mce", width["mce"], "maximum calibration error (largest bin gap)", None),
            ("brier", float(brier.mean()), "multi-class Brier score", "brier"),
            ("nll", float(nll.mean()), "negative log-likelihood of the gold class", "nll"),
        ):
            result.add_metric(name, value, False, description, ci=intervals.get(name), outcome=outcome,
                              kind="extreme" if name == "mce" else "quality")
        result.add_metric("accuracy", float(correct.mean()), True, "share of examples predicted correctly", outcome="correct")
        self._temperature(result, logits, gold, params, ctx.seed)
        self._overconfidence(result, probs, correct, params)
        coverage, risk = risk_coverage(confidence, correct)
        result.add_metric("aurc", float(risk.mean()), False, "area under the risk-coverage curve (mean risk over coverages)",
                          ci=intervals.get("aurc"))
        for c in params.coverages:
            k = max(1, int(math.floor(c * len(gold) + 1e-9)))
            result.add_metric(f"accuracy_at_coverage_{round(c * 100)}", float(1 - risk[k - 1]), True,
                              f"accuracy of the {round(c * 100)}% most confident predictions")
        result.add_metric("examples", float(len(gold)), None, "examples evaluated", kind="count")
        result.details["bins"] = width["bins"]
        result.details["bins_equal_mass"] = mass["bins"]
        result.details["figures"] = self._figures(width["bins"], probs, gold, target.label_names, coverage, risk, params)
        result.details["key_finding"] = f"ECE {width['ece']:.3f}, {result.details['temperature_scaling']}"
        return result

    @staticmethod
    def _intervals(probs: np.ndarray, gold: np.ndarray, params: CalibrationParams, seed: int) -> dict[str, tuple[float, float]]:
        if not params.bootstrap:
            return {}
        rng = np.random.default_rng(seed)
        draws: dict[str, list[float]] = {k: [] for k in ("ece", "ece_equal_mass", "mce", "brier", "nll", "aurc")}
        n = len(gold)
        for _ in progress(range(params.bootstrap), desc="bootstrap"):
            idx = rng.integers(0, n, size=n)
            p, g = probs[idx], gold[idx]
            conf, corr = p.max(axis=1), (p.argmax(axis=1) == g).astype(float)
            width = ece_parts(conf, corr, params.bins)
            brier, nll = proper_scores(p, g)
            draws["ece"].append(width["ece"])
            draws["mce"].append(width["mce"])
            draws["ece_equal_mass"].append(ece_parts(conf, corr, params.bins, True)["ece"])
            draws["brier"].append(float(brier.mean()))
            draws["nll"].append(float(nll.mean()))
            draws["aurc"].append(float(risk_coverage(conf, corr)[1].mean()))
        return {k: (float(np.quantile(v, 0.025)), float(np.quantile(v, 0.975))) for k, v in draws.items()}

    @staticmethod
    def _temperature(result: ProbeResult, logits: np.ndarray, gold: np.ndarray, params: CalibrationParams, seed: int) -> None:
        order = np.random.default_rng(seed).permutation(len(gold))
        cut = min(len(gold) - 1, max(1, int(round(params.fit_share * len(gold)))))
        fit, held = order[:cut], order[cut:]
        temperature = fit_temperature(logits[fit], gold[fit])
        before, after = softmax(logits[held]), softmax(logits[held], temperature)
        result.add_metric("temperature", temperature, None, "temperature fitted by NLL on the fitting half")
        units = []  # per held-out example: NLL, confidence and correctness, before and after
        for suffix, probs in (("", before), ("_scaled", after)):
            conf, corr = probs.max(axis=1), (probs.argmax(axis=1) == gold[held]).astype(float)
            nll = proper_scores(probs, gold[held])[1]
            units.append((nll, conf, corr))
            result.add_metric(f"nll_heldout{suffix}", float(nll.mean()), False,
                              "NLL on the held-out half" + (" after temperature scaling" if suffix else ""))
            result.add_metric(f"ece_heldout{suffix}", ece_parts(conf, corr, params.bins)["ece"], False,
                              "ECE on the held-out half" + (" after temperature scaling" if suffix else ""))
        (nll_b, conf_b, corr_b), (nll_a, conf_a, corr_a) = units

        def change(idx: np.ndarray) -> tuple[float, float]:
            return (float(nll_a[idx].mean() - nll_b[idx].mean()),
                    ece_value(conf_a[idx], corr_a[idx], params.bins) - ece_value(conf_b[idx], corr_b[idx], params.bins))

        judge_scaling(result, len(held), change, params, seed)  # the judgement the sections share

    @staticmethod
    def _overconfidence(result: ProbeResult, probs: np.ndarray, correct: np.ndarray, params: CalibrationParams) -> None:
        top = np.sort(probs, axis=1)
        score = top[:, -1] if params.overconfidence == "confidence" else top[:, -1] - top[:, -2]
        wrong = correct == 0
        rate = float((score[wrong] >= params.high_confidence).mean()) if wrong.any() else 0.0
        how = "confidence" if params.overconfidence == "confidence" else "margin over the runner-up"
        result.add_metric("overconfident_error_rate", rate, False,
                          f"share of wrong predictions made with {how} >= {params.high_confidence}")

    @staticmethod
    def _figures(bins: list[dict[str, Any]], probs: np.ndarray, gold: np.ndarray, labels: list[str],
                 coverage: np.ndarray, risk: np.ndarray, params: CalibrationParams) -> list[dict[str, Any]]:
        series = [{"name": "top class", "x": [b["confidence"] for b in bins], "y": [b["accuracy"] for b in bins]},
                  {"name": "perfect calibration", "x": [0, 1], "y": [0, 1]}]
        if probs.shape[1] <= 4:  # per class: the probability of class c against how often c is gold
            for c, name in enumerate(labels or [str(i) for i in range(probs.shape[1])]):
                rows = ece_parts(probs[:, c], (gold == c).astype(float), params.bins)["bins"]
                series.append({"name": f"class {name}", "x": [b["confidence"] for b in rows], "y": [b["accuracy"] for b in rows]})
        counts = [0] * params.bins
        for b in bins:
            counts[b["bin"]] = b["count"]
        step = max(1, len(coverage) // 200)
        return [
            {"kind": "line", "title": "reliability diagram", "data": {"series": series},
             "axes": {"x": "confidence (bin mean)", "y": "accuracy"}},
            {"kind": "bars", "title": "confidence histogram (top class)",
             "data": {"labels": [f"{k / params.bins:.2f}-{(k + 1) / params.bins:.2f}" for k in range(params.bins)],
                      "series": [{"name": "examples", "values": counts}]}, "axes": {"y": "examples"}},
            {"kind": "line", "title": "risk-coverage curve (selective prediction)",
             "data": {"series": [{"name": "error rate", "x": coverage[::step].tolist(), "y": risk[::step].tolist()}]},
             "axes": {"x": "coverage", "y": "risk (error rate)"}},
        ]


@hookimpl
def bertprobe_register_probes(registry: Any) -> None:
    registry.add(CalibrationProbe)


@hookimpl
def bertprobe_register_sections(registry: Any) -> None:
    registry.add("calibration", labelsets, when="label_sets")
    registry.add("calibration", entities, when="word_tags")
    registry.add("calibration", answers, when="span_answers")
