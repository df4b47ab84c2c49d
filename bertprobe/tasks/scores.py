"""How a sweep scores a changed model: per-example outcomes of one forward pass, and the metric over them.

Head ablations and pruning curves compare many variants of one model on the same examples, so they keep
per-example outcomes, not only a number. A decomposable metric (accuracy, exact match) is the mean of a
0/1 outcome per example; micro-F1 is not, so its outcome is each example's (true positives, false positives,
false negatives) and the metric is computed from their sums, in a resample as on the whole data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


def f1_from_counts(tp: Any, fp: Any, fn: Any, empty: float = 0.0) -> np.ndarray:
    """F1 = 2 tp / (2 tp + fp + fn), element-wise over arrays of counts; ``empty`` where there is nothing to count
    (0, scikit-learn's and seqeval's ``zero_division`` default; head sweeps score an empty set as perfect, 1)."""
    tp, fp, fn = (np.asarray(x, dtype=np.float64) for x in (tp, fp, fn))
    den = 2 * tp + fp + fn
    return np.divide(2 * tp, den, out=np.full(np.shape(den), empty, dtype=np.float64), where=den > 0)


NOT_DECOMPOSABLE = ("micro_f1", "entity_f1")  # outcomes are (tp, fp, fn) counts; the metric comes from their sums


def absent_note(absent: Sequence[str]) -> str:
    """'; absent from the data and never predicted: ORG': the types or labels no finding is about."""
    return f"; absent from the data and never predicted: {', '.join(absent)}" if absent else ""


@dataclass(frozen=True)
class OutcomeScore:
    """``outcome(logits, gold)`` per example (bool ``[rows]``, or counts ``[rows, 3]``); ``value`` the metric;
    ``margin(logits)`` per example, how far its decision is from changing (sequential sweeps evaluate the
    examples closest to a change in full first), or None where the score has no such distance. ``graded``: an
    example's outcome is a score in [0, 1] (a question's F1), not 0/1, and is kept as a float."""

    name: str
    outcome: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    description: str = ""
    margin: Callable[[torch.Tensor], torch.Tensor] | None = None
    graded: bool = False

    @property
    def decomposable(self) -> bool:
        """Whether the metric is the mean of a 0/1 outcome per example (paired differences are per example)."""
        return self.name not in NOT_DECOMPOSABLE

    def value(self, outcomes: np.ndarray) -> float:
        """The metric over a set of examples' outcomes."""
        outcomes = np.asarray(outcomes)
        if self.decomposable:
            return float(outcomes.astype(np.float64).mean()) if outcomes.size else 0.0
        tp, fp, fn = outcomes.sum(axis=0).astype(np.float64)
        return float(f1_from_counts(tp, fp, fn, empty=1.0))

    def resampled(self, outcomes: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """The metric over each resample ``idx[r]`` (``resamples x N`` example indices)."""
        outcomes = np.asarray(outcomes)
        if self.decomposable:
            return outcomes.astype(np.float64)[idx].mean(axis=1)
        sums = outcomes.astype(np.float64)[idx].sum(axis=1)  # resamples x 3
        return f1_from_counts(sums[:, 0], sums[:, 1], sums[:, 2], empty=1.0)


def argmax_correct(logits: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    return logits.argmax(-1) == gold


def top_two_gap(logits: torch.Tensor) -> torch.Tensor:
    """Per row, the largest logit minus the runner-up (0 with a single column): the argmax changes only when
    an intervention moves them this far relative to each other."""
    if logits.shape[-1] < 2:
        return torch.zeros(logits.shape[:-1], device=logits.device)
    top = logits.float().topk(2, dim=-1).values
    return top[..., 0] - top[..., 1]


ACCURACY = OutcomeScore("accuracy", argmax_correct, "share of examples predicted correctly", top_two_gap)
