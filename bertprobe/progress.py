"""Progress bars that show on a terminal and stay silent otherwise (CI logs, pipes)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable
from typing import Any, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")


def progress_enabled() -> bool:
    if os.environ.get("BERTPROBE_NO_PROGRESS"):
        return False
    return sys.stderr.isatty()


LINE_EVERY_S = 20.0  # without a terminal (CI logs, pipes): one progress line at most this often


def progress(iterable: Iterable[T], total: int | None = None, desc: str = "", **kwargs: Any) -> Iterable[T]:
    """Wrap ``iterable`` in a tqdm bar on stderr when it is a terminal; otherwise print a plain line
    ('desc: 40/200 (20%), 31 s') every ``LINE_EVERY_S`` seconds, so a long loop in a CI log is not silent."""
    if os.environ.get("BERTPROBE_NO_PROGRESS"):
        return iterable
    if not sys.stderr.isatty():
        return _lines(iterable, total if total is not None else _length(iterable), desc)
    return tqdm(iterable, total=total, desc=desc, leave=False, dynamic_ncols=True, file=sys.stderr, **kwargs)


def _length(iterable: Iterable[Any]) -> int | None:
    try:
        return len(iterable)  # type: ignore[arg-type]
    except TypeError:
        return None


def _lines(iterable: Iterable[T], total: int | None, desc: str) -> Iterable[T]:
    start = last = time.monotonic()
    for done, item in enumerate(iterable, start=1):
        yield item
        now = time.monotonic()
        if now - last >= LINE_EVERY_S:
            last = now
            share = f" ({done / total:.0%})" if total else ""
            print(f"{desc or 'progress'}: {done}/{total if total else '?'}{share}, {now - start:.0f} s",
                  file=sys.stderr, flush=True)


class RemoteProgress:
    """Progress of sweeps running in other processes (a parallel executor's workers), shown by the driver:
    one bar per sweep on a terminal; otherwise a line per sweep every ``every`` seconds and at its end."""

    def __init__(self, say: Any, every: float = 15.0) -> None:
        self.say, self.every = say, every
        self.bars: dict[tuple[str, str, str], Any] = {}
        self.said: dict[tuple[str, str, str], float] = {}

    def update(self, model: str, probe_id: str, desc: str, done: int, total: int) -> None:
        key = (model, probe_id, desc)
        if progress_enabled():
            bar = self.bars.get(key)
            if bar is None:
                bar = self.bars[key] = tqdm(total=total, desc=f"{model}/{probe_id} {desc}", leave=False,
                                            dynamic_ncols=True, file=sys.stderr)
            bar.n = done
            bar.refresh()
            if done >= total:
                self.bars.pop(key).close()
            return
        now = time.monotonic()
        if done < total and now - self.said.get(key, -float("inf")) < self.every:
            return
        self.said[key] = now
        if self.say:
            self.say(f"[{model}/{probe_id}] {desc}: {done}/{total} units")

    def close(self) -> None:
        """Close the bars of sweeps that did not finish (a failed or cancelled job)."""
        for bar in self.bars.values():
            bar.close()
        self.bars.clear()
