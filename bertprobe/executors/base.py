"""The Executor protocol: everything the harness and the session ask of an executor."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Protocol

if TYPE_CHECKING:
    import threading

    from bertprobe.data.dataset import DataSpec
    from bertprobe.execution import Sweep
    from bertprobe.model.spec import ModelSpec
    from bertprobe.run.session import Session


class Executor(Protocol):
    """What the harness (``start``, ``run_models``, ``close``, ``cancel``) and the session (``map_sweep``)
    ask of an executor. An executor class may also offer ``missing() -> str | None`` (a staticmethod):
    what it lacks on this machine, which ``validate`` reports."""

    name: str
    # set by the harness before ``start``: when several suites run at once, the event that asks every
    # executor to stop its jobs as on Ctrl-C (None: only Ctrl-C stops it)
    cancel: threading.Event | None

    def start(self) -> None:
        """Connect or start what it needs (raise ``SuiteError`` with the fix when it cannot)."""

    def run_models(self, session: Session, plan: list[ModelSpec], params_by_probe: dict[str, Any]) -> None:
        """Run every model's turn (``bertprobe.run.turn.run_model``), recording results into ``session``."""

    def map_sweep(self, session: Session, sweep: Sweep, chunks: list[list[Any]],
                  where: tuple[ModelSpec, DataSpec | None], grouped: bool) -> Iterator[tuple[int, list[Any]]]:
        """Yield ``(chunk index, values)`` for every chunk of units, in any order."""

    def close(self) -> None:
        """Release what ``start`` took (never anything it did not start)."""
