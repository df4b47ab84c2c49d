"""``ExampleRows``: the model rows of examples that are several rows each (a reader's question over its windows).

What ``Task.example_rows`` returns: the rows the model reads, each row's gold for the task's ``loss``, and how the
rows' outputs decode back into each example's prediction and its outcome. The model wing ranks heads on them
(``model.variants``: ``prune_heads``); the ``head-pruning`` probe's ``answers`` section sweeps them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bertprobe.data.dataset import Example


@dataclass(frozen=True)
class ExampleRows:
    """``rows`` the model inputs (dicts of id lists) of ``examples``, example after example, and ``lengths`` their
    lengths; ``labels`` per row what the task's ``loss`` takes; ``owner[r]`` the index in ``examples`` of row ``r``'s
    example; ``decode(raw)`` each example's prediction from every row's raw output (rows in order: its logits,
    padded to one width), ``collect(raw)`` each example's outcome under the metric asked (a question's F1 or EM);
    ``notes`` what the report should say of the rows (windows rebuilt)."""

    examples: list[Example]
    rows: list[dict[str, list[int]]]
    lengths: list[int]
    labels: torch.Tensor
    owner: torch.Tensor
    decode: Callable[[np.ndarray], list[Any]]
    collect: Callable[[np.ndarray], np.ndarray]
    notes: tuple[str, ...] = ()
