"""The run: load -> select -> run -> score -> emit. Results stream to events.jsonl as they come."""

from __future__ import annotations

import datetime as dt
import gc
import hashlib
import json
import platform
import random
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch

from bertprobe.data import Dataset, DataSpec, align_labels, load_table, map_labels, subsample
from bertprobe.errors import BertprobeError, DataError, InternalError, ProbeError, SuiteError, TargetError
from bertprobe.exitcodes import Terminated
from bertprobe.executors import ExecutorSpec
from bertprobe.executors.local import LocalExecutor
from bertprobe.outcomes import Outcomes, append_outcomes, read_outcomes
from bertprobe.params import params_to_dict
from bertprobe.plugins import Plugins
from bertprobe.probe import ProbeContext, Sweep
from bertprobe.progress import progress
from bertprobe.registry import did_you_mean
from bertprobe.results import Expectation, ProbeResult, RunReport, jsonable, read_events
from bertprobe.suite import ProbeSpec, Suite, unique_names
from bertprobe.validation import validate_suite
from bertprobe.target import ModelSpec, Target


@dataclass
class RunOptions:
    """Command-line overrides of a suite."""

    models: tuple[str, ...] = ()
    data: str | None = None
    device: str | None = None
    dtype: str | None = None
    out: str | None = None
    only: tuple[str, ...] = ()
    limit: int | None = None
    allow_pickle: bool = False
    seed: int | None = None
    threads: int | None = None
    resume: str | None = None
    sets: tuple[str, ...] = ()
    text: str | None = None
    text_pair: str | None = None
    label: str | None = None
    executor: str | None = None
    ray_address: str | None = None
    workers: int | None = None
    log: Any = None
    cancel: Any = None  # a threading.Event: when set, a parallel executor stops its jobs as on Ctrl-C


def default_threads() -> int:
    """torch's thread count capped at the cores this process may use (cgroups and affinity aside, os says)."""
    import os

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(torch.get_num_threads(), cores))


def parse_model_option(value: str) -> tuple[str | None, str]:
    """``NAME=PATH`` or a bare ``PATH`` (named later after its folder or hub id)."""
    name, sep, path = value.partition("=")
    if sep and name and "/" not in name and "\\" not in name:
        return name.strip(), path.strip()
    return None, value


def _override_models(suite: Suite, given: tuple[str, ...]) -> tuple[ModelSpec, ...]:
    """Apply ``--model``: one bare PATH replaces every matrix model's path (variants keep their fields);
    NAME=PATH with names of the matrix replace those models' paths; otherwise the given models are the matrix.
    """
    models = suite.models
    if not given:
        return models
    parsed = [parse_model_option(v) for v in given]
    names = {m.label for m in models}
    if len(parsed) == 1 and parsed[0][0] is None and models:
        return tuple(replace(m, path=parsed[0][1]) for m in models)
    if all(name in names for name, _ in parsed):
        lookup = dict(parsed)
        return tuple(replace(m, path=lookup[m.label]) if m.label in lookup else m for m in models)
    template = models[0].base if models else ModelSpec(path="")
    return tuple(replace(template, path=path, name=name) for name, path in parsed)


def _column_option(value: str | None) -> str | int | None:
    """A column flag: a name, or a 0-based index given as digits."""
    return int(value) if value is not None and value.isdigit() else value


