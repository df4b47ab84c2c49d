"""Multi-label metrics on 0/1 indicator arrays ``[N, C]``, as scikit-learn defines them.

One per-label count primitive (true positives, false positives, false negatives) serves micro, macro
and weighted F1; 0/0 counts as 0, as scikit-learn's ``zero_division`` default does, and macro averages
over every label of the model (not only those present). ROC-AUC is the Mann-Whitney rank statistic with
ties averaged; average precision is the step-wise sum over distinct scores. Both are None for a label
whose gold column is constant (undefined, where scikit-learn warns).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bertprobe.progress import progress
from bertprobe.tasks.scores import f1_from_counts


def _ratio(num: np.ndarray | float, den: np.ndarray | float) -> Any:
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def label_counts(pred: np.ndarray, gold: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per label: true positives, false positives, false negatives."""
    pred, gold = pred.astype(bool), gold.astype(bool)
    return (pred & gold).sum(0), (pred & ~gold).sum(0), (~pred & gold).sum(0)


def f1_scores(pred: np.ndarray, gold: np.ndarray) -> dict[str, Any]:
    """Per-label precision, recall, F1 and support, the micro, macro and weighted F1, and ``absent``: the labels
    (column indices) that neither the gold nor the predictions hold, whose per-label scores are 0/0."""
    tp, fp, fn = label_counts(pred, gold)
    precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    f1 = f1_from_counts(tp, fp, fn)
    support = tp + fn
    micro = float(f1_from_counts(tp.sum(), fp.sum(), fn.sum()))
    weighted = float((f1 * support).sum() / support.sum()) if support.sum() else 0.0
    absent = [int(c) for c in np.flatnonzero((support == 0) & (tp + fp == 0))]
    return {"precision": precision, "recall": recall, "f1": f1, "support": support,
            "micro_f1": micro, "macro_f1": float(f1.mean()) if len(f1) else 0.0, "weighted_f1": weighted,
            "absent": absent}


def subset_accuracy(pred: np.ndarray, gold: np.ndarray) -> float:
    """Exact match: the share of examples whose predicted label set equals the gold one."""
    return float((pred == gold).all(axis=1).mean()) if len(gold) else 0.0


def hamming_loss(pred: np.ndarray, gold: np.ndarray) -> float:
    """The share of (example, label) decisions that are wrong."""
    return float((pred != gold).mean()) if gold.size else 0.0


def average_ranks(scores: np.ndarray) -> np.ndarray:
    """1-based ranks, ties given their average rank."""
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores), dtype=float)
    sorted_scores = scores[order]
    start = 0
    while start < len(scores):
        end = start
        while end + 1 < len(scores) and sorted_scores[end + 1] == sorted_scores[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def roc_auc(scores: np.ndarray, gold: np.ndarray) -> float | None:
    """Area under the ROC curve of one label (None when gold is all 0 or all 1)."""
    positives = gold.astype(bool)
    n_pos, n_neg = int(positives.sum()), int((~positives).sum())
    if not n_pos or not n_neg:
        return None
    ranks = average_ranks(scores.astype(float))
    return float((ranks[positives].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def average_precision(scores: np.ndarray, gold: np.ndarray) -> float | None:
    """Sum over distinct score thresholds of (recall step) x precision (None when no gold positive)."""
    positives = gold.astype(bool)
    total = int(positives.sum())
    if not total:
        return None
    order = np.argsort(-scores.astype(float), kind="mergesort")
    s, g = scores[order], positives[order]
    last = np.r_[np.nonzero(np.diff(s))[0], len(s) - 1]  # the last index of each run of equal scores
    tp = np.cumsum(g)[last]
    precision, recall = tp / (last + 1), tp / total
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def label_set_metrics(probs: np.ndarray, pred: np.ndarray, gold: np.ndarray) -> dict[str, Any]:
    """Every headline and per-label metric of a multi-label audit, from the same arrays."""
    scores = f1_scores(pred, gold)
    scores["subset_accuracy"] = subset_accuracy(pred, gold)
    scores["hamming_loss"] = hamming_loss(pred, gold)
    scores["roc_auc"] = [roc_auc(probs[:, c], gold[:, c]) for c in range(gold.shape[1])]
    scores["average_precision"] = [average_precision(probs[:, c], gold[:, c]) for c in range(gold.shape[1])]
    return scores


HEADLINE = ("micro_f1", "macro_f1", "weighted_f1", "subset_accuracy", "hamming_loss")


def headline(pred: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """The headline metrics alone (what a bootstrap resamples)."""
    scores = f1_scores(pred, gold)
    return {"micro_f1": scores["micro_f1"], "macro_f1": scores["macro_f1"], "weighted_f1": scores["weighted_f1"],
            "subset_accuracy": subset_accuracy(pred, gold), "hamming_loss": hamming_loss(pred, gold)}


def bootstrap_headline(pred: np.ndarray, gold: np.ndarray, resamples: int, confidence: float,
                       seed: int) -> dict[str, tuple[float, float]]:
    """Percentile intervals of the headline metrics over examples resampled with replacement."""
    if not resamples or len(gold) < 2:
        return {}
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {k: [] for k in HEADLINE}
    for _ in progress(range(resamples), desc="bootstrap"):
        idx = rng.integers(0, len(gold), size=len(gold))
        for k, v in headline(pred[idx], gold[idx]).items():
            draws[k].append(v)
    tail = (1 - confidence) / 2
    return {k: (float(np.quantile(v, tail)), float(np.quantile(v, 1 - tail))) for k, v in draws.items()}
