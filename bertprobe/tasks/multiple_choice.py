"""Multiple choice: one score per choice from a ``(batch, choices, tokens)`` input, a softmax over choices."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from bertprobe.data.dataset import Dataset, DataSpec
from bertprobe.data.prepare import align_labels
from bertprobe.errors import DataError
from bertprobe.tasks.base import Task
from bertprobe.tasks.classification import OneOfMany, has_head


@dataclass(frozen=True)
class MultipleChoice(OneOfMany):
    """``…ForMultipleChoice``: ``num_labels`` is irrelevant; the gold label is a choice index."""

    name: ClassVar[str] = "multiple-choice"
    description: ClassVar[str] = "multiple choice: pick one of several candidate texts (softmax over choices)"
    model_class: ClassVar[str] = "AutoModelForMultipleChoice"
    capabilities: ClassVar[frozenset[str]] = frozenset({"predictions", "probabilities"})
    rows_per_choice: ClassVar[bool] = True

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
