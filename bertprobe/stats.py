"""Small statistics helpers shared by probes."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from statistics import NormalDist

import numpy as np


def cluster_members(groups: Sequence[Hashable]) -> list[np.ndarray]:
    """The indices of each cluster's units (the units sharing a key of ``groups``, one key per unit), clusters
    in the order they first appear."""
    members: dict[Hashable, list[int]] = {}
    for i, key in enumerate(groups):
        members.setdefault(key, []).append(i)
    return [np.asarray(m, dtype=np.intp) for m in members.values()]


def clustered(groups: Sequence[Hashable] | None) -> bool:
    """Whether two units of ``groups`` share a cluster (else a cluster bootstrap is the i.i.d. one)."""
    return groups is not None and len(set(groups)) < len(groups)


def resample_indices(rng: np.random.Generator, n: int, members: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """The unit indices of one bootstrap resample: ``n`` units drawn with replacement or, with ``members`` (a
    cluster bootstrap: ``cluster_members``), as many clusters as there are, drawn with replacement, each bringing
    all its units. With one unit per cluster in unit order it draws what the i.i.d. bootstrap draws."""
    if members is None:
        return rng.integers(0, n, size=n)
    picked = rng.integers(0, len(members), size=len(members))
    return np.concatenate([members[k] for k in picked]) if len(members) else np.zeros(0, dtype=np.intp)


def bootstrap_ci(
    values: Sequence[float] | np.ndarray, resamples: int = 1000, confidence: float = 0.95, seed: int = 0,
    groups: Sequence[Hashable] | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean of ``values``.

    ``groups`` (one key per value) makes it a cluster bootstrap: whole clusters are resampled with replacement,
    as many as there are, and a resample's mean is that of every value its clusters bring (Davison & Hinkley
    1997, section 3.8: resample the top stage of hierarchical data; Field & Welsh 2007). Values that share a
    cluster and its outcome (the questions of one SQuAD paragraph) are no independent evidence, and the i.i.d.
    interval over them is too narrow. Where no two values share a key, the draws are the i.i.d. bootstrap's.
    """
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0 or resamples <= 0:
        return (float("nan"), float("nan"))
    means = bootstrap_means(data, resamples, np.random.default_rng(seed), groups)
    alpha = (1 - confidence) / 2
    return (float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha)))


def bootstrap_means(data: np.ndarray, resamples: int, rng: np.random.Generator,
                    groups: Sequence[Hashable] | None = None) -> np.ndarray:
    """The means of ``resamples`` bootstrap resamples of ``data``: values drawn with replacement, or with
    ``groups`` whole clusters (as many as there are), each resample's mean that of every value its clusters bring."""
    if groups is None:
        return data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    if len(groups) != data.size:
        raise ValueError(f"groups: {len(groups)} keys for {data.size} values")
    members = cluster_members(groups)
    sums = np.asarray([data[m].sum() for m in members])
    sizes = np.asarray([len(m) for m in members], dtype=np.float64)
    idx = rng.integers(0, len(members), size=(resamples, len(members)))
    return sums[idx].sum(axis=1) / sizes[idx].sum(axis=1)


SMALL_SAMPLE = 30  # below this many independent units a graded mean's interval is Wilson's, never a bootstrap's

# How ``mean_interval`` draws an interval (``interval_method``): the branch it takes, for a metric's description.
WILSON = "wilson"  # Wilson's over the values (binary values, none sharing a cluster; or graded ones, too few units)
CLUSTERED_WILSON = "clustered_wilson"  # binary values in clusters: Wilson's on the Korn-Graubard effective size
WILSON_CLUSTERS = "wilson_clusters"  # graded values, too few clusters: Wilson's with one trial per cluster
BOOTSTRAP = "bootstrap"  # graded values: the percentile bootstrap over the values
CLUSTER_BOOTSTRAP = "cluster_bootstrap"  # graded values in clusters: the percentile bootstrap over clusters


