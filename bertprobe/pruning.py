"""Physical head pruning: slice the q/k/v rows and output-projection columns of removed heads.

transformers 5 dropped ``prune_heads``. Encoders whose attention reshapes with ``view(..., -1, head_dim)``
(BERT, RoBERTa, XLM-R, ELECTRA, DistilBERT, MiniLM) keep working when their projections shrink.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from bertprobe.architectures import attention_sites

PRUNABLE = {"bert", "roberta", "xlm-roberta", "electra", "distilbert", "camembert"}


def _slice_linear(layer: nn.Linear, keep: torch.Tensor, dim: int) -> nn.Linear:
    weight = layer.weight.index_select(dim, keep.to(layer.weight.device)).detach().clone()
    out_f, in_f = weight.shape
    new = nn.Linear(in_f, out_f, bias=layer.bias is not None, device=weight.device, dtype=weight.dtype)
    new.weight.data.copy_(weight)
    if layer.bias is not None:
        bias = layer.bias if dim == 1 else layer.bias.index_select(0, keep.to(layer.bias.device))
        new.bias.data.copy_(bias.detach())
    return new


def _replace(model: nn.Module, old: nn.Module, new: nn.Module) -> None:
    for parent in model.modules():
        for name, child in parent.named_children():
            if child is old:
                setattr(parent, name, new)


def prune_heads(model: nn.Module, heads: Iterable[tuple[int, int]]) -> tuple[nn.Module, list[str]]:
    """Return a pruned deep copy of ``model`` without the given (layer, head) pairs, and notes.

    A layer keeps at least one head (the lowest-numbered one among those to prune) so its shapes stay
    valid; that head is noted. Raises ValueError for architectures that cannot be sliced safely.
    """
    model_type = getattr(model.config, "model_type", "")
    if model_type not in PRUNABLE:
        raise ValueError(f"physical pruning supports {', '.join(sorted(PRUNABLE))}, not {model_type}")
    pruned = copy.deepcopy(model)
    notes: list[str] = []
    by_layer: dict[int, set[int]] = {}
    for layer, head in heads:
        by_layer.setdefault(layer, set()).add(head)
    for site in attention_sites(pruned):
        layer = site.layers[0]
        drop = by_layer.get(layer, set())
        if not drop:
            continue
        if len(drop) >= site.num_heads:
            spare = min(drop)
            drop = drop - {spare}
            notes.append(f"layer {layer}: kept head {spare} so the layer stays valid")
        keep_heads = [h for h in range(site.num_heads) if h not in drop]
        d = site.head_dim
        keep = torch.tensor([h * d + i for h in keep_heads for i in range(d)], dtype=torch.long)
        if site.query_proj is None or site.key_proj is None or site.value_proj is None:
            raise ValueError(f"{site.name}: query/key/value projections not found")
        for proj in (site.query_proj, site.key_proj, site.value_proj):
            _replace(pruned, proj, _slice_linear(proj, keep, 0))
        _replace(pruned, site.out_proj, _slice_linear(site.out_proj, keep, 1))
    return pruned, notes


def count_parameters(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())
