"""Sequential unit sweeps: evaluate each unit on growing blocks of examples and stop it once decided.

A unit (a head or a layer removed) changes some predictions; its paired accuracy change against the
plain model is decided when its interval lies wholly inside the tolerance band ``[-tol, +tol]``, wholly
below it (a drop larger than ``tol``) or wholly above it (a gain larger than ``tol``). With more examples
most units are decided long before the last one; a full pass per unit only confirms them.

First comes a census: the ``census_share`` of examples (5% by default) on which the plain model's decision is
closest to changing (its smallest margin, ``OutcomeScore.margin``, such as the top-two logit gap) are evaluated
in full for every unit, and their summed change is known exactly. Ablations flip predictions mostly there (on
SST-2 at 3,000 examples the smallest 5% of margins held 57% of all flips), and what stays outside is rare, so
the sampled rest decides a unit sooner. Which examples form the census depends on the plain model alone, fixed
before any unit is evaluated, so the estimate (census sum plus the rest's sampled mean, weighted by the rest's
size) stays unbiased and the confidence sequence below stays valid: it bounds the rest's mean only. Then looks
come at 256, 384, 576, 864 ... examples of the rest (each ``growth`` times the last, in an order fixed by the
seed) and finally at all of them. An interim interval is a betting confidence sequence (Waudby-Smith & Ramdas
2024; ``head_pruning.betting``), valid however often it is looked at, at ``interim_share * (1 - confidence)``
per side; no alpha is split between looks. A unit that reaches the end gets the exact mode's interval (its
paired percentile bootstrap at ``confidence``, the same resamples), so it reads exactly as in the exact
mode. The stated error: a unit settled before the end is misjudged in a given direction with probability at
most ``interim_share * (1 - confidence)`` (0.025 with head-pruning's defaults: the exact interval's own level
per side), one that reaches the end as in the exact mode; in all, at most twice the exact mode's.
Only outcomes that are a mean per example can be sequential: 0/1 (accuracy, subset accuracy, multiple choice) or
a score in [0, 1] (a reader's F1 per question; its paired differences lie in [-1, 1], which the betting sequence
bounds); a metric recomputed from sums (micro-F1, entity F1) runs the exact sweep.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from zlib import crc32

import numpy as np

from bertprobe.probes.head_pruning.betting import BettingSequence, delta_grid
from bertprobe.stats import bootstrap_ci

FIRST_BLOCK = 256
GROWTH = 1.5


def looks(n: int, first: int = FIRST_BLOCK, growth: float = GROWTH) -> list[int]:
    """Cumulative example counts at which units are judged: first, then ``growth`` times the last (rounded to
    a multiple of 32, so blocks batch evenly) ... then ``n``."""
    out, k = [], first
    while k < n:
        out.append(k)
        k = max(k + 32, int(round(k * growth / 32)) * 32)
    return out + [n]


def census_first(order: np.ndarray, margins: np.ndarray | None, share: float) -> tuple[np.ndarray, int]:
    """``order`` with the census in front: the ``ceil(share * n)`` examples of the smallest ``margins`` (ties by
    index; their number at most ``n - 1``), then the rest in ``order``'s own order. Returns the new order and the
    census's size (0, and ``order`` unchanged, without margins or with ``share`` 0)."""
    n = order.size
    if margins is None or share <= 0 or n < 2:
        return order, 0
    k = min(n - 1, math.ceil(share * n - 1e-9))
    census = np.argsort(np.asarray(margins, dtype=np.float64), kind="stable")[:k]
    inside = np.zeros(n, dtype=bool)
    inside[census] = True
    return np.concatenate([census, order[~inside[order]]]), k


def classify_drop(ci: tuple[float, float] | None, tolerance: float) -> str:
    """Where an interval of the accuracy change lies against ``-tolerance`` alone (a pruning-curve point:
    ``prunable_fraction`` asks whether its drop is within the tolerance, not whether it gains): ``within``
    (wholly at or above), ``drop`` (wholly below) or ``straddles``."""
    if ci is None:
        return "straddles"
    if ci[0] >= -tolerance - 1e-12:
        return "within"
    if ci[1] < -tolerance:
        return "drop"
    return "straddles"


def classify(ci: tuple[float, float] | None, tolerance: float) -> str:
    """Where an interval of the accuracy change lies against ``[-tolerance, +tolerance]``: ``within``,
    ``drop`` (wholly below -tolerance), ``gain`` (wholly above +tolerance) or ``straddles``."""
    if ci is None:
        return "straddles"
    low, high = ci
    if low >= -tolerance - 1e-12 and high <= tolerance + 1e-12:
        return "within"
    if high < -tolerance:
        return "drop"
    if low > tolerance:
        return "gain"
    return "straddles"


@dataclass
class UnitState:
    """One unit's outcomes so far (in the seeded order), and where it settled."""

    key: str
    unit: Any
    outcomes: list[np.ndarray] = field(default_factory=list)
    settled: str = ""  # within / drop / gain, or straddles at the end; "" while open
    look: int = -1
    ci: tuple[float, float] | None = None
    census_sum: float = 0.0  # summed change over the census (exact)
    rest_sum: float = 0.0  # summed change over the rest's examples seen so far
    rest_seen: int = 0
    estimate: float = 0.0  # the change: census sum plus the rest's sampled mean times its size, over all

    @property
    def seen(self) -> int:
        return sum(o.size for o in self.outcomes)


