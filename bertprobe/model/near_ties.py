"""Near ties re-checked: pairs scored fast in reduced precision (bfloat16), the close ones scored again in the
model's own precision, so every outcome is the one a full-precision run gives unless a pair's reduced-precision
error exceeds twice the largest measured.

How the band is set: a seeded calibration sample of pairs is scored in both precisions; the largest difference of
a pair's margin (PLL(good) - PLL(bad)) between them, times ``factor`` (2), is the band; every pair whose fast
margin lies within it is re-scored, and re-scored pairs widen the band when they show a larger difference, until
no unchecked pair is inside it. Outcomes outside the band are the fast ones. On a random MiniLM-L6-shaped MLM (its
PLLs near ties) all of BLiMP re-scored 3,896 of 66,993 pairs (5.8%, band 0.047 nats; 6,232 and 0.077 before the MLM head's
transform stayed float32), CrowS-Pairs 1,053 of 1,508
(``benchmarks/mlm_scoring.py``, ``docs/benchmarks.md``). ``floor``: the least
band, for an outcome read from rounded scores (CrowS-Pairs rounds to 3 decimals: a band of 0.002 keeps every pair
outside it clear of a rounding tie). Used by ``blimp`` and ``crows-pairs``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Scores = tuple[float, float]  # the two sentences' scores: PLL(good), PLL(bad); or sent_more's, sent_less's


@dataclass(frozen=True)
class Settled:
    """The outcome of a re-check: every pair's scores (exact where re-scored) and what it took."""

    scores: list[Scores]
    rescored: int  # pairs scored in both precisions (calibration included)
    calibration: int  # pairs of the calibration sample
    band: float  # the final band: pairs whose fast margin is within it were re-scored
    max_error: float  # the largest |fast margin - exact margin| seen
    flips: int  # re-scored pairs whose outcome (good > bad) changed
    rounds: int


def calibration_sample(count: int, size: int, seed: int) -> list[int]:
    """A seeded sample of ``size`` pair indices out of ``count`` (all of them when fewer)."""
    return sorted(random.Random(f"{seed}:recheck").sample(range(count), min(size, count)))


def margin(s: Scores) -> float:
    return s[0] - s[1]


def settle(fast: Sequence[Scores], rescore: Callable[[list[int]], dict[int, Scores]], sample: list[int],
           factor: float = 2.0, floor: float = 0.0) -> Settled:
    """Re-score ``sample``, then every pair within ``factor`` times the largest margin difference seen (at least
    ``floor``), until none is left inside the band; ``rescore(indices)`` returns the exact scores of those pairs."""
    exact: dict[int, Scores] = {}
    todo = list(sample)
    band = error = 0.0
    rounds = 0
    while todo:
        rounds += 1
        found = rescore(todo)
        missing = set(todo) - set(found)
        if missing:
            raise ValueError(f"{len(missing)} re-scored pairs came back without scores")
        exact.update(found)
        error = max(abs(margin(fast[i]) - margin(exact[i])) for i in exact)
        band = max(floor, factor * error)
        todo = [i for i, s in enumerate(fast) if i not in exact and abs(margin(s)) <= band]
    flips = sum((margin(fast[i]) > 0) != (margin(exact[i]) > 0) for i in exact)
    scores = [exact.get(i, s) for i, s in enumerate(fast)]
    return Settled(scores, len(exact), len(sample), band, error, flips, rounds)


PAYING = 3  # bfloat16 pays from this many times the calibration sample's pairs (see ``plan``)


def plan(precision: str, pairs: int, calibration: int) -> tuple[str, str | None]:
    """The precision to run ``pairs`` pairs in, given the resolved ``precision`` (``model`` or ``bfloat16``), and the
    summary line when bfloat16 is dropped. bfloat16 costs a pass over every pair at about 1/2.5 of float32's, plus
    the ``calibration`` pairs and the near ties (about a tenth of BLiMP's) in float32: under about twice the
    calibration sample that is more than float32 alone, so below ``PAYING`` times it the pairs are scored once, in
    the model's precision."""
    if precision != "model" and pairs < PAYING * calibration:
        return "model", (f"model's own: {pairs} pairs, under {PAYING} x the {calibration} calibration pairs bfloat16 "
                         "re-scores, where bfloat16 would not pay")
    return precision, None


def details(settled: Settled) -> dict[str, object]:
    """What a report keeps of a re-check (``details.recheck``)."""
    return {"rescored_pairs": settled.rescored, "calibration_pairs": settled.calibration, "band": settled.band,
            "max_error": settled.max_error, "flips": settled.flips, "rounds": settled.rounds,
            "note": ("scored in bfloat16; pairs whose margin was within the band re-scored in the model's precision: "
                     "outcomes are the full-precision run's unless a pair's bfloat16 error exceeds the band")}


def summary(settled: Settled, pairs: int) -> str:
    """The report summary's precision line."""
    return f"bfloat16, {settled.rescored}/{pairs} re-scored in float32, {settled.flips} flipped"
