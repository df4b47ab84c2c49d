"""Build a plugin manager per run: hook specs, built-in plugins, entry points, then validation."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any

import pluggy

from bertprobe import hookspecs
from bertprobe.errors import PluginError, first_line
from bertprobe.registry import Registry, did_you_mean
from bertprobe.sections import Sections

ENTRY_POINT_GROUP = "bertprobe"
DISABLE_ENV = "BERTPROBE_DISABLE_PLUGINS"

# Built-in plugins register through the same hooks as third-party ones (cf. datasette, pytest).
DEFAULT_PLUGINS = (
    "bertprobe.tasks.builtin",
    "bertprobe.model.builtin",
    "bertprobe.data.builtin",
    "bertprobe.executors.builtin",
    "bertprobe.run.reports",
    "bertprobe.probes.accuracy.probe",
    "bertprobe.probes.universal_trigger.probe",
    "bertprobe.probes.distractor.probe",
    "bertprobe.probes.head_pruning.probe",
    "bertprobe.probes.attention_audit",
    "bertprobe.probes.spurious_cues.probe",
    "bertprobe.probes.cloze.probe",
    "bertprobe.probes.crows_pairs.probe",
    "bertprobe.probes.minimal_pairs.probe",
    "bertprobe.probes.backdoor_scan.probe",
    "bertprobe.probes.syntax_heads.probe",
    "bertprobe.probes.behaviour.probe",
    "bertprobe.probes.calibration.probe",
    "bertprobe.probes.slices.probe",
    "bertprobe.probes.serving_skew.probe",
    "bertprobe.reporters.json_report",
    "bertprobe.reporters.markdown_report",
    "bertprobe.reporters.html_report",
    "bertprobe.reporters.junit_report",
)


@dataclass
class Plugins:
    """The plugin manager of one run and the registries its plugins filled."""

    manager: pluggy.PluginManager
    probes: Registry[Any]
    reporters: Registry[Any]
    datasets: Registry[Any]
    dists: dict[str, tuple[str, str]] = field(default_factory=dict)  # entry-point plugin -> (dist, version)
    executors: Registry[Any] = field(default_factory=lambda: Registry("executor"))
    extra: list[Any] = field(default_factory=list)  # plugins registered by hand (workers register them too)
    tasks: Registry[Any] = field(default_factory=lambda: Registry("task"))
    sections: Sections = field(default_factory=Sections)  # probe x task: bertprobe.sections
    codecs: Registry[Any] = field(default_factory=lambda: Registry("codec"))  # an endpoint's wire shapes

    @property
    def hook(self) -> Any:
        return self.manager.hook

    def describe(self) -> list[dict[str, str]]:
        """One row per plugin: name, version and where it came from."""
        from bertprobe.version import __version__

        rows = []
        for name, plugin in sorted(self.manager.list_name_plugin(), key=lambda item: str(item[0])):
            if plugin is None:
                continue
            dist = self.dists.get(name)
            if dist is not None:
                rows.append({"name": name, "version": dist[1], "source": f"entry point ({dist[0]})"})
            else:
                rows.append({"name": name, "version": __version__, "source": "built-in"})
        return rows


def _disabled(env: dict[str, str] | os._Environ[str] | None) -> set[str]:
    raw = (env if env is not None else os.environ).get(DISABLE_ENV, "")
    return {name.strip() for name in raw.split(",") if name.strip()}


def _entry_points() -> list[Any]:
    return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def _load_entry_points(pm: pluggy.PluginManager) -> dict[str, tuple[str, str]]:
    """Import and register each ``bertprobe`` entry point; any failure names the plugin that failed."""
    dists: dict[str, tuple[str, str]] = {}
    for ep in _entry_points():
        if pm.is_blocked(ep.name) or pm.has_plugin(ep.name):
            continue
        dist = (ep.dist.metadata["Name"], ep.dist.version) if ep.dist is not None else ("?", "?")
        try:
            plugin = ep.load()
        except BaseException as exc:  # SyntaxError, RuntimeError, SystemExit...: a broken plugin, not ours
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise PluginError(f"plugin '{ep.name}' ({ep.value}, from {dist[0]} {dist[1]}) failed to import: "
                              f"{type(exc).__name__}: {first_line(exc)}; fix or "
                              f"uninstall it, or disable it with {DISABLE_ENV}={ep.name}") from None
        pm.register(plugin, name=ep.name)
        dists[ep.name] = dist
    return dists


def _check_disabled(pm: pluggy.PluginManager, disabled: set[str], entry_points: bool) -> None:
    """A name in BERTPROBE_DISABLE_PLUGINS that matches no plugin is a typo: it would leave the plugin on."""
    known = set(DEFAULT_PLUGINS) | ({ep.name for ep in _entry_points()} if entry_points else set())
    known |= {name for name, plugin in pm.list_name_plugin() if plugin is not None}
    for name in sorted(disabled - known):
        raise PluginError(f"{DISABLE_ENV} names '{name}', which is no plugin{did_you_mean(name, sorted(known))}; "
                          f"plugins: {', '.join(sorted(known))}")


def _check_requires(probe: Any, plugin: str, tasks: Registry[Any] | None = None) -> None:
    """A probe may require only names of ``bertprobe.capabilities``: abilities, never a task (``tasks``: the run's
    registered tasks, whose names a probe lists in its ``tasks`` instead)."""
    from bertprobe.capabilities import unknown

    requires = getattr(probe, "requires", ()) or ()
    name = getattr(probe, "name", probe)
    named = sorted(set(requires) & set(tasks.names())) if tasks is not None else []
    if named:
        listed = ", ".join(f"'{task}'" for task in named)
        raise PluginError(f"probe '{name}' from plugin '{plugin}' requires {listed}, a task and no capability (capabilities "
                          f"name abilities: see bertprobe/capabilities.py); list the task in the probe's tasks instead: "
                          f"tasks = frozenset({{{listed}}})")
    bad = unknown(requires)
    if bad:
        raise PluginError(f"probe '{name}' from plugin '{plugin}' requires unknown "
                          f"capabilities: {', '.join(bad)}; see bertprobe/capabilities.py")


def _task_check() -> Any:
    """The check of a registered task (not when listing: the catalog's tasks are no classes, and importing
    the check imports torch)."""
    from bertprobe.tasks.resolve import check_task

    return check_task


def _catalog() -> dict[str, Any]:
    """The built-in plugins the catalog describes, as stand-ins to register in their modules' place."""
    from bertprobe.catalog import ListedPlugin, load

    return {module: ListedPlugin(rows) for module, rows in load().items() if module in DEFAULT_PLUGINS}


