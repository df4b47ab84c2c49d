"""The copy of a masked LM that bfloat16 scoring passes run (``MaskedScorer(precision="bfloat16")``).

``bfloat16_linears`` deep-copies the model and, in the copy:

* every ``nn.Linear`` holds bfloat16 weights, but for the MLM head's transform, which computes in float32
  (``head_transform_linears``: rounding its output was half of a pair's bfloat16 error on a MiniLM-L6);
* on a CPU whose oneDNN computes bfloat16 (AVX-512 BF16, AMX), each of those linears multiplies with its weights
  reordered once into oneDNN's blocked layout (``OneDNNLinear``): ``F.linear`` reorders a bfloat16 weight on
  every call and adds the bias in a second pass over the output; at a MiniLM-L6's shapes the products are
  ``F.linear``'s very numbers (measured), and within bfloat16 rounding of the float32 product anywhere (checked
  once per process before any layer is reordered), 12-16% faster over a MiniLM-L6's BLiMP pass on 2
  cores (``docs/benchmarks.md``); and BERT's feed-forward GELU runs as the reordered product's post-op, on the
  float32 accumulator before its one rounding (the largest pair-margin error 0.0202 -> 0.0183 nats over 1,340
  BLiMP pairs, no slower);
* on a CPU, attention is ``short_row_attention``: the eager arithmetic with its softmax written out, because
  PyTorch's CPU softmax over rows shorter than a vector register (BLiMP's 8-16 tokens) takes a scalar path, 5x
  slower (1.9 against 0.6 ms for 170 x 12 heads x 12 x 12); bfloat16 SDPA was slower still on such rows (23% of a
  pass).

A model something hooks into (an intervention) is not copied: its hooks would not follow a copy.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import torch
import torch.nn.functional as F

SHORT_ROW_ATTENTION = "bertprobe_short_rows"  # the name it is registered under with transformers
BERT_INTERMEDIATES = ("BertIntermediate", "RobertaIntermediate", "XLMRobertaIntermediate", "CamembertIntermediate",
                      "ElectraIntermediate")  # dense, then intermediate_act_fn, nothing else


class Float32Linear(torch.nn.Linear):
    """A linear layer that computes in float32 even under autocast (its input cast up, its weights float32)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type=input.device.type, enabled=False):
            return super().forward(input.float())


class OneDNNLinear(torch.nn.Linear):
    """A bfloat16 linear layer whose weights oneDNN reordered once (``packed``), its bias and an optional post-op
    (``"gelu"``: the exact, erf GELU) applied in the product's own pass. Its ``weight`` stays as it was (tied word
    embeddings read it); the input is cast to bfloat16, as autocast would."""

    packed: torch.Tensor
    post_op: str = "none"

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        algorithm = "none" if self.post_op == "gelu" else ""
        return torch.ops.mkldnn._linear_pointwise(input.to(torch.bfloat16), self.packed, self.bias, self.post_op, [],
                                                  algorithm)


def bfloat16_linears(model: Any) -> Any:
    """The bfloat16 copy of ``model`` the module docstring describes, made where the model is (a GPU holds both for
    a moment); ``model`` itself when something hooks into it."""
    if any(m._forward_hooks or m._forward_pre_hooks for m in model.modules()):
        return model
    reduced = copy.deepcopy(model)
    for module in head_transform_linears(reduced):
        module.__class__ = Float32Linear
    for module in reduced.modules():
        if isinstance(module, torch.nn.Linear) and not isinstance(module, Float32Linear):
            module.to(torch.bfloat16)
    if all(p.device.type == "cpu" for p in reduced.parameters()):
        if pack_linears(reduced):
            fuse_gelu(reduced)
        use_attention(reduced, short_row_attention_name())
    return reduced


def head_transform_linears(model: Any) -> list[torch.nn.Linear]:
    """The linear layers of ``model``'s masked-LM head before its vocabulary projection (BERT's
    ``cls.predictions.transform.dense``, RoBERTa's ``lm_head.dense``, ELECTRA's ``generator_predictions.dense``,
    DistilBERT's ``vocab_transform``): every ``nn.Linear`` outside the encoder (``base_model``) but the output
    embeddings. They run at the scored positions only, so float32 there costs under 1% of a pass; rounding their
    output to bfloat16 was half of a pair's bfloat16 error on a MiniLM-L6 (largest margin error 0.033 against 0.018
    nats over 536 BLiMP pairs, ``docs/benchmarks.md``). Empty where the model has no separate encoder."""
    base = getattr(model, "base_model", model)
    if base is model:
        return []
    encoder = {id(m) for m in base.modules()}
    decoder = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    return [m for m in model.modules() if type(m) in (torch.nn.Linear, Float32Linear)
            and id(m) not in encoder and m is not decoder]


