"""Command-line overrides of a suite (--model, --data, --limit, --only, --executor, ...)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from bertprobe.data.dataset import DataSpec
from bertprobe.errors import (
    SuiteError,
)
from bertprobe.model.spec import ModelSpec
from bertprobe.registry import did_you_mean
from bertprobe.suite.schema import ExecutorSpec, GateSpec, Suite, unique_names


@dataclass
class SuiteOverrides:
    """What the command line changes in a suite before it runs (``validate`` applies the same). How a run
    is carried out (its folder, threads, resume, log, cancellation) is ``bertprobe.run.control.RunControl``."""

    models: tuple[str, ...] = ()
    data: str | None = None
    device: str | None = None
    dtype: str | None = None
    only: tuple[str, ...] = ()
    limit: int | None = None
    allow_pickle: bool = False
    seed: int | None = None
    sets: tuple[str, ...] = ()
    text: str | None = None
    text_pair: str | None = None
    label: str | None = None
    label_map: str | None = None  # "pos=positive,neg=negative"
    baseline: str | None = None  # gate every other model of the matrix against this one
    executor: str | None = None
    ray_address: str | None = None
    workers: int | None = None


def given_paths(options: SuiteOverrides) -> frozenset[str]:
    """What the flags replace in the suites they run (``model`` for --model, ``data`` for --data): the suite's
    own required ``${VAR}`` for that path need not be set."""
    return frozenset(name for name, flag in (("model", options.models), ("data", options.data)) if flag)


def parse_model_option(value: str) -> tuple[str | None, str]:
    """``NAME=PATH`` or a bare ``PATH`` (named later after its folder or hub id)."""
    name, sep, path = value.partition("=")
    if sep and name and "/" not in name and "\\" not in name:
        return name.strip(), path.strip()
    return None, value


def override_models(suite: Suite, given: tuple[str, ...]) -> tuple[ModelSpec, ...]:
    """Apply ``--model``: one bare PATH replaces every matrix model's path (variants keep their fields), and one
    bare URL, where the matrix holds served entries, their endpoint only (the checkpoints beside them stay:
    ``suites/serving.yaml --model http://...``); NAME=PATH with names of the matrix replace those models' paths;
    otherwise the given models are the matrix.
    """
    models = suite.models
    if not given:
        return models
    named = [parse_model_option(v) for v in given]  # (name or None, path) per --model
    names = {m.label for m in models}
    if len(named) == 1 and named[0][0] is None and models:
        path = named[0][1]
        if path.startswith(("http://", "https://")) and any(m.endpoint is not None for m in models):
            return tuple(at_path(m, path) if m.endpoint is not None else m for m in models)
        return tuple(at_path(m, path) for m in models)
    if all(name in names for name, _ in named):
        lookup = dict(named)
        return tuple(at_path(m, lookup[m.label]) if m.label in lookup else m for m in models)
    template = models[0].base if models else ModelSpec(path="")
    return tuple(at_path(replace(template, name=name), path) for name, path in named)


def at_path(model: ModelSpec, path: str) -> ModelSpec:
    """``model`` read from ``path``: a local folder or hub id, or an http(s) URL, which makes it a served model
    (its protocol and client settings kept from the entry). A served entry given a local path keeps its endpoint and
    takes the path as its twin: the checkpoint it serves (``suites/serving.yaml --model PATH``)."""
    if path.startswith(("http://", "https://")):
        return replace(model, path=path, endpoint=path)
    return replace(model, twin=path) if model.endpoint is not None else replace(model, path=path)


def parse_label_map(value: str) -> dict[str, str]:
    """``pos=positive,neg=negative`` -> ``{"pos": "positive", "neg": "negative"}``."""
    pairs: dict[str, str] = {}
    for item in value.split(","):
        data_label, sep, class_name = item.partition("=")
        if not sep or not data_label.strip() or not class_name.strip():
            raise SuiteError(f"--label-map {value}: expected DATA=CLASS pairs separated by commas, "
                             "such as pos=positive,neg=negative")
        pairs[data_label.strip()] = class_name.strip()
    return pairs


def column_option(value: str | None) -> str | int | None:
    """A column flag: a name, or a 0-based index given as digits."""
    return int(value) if value is not None and value.isdigit() else value


def _same_source(probe_data: DataSpec, suite_data: DataSpec) -> bool:
    """Whether a probe's own ``data:`` names the suite's source (same loader and path), e.g. to read fewer rows."""
    return probe_data.loader == suite_data.loader and probe_data.path == suite_data.path


def _redirected(data: DataSpec | None, options: SuiteOverrides) -> DataSpec | None:
    """``data`` with the column flags (--text, --text-pair, --label) and --label-map applied."""
    if data is None:
        return None
    columns = {"text": options.text, "text_pair": options.text_pair, "label": options.label}
    if any(columns.values()):
        data = data.with_overrides(**{k: column_option(v) for k, v in columns.items()})
    if options.label_map:
        data = replace(data, label_map={**data.label_map, **parse_label_map(options.label_map)})
    return data


def selected(probe_id: str, probe: str, only: tuple[str, ...], ids: set[str]) -> bool:
    """Whether ``--only`` picks the entry ``probe_id`` (of probe ``probe``): by its id; a probe name that is no
    entry's id picks every entry of that probe (``--only cloze`` runs cloze-builtin and cloze-ettinger), so
    ``--only slices`` runs the entry ``slices`` and never ``slices-anger``."""
    return probe_id in only or (probe in only and probe not in ids)


def apply_overrides(suite: Suite, options: SuiteOverrides) -> Suite:
    """Return the suite with --model/--data/--device/--dtype/--limit/--only applied and models named."""
    machine = {"device": options.device, "dtype": options.dtype, "allow_pickle": options.allow_pickle or None}
    models = tuple(unique_names([m.with_overrides(**machine) for m in override_models(suite, options.models)]))
    data = suite.data
    if options.data:
        data = replace(data, path=options.data, loader=data.loader) if data else DataSpec(path=options.data)
    if data and options.limit:
        data = replace(data, limit=options.limit)
    data = _redirected(data, options)
    probes = []
    for spec in suite.probes:
        if spec.model:
            spec = replace(spec, model=unique_names([spec.model.with_overrides(**machine)])[0])
        if spec.data and suite.data and _same_source(spec.data, suite.data):
            # the suite's data read another way (its own limit or split): --data and the column flags follow it
            moved = replace(spec.data, path=options.data) if options.data else spec.data
            spec = replace(spec, data=_redirected(moved, options))
        if spec.data and options.limit:
            spec = replace(spec, data=replace(spec.data, limit=options.limit))
        probes.append(spec)
    only = tuple(name.strip() for value in options.only for name in value.split(",") if name.strip())
    left_out: tuple[str, ...] = ()
    if only:
        known = {p.id for p in probes} | {p.probe for p in probes}
        for name in only:
            if name not in known:
                raise SuiteError(f"--only {name}: no such probe in the suite{did_you_mean(name, known)}; has: {', '.join(sorted(known))}")
        kept = [p for p in probes if selected(p.id, p.probe, only, {q.id for q in probes})]
        left_out = tuple(p.id for p in probes if p not in kept)
        probes = kept
    gate = suite.gate
    labels = [m.label for m in models]
    if options.baseline:
        if len(models) < 2:
            raise SuiteError(f"--baseline {options.baseline}: a gate needs two or more models; "
                             "give them with --model NAME=PATH (repeated)")
        gate = replace(gate, baseline=options.baseline) if gate else GateSpec(options.baseline)
    if gate is not None and gate.baseline not in labels:
        where = "--baseline" if options.baseline else "compare.baseline"
        after = " after --model" if options.models else ""
        raise SuiteError(f"{where}: no model named '{gate.baseline}'{after}{did_you_mean(gate.baseline, labels)}; "
                         f"models: {', '.join(labels)}")
    seed = suite.seed if options.seed is None else options.seed
    executor = suite.executor
    if options.executor or options.ray_address or options.workers:
        executor = replace(executor or ExecutorSpec(), **{k: v for k, v in (
            ("name", options.executor or ("ray" if options.ray_address else None)), ("address", options.ray_address),
            ("workers", options.workers)) if v})
    return replace(suite, model=models[0] if models else None, models=models, data=data, probes=tuple(probes),
                   seed=seed, executor=executor, gate=gate, left_out=suite.left_out + left_out)
