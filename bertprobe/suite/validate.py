"""Everything that can be checked before a model loads, reported at once.

``validate_suite`` checks the probes that will run (names, params, expected metrics), the reporters, the
data (files exist and are files, named loaders exist), the local model folders, the files probes read
themselves (``Probe.input_problems``) and their inputs against each local model's tokenizer
(``Probe.tokenizer_problems``), and class names that probes take as params (``target_label: postive``) against
each model's ``config.json`` (a local folder's, or a hub id's as the local Hugging Face cache holds it);
``read_local_data`` reads a local data file and checks it against the probes and each local model's
classes. No weights are read.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from bertprobe.data.beir import is_beir_folder
from bertprobe.data.classes import find_class
from bertprobe.data.dataset import LABEL_LIKE, Dataset, DataSpec, is_local, is_saved_dataset
from bertprobe.data.prepare import read_data
from bertprobe.errors import BertprobeError, DataError, Problems, SuiteError, TargetError
from bertprobe.model.loading import looks_local
from bertprobe.model.spec import ModelSpec, resolve_model_param, same_model
from bertprobe.params import parse_params
from bertprobe.registry import Registry, did_you_mean
from bertprobe.suite.paths import resolve_path_value
from bertprobe.suite.schema import Suite


def _check_data(spec: DataSpec, where: str, loaders: Any, problems: list[str]) -> None:
    if spec.loader is not None:
        if spec.loader not in loaders:
            names = list(loaders.names())
            problems.append(f"{where}.loader: no data loader '{spec.loader}'{did_you_mean(spec.loader, names)}; "
                            f"loaders: {', '.join(names) or 'none'} (see 'bertprobe list')")
        elif spec.path and is_local(spec.path) and not Path(spec.path).expanduser().exists():
            problems.append(f"{where}.path: '{spec.path}' does not exist")
        return
    if not spec.path or not is_local(spec.path):
        return
    path = Path(spec.path).expanduser()
    if not path.exists():
        problems.append(f"{where}.path: data file '{spec.path}' does not exist; pass --data PATH to a csv/tsv/jsonl file")
    elif path.is_dir() and not is_saved_dataset(path) and not is_beir_folder(path):
        problems.append(f"{where}.path: '{spec.path}' is a folder, not a data file; name a csv/tsv/jsonl file in it "
                        "(a folder is read only where datasets' save_to_disk wrote it, or in BEIR's layout: "
                        "corpus.jsonl, queries.jsonl, qrels/)")


def _model_folder(spec: ModelSpec) -> Path | None:
    """Where a model's config.json and tokenizer files are, without loading it: a local folder, an ``.onnx`` file's
    layout folder, a hub id's snapshot in the local Hugging Face cache (None for an endpoint or a hub id not
    cached)."""
    from bertprobe.model.onnx import layout_folder, onnx_file

    if spec.endpoint is not None or spec.path is None:
        return None
    if not looks_local(spec.path):
        cached = _cached_config(spec)
        return cached.parent if cached is not None else None
    graph = onnx_file(spec.path)
    return layout_folder(graph) if graph is not None else Path(spec.path).expanduser()


def _config(spec: ModelSpec) -> dict[str, Any] | None:
    """A model's config.json as ``_model_folder`` finds it (None where there is none, or a file loading will
    complain about)."""
    folder = _model_folder(spec)
    config = folder / "config.json" if folder is not None else None
    if config is None or not config.is_file():
        return None
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None  # loading will say what is wrong with it
    return data if isinstance(data, dict) else None


def _config_labels(spec: ModelSpec, data: dict[str, Any] | None = None) -> list[str] | None:
    """Class names from a model's config.json (None when unknown: a hub id not cached, no id2label)."""
    data = _config(spec) if data is None else data
    if data is None:
        return None
    id2label = data.get("id2label")
    if not isinstance(id2label, dict) or not id2label:
        return None
    try:
        return [str(id2label[k]) for k in sorted(id2label, key=int)]
    except (TypeError, ValueError):
        return None


def _check_model(spec: ModelSpec, where: str, problems: list[str]) -> None:
    if spec.endpoint is not None:  # a served model: its twin is the local folder to check
        from bertprobe.model.endpoint import check_endpoint_spec

        problems.extend(f"{where}.{problem}" for problem in check_endpoint_spec(spec))
        if spec.twin and looks_local(spec.twin) and not Path(spec.twin).expanduser().is_dir():
            problems.append(f"{where}.twin: model folder '{spec.twin}' does not exist; name the checkpoint the "
                            "endpoint serves, or leave twin out")
        return
    if not looks_local(spec.path):
        return
    path = Path(spec.path).expanduser()
    if not path.exists():
        problems.append(f"{where}.path: model folder '{spec.path}' does not exist; pass --model PATH")
    elif not path.is_dir() and path.suffix != ".onnx":
        problems.append(f"{where}.path: '{spec.path}' is not a folder; a model is a folder with config.json and weights "
                        "(or an .onnx file with them beside it)")
    from bertprobe.model.onnx import folder_graphs, graph_problem, onnx_file, onnx_runtime, runs_onnx

    graphs = folder_graphs(path)
    if len(graphs) > 1 and onnx_file(spec.path) is None:
        problems.append(f"{where}.path: '{spec.path}' holds {len(graphs)} ONNX graphs "
                        f"({', '.join(g.name for g in graphs)}) and no model.onnx: name the one to audit, e.g. {graphs[0]}")
    if path.exists() and runs_onnx(spec):
        try:
            onnx_runtime()
        except BertprobeError as exc:
            problems.append(f"{where}: {exc}")
    graph = onnx_file(spec.path) if path.exists() else None
    if graph is not None and (problem := graph_problem(graph)):
        problems.append(f"{where}.path: {problem}")


