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

Extractive QA (the task's own section, ``tasks.qa_calibration``): the chosen span's probability among the
n-best candidates of all windows against exact match, on the same bins; selective QA's risk-coverage after
Kamath, Jia & Liang 2020 ("Selective Question Answering under Domain Shift", ACL): F1 and EM of the answered
questions as the least confident are abstained from, AURC, and the coverage at which F1 reaches ``target_f1``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
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
from bertprobe.stats import paired_bootstrap_statistic
from bertprobe.tasks.calibration_metrics import bin_index, ece_parts, ece_value, risk_coverage


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


def proper_scores(probs: np.ndarray, gold: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per example: the multi-class Brier score and the negative log-likelihood of the gold class."""
    onehot = np.zeros_like(probs)
    onehot[np.arange(len(gold)), gold] = 1.0
    brier = ((probs - onehot) ** 2).sum(axis=1)
    nll = -np.log(np.clip(probs[np.arange(len(gold)), gold], 1e-12, None))
    return brier, nll


def fit_temperature(logits: np.ndarray, gold: np.ndarray, low: float = -3.0, high: float = 3.0, steps: int = 60) -> float:
    """T > 0 minimising the NLL of softmax(logits / T): golden-section search on log T in [e^low, e^high]."""

    def nll(log_t: float) -> float:
        z = logits / math.exp(log_t)
        z = z - z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        return float(-logp[np.arange(len(gold)), gold].mean())

    return golden_section(nll, low, high, steps)


def binary_nll(logits: np.ndarray, gold: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Binary cross-entropy of sigmoid(logits / T) against 0/1 gold, element-wise (numerically stable)."""
    z = logits / temperature
    return np.maximum(z, 0) - z * gold + np.log1p(np.exp(-np.abs(z)))


def fit_binary_temperature(logits: np.ndarray, gold: np.ndarray, low: float = -3.0, high: float = 3.0,
                           steps: int = 60) -> float:
    """T > 0 minimising the mean binary cross-entropy of sigmoid(logits / T) over every (example, label) pair."""
    return golden_section(lambda log_t: float(binary_nll(logits, gold, math.exp(log_t)).mean()), low, high, steps)


def sigmoid(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-logits / temperature))


def golden_section(loss: Any, low: float, high: float, steps: int) -> float:
    """exp of the log T in [low, high] minimising ``loss(log T)`` (deterministic, no optimiser state)."""
    ratio = (math.sqrt(5) - 1) / 2
    a, b = low, high
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = loss(c), loss(d)
    for _ in range(steps):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = loss(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = loss(d)
    return math.exp((a + b) / 2)


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = logits / temperature
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


MIN_HELD_OUT = 100  # below this, a fitted temperature is flagged as resting on few examples


class CalibrationProbe(Probe):
    name = "calibration"
    description = "Is a 0.95 a 95%? ECE, MCE, Brier, NLL, temperature scaling, overconfidence, risk-coverage"
    paper = "Guo et al. 2017, On Calibration of Modern Neural Networks (ICML); Desai & Durrett 2020 (EMNLP)"
    requires = frozenset({"predictions", "data:labels"})
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
        "ece_macro": "multi-label: mean of the per-label ECEs",
        "ece_*": "multi-label: ECE of one label's probability as a binary forecast",
        "temperature_*": "multi-label: one label's own temperature (per_label_temperature: true)",
        "ece_token": "token classification: ECE of each word's top tag probability",
        "brier_token": "token classification: multi-class Brier score per word",
        "nll_token": "token classification: NLL of each word's gold tag",
        "entities": "token classification: predicted entities binned by the entity-level ECE",
        "exact_match": "extractive QA: share of questions answered exactly (SQuAD EM), the event the confidence forecasts",
        "f1": "extractive QA: mean SQuAD F1 over questions",
        "aurc_em": "extractive QA: area under the risk-coverage curve with risk 1 - EM",
        "f1_at_coverage_*": "extractive QA: F1 of the N% most confident answers (selective QA)",
        "em_at_coverage_*": "extractive QA: EM of the N% most confident answers",
        "coverage_at_f1_*": "extractive QA: largest share of questions answered, most confident first, whose F1 reaches target_f1",
    }
    metric_directions = {"ece": False, "ece_equal_mass": False, "mce": False, "brier": False, "nll": False,
                         "temperature": None, "nll_heldout": False, "nll_heldout_scaled": False, "ece_heldout": False,
                         "ece_heldout_scaled": False, "temperature_helps": None, "nll_heldout_change": None,
                         "ece_heldout_change": None, "overconfident_error_rate": False, "aurc": False,
                         "accuracy_at_coverage_*": True, "accuracy": True, "examples": None, "ece_*": False,
                         "temperature_*": None, "ece_token": False, "brier_token": False, "nll_token": False,
                         "entities": None, "exact_match": True, "f1": True, "aurc_em": False, "f1_at_coverage_*": True,
                         "em_at_coverage_*": True, "coverage_at_f1_*": True}
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
        result = ProbeResult(probe=self.name)
        if target.task.audit_calibration(result, target, data, params, ctx):  # the task audits in its own terms
            return result
        raw = ctx.predictions(target, data, params.batch_size).logits
        if target.task.label_sets:
            return label_set_calibration(target, data, raw, params, ctx.seed)
        if target.task.word_tags:
            return entity_calibration(target, data, raw, params, ctx.seed)
        logits = raw.double().numpy()
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

        CalibrationProbe._judge_scaling(result, len(held), change, params, seed)

    @staticmethod
    def _judge_scaling(result: ProbeResult, held: int, change: Callable[[np.ndarray], tuple[float, float]],
                       params: CalibrationParams, seed: int) -> None:
        """Advice only past noise. ``change(indices)`` is (NLL after - before, ECE after - before) on those held-out
        units; a paired bootstrap over the held-out units (``bertprobe.stats``, seeded) gives each change its 95%
        interval. A change is measurable when it is at least ``min_scaling_change`` and its interval excludes 0
        (without ``bootstrap``, on its size alone). Temperature scaling helps when it measurably lowers the NLL or
        the ECE and measurably raises neither; it is harmful when it measurably raises either (a warning: do not
        apply it); otherwise it has no measurable effect, whichever way the point estimates lean."""
        t = result.value("temperature") or 1.0
        nll, nll_t = result.value("nll_heldout") or 0.0, result.value("nll_heldout_scaled") or 0.0
        ece, ece_t = result.value("ece_heldout") or 0.0, result.value("ece_heldout_scaled") or 0.0
        deltas = (nll_t - nll, ece_t - ece)
        intervals = (paired_bootstrap_statistic(change, held, params.bootstrap, 0.95, seed) if params.bootstrap
                     else [None, None])
        for name, delta, ci, what in zip(("nll_heldout_change", "ece_heldout_change"), deltas, intervals, ("NLL", "ECE")):
            result.add_metric(name, delta, None, f"held-out {what} after temperature scaling minus before, with its "
                              "paired 95% interval", ci=ci)

        def measurable(delta: float, ci: tuple[float, float] | None) -> int:
            """-1 measurably lower, +1 measurably higher, 0 neither."""
            if abs(delta) < params.min_scaling_change or (ci is not None and ci[0] <= 0 <= ci[1]):
                return 0
            return 1 if delta > 0 else -1

        effects = [measurable(d, ci) for d, ci in zip(deltas, intervals)]
        verdict = 1 if -1 in effects and 1 not in effects else -1 if 1 in effects else 0
        result.add_metric("temperature_helps", float(verdict), None,
                          "1 when the fitted temperature measurably lowers the held-out NLL or ECE and raises neither "
                          "(apply it), -1 when it measurably raises one (do not), 0: no measurable effect")

        def shown(what: str, before: float, after: float, ci: tuple[float, float] | None) -> str:
            return f"{what} {before:.3f} -> {after:.3f}" + (f" [Δ {ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "")

        change_text = (f"held-out {shown('NLL', nll, nll_t, intervals[0])}, {shown('ECE', ece, ece_t, intervals[1])}")
        few = f"; fitted on few examples ({held} held out)" if held < MIN_HELD_OUT else ""
        if verdict == 1:
            result.details["temperature_scaling"] = f"temperature {t:.2f} helps ({change_text}): apply it{few}"
        elif verdict == -1:
            result.details["temperature_scaling"] = f"temperature {t:.2f} is harmful ({change_text}): do not apply it{few}"
            worse = " and ".join(w for w, e in zip(("NLL", "ECE"), effects) if e == 1)
            result.details.setdefault("warnings", []).append(
                f"the fitted temperature {t:.2f} measurably worsens the held-out {worse} ({change_text}): do not apply it"
                + few)
        else:  # the minimum is named where it, not the interval, made a change no effect
            small = any(abs(d) < params.min_scaling_change and (ci is None or not ci[0] <= 0 <= ci[1])
                        for d, ci in zip(deltas, intervals) if d)
            minimum = f"; a change under {params.min_scaling_change:g} counts as none" if small else ""
            result.details["temperature_scaling"] = f"temperature {t:.2f}: no measurable effect ({change_text}{minimum}){few}"

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


def label_set_calibration(target: Target, data: Dataset, raw: Any, params: CalibrationParams, seed: int) -> ProbeResult:
    """Multi-label calibration: every (example, label) sigmoid probability is a binary forecast. ECE pooled over
    all pairs (the default gate) and per label, their macro mean, Brier and binary NLL, one shared temperature
    fitted by binary NLL on the fitting half (per-label ones on request), overconfident wrong decisions."""
    task = target.task
    names = list(task.label_names)
    logits = raw.double().numpy()
    gold = task.gold(data).numpy().astype(float)
    if len(gold) < 2:
        raise ProbeError("calibration needs at least 2 examples")
    probs = sigmoid(logits)
    pooled = ece_parts(probs.ravel(), gold.ravel(), params.bins)
    mass = ece_parts(probs.ravel(), gold.ravel(), params.bins, True)
    brier, nll = ((probs - gold) ** 2).mean(axis=1), binary_nll(logits, gold).mean(axis=1)
    result = ProbeResult(probe=CalibrationProbe.name)
    ids = example_ids(data.examples)
    exact = (task.predict(raw).numpy() == gold).all(axis=1).astype(float)
    result.outcomes += [Outcomes.from_values("correct", ids, exact), Outcomes.from_values("brier", ids, brier, "score"),
                        Outcomes.from_values("nll", ids, nll, "score")]
    intervals: dict[str, tuple[float, float]] = {}
    if params.bootstrap:
        rng = np.random.default_rng(seed)
        draws: dict[str, list[float]] = {"ece": [], "brier": [], "nll": []}
        for _ in progress(range(params.bootstrap), desc="bootstrap"):
            idx = rng.integers(0, len(gold), size=len(gold))
            draws["ece"].append(ece_parts(probs[idx].ravel(), gold[idx].ravel(), params.bins)["ece"])
            draws["brier"].append(float(brier[idx].mean()))
            draws["nll"].append(float(nll[idx].mean()))
        intervals = {k: (float(np.quantile(v, 0.025)), float(np.quantile(v, 0.975))) for k, v in draws.items()}
    per_label = [ece_parts(probs[:, c], gold[:, c], params.bins) for c in range(len(names))]
    for name, value, description, outcome in (
        ("ece", pooled["ece"], f"ECE pooled over every (example, label) pair, {params.bins} equal-width bins", None),
        ("ece_equal_mass", mass["ece"], f"pooled ECE, {params.bins} equal-mass bins", None),
        ("mce", pooled["mce"], "maximum calibration error of the pooled bins", None),
        ("ece_macro", float(np.mean([p["ece"] for p in per_label])) if per_label else 0.0, "mean of the per-label ECEs", None),
        ("brier", float(brier.mean()), "Brier score: mean squared error of each label's probability", "brier"),
        ("nll", float(nll.mean()), "binary cross-entropy, mean over (example, label) pairs", "nll"),
    ):
        result.add_metric(name, value, False, description, ci=intervals.get(name), outcome=outcome,
                          kind="extreme" if name == "mce" else "quality")
    for label, parts in zip(names, per_label):
        result.add_metric(f"ece_{label}", parts["ece"], False, f"ECE of label '{label}''s probability")
    order = np.random.default_rng(seed).permutation(len(gold))
    cut = min(len(gold) - 1, max(1, int(round(params.fit_share * len(gold)))))
    fit, held = order[:cut], order[cut:]
    temperature = fit_binary_temperature(logits[fit], gold[fit])
    result.add_metric("temperature", temperature, None, "one temperature shared by every label, fitted by binary NLL "
                      "on the fitting half")
    units = []  # per held-out example: its mean binary NLL and its labels' probabilities, before and after
    for suffix, t in (("", 1.0), ("_scaled", temperature)):
        scaled = sigmoid(logits[held], t)
        example_nll = binary_nll(logits[held], gold[held], t).mean(axis=1)
        units.append((example_nll, scaled))
        result.add_metric(f"nll_heldout{suffix}", float(example_nll.mean()), False,
                          "binary NLL on the held-out half" + (" after temperature scaling" if suffix else ""))
        result.add_metric(f"ece_heldout{suffix}", ece_parts(scaled.ravel(), gold[held].ravel(), params.bins)["ece"], False,
                          "pooled ECE on the held-out half" + (" after temperature scaling" if suffix else ""))
    (nll_b, probs_b), (nll_a, probs_a) = units
    held_gold = gold[held]

    def change(idx: np.ndarray) -> tuple[float, float]:
        truth = held_gold[idx].ravel()
        return (float(nll_a[idx].mean() - nll_b[idx].mean()),
                ece_value(probs_a[idx].ravel(), truth, params.bins) - ece_value(probs_b[idx].ravel(), truth, params.bins))

    CalibrationProbe._judge_scaling(result, len(held), change, params, seed)
    if params.per_label_temperature:
        for c, label in enumerate(names):
            result.add_metric(f"temperature_{label}", fit_binary_temperature(logits[fit][:, c:c + 1], gold[fit][:, c:c + 1]),
                              None, f"temperature of label '{label}' alone, fitted on the fitting half")
    pred = probs >= task.thresholds.numpy()  # type: ignore[attr-defined]
    wrong = pred != gold.astype(bool)
    sure = np.maximum(probs, 1 - probs) >= params.high_confidence
    rate = float((sure & wrong).sum() / wrong.sum()) if wrong.any() else 0.0
    result.add_metric("overconfident_error_rate", rate, False,
                      f"share of wrong label decisions made with probability >= {params.high_confidence} (or <= "
                      f"{1 - params.high_confidence:.2f})")
    result.add_metric("examples", float(len(gold)), None, "examples evaluated", kind="count")
    result.details["bins"] = pooled["bins"]
    result.details["bins_equal_mass"] = mass["bins"]
    result.details["bins_per_label"] = {label: parts["bins"] for label, parts in zip(names, per_label)}
    series = [{"name": "all labels", "x": [b["confidence"] for b in pooled["bins"]], "y": [b["accuracy"] for b in pooled["bins"]]},
              {"name": "perfect calibration", "x": [0, 1], "y": [0, 1]}]
    shown = sorted(range(len(names)), key=lambda c: -gold[:, c].sum())[:8]  # the 8 most frequent labels; all in the JSON
    series += [{"name": f"label {names[c]}", "x": [b["confidence"] for b in per_label[c]["bins"]],
                "y": [b["accuracy"] for b in per_label[c]["bins"]]} for c in shown]
    result.details["figures"] = [
        {"kind": "line", "title": "reliability diagram (each label's probability as a binary forecast)",
         "data": {"series": series}, "axes": {"x": "predicted probability (bin mean)", "y": "share of texts with the label"}},
        {"kind": "bars", "title": "ECE per label", "metrics": ["ece_*"],
         "data": {"labels": names, "series": [{"name": "ECE", "values": [p["ece"] for p in per_label]}]}, "axes": {"y": "ECE"}},
    ]
    result.details["key_finding"] = f"pooled ECE {pooled['ece']:.3f} over {gold.size} label decisions, {result.details['temperature_scaling']}"
    return result


def entity_calibration(target: Target, data: Dataset, raw: Any, params: CalibrationParams, seed: int) -> ProbeResult:
    """NER calibration at two levels. Entity level (``ece``, the default gate; ``brier``): each predicted entity's
    confidence is the mean of its words' top-tag probabilities, binned against whether the entity is exactly
    right (span and type). Token level: each word's top-tag probability against whether its tag is right
    (``ece_token``, ``brier_token``, ``nll_token``). One temperature fitted by the words' NLL on the fitting half
    of the sentences, judged on the other half (token NLL and entity ECE)."""
    from bertprobe.tasks.entities import spans

    task = target.task
    scheme = str(task.settings.get("scheme", "IOB2"))
    lengths = [len(ex.label or ()) for ex in data.examples]
    logits = [raw[i, :n].double().numpy() for i, n in enumerate(lengths)]
    gold = [np.asarray(ex.label, dtype=int) for ex in data.examples]
    if len(gold) < 2:
        raise ProbeError("calibration needs at least 2 sentences")

    def entity_units(sentences: list[int], temperature: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
        conf, right = [], []
        for i in sentences:
            probs = softmax(logits[i], temperature)
            tags = task.tags(probs.argmax(axis=1))  # type: ignore[attr-defined]
            truth = set(spans(task.tags(gold[i]), scheme))  # type: ignore[attr-defined]
            for a, b, kind in spans(tags, scheme):
                conf.append(float(probs[a:b].max(axis=1).mean()))
                right.append(float((a, b, kind) in truth))
        return np.asarray(conf), np.asarray(right)

    everything = list(range(len(gold)))
    conf, right = entity_units(everything)
    probs_all = [softmax(z) for z in logits]
    word_conf = np.concatenate([p.max(axis=1) for p in probs_all]) if probs_all else np.zeros(0)
    word_right = np.concatenate([(p.argmax(axis=1) == g).astype(float) for p, g in zip(probs_all, gold)])
    brier_words = np.concatenate([proper_scores(p, g)[0] for p, g in zip(probs_all, gold) if len(g)])
    nll_words = np.concatenate([proper_scores(p, g)[1] for p, g in zip(probs_all, gold) if len(g)])
    result = ProbeResult(probe=CalibrationProbe.name)
    ids = example_ids(data.examples)
    per_sentence_nll = [float(proper_scores(p, g)[1].mean()) if len(g) else 0.0 for p, g in zip(probs_all, gold)]
    result.outcomes.append(Outcomes.from_values("nll", ids, per_sentence_nll, "score"))
    if len(conf):
        entity = ece_parts(conf, right, params.bins)
        result.add_metric("ece", entity["ece"], False, f"entity-level ECE: a predicted entity's mean top-tag probability "
                          f"against whether it is exactly right, {params.bins} bins")
        result.add_metric("mce", entity["mce"], False, "entity-level maximum calibration error", kind="extreme")
        result.add_metric("brier", float(((conf - right) ** 2).mean()), False, "entity-level Brier score")
        result.details["bins"] = entity["bins"]
    result.add_metric("entities", float(len(conf)), None, "predicted entities binned", kind="count")
    token = ece_parts(word_conf, word_right, params.bins)
    result.add_metric("ece_token", token["ece"], False, "token-level ECE of each word's top tag probability")
    result.add_metric("brier_token", float(brier_words.mean()), False, "multi-class Brier score per word")
    result.add_metric("nll_token", float(nll_words.mean()), False, "NLL of each word's gold tag", outcome="nll")
    result.add_metric("accuracy", float(word_right.mean()), True, "share of words tagged right")
    order = np.random.default_rng(seed).permutation(len(gold))
    cut = min(len(gold) - 1, max(1, int(round(params.fit_share * len(gold)))))
    fit, held = sorted(order[:cut].tolist()), sorted(order[cut:].tolist())
    fit_logits = np.concatenate([logits[i] for i in fit]) if fit else np.zeros((0, 1))
    fit_gold = np.concatenate([gold[i] for i in fit]) if fit else np.zeros(0, dtype=int)
    temperature = fit_temperature(fit_logits, fit_gold) if len(fit_gold) else 1.0
    result.add_metric("temperature", temperature, None, "temperature fitted by the words' NLL on the fitting half")
    held_logits = np.concatenate([logits[i] for i in held])
    held_gold = np.concatenate([gold[i] for i in held])
    sentences = []  # per held-out sentence: its words' NLL and its entities' (confidence, right), before and after
    for suffix, t in (("", 1.0), ("_scaled", temperature)):
        result.add_metric(f"nll_heldout{suffix}", float(proper_scores(softmax(held_logits, t), held_gold)[1].mean()), False,
                          "words' NLL on the held-out half" + (" after temperature scaling" if suffix else ""))
        c, r = entity_units(held, t)
        result.add_metric(f"ece_heldout{suffix}", ece_parts(c, r, params.bins)["ece"] if len(c) else 0.0, False,
                          "entity-level ECE on the held-out half" + (" after temperature scaling" if suffix else ""))
        sentences.append([(proper_scores(softmax(logits[i], t), gold[i])[1], *entity_units([i], t)) for i in held])

    def change(idx: np.ndarray) -> tuple[float, float]:
        out = []
        for per_sentence in sentences:
            chosen = [per_sentence[i] for i in idx]
            words = np.concatenate([w for w, _, _ in chosen])
            conf, right = np.concatenate([c for _, c, _ in chosen]), np.concatenate([r for _, _, r in chosen])
            out.append((float(words.mean()) if len(words) else 0.0, ece_value(conf, right, params.bins)))
        (nll_b, ece_b), (nll_a, ece_a) = out
        return nll_a - nll_b, ece_a - ece_b

    CalibrationProbe._judge_scaling(result, len(held), change, params, seed)
    result.add_metric("examples", float(len(gold)), None, "sentences evaluated", kind="count")
    series = [{"name": "perfect calibration", "x": [0, 1], "y": [0, 1]},
              {"name": "words (top tag)", "x": [b["confidence"] for b in token["bins"]], "y": [b["accuracy"] for b in token["bins"]]}]
    if len(conf):
        series.append({"name": "entities", "x": [b["confidence"] for b in result.details["bins"]],
                       "y": [b["accuracy"] for b in result.details["bins"]]})
    result.details["bins_token"] = token["bins"]
    result.details["figures"] = [{"kind": "line", "title": "reliability diagram: predicted entities and words",
                                  "data": {"series": series}, "axes": {"x": "confidence (bin mean)", "y": "share right"}}]
    ece = result.value("ece")
    result.details["key_finding"] = (f"entity ECE {ece:.3f} over {len(conf)} predicted entities, token ECE {token['ece']:.3f}, "
                                     f"{result.details['temperature_scaling']}") if ece is not None else \
        f"no entity predicted; token ECE {token['ece']:.3f}"
    return result


@hookimpl
def bertprobe_register_probes(registry: Any) -> None:
    registry.add(CalibrationProbe)


__all__ = ["CalibrationParams", "CalibrationProbe", "bin_index", "ece_parts", "ece_value", "fit_temperature", "proper_scores", "risk_coverage"]
