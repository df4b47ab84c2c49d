"""Which attention kernels a probe's forward and backward passes may use."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

CUDNN_ATTENTION_ENV = "BERTPROBE_CUDNN_ATTENTION"


def cudnn_attention_allowed() -> bool:
    """Whether ``BERTPROBE_CUDNN_ATTENTION=1`` gives PyTorch back its own choice, cuDNN's kernel included."""
    return os.environ.get(CUDNN_ATTENTION_ENV, "").strip().lower() in ("1", "true", "yes")


@contextmanager
def attention_kernels(device: torch.device | str) -> Iterator[None]:
    """On a CUDA device, scaled-dot-product attention without cuDNN's kernel (flash, memory-efficient or math
    instead); elsewhere, and with ``BERTPROBE_CUDNN_ATTENTION=1``, PyTorch's own choice.

    cuDNN builds an execution plan for every new input shape, hundreds of milliseconds each (sglang#4650,
    FunASR#3704), and an audit's batches come in many shapes: sorted by length, each batch pads to its own
    longest row, and every trigger candidate, perturbation or block of a sweep brings new ones. On an H200,
    where PyTorch chose cuDNN for bf16 with a padding mask, probes that meet many shapes paid 1.5-5.5 s more
    in bf16 than in fp32 at every model size, cuDNN's kernel in the profile (docs/benchmarks.md; the likely
    cause, to be re-measured with this switch on the next GPU). The kernel chosen for a forward also runs
    its backward, so the trigger search's gradients follow. The switch is PyTorch's own context manager, so
    the previous choice is restored on leaving, also on an error."""
    if torch.device(device).type != "cuda" or cudnn_attention_allowed() or not _has_kernel_switch():
        yield
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
        yield


def _has_kernel_switch() -> bool:
    """Whether this torch has ``torch.nn.attention.sdpa_kernel`` (an older one has no cuDNN attention either)."""
    try:
        from torch.nn.attention import sdpa_kernel  # noqa: F401
    except ImportError:
        return False
    return True
