"""A bare encoder (``BertModel``, ``RobertaModel``...): hidden states and attentions, no logits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from bertprobe.tasks.base import Task


def base_model_names() -> set[str]:
    """transformers' bare model classes (``BertModel``, ``RobertaModel``, ...), by name."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    names: set[str] = set()
    for value in MODEL_MAPPING_NAMES.values():
        names.update(value if isinstance(value, (tuple, list)) else (value,))
    return names


@dataclass(frozen=True)
class Encoder(Task):
    """No task head, so no predictions, loss or calibration: probes that need them are refused or skipped."""

    name: ClassVar[str] = "encoder"
    description: ClassVar[str] = "bare encoder without a task head (attention and representation probes only)"
    model_class: ClassVar[str] = "AutoModel"
    capabilities: ClassVar[frozenset[str]] = frozenset()
    priority: ClassVar[int] = -10  # only when no head is named
    headless: ClassVar[bool] = True
    lacks: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"mlm": "no masked-LM head: the checkpoint holds the encoder alone"})

    @classmethod
    def detect(cls, config: Any) -> bool:
        return bool(set(getattr(config, "architectures", None) or []) & base_model_names())
