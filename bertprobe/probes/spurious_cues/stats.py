"""Cue statistics in the style of Niven & Kao 2019 (applicability, productivity, coverage); no model.

For ARCT-like multiple choice, a cue k is *applicable* to a data point when it occurs in one choice
(warrant) and not the other; alpha_k counts such points, productivity pi_k is the share of them where
k is in the correct choice, and coverage xi_k = alpha_k / n. For classification, a cue is applicable
to every example containing it; pi_k is the share of those examples with the cue's majority label.

Tokens come from a plain lowercase word tokenizer (``[a-z0-9]+``). With ``normalize_contractions``
(default), "n't" is rewritten to " not" (can't, cannot -> can not; won't -> will not) first, so
don't/isn't/can't count as "not". No smoothing by default; ``smoothing = s`` gives pi_k = (c_k + s) / (alpha_k + s * m) for m
classes or choices (the reference code of Niven & Kao uses s = 1).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

WORD = re.compile(r"[a-z0-9]+")
IRREGULAR = ((re.compile(r"\bcan['’]t\b"), "can not"), (re.compile(r"\bwon['’]t\b"), "will not"),
             (re.compile(r"\bshan['’]t\b"), "shall not"), (re.compile(r"\bcannot\b"), "can not"))
CONTRACTION = re.compile(r"n['’]t\b")


def words(text: str, normalize_contractions: bool = True) -> list[str]:
    """Lowercase word tokens; with ``normalize_contractions`` don't -> do not, can't/cannot -> can not."""
    text = text.lower()
    if normalize_contractions:
        for pattern, repl in IRREGULAR:
            text = pattern.sub(repl, text)
        text = CONTRACTION.sub(" not", text)
    return WORD.findall(text)


def grams(tokens: Sequence[str], sizes: Iterable[int]) -> set[str]:
    out: set[str] = set()
    for n in sizes:
        out.update(" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
    return out


def choice_grams(options: Sequence[str], sizes: Iterable[int],
                 normalize_contractions: bool = True) -> tuple[list[set[str]], set[str]]:
    """Each choice's n-grams, and the cues applicable to the data point: in some choices but not all."""
    sets = [grams(words(c, normalize_contractions), sizes) for c in options]
    return sets, (set().union(*sets) - set.intersection(*sets)) if sets else set()


@dataclass(frozen=True)
class Cue:
    cue: str
    applicability: int
    productivity: float
    coverage: float
    label: int  # the class it predicts, or 1 = "in the correct choice" for multiple choice
    hits: int  # data points where the cue points to the right answer

    def score(self, chance: float, rank: str = "excess") -> float:
        """Ranking key: productivity above chance times coverage (``excess``) or pi * xi (``product``)."""
        return (self.productivity - chance) * self.coverage if rank == "excess" else self.productivity * self.coverage


def choice_cues(choices: Sequence[Sequence[str]], labels: Sequence[int], sizes: Iterable[int] = (1, 2),
                normalize_contractions: bool = True, smoothing: float = 0.0) -> list[Cue]:
    """Cues that tell the correct choice from the others (ARCT: a cue in one warrant, not the other).

    With more than two choices a cue is applicable when it occurs in some choices but not all.
    """
    sizes = tuple(sizes)
    applicable: Counter[str] = Counter()
    correct: Counter[str] = Counter()
    m = 2
    for options, label in zip(choices, labels):
        sets, distinguishing = choice_grams(options, sizes, normalize_contractions)
        m = max(m, len(sets))
        for cue in distinguishing:
            applicable[cue] += 1
            if cue in sets[label]:
                correct[cue] += 1
    n = len(labels)
    return [
        Cue(cue, a, (correct[cue] + smoothing) / (a + smoothing * m), a / n, 1, correct[cue])
        for cue, a in applicable.items()
    ]


def label_cues(texts: Sequence[str], labels: Sequence[int], num_labels: int, sizes: Iterable[int] = (1, 2),
               normalize_contractions: bool = True, smoothing: float = 0.0) -> list[Cue]:
    """Cues for classification: tokens whose examples lean to one label."""
    sizes = tuple(sizes)
    applicable: Counter[str] = Counter()
    per_label: list[Counter[str]] = [Counter() for _ in range(num_labels)]
    for text, label in zip(texts, labels):
        for cue in grams(words(text, normalize_contractions), sizes):
            applicable[cue] += 1
            per_label[label][cue] += 1
    n = len(labels)
    out = []
    for cue, a in applicable.items():
        counts = [per_label[lab][cue] for lab in range(num_labels)]
        best = max(range(num_labels), key=counts.__getitem__)
        out.append(Cue(cue, a, (counts[best] + smoothing) / (a + smoothing * num_labels), a / n, best, counts[best]))
    return out


def top_cues(cues: Sequence[Cue], chance: float, top: int, min_applicability: int = 5, rank: str = "excess",
             label: int | None = None) -> list[Cue]:
    pool = [c for c in cues if c.applicability >= min_applicability and (label is None or c.label == label)]
    return sorted(pool, key=lambda c: (-c.score(chance, rank), c.cue))[:top]
