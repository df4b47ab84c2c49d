"""The ``local`` executor: every model in this process, one after another (the default)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

from bertprobe.executors import ExecutorSpec

if TYPE_CHECKING:
    from bertprobe.data import DataSpec
    from bertprobe.harness import Session
    from bertprobe.probe import Sweep
    from bertprobe.target import ModelSpec


class LocalExecutor:
    """Models in plan order, each freed once its probes are done; sweeps in this process."""

    name = "local"

    def __init__(self, spec: ExecutorSpec | None = None) -> None:
        self.spec = spec or ExecutorSpec()

    def start(self) -> None:
        pass

    def run_models(self, session: Session, plan: list[ModelSpec], parsed: dict[str, Any]) -> None:
        from bertprobe.harness import run_model

        for position, model_spec in enumerate(plan):
            run_model(session, position, model_spec, parsed)
            session.release(set(plan[position + 1 :]))

    def map_sweep(self, session: Session, sweep: Sweep, chunks: list[list[Any]],
                  where: tuple[ModelSpec, DataSpec | None], grouped: bool) -> Iterator[tuple[int, list[Any]]]:
        for i, chunk in enumerate(chunks):
            yield i, (sweep(chunk) if grouped else [sweep(chunk[0])])

    def close(self) -> None:
        pass
