"""One lookup for "probe P on a model of task T": the section of the probe's own package that runs there.

A task says what a model's outputs mean (how inputs are encoded, outputs decoded, an answer scored against its
gold, examples grouped); a probe says what to measure. Where what a probe measures differs by kind of model (a
reader's answers, a tagger's entities, a multi-label tagger's label sets), the probe keeps a *section* for that
kind in its own package (``probes/accuracy/answers.py``, ``entities.py``, ``labelsets.py``). Sections register
through the ``bertprobe_register_sections`` hook, the built-in ones included::

    registry.add("accuracy", answers, when="span_answers")    # built-in: any task that sets the flag
    registry.add("accuracy", StanceAccuracy(), task="stance")  # a plugin's, for its own task

``Sections.find(probe, task)`` is the one place that picks a section: the one registered for the task's name
first, then the first registered for a meaning flag the task sets (in registration order), else None (the
probe's own code, for classes). A section is any object (a module, an instance) holding what its probe calls:
each probe names its section's protocol in its docstring. Its optional ``catalogue`` (``results.Catalogue``)
declares the metrics it writes in the probe's place; ``Probe.catalogue`` merges them. The registry of the built-in
plugins alone, what a probe run outside the harness looks up, is ``bertprobe.plugins.builtin_sections()``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from bertprobe.errors import PluginError

# the meaning flags of ``bertprobe.tasks.Task`` a section may be chosen by (``when=``)
MEANINGS = ("span_answers", "word_tags", "label_sets", "rows_per_choice", "headless", "ranks_texts")


@dataclass(frozen=True)
class Entry:
    """One registered section: for ``probe`` on the task named ``task``, or on any task that sets ``when``."""

    probe: str
    section: Any
    task: str | None = None
    when: str | None = None
    plugin: str = "?"

    @property
    def key(self) -> str:
        return f"task '{self.task}'" if self.task is not None else f"tasks with {self.when}"


class Sections:
    """The registry the ``bertprobe_register_sections`` hook fills, and the lookup probes ask."""

    def __init__(self) -> None:
        self._entries: list[Entry] = []
        self.current_plugin: str = "?"

    def add(self, probe: str, section: Any, *, task: str | None = None, when: str | None = None) -> Any:
        """Register ``section`` for ``probe`` on the task named ``task`` (a plugin's own, or a built-in one),
        or on every task whose meaning flag ``when`` is set (one of ``MEANINGS``); returns ``section``."""
        where = f"section of probe '{probe}' from plugin '{self.current_plugin}'"
        if not isinstance(probe, str) or not probe:
            raise PluginError(f"a section from plugin '{self.current_plugin}' names no probe: add(probe, section, task=...)")
        if (task is None) == (when is None):
            raise PluginError(f"{where}: give exactly one of task= (a task's name) and when= (a meaning flag: "
                              f"{', '.join(MEANINGS)})")
        if when is not None and when not in MEANINGS:
            from bertprobe.registry import did_you_mean

            raise PluginError(f"{where}: when='{when}' is no meaning flag{did_you_mean(when, MEANINGS)}; flags: "
                              f"{', '.join(MEANINGS)} (a plugin's own task is named with task=)")
        entry = Entry(probe, section, task, when, self.current_plugin)
        for other in self._entries:
            if other.probe == probe and other.task == task and other.when == when:
                raise PluginError(f"the section of probe '{probe}' for {entry.key} is registered twice: by plugin "
                                  f"'{other.plugin}' and by plugin '{self.current_plugin}'; disable one with "
                                  "BERTPROBE_DISABLE_PLUGINS")
        self._entries.append(entry)
        return section

    def entry(self, probe: str, task: Any) -> Entry | None:
        """The entry ``find`` picks (None: the probe's own code)."""
        if task is None:
            return None
        name = getattr(task, "name", None)
        for e in self._entries:
            if e.probe == probe and e.task is not None and e.task == name:
                return e
        for e in self._entries:  # the one place a meaning flag picks a built-in section
            if e.probe == probe and e.when is not None and bool(getattr(task, e.when, False)):
                return e
        return None

    def find(self, probe: str, task: Any) -> Any | None:
        """The section of ``probe`` for a model of ``task`` (a Task class or instance), or None."""
        found = self.entry(probe, task)
        return None if found is None else found.section

    def of(self, probe: str) -> list[Any]:
        """Every section of ``probe``, in registration order (what ``validate`` and ``describe`` merge)."""
        return [e.section for e in self._entries if e.probe == probe]

    def __iter__(self) -> Iterator[Entry]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)
