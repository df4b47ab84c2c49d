"""What the head sweeps evaluate (``SweepRows``), the probe's own rows for models whose example is one row, and
how the probe's section travels to a worker.

A section of ``head-pruning`` (``entities``, ``answers``, or a plugin's for its task) gives
``sweep_rows(target, data, metric, subset) -> SweepRows``: the examples ``subset`` of ``data`` (None: all) as model
rows, their gold, and how a changed model's row outputs are scored. ``class_rows`` is the probe's own (classes,
multiple choice, label sets: one row per example, scored by the task's ``outcome_score``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import torch

from bertprobe.data.dataset import Dataset, Example
from bertprobe.model.target import Encoded, Target
from bertprobe.tasks.scores import OutcomeScore

PROBE = "head-pruning"


@dataclass(frozen=True)
class SweepRows:
    """What the head sweeps evaluate: ``examples`` (those scored, in data order), ``encoded`` their model rows,
    ``labels`` per row what the task's ``loss`` (and ``judge``) take, ``score`` the metric over per-example outcomes,
    ``dropped`` the examples left out (a tagger's sentences longer than max_length).

    Where an example is several rows (a question's windows): ``owner[r]`` the index in ``examples`` of row ``r``'s
    example (importance sums an example's rows' gradients before the absolute value), ``judge(logits, labels)`` a
    row's raw outcome (on the logits' device), ``collect(raw)`` the per-example outcomes from every row's raw outcome
    (rows in order) and ``margins(raw)`` per example how far its decision is from changing; None: one row per
    example, judged by ``score.outcome``, its margin ``score.margin``.

    Where a row's output is no logits (a bi-encoder's hidden states): ``logits_of(output)`` reads it (None: the task's
    ``output_logits``). Where the task's per-batch ``loss`` cannot serve as importance's loss (a bi-encoder's queries
    are scored against other rows): ``importance(mask)`` computes the ``L x H`` importance itself (None:
    ``model.pruning.head_importance`` on these rows). ``notes``: what the report should say of the rows."""

    examples: list[Example]
    encoded: Encoded
    labels: torch.Tensor
    score: OutcomeScore
    dropped: int = 0
    owner: torch.Tensor | None = None
    judge: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
    collect: Callable[[np.ndarray], np.ndarray] | None = None
    margins: Callable[[np.ndarray], np.ndarray] | None = None
    logits_of: Callable[[Any], torch.Tensor] | None = None
    importance: Callable[[torch.Tensor | None], torch.Tensor] | None = None
    notes: tuple[str, ...] = ()


def subset_of(data: Dataset, subset: Sequence[int] | None) -> Dataset:
    """The examples ``subset`` of ``data`` (a sequential block), all of them for None (a corpus kept)."""
    if subset is None:
        return data
    return Dataset([data.examples[i] for i in subset], name=data.name, label_names=data.label_names,
                   corpus=data.corpus)


def class_rows(target: Target, data: Dataset, metric: str = "auto", subset: Sequence[int] | None = None) -> SweepRows:
    """The probe's own rows: one ``target.encode`` row per example, its gold ``task.gold``, scored by the task's
    ``outcome_score(metric)`` (accuracy; multi-label: micro-F1...)."""
    data = subset_of(data, subset)
    score = target.task.outcome_score(metric)  # per-example outcome and the metric over it
    labels = target.task.gold(data)
    return SweepRows(list(data.examples), target.encode(data.examples), labels, score)


def portable(section: Any) -> Any:
    """``section`` as a sweep's settings carry it to a worker: a module by its name (modules do not pickle)."""
    return section.__name__ if isinstance(section, ModuleType) else section


def section_of(carried: Any, task: Any) -> Any:
    """The section a sweep's settings name (``portable``), or for None the built-in section of ``task``."""
    if carried is None:
        from bertprobe.plugins import builtin_section

        return builtin_section(PROBE, task)
    return importlib.import_module(carried) if isinstance(carried, str) else carried