def apply_overrides(suite: Suite, options: RunOptions) -> Suite:
    """Return the suite with --model/--data/--device/--dtype/--limit/--only applied and models named."""
    machine = {"device": options.device, "dtype": options.dtype, "allow_pickle": options.allow_pickle or None}
    models = tuple(unique_names([m.with_overrides(**machine) for m in _override_models(suite, options.models)]))
    data = suite.data
    if options.data:
        data = replace(data, path=options.data, loader=data.loader) if data else DataSpec(path=options.data)
    if data and options.limit:
        data = replace(data, limit=options.limit)
    columns = {"text": options.text, "text_pair": options.text_pair, "label": options.label}
    if data and any(columns.values()):
        data = data.with_overrides(**{k: _column_option(v) for k, v in columns.items()})
    probes = []
    for spec in suite.probes:
        if spec.model:
            spec = replace(spec, model=unique_names([spec.model.with_overrides(**machine)])[0])
        if spec.data and options.limit:
            spec = replace(spec, data=replace(spec.data, limit=options.limit))
        probes.append(spec)
    if options.only:
        known = {p.id for p in probes} | {p.probe for p in probes}
        for name in options.only:
            if name not in known:
                raise SuiteError(f"--only {name}: no such probe in the suite{did_you_mean(name, known)}; has: {', '.join(sorted(known))}")
        probes = [p for p in probes if p.id in options.only or p.probe in options.only]
    gate = suite.compare
    if gate is not None and gate.baseline not in {m.label for m in models}:
        labels = [m.label for m in models]
        raise SuiteError(f"compare.baseline: no model named '{gate.baseline}' after --model{did_you_mean(gate.baseline, labels)}; "
                         f"models: {', '.join(labels)}")
    seed = suite.seed if options.seed is None else options.seed
    executor = suite.executor
    if options.executor or options.ray_address or options.workers:
        executor = replace(executor or ExecutorSpec(), **{k: v for k, v in (
            ("name", options.executor or ("ray" if options.ray_address else None)), ("address", options.ray_address),
            ("workers", options.workers)) if v})
    return replace(suite, model=models[0] if models else None, models=models, data=data, probes=tuple(probes),
                   seed=seed, executor=executor)


def make_executor(suite: Suite, plugins: Plugins) -> Any:
    """The suite's executor, built from its spec (``local`` when none is named)."""
    spec = suite.executor or ExecutorSpec()
    made = plugins.executors.get(spec.name)  # SuiteError with did-you-mean for an unknown name
    return made(spec) if isinstance(made, type) else made


def versions() -> dict[str, str]:
    import datasets
    import transformers

    from bertprobe import __version__

    return {
        "bertprobe": __version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "datasets": datasets.__version__,
        "python": platform.python_version(),
    }


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

    Every event goes through ``emit``, which writes it to events.jsonl and folds it into ``report``,
    so the report on disk and one rebuilt from the events are the same.
    """

    suite: Suite
    plugins: Plugins
    run_dir: Path
    report: RunReport
    events: TextIO
    log: Any = None
    targets: dict[ModelSpec, Target] = field(default_factory=dict)
    datasets: dict[tuple[str, ModelSpec | None], Dataset] = field(default_factory=dict)
    raw_datasets: dict[str, Dataset] = field(default_factory=dict)
    encode_cache: dict[Any, Any] = field(default_factory=dict)
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
        """Outcomes to the sidecar first, then the result event, then the plugins and a fresh partial report."""
        key = self.finished(result)
        if result.outcomes:
            self.outcomes[key] = {o.name: o for o in result.outcomes}
            append_outcomes(self.run_dir, *key, result.outcomes)
        self.emit("probe_result", result=result.to_dict())
        self.plugins.hook.bertprobe_probe_result(session=self, result=result)
        write_reports(self)  # a readable partial report after every probe

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
        shardable = isinstance(fn, Sweep) and where is not None and self.executor is not None
        runner = self.executor if shardable else LocalExecutor()
        finished = runner.map_sweep(self, fn, [[u for _, u in c] for c in chunks], where, bool(group))
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
        record = jsonable({"event": event, "time": utc_now(), **payload})
        self.events.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.events.flush()
        self.report.apply(record)

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
            from bertprobe.variants import derive_variant

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
            from bertprobe.modelinfo import sha256_of, weight_files

            self.hashes[spec.path] = sha256_of(weight_files(spec.path))
        if self.previous is not None:
            before = self.previous.hashes.get(spec.label)
            if before and self.hashes[spec.path] and before != self.hashes[spec.path]:
                raise SuiteError(f"cannot resume: the weights of model '{spec.label}' changed since the run "
                                 f"(sha256 {before[:12]} -> {self.hashes[spec.path][:12]}); start a new run")
        from bertprobe.modelinfo import describe_model

        info = describe_model(target, self.hashes[spec.path], notes)
        self.emit("model_loaded", model=info.name, info=asdict(info))
        return target

    def release(self, keep: set[ModelSpec]) -> None:
        """Free every loaded model not in ``keep`` (by spec or as the stored weights of one)."""
        wanted = keep | {k.base for k in keep}
        for spec in list(self.targets):
            if spec not in wanted:
                del self.targets[spec]
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    # ---- data -----------------------------------------------------------------------------------
    def raw_data(self, spec: DataSpec) -> Dataset:
        name = repr(spec)  # DataSpec holds a dict: not hashable
        if name not in self.raw_datasets:  # read each file once, however many targets use it
            raw = _load_with(self.plugins.datasets.get(spec.loader), spec) if spec.loader else load_table(spec)
            check_ids(raw)
            raw = map_labels(raw, spec.label_map)
            self.raw_datasets[name] = subsample(raw, spec.limit, spec.sample, self.suite.seed)
        return self.raw_datasets[name]

    def data_for(self, spec: DataSpec, target: Target | None = None) -> Dataset:
        key = (repr(spec), target.spec.base if target else None)
        if key not in self.datasets:
            data = self.raw_data(spec)
            if target is not None and any(ex.label is not None for ex in data.examples):
                if target.task == "multiple-choice":
                    if any(not ex.choices for ex in data.examples):
                        raise DataError(f"{target.name} is a multiple-choice model but {spec.describe()} has examples "
                                        "without choices; set data.choices to the choice columns (or use a loader "
                                        "such as arct)")
                    sizes = {len(ex.choices or ()) for ex in data.examples}
                    data = align_labels(data, [], num_choices=min(sizes) if sizes else 0)
                elif target.task == "classification":
                    data = align_labels(data, target.label_names)
            self.datasets[key] = data
        return self.datasets[key]


def _load_with(loader: Any, spec: DataSpec) -> Dataset:
    """A named loader's data; anything it raises besides a BertprobeError becomes a DataError naming it."""
    if isinstance(loader, type):  # registered as a class: an instance is what loads
        loader = loader()
    try:
        data = loader.load(spec)
    except BertprobeError:
        raise
    except Exception as exc:  # a plugin's loader: its failure on this input is bad input, reported in one line
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise DataError(f"data loader '{spec.loader}' failed on '{spec.path}': {type(exc).__name__}"
                        + (f": {message}" if message else "")) from None
    if not isinstance(data, Dataset):
        raise DataError(f"data loader '{spec.loader}' returned {type(data).__name__}, not a bertprobe Dataset")
    return data


