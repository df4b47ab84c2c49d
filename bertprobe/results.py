"""The data model of a run: metrics, findings, probe results and the run report."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

def layer_head_heatmap(matrix: Any) -> dict[str, Any]:
    """A ``details["heatmaps"]`` entry for a layers x heads tensor: rows L0, L1, ..., columns H0, H1, ..."""
    layers, heads = matrix.shape
    return {"matrix": matrix.tolist(), "rows": [f"L{i}" for i in range(layers)], "cols": [f"H{j}" for j in range(heads)]}


SCHEMA_VERSION = 1

Status = Literal["passed", "failed", "skipped", "error"]
RunStatus = Literal["running", "completed", "interrupted", "aborted"]


def jsonable(value: Any) -> Any:
    """Convert numpy/torch scalars, tuples, paths and NaN into plain JSON values."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if hasattr(value, "tolist"):  # numpy arrays and scalars, torch tensors
        return jsonable(value.tolist())
    if hasattr(value, "item"):
        return jsonable(value.item())
    return str(value)


@dataclass
class Metric:
    """One named number a probe measured."""

    name: str
    value: float | None
    higher_is_better: bool | None = None
    description: str = ""
    ci: tuple[float, float] | None = None


@dataclass
class Expectation:
    """A suite's threshold on a metric and whether the measured value meets it."""

    metric: str
    min: float | None = None
    max: float | None = None
    value: float | None = None
    passed: bool | None = None

    def check(self, value: float | None) -> bool:
        """Record ``value`` and return whether it lies within [min, max]."""
        self.value = value
        ok = value is not None and not (isinstance(value, float) and math.isnan(value))
        if ok and self.min is not None and value < self.min:  # type: ignore[operator]
            ok = False
        if ok and self.max is not None and value > self.max:  # type: ignore[operator]
            ok = False
        self.passed = ok
        return ok

    def describe(self) -> str:
        parts = []
        if self.min is not None:
            parts.append(f">= {self.min:g}")
        if self.max is not None:
            parts.append(f"<= {self.max:g}")
        return " and ".join(parts) or "any"


@dataclass
class Finding:
    """A piece of evidence: an input, what was done to it, and what the model did."""

    title: str
    input: str | None = None
    perturbed: str | None = None
    expected: str | None = None
    observed: str | None = None
    score: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ProbeResult:
    """Everything one probe produced. ``status`` is decided by the harness from expectations."""

    probe: str
    id: str = ""
    status: Status = "passed"
    metrics: dict[str, Metric] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)  # "summary": {label: short text} is shown in reports
    expectations: list[Expectation] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    model: str = ""
    duration_s: float = 0.0
    seed: int | None = None

    def add_metric(
        self,
        name: str,
        value: float | None,
        higher_is_better: bool | None = None,
        description: str = "",
        ci: tuple[float, float] | None = None,
    ) -> Metric:
        """Add (or replace) a metric and return it."""
        metric = Metric(name, None if value is None else float(value), higher_is_better, description, ci)
        self.metrics[name] = metric
        return metric

    def value(self, name: str) -> float | None:
        metric = self.metrics.get(name)
        return None if metric is None else metric.value

    def to_dict(self) -> dict[str, Any]:
        return jsonable(
            {
                "probe": self.probe,
                "id": self.id or self.probe,
                "status": self.status,
                "message": self.message,
                "model": self.model,
                "metrics": {n: m.value for n, m in self.metrics.items()},
                "metric_info": {
                    n: {"higher_is_better": m.higher_is_better, "description": m.description, "ci": m.ci}
                    for n, m in self.metrics.items()
                },
                "expectations": [asdict(e) for e in self.expectations],
                "findings": [asdict(f) for f in self.findings],
                "details": self.details,
                "params": self.params,
                "duration_s": round(self.duration_s, 4),
                "seed": self.seed,
            }
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeResult:
        info = data.get("metric_info", {})
        metrics = {
            name: Metric(
                name,
                value,
                info.get(name, {}).get("higher_is_better"),
                info.get(name, {}).get("description", ""),
                tuple(info[name]["ci"]) if info.get(name, {}).get("ci") else None,  # type: ignore[arg-type]
            )
            for name, value in data.get("metrics", {}).items()
        }
        return cls(
            probe=data["probe"],
            id=data.get("id", data["probe"]),
            status=data.get("status", "passed"),
            metrics=metrics,
            findings=[Finding(**f) for f in data.get("findings", [])],
            details=data.get("details", {}),
            expectations=[Expectation(**e) for e in data.get("expectations", [])],
            params=data.get("params", {}),
            message=data.get("message", ""),
            model=data.get("model", ""),
            duration_s=data.get("duration_s", 0.0),
            seed=data.get("seed"),
        )


@dataclass
class RunReport:
    """The whole run: provenance plus one ProbeResult per probe, in suite order."""

    suite: str
    model: str = ""
    data: str = ""
    device: str = ""
    dtype: str = ""
    seed: int | None = None
    versions: dict[str, str] = field(default_factory=dict)
    started_at: str = ""
    finished_at: str = ""
    status: RunStatus = "running"
    message: str = ""
    run_dir: str = ""
    probes: list[ProbeResult] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION

    def counts(self) -> dict[str, int]:
        out = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}
        for result in self.probes:
            out[result.status] += 1
        return out

    def score(self) -> float | None:
        """Share of checked expectations that hold; probes that errored count as failing all theirs.

        Returns None when nothing was checked.
        """
        total = held = 0
        for result in self.probes:
            if result.status == "skipped":
                continue
            if result.status == "error":
                total += max(1, len(result.expectations))
                continue
            total += len(result.expectations)
            held += sum(1 for e in result.expectations if e.passed)
        return None if total == 0 else held / total

    @property
    def ok(self) -> bool:
        """True when the run completed and no probe failed or errored."""
        counts = self.counts()
        return self.status == "completed" and counts["failed"] == 0 and counts["error"] == 0

    def to_dict(self) -> dict[str, Any]:
        head = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "probes"}
        head["score"] = self.score()
        head["counts"] = self.counts()
        head["probes"] = [p.to_dict() for p in self.probes]
        return jsonable(head)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunReport:
        names = {f.name for f in fields(cls)} - {"probes"}
        report = cls(**{k: v for k, v in data.items() if k in names})
        report.probes = [ProbeResult.from_dict(p) for p in data.get("probes", [])]
        return report
