"""Tasks: what a model's outputs mean (one module per task), asked by every probe.

``Task`` is the contract; ``resolve_task`` picks a model's task from its config or the suite's
``task:``; ``builtin_tasks`` holds the built-in ones, which register through ``bertprobe_register_tasks``
as a plugin's would.
"""

from bertprobe.tasks.base import Task, config_labels
from bertprobe.tasks.classification import SingleLabelClassification
from bertprobe.tasks.encoder import Encoder
from bertprobe.tasks.masked_lm import MaskedLM
from bertprobe.tasks.multilabel import MultiLabelClassification
from bertprobe.tasks.multiple_choice import MultipleChoice
from bertprobe.tasks.question_answering import QuestionAnswering
from bertprobe.tasks.resolve import builtin_tasks, resolve_task, task_class, task_options
from bertprobe.tasks.token_classification import TokenClassification

__all__ = ["Encoder", "MaskedLM", "MultiLabelClassification", "MultipleChoice", "QuestionAnswering", "SingleLabelClassification", "Task", "TokenClassification",
           "builtin_tasks", "config_labels", "resolve_task", "task_class", "task_options"]
