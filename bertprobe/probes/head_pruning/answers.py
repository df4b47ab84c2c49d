"""``head-pruning`` on a reader (extractive QA, ``span_answers``): the sweeps evaluate each question over its windows.

The task gives a question's windows as rows (``Task.example_rows``, ``tasks.qa_rows``): each window's gold
positions for HF's QA loss, and how the rows' logits decode into each question's answer and its F1 or EM. This
section reads them as the sweeps need:

* importance (Michel et al. 2019) differentiates that loss; the windows of a question share its head mask, so their
  gradients are summed before the absolute value (``owner``) and a question counts once, as one example does in
  the paper;
* ablations and the pruning curve score each question by SQuAD's F1 (or exact match, ``metric: em``) of the answer
  decoded over all its windows: a row's raw outcome is its window's start/end logits (``padded_logits``), and the
  task's ``collect`` decodes each question from its rows;
* the margin a sequential sweep orders questions by (its census of the decisions closest to changing) is the
  chosen span's confidence, its probability among the n-best candidates: a low one has close rivals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

from bertprobe.data.dataset import Dataset
from bertprobe.errors import ProbeError
from bertprobe.model.target import Encoded, Target
from bertprobe.probes.head_pruning.rows import SweepRows
from bertprobe.tasks.qa_rows import metric_name
from bertprobe.tasks.scores import OutcomeScore


def qa_score(metric: str) -> OutcomeScore:
    """The per-question metric of QA head sweeps: SQuAD F1 (``auto``, ``f1``) or exact match (``em``)."""
    name = metric_name(metric)

    def outcome(logits: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        raise ProbeError("a question's outcome is decoded over its windows: head sweeps use the task's example_rows")

    what = "SQuAD F1" if name == "f1" else "SQuAD exact match"
    return OutcomeScore(name, outcome, f"mean per-question {what} of the answer decoded over its windows",
                        graded=True)


def padded_logits(width: int) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """A judge: each row's (start, end) logits padded with -inf to ``width`` (rows x width x 2, float32)."""

    def judge(logits: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        out = torch.full((logits.shape[0], width, 2), -math.inf, dtype=torch.float32, device=logits.device)
        out[:, : logits.shape[1]] = logits.float()
        return out

    return judge


def sweep_rows(target: Target, data: Dataset, metric: str = "auto", subset: Sequence[int] | None = None) -> SweepRows:
    """The windows of the questions ``subset`` of ``data`` (None: all), scored per question by ``metric`` (f1, em);
    whether the reader may abstain is decided on the whole data, whichever ``subset`` is evaluated."""
    score = qa_score(metric)
    rows = target.task.example_rows(target, data, metric, subset)
    if rows is None:
        raise ProbeError(f"task '{target.task.name}' gives no rows of its examples (Task.example_rows), which "
                         "head-pruning's section for span answers evaluates")
    decoded = rows.decode

    def margins(raw: np.ndarray) -> np.ndarray:
        return np.array([a.confidence for a in decoded(raw)], dtype=np.float64)

    return SweepRows(list(rows.examples), Encoded(list(rows.rows), list(rows.lengths)), rows.labels, score,
                     owner=rows.owner, judge=padded_logits(max(rows.lengths, default=1)), collect=rows.collect,
                     margins=margins)
