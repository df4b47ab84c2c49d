"""What a section of the slices probe hands it where the units are not the examples' classes (a section's
``units(target, data, params, ctx)``; ``bertprobe.sections``): right or wrong units, or scored ones.

``SliceUnits``: units that are right or wrong, but not the examples' classes (entities, ``entities.py``: a sentence is
right when its entities are exact, "gold has PER" slices read the entity types each sentence holds, and each slice
also gets the entity F1 of its sentences). The probe slices and tests them as it does classes; the section says what
is right, its own slices, its extra per-slice scores and how a finding reads.

``SliceScores``: units that are scored, not classified (extractive QA, ``answers.py``: each question's SQuAD F1 and
exact match). The section hands the probe its scores and its own built-in slices; the probe then measures each score
per slice with intervals and tests each slice against the rest, the same for every such section.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np


@dataclass(frozen=True)
class SliceUnits:
    """``correct`` (0/1 per example) over the examples in ``base``; ``gold`` and ``pred`` as 0/1 indicators over
    ``labels`` (the built-in gold and predicted slices); ``masks``: the section's own slices, after the built-in
    ones; ``row_scores(mask, seed)``: extra fields of one slice's row; ``shown(i)``: example i's gold and
    prediction as a reader sees them (a finding's expected and observed)."""

    correct: np.ndarray
    base: np.ndarray
    gold: np.ndarray
    pred: np.ndarray
    labels: list[str]
    shown: Callable[[int], tuple[str, str]]
    masks: Mapping[str, np.ndarray] = field(default_factory=dict)
    row_scores: Callable[[np.ndarray, int], dict[str, Any]] | None = None


@dataclass(frozen=True)
class SliceScore:
    """One per-example score: ``name`` (the metric's), ``outcome`` (the outcome vector paired gates compare),
    ``kind`` of that outcome, ``values`` (one per example, in [0, 1]) and a ``description``."""

    name: str
    outcome: str
    kind: Literal["binary", "score"]
    values: np.ndarray
    description: str


@dataclass(frozen=True)
class SliceScores:
    """The scores of the examples (the first is the one slices are judged on), the section's built-in slices as
    boolean masks over the examples, and per example what was expected and observed (for findings). ``unit``
    names the examples in the report (questions)."""

    scores: tuple[SliceScore, ...]
    masks: dict[str, np.ndarray]
    expected: list[str]
    observed: list[str]
    unit: str = "examples"
    notes: dict[str, str] = field(default_factory=dict)  # how the built-in slices were made, for the report
    groups: list[str] | None = None  # each unit's cluster (a question's context): intervals and tests resample them
