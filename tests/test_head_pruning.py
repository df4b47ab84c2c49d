"""head-pruning: importance against a hand computation, ablations, curve, physical pruning."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bertprobe.data import Dataset, Example
from bertprobe.model import ModelSpec, load_target
from bertprobe.model.interventions import head_intervention
from bertprobe.model.pruning import prune_heads
from bertprobe.params import parse_params
from bertprobe.probe import ProbeContext
from bertprobe.model.pruning import normalize_by_layer
from bertprobe.probes.head_pruning.curve import prunable_fraction
from bertprobe.probes.head_pruning.evaluator import Evaluator
from bertprobe.probes.head_pruning.params import HeadParams
from bertprobe.probes.head_pruning.probe import HeadPruningProbe
from bertprobe.testing import sentiment_examples, tiny_target


@pytest.fixture(scope="module", params=["bert", "distilbert"])
def trained(request, trained_model):
    path = trained_model(request.param, arch=request.param, layers=2, heads=4)
    return load_target(ModelSpec(path=str(path), device="cpu", batch_size=16))


def data(n: int = 60) -> Dataset:
    return Dataset([Example(t, label=y) for t, y in sentiment_examples(n, 7)], name="synthetic")


def test_importance_is_mean_absolute_per_example_gradient(trained):
    ev = Evaluator(trained, data(12), batch_size=5)
    fast = ev.importance()
    manual = torch.zeros(2, 4)
    for ex in data(12).examples:
        xi = torch.ones(2, 4, requires_grad=True)
        batch = trained.collate(trained.encode([ex]).rows)
        with head_intervention(trained.model, trained.attention_sites(), mask=xi):
            loss = F.cross_entropy(trained.forward(batch).logits, torch.tensor([ex.label]))
        loss.backward()
        manual += xi.grad.abs()
    torch.testing.assert_close(fast, manual / 12, atol=1e-6, rtol=1e-4)
    assert all(p.requires_grad for p in trained.model.parameters())  # restored after the pass


def test_normalize_by_layer_gives_unit_rows():
    scores = torch.tensor([[3.0, 4.0], [1.0, 0.0]])
    torch.testing.assert_close(normalize_by_layer(scores), torch.tensor([[0.6, 0.8], [1.0, 0.0]]))


def test_prunable_fraction_stops_at_first_violation():
    curve = [{"fraction": f, "metric": m} for f, m in [(0, 0.9), (0.1, 0.9), (0.2, 0.885), (0.3, 0.85), (0.4, 0.9)]]
    assert prunable_fraction(curve, 0.9, 0.02) == 0.2
    assert prunable_fraction(curve, 0.9, 0.0) == 0.1


def test_probe_end_to_end(trained):
    params = parse_params(HeadParams, {"bootstrap": 50, "physical": True}, "p")
    result = HeadPruningProbe().run(trained, data(), params, ProbeContext(seed=0))
    base = result.value("baseline")
    table = result.details["ablation"]
    assert len(table) == 8 and {(r["layer"], r["head"]) for r in table} == {(l, h) for l in range(2) for h in range(4)}
    worst = min(r["delta"] for r in table)
    assert result.value("max_single_head_drop") == pytest.approx(-worst)
    assert result.value("heads_improving_when_removed") == sum(r["delta"] > 0 for r in table)
    for row in table:
        lo, hi = row["ci"]
        assert lo <= row["delta"] + 1e-9 and row["delta"] <= hi + 1e-9
    layer_rows = result.details["layer_ablation"]
    worst_layer = max(layer_rows, key=lambda r: r["drop"])
    assert result.value("layer_max_drop") == pytest.approx(worst_layer["drop"])
    assert result.metrics["layer_max_drop"].ci == tuple(worst_layer["ci"])
    for row in layer_rows:  # each layer's drop inside its own paired-bootstrap interval
        assert row["ci"][0] - 1e-9 <= row["drop"] <= row["ci"][1] + 1e-9
    assert result.details["physical"]["seconds"] > 0  # the speed measurement's own cost is reported
    curve = result.details["pruning_curve"]
    assert curve[0] == {"fraction": 0.0, "heads_pruned": 0, "metric": base}
    assert curve[-1]["heads_pruned"] == 8
    assert [p["heads_pruned"] for p in curve] == sorted({p["heads_pruned"] for p in curve})
    assert 0 <= result.value("prunable_fraction") <= 1
    phys = result.details["physical"]
    assert phys["parameters_after"] < phys["parameters_before"]
    assert phys["accuracy_pruned"] == phys["accuracy_masked"]
    assert "speedup" in result.metrics
    raw_map = next(f["data"] for f in result.details["figures"] if f["title"] == "head importance (raw)")
    assert raw_map == {"matrix": result.details["importance"], "rows": ["L0", "L1"], "cols": ["H0", "H1", "H2", "H3"]}
    # the summary's one line names the most harmful head and layer and the prunable share, as measured
    harmful = min(table, key=lambda r: r["delta"])
    finding = result.details["key_finding"]
    assert finding.startswith(f"removing L{harmful['layer']}H{harmful['head']} costs {-100 * harmful['delta']:.1f} "
                              "points of accuracy (the most of 8 heads)")
    assert f"removing all of L{worst_layer['layer']} {100 * worst_layer['drop']:.1f}" in finding
    assert f"{result.value('prunable_fraction'):.0%} [" in finding and finding.endswith("within 1 point")


def test_ablating_a_dead_head_changes_nothing_and_layer_ablation_matches_masks(tmp_path):
    target = tiny_target(tmp_path / "m", layers=2, heads=4, initializer_range=0.5)
    site = target.attention_sites()[0]
    d = site.head_dim
    with torch.no_grad():
        site.out_proj.weight[:, 2 * d : 3 * d] = 0  # head (0, 2) contributes nothing
    ds = Dataset([Example(t, label=y) for t, y in sentiment_examples(40, 1)])
    result = HeadPruningProbe().run(target, ds, HeadParams(bootstrap=20, pruning=False), ProbeContext())
    dead = next(r for r in result.details["ablation"] if (r["layer"], r["head"]) == (0, 2))
    assert dead["delta"] == 0 and dead["ci"] == (0.0, 0.0)
    ev = Evaluator(target, ds, None)
    base = ev.correct().mean()
    mask = torch.ones(2, 4)
    mask[1] = 0
    assert result.details["layer_ablation"][1]["drop"] == pytest.approx(base - ev.correct(mask=mask).mean())


def test_uniform_mode_and_iterative_pruning(trained):
    params = HeadParams(mode="uniform", iterative=True, bootstrap=0, step=0.25)
    probe = HeadPruningProbe()
    result = probe.run(trained, data(), params, ProbeContext())
    assert len(result.details["ablation"]) == 8 and result.details["ablation"][0]["ci"] is None
    # base + 8 ablations + 2 layers + 4 curve points (importance re-computed between them)
    assert result.details["evaluations"] == 1 + 8 + 2 + 4
    odd = probe.run(trained, data(), HeadParams(ablation=False, layers=False, bootstrap=0, step=0.3), ProbeContext())
    assert [p["heads_pruned"] for p in odd.details["pruning_curve"]] == [0, 2, 5, 7, 8]  # 0.3 steps still end at 100%


@pytest.mark.parametrize("arch", ["bert", "distilbert"])
def test_physical_pruning_equals_masking(tmp_path, arch):
    target = tiny_target(tmp_path / arch, arch=arch, layers=2, heads=4, initializer_range=0.5)
    drop = [(0, 1), (0, 3), (1, 0)]
    pruned, notes = prune_heads(target.model, drop)
    mask = torch.ones(2, 4)
    for layer, head in drop:
        mask[layer, head] = 0
    batch = target.collate(target.encode([Example("the movie was good"), Example("bad")]).rows)
    with torch.no_grad():
        with head_intervention(target.model, target.attention_sites(), mask=mask):
            masked = target.forward(batch).logits
        torch.testing.assert_close(pruned(**batch).logits, masked, atol=1e-5, rtol=1e-4)
    assert notes == []
    all_of_layer, notes = prune_heads(target.model, [(0, h) for h in range(4)])
    assert notes and "kept head 0" in notes[0]


def test_physical_pruning_refuses_unsupported_families(tmp_path):
    target = tiny_target(tmp_path / "albert", arch="albert", layers=2, heads=4)
    with pytest.raises(ValueError, match="not albert"):
        prune_heads(target.model, [(0, 0)])


def test_declared_metric_directions_match_what_the_probes_report(trained_model):
    """`bertprobe describe` shows Probe.metric_directions: it must agree with the metrics a run returns."""
    import fnmatch

    from bertprobe.data import Dataset, Example
    from bertprobe.model import ModelSpec, load_target
    from bertprobe.params import parse_params
    from bertprobe.probe import ProbeContext
    from bertprobe.probes.accuracy import AccuracyProbe
    from bertprobe.probes.head_pruning.probe import HeadPruningProbe
    from bertprobe.probes.universal_trigger.probe import UniversalTriggerProbe

    target = load_target(ModelSpec(path=str(trained_model("m", steps=30)), device="cpu"))
    data = Dataset([Example(t, label=y, id=str(i)) for i, (t, y) in enumerate(sentiment_examples(40))])
    runs = [(AccuracyProbe, {"bootstrap": 0}), (HeadPruningProbe, {"bootstrap": 0, "step": 0.5}),
            (UniversalTriggerProbe, {"target_label": "positive", "candidates": 4, "iterations": 1, "batch_size": 8})]
    for cls, raw in runs:
        result = cls().run(target, data, parse_params(cls.Params, raw, "p"), ProbeContext())
        for name, metric in result.metrics.items():
            declared = [v for p, v in cls.metric_directions.items() if fnmatch.fnmatchcase(name, p)]
            assert declared, f"{cls.name}: {name} has no declared direction"
            assert declared[0] == metric.higher_is_better, f"{cls.name}: {name}"


def test_stacked_head_sweep_equals_one_head_per_pass(trained_model):
    from bertprobe.data import Dataset, Example
    from bertprobe.model import ModelSpec, load_target
    from bertprobe.params import parse_params
    from bertprobe.probe import ProbeContext
    from bertprobe.probes.head_pruning.probe import HeadPruningProbe

    target = load_target(ModelSpec(path=str(trained_model("m", steps=30)), device="cpu"))
    data = Dataset([Example(t, label=y, id=str(i)) for i, (t, y) in enumerate(sentiment_examples(40))])
    results = []
    for raw in ({"stack_budget": 0}, {"stack_budget": 1 << 40, "stack": 5}):
        params = parse_params(HeadPruningProbe.Params, {"bootstrap": 0, "physical": False, **raw}, "p")
        results.append(HeadPruningProbe().run(target, data, params, ProbeContext()))
    one, stacked = results
    assert one.details["ablation"] == stacked.details["ablation"]
    assert one.details["layer_ablation"] == stacked.details["layer_ablation"]
    assert one.value("max_single_head_drop") == stacked.value("max_single_head_drop")
    assert one.details["pruning_curve"] == stacked.details["pruning_curve"]
    assert one.value("prunable_fraction") == stacked.value("prunable_fraction")


@pytest.mark.parametrize("budget", [0, 1 << 40])
def test_pruning_curve_as_sweep_units_equals_step_by_step(trained, budget):
    """The curve's steps as work units of the head sweep (stacked when the budget allows) give the same
    points, examples and heads as evaluating one step after another; and they are recorded as units."""
    from bertprobe.probes.head_pruning.curve import pruning_curve
    from bertprobe.probes.head_pruning.sweep import HeadSweep

    examples = data(40)
    params = parse_params(HeadParams, {"step": 0.25, "stack_budget": budget, "stack": 3}, "p")
    ev = Evaluator(trained, examples, params.batch_size)
    ev.budget = budget
    base = float(ev.correct().mean())
    ranking = torch.rand(ev.shape, generator=torch.Generator().manual_seed(3))
    from bertprobe.execution import map_in_process

    seen: list[str] = []

    def recording(fn, units, **kw):
        seen.extend(key for key, _ in units)
        return map_in_process(fn, units, **kw)

    ctx = ProbeContext(map=recording)
    stepwise = pruning_curve(ev, ranking, params, base, ProbeContext())
    sweep = HeadSweep(params.batch_size, budget).bind(trained, examples, state=ev)
    as_units = pruning_curve(ev, ranking, params, base, ctx, sweep)
    assert [p["heads_pruned"] for p in as_units] == [0, 2, 4, 6, 8]
    assert seen == ["curve1", "curve2", "curve3", "curve4"]
    for a, b in zip(stepwise, as_units):
        assert {k: v for k, v in a.items() if k != "correct"} == {k: v for k, v in b.items() if k != "correct"}
        if "correct" in a:
            assert np.array_equal(a["correct"], b["correct"])


def test_prunable_fraction_survives_one_example_changing_at_the_baseline():
    """The case that broke the plain reading: fp16 against fp32 moved one of 872 baseline predictions, the
    curve runs flat within a few tenths of a point of the tolerance, and the plain metric jumped 0.19 -> 0.50."""
    from bertprobe.probes.head_pruning.curve import prunable_fraction_interval

    rng = np.random.default_rng(0)
    n, tol = 872, 0.01
    base = np.zeros(n, dtype=bool)
    base[:778] = True  # 0.8922
    fractions = [0.1 * k for k in range(1, 11)]
    drops_in_examples = [2, 5, 9, 8, 8, 9, 8, 14, 40, 120]  # tolerance is 8.72 examples: flat around it
    steps = []
    for k in drops_in_examples:
        step = base.copy()
        flip = rng.choice(np.arange(700), size=k + 3, replace=False)
        step[flip] = False
        back = rng.choice(np.flatnonzero(~base), size=3, replace=False)  # some pruned steps fix examples too
        step[back] = True
        steps.append(step)
    shifted = base.copy()
    shifted[750] = False  # one prediction changes at the baseline only (0.8922 -> 0.8911), as fp16 did

    def plain(b):
        best = 0.0
        for f, s in zip(fractions, steps):
            if s.mean() < b.mean() - tol - 1e-12:
                break
            best = f
        return best

    assert plain(base) == pytest.approx(0.2) and plain(shifted) == pytest.approx(0.7)  # 5 steps apart
    v1, lo1, hi1 = prunable_fraction_interval(base, steps, fractions, tol, seed=1)
    v2, lo2, hi2 = prunable_fraction_interval(shifted, steps, fractions, tol, seed=1)
    assert lo1 <= v1 <= hi1 and lo2 <= v2 <= hi2
    assert abs(v1 - v2) <= 0.1 + 1e-9 or (lo1 <= v2 <= hi1 and lo2 <= v1 <= hi2)
    assert lo1 <= v2 <= hi1 and lo2 <= v1 <= hi2  # each value inside the other's interval
    # a flat curve well inside the tolerance is prunable all the way; one far outside is not prunable at all
    assert prunable_fraction_interval(base, [base] * 10, fractions, tol)[0] == pytest.approx(1.0)
    worse = base.copy()
    worse[:100] = False
    assert prunable_fraction_interval(base, [worse] * 10, fractions, tol) == (0.0, 0.0, 0.0)


def test_compare_speed_interleaves_repeats_and_stays_within_its_budget():
    import time as _time

    from bertprobe.model.timing import compare_speed

    class Sleeper(torch.nn.Module):
        def __init__(self, seconds: float) -> None:
            super().__init__()
            self.seconds = seconds
            self.calls = 0

        def forward(self, input_ids):
            self.calls += 1
            _time.sleep(self.seconds)
            return input_ids

    slow, fast = Sleeper(0.004), Sleeper(0.001)
    batches = [{"input_ids": torch.zeros(8, 4, dtype=torch.long)} for _ in range(50)]
    out = compare_speed(slow, fast, batches, torch.device("cpu"), budget_s=0.4, repeats=5)
    assert out["speedup"] > 1.0 and out["spread"][0] <= out["speedup"] <= out["spread"][1]
    assert out["batches"] < 50  # cut to fit the budget: 5 repeats x 2 models x batches x 4 ms <= 0.4 s
    assert slow.calls == fast.calls == 1 + 5 * out["batches"]
    assert out["per_s_after"] > out["per_s_before"]
