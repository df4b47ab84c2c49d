"""The orchestrator: resolve the suite, open the run folder, hand the models to the executor, gate, finish.

Resolving (overrides, validation, the executor, what a resumed run already holds) is one step and
running the resolved parts another, as lm-evaluation-harness separates ``simple_evaluate`` from
``evaluate``. The harness loads no model and reads no data itself: the session does that for the
probes (``bertprobe.run``), the executor decides where the models run (``bertprobe.executors``), and
the reports are written by a built-in plugin from the session's hooks (``bertprobe.run.reports``).
The CLI and ``orchestrate`` (several suites, signals, resume) import this module.
"""

from __future__ import annotations

import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from bertprobe.data.dataset import Dataset
from bertprobe.data.prepare import fingerprint
from bertprobe.environment import busy_note, default_threads, versions
from bertprobe.errors import BertprobeError, InternalError, Problems, SuiteError
from bertprobe.model.loading import resolve_device
from bertprobe.model.spec import ModelSpec
from bertprobe.plugins import Plugins
from bertprobe.results import ProbeResult, RunReport
from bertprobe.results.exitcodes import Terminated
from bertprobe.results.gates import gate_models, prediction_agreement
from bertprobe.results.outcomes import read_outcomes
from bertprobe.run.control import RunControl
from bertprobe.run.resume import (
    PreviousRun,
    absolute_source,
    read_previous_run,
    recorded_options,
    suite_fingerprint,
)
from bertprobe.run.session import Session, events_file, new_run_dir, plan_models
from bertprobe.run.state import RunState
from bertprobe.suite.overrides import SuiteOverrides, apply_overrides
from bertprobe.suite.schema import ExecutorSpec, Suite
from bertprobe.suite.validate import (
    check_data_needs,
    check_endpoints,
    check_hub_sources,
    read_local_data,
    validate_suite,
)


def make_executor(suite: Suite, plugins: Plugins) -> Any:
    """The suite's executor, built from its spec (``local`` when none is named)."""
    spec = suite.executor or ExecutorSpec()
    made = plugins.executors.get(spec.name)  # SuiteError with did-you-mean for an unknown name
    return made(spec) if isinstance(made, type) else made


@dataclass
class ResolvedRun:
    """A suite made ready to run: overrides applied, params parsed, the executor built, the old run read."""

    suite: Suite
    params_by_probe: dict[str, Any]
    executor: Any
    previous: PreviousRun | None
    parts: dict[str, str]  # a hash per part of the suite (suite_fingerprint), kept for --resume
    preread: Dataset | None = None  # the suite's local data, read and checked before the run folder
    notes: tuple[str, ...] = ()  # what the preflight did not check, said when the run starts


@dataclass
class Preflight:
    """What every check before a model loads found: the suite as it will run, its params, its local data."""

    suite: Suite
    params_by_probe: dict[str, Any]
    data: Dataset | None
    notes: tuple[str, ...] = ()  # what was not checked, and why (served models not contacted)


def preflight(suite: Suite, plugins: Plugins, overrides: SuiteOverrides, contact: bool = True) -> Preflight:
    """Every check ``run`` makes before any weights load, and all that ``validate`` makes: the command line
    applied, the probes that will run (``--only``) validated, hub sources and served models reachable, the local data read
    and checked against the probes and against each local model's classes. Every step runs, and one error
    lists every problem they found (numbered by the CLI, one per line); nothing is loaded or created. With
    ``contact`` false (``validate --offline``) no served model is asked anything (``check_endpoints``)."""
    problems = Problems()
    selected = problems.attempt(apply_overrides, suite, overrides)  # fails for an unknown --only name or baseline
    if selected is None:  # nothing more can be checked without the suite as it would run: list what loading found
        for problem in suite.problems:
            problems.add(problem, SuiteError, suite=True)
        problems.raise_if_any(suite.source or "suite")
    params_by_probe = validate_suite(selected, plugins, problems)
    problems.attempt(check_devices, selected)
    problems.attempt(check_hub_sources, selected)  # every unreachable hub id at once, before a run folder exists
    # every served model that does not answer, at once (none: no import); none asked offline or from a joined cluster
    skipped = check_endpoints(selected, plugins, problems, contact=contact)
    data = read_local_data(selected, plugins, problems)  # a file that cannot serve the run leaves no run folder
    problems.raise_if_any(selected.source or "suite")
    return Preflight(selected, params_by_probe, data, (skipped,) if skipped else ())


