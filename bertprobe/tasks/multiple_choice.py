"""Multiple choice: one score per choice from a ``(batch, choices, tokens)`` input, a softmax over choices."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from bertprobe.data.dataset import Dataset, DataSpec
from bertprobe.data.prepare import align_labels
from bertprobe.errors import DataError, ProbeError
from bertprobe.tasks.base import Task
from bertprobe.tasks.classification import has_head
from bertprobe.tasks.scores import ACCURACY, OutcomeScore


@dataclass(frozen=True)
class MultipleChoice(Task):
    """``…ForMultipleChoice``: ``num_labels`` is irrelevant; the gold label is a choice index."""

    name: ClassVar[str] = "multiple-choice"
    description: ClassVar[str] = "multiple choice: pick one of several candidate texts (softmax over choices)"
    model_class: ClassVar[str] = "AutoModelForMultipleChoice"
    capabilities: ClassVar[frozenset[str]] = frozenset({"predictions", "multiple-choice"})

    @classmethod
    def detect(cls, config: Any) -> bool:
        return has_head(config, "ForMultipleChoice")

    @classmethod
    def bind(cls, config: Any, options: Mapping[str, Any] | None = None) -> Task:
        return cls()

    def read_labels(self, data: Dataset, spec: DataSpec, model: str) -> Dataset:
        if not any(ex.label is not None for ex in data.examples):
            return data
        if any(not ex.choices for ex in data.examples):
            raise DataError(f"{model} is a multiple-choice model but {spec.describe()} has examples "
                            "without choices; set data.choices to the choice columns (or use a loader "
                            "such as arct)")
        sizes = {len(ex.choices or ()) for ex in data.examples}
        return align_labels(data, [], num_choices=min(sizes) if sizes else 0)

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.float().softmax(dim=-1)

    def predict(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.argmax(dim=-1)

    def loss(self, logits: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.float(), gold.to(logits.device), reduction="none")

    def total_loss(self, logits: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.float(), gold.to(logits.device), reduction="sum")

    def sweep_score(self, metric: str = "auto") -> OutcomeScore:
        if metric not in ("auto", "accuracy"):
            raise ProbeError(f"metric '{metric}' does not apply to a {self.name} model; it is scored by accuracy")
        return ACCURACY

    def correct(self, pred: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        return pred == gold.to(pred.device)

    def metrics(self, probs: torch.Tensor, pred: torch.Tensor, gold: torch.Tensor) -> dict[str, Any]:
        """Accuracy, and per gold class its accuracy (the class's recall)."""
        right = (pred == gold).double()
        out: dict[str, Any] = {"accuracy": float(right.mean()) if len(right) else 0.0}
        for c in range(probs.shape[-1]):
            chosen = gold == c
            if bool(chosen.any()):
                out[f"accuracy_{self.label_names[c] if c < len(self.label_names) else c}"] = float(right[chosen].mean())
        return out

    def confidence(self, probs: torch.Tensor, gold: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        top, pred = probs.max(dim=-1)
        return top, pred == gold.to(pred.device)
