"""Per-example outcomes: the vectors behind a probe's metrics, for paired comparisons between models.

A probe adds ``Outcomes(name, ids, values, kind)`` to ``ProbeResult.outcomes`` (ids are the examples'
``Example.id``), and a metric names the vector it summarises (``add_metric(..., outcome="correct")``).
The harness writes them to ``outcomes.jsonl`` beside ``events.jsonl`` (one record per vector, keyed by
model and probe id) before the probe's result event, so ``report.json`` stays small. Gates and
``bertprobe compare`` pair two models' vectors by example id (McNemar's exact test for binary ones, a
paired bootstrap of the difference for every kind).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bertprobe.stats import mean_interval

OutcomeKind = Literal["binary", "categorical", "score", "label"]
OUTCOMES_FILE = "outcomes.jsonl"


@dataclass
class Outcomes:
    """One value per example: ``binary`` (0/1, e.g. correct), ``categorical`` (a class code), ``score``, or
    ``label``: a prediction as text a reader can check (a class name, a label set, an answer, a sentence's
    entities), compared for equality only and never averaged: what ``Agreement`` pairs."""

    name: str
    ids: list[str]
    values: list[Any]  # floats; strings for kind "label"
    kind: OutcomeKind = "binary"
    # each example's cluster (a question's context, hashed): examples that share one are no independent evidence,
    # so a paired comparison resamples (and McNemar's test counts) clusters; None: independent examples
    groups: list[str] | None = None
    # a subset's vector (a flagged slice): the examples of one subset, valued as in the vector named ``subset_of``
    # (its parent, over every example); a gate pairs it with the baseline's parent over the same examples.
    # ``counted_in``: the count metric whose expectation the subset is one of (``slices_flagged``)
    subset_of: str | None = None
    counted_in: str | None = None

    def __post_init__(self) -> None:
        if len(self.ids) != len(self.values):
            raise ValueError(f"outcomes '{self.name}': {len(self.ids)} ids but {len(self.values)} values")
        if len(set(self.ids)) != len(self.ids):
            raise ValueError(f"outcomes '{self.name}': example ids are not unique")
        self.ids = [str(i) for i in self.ids]
        self.values = [str(v) for v in self.values] if self.kind == "label" else [float(v) for v in self.values]
        if self.groups is not None:
            if len(self.groups) != len(self.ids):
                raise ValueError(f"outcomes '{self.name}': {len(self.groups)} groups for {len(self.ids)} ids")
            self.groups = [str(g) for g in self.groups]

    @classmethod
    def from_values(cls, name: str, ids: Sequence[Any], values: Iterable[Any], kind: OutcomeKind = "binary",
                    groups: Sequence[Any] | None = None, subset_of: str | None = None,
                    counted_in: str | None = None) -> Outcomes:
        return cls(name, [str(i) for i in ids], list(values), kind, None if groups is None else list(groups),
                   subset_of, counted_in)

    def as_map(self) -> dict[str, Any]:
        return dict(zip(self.ids, self.values))

    def groups_map(self) -> dict[str, str] | None:
        return dict(zip(self.ids, self.groups)) if self.groups is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "ids": self.ids, "values": self.values,
                **({"groups": self.groups} if self.groups is not None else {}),
                **({"subset_of": self.subset_of} if self.subset_of else {}),
                **({"counted_in": self.counted_in} if self.counted_in else {})}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcomes:
        groups = data.get("groups")
        return cls(data["name"], list(data["ids"]), list(data["values"]), data.get("kind", "binary"),
                   list(groups) if groups is not None else None, data.get("subset_of"), data.get("counted_in"))


RANKING_DEPTH = 10  # a ranking task's prediction: its top 10 documents


def ranking_label(doc_ids: Sequence[Any], depth: int = RANKING_DEPTH) -> str:
    """A query's prediction as a ``label`` outcome: its ``depth`` best document ids, best first, as a JSON list
    (what a section over ranked texts publishes as ``prediction``, so that ``Agreement`` pairs two models' top
    10s and measures their overlap)."""
    return json.dumps([str(d) for d in list(doc_ids)[:depth]], ensure_ascii=False)


def ranking_ids(label: Any) -> list[str] | None:
    """The document ids of a ``ranking_label`` (None for any other prediction: a class name, an answer)."""
    if not isinstance(label, str) or not label.startswith("["):
        return None
    try:
        value = json.loads(label)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, list) and all(isinstance(d, str) for d in value) else None


def top_overlap(a: Sequence[str], b: Sequence[str]) -> float:
    """The share of two top-k lists' documents they share: |A & B| / max(|A|, |B|) (1 for two empty lists); order
    within the top k does not count (that is what ``Agreement.rate`` adds: the share of identical lists)."""
    width = max(len(a), len(b))
    return len(set(a) & set(b)) / width if width else 1.0


@dataclass
class Agreement:
    """How often a candidate model predicts what the baseline predicts, over the examples both answered (paired by
    id), and each example whose prediction changed as ``(id, baseline's prediction, candidate's)``: what a build
    that replaces a model in service (an int8 or ONNX build) changes, case by case. ``changed`` is complete.
    Predictions are the tasks' ``label`` outcomes (a class name, a label set, an answer's text, a sentence's
    entities, a query's top 10 as ``ranking_label``); a run written before them holds class codes (floats), read as
    they are. Rankings also get ``overlap``: the mean over queries of the share of the top ``overlap_depth``
    documents both models retrieve (``top_overlap``), with its 95% interval (``stats.mean_interval``)."""

    model: str
    baseline: str
    probe_id: str
    paired: int
    agreed: int
    changed: list[tuple[str, Any, Any]]
    overlap: float | None = None  # rankings: mean top-k overlap over the paired queries
    overlap_ci: tuple[float, float] | None = None
    overlap_depth: int | None = None  # k: the longest top list paired (10, fewer on a tiny corpus)

    @property
    def rate(self) -> float:
        return self.agreed / self.paired if self.paired else float("nan")

    @staticmethod
    def pairable(base: Outcomes, cand: Outcomes) -> bool:
        """Whether two ``prediction`` vectors speak alike: a run written before label outcomes holds class codes,
        which never equal a newer run's class names (``bertprobe compare`` across the upgrade)."""
        return (base.kind == "label") == (cand.kind == "label")

    @classmethod
    def between(cls, model: str, baseline: str, probe_id: str, base: Outcomes, cand: Outcomes) -> Agreement:
        """The agreement of two ``prediction`` vectors, example by example (equal values agree)."""
        theirs = cand.as_map()
        paired = [(i, v, theirs[i]) for i, v in zip(base.ids, base.values) if i in theirs]
        changed = [(i, a, b) for i, a, b in paired if a != b]
        out = cls(model, baseline, probe_id, len(paired), len(paired) - len(changed), changed)
        lists = [(ranking_ids(a), ranking_ids(b)) for _, a, b in paired]
        if paired and all(a is not None and b is not None for a, b in lists):
            shares = [top_overlap(a, b) for a, b in lists]  # type: ignore[arg-type]
            out.overlap = float(sum(shares) / len(shares))
            low, high = mean_interval(shares, 1000)
            out.overlap_ci = (float(low), float(high))
            out.overlap_depth = max(max(len(a), len(b)) for a, b in lists)  # type: ignore[arg-type]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Agreement:
        ci = data.get("overlap_ci")
        return cls(data["model"], data["baseline"], data["probe_id"], int(data["paired"]), int(data["agreed"]),
                   [(str(i), a, b) for i, a, b in data.get("changed") or []], data.get("overlap"),
                   (float(ci[0]), float(ci[1])) if ci else None, data.get("overlap_depth"))


