"""One run: its event log (every event goes through ``emit``), the state folded from it, what it loaded, work units."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol, TextIO

from bertprobe.data.dataset import Dataset, DataSpec
from bertprobe.errors import BertprobeError, ProbeError, SuiteError
from bertprobe.execution import Sweep, run_chunks
from bertprobe.model.spec import ModelSpec, resolve_model_param
from bertprobe.model.target import Target
from bertprobe.plugins import Plugins
from bertprobe.progress import Reporter, progress_enabled, progress_shown
from bertprobe.results import ProbeResult, RunReport, jsonable
from bertprobe.results.outcomes import append_outcomes
from bertprobe.run.caches import RunCaches
from bertprobe.run.state import RunState
from bertprobe.suite.schema import Suite


class SweepMapper(Protocol):
    """What the session asks of its executor (``bertprobe.executors.base.Executor``, one floor up, offers it):
    the chunks of a sweep's units run, yielding ``(chunk index, values)`` in any order."""

    def map_sweep(self, session: Session, sweep: Sweep, chunks: list[list[Any]],
                  where: tuple[ModelSpec, DataSpec | None], grouped: bool) -> Iterator[tuple[int, list[Any]]]: ...


Sink = Callable[[dict[str, Any]], None]


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_run_dir(base: Path, suite: str) -> Path:
    """Create ``base/<suite>-<UTC timestamp>``; never reuse an existing folder."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base.mkdir(parents=True, exist_ok=True)
    for n in range(1000):
        path = base / (f"{suite}-{stamp}" if n == 0 else f"{suite}-{stamp}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise BertprobeError(f"cannot create a fresh run folder under {base}")


@dataclass
class Session:
    """One run: its event log, its state folded from the log, and what it loaded; plugins receive it in the
    session hooks.

    Every event goes through ``emit``, which folds it into ``report`` and ``state`` (their one writer) and
    hands it to ``sink`` (on the driver, a line of events.jsonl: see ``events_file``; in a worker, a message
    to the driver), so the report and the state in memory are those rebuilt from the events. Loaded models
    and data live in ``caches``. Reports are written by plugins (``bertprobe.run.reports``) from the hooks
    that ``record`` and the harness call.
    """

    suite: Suite
    plugins: Plugins
    run_dir: Path
    report: RunReport
    sink: Sink | None = None
    log: Callable[[str], None] | None = None
    executor: SweepMapper | None = None  # runs models and sweeps (bertprobe.executors); None: in this process
    threads: int = 0  # torch threads of this run (a parallel executor's jobs use at most as many)
    state: RunState = field(default_factory=RunState)
    caches: RunCaches = field(init=False)

    def __post_init__(self) -> None:
        self.caches = RunCaches(self.suite, self.plugins, self.say, self.run_dir)

    def draws_bars(self) -> bool:
        """Progress as bars on stderr (a terminal) rather than lines through ``log``."""
        return progress_enabled()

    def progress_for(self, model: str, probe_id: str) -> Reporter:
        """The progress reporter of one probe on one model: on the terminal (bars, else lines prefixed as the
        probe's log lines are; nothing when quiet) and a ``progress`` event of the run's log."""
        prefix = f"[{model}/{probe_id}] " if len(self.suite.models) > 1 else f"[{probe_id}] "
        return Reporter(say=self.log if progress_shown() else None, record=lambda fields: self.emit("progress", **fields),
                        bars=self.draws_bars(), prefix=prefix, fields={"model": model, "id": probe_id})

    @property
    def baseline(self) -> str:
        """The model every other model of a matrix is judged against ("" in a one-model run)."""
        plan = plan_models(self.suite)
        return plan[0].label if len(plan) > 1 else ""

    def record(self, result: ProbeResult) -> None:
        """Outcomes to the sidecar first, then the result event, then the plugins (a fresh partial report)."""
        if result.outcomes:
            append_outcomes(self.run_dir, result.model, result.id or result.probe, result.outcomes)
        self.emit("probe_result", result=result.to_dict())
        self.plugins.hook.bertprobe_probe_result(session=self, result=result)

    def map_units(self, model: str, probe_id: str, fn: Any, units: Any, desc: str = "", group: int = 0,
                  where: tuple[ModelSpec, DataSpec | None] | None = None) -> list[Any]:
        """``ProbeContext.map`` under the harness: each finished unit is a ``unit_result`` event; units the
        events already hold (a resumed run, a retried job) are not run again. With ``group``, ``fn`` maps a
        list of units.

        A ``Sweep`` (``where`` naming the probe's model and data) may be sharded by the executor over
        workers that each load the model once; anything else runs here, chunk after chunk.
        """
        done = dict(self.state.units_of(model, probe_id))
        units = list(units)
        keys = [k for k, _ in units]
        if len(set(keys)) != len(keys):
            raise ProbeError(f"{probe_id}: work unit keys must be unique")
        values: dict[str, Any] = {k: done[k] for k in keys if k in done}
        todo = [(k, u) for k, u in units if k not in done]
        size = max(1, group)
        chunks = [todo[i : i + size] for i in range(0, len(todo), size)]
        plain = [[u for _, u in c] for c in chunks]
        if isinstance(fn, Sweep) and where is not None and self.executor is not None:
            finished = self.executor.map_sweep(self, fn, plain, where, bool(group))
        else:
            finished = run_chunks(fn, plain, bool(group))
        forward = getattr(self.sink, "progress", None)  # a worker's: the driver shows and logs its sweeps
        local = self.progress_for(model, probe_id) if forward is None else Reporter()
        with local.track(desc or probe_id, len(keys), len(values)) as tracker:
            for i, results in finished:
                chunk = chunks[i]
                if len(results) != len(chunk):
                    raise ProbeError(f"{probe_id}: a grouped work function returned {len(results)} values for {len(chunk)} units")
                for (key, _), value in zip(chunk, results):
                    value = jsonable(value)
                    self.emit("unit_result", model=model, id=probe_id, key=key, value=value)
                    values[key] = value
                tracker.advance(len(chunk))
                if forward is not None:
                    forward(model, probe_id, desc or probe_id, len(values), len(keys))
            tracker.finish()
        return [values[k] for k in keys]

    def emit(self, event: str, **payload: Any) -> None:
        """Fold the event into the report and the run state, then hand it to the sink."""
        record = jsonable({"event": event, "time": utc_now(), **payload})
        self.report.apply(record)
        self.state.apply(record)
        if self.sink is not None:
            self.sink(record)

    def say(self, message: str) -> None:
        if self.log:
            self.log(message)

    # ---- what the probes load -------------------------------------------------------------------
    def resolve_model(self, name_or_path: str, like: ModelSpec | None = None) -> ModelSpec:
        """A model param: a name of the matrix first, then a path or hub id loaded as ``like`` is."""
        return resolve_model_param(name_or_path, like, self.suite.models)

    def target_for(self, spec: ModelSpec) -> Target:
        """The model ``spec`` names (loaded once, its variant derived); the first time, checked against the
        weights a resumed run used and recorded as a ``model_loaded`` event."""
        if self.caches.holds(spec):
            return self.caches.target(spec)[0]
        target, notes = self.caches.target(spec)
        served = getattr(target, "served_identity", None)  # a served model: what it serves stands for its weights
        digest = served or self.caches.weights_hash(spec.path)
        before = self.state.hashes.get(spec.label)
        if before and digest and before != digest:
            recorded = next((m for m in self.report.models if m.name == spec.label), None)
            # the run recorded under an older key form (its notes say which form it was)
            adopted = target.adopt_identity(before, list(getattr(recorded, "notes", []))) if served else None
            if adopted is None:
                if served:
                    raise SuiteError(f"cannot resume: the model served as '{spec.label}' changed since the run: "
                                     f"{self._served_change(spec.label, target)}; start a new run, or serve what the "
                                     "run audited")
                raise SuiteError(f"cannot resume: the weights of model '{spec.label}' changed since the run "
                                 f"(sha256 {before[:12]} -> {digest[:12]}); start a new run")
            digest, notes = before, [*notes, adopted]
            self.say(f"{spec.label}: {adopted}")
        if hasattr(target, "on_note"):  # notes learnt later (a served model's determinism) reach the report
            label = spec.label

            def on_note(text: str) -> None:
                self.emit("model_note", model=label, note=text)
                if text.startswith("nondeterministic"):
                    self.say(f"warning: {label}: {text}")

            target.on_note = on_note
        from bertprobe.model.modelinfo import describe_model

        info = describe_model(target, digest, notes)
        self.emit("model_loaded", model=info.name, info=asdict(info))
        return target

    def _served_change(self, label: str, target: Target) -> str:
        """What differs between the served model the resumed run recorded (its ``served at`` note) and ``target``."""
        recorded = next((m for m in self.report.models if m.name == label), None)
        was = next((n for n in getattr(recorded, "notes", []) if n.startswith("served at ")), None)
        now = next((n for n in target.notes if n.startswith("served at ")), None)
        if was and now and was != now:
            return f"it was {was}; it is now {now}"
        if was and now:  # the same URL, model, version and protocol: what routes the requests differs
            return ("its routing headers (model.headers that are no credential, as expanded: Host, x-model-version...) "
                    "differ from the run's")
        return "its URL, served model, version, protocol or routing headers differ from the run's"

    def data_for(self, spec: DataSpec, target: Target | None = None) -> Dataset:
        """The data ``spec`` names, its labels aligned to ``target``'s classes or choices (read once)."""
        return self.caches.aligned(spec, target)


def plan_models(suite: Suite) -> list[ModelSpec]:
    """Models in run order: the gate's baseline first, then the others as the suite lists them."""
    models = list(suite.models)
    if suite.gate is not None:
        models.sort(key=lambda m: m.label != suite.gate.baseline)  # type: ignore[union-attr]
    return models


def events_file(handle: TextIO) -> Sink:
    """A sink writing each event as one JSON line to ``handle`` (flushed: a killed run loses nothing)."""

    def write(record: dict[str, Any]) -> None:
        handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        handle.flush()

    return write
