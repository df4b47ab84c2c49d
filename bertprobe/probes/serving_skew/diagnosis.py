"""Why a candidate's outputs differ from the reference's: hypotheses replayed on the reference.

Each hypothesis is a change of the reference's inputs (cut at L tokens; lower-cased) that a serving stack makes.
It is *confirmed* when the reference, so changed, gives the candidate's outputs (the same prediction, every
probability within the tolerance) on at least ``REPRODUCED`` of the examples it touches: a replay, not a
correlation. In order: truncation (at each length just below the shortest differing example's, then 32, 64, 128,
256 and 384 tokens below the reference's max_length), lower-casing (only where the reference's tokenizer is cased:
lower-casing changes its ids). Without a confirmed replay the sizes decide: small and widespread differences (most
examples past the tolerance, the largest under ``SMALL``, predictions rarely changed) point at a quantized or
lower-precision build; large ones at another model or version.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bertprobe.probes.serving_skew.compare import Scores, reproduced

REPRODUCED = 0.9  # share of the replayed examples a hypothesis must reproduce
SMALL = 0.05  # the largest probability difference still "small" (a lower-precision build's)
RARE = 0.01  # the largest share of changed predictions still "rare"
NEAR = 8  # lengths tried just below the shortest differing example's
BELOW_MAX = (32, 64, 128, 256, 384)  # and these below the reference's max_length
MOST_REPLAYED = 256  # examples a replay runs on (a seeded sample of those it touches)

Replay = Callable[[Any, Sequence[Any]], Scores]  # (a changed reference, examples) -> its scores on them


def truncation_lengths(lengths: np.ndarray, differing: np.ndarray, max_length: int) -> list[int]:
    """The truncation points worth replaying, nearest first: below the shortest differing example's length (a
    server cutting at L leaves every example of L tokens or fewer as it was), down to the longest agreeing
    example shorter than it, at most ``NEAR`` of them; then ``BELOW_MAX`` tokens below ``max_length``."""
    if not differing.any():
        return []
    shortest = int(lengths[differing].min())
    agreeing = lengths[~differing & (lengths < shortest)]
    floor = max(int(agreeing.max()) if agreeing.size else 2, 2)
    near = list(range(shortest - 1, max(floor, shortest - NEAR) - 1, -1))
    far = [max_length - k for k in BELOW_MAX]
    out: list[int] = []
    for length in near + far:
        if 2 <= length < min(shortest, max_length) and length not in out:
            out.append(length)
    return out


def sample(indices: np.ndarray, seed: int) -> np.ndarray:
    """At most ``MOST_REPLAYED`` of ``indices``, seeded, in order."""
    if len(indices) <= MOST_REPLAYED:
        return indices
    return np.sort(np.random.default_rng(seed).choice(indices, MOST_REPLAYED, replace=False))


def lowered(example: Any) -> Any:
    """The example with its texts lower-cased."""
    pair = example.text_pair.lower() if example.text_pair is not None else None
    return dataclasses.replace(example, text=example.text.lower(), text_pair=pair)


def is_cased(tokenizer: Any, examples: Sequence[Any]) -> bool:
    """Whether lower-casing changes the tokenizer's ids of any of ``examples`` (an uncased tokenizer lower-cases
    itself, so a lower-casing server changes nothing there)."""
    if tokenizer is None:
        return False
    for ex in examples:
        low = lowered(ex)
        if low.text == ex.text and low.text_pair == ex.text_pair:
            continue
        a = tokenizer(ex.text, ex.text_pair, truncation=False, verbose=False)["input_ids"]
        b = tokenizer(low.text, low.text_pair, truncation=False, verbose=False)["input_ids"]
        if list(a) != list(b):
            return True
    return False


def diagnose(reference: Any, examples: Sequence[Any], candidate: Scores, gap: np.ndarray, agree: np.ndarray,
             lengths: np.ndarray, tolerance: float, replay: Replay, seed: int = 0) -> dict[str, Any]:
    """The diagnosis as ``{"cause", "statement", "evidence", "tried"}`` (see the module docstring); ``gap`` and
    ``agree`` per example, ``lengths`` in the reference's tokens, ``replay`` runs a changed reference on examples."""
    n = len(examples)
    differing = (gap > tolerance) | ~agree
    count, changed = int(differing.sum()), int((~agree).sum())
    largest = float(gap.max()) if n else 0.0
    base = {"examples": n, "differing": count, "predictions_changed": changed, "max_score_difference": largest}
    tried: list[str] = []
    if count == 0:
        return {"cause": "none", "evidence": base, "tried": tried,
                "statement": f"the candidate gives the reference's outputs: all {n} examples within {tolerance:g}"}
    max_length = int(reference.max_length)
    for length in truncation_lengths(lengths, differing, max_length):
        touched = np.flatnonzero(lengths > length)  # what a cut at `length` changes
        picked = sample(touched, seed)
        shorter = dataclasses.replace(reference, spec=dataclasses.replace(reference.spec, max_length=length))
        hits = reproduced(replay(shorter, [examples[i] for i in picked]), candidate.take(picked), tolerance)
        tried.append(f"truncation at {length}: {int(hits.sum())} of {len(picked)} reproduced")
        if hits.mean() >= REPRODUCED:
            longer = int(differing[touched].sum())
            return {"cause": "truncation", "length": length, "tried": tried,
                    "evidence": {**base, "longer": len(touched), "longer_differing": longer, "replayed": len(picked),
                                 "reproduced": int(hits.sum()),
                                 "shorter_differing": int(differing[lengths <= length].sum())},
                    "statement": f"the endpoint truncates inputs at {length} tokens ({longer} examples longer than "
                                 f"{length} differ; the reference cut at {length} reproduces {int(hits.sum())} of "
                                 f"{len(picked)} replayed)"}
    changes = np.asarray([lowered(ex) != ex for ex in examples], dtype=bool)
    touched = np.flatnonzero(changes | differing)
    if changes[differing].any() and is_cased(getattr(reference, "tokenizer", None), [examples[i] for i in touched[:64]]):
        picked = sample(touched, seed)
        low = [lowered(examples[i]) for i in picked]
        hits = reproduced(replay(reference, low), candidate.take(picked), tolerance)
        tried.append(f"lower-casing: {int(hits.sum())} of {len(picked)} reproduced")
        if hits.mean() >= REPRODUCED:
            with_upper = int(changes.sum())
            return {"cause": "lower-casing", "tried": tried,
                    "evidence": {**base, "with_capitals": with_upper, "with_capitals_differing": int(differing[changes].sum()),
                                 "replayed": len(picked), "reproduced": int(hits.sum())},
                    "statement": f"the endpoint lower-cases its inputs ({int(differing[changes].sum())} of {with_upper} "
                                 f"examples with capitals differ; the reference on lower-cased texts reproduces "
                                 f"{int(hits.sum())} of {len(picked)} replayed)"}
    elif changes[differing].any():
        tried.append("lower-casing: not tried (the reference's tokenizer lower-cases itself)")
    share, changed_share = count / n, changed / n
    if share > 0.5 and largest < SMALL and changed_share <= RARE:
        return {"cause": "precision", "evidence": base, "tried": tried,
                "statement": f"small, widespread differences: a quantized or lower-precision build ({count} of {n} "
                             f"examples differ by more than {tolerance:g}, the largest {largest:.4f}; {changed} "
                             "predictions changed)"}
    if largest < SMALL and changed_share <= RARE:
        return {"cause": "small", "evidence": base, "tried": tried,
                "statement": f"small differences on a few examples ({count} of {n}, the largest {largest:.4f}; "
                             f"{changed} predictions changed): lower-precision arithmetic or nondeterminism, not "
                             "truncation or casing"}
    return {"cause": "another model", "evidence": base, "tried": tried,
            "statement": f"the endpoint may serve another model or version ({count} of {n} examples differ, the "
                         f"largest by {largest:.4f}; {changed} predictions changed; neither truncation nor "
                         "lower-casing reproduces them)"}