def _check_labels(suite: Suite, cls_of: dict[str, Any], params: dict[str, Any], problems: list[str]) -> None:
    """Every class name a probe's entry gives (``Probe.named_labels``: params such as ``target_label``, per-label
    expectations such as ``recall_joy``, slices' ``metric: label:joy``, behaviour templates' labels) against
    the classes in each local model's config.json; no weights are read."""
    for spec in suite.probes:
        cls = cls_of.get(spec.id)
        if cls is None:
            continue  # params that did not parse (None) still leave the expectations' names to check
        named = cls.named_labels(params.get(spec.id), [e.metric for e in spec.expect])
        models = [spec.model] if spec.model is not None else list(suite.models)
        for where, value in named:
            for model in models:
                labels = _config_labels(model)
                # a token classifier's classes for these names are also its entity types (B-ORG, I-ORG: ORG)
                labels = labels if labels is None else labels + sorted(
                    {lab[2:] for lab in labels if len(lab) > 2 and lab[1] in "-_"} - set(labels))
                label_map = suite.data.label_map if suite.data is not None else None
                if labels is None:
                    continue
                match = find_class(str(value), labels, label_map)
                if where.startswith("expect.") and str(value) not in labels:
                    # a metric's name holds the model's class name as it is (recall_ORG): no case, alias or map
                    if match is not None:
                        metric = where.split(".", 1)[1]
                        exact = metric[: len(metric) - len(str(value))] + labels[match.index]
                        problems.append(f"{spec.path}.{where}: the model's metric is named {exact!r} (its class is "
                                        f"{labels[match.index]!r}, written exactly in a metric's name); write "
                                        f"expect.{exact}")
                        continue
                elif match is not None:
                    continue
                if where.startswith("params.") and "[" not in where:
                    fix = f"pass --set probes.{spec.id}.{where}=CLASS"
                elif where.startswith("expect."):
                    fix = f"drop the expectation with --set probes.{spec.id}.{where}=off"
                else:
                    fix = f"edit {where} in the suite"
                problems.append(f"{spec.path}.{where}: {value!r} is not a class of {model.path}"
                                f"{did_you_mean(str(value), labels)}; classes: {', '.join(labels)}; map it with "
                                f"--label-map {value}=CLASS, {fix}, or leave the probe out with --only")


def validate_suite(suite: Suite, plugins: Any, found: Problems | None = None) -> dict[str, Any]:
    """Check the suite (as ``--only`` leaves it: the probes that will run); raise one SuiteError listing every
    problem, with those loading left in ``suite.problems``, or add them to ``found``. Returns parsed params
    by probe id."""
    problems: list[str] = list(suite.problems)
    params = validate_probes(suite, plugins.probes, plugins.reporters, problems, plugins.sections)
    for i, model in enumerate(suite.models):
        _check_model(model, f"models[{i}]" if len(suite.models) > 1 else "model", problems)
    if suite.data is not None:
        _check_data(suite.data, "data", plugins.datasets, problems)
    cls_of = {}
    for spec in suite.probes:
        if spec.data is not None:
            _check_data(spec.data, f"{spec.path}.data", plugins.datasets, problems)
        if spec.model is not None:
            _check_model(spec.model, f"{spec.path}.model", problems)
        if spec.probe in plugins.probes:
            cls_of[spec.id] = plugins.probes.get(spec.probe)
    _check_labels(suite, cls_of, params, problems)
    tasks = _check_tasks(suite, plugins, cls_of, problems)
    _check_task_fit(suite, plugins, cls_of, params, tasks, problems)
    _check_tokenizers(suite, plugins, cls_of, params, tasks, problems)
    _check_model_params(suite, plugins, cls_of, params, problems)
    _check_model_problems(suite, cls_of, params, problems)
    executor = suite.executor.name if suite.executor is not None else None
    if executor is not None and executor not in plugins.executors:
        names = sorted(plugins.executors.names())
        problems.append(f"executor: no executor named '{executor}'{did_you_mean(executor, names)}; "
                        f"executors: {', '.join(names)}")
    elif executor is not None:
        missing = getattr(plugins.executors.get(executor), "missing", None)  # optional: what it lacks here
        problem = missing() if callable(missing) else None
        if problem:
            problems.append(problem)
    for spec in suite.probes:  # token-level needs: a table file has no words or trees (checked again on the data)
        data = spec.data or suite.data
        needs = sorted(r for r in getattr(cls_of.get(spec.id), "requires", ()) if r.startswith(("data:words", "data:layer:")))
        if needs and data is not None and data.loader is None and data.path and \
                Path(data.path).suffix.lower() in (".csv", ".tsv", ".txt", ".jsonl", ".json"):
            problems.append(f"{spec.path}: {spec.probe} needs data with {', '.join(needs)}, which a "
                            f"{Path(data.path).suffix} table has not; give a CoNLL-U treebank (.conllu)")
    collected = Problems() if found is None else found
    for problem in problems:
        collected.add(from_environment(problem, suite), SuiteError, suite=True)
    if found is None:
        collected.raise_if_any(suite.source or "suite")
    return params