def append_outcomes(run_dir: Path, model: str, probe_id: str, outcomes: Iterable[Outcomes]) -> None:
    """Append one record per vector to ``run_dir/outcomes.jsonl``."""
    items = list(outcomes)
    if not items:
        return
    with open(run_dir / OUTCOMES_FILE, "a", encoding="utf-8") as out:
        for o in items:
            out.write(json.dumps({"model": model, "id": probe_id, **o.to_dict()}) + "\n")


def read_outcomes(run_dir: Path) -> dict[tuple[str, str], dict[str, Outcomes]]:
    """``{(model, probe id): {name: Outcomes}}`` from a run folder (empty when it has none).

    A torn last line (a run killed mid-write) is ignored; later records replace earlier ones.
    """
    path = Path(run_dir) / OUTCOMES_FILE
    table: dict[tuple[str, str], dict[str, Outcomes]] = {}
    if not path.is_file():
        return table
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
            item = Outcomes.from_dict(record)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
        table.setdefault((str(record.get("model", "")), str(record.get("id", ""))), {})[item.name] = item
    return table


def example_ids(examples: Sequence[Any]) -> list[str]:
    """The examples' ids, or their positions (``#0``, ``#1``, ...) when ids are missing or repeated.

    The harness checks ids of loaded data; examples a probe or a test builds by hand may have none.
    """
    ids = [str(getattr(ex, "id", "") or "") for ex in examples]
    if all(ids) and len(set(ids)) == len(ids):
        return ids
    return [f"#{i}" for i in range(len(examples))]
