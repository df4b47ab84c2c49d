"""Paths and helpers shared by the benchmarks (fixtures in ../shared, overridable by env)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("BERTPROBE_SHARED", REPO.parent / "shared"))
SST2_MODEL = Path(os.environ.get("BERTPROBE_SST2_MODEL", SHARED / "models" / "minilm-l6-sst2"))
SST2_DEV = Path(os.environ.get("BERTPROBE_SST2_DATA", SHARED / "data" / "sst2" / "dev.tsv"))


def require(*paths: Path) -> None:
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise SystemExit(f"benchmark needs {', '.join(missing)} (set BERTPROBE_SHARED)")


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    """Best wall time of ``repeat`` calls, and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def sync(device: Any) -> None:
    """Wait until a cuda device has finished its queued work (a timer reads then); nothing on a CPU."""
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


SDPA_CHOICES = ("bertprobe", "pytorch")


@contextlib.contextmanager
def attention_kernels(choice: str, device: Any) -> Iterator[None]:
    """Attention kernels for everything timed inside, bare passes included: ``bertprobe``, the harness's own
    (on CUDA every backend but cuDNN's: ``bertprobe.model.kernels``); ``pytorch``, PyTorch's own order, cuDNN
    included (``BERTPROBE_CUDNN_ATTENTION=1`` for the harness too), as before that switch."""
    from unittest import mock

    from bertprobe.model.kernels import CUDNN_ATTENTION_ENV
    from bertprobe.model.kernels import attention_kernels as harness_kernels

    with mock.patch.dict(os.environ, {CUDNN_ATTENTION_ENV: "1"} if choice == "pytorch" else {}):
        with harness_kernels(device):
            yield


def sst2_target(device: str = "cpu", max_length: int = 128, dtype: str = "auto") -> Any:
    from bertprobe.model import ModelSpec, load_target

    return load_target(ModelSpec(path=str(SST2_MODEL), device=device, max_length=max_length, dtype=dtype))


def sst2_dev(target: Any) -> Any:
    from bertprobe.data import DataSpec, align_labels, load_table

    return align_labels(load_table(DataSpec(path=str(SST2_DEV), text="sentence")), target.label_names)


# Base-size configurations (transformers' defaults are these checkpoints' own): name -> (model_type, layers x hidden)
BASE_SIZES = {"bert-base": ("bert", "12 x 768, bert-base-uncased"),
              "distilbert-base": ("distilbert", "6 x 768, distilbert-base-uncased")}


def base_size_model(name: str, seed: int = 0) -> Path:
    """A seeded random-weight two-class classifier with the configuration of ``bert-base-uncased`` (12 layers,
    hidden 768, about 110M parameters) or ``distilbert-base-uncased`` (6 x 768), and the SST-2 fixture's
    tokenizer (the same uncased 30,522-token vocabulary); saved once under benchmarks/.cache, no download.
    Random weights are right for timing fixed work (not for what adaptive algorithms save)."""
    import shutil

    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification

    model_type, _ = BASE_SIZES[name]
    out = REPO / "benchmarks" / ".cache" / f"{name}-random-{seed}"
    if (out / "model.safetensors").is_file():
        return out
    require(SST2_MODEL)
    config = AutoConfig.for_model(model_type, num_labels=2, id2label={0: "negative", 1: "positive"},
                                  label2id={"negative": 0, "positive": 1})
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(config)
    out.mkdir(parents=True, exist_ok=True)
    model.half().save_pretrained(out)  # stored in fp16 like the fixtures; computed in fp32 on a CPU
    for name_ in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(SST2_MODEL / name_, out / name_)
    return out