def from_environment(problem: str, suite: Suite) -> str:
    """``problem`` naming the environment variables behind the value it is about, where an environment variable
    set it: 'probes[0].params.precision (from BERTPROBE_PRECISION=fp16): ...', the value to fix being outside
    the file."""
    for path, names in suite.set_by.items():
        values = {n: suite.variables.get(n) for n in names}
        # the problem quotes a variable's value (not one --model, --data or --set put there instead)
        if problem.startswith(f"{path}: ") and any(v and v in problem[len(path):] for v in values.values()):
            shown = ", ".join(f"{n}={v}" for n, v in values.items())
            return f"{path} (from {shown}){problem[len(path):]}"
    return problem


def _check_model_problems(suite: Suite, cls_of: dict[str, Any], params: dict[str, Any], problems: list[str]) -> None:
    """Each probe's ``Probe.model_problems(params, model)`` for each model it runs on (a precision the model's
    runtime or device cannot compute), from the suite alone; one line per model and problem, naming the probes."""
    found: dict[tuple[str, str], list[str]] = {}
    for spec, cls, model in _overriding(suite, cls_of, params, "model_problems"):
        for message in _asked(cls.model_problems, params[spec.id], model):
            found.setdefault((model.label, message), []).append(spec.id)
    _grouped(found, problems)


def _overriding(suite: Suite, cls_of: dict[str, Any], params: dict[str, Any],
                hook: str) -> Iterator[tuple[Any, Any, ModelSpec]]:
    """(probe entry, probe class, model) for each probe whose class overrides ``Probe.<hook>`` and each model it runs
    on (its own ``model:``, else the suite's)."""
    from bertprobe.probe import Probe

    for spec in suite.probes:
        cls = cls_of.get(spec.id)
        if cls is None or spec.id not in params or \
                getattr(getattr(cls, hook), "__func__", None) is getattr(Probe, hook).__func__:
            continue
        for model in (spec.model,) if spec.model is not None else suite.models:
            yield spec, cls, model


def _asked(hook: Callable[..., Iterable[str]], *args: Any) -> list[str]:
    """A probe hook's problems (``hook(*args)``); a plugin's hook that raises instead of returning gives its error's
    problems."""
    try:
        return list(hook(*args))
    except BertprobeError as exc:
        return list(getattr(exc, "problems", None) or [str(exc)])


def _grouped(found: dict[tuple[str, str], list[str]], problems: list[str]) -> None:
    """One line per (model, problem), naming every probe that found it."""
    for (label, message), ids in found.items():
        problems.append(f"{label} for {', '.join(ids)}: {message}")


def _check_model_params(suite: Suite, plugins: Any, cls_of: dict[str, Any], params: dict[str, Any],
                        problems: list[str]) -> None:
    """Each param naming another model (``Probe.model_params``: behaviour's ``mlm``) against each model the probe
    runs on, from config.json, before any weights load: not the model under test itself, a local folder that
    exists, a task that offers the capability the param needs."""
    from bertprobe.probe import model_param_problem

    for spec in suite.probes:
        cls, parsed = cls_of.get(spec.id), params.get(spec.id)
        for name, (needs, what) in (getattr(cls, "model_params", None) or {}).items():
            value = getattr(parsed, name, None)
            if not isinstance(value, str) or not value:
                continue
            where = f"{spec.path}.params.{name}"
            for model in (spec.model,) if spec.model is not None else suite.models:
                other = resolve_model_param(value, model, suite.models)
                problem = None
                try:
                    own_task = model_task(model, plugins)
                except BertprobeError:
                    own_task = None  # the task check reports it
                refusal = cls.model_param_refusal(name, own_task, plugins.sections.find) if own_task is not None else None
                if refusal:
                    problem = f"{where}: {refusal} such as {model.label}; drop {name} for this model"
                elif same_model(other.path, model.path):
                    problem = model_param_problem(where, value, what, f"it names the model under test ({model.label})")
                elif looks_local(other.path) and not Path(other.path).expanduser().exists():
                    problem = f"{where}: model folder '{other.path}' does not exist; give a path to {what}, or drop {name}"
                elif needs:
                    try:
                        task = model_task(other, plugins)
                    except BertprobeError:
                        task = None  # loading will say what is wrong with it
                    if task is not None and needs not in task.capabilities:
                        archs = ", ".join(map(str, (_config(other) or {}).get("architectures") or [])) or "no architecture"
                        problem = model_param_problem(where, value, what, f"its config.json names {archs}, a {task.name} "
                                                      "model")
                if problem and problem not in problems:
                    problems.append(problem)


