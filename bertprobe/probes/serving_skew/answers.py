"""The serving-skew probe's section for extractive readers: does the endpoint give the reference's answers?

A served reader's answers are character spans of the context and its scores are its own (a pipeline's start x end
probability, not the reference's n-best softmax), so answers are compared by span: ``agreement`` is the share of
questions answered with the same span (the same text where a side gives no offsets), ``max_score_difference`` the
share whose span differs, ``mean_score_difference`` the mean of 1 - F1 between the two answers' texts (SQuAD's F1),
McNemar's exact p on exact match against the gold answers. The diagnosis replays lower-casing on the reference
(where its tokenizer is cased); truncation is not replayed (a reader reads a long context in windows, which a
server may cut differently: the statement names max_length and stride as what to compare).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bertprobe.data.dataset import Dataset
from bertprobe.probes.serving_skew.compare import token_lengths
from bertprobe.probes.serving_skew.diagnosis import REPRODUCED, is_cased, lowered, sample
from bertprobe.probes.serving_skew.metrics import add_diagnosis, add_mcnemar, add_summary
from bertprobe.results import Finding, ProbeResult
from bertprobe.results.outcomes import example_ids
from bertprobe.tasks import squad_metrics


def same_answer(a: Any, b: Any) -> bool:
    """The same span of the context (the same text where either gives no character offsets), or both abstain."""
    if a.abstained or b.abstained or not a.text or not b.text:
        return (a.abstained or not a.text) == (b.abstained or not b.text)
    if min(a.start, a.end, b.start, b.end) < 0:
        return a.text == b.text
    return (a.start, a.end) == (b.start, b.end)


def distance(a: Any, b: Any) -> float:
    """1 - SQuAD's F1 between the two answers' texts (0 for the same text)."""
    return 0.0 if a.text == b.text else 1.0 - squad_metrics.f1_one(a.text, b.text)


def compare(result: ProbeResult, target: Any, reference: Any, data: Dataset, params: Any, ctx: Any) -> None:
    """Fill the serving-skew probe's ``result`` for a reader (see the module docstring)."""
    examples = data.examples
    cand = list(ctx.predictions(target, data, params.batch_size).answers)
    ref = list(ctx.predictions(reference, data, params.batch_size).answers)
    agree = np.asarray([same_answer(c, r) for c, r in zip(cand, ref)], dtype=bool)
    gap = np.asarray([distance(c, r) for c, r in zip(cand, ref)], dtype=float)
    differing = ~agree
    ids = example_ids(examples)
    add_summary(result, agree, gap, differing, ids, params.tolerance, "1 - F1 between the two answers")
    result.add_metric("max_score_difference", float(differing.mean()), False, "share of answers whose span differs "
                      "(a served reader's scores are its own)", kind="extreme")
    if all(ex.label is not None for ex in examples):
        em_c = np.asarray([o["em"] for o in target.task.outcomes(cand, examples)]) > 0.5
        em_r = np.asarray([o["em"] for o in reference.task.outcomes(ref, examples)]) > 0.5
        add_mcnemar(result, em_c, em_r)
    lengths = token_lengths(reference, examples)
    add_diagnosis(result, _diagnose(reference, examples, cand, agree, params, ctx))
    for i in sorted(np.flatnonzero(differing), key=lambda i: (-gap[i], i))[: params.findings]:
        ex = examples[i]
        result.findings.append(Finding(
            title=f"{ex.id or i}: answer differs", input=ex.text, perturbed=None,
            expected=f"reference: {ref[i].text!r} (characters {ref[i].start}-{ref[i].end})",
            observed=f"candidate: {cand[i].text!r} (characters {cand[i].start}-{cand[i].end})",
            score=float(gap[i]), extra={"score_label": "1 - F1", "tokens": int(lengths[i]), "id": ex.id or str(i)}))


def _diagnose(reference: Any, examples: Sequence[Any], cand: list[Any], agree: np.ndarray, params: Any,
              ctx: Any) -> dict[str, Any]:
    n, count = len(examples), int((~agree).sum())
    base = {"examples": n, "differing": count}
    if count == 0:
        return {"cause": "none", "evidence": base, "tried": [],
                "statement": f"the candidate gives the reference's answers to all {n} questions"}
    tried: list[str] = []
    changes = np.asarray([lowered(ex) != ex for ex in examples], dtype=bool)
    touched = np.flatnonzero(changes | ~agree)
    if changes[~agree].any() and is_cased(getattr(reference, "tokenizer", None), [examples[i] for i in touched[:64]]):
        picked = sample(touched, ctx.seed)
        replayed = reference.task.answers(reference, [lowered(examples[i]) for i in picked], params.batch_size)
        hits = np.asarray([same_answer(r, cand[i]) for r, i in zip(replayed, picked)], dtype=bool)
        tried.append(f"lower-casing: {int(hits.sum())} of {len(picked)} reproduced")
        if hits.mean() >= REPRODUCED:
            return {"cause": "lower-casing", "tried": tried,
                    "evidence": {**base, "with_capitals": int(changes.sum()), "replayed": len(picked),
                                 "reproduced": int(hits.sum())},
                    "statement": f"the endpoint lower-cases its inputs ({int((~agree)[changes].sum())} of "
                                 f"{int(changes.sum())} questions with capitals answered otherwise; the reference on "
                                 f"lower-cased texts reproduces {int(hits.sum())} of {len(picked)} replayed)"}
    return {"cause": "another model", "evidence": base, "tried": tried,
            "statement": f"the endpoint may serve another model or version, or read contexts in other windows "
                         f"(compare its max_length and stride): {count} of {n} answers differ"}
