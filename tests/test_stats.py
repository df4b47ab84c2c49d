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


def test_a_share_of_questions_is_wilsons_over_questions_and_over_contexts_where_they_share_one() -> None:
    """qa_clusters.share_interval: one question per context, Wilson's over the questions (as before); a context's
    3 questions all right or all wrong (perfectly correlated), the cluster bootstrap over the 40 contexts, drawn by
    hand here, which is wider than Wilson's over the 120 questions; below 30 contexts, Wilson's over contexts."""
    from bertprobe.stats import wilson_interval
    from bertprobe.tasks.qa_clusters import share_interval

    rng = np.random.default_rng(4)
    per_context = (rng.random(40) < 0.4).astype(float)
    alone = list(per_context)
    assert share_interval(alone, [f"c{i}" for i in range(40)], 500, 0.95, 2) == wilson_interval(per_context.sum(), 40)
    assert share_interval(alone, None, 500, 0.95, 2) == wilson_interval(per_context.sum(), 40)
    hits = list(np.repeat(per_context, 3))
    groups = [f"c{i // 3}" for i in range(120)]
    draws = np.random.default_rng(2).integers(0, 40, size=(500, 40))
    means = per_context[draws].sum(axis=1) * 3 / (3 * 40)  # each drawn context brings its 3 equal questions
    expected = (float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975)))
    got = share_interval(hits, groups, 500, 0.95, 2)
    assert got == pytest.approx(expected, abs=1e-12)
    flat = wilson_interval(sum(hits), 120)
    assert got[1] - got[0] > 1.3 * (flat[1] - flat[0])
    few = share_interval(hits[:60], groups[:60], 500, 0.95, 2)  # 20 contexts: Wilson's with one trial per context
    assert few == pytest.approx(wilson_interval(np.mean(hits[:60]) * 20, 20))


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
