"""Budgets sized to the device: tokens per batch and units per stacked pass (GPU sizes checked with a faked
free memory, since the tests run on CPUs)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from transformers import BertConfig, DistilBertConfig

from bertprobe.model import budgets
from bertprobe.model.interventions import stack_size

CUDA = torch.device("cuda")
CPU = torch.device("cpu")
GiB = 1 << 30


def test_cpu_keeps_fixed_batches_and_one_unit_per_pass():
    config = BertConfig()
    assert budgets.token_budget(config, CPU, 4, free=64 * GiB) is None
    assert budgets.stack_budget(CPU, 4, free=64 * GiB) == 0
    assert stack_size(32, 40, 768, 12, CPU, units=24) == 1


def test_token_budget_follows_the_cards_free_memory_and_the_models_width():
    base, large = BertConfig(), BertConfig(hidden_size=1024, intermediate_size=4096, num_attention_heads=16)
    small_card = budgets.token_budget(base, CUDA, 4, free=2 * GiB)
    big_card = budgets.token_budget(base, CUDA, 4, free=16 * GiB)
    assert small_card is not None and big_card is not None
    assert small_card < big_card and small_card % 1024 == 0 and big_card % 1024 == 0
    # a quarter of the free memory holds that many tokens' activations (rounding only takes tokens away)
    assert small_card * budgets.bytes_per_token(base, 4) <= 2 * GiB // budgets.ACTIVATION_SHARE
    assert budgets.token_budget(large, CUDA, 4, free=16 * GiB) < big_card  # a wider model: fewer tokens
    assert budgets.token_budget(base, CUDA, 2, free=16 * GiB) > big_card  # half precision: more tokens
    assert budgets.token_budget(base, CUDA, 4, free=80 * GiB) == budgets.MAX_TOKEN_BUDGET
    assert budgets.token_budget(base, CUDA, 4, free=64 << 20) == budgets.MIN_TOKEN_BUDGET


def test_bytes_per_token_reads_distilbert_names():
    distil = DistilBertConfig(dim=256, hidden_dim=1024, n_heads=4)
    assert budgets.bytes_per_token(distil, 4, length=100) == 4 * (1024 + 4 * 256 + 4 * 100)


def test_stack_size_on_a_gpu_takes_what_fits(monkeypatch):
    monkeypatch.setattr(budgets, "free_memory", lambda device: 2 * GiB)
    per_unit = 32 * 40 * 768 * 12
    expected = (2 * GiB // budgets.ACTIVATION_SHARE // 4) // per_unit
    assert 1 < expected < 24
    assert stack_size(32, 40, 768, 12, CUDA, units=24) == expected
    assert stack_size(32, 40, 768, 12, CUDA, units=24, element_size=2) == min(24, 2 * expected)
    monkeypatch.setattr(budgets, "free_memory", lambda device: 256 * GiB)
    assert budgets.stack_budget(CUDA, 4) == budgets.MAX_STACK_BUDGET
    monkeypatch.setattr(budgets, "free_memory", lambda device: 1 << 20)  # nothing fits: one unit at a time
    assert stack_size(32, 40, 768, 12, CUDA, units=24) == 1


def test_a_gpu_target_batches_by_its_cards_budget(tmp_path, monkeypatch):
    from bertprobe.data import Example
    from bertprobe.testing import sentiment_examples, tiny_target

    monkeypatch.setattr(budgets, "free_memory", lambda device: 2 * GiB)
    target = tiny_target(tmp_path / "m")
    on_gpu = replace(target, device=CUDA)  # sizing only: nothing runs on the "GPU"
    expected = budgets.token_budget(target.model.config, CUDA, 4, free=2 * GiB)
    assert on_gpu.token_budget == expected and target.token_budget is None
    assert replace(on_gpu, spec=replace(on_gpu.spec, token_budget=128)).token_budget == 128  # the spec wins
    encoded = target.encode([Example(t) for t, _ in sentiment_examples(40, 1)])
    order = sorted(range(40), key=encoded.lengths.__getitem__)
    assert len(on_gpu.plan_batches(encoded, order)) == 1  # the whole set fits one budgeted batch
    assert len(target.plan_batches(encoded, order)) == -(-40 // target.spec.batch_size)


@pytest.mark.parametrize("free", [0, 1])
def test_tiny_cards_still_get_a_usable_budget(free):
    assert budgets.token_budget(BertConfig(), CUDA, 4, free=free) == budgets.MIN_TOKEN_BUDGET
    assert budgets.stack_budget(CUDA, 4, free=free) == 0
