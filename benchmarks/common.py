"""Paths and helpers shared by the benchmarks (fixtures in ../shared, overridable by env)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
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


def sst2_target(device: str = "cpu", max_length: int = 128, dtype: str = "auto") -> Any:
    from bertprobe.model import ModelSpec, load_target

    return load_target(ModelSpec(path=str(SST2_MODEL), device=device, max_length=max_length, dtype=dtype))


def sst2_dev(target: Any) -> Any:
    from bertprobe.data import DataSpec, align_labels, load_table

    return align_labels(load_table(DataSpec(path=str(SST2_DEV), text="sentence")), target.label_names)
