"""What a task hands the slices probe when its units are its own, not the examples' classes (``Task.slice_units``).

Entities: a sentence is right when its entities are exact, "gold has PER" slices read the entity types each
sentence holds, and each slice also gets the entity F1 of its sentences. The probe slices and tests them as it
does classes; the task says what is right, its own slices, its extra per-slice scores and how a finding reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class SliceUnits:
    """``correct`` (0/1 per example) over the examples in ``base``; ``gold`` and ``pred`` as 0/1 indicators over
    ``labels`` (the built-in gold and predicted slices); ``masks``: the task's own slices, after the built-in
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
