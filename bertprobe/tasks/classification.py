"""Single-label sequence classification: a softmax over the classes, one class per example."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from bertprobe.data.dataset import Dataset, DataSpec
from bertprobe.data.prepare import align_labels
from bertprobe.errors import ProbeError
from bertprobe.tasks.base import Task, config_labels, refuse_questions, refuse_token_tags
from bertprobe.tasks.scores import ACCURACY, OutcomeScore


def architectures(config: Any) -> list[str]:
    return list(getattr(config, "architectures", None) or [])


def has_head(config: Any, suffix: str) -> bool:
    return any(a.endswith(suffix) for a in architectures(config))


@dataclass(frozen=True)
class OneOfMany(Task):
    """One answer per example out of several (classes, or choices): the softmax over them, its argmax, the
    cross-entropy, accuracy; shared by single-label classification and multiple choice."""

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.float().softmax(dim=-1)

    def predict(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.argmax(dim=-1)

    def loss(self, logits: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.float(), gold.to(logits.device), reduction="none")

    def total_loss(self, logits: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.float(), gold.to(logits.device), reduction="sum")

    def outcome_score(self, metric: str = "auto") -> OutcomeScore:
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


@dataclass(frozen=True)
class SingleLabelClassification(OneOfMany):
    """A sequence classifier with one class per example (``…ForSequenceClassification``, ``problem_type``
    single-label or unset): probabilities are the softmax, the prediction its argmax, the loss the cross-entropy."""

    name: ClassVar[str] = "classification"
    description: ClassVar[str] = "single-label sequence classification: one class per text (softmax)"
    model_class: ClassVar[str] = "AutoModelForSequenceClassification"
    capabilities: ClassVar[frozenset[str]] = frozenset({"predictions", "classifier", "probabilities"})
    unnamed_classes_are_indices: ClassVar[bool] = True

    @classmethod
    def detect(cls, config: Any) -> bool:
        return has_head(config, "ForSequenceClassification") and getattr(config, "problem_type", None) != "multi_label_classification"

    @classmethod
    def bind(cls, config: Any, options: Mapping[str, Any] | None = None) -> Task:
        return cls(label_names=config_labels(config))

    def read_labels(self, data: Dataset, spec: DataSpec, model: str) -> Dataset:
        refuse_questions(data, self.name, model, "a text and one class per example (csv/tsv/jsonl)")
        if not any(ex.label is not None for ex in data.examples):
            return data
        refuse_token_tags(data, self.name, model, "one class")
        return align_labels(data, self.label_names, label_map=spec.label_map)
