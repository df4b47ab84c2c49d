"""Sequential head sweeps: units stopped once their interval is decided, ambiguous ones run to the end, and
every unit classified as the exact sweep classifies it."""

from __future__ import annotations

import numpy as np
import pytest

from bertprobe.data import Dataset, Example
from bertprobe.model import ModelSpec, load_target
from bertprobe.params import parse_params
from bertprobe.probe import ProbeContext
from bertprobe.probes.head_pruning.params import HeadParams
from bertprobe.probes.head_pruning.probe import HeadPruningProbe
from bertprobe.probes.head_pruning.sweep import HeadSweep, why_exact
from bertprobe.probes.head_pruning.betting import BettingSequence, delta_grid
from bertprobe.probes.head_pruning.sequential import census_first, classify, looks, run_sequential
from bertprobe.stats import bootstrap_ci
from bertprobe.testing import sentiment_examples


def test_looks_grow_from_the_first_block_and_end_at_all_examples():
    assert looks(3000, first=256, growth=2) == [256, 512, 1024, 2048, 3000]
    assert looks(3000) == [256, 384, 576, 864, 1280, 1920, 2880, 3000]
    assert looks(1000, first=128, growth=1.25) == [128, 160, 192, 256, 320, 384, 480, 608, 768, 960, 1000]
    assert looks(100) == [100] and looks(512, first=256, growth=2) == [256, 512]


def test_the_betting_sequence_waits_for_a_zero_count_to_mean_something_and_covers_the_difference():
    """No changes on the first 300 examples: a change of 1% is not yet ruled out (0.99^300 = 0.05 is no
    evidence at 1%); on 800 it is. A 4% flip rate's difference (-0.02) lies inside the sequence at every look in most runs."""
    grid = delta_grid(0.01)
    quiet = BettingSequence(0.01, grid)
    quiet.update(np.zeros(300))
    low, high = quiet.interval()
    assert low < -0.01 and high > 0.01
    quiet.update(np.zeros(500))
    low, high = quiet.interval()
    assert -0.01 <= low < 0 < high <= 0.01
    missed = 0
    for seed in range(30):
        rng = np.random.default_rng(seed)
        x = np.where(rng.random(1500) < 0.04, np.where(rng.random(1500) < 0.75, -1.0, 1.0), 0.0)  # mean -0.02
        bet = BettingSequence(0.05, grid)
        out = False
        for a in range(0, 1500, 300):
            bet.update(x[a:a + 300])
            low, high = bet.interval()
            out |= not low <= -0.02 <= high
        missed += out
    assert missed <= 5  # time-uniform at 5% per side: out at any of the five looks in at most 10% of runs


def test_prunable_fraction_from_the_steps_intervals_reads_as_the_joint_bootstrap():
    """At full data the steps' own intervals (paired bootstrap at 1 - 2 alpha, the curve's seed) give exactly
    prunable_fraction_interval's value and interval, so a sequential curve whose steps all ran to the end
    reads as the exact one."""
    from bertprobe.probes.head_pruning.curve import prunable_fraction_interval, prunable_from_intervals

    n = 600
    base = np.random.default_rng(99).random(n) < 0.9
    steps = [planted(n, rate, 0.0, seed) for seed, rate in enumerate([0.0, 0.01, 0.03, 0.05, 0.3])]
    fractions = [0.2, 0.4, 0.6, 0.8, 1.0]
    for tolerance in (0.02, 0.04, 0.06):
        joint = prunable_fraction_interval(base, steps, fractions, tolerance, 0.95, 400, 3)
        points = [{"fraction": f, "ci": bootstrap_ci(c.astype(float) - base.astype(float), 400, 0.9, 3)}
                  for f, c in zip(fractions, steps)]
        assert prunable_from_intervals(points, tolerance) == joint
        assert joint[1] < joint[2] or tolerance != 0.04  # one tolerance where the interval has width


def planted(n: int, rate_down: float, rate_up: float, seed: int) -> np.ndarray:
    """Outcomes of a unit that turns right answers wrong at ``rate_down`` and wrong ones right at ``rate_up``."""
    rng = np.random.default_rng(seed)
    base = np.random.default_rng(99).random(n) < 0.9
    out = base.copy()
    u = rng.random(n)
    out[base & (u < rate_down)] = False
    out[~base & (u < rate_up)] = True
    return out


