"""Suites: YAML files (safe_load only) that pick a target, data and probes with expectations."""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Collection, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from bertprobe.data.dataset import COLUMN_KEYS, DataSpec
from bertprobe.errors import SuiteError, problems_error
from bertprobe.model.spec import ModelSpec
from bertprobe.params import parse_params
from bertprobe.registry import did_you_mean
from bertprobe.results import Expectation
from bertprobe.suite.paths import from_env, resolve_in
from bertprobe.suite.schema import (
    DEFAULT_SIGNIFICANCE,
    DEFAULT_TOLERANCE,
    ExecutorSpec,
    GateSpec,
    ProbeSpec,
    Suite,
)
from bertprobe.variables import VAR as _VAR
from bertprobe.variables import expand_vars

_HEADER_PATH = re.compile(r"(^|\.)(models?(\[\d+\])?)\.headers\.")  # model.headers.X, models[1].headers.X


TOP_KEYS = ("suite", "description", "model", "models", "data", "seed", "threads", "probes", "report", "compare",
            "executor")


COMPARE_KEYS = ("baseline", "tolerance", "significance")


PROBE_KEYS = ("probe", "id", "params", "expect", "model", "data")


REPORT_KEYS = ("dir", "formats")


EXPECT_KEYS = ("min", "max", "interval")


def _executor(raw: Any, path: str) -> ExecutorSpec:
    """``executor: ray`` or ``executor: {name: ray, address: auto, workers: 2, max_retries: 2, resources: {...}}``."""
    if isinstance(raw, str):
        raw = {"name": raw}
    spec = parse_params(ExecutorSpec, _mapping(raw, path), path)
    if spec.workers is not None and spec.workers < 1:
        raise SuiteError(f"{path}.workers: expected a number >= 1, got {spec.workers}")
    if spec.max_retries < 0:
        raise SuiteError(f"{path}.max_retries: expected a number >= 0, got {spec.max_retries}")
    for key, value in spec.resources.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise SuiteError(f"{path}.resources.{key}: expected a number >= 0 (e.g. num_cpus: 2, num_gpus: 1), got {value!r}")
    return spec