def _bare_encoder(spec: ModelSpec) -> bool:
    """True when a local model's config.json names only architectures without a task head (BertModel)."""
    names = (_config(spec) or {}).get("architectures") or []
    return isinstance(names, list) and bool(names) and all("For" not in str(n) for n in names)


def _labels_in_columns(suite: Suite, plugins: Any, data: Dataset) -> bool:
    """True when every model reads label sets and the data has a 0/1 column for each of its labels (read when the
    labels are aligned to the model)."""
    columns = set(data.examples[0].meta) if data.examples else set()
    tasks = [model_task(m, plugins) for m in suite.models]
    return bool(tasks) and all(t is not None and t.label_sets and set(t.label_names) <= columns for t in tasks)


def check_data_needs(suite: Suite, plugins: Any, data: Dataset) -> None:
    """Raise one DataError, before any model loads, when a probe that reads the suite's data needs what the
    data lacks: labels above all (a label-needing probe on unlabelled data would fail, or measure nothing)."""
    spec = suite.data
    if spec is None:
        return
    features = data.features
    headless = all(_bare_encoder(m) for m in suite.models)  # config.json read once, not once per probe
    in_columns = _labels_in_columns(suite, plugins, data)
    for probe in suite.probes:
        if probe.data is not None or probe.probe not in plugins.probes:
            continue
        cls = plugins.probes.get(probe.probe)
        if not cls.needs_data:
            continue
        lacking = cls.missing_data(features)
        if "data:labels" in lacking and (headless or in_columns):
            continue  # the probe will be skipped for want of a task head; its data need not be labelled
        if "data:labels" in lacking:
            others = sorted({k for ex in data.examples[:1] for k in ex.meta})
            like = [c for c in others if c.lower() in LABEL_LIKE]
            fix = f"pass --label {like[0]}" if len(like) == 1 else "pass --label COL"
            unlabelled = sum(ex.label is None for ex in data.examples)
            what = (f"has no label column '{spec.label}'" if unlabelled == len(data)
                    else f"has {unlabelled} of {len(data)} examples without a label")
            columns = f" (other columns: {', '.join(others)})" if others else ""
            raise DataError(f"probe {probe.id} needs labelled data, but '{spec.describe()}' {what}{columns}; {fix}, "
                            "or set data.label")
        if lacking:
            raise DataError(f"probe {probe.id}: data '{spec.describe()}' lacks {', '.join(lacking)}; give it data that "
                            "has them (words and dependency layers come from a .conllu treebank)")


def read_local_data(suite: Suite, plugins: Any, found: Problems | None = None) -> Dataset | None:
    """The suite's local data file, read and checked against the probes' needs (``check_data_needs``)
    and each local model's classes before any model loads; None when there is no such file or no probe reads
    it. What ``run`` does before its run folder exists, and ``validate`` too. Raises one error listing every
    problem (bad rows up to a limit), or adds them to ``found``."""
    spec = suite.data
    if spec is None or not spec.path:
        return None
    loader = plugins.datasets.get(spec.loader) if spec.loader is not None and spec.loader in plugins.datasets else None
    if spec.loader is not None and not getattr(loader, "reads_local_files", False):
        return None  # a plugin's loader may be slow or remote: it reads its data when the run does
    path = Path(spec.path).expanduser()
    if not (path.is_file() or is_saved_dataset(path) or is_beir_folder(path)):
        return None
    if not any(p.probe in plugins.probes and plugins.probes.get(p.probe).needs_data and p.data is None
               for p in suite.probes):
        return None
    collected = Problems() if found is None else found
    data = collected.attempt(read_data, spec, loader, suite.seed)
    if data is not None:
        collected.attempt(check_data_needs, suite, plugins, data)
        collected.attempt(check_labels_against_models, suite, plugins, data)
    if found is None:
        collected.raise_if_any(suite.source)
    return data


