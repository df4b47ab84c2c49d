"""The accuracy probe's section for label sets (tasks with ``label_sets``: ``bertprobe.sections``): micro, macro and
weighted F1, exact match, Hamming loss, per label precision, recall, F1, support, ROC-AUC and average precision,
with intervals, the most confidently wrong examples, figures and the key finding."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from bertprobe.data.dataset import Dataset
from bertprobe.progress import progress
from bertprobe.results import Catalogue, DefaultExpectation, Finding, ProbeResult
from bertprobe.results.outcomes import Outcomes, example_ids
from bertprobe.stats import wilson_interval
from bertprobe.tasks.labelset_metrics import bootstrap_headline
from bertprobe.tasks.scores import absent_note, f1_from_counts


# the bound a label's recall meets by default, per label of a multi-label model or per entity type of a tagger
RECALL_BOUND = DefaultExpectation(
    "recall_*", min=0.5, interval=True,
    why="multi-label per label, or token classification per entity type: below 0.5 the model misses most of "
        "them, which a micro-F1 over frequent ones hides; judged on the Wilson interval, as per-class accuracy is")


def label_set(names: list[str], row: Any) -> str:
    """A predicted label set as one comparable text, its labels in the model's order: ``{toxic, insult}``, ``{}``."""
    return "{" + ", ".join(names[c] for c in np.flatnonzero(row)) + "}"


def audit(result: ProbeResult, target: Any, data: Dataset, params: Any, ctx: Any) -> None:
    """The multi-label audit on the shared logits (``ctx.predictions``): micro/macro/weighted F1, exact match and
    Hamming loss (with bootstrap intervals over examples), per label precision, recall, F1, support, ROC-AUC and
    average precision, label cardinality, the most confidently wrong examples; outcomes ``exact_match`` and
    ``correct_<label>`` for paired gates. The probe times the batches after it (``Task.throughput_from_encode``)."""
    logits = ctx.predictions(target, data, params.batch_size).logits
    seed = ctx.seed
    task = target.task
    names = list(task.label_names)
    probs = task.probs(logits).double().numpy()
    pred = task.predict(logits).numpy()
    gold = task.gold(data).numpy()
    scores = task.metrics(torch.from_numpy(probs), torch.from_numpy(pred), torch.from_numpy(gold))
    intervals = bootstrap_headline(pred, gold, params.bootstrap, params.confidence, seed)
    ids = example_ids(data.examples)
    exact = (pred == gold).all(axis=1).astype(float)
    result.outcomes += [Outcomes.from_values("exact_match", ids, exact.tolist()),
                        Outcomes.from_values("prediction", ids, [label_set(names, row) for row in pred], "label")]
    what = {"micro_f1": "F1 over every (example, label) decision pooled",
            "macro_f1": f"mean F1 over the model's {len(names)} labels",
            "weighted_f1": "per-label F1 weighted by gold support",
            "subset_accuracy": "exact match: predicted label set equals the gold one",
            "hamming_loss": "share of (example, label) decisions that are wrong"}
    for name, description in what.items():
        result.add_metric(name, scores[name], name != "hamming_loss", description, intervals.get(name),
                          outcome="exact_match" if name == "subset_accuracy" else None)
    absent = [names[c] for c in scores["absent"]]  # neither gold nor predicted: no per-label row, no finding
    present = [c for c in range(len(names)) if names[c] not in absent]
    for c, label in enumerate(names):
        tp, support = int(((pred[:, c] == 1) & (gold[:, c] == 1)).sum()), int(gold[:, c].sum())
        right = (pred[:, c] == gold[:, c]).astype(float)
        result.outcomes.append(Outcomes.from_values(f"correct_{label}", ids, right.tolist()))
        if label in absent:
            continue
        result.add_metric(f"f1_{label}", float(scores["f1"][c]), True, f"F1 of label '{label}'")
        result.add_metric(f"precision_{label}", float(scores["precision"][c]), True, f"precision of label '{label}'")
        if support:  # recall is a mean over the label's gold texts: its outcome pairs two builds exactly
            carrying = np.flatnonzero(gold[:, c] == 1)
            result.outcomes.append(Outcomes.from_values(f"recall_{label}", [ids[i] for i in carrying],
                                                        pred[carrying, c].astype(float).tolist()))
            result.add_metric(f"recall_{label}", float(scores["recall"][c]), True, f"recall of label '{label}'",
                              wilson_interval(tp, support, params.confidence), outcome=f"recall_{label}")
        result.add_metric(f"support_{label}", float(support), None, f"gold examples carrying '{label}'", kind="count")
        for key, metric in (("roc_auc", "ROC-AUC"), ("average_precision", "average precision")):
            value = scores[key][c]
            if value is not None:
                result.add_metric(f"{key}_{label}", value, True, f"{metric} of label '{label}''s probability")
    result.add_metric("label_cardinality_gold", float(gold.sum(axis=1).mean()) if len(gold) else 0.0, None,
                      "mean number of gold labels per example")
    result.add_metric("label_cardinality_predicted", float(pred.sum(axis=1).mean()) if len(pred) else 0.0, None,
                      "mean number of predicted labels per example")
    result.add_metric("examples", float(len(gold)), None, "examples evaluated", kind="count")
    # the most confidently wrong: wrong examples ranked by their most confident wrong decision
    wrongness = np.where(pred != gold, np.abs(probs - 0.5) * 2, 0.0).max(axis=1) if len(gold) else np.zeros(0)
    for i in [i for i in np.argsort(-wrongness, kind="stable") if not exact[i]][: params.findings]:
        ex = data.examples[i]
        result.findings.append(Finding(
            title="confidently wrong label set",
            input=ex.text if ex.text_pair is None else f"{ex.text} [SEP] {ex.text_pair}",
            expected=task.describe_labels([int(v) for v in gold[i]]), observed=task.describe_labels([int(v) for v in pred[i]]),
            score=round(float(wrongness[i]), 4)))
    result.details["labels"] = names
    result.details["absent"] = absent
    result.details["task"] = {"name": task.name, **dict(task.settings)}
    f1_errors = _label_f1_intervals(pred, gold, params.bootstrap, params.confidence, seed)
    shown = [names[c] for c in present]

    def column(values: Any) -> list[float]:
        return [float(values[c]) for c in present]

    result.details["figures"] = [
        {"kind": "bars", "title": "F1 per label (bootstrap interval over examples)", "metrics": ["f1_*", "micro_f1"],
         "data": {"labels": shown, "series": [{"name": "F1", "values": column(scores["f1"]),
                                               **({"errors": [f1_errors[c] for c in present]} if f1_errors else {})}],
                  "reference": {"value": scores["micro_f1"], "label": f"micro-F1 {scores['micro_f1']:.3f}"}},
         "axes": {"y": "F1"}},
        {"kind": "bars", "title": "per label: precision, recall, F1, share of examples carrying it (gold, predicted)",
         "metrics": ["precision_*", "recall_*", "f1_*"],
         "data": {"labels": shown, "series": [
             {"name": "precision", "values": column(scores["precision"])},
             {"name": "recall", "values": column(scores["recall"])},
             {"name": "F1", "values": column(scores["f1"])},
             {"name": "gold share", "values": column(gold.mean(axis=0)) if len(gold) else [0.0] * len(present)},
             {"name": "predicted share", "values": column(pred.mean(axis=0)) if len(pred) else [0.0] * len(present)}]},
         "axes": {"y": "score"}},
    ]
    weakest = min(present, key=lambda c: scores["f1"][c]) if present else None
    finding = f"micro-F1 {scores['micro_f1']:.3f}, macro-F1 {scores['macro_f1']:.3f}, exact match {scores['subset_accuracy']:.3f}"
    if weakest is not None:
        finding += f"; weakest label {names[weakest]} F1 {scores['f1'][weakest]:.3f}"
    result.details["key_finding"] = finding + f" on {len(gold)} examples" + absent_note(absent)


