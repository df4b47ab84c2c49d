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

from bertprobe.model.architectures import attention_sites, head_grid
from bertprobe.model.interventions import frozen_parameters, head_intervention
from bertprobe.progress import progress

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


def head_importance(target: Any, batches: Iterable[tuple[list[int], dict[str, torch.Tensor]]],
                    labels: torch.Tensor, mask: torch.Tensor | None = None,
                    owner: torch.Tensor | None = None) -> torch.Tensor:
    """Michel et al.'s E_x |dL(x)/d xi_h| at ``mask`` (ones by default): one forward+backward pass.

    The mask is per example (``B x L x H``), so the absolute value is taken per example as the paper's
    equation says. ``labels`` are the task's gold (class or choice indices; a 0/1 indicator for multi-label,
    whose loss is the binary cross-entropy); the result is ``L x H`` (a pruned layer's missing heads stay 0).
    The logits are the task's (``Task.output_logits``). With ``owner`` (per row, the index of its example:
    a question's windows), rows are parts of one example that share its mask: their gradients are summed
    per example, over every batch, before the absolute value, and the mean is over examples.
    """
    sites = target.attention_sites()
    shape = head_grid(sites)
    base = torch.ones(shape) if mask is None else mask.float()
    total = torch.zeros(shape)
    per_example = torch.zeros(int(owner.max()) + 1 if owner is not None and len(owner) else 0, *shape)
    model = target.model
    count = 0
    with frozen_parameters(model):
        for idx, batch in progress(batches, desc="head importance"):
            xi = base.unsqueeze(0).repeat(len(idx), 1, 1).to(target.device).requires_grad_(True)
            with torch.enable_grad(), head_intervention(model, sites, mask=xi):
                logits = target.task.output_logits(target.forward(batch)).float()
                loss = target.task.total_loss(logits, labels[idx].to(logits.device))  # the task's loss, summed
                loss.backward()
            if xi.grad is None:
                raise ValueError("no gradient reached the head masks (a quantized model has no backward pass)")
            if owner is not None:
                per_example.index_add_(0, owner[idx], xi.grad.cpu())
            else:
                total += xi.grad.abs().sum(0).cpu()
                count += len(idx)
    if owner is not None:
        return per_example.abs().mean(0) if len(per_example) else total
    return total / max(count, 1)


def normalize_by_layer(scores: torch.Tensor) -> torch.Tensor:
    """Michel's layer-wise normalisation: each layer's scores divided by their L2 norm."""
    norms = scores.norm(dim=1, keepdim=True).clamp_min(1e-20)
    return scores / norms


def least_important(scores: torch.Tensor, share: float, heads_per_layer: list[int] | None = None) -> list[tuple[int, int]]:
    """The ``round(share * heads)`` (layer, head) pairs with the lowest scores; cells past a layer's heads never count."""
    layers, width = scores.shape
    real = torch.ones(layers, width, dtype=torch.bool)
    if heads_per_layer is not None:
        for layer, n in enumerate(heads_per_layer):
            real[layer, n:] = False
    total = int(real.sum())
    n = int(round(share * total))
    order = scores.masked_fill(~real, float("inf")).flatten().argsort()[:n].tolist()
    return [divmod(f, width) for f in order]