def check_labels_against_models(suite: Suite, plugins: Any, data: Dataset) -> None:
    """The data's labels against each local model's classes, read from config.json as loading will read them
    (the task from the architecture, the classes from id2label): an unknown label, a set of labels for a
    single-label model, or a model whose task cannot be told is refused before any weights load, with the
    message and the ``--label-map`` fix that ``run`` gives after loading."""
    if suite.data is None:
        return
    for model in suite.models:
        config = _config(model)
        task = model_task(model, plugins, config)
        if task is None:
            continue
        if task.unnamed_classes_are_indices and _config_labels(model, config) is None:
            continue  # no names to match: loading reads num_labels
        task.read_labels(data, suite.data, model.label)


def model_task(model: ModelSpec, plugins: Any, config: dict[str, Any] | None = None) -> Any:
    """The task a model will be loaded as, from its config.json (None for a hub id not cached, or no config)."""
    from types import SimpleNamespace

    from bertprobe.tasks import resolve_task, task_options

    if model.endpoint is not None:
        return _endpoint_task(model, plugins)
    config = _config(model) if config is None else config
    if config is None:
        return None
    fields = {k: config.get(k) for k in ("architectures", "problem_type", "id2label", "num_labels",
                                         "max_position_embeddings", "sentence_transformers") if k in config}
    # a layout beside config.json (sentence-transformers' modules.json; a hub id's as cached) tells the task
    fields["name_or_path"] = str(Path(model.path).expanduser()) if looks_local(model.path) else model.path
    return resolve_task(SimpleNamespace(**fields), model.task, plugins.tasks, task_options(model))


def _endpoint_task(model: ModelSpec, plugins: Any) -> Any:
    """The task a served model will be audited as, before anything is sent: its twin's, else the suite's
    ``task:`` with its ``labels:`` (None: the server's metadata tells, once it is read)."""
    from dataclasses import replace
    from types import SimpleNamespace

    from bertprobe.tasks import resolve_task, task_options

    if model.twin:
        twin = replace(ModelSpec(path=model.twin), task=model.task)
        return model_task(twin, plugins) if _config(twin) is not None else None
    if model.task == "auto":
        return None
    labels = list(model.labels)
    config = SimpleNamespace(architectures=[], id2label={str(i): n for i, n in enumerate(labels)}, num_labels=len(labels))
    return resolve_task(config, model.task, plugins.tasks, task_options(model))


def _supports(cls: Any, task: Any, sections: Any) -> bool:
    """Whether the registered probe ``cls`` reads ``task``'s models (a listed stand-in lists its tasks only)."""
    supports = getattr(cls, "supports_task", None)
    return supports(task, sections) if callable(supports) else task.name in getattr(cls, "tasks", ())


def task_refusal(probe_id: str, cls: Any, task: Any, model: str, plugins: Any) -> str:
    """Why a probe cannot run on a model of ``task``, naming the probes that can."""
    able = [n for n in plugins.probes.names() if _supports(plugins.probes.get(n), task, plugins.sections)]
    why = "".join(f"; {task.name} models lack {what}: {reason}" for what, reason in getattr(task, "lacks", {}).items()
                  if what in cls.requires)
    return (f"probe {probe_id} ({cls.name}) does not support {task.name} models such as {model} (it supports: "
            f"{', '.join(sorted(cls.tasks))}){why}; probes that support {task.name}: {', '.join(able) or 'none'}; "
            f"leave it out with --only, or set model.task if the task was misdetected")


def _check_tasks(suite: Suite, plugins: Any, cls_of: dict[str, Any], problems: list[str]) -> dict[ModelSpec, Any]:
    """Each probe against the task of each local model it runs on, before any weights load; returns the task of
    each model a probe runs on (None: a hub id not cached, or a config that did not read)."""
    tasks: dict[ModelSpec, Any] = {}
    skipping: dict[ModelSpec, list[tuple[str, list[str]]]] = {}  # model -> (probe id, what it lacks) of each probe
    refused: dict[ModelSpec, list[tuple[str, Any, str]]] = {}  # model -> (probe id, class, line) of each refusal
    runs_on: dict[ModelSpec, int] = {}  # model -> how many of the suite's probes run on it
    may_run = False
    for spec in suite.probes:
        cls = cls_of.get(spec.id)
        if cls is None:
            continue
        for model in (spec.model,) if spec.model is not None else suite.models:
            if model not in tasks:
                try:
                    tasks[model] = model_task(model, plugins)
                except BertprobeError as exc:
                    problems.append(f"{model.label}: {exc}")
                    tasks[model] = None
            task = tasks[model]
            runs_on[model] = runs_on.get(model, 0) + 1
            if task is not None and cls.refuses_task(task, plugins.sections):
                refused.setdefault(model, []).append((spec.id, cls, task_refusal(spec.id, cls, task, model.label, plugins)))
            elif (missing := _onnx_lacks(cls, model)):
                if model.endpoint is not None:
                    from bertprobe.model.endpoint import refusal as served_refusal

                    problems.append(served_refusal(spec.id, cls.name, missing, model))
                else:
                    from bertprobe.model.onnx import refusal

                    problems.append(refusal(spec.id, cls.name, missing, model.label))
            elif task is not None:
                skipping.setdefault(model, []).append((spec.id, cls.missing_requirements(offered_capabilities(task))))
            if task is None:
                may_run = True  # a hub model: its task is known once it loads
    for model, rows in refused.items():
        if len(rows) > 1 and len(rows) == runs_on[model]:  # a suite for another task: one line, not one per probe
            problems.append(suite_refusal(model, tasks[model], rows, plugins))
        else:
            problems += [line for _, _, line in rows]
    if skipping and not may_run and all(lacking for rows in skipping.values() for _, lacking in rows):
        for model, rows in skipping.items():  # every probe would be skipped on every model: nothing would run
            problems.append(nothing_would_run(suite, model, tasks[model], rows))
    return tasks


