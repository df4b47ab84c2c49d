"""Small statistics helpers shared by probes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def bootstrap_ci(
    values: Sequence[float] | np.ndarray, resamples: int = 1000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean of ``values``."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0 or resamples <= 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, data.size, size=(resamples, data.size))
    means = data[idx].mean(axis=1)
    alpha = (1 - confidence) / 2
    return (float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha)))


def gini(values: Sequence[float] | np.ndarray) -> float:
    """Gini coefficient of non-negative values: 0 when equal, near 1 when one value holds everything."""
    data = np.sort(np.abs(np.asarray(values, dtype=np.float64)).ravel())
    if data.size == 0 or data.sum() == 0:
        return 0.0
    n = data.size
    ranks = np.arange(1, n + 1)
    return float((2 * (ranks * data).sum()) / (n * data.sum()) - (n + 1) / n)
