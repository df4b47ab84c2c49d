"""The accuracy probe's own audit, for classes (single-label classifiers, a choice among candidates): overall and
per-class accuracy with Wilson intervals, the confusion matrix, the most confidently wrong predictions and the
batch-of-one check; and the throughput timing every section whose predictions are ``target.encode``'s shares.
A plugin's section for its own task may call ``audit`` first and add its metrics after it."""

from __future__ import annotations

from typing import Any

import torch

from bertprobe.data.dataset import Dataset
from bertprobe.model.target import Target
from bertprobe.model.timing import measure_throughput
from bertprobe.results import Finding, ProbeResult
from bertprobe.results.outcomes import Outcomes, example_ids
from bertprobe.stats import wilson_interval


def audit(result: ProbeResult, target: Target, data: Dataset, params: Any, ctx: Any) -> None:
    """Fill ``result`` with the per-class audit of ``target`` on ``data`` (its prediction throughput included)."""
    task = target.task
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
    throughput(result, target, data, params, seconds)
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
    batch_of_one(result, target, data, probs, names, params, ctx.seed)
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


def throughput(result: ProbeResult, target: Target, data: Dataset, params: Any, seconds: float) -> None:
    # timed warm, only here: the shared pass (calibration and slices read it too) was the warm-up
    speed = measure_throughput(target, target.encode(data.examples), params.batch_size) if len(data) else None
    if speed is not None:
        result.add_metric("examples_per_s", speed.median, True, speed.describe(), (speed.slowest, speed.fastest),
                          kind="cost")
    else:
        result.add_metric("examples_per_s", len(data) / max(seconds, 1e-9), True,
                          "prediction throughput of the one pass over the data (warm-up included)", kind="cost")


def batch_of_one(result: ProbeResult, target: Target, data: Dataset, probs: torch.Tensor, names: list[str],
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


