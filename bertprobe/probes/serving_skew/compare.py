"""The numbers the serving-skew probe compares two models by: per example the largest probability difference and
whether the prediction is the same, the reference's classes put in the candidate's order, and token lengths."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bertprobe.errors import ProbeError


@dataclass(frozen=True)
class Scores:
    """One model's outputs on some examples: probabilities ``N x C`` and predictions (class ids ``N``, or a 0/1
    indicator ``N x C``), as its task reads its logits."""

    probs: np.ndarray
    pred: np.ndarray

    def take(self, indices: Sequence[int] | np.ndarray) -> Scores:
        idx = np.asarray(indices, dtype=int)
        return Scores(self.probs[idx], self.pred[idx])


def scores_of(target: Any, examples: Sequence[Any], batch_size: int | None = None, logits: Any = None,
              progress: Any = None) -> Scores:
    """``target``'s scores on ``examples`` through its task (``logits``: the ones already computed)."""
    if logits is None:
        logits = target.logits(target.encode(examples, cache=False), batch_size, progress)
    probs = target.task.probs(logits).double().cpu().numpy()
    pred = target.task.predict(logits).cpu().numpy()
    return Scores(probs.reshape(len(probs), -1), pred)


def class_order(candidate: Sequence[str], reference: Sequence[str]) -> list[int] | None:
    """For each of the candidate's classes, the reference's index of the class of that name (None: the same order);
    a ProbeError when they name other classes."""
    if list(candidate) == list(reference):
        return None
    if sorted(candidate) != sorted(reference):
        raise ProbeError(f"the reference's classes ({', '.join(reference)}) are not the candidate's "
                         f"({', '.join(candidate)}): it reads another task's outputs; name the checkpoint the endpoint "
                         "serves as params.reference")
    return [list(reference).index(name) for name in candidate]


def reorder(scores: Scores, order: list[int] | None) -> Scores:
    """The reference's ``scores`` in the candidate's class order (``class_order``)."""
    if order is None:
        return scores
    probs = scores.probs[:, order]
    if scores.pred.ndim == 2:  # an indicator per class
        return Scores(probs, scores.pred[:, order])
    back = np.empty(len(order), dtype=int)
    back[np.asarray(order)] = np.arange(len(order))  # reference id -> candidate id
    return Scores(probs, back[scores.pred.astype(int)])


def gaps(a: Scores, b: Scores) -> np.ndarray:
    """Per example the largest |difference| of a class probability."""
    if a.probs.shape != b.probs.shape:
        raise ProbeError(f"the candidate gives {a.probs.shape[1]} scores per example, the reference {b.probs.shape[1]}")
    return np.abs(a.probs - b.probs).max(axis=1) if a.probs.size else np.zeros(len(a.probs))


def same(a: Scores, b: Scores) -> np.ndarray:
    """Per example whether the two predictions are the same (every label of a label set)."""
    eq = a.pred == b.pred
    return eq.reshape(len(eq), -1).all(axis=1)


def reproduced(replayed: Scores, wanted: Scores, tolerance: float) -> np.ndarray:
    """Per example whether a replay gives the wanted outputs: the same prediction, every probability within
    ``tolerance``."""
    return same(replayed, wanted) & (gaps(replayed, wanted) <= tolerance)


def token_lengths(target: Any, examples: Sequence[Any]) -> np.ndarray:
    """Each example's length in ``target``'s tokens, special tokens included and nothing cut (what a server that
    truncates would cut); a target without a tokenizer gives its encoding's lengths."""
    tokenizer = getattr(target, "tokenizer", None)
    if tokenizer is None:
        return np.asarray(target.encode(examples).lengths, dtype=int)
    out = []
    for start in range(0, len(examples), 512):
        chunk = examples[start : start + 512]
        pairs = [ex.text_pair for ex in chunk]
        if all(p is None for p in pairs):
            enc = tokenizer([ex.text for ex in chunk], truncation=False, verbose=False)
            out += [len(ids) for ids in enc["input_ids"]]
        else:
            out += [len(tokenizer(ex.text, ex.text_pair, truncation=False, verbose=False)["input_ids"]) for ex in chunk]
    return np.asarray(out, dtype=int)


def describe(task: Any, pred: Any, probs: np.ndarray) -> str:
    """A prediction and its scores as a reader sees them: ``positive (p 0.9731)``, a label set's names."""
    if np.ndim(pred) == 0:
        return f"{task.describe_labels(int(pred))} (p {float(probs[int(pred)]):.4f})"
    on = [i for i, v in enumerate(pred) if v]
    shown = ", ".join(f"{task.describe_labels(i)} {float(probs[i]):.4f}" for i in on) or "no label"
    return f"{{{shown}}}"
