"""How a probe's work units run: ``Sweep`` (units a worker process can rebuild on its own copy of the model),
``run_chunks`` (the one in-process runner) and ``map_in_process`` (``ProbeContext.map`` outside a harness).

The contract (``bertprobe.probe``) lends a probe ``ctx.map``; the harness (``bertprobe.run.session``) and the
executors (``bertprobe.executors``) run what it is given through these. ``Sweep`` is public: plugins import it
from ``bertprobe`` (or ``bertprobe.probe``, which re-exports it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bertprobe.data.dataset import Dataset
    from bertprobe.model.target import Target


class Sweep:
    """Independent work units that a worker process can rebuild on its own copy of the model.

    A probe subclasses it (a dataclass holding only small, picklable settings) and implements
    ``setup(target, data) -> state`` (pre-tokenised batches, caches: built once per worker) and
    ``run(state, units) -> values`` (one JSON-able value per unit). ``bind(target, data)`` ties it to the
    probe's own target and data; bound, it is called like the function ``ctx.map`` expects (a list of
    units with ``group``, one unit without; so a unit itself is never a list: use a tuple). Pass it to ``ctx.map`` instead of a closure and an executor
    such as ``ray`` may shard the units over workers, each loading the model once; the values are the
    same as in one process. Pickling drops the bound target, data and state (the models stay where
    they are; only the settings and the units travel).
    """

    def setup(self, target: Target, data: Dataset | None) -> Any:
        """What every unit needs, built once per process (default: nothing)."""
        return None

    def run(self, state: Any, units: list[Any]) -> list[Any]:
        """One value per unit."""
        raise NotImplementedError

    def bind(self, target: Target, data: Dataset | None, state: Any = None) -> Sweep:
        """Tie the sweep to a loaded target and data; ``state`` reuses what ``setup`` would build."""
        self.__dict__["_bound"] = (target, data)
        self.__dict__["_state"] = state
        return self

    def state(self) -> Any:
        if self.__dict__.get("_state") is None:
            bound = self.__dict__.get("_bound")
            if bound is None:
                raise RuntimeError(f"{type(self).__name__}: call bind(target, data) before running it here")
            self.__dict__["_state"] = self.setup(*bound)
        return self.__dict__["_state"]

    def __call__(self, units: Any) -> Any:
        if isinstance(units, list):
            return self.run(self.state(), units)
        return self.run(self.state(), [units])[0]

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("_bound", "_state")}


def run_chunks(fn: Callable[[Any], Any], chunks: Sequence[Sequence[Any]], grouped: bool) -> Iterator[tuple[int, list[Any]]]:
    """Run chunks of work units in this process, one after another, yielding ``(chunk index, values)``.

    ``grouped``: ``fn`` takes a list of units and returns one value per unit; otherwise every chunk
    holds one unit and ``fn`` takes it alone. The one in-process runner: ``ProbeContext.map`` outside
    the harness, the harness's fallback for closures and the ``local`` executor all use it.
    """
    for i, chunk in enumerate(chunks):
        yield i, (list(fn(list(chunk))) if grouped else [fn(chunk[0])])


def map_in_process(fn: Callable[[Any], Any], units: Sequence[tuple[str, Any]], desc: str = "", group: int = 0) -> list[Any]:
    """``ProbeContext.map`` without a harness: every unit in this process, nothing recorded."""
    items = [unit for _, unit in units]
    size = max(1, group)
    chunks = [items[start : start + size] for start in range(0, len(items), size)]
    return [value for _, values in run_chunks(fn, chunks, bool(group)) for value in values]
