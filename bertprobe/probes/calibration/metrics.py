"""Calibration measures shared by the calibration probe's classes audit and its sections (label sets, entities,
answers): equal-width and equal-mass binning, ECE and MCE with their per-bin table, and the risk-coverage curve
of selective prediction. See ``bertprobe.probes.calibration.probe`` for the papers.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def bin_index(confidence: np.ndarray, bins: int) -> np.ndarray:
    """Equal-width bin of each confidence: bin k holds (k/B, (k+1)/B] (a confidence of 0 goes to bin 0)."""
    return np.clip(np.ceil(confidence * bins).astype(int) - 1, 0, bins - 1)


def ece_parts(confidence: np.ndarray, correct: np.ndarray, bins: int, equal_mass: bool = False) -> dict[str, Any]:
    """ECE, MCE and the per-bin table; ``contribution`` is each example's bin gap (its mean is the ECE)."""
    n = len(confidence)
    if equal_mass:
        order = np.argsort(confidence, kind="stable")
        index = np.empty(n, dtype=int)
        for k, part in enumerate(np.array_split(order, bins)):
            index[part] = k
    else:
        index = bin_index(confidence, bins)
    rows, contribution, ece, mce = [], np.zeros(n), 0.0, 0.0
    for k in range(bins):
        sel = index == k
        count = int(sel.sum())
        if not count:
            continue
        accuracy, mean_conf = float(correct[sel].mean()), float(confidence[sel].mean())
        gap = abs(accuracy - mean_conf)
        contribution[sel] = gap
        ece += count / n * gap
        mce = max(mce, gap)
        rows.append({"bin": k, "count": count, "accuracy": accuracy, "confidence": mean_conf, "gap": gap})
    return {"ece": ece, "mce": mce, "bins": rows, "contribution": contribution}


def ece_value(confidence: np.ndarray, correct: np.ndarray, bins: int) -> float:
    """The equal-width ECE alone (``ece_parts``' value without its tables): fast enough to bootstrap."""
    if not len(confidence):
        return 0.0
    index = bin_index(confidence, bins)
    gaps = np.abs(np.bincount(index, correct, bins) - np.bincount(index, confidence, bins))
    return float(gaps.sum() / len(confidence))


def risk_coverage(confidence: np.ndarray, correct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Coverage k/N and the error rate of the k most confident predictions, for k = 1..N (ties kept in order).
    ``correct`` may be a score in [0, 1] (a QA answer's F1): the risk is then 1 - its mean over the k."""
    order = np.argsort(-confidence, kind="stable")
    errors = np.cumsum(1 - correct[order])
    k = np.arange(1, len(order) + 1)
    return k / len(order), errors / k
