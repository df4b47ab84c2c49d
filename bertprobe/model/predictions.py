"""A model's predictions on a dataset in one pass: ``Predictions`` and ``predict_directly`` (what
``ProbeContext.predictions`` does without a harness; the harness caches its passes in ``bertprobe.run.caches``).

The model wing reads what the task's outputs mean here (``own_predictions``: the task decodes its own, such as a
reader's answers over windows; ``word_tags``: logits per word), so the probes that share the pass (accuracy,
calibration, slices) never do.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bertprobe.data.dataset import Dataset
    from bertprobe.model.target import Target


@dataclass(frozen=True)
class Predictions:
    """A model's logits on a dataset (float32, CPU, in the data's order) and the seconds the pass took; for a
    task whose predictions are no logits per example (extractive QA), its own ``answers`` instead."""

    logits: Any  # N x C; token classification: N x longest sentence x tags, per word (zeros past each end)
    seconds: float
    windowed: int = 0  # token classification: sentences longer than max_length, predicted in windows
    answers: Any = None  # the task's own predictions (Task.predict_data), one per example; logits is None then


def predict_directly(target: Target, data: Dataset, batch_size: int | None = None, progress: Any = None) -> Predictions:
    """One pass of ``target`` over ``data`` (what ``ctx.predictions`` does without a harness)."""
    task = getattr(target, "task", None)
    if task is not None and task.own_predictions:  # the task decodes its own (QA: answers over windows)
        start = time.perf_counter()
        own = task.predict_data(target, data, batch_size, progress)
        return Predictions(None, time.perf_counter() - start, answers=own)
    if getattr(task, "word_tags", False):  # logits per word, long sentences in windows
        from bertprobe.model.word_logits import padded, word_logits
        from bertprobe.tasks.token_classification import words_of

        start = time.perf_counter()
        per_word = word_logits(target, words_of(data.examples), batch_size, target.spec.stride, progress)
        return Predictions(padded(per_word.logits), time.perf_counter() - start, per_word.windowed)
    encoded = target.encode(data.examples)
    start = time.perf_counter()
    logits = target.logits(encoded, batch_size, progress)
    return Predictions(logits, time.perf_counter() - start)
