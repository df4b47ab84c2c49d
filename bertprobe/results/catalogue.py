"""A probe's metric catalogue: what ``expect:`` may name, what each metric means and which way is better, the
gating policy and the key metrics.

A probe declares its own (``Probe.metrics``, ``metric_directions``, ``defaults``, ``key_metrics``); a task adds
what it measures in that probe's place (``Task.probe_metrics``: its own section, ``audit_accuracy`` and the
like), and ``Probe.catalogue(tasks)`` merges the two over the registered tasks, before any model loads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from bertprobe.results.report import DefaultExpectation


@dataclass(frozen=True)
class Catalogue:
    """The metrics of a probe, or what one task adds to them.

    ``metrics``: name (an fnmatch pattern) -> meaning; ``directions``: pattern -> higher is better (None: no
    direction; the first pattern that matches a metric decides); ``defaults``: the gating policy (bounds a suite
    that sets none of its own is judged by); ``key_metrics``: what a reader looks at first (empty: the patterns
    of ``defaults``).
    """

    metrics: Mapping[str, str] = field(default_factory=dict)
    directions: Mapping[str, bool | None] = field(default_factory=dict)
    defaults: tuple[DefaultExpectation, ...] = ()
    key_metrics: tuple[str, ...] = ()

    def key_patterns(self) -> tuple[str, ...]:
        """``key_metrics``, else the patterns the gating policy covers."""
        return self.key_metrics or tuple(dict.fromkeys(d.metric for d in self.defaults))


def merge(parts: Iterable[Catalogue]) -> Catalogue:
    """One catalogue of ``parts`` in their order: a metric, direction or default pattern declared twice keeps its
    first declaration (a probe's own come first, so no task redefines them); the key metrics are each part's
    ``key_patterns``, in order."""
    metrics: dict[str, str] = {}
    directions: dict[str, bool | None] = {}
    defaults: dict[str, DefaultExpectation] = {}
    keys: dict[str, None] = {}
    for part in parts:
        for name, meaning in part.metrics.items():
            metrics.setdefault(name, meaning)
        for pattern, higher in part.directions.items():
            directions.setdefault(pattern, higher)
        for default in part.defaults:
            defaults.setdefault(default.metric, default)
        keys.update(dict.fromkeys(part.key_patterns()))
    return Catalogue(MappingProxyType(metrics), MappingProxyType(directions), tuple(defaults.values()), tuple(keys))
