"""Which attention kernels a probe's forward and backward passes may use."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch

from bertprobe.environment import env_flag

CUDNN_ATTENTION_ENV = "BERTPROBE_CUDNN_ATTENTION"


def attention_kernels(device: torch.device | str) -> AbstractContextManager[None]:
    """On a CUDA device, scaled-dot-product attention without cuDNN's kernel (flash, memory-efficient or math
    instead); elsewhere, and with ``BERTPROBE_CUDNN_ATTENTION=1``, PyTorch's own choice.

    cuDNN builds an execution plan for every new input shape, hundreds of milliseconds each (sglang#4650,
    FunASR#3704), and an audit's batches come in many shapes: sorted by length, each batch pads to its own
    longest row, and every trigger candidate, perturbation or block of a sweep brings new ones. On an H200,
    where PyTorch chose cuDNN for bf16 with a padding mask, a first pass over 35 new batch shapes took
    1.8-1.9 s with it and 0.27-0.28 s without, and the base-size trigger search 11 s against 2 s
    (docs/benchmarks.md). The kernel chosen for a forward also runs
    its backward, so the trigger search's gradients follow. The switch is PyTorch's own context manager, so
    the previous choice is restored on leaving, also on an error."""
    if torch.device(device).type != "cuda" or env_flag(CUDNN_ATTENTION_ENV):
        return nullcontext()
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # a torch older than its cuDNN attention: nothing to leave out
        return nullcontext()
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])
