"""Facts about a loaded model for the report: weight hashes, parameter count, bytes in memory."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch

from bertprobe.results import ModelInfo

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def weight_files(path: str) -> list[Path]:
    """The weights files of a local model folder, or of a hub model's cached snapshot (else none)."""
    local = Path(path).expanduser()
    if local.is_file() and local.suffix == ".onnx":  # an ONNX graph (bertprobe.model.onnx)
        return [local]
    if local.is_dir():
        found = sorted(p for p in local.iterdir() if p.is_file() and p.name.endswith(_WEIGHT_SUFFIXES))
        return found or [p for p in (local / "model.onnx",) if p.is_file()]
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(path, "model.safetensors")
    except Exception:
        return []
    return [Path(cached)] if isinstance(cached, str) else []


def sha256_of(files: list[Path], chunk: int = 1 << 22) -> str | None:
    """One sha256 over the files' bytes (a single file: its ordinary sha256sum)."""
    if not files:
        return None
    digest = hashlib.sha256()
    for file in files:
        with open(file, "rb") as handle:
            while block := handle.read(chunk):
                digest.update(block)
    return digest.hexdigest()


def tensor_bytes(tensor: torch.Tensor) -> int:
    """Bytes a tensor holds, looking inside tensor subclasses (torchao's int8 weights)."""
    flatten = getattr(tensor, "__tensor_flatten__", None)
    if flatten is not None and type(tensor) not in (torch.Tensor, torch.nn.Parameter):
        names, _ = flatten()
        return sum(tensor_bytes(getattr(tensor, name)) for name in names)
    return tensor.numel() * tensor.element_size()


def model_bytes(model: Any) -> int:
    """Parameters and buffers in memory, shared tensors counted once."""
    seen: set[int] = set()
    total = 0
    for tensor in list(model.parameters()) + list(model.buffers()):
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        total += tensor_bytes(tensor)
    return total


def parameter_count(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


def describe_model(target: Any, sha256: str | None, notes: list[str] | None = None) -> ModelInfo:
    """The ``model_loaded`` record of a target."""
    spec = target.spec
    return ModelInfo(
        name=spec.label,
        path=spec.path,
        sha256=sha256,
        parameters=parameter_count(target.model),
        bytes=model_bytes(target.model),
        dtype=str(target.dtype).replace("torch.", ""),
        device=str(target.device),
        task=target.task.name,
        task_settings=dict(target.task.settings),
        variant=spec.variant,
        # the report's list has always held the task's name beside the abilities: kept so report.json stays as it was
        capabilities=sorted({target.task.name, *target.capabilities}),
        notes=list(notes or []),
    )