def build_plugins(
    extra: list[Any] | None = None,
    env: dict[str, str] | None = None,
    entry_points: bool = True,
    listing: bool = False,
) -> Plugins:
    """Create a fresh plugin manager (never a global) and fill the registries.

    ``extra`` plugins (objects or modules) are registered after the built-ins; useful in tests.
    Names listed in BERTPROBE_DISABLE_PLUGINS (comma-separated) are blocked, built-ins included.
    ``listing``: for showing what is installed only (``bertprobe list``): the built-in plugins register their
    names and descriptions from ``bertprobe.catalog`` without being imported (nor torch with them), and tasks
    are not checked; entry-point plugins load as always.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for name in _disabled(env):
        pm.set_blocked(name)
    try:
        listed = _catalog() if listing else {}
        for module_name in DEFAULT_PLUGINS:
            if pm.is_blocked(module_name):
                continue
            plugin = listed[module_name] if module_name in listed else importlib.import_module(module_name)
            pm.register(plugin, name=module_name)
        for plugin in extra or []:
            pm.register(plugin)
        dists = _load_entry_points(pm) if entry_points else {}
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        name = pm.get_name(exc.plugin) if exc.plugin is not None else "?"
        raise PluginError(f"plugin '{name}' is invalid: {exc}; disable it with {DISABLE_ENV}") from None
    except (ImportError, AttributeError) as exc:
        raise PluginError(f"a bertprobe plugin failed to load: {exc}; disable it with {DISABLE_ENV}") from None
    _check_disabled(pm, _disabled(env), entry_points)
    tasks: Registry[Any] = Registry("task", check=None if listing else _task_check())
    probes: Registry[Any] = Registry("probe", check=partial(_check_requires, tasks=tasks))
    plugins = Plugins(pm, probes, Registry("reporter"), Registry("dataset loader"), dists, extra=list(extra or []),
                      tasks=tasks)
    for hook, registry in (
        ("bertprobe_register_tasks", plugins.tasks),
        ("bertprobe_register_probes", plugins.probes),
        ("bertprobe_register_reporters", plugins.reporters),
        ("bertprobe_register_datasets", plugins.datasets),
        ("bertprobe_register_executors", plugins.executors),
        ("bertprobe_register_codecs", plugins.codecs),
        ("bertprobe_register_sections", plugins.sections),  # after the probes: a section names one
    ):
        for impl in reversed(getattr(pm.hook, hook).get_hookimpls()):
            registry.current_plugin = impl.plugin_name
            impl.function(registry=registry)
    if not listing:
        _check_catalogues(plugins, {name for name in _disabled(env) if pm.is_blocked(name)})
    return plugins


def _check_catalogues(plugins: Plugins, blocked: set[str]) -> None:
    """Each registered section names a probe (a registered one, one a blocked built-in plugin would register, or
    a name close to none: an optional probe not installed here, skipped; a near miss is refused with its
    did-you-mean), its ``catalogue`` is a ``Catalogue``, and it declares none of the probe's own metrics,
    directions or default bounds otherwise (``catalogue.conflicts``). Sections may differ among themselves: a run
    judges a model by its own task's section. A blocked plugin the catalog does not list might have registered any
    name: unknown names pass then."""
    from bertprobe.catalog import load
    from bertprobe.results import Catalogue
    from bertprobe.results.catalogue import conflicts

    known = set(plugins.probes.names())
    listed = load()
    known |= {row["name"] for module in blocked & set(listed) for row in listed[module].get("probes", [])}
    lenient = bool(blocked - set(listed))
    for entry in plugins.sections:
        where = f"the section of probe '{entry.probe}' for {entry.key} from plugin '{entry.plugin}'"
        added = getattr(entry.section, "catalogue", None)
        if added is not None and not isinstance(added, Catalogue):
            raise PluginError(f"{where}: its catalogue must be a bertprobe.results.Catalogue (metrics, directions, "
                              f"defaults, key metrics), not {type(added).__name__}")
        if entry.probe not in plugins.probes:
            hint = did_you_mean(entry.probe, sorted(known))
            if entry.probe in known or lenient or not hint:  # no near miss: an optional probe not installed here
                continue
            raise PluginError(f"{where}: '{entry.probe}' is no probe{hint}; probes: {', '.join(sorted(known))}")
        catalogue = getattr(plugins.probes.get(entry.probe), "catalogue", None)  # a Probe subclass's
        # against the probe's own entries only: sections may differ among themselves, since a run judges a model by
        # its own task's section (validate and describe list the first declaration)
        found = conflicts(catalogue(()), added) if callable(catalogue) and added is not None else []
        if found:
            raise PluginError(f"{where}: its catalogue declares {'; '.join(found)}; declare each metric once (or "
                              "exactly as before)")


@lru_cache(maxsize=1)
def builtin_sections() -> Sections:
    """The sections of the built-in plugins (what a probe run outside the harness looks up), built once."""
    return build_plugins(entry_points=False).sections


def builtin_section(probe: str, task: Any) -> Any | None:
    """``ProbeContext.section`` outside a run: the built-in section of ``probe`` for ``task``."""
    return builtin_sections().find(probe, task)
