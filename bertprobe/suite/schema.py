"""What a suite is, once loaded: ProbeSpec, GateSpec, ExecutorSpec and Suite."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from bertprobe.data.dataset import DataSpec
from bertprobe.model.spec import ModelSpec
from bertprobe.results import Expectation
from bertprobe.results.report import DEFAULT_TOLERANCE, metric_tolerance

DEFAULT_SIGNIFICANCE = 0.05  # a change past the tolerance gates only when its Holm-corrected paired p is below this


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


@dataclass(frozen=True)
class ProbeSpec:
    """One entry of ``probes:``; ``model``/``data`` override the suite's for this probe only."""

    probe: str
    id: str
    params: dict[str, Any] = field(default_factory=dict)
    expect: tuple[Expectation, ...] = ()
    model: ModelSpec | None = None
    data: DataSpec | None = None
    path: str = ""
    base_dir: str | None = None  # the suite file's folder: path params resolve against it
    env_params: frozenset[str] = frozenset()  # params whose value came from an environment variable
    expect_off: tuple[str, ...] = ()  # metrics (patterns) whose default expectation the suite turns off


@dataclass(frozen=True)
class GateSpec:
    """``compare:``: every other model is judged against ``baseline`` (a model name of the matrix).

    ``tolerance`` is one number or a map per metric name (``default`` for the rest). A change in the bad
    direction larger than it is a regression when it is also significant: its paired test (McNemar's exact
    test on binary outcomes, else a paired bootstrap), Holm-corrected across the candidate's metrics, has
    p below ``significance`` (0.05). ``significance: null`` judges on the delta alone.
    """

    baseline: str
    tolerance: float | dict[str, float] = DEFAULT_TOLERANCE
    significance: float | None = DEFAULT_SIGNIFICANCE

    def tolerance_for(self, metric: str) -> float:
        return metric_tolerance(self.tolerance, metric)

    def to_dict(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "tolerance": self.tolerance, "significance": self.significance}


@dataclass(frozen=True)
class Suite:
    name: str
    model: ModelSpec | None
    data: DataSpec | None
    probes: tuple[ProbeSpec, ...]
    models: tuple[ModelSpec, ...] = ()
    gate: GateSpec | None = None  # the YAML key is compare:
    seed: int = 0
    threads: int | None = None
    description: str = ""
    report_dir: str = "reports"
    formats: tuple[str, ...] = ("json", "markdown", "html")
    source: str = ""
    executor: ExecutorSpec | None = None  # where models and sweeps run (None: local, in this process)
    variables: dict[str, str | None] = field(default_factory=dict)  # ${VAR}s read, with their values (None: unset)
    # suite path -> the environment variables that set its value ('probes[0].params.precision': BERTPROBE_PRECISION)
    set_by: dict[str, tuple[str, ...]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()  # what loading found and left for validate_suite to report with the rest
    left_out: tuple[str, ...] = ()  # the entries --only left out (their ids): a decision does not cover them


def unique_names(specs: list[ModelSpec]) -> list[ModelSpec]:
    """Give every model a name: its own, else its folder or hub name, made unique with -2, -3, ..."""
    taken = {s.name for s in specs if s.name}
    out = []
    for spec in specs:
        if not spec.name:
            name, n = spec.default_name, 2
            while name in taken:
                name, n = f"{spec.default_name}-{n}", n + 1
            taken.add(name)
            spec = replace(spec, name=name)
        out.append(spec)
    return out
