"""Hand-checked cases for head masking and uniform-attention disabling (hooks, not head_mask)."""

from __future__ import annotations

import pytest
import torch

from bertprobe.data import Example
from bertprobe.model.interventions import head_intervention
from bertprobe.testing import tiny_target

TEXTS = [Example("the movie was good"), Example("bad"), Example("a very boring dull story")]


def _logits(target, **kw):
    enc = target.encode(TEXTS)
    batch = target.collate(enc.rows)
    with torch.no_grad(), head_intervention(target.model, target.attention_sites(), **kw):
        return target.forward(batch).logits


@pytest.fixture(scope="module", params=["bert", "roberta", "distilbert", "albert"])
def target(request, tmp_path_factory):
    return tiny_target(tmp_path_factory.mktemp(request.param), arch=request.param, layers=2, heads=4, initializer_range=0.5)


def test_mask_of_ones_changes_nothing(target):
    plain = _logits(target)
    torch.testing.assert_close(_logits(target, mask=torch.ones(2, 4)), plain)


def test_masking_a_head_whose_output_is_zero_changes_nothing(target):
    site = target.attention_sites()[0]
    d = site.head_dim
    mask = torch.ones(2, 4)
    mask[0, 1] = 0
    with torch.no_grad():
        # Zero the columns of the output projection that read head 1: that head contributes nothing.
        saved = site.out_proj.weight[:, d : 2 * d].clone()
        site.out_proj.weight[:, d : 2 * d] = 0
        try:
            forced = _logits(target)
            torch.testing.assert_close(_logits(target, mask=mask), forced)
        finally:
            site.out_proj.weight[:, d : 2 * d] = saved
    assert not torch.allclose(_logits(target, mask=mask), _logits(target))


def test_masking_every_head_of_a_layer_removes_the_attention_block(target):
    sites = target.attention_sites()
    if target.model.config.model_type == "albert":
        pytest.skip("ALBERT shares one block across layers")
    site = sites[0]
    mask = torch.ones(2, 4)
    mask[0] = 0
    with torch.no_grad():
        saved = site.out_proj.weight.clone()
        site.out_proj.weight.zero_()  # the block then adds only its bias
        try:
            removed = _logits(target)
        finally:
            site.out_proj.weight.copy_(saved)
    torch.testing.assert_close(_logits(target, mask=mask), removed)


def test_per_row_masks_equal_separate_runs(target):
    masks = torch.ones(3, 2, 4)
    masks[0, 0, 0] = 0
    masks[2, 1, 3] = 0
    rowwise = _logits(target, mask=masks)
    for row in range(3):
        torch.testing.assert_close(rowwise[row], _logits(target, mask=masks[row])[row], atol=1e-5, rtol=1e-4)


def test_albert_shared_block_is_masked_per_logical_layer(tmp_path):
    albert = tiny_target(tmp_path / "albert", arch="albert", layers=3, heads=4)
    assert [s.layers for s in albert.attention_sites()] == [[0, 1, 2]]
    only_last = torch.ones(3, 4)
    only_last[2] = 0
    only_first = torch.ones(3, 4)
    only_first[0] = 0
    assert not torch.allclose(_logits(albert, mask=only_last), _logits(albert, mask=only_first))


@pytest.mark.parametrize("arch", ["bert", "distilbert"])
def test_uniform_disabling_equals_constant_attention_scores(tmp_path, arch):
    """Zeroing a head's query weights makes its scores constant, so softmax gives uniform weights over
    the non-padding tokens: exactly what uniform disabling must reproduce (padding included)."""
    target = tiny_target(tmp_path / arch, arch=arch, layers=2, heads=4, initializer_range=0.5)
    site = target.attention_sites()[1]
    names = {"bert": "query", "distilbert": "q_lin"}
    block = dict(target.model.named_modules())[site.name.rsplit(".", 2)[0] + ".self" if arch == "bert" else site.name.rsplit(".", 1)[0]]
    query = getattr(block, names[arch])
    d = site.head_dim
    uniform = torch.zeros(2, 4, dtype=torch.bool)
    uniform[1, 2] = True
    disabled = _logits(target, uniform=uniform)
    with torch.no_grad():
        saved_w, saved_b = query.weight.clone(), query.bias.clone()
        query.weight[2 * d : 3 * d] = 0
        query.bias[2 * d : 3 * d] = 0
        try:
            reference = _logits(target)
        finally:
            query.weight.copy_(saved_w)
            query.bias.copy_(saved_b)
    torch.testing.assert_close(disabled, reference, atol=1e-5, rtol=1e-4)
    assert not torch.allclose(disabled, _logits(target), atol=1e-4)