class _RecordingEnv(Mapping[str, str]):
    """The environment as a suite reads it, remembering each variable asked for and its value (None:
    unset), so a run can record what its ``${VAR}``s were and ``--resume`` can expand them the same way."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.read: dict[str, str | None] = {}
        self.set_at: dict[str, tuple[str, ...]] = {}  # suite path -> the variables set in the environment it used

    def __getitem__(self, name: str) -> str:
        value = self.env[name] if name in self.env else None
        self.read[name] = value
        if value is None:
            raise KeyError(name)
        return value

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        value = self.env.get(name)
        self.read[name] = value
        return default if value is None else value

    def __contains__(self, name: object) -> bool:
        return name in self.env

    def __iter__(self) -> Any:
        return iter(self.env)

    def __len__(self) -> int:
        return len(self.env)


def interpolate(value: Any, env: Mapping[str, str], path: str = "") -> Any:
    """Expand ``${VAR}``, ``${VAR:-default}`` (unset or empty) and ``${VAR-default}`` (unset) in strings.

    A scalar that is exactly one ``${...}`` is re-read as YAML, so ``${LIMIT:-100}`` becomes an int.
    """
    if isinstance(value, dict):
        return {k: interpolate(v, env, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env, f"{path}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value
    if _HEADER_PATH.search(path):  # a served model's headers: read when it loads, never recorded (tokens)
        return value

    def unset(name: str) -> str:
        flag = next((f", pass {f}," for k, f in (("model", "--model PATH"), ("data", "--data PATH"))
                     if re.fullmatch(rf"{k}s?(\[\d+\])?(\.path)?", path)), "")
        raise SuiteError(f"{path}: environment variable {name} is not set; set it{flag} or write ${{{name}:-default}}")

    whole = _VAR.fullmatch(value)
    result = expand_vars(value, env, unset)
    used = tuple(m.group(1) for m in _VAR.finditer(value) if env.get(m.group(1)))
    if used and isinstance(getattr(env, "set_at", None), dict):
        env.set_at[path] = used  # type: ignore[attr-defined]
    if whole:
        try:
            parsed = yaml.safe_load(result) if result else result
        except yaml.YAMLError:
            return result
        return parsed if isinstance(parsed, (int, float, bool)) else result
    return result


def _mapping(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SuiteError(f"{path}: expected a mapping, got {type(value).__name__}")
    return value


def _check_keys(mapping: dict[str, Any], allowed: tuple[str, ...], path: str, problems: list[str] | None = None) -> None:
    """Every key of ``mapping`` is allowed; with ``problems``, each unknown one is appended there (and ignored)."""
    for key in mapping:
        if key not in allowed:
            where = f"{path}.{key}" if path else str(key)
            message = f"{where}: unknown key{did_you_mean(str(key), allowed)}; allowed: {', '.join(allowed)}"
            if problems is None:
                raise SuiteError(message)
            problems.append(message)


def _model(raw: Any, path: str, base: ModelSpec | None = None, problems: list[str] | None = None) -> ModelSpec:
    if isinstance(raw, str):
        raw = {"path": raw}
    raw = dict(_mapping(raw, path))
    if base is not None:  # a probe override keeps the suite's device and dtype unless it sets them
        raw.setdefault("device", base.device)
        raw.setdefault("dtype", base.dtype)
    if "path" not in raw and raw.get("endpoint"):
        raw["path"] = raw["endpoint"]  # a served model: its URL is what names it in messages
    if "path" not in raw:
        raise SuiteError(f"{path}.path: required (a hub id or a local model directory; or endpoint: URL for a served model)")
    return parse_params(ModelSpec, raw, path, problems)


def _models(raw: Any, path: str, problems: list[str] | None = None) -> tuple[ModelSpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise SuiteError(f"{path}: expected a non-empty list of models, e.g. '- {{name: fp32, path: ./model}}'")
    specs = [_model(item, f"{path}[{i}]", problems=problems) for i, item in enumerate(raw)]
    seen: set[str] = set()
    for i, spec in enumerate(specs):
        if spec.name and spec.name in seen:
            raise SuiteError(f"{path}[{i}].name: '{spec.name}' is used twice; give each model its own name")
        if spec.name is not None and not re.fullmatch(r"[A-Za-z0-9_.+-]+", spec.name):
            raise SuiteError(f"{path}[{i}].name: {spec.name!r} must be a short name (letters, digits, '.', '_', '+', '-')")
        seen.add(spec.name or "")
    return tuple(specs)  # unnamed models are named after their folder when the run starts (unique_names)


def _gate(raw: Any, path: str) -> GateSpec:
    raw = _mapping(raw, path)
    _check_keys(raw, COMPARE_KEYS, path)
    baseline = raw.get("baseline")
    if not isinstance(baseline, str):
        raise SuiteError(f"{path}.baseline: required, the name of the model the others are judged against")
    # the baseline is checked against the models after --model applies (suite.overrides.apply_overrides)
    tolerance = raw.get("tolerance", DEFAULT_TOLERANCE)
    values = tolerance.values() if isinstance(tolerance, dict) else [tolerance]
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise SuiteError(f"{path}.tolerance: expected a number >= 0 or a map of metric: number, got {tolerance!r}")
    if isinstance(tolerance, dict):
        tolerance = {str(k): float(v) for k, v in tolerance.items()}
    significance = raw.get("significance", DEFAULT_SIGNIFICANCE)  # null: judge on the delta alone
    if significance is not None and (isinstance(significance, bool) or not isinstance(significance, (int, float))
                                     or not 0 < significance < 1):
        raise SuiteError(f"{path}.significance: expected a level in (0, 1) such as 0.05, got {significance!r}")
    return GateSpec(baseline, tolerance, None if significance is None else float(significance))


def _data(raw: Any, path: str, problems: list[str] | None = None) -> DataSpec:
    if isinstance(raw, str):
        raw = {"path": raw}
    raw = _mapping(raw, path)
    if "named" in raw:
        raise SuiteError(f"{path}.named: not a data key; name the columns with text, text_pair, label and choices")
    spec = parse_params(DataSpec, raw, path, problems)
    return replace(spec, named=frozenset(k for k in COLUMN_KEYS if raw.get(k) is not None))


def _expectations(raw: Any, path: str, problems: list[str] | None = None) -> tuple[tuple[Expectation, ...], tuple[str, ...]]:
    """The suite's own expectations, and the metrics (patterns allowed) whose default it turns off
    (``METRIC: off``; ``"*": off`` turns every default of the probe off)."""
    out, off = [], []
    for metric, bounds in _mapping(raw, path).items():
        where = f"{path}.{metric}"
        if bounds is False or (isinstance(bounds, str) and bounds.lower() == "off"):
            off.append(str(metric))
            continue
        bounds = _mapping(bounds, where)
        _check_keys(bounds, EXPECT_KEYS, where, problems)
        if not {"min", "max"} & set(bounds):
            raise SuiteError(f"{where}: give min and/or max (or 'off' to turn the probe's default off)")
        for key, value in bounds.items():
            if key == "interval":
                if not isinstance(value, bool):
                    raise SuiteError(f"{where}.interval: expected true or false, got {value!r}")
            elif isinstance(value, bool) or not isinstance(value, (int, float)):
                raise SuiteError(f"{where}.{key}: expected a number, got {value!r}")
        out.append(Expectation(str(metric), bounds.get("min"), bounds.get("max"), interval=bool(bounds.get("interval"))))
    return tuple(out), tuple(off)


def _resolve_suite_paths(doc: dict[str, Any], raw: dict[str, Any], base: Path, env: Mapping[str, str]) -> None:
    """Make the suite's own relative paths relative to its folder (see bertprobe.suite.paths)."""

    def model_or_data(parent: dict[str, Any], parent_raw: Any, key: str) -> None:
        value = parent.get(key)
        if isinstance(value, str):
            resolve_in(parent, parent_raw, key, base, env)
        elif isinstance(value, dict):
            resolve_in(value, parent_raw.get(key) if isinstance(parent_raw, dict) else None, "path", base, env)

    model_or_data(doc, raw, "model")
    model_or_data(doc, raw, "data")
    if isinstance(doc.get("models"), list):
        raws = raw.get("models") if isinstance(raw.get("models"), list) else []
        for i, entry in enumerate(doc["models"]):
            holder, holder_raw = {"m": entry}, {"m": raws[i] if i < len(raws) else None}
            model_or_data(holder, holder_raw, "m")
            doc["models"][i] = holder["m"]
    if isinstance(doc.get("report"), dict):
        resolve_in(doc["report"], raw.get("report"), "dir", base, env, always=True)
    if isinstance(doc.get("probes"), list):
        raws = raw.get("probes") if isinstance(raw.get("probes"), list) else []
        for i, entry in enumerate(doc["probes"]):
            entry_raw = raws[i] if i < len(raws) and isinstance(raws[i], dict) else {}
            if isinstance(entry, dict):
                model_or_data(entry, entry_raw, "model")
                model_or_data(entry, entry_raw, "data")


