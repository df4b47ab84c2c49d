"""What ``bertprobe list`` and ``bertprobe describe`` show of the built-in plugins, recorded so that listing them imports none of them.

Importing the built-in probes imports torch and their other dependencies (seconds on a small machine); the
listing needs only names, descriptions, tasks and requirements. ``catalog.json`` beside this module holds
them per built-in plugin module; ``python tools/plugin_catalog.py`` rewrites it from the real plugins, and a
test fails when it differs from them. A plugin the catalog lacks is imported as usual.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from bertprobe.hookmarkers import hookimpl

CATALOG = Path(__file__).with_name("catalog.json")
KINDS = ("tasks", "probes", "reporters", "datasets", "executors")  # the registries, as Plugins names them


@dataclass(frozen=True)
class Listed:
    """A registered item as the listing shows it: a probe, task, reporter, data loader or executor."""

    name: str
    description: str = ""
    tasks: frozenset[str] = frozenset()
    requires: frozenset[str] = frozenset()
    filename: str = ""
    text: str = ""  # a probe's ``bertprobe describe`` page, as ``describe_text`` writes it


def _describe(item: Any) -> dict[str, Any]:
    from bertprobe.errors import first_line

    row: dict[str, Any] = {"name": item.name if isinstance(getattr(item, "name", None), str) else ""}
    row["description"] = getattr(item, "description", None) or first_line(getattr(item, "__doc__", None) or "")
    for key in ("tasks", "requires"):
        if getattr(item, key, None):
            row[key] = sorted(getattr(item, key))
    if getattr(item, "filename", None):
        row["filename"] = item.filename
    return row


def describe_text(cls: Any, plugins: Any) -> str:
    """What ``bertprobe describe PROBE`` prints: its description, plugin, requirements and tasks, the module's
    docstring (paper and deviations), its params and its metrics (its own and its registered sections')."""
    import inspect
    import sys

    from tabulate import tabulate

    from bertprobe.params import param_rows, plain_text

    module = sys.modules.get(cls.__module__)
    lines = [f"{cls.name}: {cls.description}",
             f"plugin: {plugins.probes.origin(cls.name)}; requires: {', '.join(sorted(cls.requires)) or 'nothing'}"]
    served = {e.task for e in plugins.sections if e.probe == cls.name and e.task}  # plugins' sections for their tasks
    lines.append(f"tasks: {', '.join(sorted(set(cls.tasks) | served))} (a model of another task is refused before it "
                 "loads)")
    doc = inspect.getdoc(module) if module is not None else None
    if doc:
        lines.append("\n" + plain_text(doc))
    rows = param_rows(cls.Params)
    lines.append("\nParams")
    lines.append(tabulate(rows, headers=["param", "type", "default", "meaning"], tablefmt="simple",
                          maxcolwidths=[22, 18, 16, 42]) if rows else "(none)")
    metric_rows = cls.metric_rows(plugins.sections)
    lines.append("\nMetrics (expect: may name these; * stands for any suffix)" if cls.metrics or not metric_rows else
                 "\nMetrics (the probe declares none of its own, so expect: may name any; its sections add these)")
    lines.append(tabulate(metric_rows, headers=["metric", "direction", "meaning"], tablefmt="simple",
                          maxcolwidths=[28, 17, 52]) if metric_rows else "(any)")
    return "\n".join(lines) + "\n"


def collect(plugins: Any, modules: tuple[str, ...]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The catalog of ``modules`` (plugin names) from a plugin manager built for real: what each registered."""
    found: dict[str, dict[str, list[dict[str, Any]]]] = {module: {} for module in modules}
    for kind in KINDS:
        registry = getattr(plugins, kind)
        for name in registry.names():
            origin = registry.origin(name)
            if origin in found:
                row = _describe(registry.get(name))
                row["name"] = name
                if kind == "probes":  # its describe page, so that `describe` imports nothing heavy either
                    row["text"] = describe_text(registry.get(name), plugins)
                found[origin].setdefault(kind, []).append(row)
    return found


@lru_cache(maxsize=1)
def load() -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The stored catalog ({} when the file is missing or unreadable: every plugin is then imported)."""
    try:
        return json.loads(CATALOG.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


class ListedPlugin:
    """Stands in for a built-in plugin module in a listing: registers its catalog rows under the module's name."""

    def __init__(self, rows: dict[str, list[dict[str, Any]]]) -> None:
        self.rows = rows

    def _add(self, kind: str, registry: Any) -> None:
        for row in self.rows.get(kind, []):
            registry.add(Listed(name=row["name"], description=row.get("description", ""),
                                tasks=frozenset(row.get("tasks", ())), requires=frozenset(row.get("requires", ())),
                                filename=row.get("filename", ""), text=row.get("text", "")))

    @hookimpl
    def bertprobe_register_tasks(self, registry: Any) -> None:
        self._add("tasks", registry)

    @hookimpl
    def bertprobe_register_probes(self, registry: Any) -> None:
        self._add("probes", registry)

    @hookimpl
    def bertprobe_register_reporters(self, registry: Any) -> None:
        self._add("reporters", registry)

    @hookimpl
    def bertprobe_register_datasets(self, registry: Any) -> None:
        self._add("datasets", registry)

    @hookimpl
    def bertprobe_register_executors(self, registry: Any) -> None:
        self._add("executors", registry)
