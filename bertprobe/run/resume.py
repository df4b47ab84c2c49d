"""Read a run folder back: what an interrupted run finished (for --resume), and its report rebuilt."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from bertprobe.errors import (
    BertprobeError,
    SuiteError,
)
from bertprobe.results import RunReport, jsonable, read_events
from bertprobe.run.control import RunControl
from bertprobe.run.state import RunState
from bertprobe.suite.overrides import SuiteOverrides
from bertprobe.suite.schema import Suite


def absolute_source(source: str) -> str:
    path = Path(source)
    return str(path.resolve()) if path.is_file() else source


def suite_fingerprint(suite: Suite) -> dict[str, str]:
    """A short hash of each part of the resolved suite (models, data, probes, ...), to tell what changed."""
    plain = jsonable(asdict(suite))  # asdict descends into the nested specs
    plain["compare"] = plain.pop("gate")  # named as in the YAML (and in the runs recorded before the field's rename)
    for model in plain.get("models") or []:  # model.stride's default was 32 before it became None (the task's
        if isinstance(model, dict) and model.get("stride") is None:  # own): runs recorded then still resume
            model["stride"] = 32
    for holder in [plain, *plain.get("probes", [])]:  # which columns were named by hand does not change the data
        if isinstance(holder.get("data"), dict):
            holder["data"].pop("named", None)
    return {name: hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:16]
            for name, value in plain.items()
            if name not in ("source", "description", "model", "executor", "problems", "set_by")}  # set_by: of variables


def recorded_options(overrides: SuiteOverrides, control: RunControl) -> dict[str, Any]:
    """The command-line overrides and run control, kept in run_start so ``--resume RUN_DIR`` alone can
    rebuild the run."""
    values = {f.name: getattr(overrides, f.name) for f in fields(overrides)}
    values.update(control.recorded())
    return {k: v for k, v in values.items() if v not in (None, (), False)}


def replay_options(overrides: SuiteOverrides, control: RunControl,
                   recorded: dict[str, Any]) -> tuple[SuiteOverrides, RunControl]:
    """``overrides`` and ``control`` with a run's recorded options (``recorded_run``) put back (lists as the
    tuples the command line gives; ``sets`` are applied when the suite is loaded)."""
    plain = {k: tuple(v) if isinstance(v, list) else v for k, v in recorded.items()}
    over = {k: v for k, v in plain.items() if k in {f.name for f in fields(SuiteOverrides)} and k != "sets"}
    ctrl = {k: v for k, v in plain.items() if k in ("out", "threads")}
    return replace(overrides, **over), replace(control, **ctrl)


def resume_environment(variables: dict[str, str | None], environ: dict[str, str]) -> dict[str, str]:
    """The environment a resumed suite is expanded with: the run's ``${VAR}``s as they were (one unset then
    is unset now), the rest of this shell as it is."""
    env = {k: v for k, v in environ.items() if k not in variables}
    env.update({k: v for k, v in variables.items() if v is not None})
    return env


def recorded_run(run_dir: Path) -> tuple[str, dict[str, Any], dict[str, str | None]]:
    """The suite file, command-line options and ``${VAR}`` values (None: unset) a run folder was started
    with (for ``--resume`` alone, which expands the suite with them, whatever this shell holds)."""
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
    variables = first.get("variables") if isinstance(first.get("variables"), dict) else {}
    return str(first["source"]), dict(first.get("options") or {}), dict(variables)


@dataclass
class PreviousRun:
    """What an interrupted or aborted run folder already holds, for ``--resume``: its report and its state,
    both folded from its events."""

    report: RunReport
    state: RunState


def _changed_variables(old: dict[str, str | None], new: dict[str, str | None]) -> str:
    def shown(value: str | None) -> str:
        return "unset" if value is None else repr(value)

    changes = [f"${{{k}}} was {shown(old.get(k))}, now {shown(new.get(k))}"
               for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return f"; {', '.join(changes)}" if changes else ""


def read_previous_run(run_dir: Path, parts: dict[str, str], variables: dict[str, str | None] | None = None) -> PreviousRun:
    """Read a run folder to resume; SuiteError when it cannot be (missing, completed, or the suite changed,
    naming each ``${VAR}`` whose value changed since the run)."""
    events = run_dir / "events.jsonl"
    if not events.is_file():
        raise SuiteError(f"--resume {run_dir}: not a bertprobe run folder (no events.jsonl)")
    records = read_events(events)  # read once: the report and the finished units both come from it
    report = RunReport.fold(records, run_dir)
    if report.status == "completed":
        raise SuiteError(f"--resume {run_dir}: the run completed; nothing to resume (start a new run)")
    old_parts: dict[str, str] = {}
    old_variables: dict[str, str | None] = {}
    for event in records:
        if event.get("event") == "run_start":
            old_parts = dict(event.get("suite_parts") or {})
            old_variables = dict(event.get("variables") or {}) if "variables" in event else dict(variables or {})
    changed = sorted(k for k in set(parts) | set(old_parts) if parts.get(k) != old_parts.get(k))
    if changed:
        raise SuiteError(f"--resume {run_dir}: the suite changed since the run ({', '.join(changed)} differ"
                         f"{_changed_variables(old_variables, variables or {})}); "
                         "give the same suite and options, or start a new run")
    return PreviousRun(report, RunState.fold(records))


def rebuild_report(run_dir: Path) -> RunReport:
    """The report of a run folder, rebuilt from its events.jsonl."""
    events = Path(run_dir) / "events.jsonl"
    if not events.is_file():
        raise BertprobeError(f"'{run_dir}' has no events.jsonl; is it a bertprobe run folder?")
    return RunReport.from_events(events)