def check_devices(suite: Suite) -> None:
    """Each model's device exists on this machine (cuda, cuda:N, mps), before a run folder exists: models load
    here or in a private Ray cluster on this machine. A joined cluster's workers may have other devices: they
    check their own."""
    if suite.executor is not None and suite.executor.address:
        return
    for spec in [*suite.models, *(p.model for p in suite.probes if p.model is not None)]:
        resolve_device(spec.device)


def resolve_run(suite: Suite, plugins: Plugins, overrides: SuiteOverrides, control: RunControl) -> ResolvedRun:
    """The preflight checks, then the executor and, with --resume, what the interrupted run finished."""
    checked = preflight(suite, plugins, overrides)
    selected, params_by_probe, data = checked.suite, checked.params_by_probe, checked.data
    parts = suite_fingerprint(selected)
    previous = read_previous_run(Path(control.resume), parts, selected.variables) if control.resume else None
    executor = make_executor(selected, plugins)
    executor.cancel = control.cancel
    return ResolvedRun(selected, params_by_probe, executor, previous, parts, data, checked.notes)


def _open(session: Session, resolved: ResolvedRun, options: dict[str, Any], plan: list[ModelSpec]) -> None:
    """The run's first event: ``run_start`` for a new run, ``run_resumed`` for a resumed one."""
    suite, previous = resolved.suite, resolved.previous
    if previous:
        session.emit("run_resumed", kept=[list(k) for k in sorted(previous.state.kept)],
                     units=sum(len(v) for v in previous.state.units.values()), threads=session.threads)
        return
    paths = {m.path for m in suite.models}
    busy = busy_note(session.threads)
    if busy:
        session.say(f"warning: {busy}")
    session.emit("run_start", suite=suite.name, source=absolute_source(suite.source),
                 model=paths.pop() if len(paths) == 1 else f"{len(suite.models)} models",
                 models=[m.label for m in plan], data=suite.data.describe() if suite.data else "",
                 seed=suite.seed, versions=versions(), probes=[p.id for p in suite.probes],
                 gate=suite.gate.to_dict() if suite.gate else {}, threads=session.threads,
                 suite_parts=resolved.parts, options=options, variables=suite.variables,
                 left_out=list(suite.left_out), busy=busy)


def _record_data(session: Session, checked: bool) -> None:
    """Read the suite's data once up front (bad data stops the run before any model loads; ``checked``: the
    preflight read and checked it already) and record its fingerprint; a resumed run must see the same data."""
    suite, plugins = session.suite, session.plugins
    if suite.data is None or not any(plugins.probes.get(p.probe).needs_data and p.data is None for p in suite.probes):
        return
    data = session.caches.raw(suite.data)
    if not checked:
        check_data_needs(suite, plugins, data)
    digest = fingerprint(data)
    before = session.report.data_fingerprint  # a resumed run's, from its events
    if before and before != digest:
        raise SuiteError(f"cannot resume {session.run_dir}: the data changed since the run (fingerprint "
                         f"{before[:12]} -> {digest[:12]}); start a new run")
    if not before:
        session.emit("data_loaded", data=suite.data.describe(), examples=len(data), fingerprint=digest,
                     file_sha256=file_sha256(suite.data.path))