def test_clear_units_stop_early_the_ambiguous_one_runs_to_the_end_and_all_classify_as_exact():
    n = 4000
    base = np.random.default_rng(99).random(n) < 0.9
    units = {"quiet": planted(n, 0.001, 0.002, 1), "harmful": planted(n, 0.12, 0.0, 2),
             "helpful": planted(n, 0.0, 0.6, 3), "edge": planted(n, 0.011, 0.0, 4)}
    order = np.random.default_rng(5).permutation(n)
    calls: list[tuple[str, int, int]] = []

    def evaluate(open_units, a, b):
        calls.extend((key, a, b) for key, _ in open_units)
        return [units[key][order[a:b]] for key, _ in open_units]

    done = run_sequential([(k, k) for k in units], base, order, evaluate, tolerance=0.01, resamples=2000, seed=0,
                          seeds={"edge": 7})
    by = {s.key: s for s in done.units}
    assert by["harmful"].settled == "drop" and by["harmful"].seen <= 256  # decided within the first looks
    assert by["helpful"].settled == "gain" and by["helpful"].seen <= 256
    assert by["quiet"].settled == "within" and by["quiet"].seen < n
    assert by["edge"].seen == n  # ambiguous: its interval straddles -0.01 until the end ...
    # ... where it reads exactly as in the exact mode (the same paired bootstrap, seed and examples)
    assert by["edge"].ci == bootstrap_ci(units["edge"].astype(float) - base.astype(float), 2000, 0.95, 7)
    assert done.passes == pytest.approx(sum(s.seen for s in done.units) / n)
    assert done.passes < 0.5 * len(units)
    for key, outcome in units.items():  # the exact sweep's classification (95% paired bootstrap on all examples)
        exact = classify(bootstrap_ci(outcome.astype(float) - base.astype(float), 2000, 0.95, 0), 0.01)
        if exact != "straddles":
            assert by[key].settled == exact, key
    # every unit was evaluated on consecutive blocks of the seeded order, once each
    for key in units:
        spans = [(a, b) for k, a, b in calls if k == key]
        assert spans[0][0] == 0 and all(p[1] == q[0] for p, q in zip(spans, spans[1:]))


def test_the_census_takes_the_smallest_margins_first_and_keeps_the_seeded_order_of_the_rest():
    order = np.array([4, 0, 3, 1, 2, 5])
    margins = np.array([0.5, 0.1, 0.9, 0.1, 2.0, 0.05])
    new, k = census_first(order, margins, 0.5)
    assert k == 3 and new.tolist() == [5, 1, 3, 4, 0, 2]  # ties by index; then the rest in order's order
    new, k = census_first(order, margins, 0.2)  # ceil(1.2) = 2
    assert k == 2 and new.tolist() == [5, 1, 4, 0, 3, 2]
    for margins_, share in ((None, 0.5), (margins, 0.0)):
        same, k = census_first(order, margins_, share)
        assert k == 0 and same is order


