"""The slices probe's section for taggers (``word_tags``; ``units(target, data, params, ctx)``, a ``SliceUnits``):
a sentence is right when its entities are exact (span and type), the built-in gold and predicted slices read the
entity types a sentence holds, "all lower case" is a slice of its own, and every slice also gets the entity F1 of
its sentences."""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from bertprobe.data.dataset import Dataset
from bertprobe.errors import ProbeError
from bertprobe.probes.slices.units import SliceUnits
from bertprobe.tasks.entities import sentence_counts, spans
from bertprobe.tasks.scores import f1_from_counts
from bertprobe.tasks.token_classification import TokenClassification


def units(target: Any, data: Dataset, params: Any, ctx: Any) -> SliceUnits:
    """Sentences, right when their entities are exact, with entity F1 per slice, on the shared per-word logits."""
    task = cast(TokenClassification, target.task)
    return entity_slice_units(task, data, ctx.predictions(target, data, params.batch_size).logits, params.metric)


def entity_slice_units(task: TokenClassification, data: Dataset, logits: Any, metric: str) -> SliceUnits:
    """Each sentence right when its entities are exact; per sentence, which entity types its gold and predicted
    tags hold (the built-in "gold has PER" slices) and its entity counts (entity F1 per slice)."""
    if metric != "accuracy":
        raise ProbeError("slices on a token-classification model measure sentence exact match (metric: accuracy)"
                         " with entity F1 per slice; recall, precision and label: do not apply")
    scheme = str(task.settings.get("scheme", "IOB2"))
    types = task.entity_types
    golds = [task.tags(list(ex.label or ())) for ex in data.examples]
    preds = [task.tags(z[: len(g)].argmax(-1)) for z, g in zip(logits, golds)]
    counts = [sentence_counts(g, p, scheme) for g, p in zip(golds, preds)]
    correct = np.array([float(c.tp == c.gold == c.pred) for c in counts])
    has = lambda tags: [int(any(k == t for _, _, k in spans(tags, scheme))) for t in types]  # noqa: E731
    gold = np.array([has(g) for g in golds]).reshape(len(golds), len(types))
    pred = np.array([has(p) for p in preds]).reshape(len(preds), len(types))

    def shown(i: int) -> tuple[str, str]:
        length = len(data.examples[i].label or ())
        return (task.describe_labels(list(data.examples[i].label or ())),
                task.describe_labels(logits[i][:length].argmax(-1).tolist()))

    def row_scores(mask: np.ndarray, seed: int) -> dict[str, Any]:
        value, interval = entity_f1(counts, mask, seed)
        return {"entity_f1": value, "entity_f1_interval": interval}

    return SliceUnits(correct, np.ones(len(correct), dtype=bool), gold, pred, types, shown,
                      {"all lower case": np.array([ex.text == ex.text.lower() for ex in data.examples])}, row_scores)


def entity_f1(counts: list[Any], mask: np.ndarray, seed: int, resamples: int = 500) -> tuple[float, list[float]]:
    """Entity micro-F1 of the sentences in ``mask``, with a percentile bootstrap interval over them."""
    picked = [c for c, m in zip(counts, mask) if m]
    sums = np.array([[sum(c.tp.values()), sum(c.pred.values()), sum(c.gold.values())] for c in picked], dtype=float)
    if not len(sums):
        return 0.0, [0.0, 0.0]
    tp, pr, gd = sums.sum(0)
    value = f1_from_counts(tp, pr - tp, gd - tp)
    idx = np.random.default_rng(seed).integers(0, len(sums), size=(resamples, len(sums)))
    s = sums[idx].sum(1)
    draws = f1_from_counts(s[:, 0], s[:, 1] - s[:, 0], s[:, 2] - s[:, 0])
    return float(value), [round(float(np.quantile(draws, 0.025)), 4), round(float(np.quantile(draws, 0.975)), 4)]
