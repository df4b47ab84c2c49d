"""Pass or fail for each case, from the class probabilities of its texts (CheckList's semantics, exactly):

* ``mft``: every text's predicted class is ``label`` (or, with ``not_label``, differs from it);
* ``inv``: for every edited text, the predicted class equals the original's, or the probability of the
  original's predicted class moved by at most ``tolerance`` in absolute value;
* ``dir``: for every edited text, delta = p_class(text) - p_class(original) satisfies
  delta >= -tolerance (``not_down``) or delta <= tolerance (``not_up``); class None is the original's
  predicted class.

A predicted class is the argmax (the first class on a tie).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from bertprobe.errors import DataError
from bertprobe.probes.behaviour.cases import Case, Label, Text

Probabilities = Callable[[Text], np.ndarray]


def class_index(label: Label, label_names: Sequence[str], where: str) -> int:
    """A class name of the model (case-insensitive) or an index, as an index; DataError otherwise."""
    if isinstance(label, int):
        if 0 <= label < len(label_names):
            return label
        raise DataError(f"{where}: class index {label} is out of range; the model has {len(label_names)} classes")
    lowered = [n.lower() for n in label_names]
    if label.lower() in lowered:
        return lowered.index(label.lower())
    if label.isdigit() and int(label) < len(label_names):
        return int(label)
    raise DataError(f"{where}: '{label}' is no class of the model; classes: {', '.join(label_names)}")


def check_labels(case: Case, label_names: Sequence[str]) -> None:
    """Fail early (before any prediction) on a label the model does not have."""
    where = f"test '{case.test}'" + (f" case {case.id}" if case.id else "") + (f" ({case.source})" if case.source else "")
    for label in (case.label, case.not_label, case.expect.cls if case.expect else None):
        if label is not None:
            class_index(label, label_names, where)


@dataclass(frozen=True)
class CaseOutcome:
    """A case's outcome: passed, and the original's and the worst edited text's probabilities of the class
    the test looks at (for findings)."""

    passed: bool
    cls: int
    before: float
    after: float
    worst: int  # index into case.texts of the text that decided the verdict


def judge_case(case: Case, probs: Probabilities, label_names: Sequence[str]) -> CaseOutcome:
    """Apply the case's test type to the probabilities of its texts."""
    rows = [np.asarray(probs(t), dtype=np.float64) for t in case.texts]
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