def is_binary(values: Sequence[float]) -> bool:
    """Whether every value is 0 or 1 (a share's hits), so that its interval is a proportion's."""
    return all(v == 0 or v == 1 for v in values)


def interval_method(values: Sequence[float], resamples: int, groups: Sequence[Hashable] | None = None) -> str:
    """The branch ``mean_interval`` takes for these values (one of ``WILSON``, ``CLUSTERED_WILSON``,
    ``WILSON_CLUSTERS``, ``BOOTSTRAP``, ``CLUSTER_BOOTSTRAP``), so a description names what was computed."""
    many = clustered(groups)
    if is_binary(values):
        return CLUSTERED_WILSON if many else WILSON
    units = len(set(groups)) if many else len(values)  # type: ignore[arg-type]
    if units >= SMALL_SAMPLE and resamples > 0 and not _flat(values, groups if many else None):
        return CLUSTER_BOOTSTRAP if many else BOOTSTRAP
    return WILSON_CLUSTERS if many else WILSON


def _flat(values: Sequence[float], groups: Sequence[Hashable] | None) -> bool:
    """Whether every bootstrap resample has the same mean (every unit's, or with ``groups`` every cluster's, mean
    alike), so the percentile interval collapses to a point."""
    data = np.asarray(values, dtype=np.float64)
    means = data if groups is None else np.asarray([data[m].mean() for m in cluster_members(groups)])
    return bool(means.size == 0 or np.ptp(means) <= 1e-12 * max(1.0, float(np.abs(means).max())))


def mean_interval(values: Sequence[float], resamples: int, confidence: float = 0.95, seed: int = 0,
                  groups: Sequence[Hashable] | None = None) -> tuple[float, float]:
    """The interval of the mean of ``values`` in [0, 1] (a share, an F1), as ``interval_method`` names it.

    Binary values (a share, an exact match) take Wilson's interval over the values, or where two share a cluster
    of ``groups``, Wilson's on the Korn-Graubard effective sample size (``clustered_wilson``): a percentile
    bootstrap of a rare or near-certain share is degenerate (1 hit in 60 gave [0, 0.048]). Graded values take the
    percentile bootstrap (by cluster with ``groups``) from ``SMALL_SAMPLE`` independent units up, where the units
    are the clusters, else the values; below, and wherever the bootstrap would collapse to a point, the Wilson
    interval with one trial per unit and the mean as its rate (the values lie in [0, 1], so their variance is at
    most mean x (1 - mean), the binomial's). On a handful of units a bootstrap is too narrow and not monotone
    (three answers F1 0.1, 0.2, 0 gave [0, 0.20] where three wrong ones gave Wilson's [0, 0.56]); Wilson's widens
    as the units get fewer and rises with the mean. NaN bounds without values."""
    n = len(values)
    if n == 0:
        return (float("nan"), float("nan"))
    method = interval_method(values, resamples, groups)
    if method in (WILSON, CLUSTERED_WILSON) and is_binary(values):
        return clustered_wilson(values, groups, confidence)
    if method in (BOOTSTRAP, CLUSTER_BOOTSTRAP):
        return bootstrap_ci(values, resamples, confidence, seed, groups if method == CLUSTER_BOOTSTRAP else None)
    units = len(set(groups)) if method == WILSON_CLUSTERS else n  # type: ignore[arg-type]
    return wilson_interval(float(sum(values)) / n * units, units, confidence)  # type: ignore[arg-type]


