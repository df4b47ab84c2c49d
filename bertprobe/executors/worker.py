"""The worker side of a distributed run, independent of the engine that ships it.

A ``ModelJob`` is a small, picklable description of one model's turn: the parsed suite, the model's
spec, which probes and work units a previous attempt already finished, and the matrix baseline's
results. A worker rebuilds the plugins, loads the model and data itself (from paths: no tensor or
model travels) and runs ``bertprobe.run.turn.run_model`` in a ``WorkerSession`` whose events go to a sink, to be
written by the driver into the run's one ``events.jsonl``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from bertprobe.model.spec import ModelSpec
from bertprobe.plugins import build_plugins
from bertprobe.results import ProbeResult, RunReport
from bertprobe.run.resume import PreviousRun
from bertprobe.run.session import Session, Sink
from bertprobe.run.turn import run_model
from bertprobe.suite.schema import ExecutorSpec, Suite


@dataclass
class WorkerContext:
    """What any worker of a run needs to rebuild the driver's setting."""

    suite: Suite
    run_dir: str
    extra_plugins: list[Any] = field(default_factory=list)  # plugin objects the driver registered by hand
    threads: int = 1
    executor: ExecutorSpec = field(default_factory=ExecutorSpec)
    cwd: str = field(default_factory=os.getcwd)  # the driver's: relative paths (flags, env values) resolve there


@dataclass
class ModelJob:
    """One model's turn of a run, as a worker receives it."""

    context: WorkerContext
    position: int
    model: ModelSpec
    params_by_probe: dict[str, Any]
    baseline: str = ""
    baseline_results: list[dict[str, Any]] = field(default_factory=list)
    kept: set[tuple[str, str]] = field(default_factory=set)
    units: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    hashes: dict[str, str | None] = field(default_factory=dict)
    attempt: int = 0


@dataclass
class WorkerSession(Session):
    """A session whose events (and log lines) go to the driver through ``sink``; results carry their
    outcomes along, and the driver calls the plugins and writes the reports."""

    progress_every: float = 2.0  # seconds between progress records sent to the driver (and at the end)
    _last_progress: dict[tuple[str, str, str], float] = field(default_factory=dict)

    def unit_progress(self, model: str, probe_id: str, desc: str, done: int, total: int) -> None:
        """A ``_progress`` record to the driver now and then: workers draw no bars, the driver does."""
        now = time.monotonic()
        key = (model, probe_id, desc)
        if done < total and now - self._last_progress.get(key, -float("inf")) < self.progress_every:
            return
        self._last_progress[key] = now
        if self.sink is not None:
            self.sink({"event": "_progress", "model": model, "id": probe_id, "desc": desc, "done": done, "total": total})

    def record(self, result: ProbeResult) -> None:
        self.finished(result)
        self.emit("probe_result", result=result.to_dict(), outcomes=[o.to_dict() for o in result.outcomes])


def worker_session(context: WorkerContext, sink: Sink | None) -> WorkerSession:
    """A session for a worker process: the driver's plugins, suite and run folder; no events file."""
    torch.set_num_threads(max(1, context.threads))
    if os.path.isdir(context.cwd):  # a shared filesystem mounted at the same place: relative paths work
        os.chdir(context.cwd)
    plugins = build_plugins(extra=list(context.extra_plugins))
    report = RunReport(suite=context.suite.name, run_dir=context.run_dir)
    log = (lambda message: sink({"event": "_log", "message": message})) if sink is not None else None
    return WorkerSession(context.suite, plugins, Path(context.run_dir), report, sink=sink, log=log)


def execute_model_job(job: ModelJob, sink: Sink, executor: Any = None) -> None:
    """Run one model's turn in this process, sending every event to ``sink``.

    ``executor`` (the engine's own, connected from inside the worker) shards the probes' sweeps.
    """
    session = worker_session(job.context, sink)
    for result in job.baseline_results:
        session.report.apply({"event": "probe_result", "result": result})
    session.baseline = job.baseline
    if job.kept or job.units or job.hashes:
        session.previous = PreviousRun(session.report, set(job.kept), job.units, job.hashes)
    session.executor = executor
    try:
        run_model(session, job.position, job.model, job.params_by_probe)
    finally:
        session.release(set())


def shard_state(context: WorkerContext, model: ModelSpec, data: Any) -> tuple[Any, Any]:
    """Load (once per sweep worker) the target and data a sweep's units run on."""
    session = worker_session(context, None)
    target = session.target_for(model)
    dataset = session.data_for(data, target) if data is not None else None
    return target, dataset


def result_from_record(record: dict[str, Any]) -> ProbeResult:
    """The ProbeResult a worker's ``probe_result`` record carries, outcomes included."""
    from bertprobe.results.outcomes import Outcomes

    result = ProbeResult.from_dict(record["result"])
    result.outcomes = [Outcomes.from_dict(o) for o in record.get("outcomes") or []]
    return result