def check_ids(data: Dataset) -> None:
    """Example ids key per-example outcomes: they must be unique (and stable for a given file)."""
    seen: set[str] = set()
    for i, ex in enumerate(data.examples):
        if ex.id in seen:
            raise DataError(f"{data.name}: example id '{ex.id}' (row {i + 1}) is not unique; ids key per-example outcomes")
        seen.add(ex.id)


def fingerprint(data: Dataset) -> str:
    """sha256 over the examples' ids, texts, labels and choices: equal data give equal fingerprints."""
    digest = hashlib.sha256()
    for ex in data.examples:
        digest.update(json.dumps([ex.id, ex.text, ex.text_pair, ex.label, ex.choices], default=str).encode("utf-8"))
    return digest.hexdigest()


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _judge(result: ProbeResult, expectations: tuple[Expectation, ...]) -> None:
    result.expectations = [Expectation(e.metric, e.min, e.max) for e in expectations]
    if result.status in ("skipped", "error", "interrupted"):
        return
    if not result.expectations:  # measured, not judged: no expectation to hold or fail
        result.status = "measured"
        return
    ok = [e.check(result.value(e.metric)) for e in result.expectations]
    result.status = "passed" if all(ok) else "failed"


def run_probe(session: Session, spec: ProbeSpec, params: Any, model_spec: ModelSpec) -> ProbeResult:
    """Run one probe on one model; its own failures become an ``error`` result, input errors propagate."""
    suite = session.suite
    cls = session.plugins.probes.get(spec.probe)
    data_spec = spec.data or suite.data
    target = session.target_for(model_spec)
    name = model_spec.label
    result = ProbeResult(probe=spec.probe, id=spec.id, params=params_to_dict(params), model=name, seed=suite.seed)
    missing = cls.missing_requirements(target.capabilities)
    if missing:
        result.status = "skipped"
        result.message = f"target {name} ({target.task}) lacks: {', '.join(missing)}"
        _judge(result, spec.expect)
        return result
    data = session.data_for(data_spec, target) if (cls.needs_data and data_spec) else None
    lacking = cls.missing_data(data.features) if data is not None else []
    if lacking:
        raise DataError(f"probe {spec.id}: data '{data_spec.describe()}' lacks {', '.join(lacking)}; "  # type: ignore[union-attr]
                        "give it data that has them (words and dependency layers come from a .conllu treebank)")

    def baseline_result() -> ProbeResult | None:
        if not session.baseline or session.baseline == name:
            return None
        return session.report.result(session.baseline, spec.id)

    ctx = ProbeContext(
        seed=suite.seed,
        out_dir=session.run_dir,
        progress=progress,
        log=lambda msg: session.say(f"[{name}/{spec.id}] {msg}" if len(suite.models) > 1 else f"[{spec.id}] {msg}"),
        load_target=session.target_for,
        load_data=lambda s: session.data_for(s, None),
        resolve_model=session.resolve_model,
        baseline_result=baseline_result,
        model_name=name,
        probe_id=spec.id,
        map=lambda fn, units, desc="", group=0: session.map_units(name, spec.id, fn, units, desc, group,
                                                                    (model_spec, data_spec if cls.needs_data else None)),
    )
    _seed_everything(suite.seed)
    start = time.perf_counter()
    try:
        produced = cls().run(target, data, params, ctx)
    except (TargetError, DataError, SuiteError):
        raise
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # a broken probe must not end the run
        result.status = "error"
        result.message = f"{type(exc).__name__}: {exc}" if not isinstance(exc, ProbeError) else str(exc)
        session.emit("probe_traceback", id=spec.id, model=name, traceback=traceback.format_exc())
    else:
        produced.id, produced.probe, produced.model, produced.seed = spec.id, spec.probe, name, suite.seed
        produced.params = result.params
        if getattr(cls, "paper", ""):
            produced.details.setdefault("paper", cls.paper)
        result = produced
    result.duration_s = time.perf_counter() - start
    _judge(result, spec.expect)
    return result