def _check_task_fit(suite: Suite, plugins: Any, cls_of: dict[str, Any], params: dict[str, Any],
                    tasks: dict[ModelSpec, Any], problems: list[str]) -> None:
    """A suite written for another kind of model, refused in one line per model before anything loads: expectations
    naming a metric the probe never writes for the model's task (its section's ``catalogue.absent``: a reader's
    accuracy writes f1, never accuracy), and params naming a class for a model of a task without classes (no
    ``classifier``: a reader, a bi-encoder)."""
    for model in suite.models:
        task = tasks.get(model)  # as _check_tasks read it from config.json (it names a config that did not read)
        if task is None:
            continue
        reasons = []
        for spec in suite.probes:
            cls = cls_of.get(spec.id)
            if cls is None or (spec.model is not None and spec.model != model) or cls.refuses_task(task, plugins.sections):
                continue
            section = plugins.sections.find(cls.name, task)
            catalogue = getattr(section, "catalogue", None)
            absent = getattr(catalogue, "absent", ())
            # what the probe writes for this task: its section's metrics and its own but those the section never
            # writes; without a section (the probe's own code, for classes), its own
            own = [p for p in cls.catalogue(()).metrics if p not in absent]
            writes = list(getattr(catalogue, "metrics", {})) + own if section is not None else own
            for expectation in spec.expect:
                metric = expectation.metric
                if cls.metrics and not any(fnmatch.fnmatchcase(metric, p) for p in writes):
                    shown = ", ".join(writes[:4]) + (", ..." if len(writes) > 4 else "")
                    reasons.append(f"expect.{metric} of {spec.id}, which {cls.name} never writes for them (it writes "
                                   f"{shown})")
            if "classifier" not in task.capabilities:
                for where, value in cls.named_labels(params.get(spec.id), []):
                    if where.startswith("params."):
                        reasons.append(f"{where} of {spec.id} names class {value!r}, and they have no classes")
        if reasons:
            problems.append(f"{model.label} is a {task.name} model, but this suite is written for another kind of model: "
                            f"{'; '.join(reasons)}; run a suite written for {task.name} models, or give this one a model of "
                            "the kind it was written for")


def _check_tokenizers(suite: Suite, plugins: Any, cls_of: dict[str, Any], params: dict[str, Any],
                      tasks: dict[ModelSpec, Any], problems: list[str]) -> None:
    """Each probe that checks its inputs against a tokenizer (``Probe.tokenizer_problems``: a mask token, item
    words in the vocabulary), asked for each local model of a task it reads, with only the tokenizer loaded; a
    problem several probes find on one model is one line naming them."""
    from bertprobe.model.masked_scoring import config_positions

    tokenizers: dict[str, Any] = {}
    found: dict[tuple[str, str], list[str]] = {}  # (model, problem) -> the probes that found it
    for spec, cls, model in _overriding(suite, cls_of, params, "tokenizer_problems"):
        task = tasks.get(model)
        folder = _model_folder(model)
        if task is None or folder is None or not _supports(cls, task, plugins.sections):
            continue
        if folder not in tokenizers:
            from bertprobe.model.loading import local_tokenizer

            tokenizers[folder] = local_tokenizer(folder)
        tokenizer = tokenizers[folder]
        if tokenizer is None:
            continue
        for message in _asked(cls.tokenizer_problems, params[spec.id], tokenizer, config_positions(_config(model)),
                              suite.seed):
            found.setdefault((model.label, message), []).append(spec.id)
    _grouped(found, problems)


def offered_capabilities(task: Any) -> frozenset[str]:
    """What a model of ``task`` may offer before it loads: the task's abilities and the model-wide ones."""
    from bertprobe.probe import MODEL_CAPABILITIES

    return frozenset(task.capabilities) | MODEL_CAPABILITIES