def clustered_wilson(values: Sequence[float], groups: Sequence[Hashable] | None,
                     confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's interval of a proportion of clustered 0/1 ``values`` (one key of ``groups`` per value) on its
    effective sample size (Korn & Graubard 1998, "Confidence intervals for proportions with small expected number
    of positive counts estimated from survey data", Survey Methodology 24: 193; the modified Wilson limits of SAS
    PROC SURVEYFREQ, R survey's ``svyciprop(method="wilson")``).

    With p = sum y / n over the G clusters (cluster g: y_g hits of m_g values), the ratio estimator's
    with-replacement variance between clusters is v = G / (G - 1) * sum_g (y_g - p m_g)^2 / n^2; the design
    effect is v over the simple random sample's p (1 - p) / (n - 1), the effective size n / deff, times
    (t_{n-1} / t_{G-1})^2 for the G - 1 degrees of freedom, truncated at n (so never narrower than Wilson's over
    the n values; deff 1 where v = 0 or p is 0 or 1, the factor kept, so no jump between 0 hits and 1).
    Wilson's interval at rate p on that many trials is continuous in the data, needs no bootstrap, and with one
    value per cluster (deff 1, G = n) is exactly Wilson's over the values. One cluster: one trial. NaN bounds
    without values."""
    n = len(values)
    if groups is not None and len(groups) != n:
        raise ValueError(f"clustered_wilson: {n} values but {len(groups)} cluster keys")
    hits = float(sum(values))
    if hits != hits:  # NaN
        raise ValueError("clustered_wilson: a value is NaN; a share's values are 0 or 1")
    if n == 0 or not clustered(groups):
        return wilson_interval(round(hits), n, confidence)
    members = cluster_members(groups)  # type: ignore[arg-type]
    g = len(members)
    p = hits / n
    if g < 2:
        return wilson_interval(p, 1, confidence)  # type: ignore[arg-type]
    data = np.asarray(values, dtype=np.float64)
    residuals = np.asarray([data[m].sum() - p * len(m) for m in members])
    variance = g / (g - 1) * float((residuals * residuals).sum()) / (n * n)
    # deff 1 where the between-cluster variance is 0 (p 0 or 1, or every cluster at p): the degrees-of-freedom
    # factor still applies, so 0 hits in 2 contexts is about as wide as 1 hit there, not Wilson's over n
    deff = variance / (p * (1 - p) / (n - 1)) if 0.0 < p < 1.0 and variance > 0.0 else 1.0
    level = 1 - (1 - confidence) / 2
    size = min(float(n), n / deff * (student_t_quantile(level, n - 1) / student_t_quantile(level, g - 1)) ** 2)
    return wilson_interval(p * size, size, confidence)  # type: ignore[arg-type]


def student_t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile (0.5 < q < 1) of Student's t with ``df`` degrees of freedom: the t where the two-sided
    ``student_t_p`` is 2 (1 - q), by bisection (to 1e-12)."""
    target = 2 * (1 - q)
    low, high = 0.0, 1.0
    while student_t_p(high, df) > target:
        low, high = high, 2 * high
    for _ in range(200):
        mid = (low + high) / 2
        if student_t_p(mid, df) > target:
            low = mid
        else:
            high = mid
        if high - low < 1e-12:
            break
    return (low + high) / 2


def gini(values: Sequence[float] | np.ndarray) -> float:
    """Gini coefficient of non-negative values: 0 when equal, near 1 when one value holds everything."""
    data = np.sort(np.abs(np.asarray(values, dtype=np.float64)).ravel())
    if data.size == 0 or data.sum() == 0:
        return 0.0
    n = data.size
    ranks = np.arange(1, n + 1)
    return float((2 * (ranks * data).sum()) / (n * data.sum()) - (n + 1) / n)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts of a paired 2x2 table.

    ``b``: pairs right under A and wrong under B; ``c``: wrong under A and right under B. Under the
    null each discordant pair falls either way with probability 1/2, so the p-value is twice the
    smaller binomial tail of Bin(b + c, 1/2), capped at 1 (1.0 when there are no discordant pairs).
    """
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2 * binomial_cdf(min(b, c), n, 0.5))


def clustered_mcnemar(better_a: Sequence[int], better_b: Sequence[int]) -> float:
    """Two-sided p of McNemar's test for matched pairs that come in clusters (Durkalski, Palesch, Lipsitz & Rust
    2003, Stat Med 22: 2417): per cluster k the discordant counts b_k (right under A only) and c_k (under B
    only); X^2 = (sum (b_k - c_k))^2 / sum (b_k - c_k)^2, chi-square with 1 df under no difference. With one pair
    per cluster it is McNemar's asymptotic statistic (b - c)^2 / (b + c). 1.0 without a discordant pair."""
    d = np.asarray(better_a, dtype=np.float64) - np.asarray(better_b, dtype=np.float64)
    denominator = float((d * d).sum())
    if denominator == 0.0:
        return 1.0
    return float(math.erfc(math.sqrt(float(d.sum()) ** 2 / denominator / 2)))


def student_t_p(t: float, df: float) -> float:
    """Two-sided p of Student's t statistic ``t`` with ``df`` degrees of freedom: P(|T| >= |t|) =
    I_{df / (df + t^2)}(df / 2, 1 / 2), the regularized incomplete beta function (Abramowitz & Stegun 26.7.1)."""
    if df <= 0 or math.isnan(t):
        return 1.0
    return min(1.0, incomplete_beta(df / 2, 0.5, df / (df + t * t)))


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction (Abramowitz & Stegun
    26.5.8) evaluated with the modified Lentz method, on the side of ``x`` where it converges fast."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def _beta_fraction(a: float, b: float, x: float, steps: int = 500, tiny: float = 1e-300) -> float:
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, steps + 1):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), exact: with ``p = a / b`` (every float is such a ratio), the terms
    ``C(n, i) a^i (b - a)^(n - i)`` are integers, each the last times ``(n - i) a / ((i + 1)(b - a))`` (an exact
    division), summed and divided by ``b^n`` once, so no term overflows or underflows at any ``n``."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    a, b = float(p).as_integer_ratio()
    if a == b:  # p = 1: every trial succeeds, so fewer than n successes never happen
        return 0.0
    term, total = (b - a) ** n, 0
    for i in range(k + 1):
        total += term
        term = term * (n - i) * a // ((i + 1) * (b - a))
    return total / b**n


