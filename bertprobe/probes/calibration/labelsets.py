"""The calibration probe's section for label sets (tasks with ``label_sets``: multi-label): each (example, label)
sigmoid probability is a binary forecast (Guo et al. 2017's measures, pooled and per label)."""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from bertprobe.data.dataset import Dataset
from bertprobe.errors import ProbeError
from bertprobe.probes.calibration.metrics import ece_parts, ece_value
from bertprobe.probes.calibration.scaling import binary_nll, fit_binary_temperature, judge_scaling, sigmoid
from bertprobe.progress import progress
from bertprobe.results import Catalogue, ProbeResult
from bertprobe.results.outcomes import Outcomes, example_ids
from bertprobe.tasks.multilabel import MultiLabelClassification


def audit(result: ProbeResult, target: Any, data: Dataset, params: Any, ctx: Any) -> None:
    """Each (example, label) probability as a binary forecast, on the shared logits (``label_set_calibration``)."""
    label_set_calibration(result, target, data, ctx.predictions(target, data, params.batch_size).logits, params,
                          ctx.seed)


def label_set_calibration(result: ProbeResult, target: Any, data: Dataset, raw: Any, params: Any, seed: int) -> None:
    """Multi-label calibration: every (example, label) sigmoid probability is a binary forecast. ECE pooled over
    all pairs (the default gate) and per label, their macro mean, Brier and binary NLL, one shared temperature
    fitted by binary NLL on the fitting half (per-label ones on request), overconfident wrong decisions."""
    task = cast(MultiLabelClassification, target.task)
    names = list(task.label_names)
    logits = raw.double().numpy()
    gold = task.gold(data).numpy().astype(float)
    if len(gold) < 2:
        raise ProbeError("calibration needs at least 2 examples")
    probs = sigmoid(logits)
    pooled = ece_parts(probs.ravel(), gold.ravel(), params.bins)
    mass = ece_parts(probs.ravel(), gold.ravel(), params.bins, True)
    brier, nll = ((probs - gold) ** 2).mean(axis=1), binary_nll(logits, gold).mean(axis=1)
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

    judge_scaling(result, len(held), change, params, seed)
    if params.per_label_temperature:
        for c, label in enumerate(names):
            result.add_metric(f"temperature_{label}", fit_binary_temperature(logits[fit][:, c:c + 1], gold[fit][:, c:c + 1]),
                              None, f"temperature of label '{label}' alone, fitted on the fitting half")
    pred = probs >= task.thresholds.numpy()
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


# what this section writes in the calibration probe's place (merged by Probe.catalogue)
catalogue = Catalogue(
    {"ece_macro": "multi-label: mean of the per-label ECEs",
     "ece_*": "multi-label: ECE of one label's probability as a binary forecast",
     "temperature_*": "multi-label: one label's own temperature (per_label_temperature: true)"},
    {"ece_*": False, "temperature_*": None})