def pack_linears(model: Any) -> int:
    """Turn each bfloat16 ``nn.Linear`` of ``model`` (on a CPU) into a ``OneDNNLinear``; how many. None where this
    build or CPU has no oneDNN bfloat16 product (an AVX2-only CPU) or where it would not give ``F.linear``'s
    numbers: the model is then left as it was."""
    linears = [m for m in model.modules() if type(m) is torch.nn.Linear and m.weight.dtype == torch.bfloat16
               and m.weight.device.type == "cpu"]
    if not linears or not onednn_products_agree():
        return 0
    packed = []
    try:
        for module in linears:
            packed.append((module, torch.ops.mkldnn._reorder_linear_weight(module.weight.detach(), 2048)))
    except (RuntimeError, AttributeError):
        return 0
    for module, weights in packed:
        module.__class__ = OneDNNLinear
        module.packed = weights
    return len(packed)


@functools.cache
def onednn_products_agree() -> bool:
    """Whether oneDNN's reordered bfloat16 product runs here and gives the float32 product of the same bfloat16
    numbers to bfloat16's rounding, with and without a bias, at a row count other than the one it was reordered
    for (checked once per process)."""
    if not torch.backends.mkldnn.is_available():
        return False
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(48, 40, generator=generator).to(torch.bfloat16)
    bias = torch.randn(48, generator=generator).to(torch.bfloat16)
    x = torch.randn(3, 7, 40, generator=generator).to(torch.bfloat16)
    try:
        packed = torch.ops.mkldnn._reorder_linear_weight(weight, 2048)
        with_bias = torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")
        without = torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
    except (RuntimeError, AttributeError):
        return False
    exact = F.linear(x.float(), weight.float())
    return bool(rounded_like(with_bias, exact + bias.float()) and rounded_like(without, exact))


def rounded_like(got: torch.Tensor, exact: torch.Tensor) -> bool:
    """Whether bfloat16 ``got`` is ``exact`` (float32) to within two of bfloat16's rounding steps at its scale."""
    return bool(got.dtype == torch.bfloat16
                and (got.float() - exact).abs().max() <= 2 * 2.0 ** -8 * float(exact.abs().max()))


def fuse_gelu(model: Any) -> int:
    """Move the exact GELU of each BERT-style feed-forward (``BERT_INTERMEDIATES``) whose ``dense`` is a
    ``OneDNNLinear`` into that product as its post-op; how many."""
    from transformers.activations import GELUActivation

    fused = 0
    for module in model.modules():
        act = getattr(module, "intermediate_act_fn", None)
        dense = getattr(module, "dense", None)
        if (type(module).__name__ in BERT_INTERMEDIATES and "forward" not in vars(module)
                and isinstance(dense, OneDNNLinear) and type(act) is GELUActivation and act.act is F.gelu):
            dense.post_op = "gelu"
            module.intermediate_act_fn = torch.nn.Identity()
            fused += 1
    return fused


def short_row_attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                        attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
                        **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager attention (transformers' BERT ``eager_attention_forward``) with its softmax written out: scores in
    float32, the row maximum subtracted, ``exp``, divided by the row sum. Within float32 rounding of
    ``softmax`` (1e-7), and on a CPU several times faster on rows under 16 keys."""
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    scores = torch.matmul(query, key.transpose(2, 3)).float().mul_(scaling)
    if attention_mask is not None:
        scores = scores.add_(attention_mask)
    scores = scores.sub_(scores.amax(-1, keepdim=True)).exp_()
    weights = scores.div_(scores.sum(-1, keepdim=True))
    if dropout and module.training:
        weights = F.dropout(weights, p=dropout, training=True)
    out = torch.matmul(weights.to(value.dtype), value)
    return out.transpose(1, 2).contiguous(), weights


@functools.cache
def short_row_attention_name() -> str:
    """``short_row_attention`` registered with transformers' attention and mask interfaces (eager's additive mask),
    once per process, under ``SHORT_ROW_ATTENTION``; ``"eager"`` where this transformers has no such interfaces."""
    try:
        from transformers import AttentionInterface, AttentionMaskInterface
        from transformers.masking_utils import eager_mask
    except ImportError:
        return "eager"
    AttentionInterface.register(SHORT_ROW_ATTENTION, short_row_attention)
    AttentionMaskInterface.register(SHORT_ROW_ATTENTION, eager_mask)
    return SHORT_ROW_ATTENTION


def use_attention(model: Any, name: str) -> str | None:
    """Set ``model``'s attention implementation to ``name``, else to eager; the one set (None: neither took)."""
    if not hasattr(model, "set_attn_implementation"):
        return None
    for choice in dict.fromkeys((name, "eager")):
        try:
            model.set_attn_implementation(choice)
            return choice
        except (ValueError, ImportError, KeyError):
            continue
    return None
