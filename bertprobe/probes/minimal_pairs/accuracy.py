"""BLiMP accuracies: per paradigm, phenomenon (``linguistics_term``) and field, pooled over pairs, and the mean
over paradigms that the BLiMP paper reports, each with a 95% interval."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from bertprobe.probes.minimal_pairs.scoring import PairScore
from bertprobe.stats import wilson_interval


@dataclass(frozen=True)
class GroupAccuracy:
    """A group's pairs (identical ones excluded), how many are right, its accuracy and Wilson 95% interval."""

    pairs: int
    correct: int

    @property
    def accuracy(self) -> float:
        return self.correct / self.pairs if self.pairs else float("nan")

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.correct, self.pairs)


def group_accuracy(scores: list[PairScore], key: Callable[[PairScore], str]) -> dict[str, GroupAccuracy]:
    """Accuracy of each group of ``scores`` (identical pairs skipped), groups sorted by name."""
    counts: dict[str, list[int]] = {}
    for s in scores:
        if s.pair.identical:
            continue
        c = counts.setdefault(key(s), [0, 0])
        c[0] += 1
        c[1] += s.correct
    return {name: GroupAccuracy(n, k) for name, (n, k) in sorted(counts.items())}


def mean_over_groups(groups: dict[str, GroupAccuracy]) -> tuple[float, tuple[float, float]]:
    """The unweighted mean of the groups' accuracies (the paper's overall BLiMP score is the mean over paradigms)
    and its 95% interval: the mean's variance as a stratified estimate, sum_k p_k (1 - p_k) / n_k / K^2, taken to an
    effective sample size p (1 - p) / v and Wilson's interval there (Wilson's over all pairs where v is 0)."""
    usable = [g for g in groups.values() if g.pairs]
    if not usable:
        return float("nan"), (float("nan"), float("nan"))
    k = len(usable)
    mean = sum(g.accuracy for g in usable) / k
    variance = sum(g.accuracy * (1 - g.accuracy) / g.pairs for g in usable) / (k * k)
    total = sum(g.pairs for g in usable)
    size = mean * (1 - mean) / variance if variance > 0 and 0 < mean < 1 else float(total)
    size = min(size, float(total))
    return mean, wilson_interval(mean * size, size)  # type: ignore[arg-type]


def margin_text(value: float) -> str:
    """A PLL or a PLL difference, readable whatever its size."""
    return f"{value:.2f}" if math.isfinite(value) else str(value)
