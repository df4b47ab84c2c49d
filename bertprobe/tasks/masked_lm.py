"""Masked language modelling: a vocabulary distribution at each masked position (the cloze probes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from bertprobe.tasks.base import Task
from bertprobe.tasks.classification import has_head


@dataclass(frozen=True)
class MaskedLM(Task):
    """``…ForMaskedLM`` or ``…ForPreTraining``: no classes; probes score words at masked positions themselves."""

    name: ClassVar[str] = "masked-lm"
    description: ClassVar[str] = "masked language model: fills in [MASK] tokens (no classes)"
    model_class: ClassVar[str] = "AutoModelForMaskedLM"
    capabilities: ClassVar[frozenset[str]] = frozenset({"mlm", "mask-token"})

    @classmethod
    def detect(cls, config: Any) -> bool:
        return has_head(config, "ForMaskedLM") or has_head(config, "ForPreTraining")
