"""The probe contract every built-in and third-party probe implements."""

from __future__ import annotations

import abc
import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from bertprobe.params import NoParams
from bertprobe.results import ProbeResult

if TYPE_CHECKING:
    from bertprobe.data import Dataset, DataSpec
    from bertprobe.target import ModelSpec, Target

T = TypeVar("T")


def _no_progress(iterable: Iterable[T], **_: Any) -> Iterable[T]:
    return iterable


@dataclass
class ProbeContext:
    """What the harness lends a running probe besides the target and the data."""

    seed: int = 0
    out_dir: Path | None = None
    progress: Callable[..., Any] = _no_progress
    log: Callable[[str], None] = lambda message: None
    load_target: Callable[[ModelSpec], Target] | None = None
    load_data: Callable[[DataSpec], Dataset] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Probe(abc.ABC):
    """Base class of a probe.

    Subclasses set ``name`` (what a suite writes), ``description`` (one line for ``bertprobe list``),
    ``requires`` (target capabilities such as ``classifier``, ``mlm``, ``attentions``, ``gradients``),
    ``metrics`` (metric names, fnmatch patterns allowed, that ``expect:`` may name) and ``Params``
    (a frozen dataclass; the suite's ``params:`` are validated against it).
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    requires: ClassVar[frozenset[str]] = frozenset()
    needs_data: ClassVar[bool] = True
    metrics: ClassVar[tuple[str, ...]] = ()
    Params: ClassVar[type] = NoParams

    @classmethod
    def knows_metric(cls, name: str) -> bool:
        """Whether ``expect:`` may name this metric (always true when the probe declares none)."""
        return not cls.metrics or any(fnmatch.fnmatchcase(name, pat) for pat in cls.metrics)

    @classmethod
    def missing_requirements(cls, capabilities: frozenset[str] | set[str]) -> list[str]:
        return sorted(set(cls.requires) - set(capabilities))

    @abc.abstractmethod
    def run(self, target: Target, data: Dataset | None, params: Any, ctx: ProbeContext) -> ProbeResult:
        """Run against ``target`` and return metrics, findings and details (status is set later)."""
