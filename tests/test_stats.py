"""The shared statistics (bertprobe.stats) that probes and gates draw their intervals and p-values from."""

from __future__ import annotations

import numpy as np
import pytest

from bertprobe.stats import bootstrap_ci, holm, unpaired_bootstrap_diff


def test_unpaired_bootstrap_resamples_each_side_on_its_own():
    rng = np.random.default_rng(0)
    a, b = rng.normal(0.0, 1.0, 400), rng.normal(0.5, 1.0, 30)
    low, high = unpaired_bootstrap_diff(a, b, 2000, 0.95, seed=3)
    assert low < b.mean() - a.mean() < high
    # the interval's width is the small side's: about 2 * 1.96 * sd / sqrt(30), not a paired one
    assert high - low == pytest.approx(2 * 1.96 * np.sqrt(1 / 30 + 1 / 400), rel=0.2)
    assert unpaired_bootstrap_diff(a, b, 2000, 0.95, seed=3) == (low, high)  # seeded
    assert np.isnan(unpaired_bootstrap_diff([], b)[0])


def test_bootstrap_interval_of_a_mean_and_holm_against_hand_values():
    values = np.r_[np.zeros(50), np.ones(50)]
    low, high = bootstrap_ci(values, 4000, 0.95, seed=1)
    assert low == pytest.approx(0.5 - 1.96 * 0.05, abs=0.02) and high == pytest.approx(0.5 + 1.96 * 0.05, abs=0.02)
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_binomial_cdf_is_exact_against_scipy_at_any_size():
    from scipy.stats import binom

    from bertprobe.stats import binomial_cdf, mcnemar_exact

    for n, p in ((10, 0.5), (32, 0.9), (100, 0.03), (2048, 0.9), (5000, 0.5)):
        for k in (-1, 0, n // 3, int(n * p) - 1, n - 1, n):
            assert binomial_cdf(k, n, p) == pytest.approx(binom.cdf(k, n, p), rel=1e-9, abs=1e-300), (k, n, p)
    assert binomial_cdf(3, 10, 0.0) == 1.0 and binomial_cdf(9, 10, 1.0) == 0.0
    # McNemar's tail is the same sum at p = 1/2: twice the smaller tail of Bin(b + c, 1/2)
    assert mcnemar_exact(2, 8) == 2 * binomial_cdf(2, 10, 0.5) == 2 * 56 / 1024
