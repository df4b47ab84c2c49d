"""The shared statistics (bertprobe.stats) that probes and gates draw their intervals and p-values from."""

from __future__ import annotations

import math

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


# ---- the cluster bootstrap -------------------------------------------------------------------------------------


def test_a_cluster_bootstrap_resamples_whole_clusters_as_one_written_out_does():
    """Clusters of unequal size, each with its own mean: the interval is the percentile interval of resampled
    clusters' pooled means, drawn here with the same generator; singleton clusters are the i.i.d. bootstrap."""
    from bertprobe.stats import bootstrap_ci, cluster_members, paired_bootstrap_statistic, resample_indices

    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 8, size=40)
    groups = [f"c{k}" for k, n in enumerate(sizes) for _ in range(n)]
    values = np.array([float(rng.random() < 0.3 + 0.4 * (k % 2)) for k, n in enumerate(sizes) for _ in range(n)])
    order = rng.permutation(len(values))  # clusters need not be contiguous
    values, groups = values[order], [groups[i] for i in order]
    keys = list(dict.fromkeys(groups))  # clusters in order of first appearance
    sums = np.array([values[[g == k for g in groups]].sum() for k in keys])
    counts = np.array([sum(g == k for g in groups) for k in keys], dtype=float)
    draws = np.random.default_rng(11).integers(0, len(keys), size=(500, len(keys)))
    pooled = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)
    expected = (np.quantile(pooled, 0.05), np.quantile(pooled, 0.95))
    assert bootstrap_ci(values, 500, 0.9, 11, groups) == pytest.approx(expected, abs=1e-12)
    # the generic resampler agrees (a statistic that is no mean goes through it: calibration's ECE)
    members = cluster_members(groups)
    assert [list(m) for m in members] == [[i for i, g in enumerate(groups) if g == k] for k in keys]
    got = paired_bootstrap_statistic(lambda idx: [values[idx].mean()], len(values), 500, 0.9, 11, groups)
    assert got[0] == pytest.approx(expected, abs=1e-12)
    # one unit per cluster: the i.i.d. bootstrap, draw for draw
    alone = [f"u{i}" for i in range(len(values))]
    assert bootstrap_ci(values, 500, 0.9, 11, alone) == bootstrap_ci(values, 500, 0.9, 11)
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    assert resample_indices(a, len(values), cluster_members(alone)).tolist() == resample_indices(b, len(values)).tolist()
    with pytest.raises(ValueError, match="groups: 3 keys for"):
        bootstrap_ci(values, 10, 0.9, 0, ["a", "b", "c"])


def test_questions_sharing_their_contexts_outcome_get_the_contexts_width_not_the_questions():
    """200 contexts of 5 questions, each context's questions all right or all wrong: the i.i.d. interval is as
    narrow as 1,000 independent questions', the cluster interval as wide as 200 contexts' (the known standard
    error sqrt(p (1 - p) / 200)), about sqrt(5) times wider."""
    from statistics import NormalDist

    from bertprobe.stats import bootstrap_ci

    rng = np.random.default_rng(2)
    outcome = (rng.random(200) < 0.6).astype(float)
    values = np.repeat(outcome, 5)
    groups = np.repeat(np.arange(200), 5).tolist()
    low, high = bootstrap_ci(values, 4000, 0.95, 3, groups)
    iid_low, iid_high = bootstrap_ci(values, 4000, 0.95, 3)
    p, z = outcome.mean(), NormalDist().inv_cdf(0.975)
    assert high - low == pytest.approx(2 * z * np.sqrt(p * (1 - p) / 200), rel=0.08)
    assert iid_high - iid_low == pytest.approx(2 * z * np.sqrt(p * (1 - p) / 1000), rel=0.08)
    assert (high - low) / (iid_high - iid_low) == pytest.approx(np.sqrt(5), rel=0.1)


