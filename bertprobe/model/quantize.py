"""int8 variants through torchao, the maintained successor of ``torch.ao.quantization``.

torchao is an optional dependency (``pip install torchao``): only a suite that asks for
``quantize:`` (or a checkpoint quantized with torchao) imports it. Importing it costs seconds (it pulls in
``torch._dynamo``), and transformers would import it on every model load when it is installed:
``defer_torchao`` keeps transformers from doing so. Its wheel ships CUDA-only extensions that fail to load on
a CPU machine and log a warning at import; whenever torchao is imported, that noise is kept out of the
user's terminal.
"""

from __future__ import annotations

import contextlib
import logging
import sys
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

    Called before torchao is used (to quantize, or by a torchao-quantized checkpoint): importing it here first,
    quietly, keeps those warnings out of the terminal (the module is then cached).
    """
    try:
        with _quiet():
            import torchao  # noqa: F401
            import torchao.prototype.safetensors.safetensors_support  # noqa: F401  (what transformers imports)
            import torchao.quantization  # noqa: F401  (registers pytree constants: more warnings)
    except Exception:  # absent or broken: quantize: will say so when asked for
        pass


def defer_torchao() -> None:
    """Let transformers load models without importing torchao, which costs seconds and is needed only to quantize.

    transformers' torchao quantizer imports torchao when its module loads (with ``modeling_utils``, on the
    first model class used), whether or not a model is quantized. That module is imported here with
    transformers' availability check answering no, then given the real check back and a ``flatten_tensor_state_dict``
    that imports torchao (quietly) when a torchao-quantized model is saved. Already imported, or on a transformers
    whose quantizer looks otherwise, torchao is preloaded quietly instead (the former behaviour).
    """
    name = "transformers.quantizers.quantizer_torchao"
    if "torchao" in sys.modules:
        preload_quietly()  # cached: only its load-time warnings to keep quiet, if a submodule is new
        return
    if name in sys.modules:  # deferred by an earlier load (or imported with torchao: handled above)
        return
    try:
        import transformers.utils as hf_utils

        available = hf_utils.is_torchao_available

        def unavailable(*args: Any, **kwargs: Any) -> bool:
            return False

        hf_utils.is_torchao_available = unavailable
        try:
            import transformers.quantizers.quantizer_torchao as quantizer
        finally:
            hf_utils.is_torchao_available = available
            for key, module in list(sys.modules.items()):  # each transformers module that took the stand-in
                own = getattr(module, "__dict__", {}) if key.startswith("transformers") else {}  # no lazy __getattr__
                if own.get("is_torchao_available") is unavailable:
                    module.is_torchao_available = available
        quantizer.flatten_tensor_state_dict = _flatten_tensor_state_dict
    except Exception:  # another transformers layout: import torchao now, as before, but quietly
        preload_quietly()


def _flatten_tensor_state_dict(*args: Any, **kwargs: Any) -> Any:
    """torchao's own, imported on first use (what transformers calls to save a torchao-quantized model)."""
    preload_quietly()
    from torchao.prototype.safetensors.safetensors_support import flatten_tensor_state_dict

    return flatten_tensor_state_dict(*args, **kwargs)


def uses_torchao(config: Any) -> bool:
    """Whether a model's config says its checkpoint was quantized with torchao (transformers then imports it)."""
    quantization = getattr(config, "quantization_config", None)
    method = quantization.get("quant_method") if isinstance(quantization, dict) else getattr(quantization, "quant_method", None)
    return str(getattr(method, "value", method) or "").lower() == "torchao"


def _torchao() -> Any:
    try:
        preload_quietly()
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
