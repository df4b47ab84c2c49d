"""How a run is carried out, as opposed to what it runs (``bertprobe.suite.overrides.SuiteOverrides``):
where its folder goes, how many threads it uses, which interrupted run it continues, where its log lines
go, and the event that cancels it when several suites run side by side."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class RunControl:
    """Run control of one run (``bertprobe run``'s --out, --threads, --resume and --quiet)."""

    out: str | None = None  # base folder of the run folder (default: the suite's report.dir)
    threads: int | None = None  # torch threads (default: the suite's, else the usable cores)
    resume: str | None = None  # an interrupted run folder to continue
    log: Callable[[str], None] | None = None  # progress lines (None: quiet)
    cancel: threading.Event | None = None  # set to stop the run's executor as on Ctrl-C (several suites at once)

    def recorded(self) -> dict[str, object]:
        """What ``--resume RUN_DIR`` alone needs again (kept in run_start with the overrides)."""
        return {k: v for k, v in (("out", self.out), ("threads", self.threads)) if v is not None}