def parse_suite(raw: Any, source: str = "<suite>", env: Mapping[str, str] | None = None,
                base_dir: str | Path | None = None, defer: bool = False) -> Suite:
    """Build a Suite from parsed YAML, checking every key; every problem found is reported at once.

    With ``base_dir`` (the suite file's folder), relative paths written in the suite resolve against it.
    With ``defer``, the problems that leave a usable suite (unknown keys, bad values: their defaults stand)
    are kept in ``Suite.problems`` for ``validate_suite`` to report with everything else it finds.
    """
    env = _RecordingEnv(os.environ if env is None else env)
    doc = interpolate(_mapping(raw, "suite file"), env)
    if base_dir is not None:
        _resolve_suite_paths(doc, raw, Path(base_dir), env)
    problems: list[str] = []

    def attempt(check: Any, *args: Any, default: Any = None) -> Any:
        try:
            return check(*args)
        except SuiteError as exc:
            problems.append(str(exc))
            return default

    def give_up(message: str) -> SuiteError:
        problems.append(message)
        return _suite_error(problems)

    _check_keys(doc, TOP_KEYS, "", problems)
    name = doc.get("suite") or Path(source).stem
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        problems.append(f"suite: {name!r} must be a short name (letters, digits, '.', '_', '-')")
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(source).stem) or "suite"
    if doc.get("model") is not None and doc.get("models") is not None:
        problems.append("models: give either model: (one model) or models: (a matrix), not both")
    if doc.get("models") is not None:
        models = attempt(_models, doc["models"], "models", problems, default=())
    elif doc.get("model") is not None:
        one = attempt(_model, doc["model"], "model", None, problems)
        models = (one,) if one is not None else ()
    else:
        models = ()
    model = models[0] if models else None
    gate = attempt(_gate, doc["compare"], "compare") if doc.get("compare") is not None else None
    data = attempt(_data, doc["data"], "data", problems) if doc.get("data") is not None else None
    seed = doc.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        problems.append(f"seed: expected an integer, got {seed!r}")
        seed = 0
    threads = doc.get("threads")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        problems.append(f"threads: expected a number of CPU threads >= 1, got {threads!r}")
        threads = None
    report = attempt(_mapping, doc.get("report") or {}, "report", default={})
    _check_keys(report, REPORT_KEYS, "report", problems)
    formats = report.get("formats", ["json", "markdown", "html"])
    if not isinstance(formats, list) or not all(isinstance(f, str) for f in formats):
        problems.append("report.formats: expected a list of names such as [json, markdown, html]")
        formats = ["json", "markdown", "html"]
    entries = doc.get("probes")
    if entries is None and any("(did you mean 'probes'?)" in p for p in problems):
        raise _suite_error(problems)  # the misspelt key says it all
    if not isinstance(entries, list) or not entries:
        raise give_up("probes: expected a non-empty list of probes, e.g. '- probe: accuracy'")
    probes, ids = [], set()
    for i, entry in enumerate(entries):
        path = f"probes[{i}]"
        entry = attempt(_mapping, entry, path)
        if entry is None:
            continue
        _check_keys(entry, PROBE_KEYS, path, problems)
        probe = entry.get("probe")
        if not isinstance(probe, str):
            problems.append(f"{path}.probe: required, the name of a probe (see 'bertprobe list')")
            continue
        pid = str(entry.get("id") or probe)
        if pid in ids:
            problems.append(f"{path}.id: '{pid}' is used twice; give each run of a probe its own id")
            continue
        ids.add(pid)
        override_model = attempt(_model, entry["model"], f"{path}.model", model, problems) if entry.get("model") else None
        override_data = attempt(_data, entry["data"], f"{path}.data", problems) if entry.get("data") else None
        params = entry.get("params") or {}
        if attempt(_mapping, params, f"{path}.params") is None:
            params = {}
        expect, expect_off = attempt(_expectations, entry.get("expect") or {}, f"{path}.expect", problems,
                                     default=((), ()))
        raw_entry = raw["probes"][i] if isinstance(raw.get("probes"), list) and isinstance(raw["probes"][i], dict) else {}
        raw_params = raw_entry.get("params") if isinstance(raw_entry.get("params"), dict) else {}
        env_params = frozenset(k for k, v in raw_params.items() if from_env(v, env))
        probes.append(ProbeSpec(probe, pid, params, expect, override_model, override_data, path,
                                None if base_dir is None else str(base_dir), env_params, expect_off))
    executor = attempt(_executor, doc["executor"], "executor") if doc.get("executor") is not None else None
    if problems and not defer:
        raise _suite_error(problems)
    return Suite(
        name=name,
        model=model,
        data=data,
        probes=tuple(probes),
        models=models,
        gate=gate,
        seed=seed,
        threads=threads,
        description=str(doc.get("description") or ""),
        report_dir=str(report.get("dir", "reports")),
        formats=tuple(formats),
        source=source,
        executor=executor,
        variables=dict(sorted(env.read.items())),
        set_by=dict(env.set_at),
        problems=tuple(problems),
    )