def suite_refusal(model: ModelSpec, task: Any, rows: list[tuple[str, Any, str]], plugins: Any) -> str:
    """None of a suite's probes supports ``model``'s task: one line for them all, naming the tasks they support
    and the probes that support ``task``."""
    supported = sorted({t for _, cls, _ in rows for t in cls.tasks})
    able = [n for n in plugins.probes.names() if _supports(plugins.probes.get(n), task, plugins.sections)]
    why = "".join(f"; {task.name} models lack {what}: {reason}" for what, reason in getattr(task, "lacks", {}).items()
                  if any(what in cls.requires for _, cls, _ in rows))
    return (f"{model.label} is a {task.name} model, and none of this suite's {len(rows)} probes "
            f"({', '.join(probe for probe, _, _ in rows)}) supports it (they support: {', '.join(supported)}){why}; "
            f"give a {' or '.join(supported)} model with --model, run a suite written for {task.name} models (probes "
            f"that support them: {', '.join(able) or 'none'}), or set model.task if the task was misdetected")


def nothing_would_run(suite: Suite, model: ModelSpec, task: Any, rows: list[tuple[str, list[str]]]) -> str:
    """Every probe of ``suite`` would be skipped on ``model``: the suite is for another kind of model."""
    from bertprobe.capabilities import TARGET

    lacking = sorted({r for _, need in rows for r in need})
    return (f"{model.label} is a model of task {task.name}, which none of this suite's probes can read: "
            f"{', '.join(probe for probe, _ in rows)} need {', '.join(f'{r} ({TARGET.get(r, r)})' for r in lacking)}; "
            f"give a model that has it with --model (e.g. a masked LM for an MLM suite), or run a suite for "
            f"{task.name} models")


def _onnx_lacks(cls: Any, model: ModelSpec) -> list[str]:
    """What ``cls`` requires that an ONNX Runtime model lacks (gradients, attention maps, heads), when ``model``
    runs in ONNX Runtime; refused before anything loads, as a task the probe does not support is."""
    if model.endpoint is not None:
        from bertprobe.model.endpoint import lacks as endpoint_lacks

        return [] if model.twin else sorted(set(cls.requires) & set(endpoint_lacks(model)))
    from bertprobe.model.onnx import lacks

    return sorted(set(cls.requires) & lacks(model))


def validate_probes(suite: Suite, probes: Registry[Any], reporters: Registry[Any] | None = None,
                    problems: list[str] | None = None, sections: Any = None) -> dict[str, Any]:
    """Check probe names, params and expected metric names; return parsed params by probe id.

    With a ``problems`` list, every problem is appended to it instead of raising at the first one. A metric is
    known when the probe's catalogue over ``sections`` (the registered ``Sections``; None: the built-in ones) names
    it.
    """
    collect = problems is not None
    found: list[str] = problems if problems is not None else []

    def problem(message: str) -> None:
        if not collect:
            raise SuiteError(message)
        found.append(message)

    params_by_probe = {}
    inputs: dict[str, list[str]] = {}  # a problem of a probe's files -> the probes that read them (one line)
    for spec in suite.probes:
        try:
            cls = probes.get(spec.probe)
        except SuiteError as exc:
            problem(f"{spec.path}.probe: {exc}")
            continue
        params = dict(spec.params)
        if spec.base_dir is not None:
            for name in getattr(cls, "path_params", ()):
                if name in params and name not in spec.env_params:
                    params[name] = resolve_path_value(params[name], Path(spec.base_dir))
        bad: list[str] = []  # every bad param of the probe, not only its first
        try:
            parsed = parse_params(cls.Params, params, f"{spec.path}.params", bad)
        except SuiteError as exc:
            bad.append(str(exc))
        for message in bad:
            problem(message)
        if not bad:
            params_by_probe[spec.id] = parsed
            for message in _input_problems(cls, parsed):  # its files, read before any weights load
                inputs.setdefault(message, []).append(f"{spec.path}.params")
        for metric in [e.metric for e in spec.expect] + [m for m in spec.expect_off if m != "*"]:
            if not cls.knows_metric(metric, sections):
                catalogue = list(cls.catalogue(sections).metrics)
                known = [m for m in catalogue if "*" not in m]
                problem(f"{spec.path}.expect.{metric}: probe '{spec.probe}' has no such metric"
                        f"{did_you_mean(metric, known)}; metrics: {', '.join(catalogue)}")
        if cls.needs_data and not getattr(cls, "data_optional", False) and spec.data is None and suite.data is None \
                and not _reported(suite, "data", f"{spec.path}.data"):
            problem(f"{spec.path}: probe '{spec.probe}' needs data; add a data: section")
        if spec.model is None and not suite.models and not _reported(suite, "model", "models", f"{spec.path}.model"):
            problem(f"{spec.path}: no model; add a model: section to the suite or the probe")
    for message, where in inputs.items():
        problem(f"{' and '.join(where)}: {message}")
    if reporters is not None:
        for fmt in suite.formats:
            try:
                reporters.get(fmt)
            except SuiteError as exc:
                problem(f"report.formats: {exc}")
    return params_by_probe


