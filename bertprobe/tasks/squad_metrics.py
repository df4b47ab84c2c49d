"""SQuAD's exact match and F1, as the official evaluation scripts define them, and question words.

Written from the definitions (not copied) of the official SQuAD v1.1 ``evaluate-v1.1.py``:

* an answer is *normalised*: lower-cased; every character of ASCII ``string.punctuation`` removed (only
  ASCII: curly quotes, dashes and other Unicode punctuation stay, exactly as in the official script, so
  that figures compare with the literature); the whole words ``a``, ``an`` and ``the`` replaced by a space;
  whitespace collapsed (split on whitespace, joined by single spaces);
* exact match: the normalised prediction equals the normalised gold answer;
* F1: over the bags of normalised tokens (whitespace split), the shared count is the multiset
  intersection; no shared token gives 0, else ``2 P R / (P + R)``. So under v1.1 an empty prediction
  against a gold that normalises to empty ("The") has EM 1 but F1 0: the script's own quirk, kept;
* a question's score is the maximum over its gold answers; a set's score the mean over questions, x100.

SQuAD 2.0 (``evaluate-v2.0.py``) adds unanswerable questions: a question with no gold answer scores EM =
F1 = 1 exactly when the prediction normalises to empty (abstaining), else 0. A question is unanswerable
when its list of gold answers is empty (``is_impossible``); an answerable one keeps the v1.1 definitions
over all its gold answers (v2.0 would also drop golds that normalise to empty, such as "The": no real
SQuAD question has one). ``summary`` reports the has-answer and no-answer splits.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from typing import Any

PUNCTUATION = frozenset(string.punctuation)  # ASCII only, as the official script
ARTICLES = re.compile(r"\b(a|an|the)\b")
QUESTION_WORDS = ("what", "who", "when", "where", "why", "how", "which", "other")
_ALIASES = {"whom": "who", "whose": "who"}
_WORD = re.compile(r"[a-z]+")


def normalize_answer(text: str) -> str:
    """The official normalisation: lower case, ASCII punctuation and articles removed, whitespace collapsed."""
    text = "".join(ch for ch in text.lower() if ch not in PUNCTUATION)
    text = ARTICLES.sub(" ", text)
    return " ".join(text.split())


def answer_tokens(text: str) -> list[str]:
    """The tokens F1 counts: the normalised answer split on whitespace."""
    return normalize_answer(text).split()


def exact_match_one(prediction: str, gold: str) -> float:
    """1.0 when the normalised strings are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_one(prediction: str, gold: str) -> float:
    """Token-bag F1 of one prediction against one gold answer (v1.1: 0 when nothing is shared)."""
    pred, ref = answer_tokens(prediction), answer_tokens(gold)
    shared = sum((Counter(pred) & Counter(ref)).values())
    if shared == 0:
        return 0.0
    precision, recall = shared / len(pred), shared / len(ref)
    return 2 * precision * recall / (precision + recall)


def score(prediction: str, golds: Sequence[str]) -> tuple[float, float]:
    """(EM, F1) of one question, each in [0, 1]: the maximum over its gold answers; with none
    (SQuAD 2.0 unanswerable) 1 for a prediction that normalises to empty, else 0."""
    if not golds:
        abstained = float(not normalize_answer(prediction))
        return abstained, abstained
    return max(exact_match_one(prediction, g) for g in golds), max(f1_one(prediction, g) for g in golds)


def question_word(question: str) -> str:
    """The question's wh-word: the first of what, who (whom, whose), when, where, why, how, which among its
    words, wherever it stands ("In what year..." is *what*, "How many..." and "How much..." are *how*,
    "The treaty of which country..." is *which*); ``other`` when it has none ("Name the...", "Is it...")."""
    for word in _WORD.findall(question.lower()):
        word = _ALIASES.get(word, word)
        if word in QUESTION_WORDS[:-1]:
            return word
    return "other"


def summary(predictions: Sequence[str], golds: Sequence[Sequence[str]]) -> dict[str, Any]:
    """EM and F1 (x100, means over questions) of a set, with SQuAD 2.0's has-answer/no-answer splits when
    any question is unanswerable; ``total`` and the split counts say how many questions each mean covers."""
    if len(predictions) != len(golds):
        raise ValueError(f"{len(predictions)} predictions for {len(golds)} questions")
    scores = [score(p, g) for p, g in zip(predictions, golds)]
    answerable = [len(g) > 0 for g in golds]

    def mean(values: list[float]) -> float:
        return 100.0 * sum(values) / len(values) if values else 0.0

    out: dict[str, Any] = {"exact": mean([e for e, _ in scores]), "f1": mean([f for _, f in scores]), "total": len(scores)}
    if not all(answerable):
        for name, want in (("HasAns", True), ("NoAns", False)):
            chosen = [s for s, a in zip(scores, answerable) if a == want]
            out.update({f"{name}_exact": mean([e for e, _ in chosen]), f"{name}_f1": mean([f for _, f in chosen]),
                        f"{name}_total": len(chosen)})
    return out