def test_mask_gradient_is_available_for_importance(tmp_path):
    target = tiny_target(tmp_path / "g", layers=2, heads=4)
    mask = torch.ones(2, 4, requires_grad=True)
    enc = target.encode(TEXTS)
    batch = target.collate(enc.rows)
    with head_intervention(target.model, target.attention_sites(), mask=mask):
        loss = target.forward(batch).logits.logsumexp(-1).sum()
    loss.backward()
    assert mask.grad is not None and mask.grad.shape == (2, 4) and mask.grad.abs().sum() > 0


def test_frozen_parameters_restores_each_flag_even_after_an_error():
    from bertprobe.model.interventions import frozen_parameters

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    model[1].bias.requires_grad_(False)
    before = [p.requires_grad for p in model.parameters()]
    with pytest.raises(RuntimeError), frozen_parameters(model):
        assert not any(p.requires_grad for p in model.parameters())
        raise RuntimeError("stop")
    assert [p.requires_grad for p in model.parameters()] == before == [True, True, True, False]


@pytest.mark.parametrize("task", ["classification", "multiple-choice"])
@pytest.mark.parametrize("mode", ["mask", "uniform"])
def test_stacked_units_equal_one_unit_per_pass(tmp_path, task, mode):
    """evaluate_units stacks several interventions along the batch: the same predictions (and logits within
    float tolerance) as one intervention per forward pass, for classification and multiple choice."""
    from bertprobe.model.interventions import evaluate_units, stack_size

    target = tiny_target(tmp_path / task, task=task, layers=2, heads=4, initializer_range=0.5)
    sites = target.attention_sites()
    batches, labels = _batches(target, task)
    gen = torch.Generator().manual_seed(0)
    if mode == "mask":
        units = [(torch.rand(2, 4, generator=gen) > 0.4).float() for _ in range(7)]
        kwargs = {"masks": units}
    else:
        units = [torch.rand(2, 4, generator=gen) > 0.6 for _ in range(7)]
        kwargs = {"uniform": units}
    assert stack_size(4, 8, 32, 2, torch.device("cpu"), 7) == 1  # the CPU default: one unit per pass
    assert stack_size(4, 8, 32, 2, torch.device("cpu"), 7, budget=4 * 8 * 32 * 2 * 3) == 3
    single = evaluate_units(target.model, sites, batches, labels, budget=0, **kwargs)
    for budget in (4 * 8 * 32 * 2 * 3, 1 << 40):  # stacks of 3, then all 7 at once
        stacked = evaluate_units(target.model, sites, batches, labels, budget=budget, **kwargs)
        for a, b in zip(single, stacked):
            assert torch.equal(a, b)
    # logits too: one forward of two stacked units against two forwards
    batch = batches[0][1]
    with torch.no_grad():
        ones = [_one_pass(target, sites, batch, u, mode) for u in units[:2]]
        from bertprobe.model.interventions import _repeat_rows

        per_row = torch.stack(units[:2]).repeat_interleave(batch["input_ids"].shape[0], dim=0)
        key = "mask" if mode == "mask" else "uniform"
        with head_intervention(target.model, sites, **{key: per_row.float() if mode == "mask" else per_row}):
            both = target.model(**_repeat_rows(batch, 2)).logits
    torch.testing.assert_close(both, torch.cat(ones), atol=1e-5, rtol=1e-5)


def _batches(target, task):
    """Six labelled examples (with three choices for multiple choice) in pre-collated batches of 4."""
    texts = ["the movie was good", "bad", "a very boring dull story", "fun", "the plot was awful and long", "it was"]
    examples = [Example(t, choices=("good", "bad", "fine") if task == "multiple-choice" else None, label=i % 2)
                for i, t in enumerate(texts)]
    return list(target.batches(target.encode(examples), batch_size=4)), torch.tensor([ex.label for ex in examples])


