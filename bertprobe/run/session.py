"""One run's state: its event log (every event goes through ``emit``), loaded models and data, work units."""

from __future__ import annotations

import datetime as dt
import gc
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, TextIO

import torch

from bertprobe.data.dataset import Dataset, DataSpec
from bertprobe.data.prepare import align_to_model, fingerprint, read_data
from bertprobe.errors import BertprobeError, ProbeError, SuiteError, TargetError
from bertprobe.model.spec import ModelSpec
from bertprobe.model.target import Target
from bertprobe.plugins import Plugins
from bertprobe.probe import Predictions, Sweep, predict_directly, run_chunks
from bertprobe.progress import progress
from bertprobe.results import ProbeResult, RunReport, jsonable
from bertprobe.results.outcomes import Outcomes, append_outcomes
from bertprobe.suite.schema import Suite

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
    """State of one run; plugins receive it in the session hooks.

    Every event goes through ``emit``, which folds it into ``report`` and hands it to ``sink`` (on the
    driver, a line of events.jsonl: see ``events_file``; in a worker, a message to the driver), so the
    report in memory and one rebuilt from the events are the same. Reports are written by plugins
    (``bertprobe.run.reports``) from the hooks that ``record`` and the harness call.
    """

    suite: Suite
    plugins: Plugins
    run_dir: Path
    report: RunReport
    sink: Sink | None = None
    log: Any = None
    targets: dict[ModelSpec, Target] = field(default_factory=dict)
    datasets: dict[tuple[str, ModelSpec | None], Dataset] = field(default_factory=dict)
    raw_datasets: dict[str, Dataset] = field(default_factory=dict)
    encode_cache: dict[Any, Any] = field(default_factory=dict)
    predictions_cache: dict[tuple[ModelSpec, str], Predictions] = field(default_factory=dict)
    hashes: dict[str, str | None] = field(default_factory=dict)
    outcomes: dict[tuple[str, str], dict[str, Outcomes]] = field(default_factory=dict)
    baseline: str = ""
    previous: Any = None  # PreviousRun when resuming
    units_done: dict[tuple[str, str], int] = field(default_factory=dict)
    running: dict[str, str] = field(default_factory=dict)  # model -> id of the probe running on it
    executor: Any = None  # runs models and sweeps (bertprobe.executors); None: in this process
    threads: int = 0  # torch threads of this run (a parallel executor's jobs use at most as many)

    def finished(self, result: ProbeResult) -> tuple[str, str]:
        """(model, probe id) of a result, no longer running on its model."""
        key = (result.model, result.id or result.probe)
        if self.running.get(result.model) == key[1]:
            del self.running[result.model]
        return key

    def record(self, result: ProbeResult) -> None:
        """Outcomes to the sidecar first, then the result event, then the plugins (a fresh partial report)."""
        key = self.finished(result)
        if result.outcomes:
            self.outcomes[key] = {o.name: o for o in result.outcomes}
            append_outcomes(self.run_dir, *key, result.outcomes)
        self.emit("probe_result", result=result.to_dict())
        self.plugins.hook.bertprobe_probe_result(session=self, result=result)

    def map_units(self, model: str, probe_id: str, fn: Any, units: Any, desc: str = "", group: int = 0,
                  where: tuple[ModelSpec, DataSpec | None] | None = None) -> list[Any]:
        """``ProbeContext.map`` under the harness: each finished unit is a ``unit_result`` event; units a
        resumed run already finished are not run again. With ``group``, ``fn`` maps a list of units.

        A ``Sweep`` (``where`` naming the probe's model and data) may be sharded by the executor over
        workers that each load the model once; anything else runs here, chunk after chunk.
        """
        done = self.previous.units.get((model, probe_id), {}) if self.previous else {}
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
        for i, results in progress(finished, total=len(chunks), desc=desc or probe_id):
            chunk = chunks[i]
            if len(results) != len(chunk):
                raise ProbeError(f"{probe_id}: a grouped work function returned {len(results)} values for {len(chunk)} units")
            for (key, _), value in zip(chunk, results):
                value = jsonable(value)
                self.emit("unit_result", model=model, id=probe_id, key=key, value=value)
                self.units_done[(model, probe_id)] = self.units_done.get((model, probe_id), 0) + 1
                values[key] = value
            self.unit_progress(model, probe_id, desc or probe_id, len(values), len(keys))
        return [values[k] for k in keys]

    def unit_progress(self, model: str, probe_id: str, desc: str, done: int, total: int) -> None:
        """A sweep advanced (here a progress bar shows it; a worker's session reports it to the driver)."""

    def emit(self, event: str, **payload: Any) -> None:
        """Fold the event into the report, then hand it to the sink."""
        record = jsonable({"event": event, "time": utc_now(), **payload})
        self.report.apply(record)
        if self.sink is not None:
            self.sink(record)

    def say(self, message: str) -> None:
        if self.log:
            self.log(message)

    # ---- models ---------------------------------------------------------------------------------
    def resolve_model(self, name_or_path: str, like: ModelSpec | None = None) -> ModelSpec:
        """A model param: a name of the matrix first, then a path or hub id on ``like``'s device/dtype."""
        for spec in self.suite.models:
            if spec.label == name_or_path:
                return spec
        base = like.base if like is not None else ModelSpec(path=name_or_path)
        return replace(base, path=name_or_path, name=None, task="auto")

    def _load_stored(self, spec: ModelSpec) -> Target:
        base = spec.base
        if base not in self.targets:
            self.say(f"loading model {spec.path}")
            target = self.plugins.hook.bertprobe_load_target(spec=base)
            if target is None:
                raise TargetError(f"no plugin could load model '{spec.path}'")
            target.encode_cache = self.encode_cache
            self.targets[base] = target
        return self.targets[base]

    def target_for(self, spec: ModelSpec) -> Target:
        """Load (once) the model ``spec`` names, deriving its variant, and record a ``model_loaded`` event."""
        if spec in self.targets:
            return self.targets[spec]
        if spec.variant.keys() - {"dtype"}:
            from bertprobe.model.variants import derive_variant

            stored = self._load_stored(spec)
            data = None
            if spec.prune_heads and self.suite.data is not None:
                data = self.data_for(self.suite.data, stored)
            target, notes = derive_variant(stored, spec, data, self.say)
            notes = list(stored.notes) + notes
        else:
            target = self._load_stored(spec)
            notes = list(target.notes)
            if target.spec != spec:  # the stored model under this spec's name
                target = replace(target, spec=spec)
        self.targets[spec] = target
        if spec.path not in self.hashes:
            from bertprobe.model.modelinfo import sha256_of, weight_files

            self.hashes[spec.path] = sha256_of(weight_files(spec.path))
        if self.previous is not None:
            before = self.previous.hashes.get(spec.label)
            if before and self.hashes[spec.path] and before != self.hashes[spec.path]:
                raise SuiteError(f"cannot resume: the weights of model '{spec.label}' changed since the run "
                                 f"(sha256 {before[:12]} -> {self.hashes[spec.path][:12]}); start a new run")
        from bertprobe.model.modelinfo import describe_model

        info = describe_model(target, self.hashes[spec.path], notes)
        self.emit("model_loaded", model=info.name, info=asdict(info))
        return target

    def release(self, keep: set[ModelSpec]) -> None:
        """Free every loaded model not in ``keep`` (by spec or as the stored weights of one)."""
        wanted = keep | {k.base for k in keep}
        for spec in list(self.targets):
            if spec not in wanted:
                del self.targets[spec]
        self.predictions_cache = {k: v for k, v in self.predictions_cache.items() if k[0] in wanted}
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    # ---- data -----------------------------------------------------------------------------------
    def raw_data(self, spec: DataSpec) -> Dataset:
        """The data ``spec`` names as read (each file once, however many models use it)."""
        name = repr(spec)  # DataSpec holds a dict: not hashable
        if name not in self.raw_datasets:
            loader = self.plugins.datasets.get(spec.loader) if spec.loader else None
            self.raw_datasets[name] = read_data(spec, loader, self.suite.seed)
        return self.raw_datasets[name]

    def data_for(self, spec: DataSpec, target: Target | None = None) -> Dataset:
        """The data ``spec`` names, its labels aligned to ``target``'s classes or choices (once per model)."""
        key = (repr(spec), target.spec.base if target else None)
        if key not in self.datasets:
            data = self.raw_data(spec)
            if target is not None:
                data = align_to_model(data, spec, target.task, target.label_names, target.name)
            self.datasets[key] = data
        return self.datasets[key]


def cached_predictions(session: Session, target: Target, data: Dataset, batch_size: int | None = None,
                       progress: Any = None) -> Predictions:
    """``ctx.predictions`` under the harness: one pass per (model, data fingerprint) in a run."""
    key = (target.spec, fingerprint(data))
    if key not in session.predictions_cache:
        session.predictions_cache[key] = predict_directly(target, data, batch_size, progress)
    return session.predictions_cache[key]


def events_file(handle: TextIO) -> Sink:
    """A sink writing each event as one JSON line to ``handle`` (flushed: a killed run loses nothing)."""

    def write(record: dict[str, Any]) -> None:
        handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        handle.flush()

    return write
