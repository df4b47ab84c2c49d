"""Head sweeps on a reader: what ``head-pruning`` evaluates when the examples are questions over windows.

A question's context may span several windows (``spans.encode_windows``), so a question is not one model row.
``sweep_rows`` gives the probe the windows as rows, each with its gold positions and the question it belongs
to, and says how to turn the rows' outputs back into one outcome per question:

* importance (Michel et al. 2019) differentiates Hugging Face's QA training loss, the mean of the start and
  end cross-entropies (``spans.span_loss``), each window labelled as HF labels its training windows
  (``spans.gold_positions``: the answer's first and last sub-tokens where the window holds the whole answer,
  else [CLS]; the first gold answer; [CLS] for an unanswerable question). A window's loss is taken over its
  own positions (padding masked), so it equals the model's loss on that window alone whatever the batch's
  padding. The windows of a question share its head mask: their gradients are summed before the absolute
  value, so a question counts once, as one example does in the paper;
* ablations and the pruning curve score each question by SQuAD's F1 (or exact match, ``metric: em``) of the
  answer decoded over all its windows exactly as ``QuestionAnswering.answers`` decodes it (``spans.decode``):
  a row's outcome is its window's start/end logits, and ``collect`` decodes each question from its rows;
* the margin a sequential sweep orders questions by (its census of the decisions closest to changing) is the
  chosen span's confidence, its probability among the n-best candidates: a low one has close rivals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bertprobe.data.dataset import Dataset, Example
from bertprobe.errors import ProbeError
from bertprobe.tasks import squad_metrics
from bertprobe.tasks.scores import OutcomeScore
from bertprobe.tasks.spans import (
    Answer,
    QuestionWindows,
    decode,
    encode_windows,
    gold_positions,
    rebuilt_note,
    span_loss,
)

METRICS = {"auto": "f1", "f1": "f1", "em": "em", "exact_match": "em"}


@dataclass(frozen=True)
class SweepRows:
    """What head sweeps evaluate when an example is not one model row (the windows of a question).

    ``rows`` are the model inputs (dicts of id lists) and ``lengths`` their lengths; ``labels`` per row what the
    task's ``loss`` and ``judge`` take; ``owner[r]`` the index in ``examples`` of row ``r``'s example (importance
    sums an example's rows' gradients before the absolute value); ``judge(logits, labels)`` a row's raw outcome
    (on the logits' device); ``collect(raw)`` the per-example outcomes from every row's raw outcome (rows in
    order), ``margins(raw)`` per example how far its decision is from changing (None: no census); ``score`` the
    metric over the per-example outcomes."""

    examples: list[Example]
    rows: list[dict[str, list[int]]]
    lengths: list[int]
    labels: torch.Tensor
    owner: torch.Tensor
    judge: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    collect: Callable[[np.ndarray], np.ndarray]
    score: OutcomeScore
    margins: Callable[[np.ndarray], np.ndarray] | None = None
    notes: tuple[str, ...] = ()


def qa_score(metric: str) -> OutcomeScore:
    """The per-question metric of QA head sweeps: SQuAD F1 (``auto``, ``f1``) or exact match (``em``)."""
    if metric not in METRICS:
        raise ProbeError(f"metric '{metric}' does not apply to a question-answering model; it is scored by f1 "
                         "(the default) or em, per question over its windows")
    name = METRICS[metric]

    def outcome(logits: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        raise ProbeError("a question's outcome is decoded over its windows: head sweeps use the task's sweep_rows")

    what = "SQuAD F1" if name == "f1" else "SQuAD exact match"
    return OutcomeScore(name, outcome, f"mean per-question {what} of the answer decoded over its windows",
                        graded=True)


def window_labels(windows: Sequence[QuestionWindows], examples: Sequence[Example]) -> torch.Tensor:
    """Per window ``[start, end, length]``: the gold positions HF trains on (``gold_positions`` of the first
    gold answer; [CLS] twice for an unanswerable question) and the window's length (padding beyond it is masked)."""
    out = []
    for qw, ex in zip(windows, examples):
        gold = tuple(ex.label or ())
        positions = gold_positions(qw, gold[0][1], gold[0][0]) if gold else [(qw.cls_position, qw.cls_position)] * len(qw.rows)
        out += [[s, e, len(row["input_ids"])] for (s, e), row in zip(positions, qw.rows)]
    return torch.tensor(out, dtype=torch.long).reshape(-1, 3)


def masked_span_loss(logits: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """Per row ``span_loss`` of ``logits`` (``rows x T x 2``: start, end) against ``gold`` (``rows x 3``: start,
    end, length), positions at or past the row's length (padding) left out of both softmaxes."""
    gold = gold.to(logits.device)
    logits = logits.float()
    positions = torch.arange(logits.shape[1], device=logits.device)
    padding = positions[None, :] >= gold[:, 2:3]
    start = logits[..., 0].masked_fill(padding, -math.inf)
    end = logits[..., 1].masked_fill(padding, -math.inf)
    return span_loss(start, end, gold[:, 0], gold[:, 1])


def padded_logits(width: int) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """A judge: each row's (start, end) logits padded with -inf to ``width`` (rows x width x 2, float32)."""

    def judge(logits: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        out = torch.full((logits.shape[0], width, 2), -math.inf, dtype=torch.float32, device=logits.device)
        out[:, : logits.shape[1]] = logits.float()
        return out

    return judge


def windows_of(task: Any, target: Any, examples: Sequence[Example]) -> list[QuestionWindows]:
    """The windows of each question as ``target`` reads them under ``task``'s settings."""
    return encode_windows(target.tokenizer, [ex.text for ex in examples], [ex.text_pair or "" for ex in examples],
                          task.setting("max_length"), task.setting("stride"), task.setting("question_first"),
                          [ex.id for ex in examples])


def rows_of(target: Any, windows: Sequence[QuestionWindows]) -> list[dict[str, list[int]]]:
    """Every window's model inputs (those ``target``'s forward accepts), question after question."""
    names = target.input_names
    return [{k: v for k, v in row.items() if k in names} for qw in windows for row in qw.rows]


def input_rows(task: Any, target: Any, examples: Sequence[Example]) -> list[dict[str, list[int]]]:
    """Every window of each question: what a reader's encoder reads (``Task.input_rows``)."""
    return rows_of(target, windows_of(task, target, examples))


def sweep_rows(task: Any, target: Any, data: Dataset, metric: str = "auto",
               subset: Sequence[int] | None = None) -> SweepRows:
    """The windows of the questions ``subset`` of ``data`` (None: all) as ``target`` reads them (``task``'s
    settings), for head sweeps. Whether the reader may abstain (the null threshold) is decided on the whole
    data, as ``QuestionAnswering.answers`` decides it, so a block of a sequential sweep decodes as the whole does."""
    score = qa_score(metric)
    examples = list(data.examples) if subset is None else [data.examples[i] for i in subset]
    s = {key: task.setting(key) for key in ("n_best", "max_answer_tokens")}
    windows = windows_of(task, target, examples)
    rows = rows_of(target, windows)
    lengths = [len(r["input_ids"]) for r in rows]
    owner = torch.tensor([q for q, qw in enumerate(windows) for _ in qw.rows], dtype=torch.long)
    threshold = task.null_threshold_for(data.examples)
    golds = task.golds(examples)
    which = 0 if score.name == "em" else 1

    def answers(raw: np.ndarray) -> list[Answer]:
        out, at = [], 0
        for qw, ex in zip(windows, examples):
            mine = [torch.from_numpy(raw[at + w, : len(row["input_ids"])]) for w, row in enumerate(qw.rows)]
            at += len(qw.rows)
            out.append(decode([m[:, 0] for m in mine], [m[:, 1] for m in mine], qw, ex.text_pair or "", s["n_best"],
                              s["max_answer_tokens"], threshold))
        return out

    def collect(raw: np.ndarray) -> np.ndarray:
        return np.array([squad_metrics.score(a.text, g)[which] for a, g in zip(answers(raw), golds)], dtype=np.float64)

    def margins(raw: np.ndarray) -> np.ndarray:
        return np.array([a.confidence for a in answers(raw)], dtype=np.float64)

    note = rebuilt_note(windows)
    return SweepRows(examples, rows, lengths, window_labels(windows, examples), owner,
                     padded_logits(max(lengths, default=1)), collect, score, margins, (note,) if note else ())
