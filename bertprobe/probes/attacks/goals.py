"""What an attack wants from the model's outputs: a class (single-label) or a label's state (multi-label).

The trigger search minimises ``objective`` per row; ``correct`` says whether a row is still answered as
its gold says, ``hit`` whether the attack reached its goal, ``probability`` is the probability of the gold
answer (what the findings show falling). ``rows`` (the examples the logits belong to) matters only to
goals that differ per example, such as entity suppression on a token classifier (``entity_goal.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class ClassGoal:
    """Single-label: examples of class ``label`` pushed to class ``to`` (targeted) or to any other class."""

    label: int
    to: int | None = None

    def objective(self, logits: torch.Tensor, rows: object = None) -> torch.Tensor:
        """CE to the goal class (targeted), or minus CE of the true class."""
        goal = torch.full((logits.shape[0],), self.to if self.to is not None else self.label, device=logits.device)
        ce = F.cross_entropy(logits.float(), goal, reduction="none")
        return ce if self.to is not None else -ce

    def correct(self, logits: torch.Tensor, rows: object = None) -> torch.Tensor:
        return logits.argmax(-1) == self.label

    def hit(self, logits: torch.Tensor, rows: object = None) -> torch.Tensor:
        pred = logits.argmax(-1)
        return pred == self.to if self.to is not None else pred != self.label

    def probability(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.float().softmax(-1)[..., self.label]


@dataclass(frozen=True)
class LabelStateGoal:
    """Multi-label: label ``label`` turned on (``add``: texts without it) or off (texts carrying it), with the
    binary cross-entropy of that label toward the goal state as the search loss; its state is
    sigmoid >= ``threshold``."""

    label: int
    add: bool
    threshold: float = 0.5

    def objective(self, logits: torch.Tensor, rows: object = None) -> torch.Tensor:
        column = logits[..., self.label].float()
        return F.binary_cross_entropy_with_logits(column, torch.full_like(column, float(self.add)), reduction="none")

    def state(self, logits: torch.Tensor) -> torch.Tensor:
        return logits[..., self.label].float().sigmoid() >= self.threshold

    def correct(self, logits: torch.Tensor, rows: object = None) -> torch.Tensor:
        return self.state(logits) != self.add  # gold: off for add, on for remove

    def hit(self, logits: torch.Tensor, rows: object = None) -> torch.Tensor:
        return self.state(logits) == self.add

    def probability(self, logits: torch.Tensor) -> torch.Tensor:
        p = logits[..., self.label].float().sigmoid()
        return 1 - p if self.add else p
