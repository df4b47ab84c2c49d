"""Progress bars that show on a terminal and stay silent otherwise (CI logs, pipes)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")


def progress_enabled() -> bool:
    if os.environ.get("BERTPROBE_NO_PROGRESS"):
        return False
    return sys.stderr.isatty()


def progress(iterable: Iterable[T], total: int | None = None, desc: str = "", **kwargs: Any) -> Iterable[T]:
    """Wrap ``iterable`` in a tqdm bar on stderr when it is a terminal."""
    if not progress_enabled():
        return iterable
    return tqdm(iterable, total=total, desc=desc, leave=False, dynamic_ncols=True, file=sys.stderr, **kwargs)
