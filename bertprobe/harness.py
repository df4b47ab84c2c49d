"""The run: load -> select -> run -> score -> emit. Results stream to events.jsonl as they come."""

from __future__ import annotations

import datetime as dt
import json
import platform
import random
import sys
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch

from bertprobe.data import Dataset, DataSpec, align_labels, load_table, subsample
from bertprobe.errors import BertprobeError, DataError, ProbeError, SuiteError, TargetError
from bertprobe.params import params_to_dict
from bertprobe.plugins import Plugins
from bertprobe.probe import ProbeContext
from bertprobe.progress import progress
from bertprobe.registry import did_you_mean
from bertprobe.results import Expectation, ProbeResult, RunReport, jsonable
from bertprobe.suite import ProbeSpec, Suite, validate_probes
from bertprobe.target import ModelSpec, Target


@dataclass
class RunOptions:
    """Command-line overrides of a suite."""

    model: str | None = None
    data: str | None = None
    device: str | None = None
    dtype: str | None = None
    out: str | None = None
    only: tuple[str, ...] = ()
    limit: int | None = None
    allow_pickle: bool = False
    log: Any = None


def apply_overrides(suite: Suite, options: RunOptions) -> Suite:
    """Return the suite with --model/--data/--device/--dtype/--limit/--only applied."""
    model = suite.model
    if options.model:
        model = replace(model, path=options.model) if model else ModelSpec(path=options.model)
    machine = {"device": options.device, "dtype": options.dtype, "allow_pickle": options.allow_pickle or None}
    model = model.with_overrides(**machine) if model else None
    data = suite.data
    if options.data:
        data = replace(data, path=options.data, loader=data.loader) if data else DataSpec(path=options.data)
    if data and options.limit:
        data = replace(data, limit=options.limit)
    probes = []
    for spec in suite.probes:
        if spec.model:
            spec = replace(spec, model=spec.model.with_overrides(**machine))
        if spec.data and options.limit:
            spec = replace(spec, data=replace(spec.data, limit=options.limit))
        probes.append(spec)
    if options.only:
        known = {p.id for p in probes} | {p.probe for p in probes}
        for name in options.only:
            if name not in known:
                raise SuiteError(f"--only {name}: no such probe in the suite{did_you_mean(name, known)}; has: {', '.join(sorted(known))}")
        probes = [p for p in probes if p.id in options.only or p.probe in options.only]
    return replace(suite, model=model, data=data, probes=tuple(probes))


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
    """State of one run; plugins receive it in the session hooks."""

    suite: Suite
    plugins: Plugins
    run_dir: Path
    report: RunReport
    events: TextIO
    log: Any = None
    targets: dict[ModelSpec, Target] = field(default_factory=dict)
    datasets: dict[tuple[str, ModelSpec | None], Dataset] = field(default_factory=dict)
    raw_datasets: dict[str, Dataset] = field(default_factory=dict)

    def emit(self, event: str, **payload: Any) -> None:
        record = {"event": event, "time": utc_now(), **payload}
        self.events.write(json.dumps(jsonable(record), ensure_ascii=False) + "\n")
        self.events.flush()

    def say(self, message: str) -> None:
        if self.log:
            self.log(message)

    def target_for(self, spec: ModelSpec) -> Target:
        if spec not in self.targets:
            self.say(f"loading model {spec.path}")
            target = self.plugins.hook.bertprobe_load_target(spec=spec)
            if target is None:
                raise TargetError(f"no plugin could load model '{spec.path}'")
            self.targets[spec] = target
            self.emit("target_loaded", model=spec.path, device=str(target.device), dtype=str(target.dtype).replace("torch.", ""), task=target.task)
        return self.targets[spec]

    def data_for(self, spec: DataSpec, target: Target | None = None) -> Dataset:
        name = repr(spec)  # DataSpec holds a dict: not hashable
        key = (name, target.spec if target else None)
        if key not in self.datasets:
            if name not in self.raw_datasets:  # read each file once, however many targets use it
                raw = self.plugins.datasets.get(spec.loader).load(spec) if spec.loader else load_table(spec)
                self.raw_datasets[name] = subsample(raw, spec.limit, spec.sample, self.suite.seed)
            data = self.raw_datasets[name]
            if target is not None and any(ex.label is not None for ex in data.examples):
                if target.task == "multiple-choice":
                    sizes = {len(ex.choices or ()) for ex in data.examples}
                    data = align_labels(data, [], num_choices=min(sizes) if sizes else 0)
                elif target.task == "classification":
                    data = align_labels(data, target.label_names)
            self.datasets[key] = data
        return self.datasets[key]


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _judge(result: ProbeResult, expectations: tuple[Expectation, ...]) -> None:
    result.expectations = [Expectation(e.metric, e.min, e.max) for e in expectations]
    if result.status in ("skipped", "error"):
        return
    ok = [e.check(result.value(e.metric)) for e in result.expectations]
    result.status = "passed" if all(ok) else "failed"