def test_clustered_mcnemar_is_durkalskis_statistic_and_mcnemars_with_one_pair_a_cluster() -> None:
    """Durkalski et al. (2003): X^2 = (sum_k (b_k - c_k))^2 / sum_k (b_k - c_k)^2, chi-square with 1 df."""
    import math

    from scipy.stats import chi2

    from bertprobe.stats import clustered_mcnemar

    b, c = [3, 0, 2, 1, 0], [0, 1, 0, 0, 1]
    d = np.array(b) - np.array(c)
    assert clustered_mcnemar(b, c) == pytest.approx(chi2.sf(d.sum() ** 2 / (d ** 2).sum(), 1))
    ones_b, ones_c = [1] * 7 + [0] * 2, [0] * 7 + [1] * 2  # one discordant pair per cluster: McNemar's (b-c)^2/(b+c)
    assert clustered_mcnemar(ones_b, ones_c) == pytest.approx(chi2.sf((7 - 2) ** 2 / 9, 1))
    assert clustered_mcnemar([0, 0], [0, 0]) == 1.0 and not math.isnan(clustered_mcnemar([2], [2]))


def test_a_gate_counts_clustered_discordant_pairs_by_cluster_and_keeps_the_exact_test_otherwise() -> None:
    """Ten questions a reader lost all in two paragraphs are two pieces of evidence, not ten: the exact McNemar
    test calls it p = 0.002, the clustered one much weaker; where each paragraph holds one discordant pair the
    exact test stands."""
    from bertprobe.results import ProbeResult
    from bertprobe.results.gates import compare_metric
    from bertprobe.results.outcomes import Outcomes
    from bertprobe.stats import clustered_mcnemar, mcnemar_exact

    ids = [f"q{i}" for i in range(40)]
    a = [1.0] * 40
    b = [0.0] * 5 + [1.0] * 5 + [0.0] * 5 + [1.0] * 25  # lost in paragraphs 0 and 2 (5 questions each)
    groups = [f"p{i // 5}" for i in range(40)]
    base, cand = ProbeResult(probe="accuracy", model="base"), ProbeResult(probe="accuracy", model="cand")
    base.add_metric("exact_match", 1.0, True, outcome="em")
    cand.add_metric("exact_match", 0.75, True, outcome="em")

    def gate(keys):
        return compare_metric("exact_match", base, cand, {"em": Outcomes.from_values("em", ids, a, groups=keys)},
                              {"em": Outcomes.from_values("em", ids, b, groups=keys)}, 0.01)

    flat, grouped = gate(None), gate(groups)
    assert flat.p_value == pytest.approx(mcnemar_exact(10, 0)) and flat.test.startswith("McNemar exact")
    assert grouped.p_value == pytest.approx(clustered_mcnemar([5, 0, 5, 0, 0, 0, 0, 0], [0] * 8))
    assert grouped.p_value > 20 * flat.p_value
    assert grouped.test == "McNemar for clustered pairs (Durkalski 2003), 10 vs 0 discordant of 40 paired in 8 clusters"
    spread = [f"p{i}" if i < 10 else f"p{i // 5}" for i in range(40)]  # one lost question per cluster
    b2 = [0.0] * 10 + [1.0] * 30
    alone = compare_metric("exact_match", base, cand, {"em": Outcomes.from_values("em", ids, a, groups=spread)},
                           {"em": Outcomes.from_values("em", ids, b2, groups=spread)}, 0.01)
    assert alone.p_value == pytest.approx(mcnemar_exact(10, 0)) and alone.test.startswith("McNemar exact")
    back = Outcomes.from_dict(Outcomes.from_values("em", ids, a, groups=groups).to_dict())
    assert back.groups == groups and Outcomes.from_dict({"name": "em", "ids": ids, "values": a}).groups is None


def test_student_t_p_equals_scipys_two_sided_p() -> None:
    from scipy.stats import t as student_t

    from bertprobe.stats import incomplete_beta, student_t_p

    for t in (0.0, 0.3, 1.0, 2.2, 4.0, 12.0, -2.5):
        for df in (1, 2, 3.5, 5, 29, 300):
            assert student_t_p(t, df) == pytest.approx(2 * student_t.sf(abs(t), df), rel=1e-9, abs=1e-15)
    assert student_t_p(3.0, 0) == 1.0 and incomplete_beta(2, 3, 0.0) == 0.0 and incomplete_beta(2, 3, 1.0) == 1.0


