"""A reader's question as model rows: its windows, their gold for the QA loss, and decoding them back.

A question's context may span several windows (``spans.encode_windows``), so a question is not one model row.
``example_rows`` (``Task.example_rows``) gives the windows as rows, each with its gold positions and the question it
belongs to, and says how to turn the rows' outputs back into one answer and one outcome per question:

* each window is labelled as Hugging Face labels its training windows (``window_labels``: ``spans.gold_positions``,
  the answer's first and last sub-tokens where the window holds the whole answer, else [CLS]; the first gold
  answer; [CLS] for an unanswerable question); ``masked_span_loss`` is HF's QA training loss on it, the mean of the
  start and end cross-entropies (``spans.span_loss``) over the window's own positions (padding masked), so it
  equals the model's loss on that window alone whatever the batch's padding;
* ``decode`` gives each question's answer from all its windows exactly as ``QuestionAnswering.answers`` decodes it
  (``spans.decode``: a row's output is its window's start/end logits), ``collect`` its SQuAD F1 (or exact match,
  ``metric: em``) against the question's gold answers;
* ``input_rows`` (``Task.input_rows``) is the windows' model inputs alone, what an encoder-level probe reads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from bertprobe.data.dataset import Dataset, Example
from bertprobe.errors import ProbeError
from bertprobe.tasks import squad_metrics
from bertprobe.tasks.rows import ExampleRows
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


def metric_name(metric: str) -> str:
    """The per-question outcome ``metric`` names: SQuAD F1 (``auto``, ``f1``) or exact match (``em``, ``exact_match``)."""
    if metric not in METRICS:
        raise ProbeError(f"metric '{metric}' does not apply to a question-answering model; it is scored by f1 "
                         "(the default) or em, per question over its windows")
    return METRICS[metric]


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


def example_rows(task: Any, target: Any, data: Dataset, metric: str = "auto",
                 subset: Sequence[int] | None = None) -> ExampleRows:
    """The windows of the questions ``subset`` of ``data`` (None: all) as ``target`` reads them (``task``'s
    settings), their gold, and their decoding into each question's answer and its ``metric`` (F1 or EM). Whether
    the reader may abstain (the null threshold) is decided on the whole data, as ``QuestionAnswering.answers``
    decides it, so a block of a sequential sweep decodes as the whole does."""
    which = 0 if metric_name(metric) == "em" else 1
    examples = list(data.examples) if subset is None else [data.examples[i] for i in subset]
    s = {key: task.setting(key) for key in ("n_best", "max_answer_tokens")}
    windows = windows_of(task, target, examples)
    rows = rows_of(target, windows)
    lengths = [len(r["input_ids"]) for r in rows]
    owner = torch.tensor([q for q, qw in enumerate(windows) for _ in qw.rows], dtype=torch.long)
    threshold = task.null_threshold_for(data.examples)
    golds = task.golds(examples)

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

    note = rebuilt_note(windows)
    return ExampleRows(examples, rows, lengths, window_labels(windows, examples), owner, answers, collect,
                       (note,) if note else ())
