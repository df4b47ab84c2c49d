"""The ``ray`` executor: each model of a run is a Ray task; ``Sweep`` units are sharded over Ray actors.

Install with ``pip install -e ".[ray]"``; Ray is imported only when this executor starts.

* Model jobs. Every model's turn (``bertprobe.run.turn.run_model``) runs in a Ray task that asks for
  ``num_gpus: 1`` when the model's device is cuda and otherwise its share of the cluster's CPUs (at
  least 1; torch uses that many threads); ``resources:`` overrides. A worker loads its model and data from their paths; only small records come back
  (events, ProbeResults with their outcomes) through a Ray queue, and the driver writes them into the
  one ``events.jsonl`` as they arrive, so partial reports, Ctrl-C (which cancels the tasks), resume and
  the gates work as with ``local``. When a probe reads the matrix baseline's result
  (``Probe.uses_baseline``), the baseline model runs first.
* Retries. A job whose worker dies is started again up to ``max_retries`` times and resumes from the
  probes and work units the dead attempt finished (the same mechanism as ``--resume``). A job that
  still fails becomes an ``error`` result on each of its unfinished probes; the other models are kept.
  Bad input (``BertprobeError``) is not retried: it ends the run with exit code 2 once the other jobs
  have finished and been recorded.
* Sweeps. ``ctx.map`` over a ``Sweep`` is split into its chunks and handed to a pool of actors that
  each load the model once (one per free CPU, or per free GPU for a cuda model) and keep what the
  sweep's ``setup`` built; values come back per chunk and are recorded per unit.
* Safety. A cluster started here runs its node on 127.0.0.1, so its GCS, raylet and workers listen
  on loopback only (see ``_loopback_node``), with Ray's token authentication, usage stats and the
  dashboard off, and is shut down at the end; a cluster joined with ``address`` is only disconnected from. Nothing here runs ``ray stop`` or touches
  other Ray processes.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from bertprobe.environment import usable_cores
from bertprobe.errors import BertprobeError, SuiteError, first_line
from bertprobe.execution import run_chunks
from bertprobe.progress import RemoteProgress, progress_shown
from bertprobe.suite.schema import ExecutorSpec

if TYPE_CHECKING:
    from bertprobe.data.dataset import DataSpec
    from bertprobe.execution import Sweep
    from bertprobe.executors.worker import ModelJob, WorkerContext
    from bertprobe.model.spec import ModelSpec
    from bertprobe.run.session import Session

POLL_SECONDS = 0.05


NEEDS_RAY = ("executor 'ray' needs Ray, which is an extra: pip install -e '.[ray]' (or pip install 'ray>=2.60'); "
             "or run with --executor local")


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise SuiteError(NEEDS_RAY) from None
    return ray


def _is_cuda(spec: ModelSpec) -> bool:
    return str(spec.device).startswith("cuda")


def _job_resources(spec: ExecutorSpec, model: ModelSpec, cpus_each: int = 1) -> dict[str, float]:
    """What one model job asks Ray for: ``resources:``, else a GPU on cuda, else its share of the CPUs."""
    if spec.resources:
        return dict(spec.resources)
    return {"num_gpus": 1, "num_cpus": 1} if _is_cuda(model) else {"num_cpus": max(1, cpus_each)}


def _quiet_worker() -> None:
    """No progress bars in workers: Ray would forward every redraw to the driver's terminal (a worker's session
    sends its progress to the driver as lines and events instead: ``WorkerSession.draws_bars``)."""
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def _run_job(job: ModelJob, queue: Any) -> None:
    """Body of a model job inside a Ray worker (module-level: Ray ships it by reference)."""
    from bertprobe.executors.worker import execute_model_job

    _quiet_worker()
    executor = RayExecutor(job.context.executor, inside_worker=True)
    try:
        execute_model_job(job, queue.put, executor)
    finally:
        executor.close()


class _ShardWorker:
    """A Ray actor that loads one model and data once and runs chunks of sweep units on them."""

    def __init__(self, context: WorkerContext, model: ModelSpec, data: DataSpec | None) -> None:
        _quiet_worker()
        self.context, self.model, self.data = context, model, data
        self.loaded: tuple[Any, Any] | None = None
        self.states: dict[str, Any] = {}

    def run(self, sweep: Sweep, units: list[Any], grouped: bool) -> list[Any]:
        from bertprobe.executors.worker import shard_state
        from bertprobe.model.kernels import attention_kernels
        from bertprobe.results import jsonable

        if self.loaded is None:
            self.loaded = shard_state(self.context, self.model, self.data)
        key = f"{type(sweep).__module__}.{type(sweep).__qualname__}:{sweep!r}"
        with attention_kernels(self.loaded[0].device):  # as the probe's own process runs (run.turn)
            if key not in self.states:
                self.states[key] = sweep.setup(*self.loaded)
            sweep.bind(*self.loaded, state=self.states[key])
            (_, values), = run_chunks(sweep, [units], grouped)  # the one in-process runner, on this piece
        return jsonable(values)


class RayExecutor:
    """Each model a Ray task, sweeps sharded over Ray actors (pip install -e ".[ray]")."""

    name = "ray"

    @staticmethod
    def missing() -> str | None:
        """What ``validate`` reports when this executor cannot run here."""
        import importlib.util

        try:
            found = importlib.util.find_spec("ray") is not None
        except ValueError:  # sys.modules["ray"] is None: blocked
            found = False
        return None if found else NEEDS_RAY

    def __init__(self, spec: ExecutorSpec | None = None, inside_worker: bool = False) -> None:
        self.spec = spec or ExecutorSpec(name="ray")
        self.inside_worker = inside_worker
        self.owned = False  # started a private cluster: shut it down at the end
        self.connected = False  # joined a running cluster: disconnect at the end
        self.pools: dict[Any, list[Any]] = {}
        self.progress: dict[int, RemoteProgress] = {}  # per driver session: its workers' sweeps
        self.context: WorkerContext | None = None
        self.cancel: Any = None  # a threading.Event set by a driver running several suites: stop as on Ctrl-C

    # ---- connection -------------------------------------------------------------------------------
    def start(self) -> None:
        ray = _ray()
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        if ray.is_initialized():
            return
        common = {"include_dashboard": False, "logging_level": "ERROR", "log_to_driver": True}
        try:
            if self.spec.address:
                _check_reachable(self.spec.address)  # Ray itself retries a dead address for minutes
                ray.init(address=self.spec.address, **common)
                self.connected = True
            else:
                cpus = self.spec.workers or usable_cores()
                # token authentication is Ray's default for local clusters since 2.59 (RAY_AUTH_MODE is read
                # when ray is imported, so it cannot be changed here)
                with _loopback_node(ray):
                    ray.init(address="local", num_cpus=cpus, **common)
                self.owned = True
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = first_line(exc, type(exc).__name__)
            where = f"--ray-address {self.spec.address}" if self.spec.address else "a local Ray cluster"
            raise SuiteError(f"executor 'ray': could not connect to {where}: {first}; check the address (a cluster "
                             "started with 'ray start --head' is 'auto'; a stale /tmp/ray/ray_current_cluster names a "
                             "dead one: remove it), set RAY_AUTH_TOKEN if the cluster requires a token, or drop "
                             "--ray-address to start a private cluster") from None

    def close(self) -> None:
        ray = _ray()
        for pool in self.pools.values():
            for actor in pool:
                ray.kill(actor)
        self.pools.clear()
        if (self.owned or self.connected) and not self.inside_worker:
            ray.shutdown()
        self.owned = self.connected = False

    # ---- model jobs -------------------------------------------------------------------------------
    def _context(self, session: Session) -> WorkerContext:
        from bertprobe.executors.worker import WorkerContext

        if self.context is None:
            self.context = WorkerContext(session.suite, str(session.run_dir), list(session.plugins.extra),
                                         1, self.spec)
        return self.context

    def run_models(self, session: Session, plan: list[ModelSpec], params_by_probe: dict[str, Any]) -> None:
        from dataclasses import replace

        from bertprobe.executors.worker import ModelJob

        ray = _ray()
        from ray.util.queue import Queue

        context = self._context(session)
        queue = Queue(actor_options={"num_cpus": 0})
        remote = ray.remote(_run_job)
        jobs: dict[str, ModelJob] = {}
        # fewer models than CPUs: each job gets its share, so its unsharded work uses several threads (a
        # job waiting on its sweep's shards lends its CPUs to them: Ray frees a blocked task's CPUs)
        cpus_each = max(1, int(ray.cluster_resources().get("CPU", 1)) // max(1, len(plan)))
        cpus_each = min(cpus_each, session.threads or cpus_each)  # --threads caps every process's threads
        for position, model in enumerate(plan):
            resources = _job_resources(self.spec, model, cpus_each)
            threads = max(1, int(resources.get("num_cpus", 1)))
            jobs[model.label] = ModelJob(replace(context, threads=threads), position, model, params_by_probe)
        pending: dict[Any, str] = {}
        failures: list[BertprobeError] = []

        def submit(label: str) -> None:
            # the job as the driver's state stands: a retry resumes from what it recorded of the dead attempt
            job = jobs[label] = replace(jobs[label], state=session.state.copy())
            options = {**_job_resources(self.spec, job.model, job.context.threads), "max_retries": 0,
                       "retry_exceptions": False}
            pending[remote.options(**options).remote(job, queue)] = label

        def drain() -> None:
            while not queue.empty():
                for record in queue.get_nowait_batch(queue.qsize()):
                    self._on_record(session, record)

        first_alone = len(plan) > 1 and any(session.plugins.probes.get(p.probe).uses_baseline for p in session.suite.probes)
        waiting = [m.label for m in plan]
        try:
            if first_alone:
                submit(waiting.pop(0))
                self._wait_all(session, pending, jobs, submit, drain, failures)
                baseline = [r.to_dict() for r in session.report.probes if r.model == plan[0].label]
                for label in waiting:
                    jobs[label].baseline_results = baseline
            for label in waiting:
                submit(label)
            self._wait_all(session, pending, jobs, submit, drain, failures)
        except KeyboardInterrupt:
            for ref in pending:
                ray.cancel(ref, force=True)
            drain()
            raise
        finally:
            ray.kill(queue.actor)
            bars = self.progress.pop(id(session), None)
            if bars is not None:
                bars.close()
        if failures:
            raise failures[0]

    def progress_of(self, session: Session) -> RemoteProgress:
        """The driver's view of ``session``'s sweeps in the workers (bars on a terminal, else lines)."""
        if id(session) not in self.progress:
            self.progress[id(session)] = RemoteProgress(session.log if progress_shown() else None,
                                                        record=lambda fields: session.emit("progress", **fields))
        return self.progress[id(session)]

    def _wait_all(self, session: Session, pending: dict[Any, str], jobs: dict[str, ModelJob], submit: Any,
                  drain: Any, failures: list[BertprobeError]) -> None:
        ray = _ray()
        while pending:
            if self.cancel is not None and self.cancel.is_set():
                raise KeyboardInterrupt
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_SECONDS)
            drain()
            for ref in ready:
                label = pending.pop(ref)
                try:
                    ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - classified below
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, BertprobeError):
                        failures.append(cause)
                        continue
                    job = jobs[label]
                    what = _describe_failure(exc)
                    if job.attempt < self.spec.max_retries:
                        job.attempt += 1
                        session.say(f"model {label}: {what}; retrying ({job.attempt}/{self.spec.max_retries}), "
                                    "resuming from its finished work")
                        submit(label)
                    else:
                        self._fail_job(session, job, what)

    def _on_record(self, session: Session, record: dict[str, Any]) -> None:
        """A worker's record: a log line or progress for the driver's terminal, else an event of the run,
        emitted again here (so the driver's report and run state fold it) or, for a result, recorded."""
        from bertprobe.executors.worker import result_from_record

        kind = record.get("event")
        if kind == "_log":
            session.say(str(record.get("message", "")))
        elif kind == "_progress":
            self.progress_of(session).update(str(record["model"]), str(record["id"]), str(record["desc"]),
                                             int(record["done"]), int(record["total"]))
        elif kind == "probe_result":
            session.record(result_from_record(record))
        else:
            session.emit(str(kind), **{k: v for k, v in record.items() if k not in ("event", "time")})

    def _fail_job(self, session: Session, job: ModelJob, what: str) -> None:
        from bertprobe.results import ProbeResult
        from bertprobe.run.turn import model_probes

        tries = job.attempt + 1
        for spec, target_spec in model_probes(session.suite, job.position, job.model):
            if (target_spec.label, spec.id) in session.state.kept:
                continue
            session.record(ProbeResult(probe=spec.probe, id=spec.id, model=target_spec.label, status="error",
                                       message=f"the model job failed {tries} time(s): {what}"))

    # ---- sweeps -----------------------------------------------------------------------------------
    def _shard_workers(self, model: ModelSpec) -> int:
        ray = _ray()
        if not self.spec.shard:
            return 1
        if _is_cuda(model):  # the job holds its own GPU: shard over the others
            return int(ray.available_resources().get("GPU", 0))
        if self.spec.workers:
            return self.spec.workers
        return int(ray.cluster_resources().get("CPU", 1))

    def map_sweep(self, session: Session, sweep: Sweep, chunks: list[list[Any]],
                  where: tuple[ModelSpec, DataSpec | None], grouped: bool) -> Iterator[tuple[int, list[Any]]]:
        workers = min(self._shard_workers(where[0]), len(chunks))
        if workers <= 1:
            yield from run_chunks(sweep, chunks, grouped)
            return
        ray = _ray()
        pool = self._pool(session, where, workers)
        free = list(pool)
        pieces = _split(chunks, 4 * workers) if grouped else [(i, 0, c) for i, c in enumerate(chunks)]
        parts = {i: sum(1 for j, _, _ in pieces if j == i) for i in range(len(chunks))}
        done: dict[int, dict[int, list[Any]]] = {}
        queue = list(pieces)
        running: dict[Any, tuple[int, int, Any]] = {}
        try:
            while queue or running:
                while queue and free:
                    actor = free.pop()
                    i, k, piece = queue.pop(0)
                    running[actor.run.remote(sweep, piece, grouped)] = (i, k, actor)
                ready, _ = ray.wait(list(running), num_returns=1)
                for ref in ready:
                    i, k, actor = running.pop(ref)
                    free.append(actor)
                    done.setdefault(i, {})[k] = ray.get(ref)
                    if len(done[i]) == parts[i]:  # every piece of chunk i is back: record its units
                        finished = done.pop(i)
                        yield i, [v for key in sorted(finished) for v in finished[key]]
        except BaseException:
            for ref in running:
                ray.cancel(ref, force=True)
            raise

    def _pool(self, session: Session, where: tuple[ModelSpec, DataSpec | None], workers: int) -> list[Any]:
        ray = _ray()
        key = (where[0], repr(where[1]))
        if key not in self.pools:
            resources = {"num_gpus": 1, "num_cpus": 1} if _is_cuda(where[0]) else {"num_cpus": 1}
            actor_class = ray.remote(_ShardWorker)
            context = self.context if self.context is not None else self._context(session)
            self.pools[key] = [actor_class.options(**resources, max_restarts=self.spec.max_retries,
                                                   max_task_retries=self.spec.max_retries).remote(context, *where)
                               for _ in range(workers)]
        return self.pools[key]


CURRENT_CLUSTER = "/tmp/ray/ray_current_cluster"


@contextlib.contextmanager
def _loopback_node(ray: Any) -> Iterator[None]:
    """Start the private cluster's node on 127.0.0.1, so the GCS, raylet and workers bind loopback only.

    Ray 2.60 replaces a loopback ``_node_ip_address`` with the machine's address on Linux (and then binds
    every port on all interfaces) unless cluster mode is off, which it reads from
    ``ray._private.ray_constants.ENABLE_RAY_CLUSTER`` (env ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` at import).
    Turned off for the start only; ``tests/test_ray_safety.py`` checks the ports with the node table.
    """
    constants = getattr(getattr(ray, "_private", None), "ray_constants", None)
    before = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    if constants is not None and before is not None:
        constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        if constants is not None and before is not None:
            constants.ENABLE_RAY_CLUSTER = before


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast, in one line, when nothing listens where ``address`` points (``auto``: ``RAY_ADDRESS``, else
    the file ``ray start`` leaves in /tmp/ray, which outlives a crashed cluster)."""
    import socket

    where, origin = address, ""
    if address == "auto":
        if os.environ.get("RAY_ADDRESS"):
            where, origin = os.environ["RAY_ADDRESS"], "RAY_ADDRESS"
        else:
            try:
                where = Path(CURRENT_CLUSTER).read_text(encoding="utf-8").strip()
            except OSError:
                raise SuiteError(f"--ray-address auto: no running Ray cluster found on this machine ({CURRENT_CLUSTER} "
                                 "is missing); start one with 'ray start --head', give its address, or drop "
                                 "--ray-address to start a private cluster") from None
            origin = CURRENT_CLUSTER
    host, _, port = where.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise SuiteError(f"--ray-address {address}: expected auto, HOST:PORT or ray://HOST:PORT, got {where!r}")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        stale = (f" ({origin} names it: after a crash that file is stale; remove it or give the address)"
                 if origin == CURRENT_CLUSTER else f" (from {origin})" if origin else "")
        raise SuiteError(f"--ray-address {address}: nothing answers at {host}:{port}{stale}: "
                         f"{exc.strerror or exc}; start the cluster or fix the address") from None


def _split(chunks: list[list[Any]], at_least: int) -> list[tuple[int, int, list[Any]]]:
    """``(chunk, piece, units)``: the chunks cut into pieces so that there are at least ``at_least`` of them
    (as far as units allow), so the workers stay busy; a chunk's values are its pieces' in order."""
    total = sum(len(c) for c in chunks)
    size = max(1, -(-total // max(1, at_least)))
    return [(i, k, chunk[start : start + size]) for i, chunk in enumerate(chunks)
            for k, start in enumerate(range(0, len(chunk), size))]


def _describe_failure(exc: BaseException) -> str:
    """One line for a failed Ray task: the worker died, or what it raised."""
    ray = _ray()
    if isinstance(exc, ray.exceptions.WorkerCrashedError):
        return "its worker died"
    if isinstance(exc, ray.exceptions.TaskCancelledError):
        return "it was cancelled"
    cause = getattr(exc, "cause", None)
    if cause is not None:
        first = first_line(cause)
        return f"{type(cause).__name__}: {first}" if first else type(cause).__name__
    first = first_line(exc)
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
