"""The bfloat16 copy's faster parts: oneDNN-reordered products (with BERT's GELU as their post-op) and attention
with its softmax written out, each checked against the arithmetic it replaces."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bertprobe.model import bfloat16_copy
from bertprobe.model.bfloat16_copy import OneDNNLinear, bfloat16_linears, head_transform_linears, short_row_attention
from bertprobe.model.masked_scoring import MaskedScorer
from bertprobe.testing import tiny_target

onednn = pytest.mark.skipif(not bfloat16_copy.onednn_products_agree(),
                            reason="no oneDNN bfloat16 product on this CPU (AVX2 only): the copy keeps F.linear")


@onednn
def test_every_bfloat16_linear_is_reordered_and_gives_the_products_numbers_to_bfloat16_rounding(tmp_path):
    target = tiny_target(tmp_path / "m", task="masked-lm")
    reduced = bfloat16_linears(target.model)
    head = {id(m) for m in head_transform_linears(reduced)}
    linears = [m for m in reduced.modules() if isinstance(m, torch.nn.Linear) and id(m) not in head]
    assert linears and all(type(m) is OneDNNLinear for m in linears)
    assert reduced.get_output_embeddings() in linears  # the vocabulary projection too, its weight still tied
    assert reduced.get_output_embeddings().weight is reduced.get_input_embeddings().weight
    torch.manual_seed(0)
    for module in linears:
        if module.post_op != "none":
            continue
        for rows in (1, 5, 2049):  # fewer and more rows than the 2,048 the weights were reordered for
            x = torch.randn(rows, module.in_features)
            with torch.inference_mode():
                got = module(x)
            exact = F.linear(x.bfloat16().float(), module.weight.float(), module.bias.float())
            assert bfloat16_copy.rounded_like(got, exact)
            assert not bfloat16_copy.rounded_like((exact * 1.05).bfloat16(), exact)  # the check can fail


@onednn
def test_berts_gelu_becomes_the_products_post_op_and_rounds_once(tmp_path):
    target = tiny_target(tmp_path / "m", task="masked-lm")
    reduced = bfloat16_linears(target.model)
    own = target.model.bert.encoder.layer[0].intermediate
    fused = reduced.bert.encoder.layer[0].intermediate
    assert fused.dense.post_op == "gelu" and isinstance(fused.intermediate_act_fn, torch.nn.Identity)
    assert all(layer.intermediate.dense.post_op == "gelu" for layer in reduced.bert.encoder.layer)
    torch.manual_seed(0)
    x = torch.randn(64, own.dense.in_features) * 3
    exact = own(x)  # float32 throughout
    unfused = F.gelu(F.linear(x.bfloat16(), fused.dense.weight, fused.dense.bias)).float()
    got = fused(x).float()
    assert got.dtype == torch.float32 and not torch.equal(got, unfused)
    assert (got - exact).abs().max() <= (unfused - exact).abs().max()  # one rounding, not two
    assert (got - exact).abs().max() < 0.05 * exact.abs().max()


def test_without_onednn_the_copy_keeps_plain_bfloat16_linears_and_scores_the_same_way(tmp_path, monkeypatch):
    target = tiny_target(tmp_path / "m", task="masked-lm")
    texts = ["the dog is good .", "they gave the apple away ."]
    exact = [s.total for s in MaskedScorer(target).pll(texts)]
    monkeypatch.setattr(bfloat16_copy, "onednn_products_agree", lambda: False)
    scorer = MaskedScorer(target, precision="bfloat16")
    assert not any(isinstance(m, OneDNNLinear) for m in scorer.model.modules())
    assert scorer.model.bert.encoder.layer[0].intermediate.dense.weight.dtype == torch.bfloat16
    fast = [s.total for s in scorer.pll(texts)]
    assert all(0 < abs(a - b) < 0.05 for a, b in zip(fast, exact))


@pytest.mark.parametrize("length", [3, 12, 17])
def test_short_row_attention_equals_transformers_eager_attention(length):
    from transformers.models.bert.modeling_bert import eager_attention_forward

    torch.manual_seed(length)
    module = torch.nn.Module().eval()
    q, k, v = (torch.randn(4, 2, length, 8) for _ in range(3))
    mask = torch.zeros(4, 1, 1, length)
    mask[1, ..., length - 1:] = torch.finfo(torch.float32).min  # a padded row
    mine, weights = short_row_attention(module, q, k, v, mask, scaling=0.35)
    theirs, their_weights = eager_attention_forward(module, q, k, v, mask, scaling=0.35)
    assert mine.shape == theirs.shape == (4, length, 2, 8)
    assert torch.allclose(mine, theirs, atol=1e-6) and torch.allclose(weights, their_weights, atol=1e-7)
    assert float(weights[1, ..., length - 1].abs().max()) == 0.0  # the padded key gets nothing


@pytest.mark.parametrize("arch", ["bert", "roberta", "electra", "distilbert", "deberta-v2"])
def test_each_familys_bfloat16_copy_scores_near_its_own_float32(tmp_path, arch):
    target = tiny_target(tmp_path / "m", task="masked-lm", arch=arch)
    texts = ["the dog is good .", "she was very funny ."]
    exact = [s.total for s in MaskedScorer(target).pll(texts)]
    scorer = MaskedScorer(target, precision="bfloat16")
    fast = [s.total for s in scorer.pll(texts)]
    assert all(abs(a - b) < 0.05 for a, b in zip(fast, exact))
    if arch in ("bert", "roberta", "electra"):  # their attention goes through transformers' interface
        assert scorer.model.config._attn_implementation == bfloat16_copy.SHORT_ROW_ATTENTION
    assert target.model.config._attn_implementation != bfloat16_copy.SHORT_ROW_ATTENTION  # the model is untouched
