"""Pass or fail for each case, from the class probabilities of its texts (CheckList's semantics, exactly):

* ``mft``: every text's predicted class is ``label`` (or, with ``not_label``, differs from it);
* ``inv``: for every edited text, the predicted class equals the original's, or the probability of the
  original's predicted class moved by at most ``tolerance`` in absolute value;
* ``dir``: for every edited text, delta = p_class(text) - p_class(original) satisfies
  delta >= -tolerance (``not_down``) or delta <= tolerance (``not_up``); class None is the original's
  predicted class.

A predicted class is the argmax (the first class on a tie).

For a multi-label model (``thresholds`` given: one per label) the probabilities are each label's sigmoid and
a prediction is the set of labels at or above their thresholds: ``mft`` checks ``labels`` (the exact set),
``contains`` and ``not_contains`` (``label``/``not_label`` are one-label ``contains``/``not_contains``);
``inv`` passes when the predicted set is unchanged or every label's probability moved by at most
``tolerance``; ``dir`` must name its label (a multi-label model has no single predicted class).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from bertprobe.data.classes import class_problem, find_class
from bertprobe.errors import DataError
from bertprobe.probes.behaviour.cases import Case, Label, Text

Probabilities = Callable[[Text], np.ndarray]


def class_index(label: Label, label_names: Sequence[str], where: str, label_map: Mapping[str, str] | None = None) -> int:
    """A class of the model by index, name (case-insensitive, through ``--label-map``) or role (``positive``
    for ``POS``: ``bertprobe.data.classes``), as an index; DataError otherwise."""
    if isinstance(label, int) and not 0 <= label < len(label_names):
        raise DataError(f"{where}: class index {label} is out of range; the model has {len(label_names)} classes")
    match = find_class(label, label_names, label_map)
    if match is None:
        raise DataError(f"{where}: " + class_problem(label, label_names, "label"))
    return match.index


def named_as_model(case: Case, label_names: Sequence[str], label_map: Mapping[str, str] | None = None) -> Case:
    """The case with every class it names written as the model names it (``positive`` -> ``POS``), so that
    a suite's roles are read once, by the one rule; DataError for a name no rule reads."""
    where = f"test '{case.test}'" + (f" case {case.id}" if case.id else "") + (f" ({case.source})" if case.source else "")

    def name(label: Label | None) -> Label | None:
        return None if label is None else label_names[class_index(label, label_names, where, label_map)]

    def names(labels: Sequence[Label]) -> tuple[Label, ...]:
        return tuple(name(x) for x in labels)  # type: ignore[misc]

    expect = replace(case.expect, cls=name(case.expect.cls)) if case.expect is not None else None
    return replace(case, label=name(case.label), not_label=name(case.not_label), expect=expect,
                   labels=None if case.labels is None else names(case.labels), contains=names(case.contains),
                   not_contains=names(case.not_contains))


def check_labels(case: Case, label_names: Sequence[str], multi_label: bool = False,
                 label_map: Mapping[str, str] | None = None) -> None:
    """Fail early (before any prediction) on a label the model does not have, or a case its task cannot judge."""
    where = f"test '{case.test}'" + (f" case {case.id}" if case.id else "") + (f" ({case.source})" if case.source else "")
    if case.label_sets and not multi_label:
        raise DataError(f"{where}: labels/contains/not_contains are label sets, for a multi-label model; this model "
                        "predicts one class: use label or not_label")
    if multi_label and case.type == "dir" and case.expect is not None and case.expect.cls is None:
        raise DataError(f"{where}: a dir case on a multi-label model names its label in expect.class (a multi-label "
                        "model has no single predicted class)")
    for label in (case.label, case.not_label, case.expect.cls if case.expect else None,
                  *(case.labels or ()), *case.contains, *case.not_contains):
        if label is not None:
            class_index(label, label_names, where, label_map)