def write_reports(session: Session) -> list[Path]:
    paths = []
    for fmt in session.suite.formats:
        reporter = session.plugins.reporters.get(fmt)
        reporter = reporter() if isinstance(reporter, type) else reporter
        paths.append(reporter.write(session.report, session.run_dir))
    return paths


def _plan(suite: Suite) -> list[ModelSpec]:
    """Models in run order: the gate's baseline first, then the others as the suite lists them."""
    models = list(suite.models)
    if suite.compare is not None:
        models.sort(key=lambda m: m.label != suite.compare.baseline)  # type: ignore[union-attr]
    return models


def model_probes(suite: Suite, position: int, model_spec: ModelSpec) -> list[tuple[ProbeSpec, ModelSpec]]:
    """The probes a model's turn runs, each with the model it runs on (a probe with its own model runs
    once, in the first model's turn)."""
    return [(spec, spec.model or model_spec) for spec in suite.probes if spec.model is None or position == 0]


def run_model(session: Session, position: int, model_spec: ModelSpec, parsed: dict[str, Any]) -> None:
    """One model's turn: every probe of the suite on it, each result recorded as it finishes.

    The same function runs in this process (``local``) and inside a worker (``ray``), where the
    session sends its events to the driver instead of writing them.
    """
    previous = session.previous
    several = len(session.suite.models) > 1
    for spec, target_spec in model_probes(session.suite, position, model_spec):
        if previous and (target_spec.label, spec.id) in previous.kept:
            session.say(f"kept {spec.id}" + (f" on {target_spec.label}" if several else "") + " from the interrupted run")
            continue
        session.running[target_spec.label] = spec.id
        session.say(f"running {spec.id}" + (f" on {target_spec.label}" if several else ""))
        session.emit("probe_start", id=spec.id, probe=spec.probe, model=target_spec.label)
        session.record(run_probe(session, spec, parsed[spec.id], target_spec))


def _gate(session: Session) -> None:
    gate = session.suite.compare
    if gate is None or len(session.suite.models) < 2:
        return
    from bertprobe.gates import gate_models

    deltas = gate_models(session.report, session.outcomes, gate.baseline, gate.tolerance_for, gate.significance,
                         session.suite.seed)
    regressions = [d for d in deltas if d.regression]
    session.emit("gate", baseline=gate.baseline, deltas=[asdict(d) for d in deltas],
                 regressions=[asdict(r) for r in regressions])
    for r in regressions:
        session.say(f"regression: {r.describe()}")


