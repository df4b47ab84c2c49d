"""Extractive question answering (SQuAD-style): a span of the context answers each question.

Inputs are (question, context) pairs: an ``Example`` holds the question in ``text``, the context in
``text_pair`` and the gold answers in ``label`` as a tuple of ``(answer text, character start)`` pairs
(``()`` for a SQuAD 2.0 unanswerable question; ``None`` for unlabelled data): see ``bertprobe.data.squad``.
The question comes first, as the common checkpoints were trained (``question_first: false`` for a model
trained the other way round). Long contexts are split into overlapping windows and an answer is decoded
over all windows of a question (``tasks.spans``); exact match and F1 are the official SQuAD ones
(``tasks.squad_metrics``). Settings, recorded in the report: ``max_length`` 384 and ``stride`` 128 (the
windows), ``n_best`` 20 and ``max_answer_tokens`` 30 (the decoding), ``null_threshold`` 0 (SQuAD 2.0: the
[CLS] null score against the best span, applied when the data hold unanswerable questions) and
``question_first``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from bertprobe.data.dataset import Dataset, DataSpec, Example
from bertprobe.data.squad import is_answers
from bertprobe.errors import DataError, RowProblems
from bertprobe.tasks import qa_adversarial, squad_metrics
from bertprobe.tasks.base import Task
from bertprobe.tasks.classification import has_head
from bertprobe.tasks.qa_clusters import question_clusters
from bertprobe.tasks.qa_rows import example_rows as qa_example_rows
from bertprobe.tasks.qa_rows import input_rows as qa_input_rows
from bertprobe.tasks.qa_rows import masked_span_loss
from bertprobe.tasks.rows import ExampleRows
from bertprobe.tasks.spans import Answer, answer

DEFAULTS: dict[str, Any] = {"max_length": 384, "stride": 128, "n_best": 20, "max_answer_tokens": 30,
                            "null_threshold": 0.0, "question_first": True, "abstain": "auto"}
WINDOW_KEYS = ("max_length", "stride")  # also model.max_length and model.stride: the same settings of the windows
# abstain: whether the reader may answer "no answer" (the [CLS] null score against the best span, SQuAD 2.0):
# true for a SQuAD 2.0 reader audited on any data (answerable questions only included), false never, auto when
# the data hold an unanswerable question


def qa_settings(options: Mapping[str, Any] | None = None, where: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The task's settings: ``DEFAULTS`` with the ``options`` that name one of them (``model.options``), each
    checked, with a one-line DataError naming it (as ``where`` names it: ``model.max_length`` when it came from
    there); others (a multi-label model's thresholds) are ignored."""
    out = dict(DEFAULTS)
    named = {key: f"model.options.{key}" for key in DEFAULTS} | dict(where or {})
    for key, value in (options or {}).items():
        if key not in DEFAULTS or value is None:
            continue
        where = named[key]
        if key == "question_first":
            if not isinstance(value, bool):
                raise DataError(f"{where}: must be true or false, not {value!r}")
            out[key] = value
        elif key == "abstain":
            if value not in (True, False, "auto"):
                raise DataError(f"{where}: must be true, false or auto, not {value!r}")
            out[key] = value
        elif key == "null_threshold":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
                raise DataError(f"{where}: must be a number (a logit difference, 0 by default), not {value!r}")
            out[key] = float(value)
        else:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DataError(f"{where}: must be a positive whole number, not {value!r}")
            out[key] = value
    if out["stride"] >= out["max_length"]:
        given = (options or {}).get("stride") is not None
        if not given and out["max_length"] < 2:  # no stride fits under a window of 1: the window is the problem
            raise DataError(f"{named['max_length']}: {out['max_length']} is too small for a reader's windows (each "
                            f"holds the question, the special tokens and part of the context; the default is "
                            f"{DEFAULTS['max_length']})")
        raise DataError(f"{named['stride']}: {out['stride']}{'' if given else ' (the default)'} must be less than "
                        f"max_length {out['max_length']} (consecutive windows share stride sub-tokens)"
                        + ("" if given else f"; set {named['stride'].replace('options.', '')} below it"))
    return out