def _suite_error(problems: list[str], source: str = "") -> SuiteError:
    """One SuiteError for the problems found (see ``bertprobe.errors.problems_error``)."""
    if len(problems) == 1:
        return SuiteError(f"{source}: {problems[0]}" if source else problems[0])
    return problems_error(problems, SuiteError, source)  # type: ignore[return-value]


def apply_sets(raw: dict[str, Any], assignments: tuple[str, ...] | list[str],
               problems: list[str] | None = None) -> dict[str, Any]:
    """Apply ``--set PATH=VALUE`` to the YAML before it is parsed; VALUE is read as YAML (``2``, ``[a, b]``).

    PATH is dotted: ``seed``, ``data.limit``, ``probes.ID.params.length`` (a probe by id, or by name
    when one probe has it), ``models.NAME.dtype`` (a model by name). Missing mappings are created, so
    ``probes.universal-trigger.params.length=2`` works on a probe without params. With ``problems``, a bad
    assignment is appended there and skipped instead of raising.
    """
    for item in assignments:
        try:
            _apply_set(raw, item)
        except SuiteError as exc:
            if problems is None:
                raise
            problems.append(str(exc))
    return raw


def _apply_set(raw: dict[str, Any], item: str) -> None:
    """One ``--set PATH=VALUE`` (see ``apply_sets``)."""
    key, sep, text = item.partition("=")
    if not sep or not key:
        raise SuiteError(f"--set {item}: expected PATH=VALUE, e.g. probes.universal-trigger.params.length=2")
    try:
        value = yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError:
        value = text
    parts = key.split(".")
    node: Any = raw
    for i, part in enumerate(parts[:-1]):
        where = ".".join(parts[: i + 1])
        if isinstance(node, list):
            matches = [e for e in node if isinstance(e, dict) and (e.get("id") == part or e.get("name") == part)]
            matches = matches or [e for e in node if isinstance(e, dict) and e.get("probe") == part and "id" not in e]
            if len(matches) != 1:
                names = [str(e.get("id") or e.get("name") or e.get("probe")) for e in node if isinstance(e, dict)]
                raise SuiteError(f"--set {item}: no single entry '{part}' under {'.'.join(parts[:i])}"
                                 f"{did_you_mean(part, names)}; entries: {', '.join(names)}")
            node = matches[0]
            continue
        if not isinstance(node, dict):
            raise SuiteError(f"--set {item}: {where} is not a mapping")
        if node.get(part) is None:
            node[part] = [] if part in ("probes", "models") else {}
        node = node[part]
    if not isinstance(node, dict):
        raise SuiteError(f"--set {item}: {'.'.join(parts[:-1])} is not a mapping")
    node[parts[-1]] = value


