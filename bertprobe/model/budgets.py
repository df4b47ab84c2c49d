"""Memory budgets sized to the device: free memory, tokens per batch, and units per stacked pass.

On a GPU a forward pass is bound by the host's kernel launches until the batch is large, so bertprobe
makes few, large passes there, as large as the card's free memory allows. On a CPU a pass is
compute-bound at ordinary batch sizes and a bigger one only adds memory traffic, so the defaults keep
fixed batches and one intervention unit per pass.
"""

from __future__ import annotations

import os
from typing import Any

import torch

#: Share of the device's free memory a batch's activations may take (the rest: weights of other
#: models in a matrix, caches, the allocator's slack).
ACTIVATION_SHARE = 4
#: Tokens per batch on a GPU are kept within these bounds whatever the card (a small card still gets
#: batches worth launching; a huge one gains nothing past a few hundred thousand tokens).
MIN_TOKEN_BUDGET = 4096
MAX_TOKEN_BUDGET = 1 << 18
#: Activation elements per stacked pass on a GPU at most (about 8 GiB in fp32).
MAX_STACK_BUDGET = 1 << 31


def free_memory(device: torch.device) -> int:
    """Bytes free on ``device``: the GPU's free memory, or the host's available memory (Linux; 4 GiB elsewhere)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 4 << 30


def hidden_width(config: Any) -> int:
    """The hidden width a config names (``hidden_size``, DistilBERT's ``dim``; 768 if neither)."""
    return int(getattr(config, "hidden_size", 0) or getattr(config, "dim", 0) or 768)


def bytes_per_token(config: Any, element_size: int, length: int = 512) -> int:
    """A bound on the activation bytes one token holds at the peak of a layer in inference: the feed-forward
    block's intermediate, four hidden-wide tensors (residual, query, key, value) and one attention row per
    head over ``length`` keys."""
    hidden = hidden_width(config)
    intermediate = int(getattr(config, "intermediate_size", 0) or getattr(config, "hidden_dim", 0) or 4 * hidden)
    heads = int(getattr(config, "num_attention_heads", 0) or getattr(config, "n_heads", 0) or 12)
    return element_size * (intermediate + 4 * hidden + heads * length)


def token_budget(config: Any, device: torch.device, element_size: int, free: int | None = None) -> int | None:
    """Tokens per batch (rows x padded length) for ``device``: None on a CPU (fixed batches); on a GPU a
    quarter of its free memory over ``bytes_per_token`` at the longest length, within
    [MIN_TOKEN_BUDGET, MAX_TOKEN_BUDGET], rounded down to a multiple of 1,024."""
    if device.type != "cuda":
        return None
    free = free_memory(device) if free is None else free
    tokens = free // ACTIVATION_SHARE // bytes_per_token(config, element_size)
    tokens = max(MIN_TOKEN_BUDGET, min(MAX_TOKEN_BUDGET, int(tokens)))
    return tokens // 1024 * 1024


def stack_budget(device: torch.device, element_size: int, free: int | None = None) -> int:
    """Activation elements one stacked pass may hold (see ``interventions.stack_size``): 0 on a CPU (one
    unit per pass); on a GPU a quarter of its free memory, at most MAX_STACK_BUDGET elements."""
    if device.type == "cpu":
        return 0
    free = free_memory(device) if free is None else free
    return int(min(MAX_STACK_BUDGET, free // ACTIVATION_SHARE // max(1, element_size)))


def pack_by_length(order: list[int], length_of: Any, fits: Any) -> list[list[int]]:
    """Rows in ``order`` (sorted by length) cut into batches: a row joins the current batch while
    ``fits(rows, longest)`` holds for the batch with it (rows, the longest length), else starts the next one."""
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        length = length_of(i)
        if current and not fits(len(current) + 1, max(longest, length)):
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, length)
    if current:
        batches.append(current)
    return batches
