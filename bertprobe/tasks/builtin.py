"""Built-in plugin: the tasks bertprobe knows, registered through the hook a plugin would use."""

from __future__ import annotations

from typing import Any

from bertprobe.hookmarkers import hookimpl
from bertprobe.tasks.classification import SingleLabelClassification
from bertprobe.tasks.encoder import Encoder
from bertprobe.tasks.masked_lm import MaskedLM
from bertprobe.tasks.multilabel import MultiLabelClassification
from bertprobe.tasks.multiple_choice import MultipleChoice
from bertprobe.tasks.question_answering import QuestionAnswering
from bertprobe.tasks.reranker import Reranker
from bertprobe.tasks.sentence_embedding import SentenceEmbedding
from bertprobe.tasks.token_classification import TokenClassification


@hookimpl
def bertprobe_register_tasks(registry: Any) -> None:
    for task in (SingleLabelClassification, MultiLabelClassification, MultipleChoice, MaskedLM, Encoder,
                 TokenClassification, QuestionAnswering, SentenceEmbedding, Reranker):
        registry.add(task)