@dataclass(frozen=True)
class QuestionAnswering(Task):
    """``…ForQuestionAnswering``: start and end logits over each window's sub-tokens; one span per question."""

    settings: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULTS))
    name: ClassVar[str] = "question-answering"
    description: ClassVar[str] = "extractive question answering: a span of the context (SQuAD EM/F1)"
    model_class: ClassVar[str] = "AutoModelForQuestionAnswering"
    capabilities: ClassVar[frozenset[str]] = frozenset({"predictions", "probabilities"})
    listed_probes_only: ClassVar[bool] = True  # a reader's spans are no classes: a probe must be written for them
    own_predictions: ClassVar[bool] = True  # answers decoded over windows, shared through ctx.predictions
    span_answers: ClassVar[bool] = True  # an answer is a span of its context (behaviour's cases, a trigger's target)
    option_keys: ClassVar[frozenset[str]] = frozenset(DEFAULTS)

    @classmethod
    def detect(cls, config: Any) -> bool:
        return has_head(config, "ForQuestionAnswering")

    @classmethod
    def bind(cls, config: Any, options: Mapping[str, Any] | None = None) -> Task:
        """The settings of ``options`` over DEFAULTS; ``model.max_length`` and ``model.stride`` are the windows'
        too (``tasks.resolve.task_options`` passes them as ``model.KEY``: one that differs from its
        ``model.options`` twin is an error naming both). A model of fewer positions than the default window
        (``max_position_embeddings`` < 384) reads windows of its positions unless the suite sets them; a window
        set or fitted without a stride overlaps by min(128, half of itself); and a window longer than its
        positions is refused."""
        options, where = model_windows(options)
        given = {k for k, v in options.items() if v is not None}
        positions = getattr(config, "max_position_embeddings", None)
        fitted = dict(options)
        if isinstance(positions, int) and positions < DEFAULTS["max_length"] and "max_length" not in given:
            fitted["max_length"] = positions
        window = fitted.get("max_length")
        if "stride" not in given and isinstance(window, int) and not isinstance(window, bool) and 1 < window:
            # a window set (or fitted to the positions) without a stride overlaps by at most half of itself (a
            # classifier suite's 128 by 64): the default stride of 128 would leave a window under about 170 no room
            # for a question
            fitted["stride"] = min(DEFAULTS["stride"], window // 2)
        settings = qa_settings(fitted, where)
        if isinstance(positions, int) and settings["max_length"] > positions:
            name = where.get("max_length", "model.options.max_length")
            raise DataError(f"{name} {settings['max_length']} is more than the model's {positions} positions "
                            f"(max_position_embeddings); set {name} to at most {positions}")
        return cls(settings=settings)

    # ---- data ----------------------------------------------------------------------------------
    def read_labels(self, data: Dataset, spec: DataSpec, model: str) -> Dataset:
        """Checks that every example is a question with its context (and, when labelled, gold answers as the
        QA readers give them); a file of another task's shape is one DataError naming its rows (grouped). QA data
        take one ``data.options`` key, ``adversarial`` (``tasks.qa_adversarial``: Jia & Liang's variants marked,
        declared or detected); a task setting written there is pointed to ``model.options``. A treebank (words,
        no answers) passes unchanged: syntax-heads reads the reader's encoder on its own sentences."""
        if data.examples and all(ex.words is not None and ex.label is None for ex in data.examples):
            return data  # a treebank without answers: encoder-level probes (syntax-heads) read its words alone
        for key in spec.options:
            if key == qa_adversarial.OPTION:
                continue
            if key in DEFAULTS:
                raise DataError(f"data.options.{key}: a setting of the question-answering task, not of its data; set "
                                f"model.options.{key} (or --set model.options.{key}=VALUE)")
            raise DataError(f"data.options.{key}: question-answering data take one option, adversarial (auto, "
                            f"jia-liang or none); the task's settings ({', '.join(DEFAULTS)}) go under model.options")
        rows = RowProblems()
        for i, ex in enumerate(data.examples):
            if not ex.text_pair or not ex.text:
                rows.add(f"{data.where(i)}: {model} is a question-answering model, which needs a question and its "
                         "context; give SQuAD JSON, JSONL rows with question, context and answers, or a CSV/TSV with "
                         "question, context and answer columns")
            elif ex.label is not None and not is_gold(ex.label):
                rows.add(f"{data.where(i)}: the gold of a question-answering example is a list of answers in its "
                         "context, not a class label; give SQuAD JSON, or an answers/answer column")
        rows.raise_if_any()
        return qa_adversarial.group(data, spec.options)  # Jia & Liang's adversarial variants, declared or detected

    def gold(self, data: Dataset) -> Any:
        raise self._unsupported("tensor of gold labels (answers are spans: use answers(), outcomes() and golds())")

    @staticmethod
    def golds(data: Dataset | Sequence[Example]) -> list[list[str]]:
        """Each question's gold answer texts (empty for an unanswerable one)."""
        examples = data.examples if isinstance(data, Dataset) else data
        return [[text for text, _ in (ex.label or ())] for ex in examples]

    def setting(self, key: str) -> Any:
        """One setting (its default where the task was built without it)."""
        return self.settings.get(key, DEFAULTS[key])

    def null_threshold_for(self, examples: Sequence[Example]) -> float | None:
        """The null threshold where the reader may abstain, else None: ``abstain: true`` always (a SQuAD 2.0
        reader, even on answerable questions only), ``false`` never, ``auto`` (the default) when the data hold
        an unanswerable question (SQuAD 2.0), so a SQuAD 1.1 reader is never asked to."""
        abstain = self.setting("abstain")
        if abstain == "auto":
            abstain = any(ex.label == () for ex in examples)
        return float(self.setting("null_threshold")) if abstain else None

    def answers(self, target: Any, examples: Sequence[Example], batch_size: int | None = None,
                progress: Callable[..., Iterable[Any]] | None = None, tokenizer: Any = None) -> list[Answer]:
        """Each question's decoded answer from ``target`` (a Target, or a plain QA module and its ``tokenizer``); a
        served reader (``served_answers``) answers with its own spans."""
        served = getattr(target, "served_answers", None)
        if callable(served):
            return served(examples, progress)
        s = {**DEFAULTS, **self.settings}
        return answer(target, [ex.text for ex in examples], [ex.text_pair or "" for ex in examples], tokenizer,
                      max_length=s["max_length"], stride=s["stride"], n_best=s["n_best"],
                      max_answer_tokens=s["max_answer_tokens"], null_threshold=self.null_threshold_for(examples),
                      question_first=s["question_first"], batch_size=batch_size,
                      names=[ex.id for ex in examples], progress=progress)

    def predict_data(self, target: Any, data: Dataset, batch_size: int | None = None, progress: Any = None) -> list[Answer]:
        """Each question's answer (``ctx.predictions(...).answers``: one decoding shared by the run's probes)."""
        return self.answers(target, data.examples, batch_size, progress)

    # ---- a question as its windows' rows (tasks.qa_rows) ---------------------------------------------
    def output_logits(self, output: Any) -> Any:
        """Start and end logits stacked: ``rows x T x 2``."""
        import torch

        return torch.stack([output.start_logits, output.end_logits], dim=-1)

    def loss(self, logits: Any, gold: Any) -> Any:
        """Per window HF's QA loss (mean of the start and end cross-entropies) over its own positions; ``gold``
        rows are ``[start, end, length]`` (``qa_rows.window_labels``)."""
        return masked_span_loss(logits, gold)

    def input_rows(self, target: Any, examples: Sequence[Example]) -> list[dict[str, list[int]]]:
        """Every window of each (question, context) pair, as ``answers`` reads them (``tasks.spans``)."""
        return qa_input_rows(self, target, examples)

    def example_rows(self, target: Any, data: Dataset, metric: str = "auto",
                     subset: Sequence[int] | None = None) -> ExampleRows:
        """The windows of the questions, their gold positions, and each question's answer and F1 (or EM) decoded
        over its windows from the rows' logits (``tasks.qa_rows``); the null threshold applies when the whole data
        hold unanswerable questions, whichever ``subset`` is evaluated."""
        return qa_example_rows(self, target, data, metric, subset)

    def outcomes(self, answers: Sequence[Answer], examples: Sequence[Example]) -> list[dict[str, float]]:
        """Per question its ``em`` and ``f1`` (0 or 1, and in [0, 1]): the outcomes paired gates compare."""
        return [dict(zip(("em", "f1"), squad_metrics.score(a.text, g))) for a, g in zip(answers, self.golds(examples))]

    def metrics_of(self, answers: Sequence[Answer], examples: Sequence[Example]) -> dict[str, Any]:
        """SQuAD's EM and F1 (x100), with the has-answer and no-answer splits where they apply."""
        return squad_metrics.summary([a.text for a in answers], self.golds(examples))

    def example_clusters(self, examples: Sequence[Any]) -> list[str] | None:
        """The questions of one context resample together (``qa_clusters.question_clusters``)."""
        return question_clusters(examples)


def model_windows(options: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, str]]:
    """``options`` with ``model.max_length`` and ``model.stride`` (passed as ``model.KEY``) taken in as the
    windows' ``max_length`` and ``stride``, and where each such setting came from; a model-level value that
    differs from the one under ``model.options`` is a one-line DataError naming both."""
    out = dict(options or {})
    where: dict[str, str] = {}
    for key in WINDOW_KEYS:
        value = out.pop(f"model.{key}", None)
        if value is None:
            continue
        inner = out.get(key)
        if inner is not None and inner != value:
            raise DataError(f"model.{key} {value} and model.options.{key} {inner} differ: a reader reads one {key} "
                            f"for its windows; give it once (model.{key}, or model.options.{key})")
        if inner is None:
            out[key] = value
            where[key] = f"model.{key}"
    return out, where


def is_gold(label: Any) -> bool:
    """Whether ``label`` is a QA gold: a tuple of (answer text, character start) pairs."""
    return is_answers(label)
