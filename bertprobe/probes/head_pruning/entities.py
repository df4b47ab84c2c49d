"""``head-pruning`` on a tagger (NER, ``word_tags``): the sweeps evaluate word-aligned rows, gold on each word's
first sub-token (the training convention), scored by the task's entity F1 (or sentence exact match).

A sentence longer than ``max_length`` is left out of the sweeps (``dropped``: the report warns), as one row
holds one sentence here; the accuracy probe predicts such sentences in windows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from bertprobe.data.dataset import Dataset
from bertprobe.model.target import Encoded, Target
from bertprobe.probes.head_pruning.rows import SweepRows, subset_of
from bertprobe.tasks.token_classification import TokenClassification


def sweep_rows(target: Target, data: Dataset, metric: str = "auto", subset: Sequence[int] | None = None) -> SweepRows:
    """The sentences ``subset`` of ``data`` (None: all) that fit one row, word-aligned, with their sub-token gold,
    scored by the task's ``outcome_score(metric)``."""
    task = cast(TokenClassification, target.task)
    data = subset_of(data, subset)
    score = task.outcome_score(metric)  # per-example outcome and the metric over it
    aligned = target.encode_words(data.examples)
    kept = [i for i, a in enumerate(aligned) if a is not None]
    data = Dataset([data.examples[i] for i in kept], name=data.name, label_names=data.label_names)
    rows = [a for a in (aligned[i] for i in kept) if a is not None]
    encoded = Encoded([r for r, _ in rows], [len(r["input_ids"]) for r, _ in rows])
    labels = task.token_gold([w for _, w in rows], data)
    return SweepRows(list(data.examples), encoded, labels, score, dropped=len(aligned) - len(kept))