def _input_problems(cls: Any, params: Any) -> list[str]:
    """``cls.input_problems(params)``; a plugin's that raises instead of returning gives its error's problems."""
    try:
        return list(cls.input_problems(params))
    except BertprobeError as exc:
        return list(getattr(exc, "problems", None) or [str(exc)])


def _reported(suite: Suite, *sections: str) -> bool:
    """Whether loading already reported a problem in one of these sections (so that a section that did not
    parse is not reported a second time as missing)."""
    return any(p == s or p.startswith((f"{s}:", f"{s}.", f"{s}[")) for p in suite.problems for s in sections)


def _cached_config(spec: ModelSpec) -> Path | None:
    """A hub id's config.json in the local Hugging Face cache (no network), or None."""
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(spec.path, "config.json", revision=spec.revision)
    except Exception:  # noqa: BLE001 - an id the cache cannot even parse is not in it
        return None
    return Path(found) if isinstance(found, str) else None


def _cached_model(spec: ModelSpec) -> bool:
    return _cached_config(spec) is not None


def check_hub_sources(suite: Suite) -> None:
    """Every hub id the suite needs, checked at once before a run folder exists: when the Hub is
    unreachable, one error names each model that is not cached and each hub dataset, with the flag that
    replaces it. With HF_HUB_OFFLINE=1 (caches on purpose) the loaders decide."""
    from bertprobe.hub import hub_reachable, offline_mode

    models = list(suite.models) + [p.model for p in suite.probes if p.model is not None]
    datas = [d for d in [suite.data, *(p.data for p in suite.probes)] if d is not None]
    hub_models = {m.path: m for m in reversed(models) if not looks_local(m.path) and m.endpoint is None}  # the first spec of each path
    hub_data = list(dict.fromkeys(d.path for d in datas if d.loader is None and d.path and not is_local(d.path)))
    if offline_mode() or not (hub_models or hub_data) or hub_reachable():
        return
    missing = [f"model '{path}' (pass --model PATH)" for path, spec in reversed(hub_models.items())
               if not _cached_model(spec)]
    missing += [f"dataset '{path}' (pass --data PATH)" for path in hub_data]
    if missing:
        raise SuiteError(f"the Hugging Face Hub is unreachable and this run needs {len(missing)} source(s) from it: "
                         f"{'; '.join(missing)}; or set HF_HUB_OFFLINE=1 to use cached copies")


def served_specs(suite: Suite) -> list[ModelSpec]:
    """The suite's served model entries (its models' and its probes' own), one per distinct endpoint and setting."""
    distinct: dict[tuple[Any, ...], ModelSpec] = {}
    for spec in [*suite.models, *(p.model for p in suite.probes if p.model is not None)]:
        if spec.endpoint is not None:
            key = (spec.endpoint.rstrip("/"), spec.protocol, spec.served_model, tuple(sorted(spec.headers.items())),
                   spec.task, spec.twin, spec.verify_tls)
            distinct.setdefault(key, spec)
    return list(distinct.values())


def check_endpoints(suite: Suite, plugins: Any, problems: Problems, contact: bool = True) -> str | None:
    """Each served model answers its codec's readiness and metadata requests (5 s, no retries), all asked at once
    and every one that does not listed (``bertprobe.model.endpoint_ready``), before a run folder exists. A suite
    without a served model imports nothing for it. Nothing is sent with ``contact`` false (``validate --offline``)
    nor when the executor joins a running Ray cluster (``executor.address``: its workers, not this machine, reach
    the endpoints); the line returned then says which models were not contacted and why (None: all were asked)."""
    specs = served_specs(suite)
    if not specs:
        return None
    joined = suite.executor.address if suite.executor is not None and suite.executor.address else None
    if not contact or joined:
        why = ("--offline" if not contact else
               f"the executor joins the Ray cluster at {joined}: its workers reach them, not this machine")
        return (f"served model{'s' if len(specs) > 1 else ''} not contacted ({why}): "
                f"{', '.join(spec.label for spec in specs)}")
    from concurrent.futures import ThreadPoolExecutor

    from bertprobe.model.endpoint import check_endpoint_spec
    from bertprobe.model.endpoint_ready import readiness_problem

    specs = [spec for spec in specs if not check_endpoint_spec(spec)]  # a refused entry (a literal token) is never sent
    if not specs:
        return None

    def ask(spec: ModelSpec) -> str | None:
        try:
            task = model_task(spec, plugins)
        except BertprobeError:  # reported by the task checks; here it only picks the codec's shape
            task = None
        return readiness_problem(spec, getattr(plugins, "codecs", None), bool(getattr(task, "label_sets", False)),
                                 bool(getattr(task, "span_answers", False)))

    with ThreadPoolExecutor(max_workers=min(8, len(specs)), thread_name_prefix="bertprobe-ready") as pool:
        found = list(pool.map(ask, specs))
    for problem in found:
        if problem:
            problems.add(problem, TargetError)
    return None