MAX_SUITE_BYTES = 1 << 20  # a suite is a page of YAML, not a data file


MAX_SUITE_VALUES = 100_000  # values after YAML aliases are expanded (a "billion laughs" has 10^9)


MAX_SUITE_DEPTH = 64


def check_shape(raw: Any, source: str) -> None:
    """Bound what a suite may expand to before anything walks or copies it: aliases that multiply
    (billion laughs), recursive aliases, and absurd nesting are a one-line SuiteError."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: Any, depth: int) -> int:
        if depth > MAX_SUITE_DEPTH:
            raise SuiteError(f"{source}: nested deeper than {MAX_SUITE_DEPTH} levels; a suite is a short mapping")
        if not isinstance(node, (dict, list)):
            return 1
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise SuiteError(f"{source}: a YAML alias refers to itself (a recursive structure); remove the loop")
        active.add(key)
        children = list(node.values()) if isinstance(node, dict) else node
        total = 1
        for child in children:
            total += size(child, depth + 1)
            if total > MAX_SUITE_VALUES:
                raise SuiteError(f"{source}: expands to more than {MAX_SUITE_VALUES:,} values (YAML aliases that "
                                 "multiply, such as a 'billion laughs'); refusing to read it")
        active.discard(key)
        sizes[key] = total
        return total

    size(raw, 0)


def _lift(value: Any, env: Mapping[str, str]) -> Any:
    """``value`` with each required ``${VAR}`` (no default) that ``env`` lacks made optional (``${VAR-}``)."""
    if not isinstance(value, str):
        return value
    return _VAR.sub(lambda m: f"${{{m.group(1)}-}}" if m.group(2) is None and env.get(m.group(1)) is None
                    else m.group(0), value)


def lift_given(raw: dict[str, Any], given: Collection[str], env: Mapping[str, str]) -> dict[str, Any]:
    """The YAML with the paths a flag replaces (``given``: ``model`` for --model, ``data`` for --data) freed of
    their required ``${VAR}``s: ``run suite.yaml --data FILE`` needs no ``ML_DATA`` when the suite's data path
    is ``${ML_DATA}``. A probe's own data path lifts with the suite's when it names the same source."""
    raw = copy.deepcopy(raw)

    def lift_path(holder: Any, key: str) -> None:
        value = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(value, str):
            holder[key] = _lift(value, env)
        elif isinstance(value, dict) and "path" in value:
            value["path"] = _lift(value["path"], env)

    if "model" in given:
        lift_path(raw, "model")
        models = raw.get("models") if isinstance(raw.get("models"), list) else []
        for i, entry in enumerate(models):
            holder = {"m": entry}
            lift_path(holder, "m")
            models[i] = holder["m"]
    if "data" in given:
        source = raw.get("data")
        source = source.get("path") if isinstance(source, dict) else source
        lift_path(raw, "data")
        for entry in raw.get("probes") if isinstance(raw.get("probes"), list) else []:
            own = entry.get("data") if isinstance(entry, dict) else None
            if isinstance(own, dict) and source is not None and own.get("path") == source:
                lift_path(entry, "data")
    return raw


def load_suite(path: str | Path, env: Mapping[str, str] | None = None, sets: tuple[str, ...] = (),
               given: Collection[str] = (), defer: bool = False) -> Suite:
    """Read and parse a suite file (with ``--set`` assignments applied); every problem is a one-line SuiteError.

    ``given`` names what flags replace (``model``, ``data``): their paths need no required ``${VAR}``.
    ``defer``: problems that leave a usable suite (bad ``--set``s, unknown keys, bad values) are kept in
    ``Suite.problems`` for ``validate_suite`` to report together with everything else (``run`` and ``validate``)."""
    file = Path(path)
    if not file.is_file():
        raise SuiteError(f"suite file '{path}' not found; try 'bertprobe run suites/sst2.yaml'")
    if file.stat().st_size > MAX_SUITE_BYTES:
        raise SuiteError(f"{path}: {file.stat().st_size:,} bytes is too large for a suite (at most {MAX_SUITE_BYTES:,})")
    try:
        raw = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise SuiteError(f"{path}: YAML syntax error{where}: {exc.problem or exc.context}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise SuiteError(f"{path}: not a readable YAML file: {exc}") from None
    if raw is None:
        raise SuiteError(f"{path}: the suite file is empty")
    check_shape(raw, str(path))
    set_problems: list[str] = []
    if sets and isinstance(raw, dict):
        raw = apply_sets(raw, sets, set_problems if defer else None)
    if given and isinstance(raw, dict):
        raw = lift_given(raw, given, os.environ if env is None else env)
    try:
        suite = parse_suite(raw, str(path), env, base_dir=file.resolve().parent, defer=defer)
    except SuiteError as exc:
        raise _suite_error(set_problems + list(getattr(exc, "problems", None) or [str(exc)]), str(path)) from None
    return replace(suite, problems=(*set_problems, *suite.problems)) if set_problems else suite
