"""The data model of a run: metrics, findings, probe results and the run report."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from bertprobe.results.outcomes import Agreement, Outcomes
from bertprobe.stats import wilson_interval

SCHEMA_VERSION = 2  # 2: models (a matrix), metric kind/outcome, regressions; version 1 is still read

Status = Literal["passed", "failed", "measured", "skipped", "error", "interrupted"]
MetricKind = Literal["quality", "extreme", "cost", "count"]
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
    kind: MetricKind = "quality"  # gates and compare judge quality metrics only; extreme: a max/min over groups
    outcome: str | None = None  # the per-example Outcomes vector this metric summarises
    cases: int | None = None  # the independent cases the value rests on, where a probe knows (a group, a slice, a test)

    @property
    def gated(self) -> bool:
        """Whether a regression gate judges this metric: a quality metric with a direction."""
        return self.kind == "quality" and self.higher_is_better is not None


@dataclass
class ModelInfo:
    """What was loaded for one model of a run (one ``model_loaded`` event)."""

    name: str
    path: str
    sha256: str | None = None
    parameters: int = 0
    bytes: int = 0
    dtype: str = ""
    device: str = ""
    task: str = ""
    task_settings: dict[str, Any] = field(default_factory=dict)  # how the task decides (multi-label thresholds)
    variant: dict[str, Any] = field(default_factory=dict)
    capabilities: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelInfo:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


DEFAULT_TOLERANCE = 0.01  # compare.tolerance where a suite gives none, or its map no default


def metric_tolerance(tolerance: float | dict[str, float], metric: str) -> float:
    """The tolerance ``compare.tolerance`` (one number, or a map per metric with a ``default``) gives ``metric``."""
    if isinstance(tolerance, dict):
        return float(tolerance.get(metric, tolerance.get("default", DEFAULT_TOLERANCE)))
    return float(tolerance)


@dataclass
class MetricDelta:
    """One metric of one probe, a candidate model against the baseline; a regression when ``regression``.

    ``tolerance`` is the change allowed in the bad direction; ``p_value`` and ``ci`` come from the
    paired test (McNemar's exact test, paired bootstrap) where both sides published outcomes.
    """

    model: str
    baseline: str
    probe_id: str
    metric: str
    baseline_value: float | None
    value: float | None
    delta: float | None
    higher_is_better: bool | None = None
    gated: bool = False
    tolerance: float = 0.0
    paired: int = 0
    p_value: float | None = None
    ci: tuple[float, float] | None = None
    test: str = ""
    regression: bool = False
    p_adjusted: float | None = None  # Holm-corrected across the candidate's tested metrics
    past_tolerance: bool = False  # a gated metric worse by more than the tolerance (a regression when significant)
    significant: bool = False  # its Holm-adjusted p is below the gate's significance level (either direction)
    also_in: list[str] = field(default_factory=list)  # other probes that measured the same quantity on the same examples
    # a subset's delta (a flagged slice against the baseline on the same examples): the count metric it is one of
    counted_in: str = ""
    in_baseline: bool = False  # the baseline's own run flagged the same subset
    # where the two sides' outcome vectors hold different examples (items skipped by one tokenizer): what that means
    unequal: str = ""

    @property
    def label(self) -> str:
        """'slices.accuracy on 'has a negation'' (and the other probes that measured the same: 'also seen in: ...')."""
        return f"{self.probe_id}.{self.metric}" + (f" (also seen in: {', '.join(self.also_in)})" if self.also_in else "")

    def describe(self) -> str:
        adjusted = f", Holm-adjusted {self.p_adjusted:.3g}" if self.p_adjusted is not None else ""
        sig = f", p={self.p_value:.3g}{adjusted} ({self.test})" if self.p_value is not None else ""
        also = f"; also seen in: {', '.join(self.also_in)}" if self.also_in else ""
        unequal = f"; {self.unequal}" if self.unequal else ""
        return (f"{self.probe_id}.{self.metric} on {self.model}: {_num(self.value)} vs {_num(self.baseline_value)} "
                f"on {self.baseline} (delta {_num(self.delta, signed=True)}, tolerance {self.tolerance:g}{sig}{also}"
                f"{unequal})")

    @property
    def improvement(self) -> bool:
        """A gated metric significantly better than the baseline's (Holm-adjusted p below the gate's level,
        ``significance``, set by ``judge_deltas``), in its good direction."""
        return bool(self.significant and self.delta and self.higher_is_better is not None
                    and (self.delta > 0) == self.higher_is_better)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MetricDelta:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def _num(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value:+.4g}" if signed else f"{value:.4g}"


@dataclass
class Expectation:
    """A threshold on a metric and whether the measured value meets it.

    ``source``: ``suite`` (the suite's ``expect:``) or ``default`` (the probe's policy, ``Probe.defaults``),
    with ``why`` saying where the default's threshold comes from. With ``interval``, the metric's 95%
    interval decides: the expectation fails only when the whole interval lies past the bound, so a gap
    measured on few cases fails only when it is surely past it. Where the metric has no interval its value
    decides, and ``no_interval`` records that, so the report does not claim an interval it did not use.
    """

    metric: str
    min: float | None = None
    max: float | None = None
    value: float | None = None
    passed: bool | None = None
    interval: bool = False
    source: str = "suite"
    why: str = ""
    no_interval: bool = False  # interval asked for, but the metric came without one: judged on its value
    cases: int | None = None  # the cases the metric rests on (its Metric.cases), where known
    # missed, but on fewer than MIN_CASES cases: too few to decide; named on the decision line, never deciding alone
    inconclusive: bool = False

    def check(self, value: float | None, ci: tuple[float, float] | None = None) -> bool:
        """Record ``value`` and return whether it lies within [min, max] (with ``interval``: whether ``ci``
        reaches into it)."""
        self.value = value
        ok = value is not None and not (isinstance(value, float) and math.isnan(value))
        self.no_interval = self.interval and ok and ci is None
        low, high = (ci if self.interval and ci is not None else (value, value))
        if ok and self.min is not None and high < self.min:  # type: ignore[operator]
            ok = False
        if ok and self.max is not None and low > self.max:  # type: ignore[operator]
            ok = False
        self.passed = ok
        return ok

    def shortfall(self) -> str:
        """'accuracy_after 0.1306 (expected >= 0.5)': the measured value beside the bound it missed."""
        value = "missing" if self.value is None else f"{self.value:.4g}"
        on = f"; on {self.cases} case{'' if self.cases == 1 else 's'}" if self.inconclusive else ""
        return f"{self.metric} {value} (expected {self.describe()}{on})"

    def margin(self) -> float | None:
        """How far the value lies inside its bound (negative: past it); None without a value or a bound."""
        if self.value is None:
            return None
        gaps = ([self.value - self.min] if self.min is not None else []) + ([self.max - self.value] if self.max is not None else [])
        return min(gaps) if gaps else None

    def describe(self) -> str:
        parts = []
        if self.min is not None:
            parts.append(f">= {self.min:g}")
        if self.max is not None:
            parts.append(f"<= {self.max:g}")
        text = " and ".join(parts) or "any"
        if self.interval:
            text += " on its value, no interval" if self.no_interval else " on its 95% interval"
        return text + (" by default" if self.source == "default" else "")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Expectation:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class DefaultExpectation:
    """One entry of a probe's gating policy (``Probe.defaults``): a bound on every metric matching ``metric``
    (an fnmatch pattern) that the suite does not set itself, with ``why`` the bound is what it is.

    A suite's ``expect:`` replaces it per metric, and ``expect: {METRIC: off}`` turns it off (the report
    then lists the metric as measured, not gated)."""

    metric: str
    min: float | None = None
    max: float | None = None
    why: str = ""
    interval: bool = False

    def describe(self) -> str:
        return Expectation(self.metric, self.min, self.max, interval=self.interval).describe()


@dataclass
class Finding:
    """A piece of evidence: an input, what was done to it, and what the model did."""

    title: str
    input: str | None = None
    perturbed: str | None = None
    expected: str | None = None
    observed: str | None = None
    score: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # "score_label": what score holds ("adjusted p", "rank")


def score_header(findings: list[Finding]) -> str:
    """The findings' score column as they name it (``extra["score_label"]``, the same for all), else "score"."""
    labels = {f.extra.get("score_label") for f in findings if f.score is not None}
    return str(labels.pop()) if len(labels) == 1 and None not in labels else "score"


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
    outcomes: list[Any] = field(default_factory=list)  # Outcomes; written to outcomes.jsonl, not report.json

    def add_metric(
        self,
        name: str,
        value: float | None,
        higher_is_better: bool | None = None,
        description: str = "",
        ci: tuple[float, float] | None = None,
        kind: MetricKind = "quality",
        outcome: str | None = None,
        cases: int | None = None,
    ) -> Metric:
        """Add (or replace) a metric and return it.

        ``kind``: quality (judged by gates), extreme (a maximum or minimum over bins, slices, groups or heads:
        noisy, so listed but not gated by default), cost (timings, passes) or count. ``outcome`` names the
        per-example vector in ``outcomes`` that this metric is the mean of, for paired tests.
        """
        metric = Metric(name, None if value is None else float(value), higher_is_better, description, ci, kind, outcome,
                        cases)
        self.metrics[name] = metric
        return metric

    def add_share(self, name: str, hits: Sequence[bool], ids: Sequence[str] | None = None,
                  higher_is_better: bool | None = True, description: str = "") -> Metric:
        """Add the share of ``hits`` that are true as a metric with its Wilson 95% interval; with ``ids``, also
        its per-case outcomes (named ``name``), so gates and ``compare`` pair two models case by case."""
        k, n = sum(map(bool, hits)), len(hits)
        if ids is not None:
            self.outcomes.append(Outcomes.from_values(name, ids, [float(bool(h)) for h in hits]))
        return self.add_metric(name, k / max(n, 1), higher_is_better, description,
                               ci=wilson_interval(k, n) if n else None, outcome=name if ids is not None else None,
                               cases=n)

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
                    n: {"higher_is_better": m.higher_is_better, "description": m.description, "ci": m.ci,
                        "kind": m.kind, "outcome": m.outcome}
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
                info.get(name, {}).get("kind") or "quality",
                info.get(name, {}).get("outcome"),
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
            expectations=[Expectation.from_dict(e) for e in data.get("expectations", [])],
            params=data.get("params", {}),
            message=data.get("message", ""),
            model=data.get("model", ""),
            duration_s=data.get("duration_s", 0.0),
            seed=data.get("seed"),
        )


