"""Run state folded from the event log: the probe running on each model, the work units finished, the
results kept, the weights each model was loaded from.

``RunState.apply`` is the one writer: ``Session.emit`` hands it every event after the report takes it, so
the local executor, the Ray driver (which emits each worker's events again) and ``--resume`` (which folds
an interrupted run's events.jsonl) all derive the same state from the same events.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

UNFINISHED = ("error", "interrupted")  # results a resumed run (or a retried job) runs again


@dataclass
class RunState:
    """What the events say about a run in progress. Read it; only ``apply`` changes it."""

    running: dict[str, str] = field(default_factory=dict)  # model -> id of the probe running on it
    # (model, probe id) -> key -> value, for probes without a kept result (what a resume or a retry reuses)
    units: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    kept: set[tuple[str, str]] = field(default_factory=set)  # (model, probe id) of finished results
    hashes: dict[str, str | None] = field(default_factory=dict)  # model -> sha256 of the weights it loaded

    @classmethod
    def fold(cls, records: Iterable[dict[str, Any]]) -> RunState:
        state = cls()
        for record in records:
            state.apply(record)
        return state

    def apply(self, record: dict[str, Any]) -> None:
        """Fold one event in (events that say nothing about run state are ignored)."""
        kind = record.get("event")
        if kind == "probe_start":
            self.running[str(record.get("model"))] = str(record.get("id"))
        elif kind == "unit_result":
            key = (str(record.get("model")), str(record.get("id")))
            self.units.setdefault(key, {})[str(record.get("key"))] = record.get("value")
        elif kind == "probe_result":
            result = record.get("result") or {}
            model, probe_id = str(result.get("model")), str(result.get("id") or result.get("probe"))
            if self.running.get(model) == probe_id:
                del self.running[model]
            if result.get("status") in UNFINISHED:
                self.kept.discard((model, probe_id))
            else:  # a kept result never runs again: its units are done with
                self.kept.add((model, probe_id))
                self.units.pop((model, probe_id), None)
        elif kind == "run_resumed":  # what ran when the old run stopped runs no longer
            self.running.clear()
        elif kind == "model_loaded":
            info = record.get("info") or {}
            self.hashes[str(record.get("model") or info.get("name"))] = info.get("sha256")

    def units_of(self, model: str, probe_id: str) -> dict[str, Any]:
        """The finished work units of a probe on a model that has no kept result (key -> value), this run's
        and a resumed one's."""
        return self.units.get((model, probe_id), {})

    def copy(self) -> RunState:
        """An independent copy (what a retried or resumed job starts from)."""
        return RunState(dict(self.running), {k: dict(v) for k, v in self.units.items()}, set(self.kept),
                        dict(self.hashes))
