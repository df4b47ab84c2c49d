"""The accuracy probe's section for entities (tasks with ``word_tags``: ``bertprobe.sections``): strict entity precision,
recall and F1 (micro and per type, bootstrap intervals over sentences), token accuracy, sentence exact match, an
error breakdown, per-sentence outcomes, the sentences most wrong, figures and the key finding."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from bertprobe.data.dataset import Dataset
from bertprobe.probes.accuracy.labelsets import RECALL_BOUND
from bertprobe.results import Catalogue, DefaultExpectation, Finding, ProbeResult
from bertprobe.results.outcomes import Outcomes, example_ids
from bertprobe.stats import wilson_interval
from bertprobe.tasks.scores import absent_note, f1_from_counts
from bertprobe.tasks.token_classification import TokenClassification


def entity_list(words: Sequence[str], entities: Sequence[tuple[int, int, str]]) -> str:
    """A sentence's entities as one comparable text, each with its first word's position: ``0:[PER Maria Lopez]
    4:[LOC Lima]``; ``(no entities)`` when none."""
    from bertprobe.tasks.entities import bracketed

    shown = bracketed(words, entities)  # as findings show an entity: [PER Maria Lopez]
    return " ".join(f"{a}:{text}" for (a, _, _), text in zip(entities, shown)) or "(no entities)"


def audit(result: ProbeResult, target: Any, data: Dataset, params: Any, ctx: Any) -> None:
    """The NER audit: strict entity P/R/F1 (seqeval's strict mode; micro and per type, bootstrap intervals over
    sentences), token accuracy, sentence exact match, an error breakdown, and per-sentence outcomes."""
    from bertprobe.tasks.entities import bracketed, entity_scores, error_kinds, marked, sentence_counts, spans

    task = cast(TokenClassification, target.task)
    scheme = str(task.settings.get("scheme", "IOB2"))
    predicted = ctx.predictions(target, data, params.batch_size)  # per word, shared with calibration and slices
    golds = [task.tags(list(ex.label or ())) for ex in data.examples]
    preds = [task.tags(logits[: len(g)].argmax(-1)) for logits, g in zip(predicted.logits, golds)]
    counts = [sentence_counts(g, p, scheme) for g, p in zip(golds, preds)]
    types = task.entity_types
    scores = entity_scores(counts, types)
    ids = example_ids(data.examples)
    exact = [float(c.tp == c.gold == c.pred) for c in counts]
    result.outcomes += [
        Outcomes.from_values("sentence_exact", ids, exact),
        Outcomes.from_values("entities_found", ids, [sum(c.tp.values()) for c in counts], "score"),
        Outcomes.from_values("entities_gold", ids, [sum(c.gold.values()) for c in counts], "score"),
        Outcomes.from_values("entities_predicted", ids, [sum(c.pred.values()) for c in counts], "score"),
        # the sentence's predicted entities, for a matrix's agreement between builds
        Outcomes.from_values("prediction", ids, [entity_list(ex.words or (), spans(p, scheme))
                                                 for ex, p in zip(data.examples, preds)], "label"),
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
        marks = sorted(set(bracketed(words_i, gold_i) + bracketed(words_i, pred_i)), key=lambda m: (-len(m), m))
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
                                               if predicted.windowed else "") + absent_note(absent)


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


# what this section writes in the accuracy probe's place (merged by Probe.catalogue)
catalogue = Catalogue(
    {"entity_f1": "token classification: entity-level micro F1, strict (exact span and type; bootstrap over sentences)",
     "entity_precision": "token classification: share of predicted entities that are exactly right",
     "entity_recall": "token classification: share of gold entities found exactly",
     "token_accuracy": "token classification: share of words tagged with their gold tag",
     "sentence_exact_match": "token classification: share of sentences whose entities are all exactly right",
     "errors_*": "token classification: entities missed, spurious, of the wrong type or with a wrong boundary",
     "windowed_sentences": "token classification: sentences longer than max_length, predicted in windows",
     "f1_*": "token classification: strict F1 of one entity type",
     "precision_*": "token classification: strict precision of one entity type",
     "recall_*": "token classification: strict recall of one entity type (Wilson interval over its gold entities)",
     "support_*": "token classification: gold entities of one type"},
    {"entity_f1": True, "entity_precision": True, "entity_recall": True, "token_accuracy": True,
     "sentence_exact_match": True, "errors_*": None, "windowed_sentences": None, "f1_*": True, "precision_*": True,
     "recall_*": True, "support_*": None},
    (DefaultExpectation(
        "entity_f1", min=0.5, interval=True,
        why="token classification: below 0.5 most entities are missed or wrong (strict spans); CoNLL-2003 systems "
            "score above 0.9 and a weak in-domain model about 0.7, so only a model that surely misses most is failed"),
     RECALL_BOUND),
    ("recall_*", "entity_f1"), absent=("accuracy", "accuracy_*"))
