"""Progress of long loops: a bar on a terminal, a plain line otherwise, and a ``progress`` event in the run's log.

One mechanism for every loop of a run. A ``Reporter`` wraps a loop (``reporter(iterable, total=, desc=)``)
or is advanced by hand (``reporter.track(desc, total)``). A loop shorter than ``FIRST_S`` says nothing;
a longer one reports ``desc: done/total (pct), elapsed`` at most every ``EVERY_S`` seconds and once at its
end: as a tqdm bar on a terminal (stderr), as a line through ``say`` otherwise (CI logs, pipes), and as a
record for the run's log (``events.jsonl``) in either case. ``say`` None (``--quiet``) shows nothing.

Under the harness each probe runs with its reporter *active* (``reporting``): the shared prediction and
batching helpers (``Target.logits``, ``word_logits``) and ``ctx.map`` report through it without being asked,
so a plugin's prediction passes and sweeps show progress for free.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")

FIRST_S = 1.0  # a loop that ends sooner says nothing
EVERY_S = 2.0  # a longer one reports at most this often, and once at its end

Record = Callable[[dict[str, Any]], None]


def tqdm(*args: Any, **kwargs: Any) -> Any:
    """A tqdm bar (imported when the first bar is drawn: a run without a terminal never pays for it)."""
    from tqdm.auto import tqdm as bar

    return bar(*args, **kwargs)


def progress_enabled() -> bool:
    """Whether progress may draw bars on stderr: a terminal that reports its width (``script`` and ``docker -t``
    report 0 columns, where a bar draws nothing: plain lines then), not ``TERM=dumb``, and BERTPROBE_NO_PROGRESS
    unset."""
    if os.environ.get("BERTPROBE_NO_PROGRESS") or os.environ.get("TERM") == "dumb":
        return False
    if not sys.stderr.isatty():
        return False
    return terminal_columns() > 0


def terminal_columns() -> int:
    """The width stderr's terminal reports (0 when it reports none)."""
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 0


def progress_shown() -> bool:
    """Whether progress may reach the terminal at all (BERTPROBE_NO_PROGRESS unset)."""
    return not os.environ.get("BERTPROBE_NO_PROGRESS")


def progress_line(desc: str, done: int, total: int | None, elapsed: float, unit: str = "") -> str:
    """``desc: 40/200 (20%), 31 s`` (``unit``: ``40/200 units``)."""
    share = f" ({done / total:.0%})" if total else ""
    unit = f" {unit}" if unit else ""
    return f"{desc or 'progress'}: {done}/{total if total else '?'}{unit}{share}, {elapsed:.0f} s"


@dataclass
class Reporter:
    """Where the progress of a run's loops goes (see the module's docstring).

    ``say``: terminal lines (None: nothing on the terminal). ``record``: the run's log, given the fields of
    a ``progress`` event (desc, done, total, elapsed_s, and ``fields``). ``bars``: a tqdm bar on stderr
    instead of lines. ``prefix``: put before each line (``[probe-id] ``).
    """

    say: Callable[[str], None] | None = None
    record: Record | None = None
    bars: bool = False
    prefix: str = ""
    fields: dict[str, Any] = field(default_factory=dict)
    first: float = FIRST_S
    every: float = EVERY_S
    clock: Callable[[], float] = field(default=lambda: time.monotonic())

    def __call__(self, iterable: Iterable[T], total: int | None = None, desc: str = "", **_: Any) -> Iterator[T]:
        """Yield ``iterable``'s items, reporting one step per item."""
        if total is None:
            try:
                total = len(iterable)  # type: ignore[arg-type]
            except TypeError:
                total = None
        return self._wrap(iterable, self.track(desc, total))

    @staticmethod
    def _wrap(iterable: Iterable[T], tracker: Tracker) -> Iterator[T]:
        with tracker:
            for item in iterable:
                yield item
                tracker.advance()
            tracker.finish()

    def track(self, desc: str, total: int | None, done: int = 0) -> Tracker:
        """A loop advanced by hand: ``tracker.advance(n)``, ``tracker.finish()`` at its end, ``close()`` always
        (or use it as a context manager)."""
        return Tracker(self, desc, total, done)

    def report(self, desc: str, done: int, total: int | None, elapsed: float, line: bool = True) -> None:
        """One report: the log's record, and a terminal line when ``line`` (no bar draws it)."""
        if self.record is not None:
            self.record({**self.fields, "desc": desc, "done": done, "total": total, "elapsed_s": round(elapsed, 1)})
        if line and self.say is not None:
            self.say(self.prefix + progress_line(desc, done, total, elapsed))


