"""The ``local`` executor: every model in this process, one after another (the default)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator

from bertprobe.execution import run_chunks
from bertprobe.run.turn import models_params_name, run_model
from bertprobe.suite.schema import ExecutorSpec

if TYPE_CHECKING:
    from bertprobe.data import DataSpec
    from bertprobe.execution import Sweep
    from bertprobe.model import ModelSpec
    from bertprobe.run.session import Session


class LocalExecutor:
    """Models in plan order, each freed once its probes are done; sweeps in this process.

    A model that a later turn's probe param names (``Probe.model_params``: behaviour's ``mlm``) is kept loaded, so
    it loads once per run."""

    name = "local"

    def __init__(self, spec: ExecutorSpec | None = None) -> None:
        self.spec = spec or ExecutorSpec()
        self.cancel = None  # unused: local runs several suites one after another

    def start(self) -> None:
        pass

    def run_models(self, session: Session, plan: list[ModelSpec], params_by_probe: dict[str, Any]) -> None:
        for position, model_spec in enumerate(plan):
            run_model(session, position, model_spec, params_by_probe)
            later = plan[position + 1 :]
            session.caches.release(set(later) | models_params_name(session, later, params_by_probe, position + 1))

    def map_sweep(self, session: Session | None, sweep: Sweep | Callable[[Any], Any], chunks: list[list[Any]],
                  where: tuple[ModelSpec, DataSpec | None] | None, grouped: bool) -> Iterator[tuple[int, list[Any]]]:
        """Chunk after chunk, in this process (a bound Sweep or any function of ``ctx.map``)."""
        return run_chunks(sweep, chunks, grouped)

    def close(self) -> None:
        pass