def run_suite(suite: Suite, plugins: Plugins, options: RunOptions | None = None) -> Session:
    """Run every probe of the suite on every model and write the reports; returns the finished session.

    Models run one after another (the gate's baseline first), each through every probe, and each is
    freed once its probes are done, so a run stopped halfway keeps whole models in its partial report.
    Raises BertprobeError for bad input (after writing a partial report when the run had started)
    and KeyboardInterrupt after writing an ``interrupted`` report.
    """
    options = options or RunOptions()
    selected = apply_overrides(suite, options)  # raises for an unknown --only name
    full = apply_overrides(suite, replace(options, only=()))
    parsed = validate_suite(full, plugins, {p.id for p in selected.probes} if options.only else None)
    suite = selected
    parts = suite_fingerprint(suite)
    previous = read_previous_run(Path(options.resume), parts) if options.resume else None
    executor = make_executor(suite, plugins)
    executor.cancel = options.cancel
    executor.start()  # before a run folder exists: a cluster that cannot be reached is bad input
    run_dir = Path(options.resume) if options.resume else new_run_dir(Path(options.out or suite.report_dir), suite.name)
    report = previous.report if previous else RunReport(suite=suite.name, run_dir=str(run_dir))
    threads = options.threads or suite.threads or default_threads()
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)  # restored when the run ends: a library call leaves no global change
    paths = {m.path for m in suite.models}
    with open(run_dir / "events.jsonl", "a" if previous else "w", encoding="utf-8") as events:
        session = Session(suite, plugins, run_dir, report, events, log=options.log, executor=executor, threads=threads)
        plan = _plan(suite)
        session.baseline = plan[0].label if len(plan) > 1 else ""
        if previous:
            session.previous = previous
            session.outcomes = read_outcomes(run_dir)
            session.emit("run_resumed", kept=[list(k) for k in sorted(previous.kept)],
                         units=sum(len(v) for v in previous.units.values()), threads=threads)
        else:
            session.emit("run_start", suite=suite.name, source=_absolute(suite.source),
                         model=paths.pop() if len(paths) == 1 else f"{len(suite.models)} models",
                         models=[m.label for m in plan], data=suite.data.describe() if suite.data else "",
                         seed=suite.seed, versions=versions(), probes=[p.id for p in suite.probes],
                         gate=suite.compare.to_dict() if suite.compare else {}, threads=threads,
                         suite_parts=parts, options=recorded_options(options))
        plugins.hook.bertprobe_session_start(session=session)
        try:
            if suite.data is not None and any(plugins.probes.get(p.probe).needs_data and p.data is None for p in suite.probes):
                data = session.raw_data(suite.data)
                print_ = fingerprint(data)
                if previous and previous.report.data_fingerprint and previous.report.data_fingerprint != print_:
                    raise SuiteError(f"cannot resume {run_dir}: the data changed since the run (fingerprint "
                                     f"{previous.report.data_fingerprint[:12]} -> {print_[:12]}); start a new run")
                if not previous:
                    session.emit("data_loaded", data=suite.data.describe(), examples=len(data), fingerprint=print_)
            executor.run_models(session, plan, parsed)
            _gate(session)
            report.status = "completed"
        except KeyboardInterrupt as exc:
            how = "SIGTERM" if isinstance(exc, Terminated) else "the user (Ctrl-C)"
            for model_name, probe_id in list(session.running.items()):
                done = session.units_done.get((model_name, probe_id), 0)
                kept = f"; {done} work unit(s) it finished are kept for --resume" if done else ""
                session.record(ProbeResult(probe=probe_id, id=probe_id, model=model_name, status="interrupted",
                                           message=f"stopped by {how} while this probe ran{kept}",
                                           details={"units_finished": done}))
            report.status, report.message = "interrupted", f"stopped by {how}; continue with 'bertprobe run --resume {run_dir}'"
            exc.run_dir = run_dir  # type: ignore[attr-defined]
            raise
        except BertprobeError as exc:
            report.status, report.message = "aborted", str(exc)
            exc.args = (f"{exc}; partial report in {run_dir}",)
            raise
        except Exception as exc:  # a bug: the report says so instead of staying 'running'
            report.status, report.message = "aborted", f"internal error: {type(exc).__name__}: {exc}"
            session.emit("run_traceback", traceback=traceback.format_exc())
            raise InternalError(f"internal error: {type(exc).__name__}: {exc}; partial report in {run_dir}; "
                                "rerun with --debug for the traceback") from exc
        finally:
            session.emit("run_finish", status=report.status, message=report.message, counts=report.counts(),
                         score=report.score())
            write_reports(session)
            _update_index(run_dir.parent, session)
            plugins.hook.bertprobe_session_finish(session=session, report=report)
            torch.set_num_threads(previous_threads)
            executor.close()
    return session