def _label_f1_intervals(pred: np.ndarray, gold: np.ndarray, resamples: int, confidence: float,
                        seed: int) -> list[list[float]]:
    """Percentile bootstrap interval of each label's F1 over examples (empty when intervals are off)."""
    if not resamples or len(gold) < 2:
        return []
    rng = np.random.default_rng(seed + 1)
    draws = np.empty((resamples, gold.shape[1]))
    for r in progress(range(resamples), desc="bootstrap per label"):
        idx = rng.integers(0, len(gold), size=len(gold))
        p, g = pred[idx].astype(bool), gold[idx].astype(bool)
        draws[r] = f1_from_counts((p & g).sum(0), (p & ~g).sum(0), (~p & g).sum(0))
    tail = (1 - confidence) / 2
    return [[float(np.quantile(draws[:, c], tail)), float(np.quantile(draws[:, c], 1 - tail))] for c in range(gold.shape[1])]


# what this section writes in the accuracy probe's place (merged by Probe.catalogue)
catalogue = Catalogue(
    {"micro_f1": "multi-label: F1 over every (example, label) decision pooled (bootstrap interval)",
     "macro_f1": "multi-label: mean of the per-label F1 over every label of the model",
     "weighted_f1": "multi-label: per-label F1 weighted by gold support",
     "subset_accuracy": "multi-label: exact match, the share of examples whose predicted label set equals the gold one",
     "hamming_loss": "multi-label: share of (example, label) decisions that are wrong",
     "f1_*": "multi-label: F1 of one label",
     "precision_*": "multi-label: precision of one label",
     "recall_*": "multi-label: recall of one label (Wilson interval over its gold examples)",
     "support_*": "multi-label: gold examples carrying one label",
     "roc_auc_*": "multi-label: ROC-AUC of one label's probability (absent when its gold column is constant)",
     "average_precision_*": "multi-label: average precision of one label's probability",
     "label_cardinality_gold": "multi-label: mean number of gold labels per example",
     "label_cardinality_predicted": "multi-label: mean number of predicted labels per example"},
    {"micro_f1": True, "macro_f1": True, "weighted_f1": True, "subset_accuracy": True, "hamming_loss": False,
     "f1_*": True, "precision_*": True, "recall_*": True, "support_*": None, "roc_auc_*": True,
     "average_precision_*": True, "label_cardinality_*": None},
    (RECALL_BOUND,), ("micro_f1", "macro_f1", "subset_accuracy", "recall_*"), absent=("accuracy", "accuracy_*"))