def _one_pass(target, sites, batch, unit, mode):
    key = "mask" if mode == "mask" else "uniform"
    with head_intervention(target.model, sites, **{key: unit}):
        return target.model(**batch).logits


@pytest.mark.parametrize("arch,task", [("bert", "classification"), ("roberta", "classification"),
                                       ("distilbert", "classification"), ("electra", "classification"),
                                       ("deberta-v2", "classification"), ("bert", "multiple-choice")])
@pytest.mark.parametrize("mode", ["mask", "uniform"])
def test_units_run_from_their_lowest_layer_give_the_same_results(tmp_path, arch, task, mode):
    """With cached layer inputs, a unit skips the layers below its lowest intervention: predictions equal,
    logits within float tolerance, and the skipped layers really are not run."""
    from bertprobe.model.interventions import LayerCache, encoder_layers, evaluate_units, lowest_layer

    target = tiny_target(tmp_path / arch, arch=arch, task=task, layers=4, heads=2, initializer_range=0.5)
    sites = target.attention_sites()
    batches, labels = _batches(target, task)
    layers = encoder_layers(target.model, sites)
    assert layers is not None and len(layers) == 4
    cache = LayerCache(layers)
    with torch.inference_mode(), cache.capture():
        plain = [target.model(**b).logits for _, b in batches]
    assert len(cache.inputs) == len(batches) and cache.bytes > 0
    units = []
    for layer in range(4):
        for head in range(2):
            cell = torch.zeros(4, 2, dtype=torch.bool)
            cell[layer, head] = True
            units.append((~cell).float() if mode == "mask" else cell)
    assert [lowest_layer(u, mode == "mask") for u in units] == [0, 0, 1, 1, 2, 2, 3, 3]
    key = "masks" if mode == "mask" else "uniform"
    without = evaluate_units(target.model, sites, batches, labels, budget=0, **{key: units})
    with_cache = evaluate_units(target.model, sites, batches, labels, budget=0, cache=cache, **{key: units})
    stacked = evaluate_units(target.model, sites, batches, labels, budget=1 << 40, cache=cache, **{key: units})
    for a, b, c in zip(without, with_cache, stacked):
        assert torch.equal(a, b) and torch.equal(a, c)
    # logits of one unit at layer 2, and of no intervention at all (run from the last layer alone)
    calls = [0] * 4
    handles = [layer.register_forward_hook(lambda *_, i=i: calls.__setitem__(i, calls[i] + 1)) for i, layer in enumerate(layers)]
    batch = batches[0][1]
    try:
        with torch.inference_mode():
            full = _one_pass(target, sites, batch, units[4], mode)
            assert calls == [1, 1, 1, 1]
            with cache.start_at(0, 2):
                skipped = _one_pass(target, sites, batch, units[4], mode)
            assert calls == [1, 1, 2, 2]
            with cache.start_at(0, 3):
                last = target.model(**batch).logits
    finally:
        for h in handles:
            h.remove()
    torch.testing.assert_close(skipped, full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(last, plain[0], atol=1e-5, rtol=1e-5)
    assert all(isinstance(m, type(layers[0])) for m in layers)  # every layer is back in place


def test_shared_layers_get_no_cache_and_a_small_budget_turns_it_off(tmp_path):
    from bertprobe.data import Dataset
    from bertprobe.model.interventions import encoder_layers
    from bertprobe.probes.head_pruning.evaluator import Evaluator

    albert = tiny_target(tmp_path / "albert", arch="albert", layers=2, heads=4)
    assert encoder_layers(albert.model, albert.attention_sites()) is None
    bert = tiny_target(tmp_path / "bert", layers=3, heads=2)
    data = Dataset([Example("the movie was good", label=1), Example("bad", label=0)], "d")
    ev = Evaluator(bert, data, None)
    ev.enable_cache(budget_mb=1e-6)
    assert ev.cache is None and "over the budget" in ev.cache_note
    ev.enable_cache(budget_mb=10)
    assert ev.cache is not None
    base = ev.correct()
    assert len(ev.cache.inputs) == 1
    unit = torch.ones(3, 2)
    unit[2, 1] = 0
    (cached,) = ev.correct_many(masks=[unit])
    ev.cache = None
    (plain,) = ev.correct_many(masks=[unit])
    assert (cached == plain).all() and base.shape == plain.shape