def paired_bootstrap_diff(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, resamples: int = 1000,
    confidence: float = 0.95, seed: int = 0, groups: Sequence[Hashable] | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap CI of mean(b) - mean(a) over paired examples (resampled together; by cluster with
    ``groups``, as ``bootstrap_ci``)."""
    diff = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    return bootstrap_ci(diff, resamples, confidence, seed, groups)


def paired_bootstrap_statistic(
    statistic: Callable[[np.ndarray], Sequence[float]], n: int, resamples: int = 1000, confidence: float = 0.95,
    seed: int = 0, groups: Sequence[Hashable] | None = None,
) -> list[tuple[float, float]]:
    """Percentile bootstrap CIs of each value of ``statistic(indices)``, with ``n`` units resampled together: a
    paired bootstrap when the statistic compares two measurements of the same units (a held-out NLL and ECE before
    and after temperature scaling, where the ECE is no mean of per-unit values); with ``groups``, by cluster
    (``resample_indices``). NaN bounds without units."""
    if n <= 0 or resamples <= 0:
        size = len(statistic(np.arange(n)))
        return [(float("nan"), float("nan"))] * size
    rng = np.random.default_rng(seed)
    members = cluster_members(groups) if groups is not None else None
    draws = np.asarray([statistic(resample_indices(rng, n, members)) for _ in range(resamples)], dtype=np.float64)
    alpha = (1 - confidence) / 2
    return [(float(np.quantile(col, alpha)), float(np.quantile(col, 1 - alpha))) for col in draws.T]


def cluster_gap(
    values: Sequence[float] | np.ndarray, inside: np.ndarray, groups: Sequence[Hashable], resamples: int = 1000,
    confidence: float = 0.95, seed: int = 0,
) -> tuple[tuple[float, float], float]:
    """The gap mean(outside) - mean(inside) of a subset of clustered units, its percentile interval and a
    two-sided p (a z test with the bootstrap's standard error), from one cluster bootstrap of the whole data:
    clusters drawn with replacement, each bringing its units on both sides. A cluster may hold units inside and
    outside (a paragraph with a "why" question and a "when" one): the two means are then correlated, which the
    joint resample keeps and a test of two independent samples would not. The statistic is referred to
    Student's t with G - 1 degrees of freedom, G the clusters on the side that has fewer (Cameron & Miller 2015,
    section VI: with few clusters a normal reference over-rejects): a slice from one context is never judged
    (p 1.0). NaN interval and p 1.0 when a resample leaves a side empty too often to judge (fewer than half the
    draws)."""
    data = np.asarray(values, dtype=np.float64)
    mask = np.asarray(inside, dtype=bool)
    members = cluster_members(groups)
    sums = np.asarray([[data[m][mask[m]].sum(), data[m][~mask[m]].sum()] for m in members])
    counts = np.asarray([[mask[m].sum(), (~mask[m]).sum()] for m in members], dtype=np.float64)
    gap = float(data[~mask].mean() - data[mask].mean()) if mask.any() and (~mask).any() else float("nan")
    if resamples <= 0 or not members or math.isnan(gap):
        return (float("nan"), float("nan")), 1.0
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(members), size=(resamples, len(members)))
    s, c = sums[idx].sum(axis=1), counts[idx].sum(axis=1)
    ok = (c > 0).all(axis=1)
    if ok.sum() < resamples / 2:
        return (float("nan"), float("nan")), 1.0
    draws = s[ok, 1] / c[ok, 1] - s[ok, 0] / c[ok, 0]
    alpha = (1 - confidence) / 2
    interval = (float(np.quantile(draws, alpha)), float(np.quantile(draws, 1 - alpha)))
    df = int(min((counts[:, 0] > 0).sum(), (counts[:, 1] > 0).sum())) - 1
    se = float(draws.std(ddof=1))
    if df < 1:
        return interval, 1.0
    if se == 0.0:
        return interval, 1.0 if abs(gap) < 1e-15 else 0.0
    return interval, student_t_p(gap / se, df)


def unpaired_bootstrap_diff(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, resamples: int = 1000,
    confidence: float = 0.95, seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap CI of mean(b) - mean(a) for two independent samples (each resampled on its own:
    ``a`` first, then ``b``, from one generator)."""
    left, right = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if left.size == 0 or right.size == 0 or resamples <= 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means_a = left[rng.integers(0, left.size, size=(resamples, left.size))].mean(axis=1)
    means_b = right[rng.integers(0, right.size, size=(resamples, right.size))].mean(axis=1)
    alpha = (1 - confidence) / 2
    diff = means_b - means_a
    return (float(np.quantile(diff, alpha)), float(np.quantile(diff, 1 - alpha)))


def paired_bootstrap_p(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, resamples: int = 2000, seed: int = 0,
    groups: Sequence[Hashable] | None = None,
) -> float:
    """Two-sided p-value of ``mean(b) - mean(a) == 0`` over paired examples, from the bootstrap's standard
    error of the mean difference (a Wald test; resampling pairs keeps their correlation; by cluster with
    ``groups``, as ``bootstrap_ci``). A continuous p, so it survives a Holm correction where a percentile count
    would bottom out at 1/resamples. 1.0 when every difference is zero."""
    diff = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    if diff.size == 0:
        return 1.0
    mean = float(diff.mean())
    means = bootstrap_means(diff, resamples, np.random.default_rng(seed), groups)
    se = float(means.std(ddof=1)) if resamples > 1 else 0.0
    if se <= 0.0:
        return 1.0 if abs(mean) < 1e-15 else 0.0
    return float(min(1.0, 2 * (1 - NormalDist().cdf(abs(mean) / se))))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1), in the input's order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``successes / n`` (never [1, 1] or [0, 0] for small n).

    ``(nan, nan)`` for ``n == 0``. The normal quantile is computed from ``confidence`` (1.96 for 95%).
    """
    if n <= 0:
        return (float("nan"), float("nan"))
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return (lo, hi)
