"""Running one or several suites: in order, or side by side on a parallel executor; SIGTERM taken as
Ctrl-C; every run's outcome kept (its session, the bad input that stopped it, or how it was stopped).

The CLI parses the command line, calls ``run_suites`` (or ``resume_request`` first, for ``--resume
RUN_DIR`` alone) and prints what comes back; nothing here prints.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bertprobe.errors import BertprobeError
from bertprobe.harness import make_executor, run_suite
from bertprobe.plugins import Plugins
from bertprobe.results.exitcodes import Terminated
from bertprobe.run.control import RunControl
from bertprobe.run.resume import recorded_run, replay_options, resume_environment
from bertprobe.run.session import Session
from bertprobe.suite.overrides import SuiteOverrides, apply_overrides
from bertprobe.suite.schema import Suite


@dataclass
class SuiteRun:
    """How one suite's run ended: finished (``session``), stopped by bad input or a bug (``error``), or
    stopped by Ctrl-C or SIGTERM (``stopped``, with the run folder that keeps its partial report)."""

    suite: Suite
    session: Session | None = None
    error: BertprobeError | None = None
    stopped: KeyboardInterrupt | None = None
    terminated: bool = False  # stopped by SIGTERM, not by Ctrl-C

    @property
    def run_dir(self) -> Path | None:
        if self.session is not None:
            return self.session.run_dir
        where = getattr(self.stopped, "run_dir", None)
        return Path(where) if where else None


@dataclass
class ResumeRequest:
    """What ``--resume RUN_DIR`` alone runs again: the suite file, its ``${VAR}`` environment as the run
    had it, and the command line's overrides and control with the run's own options put back."""

    suite_file: str
    environment: dict[str, str]
    sets: tuple[str, ...]
    overrides: SuiteOverrides
    control: RunControl


def resume_request(run_dir: str, overrides: SuiteOverrides, control: RunControl) -> ResumeRequest:
    """Rebuild a run from its folder alone (``SuiteError`` when the folder cannot say what it ran)."""
    suite_file, recorded, variables = recorded_run(Path(run_dir))
    sets = tuple(recorded.get("sets", ())) or overrides.sets
    overrides, control = replay_options(overrides, control, recorded)
    return ResumeRequest(suite_file, resume_environment(variables, dict(os.environ)), sets,
                         replace(overrides, sets=sets), control)


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises ``Terminated`` (a KeyboardInterrupt) in the main thread while the runs last."""

    def on_sigterm(_signum: int, _frame: Any) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _one(suite: Suite, plugins: Plugins, overrides: SuiteOverrides, control: RunControl) -> SuiteRun:
    try:
        return SuiteRun(suite, session=run_suite(suite, plugins, overrides, control))
    except KeyboardInterrupt as exc:
        return SuiteRun(suite, stopped=exc, terminated=isinstance(exc, Terminated))
    except BertprobeError as exc:
        return SuiteRun(suite, error=exc)


def run_suites(suites: list[Suite], plugins: Plugins, overrides: SuiteOverrides, control: RunControl,
               finished: Callable[[SuiteRun], None] | None = None) -> list[SuiteRun]:
    """Run every suite and return how each ended, calling ``finished`` as each one ends.

    On ``local`` the suites run one after another and a stopped one stops the rest. On a parallel executor
    (``ray``) the executor starts once, every suite's driver runs in a thread of its own and shares it, and
    Ctrl-C or SIGTERM cancels them all, each run keeping its partial report.
    """
    first = apply_overrides(suites[0], replace(overrides, only=())) if len(suites) > 1 else suites[0]
    parallel = len(suites) > 1 and (first.executor.name if first.executor else "local") != "local"
    runs: list[SuiteRun] = []
    with _sigterm_as_interrupt():
        if not parallel:
            for suite in suites:
                runs.append(_one(suite, plugins, overrides, control))
                if finished is not None:
                    finished(runs[-1])
                if runs[-1].stopped is not None:
                    break
            return runs
        runs = _side_by_side(suites, plugins, overrides, control, first)
    for run in runs:
        if finished is not None:
            finished(run)
    return runs


def _side_by_side(suites: list[Suite], plugins: Plugins, overrides: SuiteOverrides, control: RunControl,
                  first: Suite) -> list[SuiteRun]:
    shared = make_executor(first, plugins)
    shared.start()  # one cluster for every suite; each run finds it started and leaves it running
    cancel = threading.Event()
    stopped_by: list[KeyboardInterrupt] = []
    try:
        with ThreadPoolExecutor(max_workers=len(suites)) as pool:
            futures = [pool.submit(_one, suite, plugins, overrides, replace(control, cancel=cancel)) for suite in suites]
            try:
                for future in futures:  # short waits, so Ctrl-C and SIGTERM reach this thread
                    while not future.done():
                        try:
                            future.result(timeout=0.2)
                        except TimeoutError:
                            pass
            except KeyboardInterrupt as exc:
                stopped_by.append(exc)
                cancel.set()
            runs = [f.result() for f in futures]
    finally:
        shared.close()
    if stopped_by:  # the runs the event cancelled were stopped by what stopped this thread
        runs = [replace(r, terminated=isinstance(stopped_by[0], Terminated)) if r.stopped is not None else r
                for r in runs]
    return runs