def run_probe(session: Session, spec: ProbeSpec, params: Any) -> ProbeResult:
    """Run one probe; its own failures become an ``error`` result, input errors propagate."""
    suite = session.suite
    cls = session.plugins.probes.get(spec.probe)
    model_spec = spec.model or suite.model
    data_spec = spec.data or suite.data
    assert model_spec is not None
    target = session.target_for(model_spec)
    result = ProbeResult(probe=spec.probe, id=spec.id, params=params_to_dict(params), model=model_spec.path, seed=suite.seed)
    missing = cls.missing_requirements(target.capabilities)
    if missing:
        result.status = "skipped"
        result.message = f"target {model_spec.path} ({target.task}) lacks: {', '.join(missing)}"
        _judge(result, spec.expect)
        return result
    data = session.data_for(data_spec, target) if (cls.needs_data and data_spec) else None
    ctx = ProbeContext(
        seed=suite.seed,
        out_dir=session.run_dir,
        progress=progress,
        log=lambda msg: session.say(f"[{spec.id}] {msg}"),
        load_target=session.target_for,
        load_data=lambda s: session.data_for(s, None),
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
        session.emit("probe_traceback", id=spec.id, traceback=traceback.format_exc())
    else:
        produced.id, produced.probe, produced.model, produced.seed = spec.id, spec.probe, model_spec.path, suite.seed
        produced.params = result.params
        result = produced
    result.duration_s = time.perf_counter() - start
    _judge(result, spec.expect)
    return result


def write_reports(session: Session) -> list[Path]:
    paths = []
    for fmt in session.suite.formats:
        paths.append(session.plugins.reporters.get(fmt).write(session.report, session.run_dir))
    return paths


def run_suite(suite: Suite, plugins: Plugins, options: RunOptions | None = None) -> Session:
    """Run every probe of the suite and write the reports; returns the finished session.

    Raises BertprobeError for bad input (after writing a partial report when the run had started)
    and KeyboardInterrupt after writing an ``interrupted`` report.
    """
    options = options or RunOptions()
    suite = apply_overrides(suite, options)
    parsed = validate_probes(suite, plugins.probes, plugins.reporters)
    run_dir = new_run_dir(Path(options.out or suite.report_dir), suite.name)
    report = RunReport(
        suite=suite.name,
        model=suite.model.path if suite.model else "",
        data=suite.data.describe() if suite.data else "",
        seed=suite.seed,
        versions=versions(),
        started_at=utc_now(),
        run_dir=str(run_dir),
    )
    with open(run_dir / "events.jsonl", "w", encoding="utf-8") as events:
        session = Session(suite, plugins, run_dir, report, events, log=options.log)
        session.emit("run_start", suite=suite.name, source=suite.source, model=report.model, data=report.data,
                     seed=suite.seed, versions=report.versions, probes=[p.id for p in suite.probes])
        plugins.hook.bertprobe_session_start(session=session)
        try:
            for spec in suite.probes:
                session.say(f"running {spec.id}")
                session.emit("probe_start", id=spec.id, probe=spec.probe)
                result = run_probe(session, spec, parsed[spec.id])
                if not report.device and session.targets:
                    first = next(iter(session.targets.values()))
                    report.device, report.dtype = str(first.device), str(first.dtype).replace("torch.", "")
                report.probes.append(result)
                session.emit("probe_result", result=result.to_dict())
                plugins.hook.bertprobe_probe_result(session=session, result=result)
                write_reports(session)  # a readable partial report after every probe
            report.status = "completed"
        except KeyboardInterrupt:
            report.status, report.message = "interrupted", "stopped by the user (Ctrl-C)"
            raise
        except BertprobeError as exc:
            report.status, report.message = "aborted", str(exc)
            exc.args = (f"{exc}; partial report in {run_dir}",)
            raise
        finally:
            report.finished_at = utc_now()
            session.emit("run_finish", status=report.status, message=report.message, counts=report.counts(), score=report.score())
            write_reports(session)
            plugins.hook.bertprobe_session_finish(session=session, report=report)
    return session


def log_to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
