"""A probe's metric catalogue: what ``expect:`` may name, what each metric means and which way is better, the
gating policy and the key metrics.

A probe declares its own (``Probe.metrics``, ``metric_directions``, ``defaults``, ``key_metrics``); each of its
sections for one kind of model (``bertprobe.sections``: a reader's answers, a tagger's entities) adds what it
writes in the probe's place (the section's ``catalogue``), and ``Probe.catalogue(sections)`` merges them over the
registered sections, before any model loads.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from bertprobe.errors import PluginError
from bertprobe.results.report import DefaultExpectation

DIRECTION_WORDS = {True: "higher is better", False: "lower is better", None: "no direction"}


@dataclass(frozen=True)
class Catalogue:
    """The metrics of a probe, or what one task adds to them.

    ``metrics``: name (an fnmatch pattern) -> meaning; ``directions``: pattern -> higher is better (None: no
    direction; the first pattern that matches a metric decides); ``defaults``: the gating policy (bounds a suite
    that sets none of its own is judged by); ``key_metrics``: what a reader looks at first (empty: the patterns
    of ``defaults``).

    ``metrics`` may also be a tuple of names (as ``Probe.metrics`` may), each then with no meaning; every field is
    checked here, so a malformed declaration fails where it is made, as one line (``PluginError``).
    """

    metrics: Mapping[str, str] = field(default_factory=dict)
    directions: Mapping[str, bool | None] = field(default_factory=dict)
    defaults: tuple[DefaultExpectation, ...] = ()
    key_metrics: tuple[str, ...] = ()
    # a section's: the probe's own metrics (patterns) it never writes in their place (a reader's accuracy writes f1,
    # never accuracy): ``validate`` refuses an expectation naming one for a model of the section's kind
    absent: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        metrics, directions = self.metrics, self.directions
        if _names(metrics):
            metrics = dict.fromkeys(metrics, "")
        if not isinstance(metrics, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in metrics.items()):
            raise PluginError(f"Catalogue metrics must map metric names to their meanings (or be a tuple of names), "
                              f"not {_shown(metrics)}")
        if not isinstance(directions, Mapping) or not all(
                isinstance(k, str) and (v is None or isinstance(v, bool)) for k, v in directions.items()):
            raise PluginError(f"Catalogue directions must map metric patterns to True (higher is better), False "
                              f"(lower is better) or None, not {_shown(directions)}")
        defaults = tuple(self.defaults) if isinstance(self.defaults, (tuple, list)) else None
        if defaults is None or not all(isinstance(d, DefaultExpectation) for d in defaults):
            raise PluginError(f"Catalogue defaults must be a tuple of bertprobe.results.DefaultExpectation, not "
                              f"{_shown(self.defaults)}")
        keys = tuple(self.key_metrics) if isinstance(self.key_metrics, (tuple, list)) else None
        if keys is None or not all(isinstance(k, str) for k in keys):
            raise PluginError(f"Catalogue key_metrics must be a tuple of metric patterns, not {_shown(self.key_metrics)}")
        object.__setattr__(self, "metrics", metrics)
        object.__setattr__(self, "defaults", defaults)
        object.__setattr__(self, "key_metrics", keys)

    def direction(self, metric: str) -> bool | None | str:
        """Whether ``metric`` is better higher (True), lower (False) or neither (None), from the first of
        ``directions`` that matches it; ``"unset"`` where none does."""
        return next((h for pattern, h in self.directions.items() if fnmatch.fnmatchcase(metric, pattern)), "unset")

    def meaning(self, metric: str) -> str:
        """What ``metric`` means: its own entry of ``metrics``, else the most specific pattern's that matches it (the
        one with the most characters besides wildcards; the first of equals); "" where none does."""
        if metric in self.metrics:
            return self.metrics[metric]
        matching = [(pattern, text) for pattern, text in self.metrics.items() if fnmatch.fnmatchcase(metric, pattern)]
        return max(matching, key=lambda kv: len(kv[0].replace("*", "").replace("?", "")), default=("", ""))[1]

    def key_patterns(self) -> tuple[str, ...]:
        """``key_metrics``, else the patterns the gating policy covers."""
        return self.key_metrics or tuple(dict.fromkeys(d.metric for d in self.defaults))


def _names(value: Any) -> bool:
    """Whether ``value`` is a non-empty tuple or list of strings."""
    return isinstance(value, (tuple, list)) and bool(value) and all(isinstance(v, str) for v in value)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def conflicts(before: Catalogue, added: Catalogue) -> list[str]:
    """What ``added`` declares otherwise than ``before`` (a probe's own entries merged with the tasks' registered
    earlier), each as a phrase: a metric again with another meaning, a metric whose direction differs from the
    one ``before`` gives it, a default bound again with other bounds. ``merge`` keeps the first declaration, so
    each of these would be dropped without a word; the same entry again is no conflict."""
    found = []
    for metric, meaning in added.metrics.items():
        if meaning and before.metrics.get(metric) and before.metrics[metric] != meaning:
            found.append(f"metric '{metric}' again with another meaning ({before.metrics[metric]!r} first)")
    for metric in dict.fromkeys([*added.metrics, *added.directions]):
        mine, first = added.direction(metric), before.direction(metric)
        if mine != "unset" and first != "unset" and mine != first:
            found.append(f"'{metric}' {DIRECTION_WORDS[mine]}, where it is {DIRECTION_WORDS[first]}")  # type: ignore[index]
    bounds = {d.metric: d for d in before.defaults}
    for default in added.defaults:
        first_bound = bounds.get(default.metric)
        if first_bound is not None and (default.min, default.max, default.interval) != \
                (first_bound.min, first_bound.max, first_bound.interval):
            found.append(f"default '{default.metric}' {default.describe()}, where it is {first_bound.describe()}")
    return found


def merge(parts: Iterable[Catalogue]) -> Catalogue:
    """One catalogue of ``parts`` in their order: a metric, direction or default pattern declared twice keeps its
    first declaration (a probe's own come first; plugin registration refuses a task's entry that ``conflicts``
    with what comes before it, so nothing declared is dropped but the same again); the key metrics are each part's
    ``key_patterns``, in order."""
    metrics: dict[str, str] = {}
    directions: dict[str, bool | None] = {}
    defaults: dict[str, DefaultExpectation] = {}
    keys: dict[str, None] = {}
    for part in parts:
        for name, meaning in part.metrics.items():
            if not metrics.get(name):  # a name declared without a meaning takes the first meaning given
                metrics[name] = meaning
        for pattern, higher in part.directions.items():
            directions.setdefault(pattern, higher)
        for default in part.defaults:
            defaults.setdefault(default.metric, default)
        keys.update(dict.fromkeys(part.key_patterns()))
    return Catalogue(MappingProxyType(metrics), MappingProxyType(directions), tuple(defaults.values()), tuple(keys))
