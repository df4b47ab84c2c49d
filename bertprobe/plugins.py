"""Build a plugin manager per run: hook specs, built-in plugins, entry points, then validation."""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any

import pluggy

from bertprobe import hookspecs
from bertprobe.errors import PluginError
from bertprobe.registry import Registry

ENTRY_POINT_GROUP = "bertprobe"
DISABLE_ENV = "BERTPROBE_DISABLE_PLUGINS"

# Built-in plugins register through the same hooks as third-party ones (cf. datasette, pytest).
DEFAULT_PLUGINS = (
    "bertprobe.loaders",
    "bertprobe.probes.accuracy",
    "bertprobe.probes.triggers",
    "bertprobe.probes.heads",
    "bertprobe.probes.attention",
    "bertprobe.probes.cues",
    "bertprobe.probes.cloze",
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

    @property
    def hook(self) -> Any:
        return self.manager.hook

    def describe(self) -> list[dict[str, str]]:
        """One row per plugin: name, version and where it came from."""
        from bertprobe import __version__

        dists = {id(plugin): dist for plugin, dist in self.manager.list_plugin_distinfo()}
        rows = []
        for name, plugin in sorted(self.manager.list_name_plugin(), key=lambda item: str(item[0])):
            if plugin is None:
                continue
            dist = dists.get(id(plugin))
            if dist is not None:
                rows.append({"name": name, "version": dist.version, "source": f"entry point ({dist.project_name})"})
            else:
                rows.append({"name": name, "version": __version__, "source": "built-in"})
        return rows


def _disabled(env: dict[str, str] | os._Environ[str] | None) -> set[str]:
    raw = (env if env is not None else os.environ).get(DISABLE_ENV, "")
    return {name.strip() for name in raw.split(",") if name.strip()}


def build_plugins(
    extra: list[Any] | None = None,
    env: dict[str, str] | None = None,
    entry_points: bool = True,
) -> Plugins:
    """Create a fresh plugin manager (never a global) and fill the registries.

    ``extra`` plugins (objects or modules) are registered after the built-ins; useful in tests.
    Names listed in BERTPROBE_DISABLE_PLUGINS (comma-separated) are blocked, built-ins included.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for name in _disabled(env):
        pm.set_blocked(name)
    try:
        for module_name in DEFAULT_PLUGINS:
            if not pm.is_blocked(module_name):
                pm.register(importlib.import_module(module_name), name=module_name)
        for plugin in extra or []:
            pm.register(plugin)
        if entry_points:
            pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        name = pm.get_name(exc.plugin) if exc.plugin is not None else "?"
        raise PluginError(f"plugin '{name}' is invalid: {exc}; disable it with {DISABLE_ENV}") from None
    except (ImportError, AttributeError) as exc:
        raise PluginError(f"a bertprobe plugin failed to load: {exc}; disable it with {DISABLE_ENV}") from None
    plugins = Plugins(pm, Registry("probe"), Registry("reporter"), Registry("dataset loader"))
    for hook, registry in (
        ("bertprobe_register_probes", plugins.probes),
        ("bertprobe_register_reporters", plugins.reporters),
        ("bertprobe_register_datasets", plugins.datasets),
    ):
        for impl in reversed(getattr(pm.hook, hook).get_hookimpls()):
            registry.current_plugin = impl.plugin_name
            impl.function(registry=registry)
    return plugins