def file_sha256(path: str | None) -> str:
    """The SHA-256 of the data file as stored (a folder's files in name order, BEIR's; empty for a hub id): what
    ``sha256sum`` prints, beside the fingerprint of the examples as parsed."""
    import hashlib
    from pathlib import Path

    local = Path(path).expanduser() if path else None
    if local is None or not local.exists():
        return ""
    files = [local] if local.is_file() else sorted(p for p in local.rglob("*") if p.is_file())
    digest = hashlib.sha256()
    for file in files:
        with open(file, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _gate(session: Session) -> None:
    """Judge every model of a matrix against the baseline (``compare:``) and record the ``gate`` event."""
    gate = session.suite.gate
    if gate is None or len(session.suite.models) < 2:
        return
    outcomes = read_outcomes(session.run_dir)
    deltas = gate_models(session.report, outcomes, gate.baseline, gate.tolerance_for, gate.significance,
                         session.suite.seed)
    regressions = [d for d in deltas if d.regression]
    session.emit("gate", baseline=gate.baseline, deltas=[asdict(d) for d in deltas],
                 regressions=[asdict(r) for r in regressions],
                 agreement=[asdict(a) for a in prediction_agreement(session.report, outcomes, gate.baseline)])
    for r in regressions:
        session.say(f"regression: {r.describe()}")


def _interrupted(session: Session, exc: KeyboardInterrupt) -> None:
    """Record every probe that was running as ``interrupted``, keeping its finished units for --resume."""
    how = "SIGTERM" if isinstance(exc, Terminated) else "the user (Ctrl-C)"
    for model_name, probe_id in list(session.state.running.items()):
        done = len(session.state.units_of(model_name, probe_id))
        kept = f"; {done} work unit(s) it finished are kept for --resume" if done else ""
        session.record(ProbeResult(probe=probe_id, id=probe_id, model=model_name, status="interrupted",
                                   message=f"stopped by {how} while this probe ran{kept}",
                                   details={"units_finished": done}))
    session.report.status = "interrupted"
    session.report.message = f"stopped by {how}; continue with 'bertprobe run --resume {session.run_dir}'"
    exc.run_dir = session.run_dir  # type: ignore[attr-defined]


def run_suite(suite: Suite, plugins: Plugins, overrides: SuiteOverrides | None = None,
              control: RunControl | None = None) -> Session:
    """Run every probe of the suite on every model; returns the finished session.

    Models run one after another (the gate's baseline first), each through every probe, and each is
    freed once its probes are done, so a run stopped halfway keeps whole models in its partial report.
    Raises BertprobeError for bad input (after the partial report is written when the run had started)
    and KeyboardInterrupt after an ``interrupted`` report is written.
    """
    overrides, control = overrides or SuiteOverrides(), control or RunControl()
    resolved = resolve_run(suite, plugins, overrides, control)
    suite, executor, previous = resolved.suite, resolved.executor, resolved.previous
    executor.start()  # before a run folder exists: a cluster that cannot be reached is bad input
    run_dir = Path(control.resume) if control.resume else new_run_dir(Path(control.out or suite.report_dir), suite.name)
    report = previous.report if previous else RunReport(suite=suite.name, run_dir=str(run_dir))
    threads = control.threads or suite.threads or default_threads()
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)  # restored when the run ends: a library call leaves no global change
    with open(run_dir / "events.jsonl", "a" if previous else "w", encoding="utf-8") as events:
        session = Session(suite, plugins, run_dir, report, events_file(events), log=control.log, executor=executor,
                          threads=threads, state=previous.state if previous else RunState())
        if resolved.preread is not None and suite.data is not None:
            session.caches.remember(suite.data, resolved.preread)
        plan = plan_models(suite)
        for note in resolved.notes:
            session.say(note)
        _open(session, resolved, recorded_options(overrides, control), plan)
        plugins.hook.bertprobe_session_start(session=session)
        try:
            _record_data(session, checked=resolved.preread is not None)
            executor.run_models(session, plan, resolved.params_by_probe)
            _gate(session)
            report.status = "completed"
        except KeyboardInterrupt as exc:
            _interrupted(session, exc)
            raise
        except BertprobeError as exc:
            report.status, report.message = "aborted", str(exc)
            exc.args = (f"{exc}; partial report in {run_dir}",)
            if getattr(exc, "problems", None):  # several problems: the CLI prints the headline above the list
                exc.headline = f"{getattr(exc, 'headline', '')} (partial report in {run_dir})"  # type: ignore[attr-defined]
            raise
        except Exception as exc:  # a bug: the report says so instead of staying 'running'
            report.status, report.message = "aborted", f"internal error: {type(exc).__name__}: {exc}"
            session.emit("run_traceback", traceback=traceback.format_exc())
            raise InternalError(f"internal error: {type(exc).__name__}: {exc}; partial report in {run_dir}; "
                                "rerun with --debug for the traceback") from exc
        finally:
            session.emit("run_finish", status=report.status, message=report.message, counts=report.counts(),
                         score=report.score())
            plugins.hook.bertprobe_session_finish(session=session, report=report)  # reports, index (run.reports)
            torch.set_num_threads(previous_threads)
            executor.close()
    return session
