"""Which task a model is: the suite's ``task:``, else the first registered task that detects its config."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bertprobe.errors import DataError, PluginError, TargetError
from bertprobe.registry import Registry, did_you_mean
from bertprobe.tasks.base import Task


# what a Task subclass of before held that now lives in a probe's section (``bertprobe.sections``), with the probe
RETIRED = {"audit_accuracy": "accuracy", "audit_calibration": "calibration", "audit_cues": "spurious-cues",
           "slice_units": "slices", "slice_scores": "slices", "sweep_rows": "head-pruning", "probe_metrics": "any"}
# a retired method whose task meaning lives on under another name on Task: what such a task defines instead
RENAMED = {"sweep_rows": "example_rows(target, data, metric, subset) (the rows of an example that is several model "
                         "rows, their gold and their decoding: tasks.rows.ExampleRows)"}


def check_task(item: Any, plugin: str) -> None:
    """A registered task is a ``Task`` subclass with a name, holding none of the probe sections a task once held
    (``RETIRED``: a section of the probe's registered through ``bertprobe_register_sections`` now)."""
    if not (isinstance(item, type) and issubclass(item, Task)) or not getattr(item, "name", None):
        raise PluginError(f"task {item!r} from plugin '{plugin}' is not a bertprobe.tasks.Task subclass with a name")
    for name, probe in RETIRED.items():
        if hasattr(Task, name):  # still on the contract
            continue
        if any(name in vars(cls) for cls in item.__mro__):
            which = f"probe '{probe}'" if probe != "any" else "each probe it names"
            how = (f"define {RENAMED[name]} instead; what only {which} does with them is a section of it"
                   if name in RENAMED else f"register a section of {which} for the task instead")
            raise PluginError(f"task '{item.name}' from plugin '{plugin}' defines {name}, which bertprobe no longer "
                              f"calls: {how} (registry.add(PROBE, SECTION, task='{item.name}') in a "
                              "bertprobe_register_sections hook; docs/plugins.md)")


def builtin_tasks() -> Registry[type[Task]]:
    """A registry holding the built-in tasks, filled by their plugin's own hook (for callers without plugins)."""
    from bertprobe.tasks import builtin

    registry: Registry[type[Task]] = Registry("task", check=check_task)
    registry.current_plugin = builtin.__name__
    builtin.bertprobe_register_tasks(registry)
    return registry


def task_class(config: Any, requested: str = "auto", tasks: Registry[type[Task]] | None = None) -> type[Task]:
    """The task of a model with ``config``: ``requested`` when not ``auto`` (a config that says multi-label is
    never read as single-label), else the highest-priority registered task that detects it."""
    tasks = tasks if tasks is not None else builtin_tasks()
    problem = getattr(config, "problem_type", None)
    if requested != "auto":
        cls = tasks.get(requested)
        if problem == "multi_label_classification" and cls.name == "classification":
            raise TargetError("the model's config.json says problem_type: multi_label_classification, so it is "
                              "never audited with a softmax; drop 'task: classification' (or set task: multi-label)")
        return cls
    cross_encoder = getattr(config, "sentence_transformers", None) is not None  # a CrossEncoder's one output
    if problem == "regression" or (problem is None and not cross_encoder and getattr(config, "num_labels", 2) == 1
                                   and any(a.endswith("ForSequenceClassification") for a in getattr(config, "architectures", None) or [])):
        raise TargetError("the model has one output (a regression head: problem_type regression or num_labels 1), "
                          "which bertprobe audits only as a reranker (a cross-encoder's relevance score: set task: reranker under "
                          "model:); if it is a binary classifier with one sigmoid output, set task: multi-label")
    ordered = sorted((tasks.get(n) for n in tasks.names()), key=lambda c: -c.priority)
    for cls in ordered:
        if cls.detect(config):
            return cls
    architectures = getattr(config, "architectures", None) or None
    raise TargetError(f"cannot tell the task from the config (architectures={architectures}); "
                      f"set 'task: {' | '.join(tasks.names())}' under model:")


def resolve_task(config: Any, requested: str = "auto", tasks: Registry[type[Task]] | None = None,
                 options: Mapping[str, Any] | None = None) -> Task:
    """The task bound to the model: its label names and settings (``options``: thresholds, ``model.options``...)."""
    cls = task_class(config, requested, tasks)
    check_options(cls, options, tasks)
    return cls.bind(config, options)


MODEL_SETTINGS = ("max_length", "stride")  # model-level fields passed as model.KEY where given (a reader's windows)
# what every model spec passes, read by the tasks that need it
SPEC_OPTIONS = ("threshold", "thresholds", *(f"model.{key}" for key in MODEL_SETTINGS))


def task_options(spec: Any) -> dict[str, Any]:
    """The model spec's settings a task binds to: multi-label thresholds, ``model.max_length`` and ``model.stride``
    where given (as ``model.max_length``, ``model.stride``: a reader's windows), and ``model.options`` (the task's
    own settings: extractive QA's windows and decoding)."""
    out = {"threshold": getattr(spec, "threshold", 0.5), "thresholds": dict(getattr(spec, "thresholds", None) or {})}
    out |= dict(getattr(spec, "options", None) or {})
    for key in MODEL_SETTINGS:
        value = getattr(spec, key, None)
        if value is not None:
            out[f"model.{key}"] = value
    return out


def check_options(cls: type[Task], options: Mapping[str, Any] | None,
                  tasks: Registry[type[Task]] | None = None) -> None:
    """A ``model.options`` key the task does not read is a DataError naming it, with a did-you-mean; where every
    such key is a setting of another task (a reader's windows given to a classifier: a suite written for another
    task), the error names that mismatch and its fix instead."""
    unknown = [key for key in options or {} if key not in SPEC_OPTIONS and key not in cls.option_keys]
    if not unknown:
        return
    owner = settings_owner(unknown, cls, tasks)
    if owner is not None:
        raise DataError(f"a {cls.name} model, but the suite is for {owner.name} models (model.options: "
                        f"{', '.join(map(str, unknown))}, their settings); pass --model a {owner.name} model, or use "
                        f"a suite written for {cls.name} models")
    key = unknown[0]
    keys = sorted(cls.option_keys)
    known = f"; its settings: {', '.join(keys)}" if keys else "; it takes none"
    raise DataError(f"model.options.{key}: not a setting of {cls.name} models{did_you_mean(str(key), keys)}{known}")


def settings_owner(keys: list[Any], cls: type[Task], tasks: Registry[type[Task]] | None = None) -> type[Task] | None:
    """The registered task (highest priority first) other than ``cls`` whose settings include every one of
    ``keys``, or None."""
    tasks = tasks if tasks is not None else builtin_tasks()
    for other in sorted((tasks.get(n) for n in tasks.names()), key=lambda c: -c.priority):
        if other is not cls and other.name != cls.name and set(keys) <= set(other.option_keys):
            return other
    return None