def _update_index(reports_dir: Path, session: Session) -> None:
    """reports/index.html and reports/latest, rebuilt from the run folders; a failure only warns."""
    from bertprobe.runindex import update_index

    try:
        update_index(reports_dir)
    except OSError as exc:
        session.say(f"warning: could not update {reports_dir / 'index.html'}: {exc}")


def _absolute(source: str) -> str:
    path = Path(source)
    return str(path.resolve()) if path.is_file() else source


def suite_fingerprint(suite: Suite) -> dict[str, str]:
    """A short hash of each part of the resolved suite (models, data, probes, ...), to tell what changed."""
    plain = jsonable(asdict(suite))  # asdict descends into the nested specs
    return {name: hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:16]
            for name, value in plain.items() if name not in ("source", "description", "model", "executor")}


def recorded_options(options: RunOptions) -> dict[str, Any]:
    """The command-line overrides, kept in run_start so ``--resume RUN_DIR`` alone can rebuild the run."""
    values = {f.name: getattr(options, f.name) for f in fields(options)}  # no deep copy: ``cancel`` holds a lock
    return {k: v for k, v in values.items() if k not in ("log", "resume", "cancel") and v not in (None, (), False)}


def recorded_run(run_dir: Path) -> tuple[str, dict[str, Any]]:
    """The suite file and command-line options a run folder was started with (for ``--resume`` alone)."""
    events = run_dir / "events.jsonl"
    if not events.is_file():
        raise SuiteError(f"--resume {run_dir}: not a bertprobe run folder (no events.jsonl)")
    with open(events, encoding="utf-8", errors="replace") as handle:
        try:
            first = json.loads(handle.readline())
        except json.JSONDecodeError:
            first = {}
    if not isinstance(first, dict) or first.get("event") != "run_start" or not first.get("source"):
        raise SuiteError(f"--resume {run_dir}: its events.jsonl does not start with a run_start naming the suite; "
                         "give the suite file too: bertprobe run SUITE --resume RUN_DIR")
    return str(first["source"]), dict(first.get("options") or {})


@dataclass
class PreviousRun:
    """What an interrupted or aborted run folder already holds, for ``--resume``."""

    report: RunReport
    kept: set[tuple[str, str]]
    units: dict[tuple[str, str], dict[str, Any]]
    hashes: dict[str, str | None]


def read_previous_run(run_dir: Path, parts: dict[str, str]) -> PreviousRun:
    """Read a run folder to resume; SuiteError when it cannot be (missing, completed, or the suite changed)."""
    events = run_dir / "events.jsonl"
    if not events.is_file():
        raise SuiteError(f"--resume {run_dir}: not a bertprobe run folder (no events.jsonl)")
    records = read_events(events)  # read once: the report and the finished units both come from it
    report = RunReport.fold(records, run_dir)
    if report.status == "completed":
        raise SuiteError(f"--resume {run_dir}: the run completed; nothing to resume (start a new run)")
    old_parts: dict[str, str] = {}
    units: dict[tuple[str, str], dict[str, Any]] = {}
    for event in records:
        if event.get("event") == "run_start":
            old_parts = dict(event.get("suite_parts") or {})
        elif event.get("event") == "unit_result":
            units.setdefault((str(event.get("model")), str(event.get("id"))), {})[str(event.get("key"))] = event.get("value")
    changed = sorted(k for k in set(parts) | set(old_parts) if parts.get(k) != old_parts.get(k))
    if changed:
        raise SuiteError(f"--resume {run_dir}: the suite changed since the run ({', '.join(changed)} differ); "
                         "give the same suite and options, or start a new run")
    kept = {(r.model, r.id or r.probe) for r in report.probes if r.status not in ("error", "interrupted")}
    hashes = {m.name: m.sha256 for m in report.models}
    return PreviousRun(report, kept, units, hashes)


def rebuild_report(run_dir: Path) -> RunReport:
    """The report of a run folder, rebuilt from its events.jsonl."""
    events = Path(run_dir) / "events.jsonl"
    if not events.is_file():
        raise BertprobeError(f"'{run_dir}' has no events.jsonl; is it a bertprobe run folder?")
    return RunReport.from_events(events)


def log_to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
