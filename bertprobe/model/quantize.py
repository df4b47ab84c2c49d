"""int8 variants through torchao, the maintained successor of ``torch.ao.quantization``.

torchao is an optional dependency (``pip install torchao``): only a suite that asks for
``quantize:`` imports it. Its wheel ships CUDA-only extensions that fail to load on a CPU machine and
log a warning at import; that noise is kept out of the user's terminal.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from typing import Any

from torch import nn

from bertprobe.errors import TargetError

MODES = ("int8-dynamic", "int8-weight-only")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in ("torchao", "torch.utils._pytree")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def preload_quietly() -> None:
    """Import torchao (when installed) with its load-time warnings silenced.

    transformers imports torchao, when it is installed, as soon as a model class is used; importing
    it here first, quietly, keeps those warnings out of the terminal (the module is then cached).
    """
    try:
        with _quiet():
            import torchao  # noqa: F401
            import torchao.prototype.safetensors.safetensors_support  # noqa: F401  (what transformers imports)
            import torchao.quantization  # noqa: F401  (registers pytree constants: more warnings)
    except Exception:  # absent or broken: quantize: will say so when asked for
        pass


def _torchao() -> Any:
    try:
        with _quiet():
            import torchao.quantization as tq
    except ImportError:
        raise TargetError("quantize: needs torchao; install it with 'pip install torchao'") from None
    return tq


def quantize_model(model: nn.Module, mode: str) -> nn.Module:
    """Quantize every ``nn.Linear`` of ``model`` in place and return it.

    ``int8-dynamic``: int8 weights and per-token int8 activations (torchao
    ``Int8DynamicActivationInt8WeightConfig``). ``int8-weight-only``: int8 weights, float activations.
    Embeddings and LayerNorms stay in float. The quantized model has no backward pass.
    """
    if mode not in MODES:
        raise TargetError(f"quantize: unknown mode '{mode}'; use {', '.join(MODES)}")
    tq = _torchao()
    config = tq.Int8DynamicActivationInt8WeightConfig() if mode == "int8-dynamic" else tq.Int8WeightOnlyConfig()
    try:
        with _quiet():
            tq.quantize_(model, config)
    except Exception as exc:  # torchao raises many types for unsupported layouts and devices
        raise TargetError(f"quantize: {mode} failed on this model/device: {type(exc).__name__}: {exc}") from None
    return model
