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
from typing import Any, Callable

import torch

from bertprobe.model.spec import ModelSpec
from bertprobe.plugins import build_plugins
from bertprobe.results import ProbeResult, RunReport
from bertprobe.run.session import Session
from bertprobe.run.state import RunState
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
    baseline_results: list[dict[str, Any]] = field(default_factory=list)
    state: RunState = field(default_factory=RunState)  # the driver's when the job was (re)submitted: what to skip
    attempt: int = 0


class DriverSink:
    """Where a worker's events go: each to the driver through ``send``, and sweep progress as a
    ``_progress`` record now and then (workers draw no bars, the driver does)."""

    def __init__(self, send: Callable[[dict[str, Any]], None], every: float = 2.0) -> None:
        self.send, self.every = send, every
        self._last: dict[tuple[str, str, str], float] = {}

    def __call__(self, record: dict[str, Any]) -> None:
        self.send(record)

    def progress(self, model: str, probe_id: str, desc: str, done: int, total: int) -> None:
        now = time.monotonic()
        key = (model, probe_id, desc)
        if done < total and now - self._last.get(key, -float("inf")) < self.every:
            return
        self._last[key] = now
        self.send({"event": "_progress", "model": model, "id": probe_id, "desc": desc, "done": done, "total": total})


class WorkerSession(Session):
    """A session whose events go to the driver: results carry their outcomes along, and the driver writes
    the sidecar, calls the plugins and writes the reports."""

    def record(self, result: ProbeResult) -> None:
        self.emit("probe_result", result=result.to_dict(), outcomes=[o.to_dict() for o in result.outcomes])

    def draws_bars(self) -> bool:
        return False  # the driver's terminal shows a worker's progress: as lines, through the log


def worker_session(context: WorkerContext, send: Callable[[dict[str, Any]], None] | None,
                   state: RunState | None = None) -> WorkerSession:
    """A session for a worker process: the driver's plugins, suite and run folder; no events file."""
    torch.set_num_threads(max(1, context.threads))
    if os.path.isdir(context.cwd):  # a shared filesystem mounted at the same place: relative paths work
        os.chdir(context.cwd)
    plugins = build_plugins(extra=list(context.extra_plugins))
    report = RunReport(suite=context.suite.name, run_dir=context.run_dir)
    log = (lambda message: send({"event": "_log", "message": message})) if send is not None else None
    return WorkerSession(context.suite, plugins, Path(context.run_dir), report, sink=DriverSink(send) if send else None,
                         log=log, state=state or RunState())


def execute_model_job(job: ModelJob, send: Callable[[dict[str, Any]], None], executor: Any = None) -> None:
    """Run one model's turn in this process, sending every event to ``send``; the probes and work units
    the job's state holds as finished are not run again.

    ``executor`` (the engine's own, connected from inside the worker) shards the probes' sweeps.
    """
    session = worker_session(job.context, send, job.state.copy())
    for result in job.baseline_results:
        session.report.apply({"event": "probe_result", "result": result})
    session.executor = executor
    try:
        run_model(session, job.position, job.model, job.params_by_probe)
    finally:
        session.caches.release(set())


def shard_state(context: WorkerContext, model: ModelSpec, data: Any) -> tuple[Any, Any]:
    """Load (once per sweep worker) the target and data a sweep's units run on."""
    session = worker_session(context, None)
    target = session.target_for(model)
    dataset = session.data_for(data, target) if data is not None else None
    return target, dataset


def result_from_record(record: dict[str, Any]) -> ProbeResult:
    """The ProbeResult a worker's ``probe_result`` record carries, outcomes included."""
    from bertprobe.results import Outcomes

    result = ProbeResult.from_dict(record["result"])
    result.outcomes = [Outcomes.from_dict(o) for o in record.get("outcomes") or []]
    return result