@dataclass(frozen=True)
class SequentialResult:
    """Per unit: its outcomes on the examples it used (in the order's first ``examples`` positions), its
    interval, estimate and class; and the cost in full-pass equivalents."""

    units: list[UnitState]
    order: np.ndarray
    looks: list[int]
    passes: float  # unit evaluations in full-pass equivalents (examples used / examples)
    census: int = 0  # the order's first ``census`` examples, evaluated in full for every unit


def rest_grid(grid: np.ndarray, census_sum: float, n: int, rest: int) -> np.ndarray:
    """Candidate changes over all ``n`` examples as candidate means over the ``rest`` outside the census
    (``change * n = census_sum + rest * mean``), those a mean of values in [-1, 1] can take."""
    mapped = (grid * n - census_sum) / rest
    return mapped[(mapped > -1 + 1e-9) & (mapped < 1 - 1e-9)]


def run_sequential(keys_units: Sequence[tuple[str, Any]], base: np.ndarray, order: np.ndarray,
                   evaluate: Callable[[list[tuple[str, Any]], int, int], list[np.ndarray]], tolerance: float,
                   confidence: float = 0.95, interim_share: float = 0.5, resamples: int = 1000, seed: int = 0,
                   first: int = FIRST_BLOCK, progress: Callable[[str], None] | None = None,
                   seeds: dict[str, int] | None = None, growth: float = GROWTH,
                   decide: Callable[[tuple[float, float] | None, float], str] = classify,
                   interim_alpha: float | None = None, census: int = 0) -> SequentialResult:
    """Evaluate the open units on each next block of ``order`` (``evaluate(units, a, b)`` returns each unit's
    0/1 outcomes on ``order[a:b]``), judge them with ``decide`` (``classify``, or ``classify_drop`` for the
    pruning curve), and stop the decided ones (see the module docstring). ``interim_alpha`` (per side)
    defaults to ``interim_share * (1 - confidence)``. The first ``census`` positions of ``order`` are the
    census (``census_first``): part of the first block, summed exactly, outside the confidence sequence."""
    n = base.size
    rest = n - census
    marks = [census + m for m in looks(rest, first, growth)] if rest > 0 else [n]
    grid = delta_grid(tolerance)
    states = [UnitState(k, u) for k, u in keys_units]
    alpha = interim_alpha if interim_alpha is not None else interim_share * (1 - confidence)
    bets: dict[str, BettingSequence] = {}  # on the rest's mean, made once the census is summed
    start = 0
    used = 0
    for look, end in enumerate(marks):
        open_ = [s for s in states if not s.settled]
        if not open_:
            break
        if progress is not None:
            progress(f"{len(states) - len(open_)} settled, {len(open_)} open; examples {start}-{end} of {n}")
        values = evaluate([(s.key, s.unit) for s in open_], start, end)
        used += len(open_) * (end - start)
        block_base = base[order[start:end]].astype(np.float64)
        final = end == n
        for s, v in zip(open_, values):
            s.outcomes.append(np.asarray(v).astype(np.float64))  # 0/1, or a score in [0, 1] (F1)
            if final:  # every example seen: the exact mode's interval, on the examples in their own order
                restored = np.empty(n, dtype=np.float64)
                restored[order] = np.concatenate(s.outcomes)
                diff = restored.astype(np.float64) - base.astype(np.float64)
                unit_seed = seeds[s.key] if seeds and s.key in seeds else seed + crc32(s.key.encode()) % 10_000
                s.ci = bootstrap_ci(diff, resamples, confidence, unit_seed) if resamples else None
                s.estimate = float(diff.mean())
                s.settled, s.look = decide(s.ci, tolerance), look
                continue
            x = s.outcomes[-1].astype(np.float64) - block_base
            if start < census:  # the census: its change summed exactly
                s.census_sum += float(x[: census - start].sum())
                x = x[census - start:]
            if s.key not in bets:
                bets[s.key] = BettingSequence(alpha, rest_grid(grid, s.census_sum, n, rest) if census else grid)
            bet = bets[s.key]
            bet.update(x)
            low, high = bet.interval()
            s.ci = ((s.census_sum + rest * low) / n, (s.census_sum + rest * high) / n) if census else (low, high)
            s.rest_sum, s.rest_seen = s.rest_sum + float(x.sum()), s.rest_seen + x.size
            s.estimate = (s.census_sum + rest * s.rest_sum / s.rest_seen) / n
            verdict = decide(s.ci, tolerance)
            if verdict != "straddles":
                s.settled, s.look = verdict, look
        start = end
    return SequentialResult(states, order, marks, used / n if n else 0.0, census)


__all__ = ["SequentialResult", "UnitState", "census_first", "classify", "classify_drop", "looks", "rest_grid",
           "run_sequential"]
