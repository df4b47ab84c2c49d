"""What a task gives the slices probe when its examples are scored, not classified (``Task.slice_scores``).

A task whose per-example outcome is a score (extractive QA: each question's SQuAD F1 and exact match) hands
the slices probe its scores and its own built-in slices; the probe then measures each score per slice with
intervals and tests each slice against the rest, the same for every such task.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np


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
    """The scores of the examples (the first is the one slices are judged on), the task's built-in slices as
    boolean masks over the examples, and per example what was expected and observed (for findings). ``unit``
    names the examples in the report (questions)."""

    scores: tuple[SliceScore, ...]
    masks: dict[str, np.ndarray]
    expected: list[str]
    observed: list[str]
    unit: str = "examples"
    notes: dict[str, str] = field(default_factory=dict)  # how the built-in slices were made, for the report