@dataclass(frozen=True)
class CaseOutcome:
    """A case's outcome: passed, and the original's and the worst edited text's probabilities of the class
    the test looks at (for findings)."""

    passed: bool
    cls: int
    before: float
    after: float
    worst: int  # index into case.texts of the text that decided the verdict


def judge_case(case: Case, probs: Probabilities, label_names: Sequence[str],
               thresholds: np.ndarray | None = None) -> CaseOutcome:
    """Apply the case's test type to the probabilities of its texts (multi-label: with ``thresholds``)."""
    rows = [np.asarray(probs(t), dtype=np.float64) for t in case.texts]
    if thresholds is not None and case.type != "dir":
        return _judge_label_sets(case, rows, label_names, thresholds)
    if case.type == "mft":
        target = case.label if case.label is not None else case.not_label
        cls = class_index(target, label_names, case.test)  # type: ignore[arg-type]
        predicted = [int(np.argmax(r)) for r in rows]
        ok = [(p == cls) if case.label is not None else (p != cls) for p in predicted]
        worst = ok.index(False) if False in ok else 0
        return CaseOutcome(all(ok), cls, float(rows[0][cls]), float(rows[worst][cls]), worst)
    original = rows[0]
    base = int(np.argmax(original))
    if case.type == "inv":
        ok = [int(np.argmax(r)) == base or abs(r[base] - original[base]) <= case.tolerance for r in rows[1:]]
        moved = [abs(r[base] - original[base]) for r in rows[1:]]
        worst = 1 + (ok.index(False) if False in ok else int(np.argmax(moved)))
        return CaseOutcome(all(ok), base, float(original[base]), float(rows[worst][base]), worst)
    expect = case.expect
    assert expect is not None
    cls = base if expect.cls is None else class_index(expect.cls, label_names, case.test)
    deltas = [r[cls] - original[cls] for r in rows[1:]]
    if expect.direction == "not_down":
        ok = [d >= -expect.tolerance for d in deltas]
        worst = 1 + int(np.argmin(deltas))
    else:
        ok = [d <= expect.tolerance for d in deltas]
        worst = 1 + int(np.argmax(deltas))
    return CaseOutcome(all(ok), cls, float(original[cls]), float(rows[worst][cls]), worst)


def _judge_label_sets(case: Case, rows: list[np.ndarray], label_names: Sequence[str],
                      thresholds: np.ndarray) -> CaseOutcome:
    """mft and inv on a multi-label model's label sets."""
    def index(labels: Sequence[Any]) -> set[int]:
        return {class_index(x, label_names, case.test) for x in labels}

    predicted = [set(np.flatnonzero(r >= thresholds).tolist()) for r in rows]
    if case.type == "mft":
        exact = index(case.labels) if case.labels is not None else None
        must = index(case.contains) | (index([case.label]) if case.label is not None else set())
        never = index(case.not_contains) | (index([case.not_label]) if case.not_label is not None else set())
        ok = [(exact is None or p == exact) and must <= p and not (never & p) for p in predicted]
        worst = ok.index(False) if False in ok else 0
        wrong = sorted((must - predicted[worst]) | (never & predicted[worst]) | ((exact ^ predicted[worst]) if exact is not None else set()))
        cls = wrong[0] if wrong else (sorted(must | never | (exact or set())) or [0])[0]
        return CaseOutcome(all(ok), cls, float(rows[0][cls]), float(rows[worst][cls]), worst)
    original = rows[0]
    moved = [float(np.abs(r - original).max()) for r in rows[1:]]
    ok = [p == predicted[0] or m <= case.tolerance for p, m in zip(predicted[1:], moved)]
    worst = 1 + (ok.index(False) if False in ok else int(np.argmax(moved)))
    cls = int(np.argmax(np.abs(rows[worst] - original)))
    return CaseOutcome(all(ok), cls, float(original[cls]), float(rows[worst][cls]), worst)