class Tracker:
    """One loop's progress (``Reporter.track``)."""

    def __init__(self, reporter: Reporter, desc: str, total: int | None, done: int = 0) -> None:
        self.reporter, self.desc, self.total, self.done = reporter, desc, total, done
        self.start = reporter.clock()
        self.last: float | None = None  # when it last reported
        self.reported = -1  # the count it last reported
        self.bar: Any = None
        if reporter.bars and reporter.say is not None:
            self.bar = tqdm(total=total, initial=done, desc=reporter.prefix + desc, leave=False, dynamic_ncols=True,
                            file=sys.stderr, delay=reporter.first)

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        now = self.reporter.clock()
        if now - self.start >= self.reporter.first and (self.last is None or now - self.last >= self.reporter.every):
            self._report(now)

    def finish(self) -> None:
        """The loop ended: its last count is reported when it reported before."""
        if self.last is not None and self.reported != self.done:
            self._report(self.reporter.clock())

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def _report(self, now: float) -> None:
        self.last, self.reported = now, self.done
        self.reporter.report(self.desc, self.done, self.total, now - self.start, line=self.bar is None)

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()


_ACTIVE: ContextVar[Reporter | None] = ContextVar("bertprobe_progress", default=None)


def active() -> Reporter | None:
    """The reporter of the probe running in this thread (None outside the harness)."""
    return _ACTIVE.get()


@contextlib.contextmanager
def reporting(reporter: Reporter) -> Iterator[Reporter]:
    """Make ``reporter`` the active one for the duration of the block (what ``run_probe`` does)."""
    token = _ACTIVE.set(reporter)
    try:
        yield reporter
    finally:
        _ACTIVE.reset(token)


def tracking(desc: str, total: int | None) -> Tracker:
    """``Reporter.track`` on the active reporter (one that shows and records nothing without one): for a loop
    whose steps are not the items of one iterable (``tracker.advance(n)``; ``finish()`` at its end)."""
    return (active() or Reporter()).track(desc, total)


def progress(iterable: Iterable[T], total: int | None = None, desc: str = "", **kwargs: Any) -> Iterable[T]:
    """Report the loop over ``iterable`` through the active reporter (the running probe's, under the harness);
    without one (a probe run by hand, a worker's shard), the loop is left as it is."""
    reporter = active()
    return iterable if reporter is None else reporter(iterable, total=total, desc=desc, **kwargs)


class RemoteProgress:
    """Progress of sweeps running in other processes (a parallel executor's workers), shown by the driver:
    one bar per sweep on a terminal, otherwise a line per sweep every ``every`` seconds and at its end; each
    shown step is also a ``progress`` record of the run's log."""

    def __init__(self, say: Any, every: float = EVERY_S, record: Record | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        self.say, self.every, self.record = say, every, record
        self.clock = clock or (lambda: time.monotonic())
        self.bars: dict[tuple[str, str, str], Any] = {}
        self.said: dict[tuple[str, str, str], float] = {}
        self.started: dict[tuple[str, str, str], float] = {}

    def update(self, model: str, probe_id: str, desc: str, done: int, total: int) -> None:
        key = (model, probe_id, desc)
        now = self.clock()
        start = self.started.setdefault(key, now)
        if self.say and progress_enabled():
            bar = self.bars.get(key)
            if bar is None:
                bar = self.bars[key] = tqdm(total=total, desc=f"{model}/{probe_id} {desc}", leave=False,
                                            dynamic_ncols=True, file=sys.stderr)
            bar.n = done
            bar.refresh()
            if done >= total:
                self.bars.pop(key).close()
        if done < total and now - self.said.get(key, -float("inf")) < self.every:
            return
        self.said[key] = now
        if self.record is not None:
            self.record({"model": model, "id": probe_id, "desc": desc, "done": done, "total": total,
                         "elapsed_s": round(now - start, 1)})
        if self.say and not progress_enabled():
            self.say(f"[{model}/{probe_id}] " + progress_line(desc, done, total, now - start, "units"))

    def close(self) -> None:
        """Close the bars of sweeps that did not finish (a failed or cancelled job)."""
        for bar in self.bars.values():
            bar.close()
        self.bars.clear()