def test_a_means_interval_counts_clusters_at_every_size_so_more_questions_never_narrow_it_by_fiat() -> None:
    """F1 0.3 on every question of 3 contexts: 29 questions and 30 get the same interval, Wilson's with 3 trials
    (29 questions used to get Wilson's with 29 trials, narrower than 30's)."""
    from bertprobe.stats import mean_interval, wilson_interval

    for n in (29, 30, 60):
        groups = [f"c{i % 3}" for i in range(n)]
        assert mean_interval([0.3] * n, 1000, 0.95, 0, groups) == pytest.approx(wilson_interval(0.9, 3))
    plain = mean_interval([0.3] * 29, 1000, 0.95, 0)  # independent questions: Wilson's with 29 trials
    assert plain == pytest.approx(wilson_interval(0.3 * 29, 29))


def _korn_graubard(values: list[float], groups: list[str], confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's interval on the Korn-Graubard effective sample size, written out from the formulas (scipy's t and
    normal quantiles; Wilson's score interval solved as the roots of its quadratic)."""
    from scipy.stats import norm
    from scipy.stats import t as student_t

    y, n = np.asarray(values, dtype=float), len(values)
    keys = sorted(set(groups))
    sums = np.array([sum(v for v, g in zip(values, groups) if g == k) for k in keys])
    sizes = np.array([sum(1 for g in groups if g == k) for k in keys], dtype=float)
    G, p = len(keys), y.mean()
    variance = G / (G - 1) * ((sums - p * sizes) ** 2).sum() / n**2  # the ratio estimator's, with replacement
    # against a simple random sample's variance estimate; 1 where there is no variance to compare
    deff = variance / (p * (1 - p) / (n - 1)) if variance > 0 and 0 < p < 1 else 1.0
    ratio = student_t.ppf(1 - (1 - confidence) / 2, n - 1) / student_t.ppf(1 - (1 - confidence) / 2, G - 1)
    size = min(float(n), n / deff * ratio**2)
    z = norm.ppf(1 - (1 - confidence) / 2)
    # Wilson's bounds: the roots q of (p - q)^2 = z^2 q (1 - q) / size
    a, b, c = 1 + z * z / size, -(2 * p + z * z / size), p * p
    root = math.sqrt(b * b - 4 * a * c)
    return (max(0.0, (-b - root) / (2 * a)), min(1.0, (-b + root) / (2 * a)))


def test_student_t_quantile_inverts_student_t_p_as_scipy_does() -> None:
    from scipy.stats import t as student_t

    from bertprobe.stats import student_t_quantile

    for df in (1, 2, 3, 7, 30, 119, 2776):
        for q in (0.9, 0.975, 0.995):
            assert student_t_quantile(q, df) == pytest.approx(student_t.ppf(q, df), rel=1e-9)


def test_a_clustered_share_is_wilsons_on_the_korn_graubard_effective_sample_size() -> None:
    """stats.clustered_wilson against the formulas written out here, on random clustered shares of every size."""
    from bertprobe.stats import clustered_wilson

    rng = np.random.default_rng(8)
    for _ in range(40):
        contexts = int(rng.integers(2, 60))
        sizes = rng.integers(1, 6, size=contexts)
        rate = rng.beta(0.5, 0.5, size=contexts)  # contexts that differ: their questions agree more than chance
        values = [float(rng.random() < r) for r, m in zip(rate, sizes) for _ in range(m)]
        groups = [f"c{k}" for k, m in enumerate(sizes) for _ in range(m)]
        assert clustered_wilson(values, groups) == pytest.approx(_korn_graubard(values, groups), abs=1e-9)


def test_one_question_per_context_gives_wilsons_over_questions_exactly() -> None:
    from bertprobe.stats import clustered_wilson, mean_interval, wilson_interval

    rng = np.random.default_rng(4)
    for n in (1, 2, 7, 29, 30, 40, 500):
        hits = list((rng.random(n) < 0.4).astype(float))
        exact = wilson_interval(round(sum(hits)), n)
        alone = [f"c{i}" for i in range(n)]
        assert clustered_wilson(hits, alone) == exact and clustered_wilson(hits, None) == exact
        assert clustered_wilson(hits, alone) == exact and clustered_wilson(hits, None) == exact
        assert mean_interval(hits, 1000, 0.95, 0, alone) == exact and mean_interval(hits, 1000, 0.95, 0) == exact


@pytest.mark.parametrize("hits,n,pair", [(1, 60, (0, 1)), (1, 60, (1, 2)), (2, 100, (0, 1)), (2, 100, (1, 2)),
                                         (2, 100, (2, 3)), (95, 100, (0, 1)), (95, 100, (94, 95)), (95, 100, (98, 99))])
def test_the_reviewers_rare_and_near_certain_shares_are_never_narrower_than_wilsons_over_questions(hits, n, pair):
    """1 hit in 60, 2 in 100 and 95 in 100 with one pair of questions sharing a context (hits first): the cluster
    bootstrap gave [0, 0.048], [0, 0.049] and [0.91, 0.99]; the interval now holds Wilson's over the questions."""
    from bertprobe.stats import clustered_wilson, wilson_interval

    values = [1.0] * hits + [0.0] * (n - hits)
    groups = [f"c{i}" for i in range(n)]
    groups[pair[1]] = groups[pair[0]]
    low, high = clustered_wilson(values, groups)
    plain = wilson_interval(hits, n)
    assert low <= plain[0] + 1e-15 and high >= plain[1] - 1e-15
    assert (low, high) == pytest.approx(_korn_graubard(values, groups), abs=1e-12)


def test_a_perfectly_correlated_clustered_share_is_about_wilsons_over_contexts() -> None:
    """A context's 3 questions all right or all wrong: the interval is about Wilson's over the 40 contexts (a bit
    wider for the 39 degrees of freedom), much wider than Wilson's over the 120 questions; no jump at 30 contexts."""
    from bertprobe.stats import clustered_wilson, wilson_interval

    rng = np.random.default_rng(4)
    per_context = (rng.random(40) < 0.4).astype(float)
    hits = list(np.repeat(per_context, 3))
    groups = [f"c{i // 3}" for i in range(120)]
    got = clustered_wilson(hits, groups)
    contexts = wilson_interval(per_context.sum(), 40)
    flat = wilson_interval(sum(hits), 120)
    assert got[0] <= contexts[0] and got[1] >= contexts[1]
    assert got[1] - got[0] == pytest.approx(contexts[1] - contexts[0], rel=0.05)
    assert got[1] - got[0] > 1.5 * (flat[1] - flat[0])
    for k in (29, 30, 31):  # no switch of method at 30 contexts: about Wilson's over contexts on either side
        low, high = clustered_wilson(hits[: 3 * k], groups[: 3 * k])
        few = wilson_interval(per_context[:k].sum(), k)
        assert low <= few[0] and high >= few[1] and high - low == pytest.approx(few[1] - few[0], rel=0.06)


def test_one_context_is_one_trial() -> None:
    from bertprobe.stats import clustered_wilson, wilson_interval

    assert clustered_wilson([1.0, 1.0, 0.0], ["a"] * 3) == pytest.approx(wilson_interval(2 / 3, 1))  # type: ignore[arg-type]


def test_mean_interval_names_the_branch_it_takes() -> None:
    """Binary values: Wilson's (on the effective size where clustered) at every size; graded ones: the bootstrap
    from 30 units up, Wilson's below or where it would collapse; qa_clusters.interval_over says each in words."""
    from bertprobe import stats
    from bertprobe.tasks.qa_clusters import interval_over

    pairs = [f"c{i // 2}" for i in range(80)]
    binary = [float(i % 3 == 0) for i in range(80)]
    graded = [(i % 7) / 7 for i in range(80)]
    cases = [(binary, None, stats.WILSON), (binary, pairs, stats.CLUSTERED_WILSON),
             (graded, None, stats.BOOTSTRAP), (graded, pairs, stats.CLUSTER_BOOTSTRAP),
             (graded[:40], pairs[:40], stats.WILSON_CLUSTERS), (graded[:20], None, stats.WILSON),
             ([0.5] * 80, None, stats.WILSON)]
    for values, groups, method in cases:
        assert stats.interval_method(values, 1000, groups) == method
    assert stats.mean_interval(binary, 1000, 0.95, 0, pairs) == stats.clustered_wilson(binary, pairs)
    assert stats.mean_interval(graded, 300, 0.95, 3, pairs) == stats.bootstrap_ci(graded, 300, 0.95, 3, pairs)
    assert stats.mean_interval(graded[:40], 300, 0.95, 3, pairs[:40]) == pytest.approx(
        stats.wilson_interval(np.mean(graded[:40]) * 20, 20))
    assert interval_over(binary, None) == "Wilson interval over questions"
    assert interval_over(binary, pairs).startswith("Wilson interval over contexts: on the effective number")
    assert interval_over(graded, pairs, 1000, short=True) == "cluster bootstrap interval over contexts"
    assert interval_over(graded[:40], pairs[:40], 1000, short=True) == "Wilson interval over contexts (one trial each)"
    assert interval_over(graded, None, 1000, unit="cases") == "bootstrap interval over cases"


def test_a_slices_gap_from_few_contexts_keeps_its_size_under_the_null() -> None:
    """No slice effect, contexts differing a lot (their questions share it): a slice of k whole contexts is
    flagged at alpha 0.05 about 5% of the time or less (a normal reference called a one-context slice weak 91% of
    the time, as it ignored how few contexts there are)."""
    from bertprobe.stats import cluster_gap

    rng = np.random.default_rng(0)
    contexts, per = 60, 5
    groups = [f"c{i // per}" for i in range(contexts * per)]
    for k in (1, 2, 4, 8):
        rejected = 0
        for _ in range(100):
            f1 = np.repeat(rng.uniform(0, 1, contexts), per) + rng.normal(0, 0.02, contexts * per)
            inside = np.zeros(contexts * per, dtype=bool)
            inside[rng.choice(contexts, k, replace=False)[:, None] * per + np.arange(per)] = True
            rejected += cluster_gap(f1, inside, groups, 300, 0.95, 1)[1] < 0.05
        assert rejected <= 12, (k, rejected)


@pytest.mark.parametrize("contexts", [2, 3])
def test_no_hits_in_few_contexts_is_about_as_wide_as_one_hit(contexts: int) -> None:
    """All 0 (or all 1) in a few contexts keeps the few contexts' degrees of freedom: no jump to Wilson's over the
    n questions between 0 hits and 1."""
    from bertprobe.stats import clustered_wilson, wilson_interval

    n = 72
    groups = [f"c{i % contexts}" for i in range(n)]
    none = clustered_wilson([0.0] * n, groups)
    one = clustered_wilson([1.0] + [0.0] * (n - 1), groups)
    assert none[0] == 0.0 and none[1] > wilson_interval(0, n)[1] * 3  # far wider than over 72 questions
    assert none[1] >= 0.6 * one[1]
    every = clustered_wilson([1.0] * n, groups)
    assert every == pytest.approx((1 - none[1], 1.0))
    assert none == pytest.approx(_korn_graubard([0.0] * n, groups))


def test_clustered_wilson_refuses_nan_and_mismatched_keys() -> None:
    from bertprobe.stats import clustered_wilson

    with pytest.raises(ValueError, match="3 cluster keys"):
        clustered_wilson([1, 0, 1, 0, 1, 1], ["a", "a", "b"])
    with pytest.raises(ValueError, match="NaN"):
        clustered_wilson([1.0, float("nan")], ["a", "b"])
