"""Executors: where a run's models and sweeps execute.

* ``local`` (the default) runs every model in this process, one after another.
* ``ray`` (``pip install -e ".[ray]"``) runs each model of a matrix as a Ray task and shards
  ``Sweep`` work units over Ray actors; events stream back to the one ``events.jsonl``.

Executors are plugins: ``bertprobe_register_executors(registry)`` adds classes or instances with a
``name``, built per run from an ``ExecutorSpec`` (``executor:`` in a suite, ``--executor`` on the
command line).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Protocol

if TYPE_CHECKING:
    from bertprobe.data import DataSpec
    from bertprobe.harness import Session
    from bertprobe.probe import Sweep
    from bertprobe.target import ModelSpec


@dataclass(frozen=True)
class ExecutorSpec:
    """``executor:`` of a suite: a name, or a mapping with these keys.

    ``address``: a running Ray cluster to join (``auto``, ``HOST:PORT`` or ``ray://HOST:10001``); without
    it a private cluster is started on loopback and stopped at the end. ``workers``: CPUs of that private
    cluster and the number of sweep shards (default: the cores this process may use). ``max_retries``:
    how often a model job whose worker died is started again (it resumes from its finished work).
    ``resources``: what each model job asks Ray for (default ``num_gpus: 1`` on cuda, else ``num_cpus: 1``).
    ``shard``: fan ``Sweep`` units out over workers (default true).
    """

    name: str = "local"
    address: str | None = None
    workers: int | None = None
    max_retries: int = 2
    resources: dict[str, float] = field(default_factory=dict)
    shard: bool = True

    def __hash__(self) -> int:
        return hash((self.name, self.address, self.workers, self.max_retries, tuple(sorted(self.resources.items())),
                     self.shard))


class Executor(Protocol):
    """What the harness asks of an executor."""

    name: str

    def start(self) -> None:
        """Connect or start what it needs (raise ``SuiteError`` with the fix when it cannot)."""

    def run_models(self, session: Session, plan: list[ModelSpec], parsed: dict[str, Any]) -> None:
        """Run every model's turn (``harness.run_model``), recording results into ``session``."""

    def map_sweep(self, session: Session, sweep: Sweep, chunks: list[list[Any]],
                  where: tuple[ModelSpec, DataSpec | None], grouped: bool) -> Iterator[tuple[int, list[Any]]]:
        """Yield ``(chunk index, values)`` for every chunk of units, in any order."""

    def close(self) -> None:
        """Release what ``start`` took (never anything it did not start)."""