def read_events(path: Path) -> list[dict[str, Any]]:
    """The records of an ``events.jsonl``; blank lines and a torn last line (a killed run) are skipped."""
    events = []
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


@dataclass
class RunReport:
    """The whole run: provenance, the models, one ProbeResult per (model, probe) and the gate's verdict.

    The report is a fold over ``events.jsonl``: the harness builds it with ``apply`` as it writes each
    event, and ``from_events`` rebuilds the same report from the file (an interrupted run's included).
    """

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
    threads: int | None = None
    data_fingerprint: str = ""  # sha256 over the examples as parsed (ids, texts, labels): equal data, equal print
    data_sha256: str = ""  # the data file's own SHA-256, as sha256sum prints it (a folder: its files in name order)
    models: list[ModelInfo] = field(default_factory=list)
    gate: dict[str, Any] = field(default_factory=dict)
    regressions: list[MetricDelta] = field(default_factory=list)
    unconfirmed: list[MetricDelta] = field(default_factory=list)  # past the tolerance, not significant: never gate
    paired: list[MetricDelta] = field(default_factory=list)  # every gated delta with a paired interval
    agreement: list[Agreement] = field(default_factory=list)  # each candidate's predictions against the baseline's
    probes: list[ProbeResult] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # the suite's entries --only left out: no decision covers them
    busy: str = ""  # the machine was oversubscribed when the run started: timings are not a quiet run's
    examples: int | None = None  # the examples the run's data held after --limit (None: not recorded)
    # each --resume of the run: 'at 2026-12-03T11:40:02Z: 3 results kept, 41 work units reused'
    resumed: list[str] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION

    def counts(self) -> dict[str, int]:
        out = {"passed": 0, "failed": 0, "measured": 0, "skipped": 0, "error": 0, "interrupted": 0}
        for result in self.probes:
            out[result.status] = out.get(result.status, 0) + 1
        return out

    def expectation_counts(self) -> tuple[int, int]:
        """(held, checked) expectations; an errored probe counts as failing all of its (at least one)."""
        total = held = 0
        for result in self.probes:
            if result.status in ("skipped", "interrupted"):
                continue
            if result.status == "error":
                total += max(1, len(result.expectations))
                continue
            total += len(result.expectations)
            held += sum(1 for e in result.expectations if e.passed)
        return held, total

    def score(self) -> float | None:
        """Share of checked expectations that hold; probes that errored count as failing all theirs.

        Returns None when nothing was checked.
        """
        held, total = self.expectation_counts()
        return None if total == 0 else held / total

    @property
    def ok(self) -> bool:
        """True when the run completed, no probe failed or errored, and no gate found a regression."""
        counts = self.counts()
        return (self.status == "completed" and counts["failed"] == 0 and counts["error"] == 0
                and not self.regressions)

    @property
    def model_names(self) -> list[str]:
        """The audited models: those with results of their own. A model a probe loaded as its tool (behaviour's
        ``mlm``, syntax-heads' ``compare_model``) is recorded in ``models`` but neither judged nor listed here."""
        names = [m.name for m in self.models]
        for r in self.probes:  # results of models that were never recorded (old reports)
            if r.model and r.model not in names:
                names.append(r.model)
        audited = {r.model for r in self.probes}
        return [n for n in names if n in audited] or names

    def results_for(self, model: str) -> list[ProbeResult]:
        return [r for r in self.probes if r.model == model]

    def result(self, model: str, probe_id: str) -> ProbeResult | None:
        return next((r for r in self.probes if r.model == model and (r.id or r.probe) == probe_id), None)

    # ---- the event fold ------------------------------------------------------------------------
    def apply(self, event: dict[str, Any]) -> None:
        """Update the report with one record of ``events.jsonl``."""
        kind = event.get("event")
        if kind == "run_start":
            self.suite = event.get("suite", self.suite)
            self.model = event.get("model", "")
            self.data = event.get("data", "")
            self.seed = event.get("seed")
            self.versions = dict(event.get("versions") or {})
            self.started_at = event.get("time", "")
            self.data_fingerprint = event.get("data_fingerprint", "")
            self.gate = dict(event.get("gate") or {})
            self.threads = event.get("threads")
            self.left_out = list(event.get("left_out") or [])
            self.busy = event.get("busy", "")
        elif kind == "data_loaded":
            self.data_fingerprint = event.get("fingerprint", "")
            self.data_sha256 = event.get("file_sha256", "")
            self.examples = event.get("examples")
        elif kind == "model_loaded":
            info = ModelInfo.from_dict(event.get("info") or {})
            self.models = [m for m in self.models if m.name != info.name] + [info]
            devices = {m.device for m in self.models}
            dtypes = {m.dtype for m in self.models}
            self.device = devices.pop() if len(devices) == 1 else "mixed"
            self.dtype = dtypes.pop() if len(dtypes) == 1 else "mixed"
        elif kind == "model_note":  # learnt after loading (a served model's determinism check)
            for m in self.models:
                if m.name == event.get("model") and event.get("note") not in m.notes:
                    m.notes.append(str(event.get("note")))
        elif kind == "probe_result":
            result = ProbeResult.from_dict(event["result"])
            at = next((i for i, r in enumerate(self.probes) if r.model == result.model and r.id == result.id), None)
            if at is None:
                self.probes.append(result)
            else:  # a resumed run replaces the interrupted entry where it stood
                self.probes[at] = result
        elif kind == "run_resumed":
            self.status, self.message, self.finished_at = "running", "", ""
            self.resumed.append(f"at {event.get('time', '?')}: {len(event.get('kept') or [])} result(s) kept, "
                                f"{int(event.get('units') or 0)} work unit(s) reused")
        elif kind == "gate":
            self.regressions = [MetricDelta.from_dict(r) for r in event.get("regressions") or []]
            self.unconfirmed = [MetricDelta.from_dict(d) for d in event.get("deltas") or []
                                if d.get("past_tolerance") and not d.get("regression")]
            self.paired = [MetricDelta.from_dict(d) for d in event.get("deltas") or [] if d.get("ci") and d.get("gated")]
            self.agreement = [Agreement.from_dict(a) for a in event.get("agreement") or []]
        elif kind == "run_finish":
            self.status = event.get("status", self.status)
            self.message = event.get("message", "")
            self.finished_at = event.get("time", "")

    @classmethod
    def from_events(cls, path: str | Path) -> RunReport:
        """Rebuild a report from an ``events.jsonl``; a run that never finished reads as interrupted."""
        path = Path(path)
        return cls.fold(read_events(path), path.parent)

    @classmethod
    def fold(cls, events: list[dict[str, Any]], run_dir: Path) -> RunReport:
        """The report of a run folder from its events (see ``read_events``)."""
        report = cls(suite=run_dir.name, run_dir=str(run_dir))
        finished = False
        for event in events:
            report.apply(event)
            if event.get("event") in ("run_finish", "run_resumed"):
                finished = event.get("event") == "run_finish"
        if not finished:
            report.status = "interrupted"
            report.message = "the run ended without a run_finish record (killed); rebuilt from events.jsonl"
        return report

    # ---- (de)serialisation ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        head = {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("probes", "models", "regressions", "unconfirmed", "paired", "agreement")}
        head["score"] = self.score()
        head["counts"] = self.counts()
        head["models"] = [asdict(m) for m in self.models]
        head["regressions"] = [asdict(r) for r in self.regressions]
        head["unconfirmed"] = [asdict(r) for r in self.unconfirmed]
        head["paired"] = [asdict(r) for r in self.paired]
        head["agreement"] = [{**asdict(a), "rate": a.rate} for a in self.agreement]
        head["probes"] = [p.to_dict() for p in self.probes]
        return jsonable(head)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunReport:
        """Read a report of this schema or of schema 1 (one model, results keyed by path)."""
        names = {f.name for f in fields(cls)} - {"probes", "models", "regressions", "unconfirmed", "paired", "agreement",
                                                 "schema_version"}
        report = cls(**{k: v for k, v in data.items() if k in names})
        report.probes = [ProbeResult.from_dict(p) for p in data.get("probes", [])]
        report.models = [ModelInfo.from_dict(m) for m in data.get("models", [])]
        report.regressions = [MetricDelta.from_dict(r) for r in data.get("regressions", [])]
        report.unconfirmed = [MetricDelta.from_dict(r) for r in data.get("unconfirmed", [])]
        report.paired = [MetricDelta.from_dict(r) for r in data.get("paired", [])]
        report.agreement = [Agreement.from_dict(a) for a in data.get("agreement", [])]
        if not report.models and report.model:  # schema 1: one model, named by its path
            report.models = [ModelInfo(name=report.model, path=report.model, dtype=report.dtype, device=report.device)]
        return report