def concentrated(n: int, seed: int, near: tuple[int, int], far: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """Plain correctness (0.9) and margins of ``n`` examples, and a unit's outcomes: among the 5% of smallest margins
    ``near`` = (right answers turned wrong, wrong turned right); elsewhere at the rates ``far``."""
    rng = np.random.default_rng(seed)
    base = rng.random(n) < 0.9
    margins = rng.exponential(1.0, n)
    close = np.argsort(margins)[: n // 20]
    out = base.copy()
    down = [i for i in close if base[i]][: near[0]]
    up = [i for i in close if not base[i]][: near[1]]
    out[down], out[up] = False, True
    elsewhere = np.ones(n, dtype=bool)
    elsewhere[close] = False
    u = rng.random(n)
    out[elsewhere & base & (u < far[0])] = False
    out[elsewhere & ~base & (u < far[1])] = True
    return base, margins, out


def test_a_census_of_the_closest_decisions_settles_a_unit_sooner_with_the_same_class_and_an_unbiased_estimate():
    """Flips concentrated where the plain model's margin is small (as on SST-2): evaluated in full first, they are
    known exactly, and the rarely changing rest decides the unit sooner. The estimate weights the census and the
    sampled rest by their sizes, so it is not pulled towards the census's flips."""
    n = 4000
    base, margins, out = concentrated(n, 0, near=(30, 15), far=(0.002, 0.004))
    diff = out.astype(float) - base.astype(float)
    order = np.random.default_rng(5).permutation(n)
    exact = classify(bootstrap_ci(diff, 2000, 0.95, 0), 0.01)
    assert exact == "within"

    def sweep(order_, census):
        return run_sequential([("u", "u")], base, order_, lambda units, a, b: [out[order_[a:b]]], tolerance=0.01,
                              resamples=2000, census=census).units[0]

    plain = sweep(order, 0)
    ordered, k = census_first(order, margins, 0.05)
    counted = sweep(ordered, k)
    assert k == 200 and plain.settled == counted.settled == "within"
    assert counted.seen < plain.seen
    assert counted.census_sum == diff[ordered[:k]].sum() == -15
    seen_rest = ordered[k:counted.seen]
    assert counted.estimate == pytest.approx((-15 + (n - k) * diff[seen_rest].mean()) / n)
    assert abs(counted.estimate - diff.mean()) < abs(diff[ordered[:counted.seen]].mean() - diff.mean())
    low, high = counted.ci
    assert low <= diff.mean() <= high and -0.01 <= low and high <= 0.01


def test_with_a_census_the_interval_covers_the_change_where_the_unit_stops_in_most_orders():
    """The census is summed exactly and the confidence sequence bounds the rest's mean: over 40 seeded orders the
    interval at the look where the unit stops (a stopping time, where a confidence sequence is valid) holds the
    true change, -0.021 (most of it in the census), in at least 90% of them."""
    n = 3000
    base, margins, out = concentrated(n, 1, near=(60, 0), far=(0.002, 0.01))
    truth = float(out.mean() - base.mean())
    assert truth == pytest.approx(-0.021, abs=0.002)
    missed, early = 0, 0
    for seed in range(40):
        ordered, k = census_first(np.random.default_rng(seed).permutation(n), margins, 0.05)
        unit = run_sequential([("u", "u")], base, ordered, lambda units, a, b, o=ordered: [out[o[a:b]]],
                              tolerance=0.01, resamples=500, census=k).units[0]
        early += unit.seen < n and unit.settled == "drop"
        missed += not unit.ci[0] <= truth <= unit.ci[1]
    assert early >= 20 and missed <= 4


@pytest.fixture(scope="module")
def trained(trained_model):
    return load_target(ModelSpec(path=str(trained_model("m", steps=30)), device="cpu", batch_size=64))


def test_the_probe_sweeps_sequentially_and_agrees_with_the_exact_mode(trained):
    """On 1,100 sentences (looks at 128, 160, 192 ... 960, 1,100) with a 5-point tolerance: the sequential sweep
    classifies every head and layer as the exact one (except where the exact interval straddles), uses fewer
    passes, and each unit's row says how many examples it used."""
    data = Dataset([Example(t, label=y) for t, y in sentiment_examples(1100, 3)], name="s")
    common = {"bootstrap": 500, "tolerance": 0.05, "step": 0.25, "sequential_min": 1000, "sequential_block": 128,
              "sequential_growth": 1.25}
    exact = HeadPruningProbe().run(trained, data, parse_params(HeadParams, {**common, "sequential": False}, "p"),
                                   ProbeContext(seed=0))
    seq = HeadPruningProbe().run(trained, data, parse_params(HeadParams, common, "p"), ProbeContext(seed=0))
    for table in ("ablation", "layer_ablation"):
        for e, s in zip(exact.details[table], seq.details[table]):
            assert e["examples"] == 1100 and 128 <= s["examples"] <= 1100
            if e["settled"] != "straddles":
                assert s["settled"] == e["settled"], (table, e, s)
    units = len(exact.details["ablation"]) + len(exact.details["layer_ablation"]) + len(exact.details["pruning_curve"]) - 1
    assert seq.value("ablation_passes") < exact.value("ablation_passes") == units
    assert exact.value("ablation_passes_saved") == 0 and seq.value("ablation_passes_saved") > 0
    assert seq.value("baseline") == exact.value("baseline")
    # the pruning curve's steps are sequential units too: each says what it used; prunable_fraction agrees
    steps = seq.details["pruning_curve"][1:]
    assert all(128 <= p["examples"] <= 1100 and p["settled"] in ("within", "drop", "straddles") for p in steps)
    assert any(p["examples"] < 1100 for p in steps)  # pruning every head is decided at once
    assert seq.value("prunable_fraction") == exact.value("prunable_fraction")
    # the report says which mode ran and why, not an exact run's "0% saved"
    assert exact.details["summary"]["ablation passes"] == f"{units:.1f} full-pass equivalents for {units} units (exact: sequential: false)"
    assert seq.details["summary"]["ablation passes"].endswith(
        f"({seq.value('ablation_passes_saved'):.0%} saved; a census of the 55 closest decisions first)")  # 5% of 1,100
    assert why_exact_for(trained, data, {**common, "sequential_min": 2000}) == "exact: 1,100 examples, below sequential_min 2,000"


def test_the_plain_pass_records_each_examples_top_two_logit_gap(trained):
    """The census's margin on a single-label model: the top logit minus the runner-up, from the plain pass."""
    import torch

    data = Dataset([Example(t, label=y) for t, y in sentiment_examples(40, 4)], name="s")
    ev = HeadSweep().evaluator(trained, data)
    ev.correct()
    enc = trained.tokenizer([ex.text for ex in data.examples], padding=True, return_tensors="pt")
    with torch.no_grad():
        top = trained.model(**enc).logits.float().sort(dim=-1, descending=True).values
    assert ev.margins == pytest.approx((top[:, 0] - top[:, 1]).numpy(), abs=1e-5)
    assert (ev.margins >= 0).all() and ev.margins.std() > 0


def why_exact_for(target, data, params: dict) -> str:
    probe_params = parse_params(HeadParams, params, "p")
    ev = HeadSweep(metric=probe_params.metric).evaluator(target, data)
    return why_exact(ev, probe_params, ev.correct())


def test_a_stopped_sequential_sweep_keeps_its_settled_blocks_and_resumes_to_the_same_result(trained):
    """Each block of open units is a work unit of its own (``unit@a:b``): a run stopped part-way keeps every finished
    block (the harness stores them as ``unit_result`` events), and the resumed run, replaying the same rule on
    them, only evaluates what was not finished and reaches the same tables."""
    data = Dataset([Example(t, label=y) for t, y in sentiment_examples(1100, 3)], name="s")
    params = parse_params(HeadParams, {"bootstrap": 200, "tolerance": 0.05, "pruning": False, "sequential_min": 1000,
                                       "sequential_block": 128, "sequential_growth": 1.25}, "p")
    store: dict[str, object] = {}
    computed: list[str] = []

    def storing_map(limit: int | None):
        def map_(fn, units, desc="", group=0):
            out = []
            for key, unit in units:
                if key not in store:
                    if limit is not None and len(computed) >= limit:
                        raise KeyboardInterrupt
                    store[key] = fn([unit])[0] if group else fn(unit)
                    computed.append(key)
                out.append(store[key])
            return out
        return map_

    whole = HeadPruningProbe().run(trained, data, params, ProbeContext(seed=0, map=storing_map(None)))
    total, half = len(computed), len(computed) // 2
    assert total > len(whole.details["ablation"]) + len(whole.details["layer_ablation"])  # several looks
    store.clear()
    computed.clear()
    with pytest.raises(KeyboardInterrupt):
        HeadPruningProbe().run(trained, data, params, ProbeContext(seed=0, map=storing_map(half)))
    first = len(computed)
    # the finished blocks are kept; the first holds the census (5% of 1,100: 55) and the rest's first 128
    assert first == half and any("@0:183" in key for key in store)
    resumed = HeadPruningProbe().run(trained, data, params, ProbeContext(seed=0, map=storing_map(None)))
    assert len(computed) == total  # the resumed run evaluated only the other half
    assert not set(computed[first:]) & set(computed[:first])  # nothing finished is evaluated again
    for table in ("ablation", "layer_ablation"):
        assert [(r["examples"], r["settled"], r["ci"]) for r in resumed.details[table]] == \
            [(r["examples"], r["settled"], r["ci"]) for r in whole.details[table]]


@pytest.mark.sweeps
def test_on_thousands_of_sst2_sentences_sequential_and_exact_head_tables_agree():
    """The SST-2 fixture on dev plus sentences sampled from train (3,000 in all): every head and layer the exact
    sweep finds within, below or above the 1-point tolerance reads the same sequentially, with at most a third of
    the exact sweep's passes (0.307 measured with the 5% census; 0.439 without it; ``benchmarks/heads_sequential.py``
    prints the same at other sizes)."""
    import sys
    from pathlib import Path

    from conftest import SHARED

    if not (SHARED / "models" / "minilm-l6-sst2").is_dir():
        pytest.skip("../shared SST-2 fixture not present")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from common import sst2_target
    from heads_sequential import data_of

    target = sst2_target()
    data = data_of(3000, target)
    runs = [HeadPruningProbe().run(target, data, parse_params(HeadParams, {"sequential": mode, "pruning": False}, "p"),
                                   ProbeContext(seed=13)) for mode in (False, True)]
    exact, seq = runs
    for table in ("ablation", "layer_ablation"):
        for e, s in zip(exact.details[table], seq.details[table]):
            if e["settled"] != "straddles":
                assert s["settled"] == e["settled"], (table, e, s)
    assert seq.value("ablation_passes") <= exact.value("ablation_passes") / 3
