"""An answer's text in its context, as every span probe and task shows and reads it: marked excerpts of a
context, its sentences, and the words and content words of a question or passage.

Sentences are split at ., ! or ? followed by white space, and at line breaks (an abbreviation such as "U.S. "
ends a sentence early). Content words are lower-cased word types that are no stop word (scikit-learn's English
list, shipped as ``stopwords_en.txt`` with its provenance) and not a single letter.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from typing import Any

Mark = tuple[int, int, str]  # (first character, end character, label) in a finding's cell

EXCERPT_PAD = 80  # characters of context kept on each side of a marked span
NO_ANSWER = "(no answer)"  # how an abstention (an empty answer) reads in a finding
WORD = re.compile(r"[a-z0-9]+")
SENTENCE_END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*\s+|\n+")


def merged(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching character ranges joined."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def excerpt(text: str, marks: Sequence[Mark], pad: int = EXCERPT_PAD) -> tuple[str, list[Mark]]:
    """The parts of ``text`` around the ``marks`` (``pad`` characters each side, widened to whole words), joined
    by ``…`` where text was left out, and the marks moved to their places in it. Without marks, the start."""
    if not marks:
        end = len(text) if len(text) <= 2 * pad else word_end(text, 2 * pad)
        return text[:end] + ("…" if end < len(text) else ""), []
    ranges = merged([(word_start(text, max(0, s - pad)), word_end(text, min(len(text), e + pad)))
                     for s, e, _ in marks])
    out, shifts = "", []
    for k, (a, b) in enumerate(ranges):
        out += " … " if k else ("…" if a > 0 else "")
        shifts.append((a, b, len(out) - a))
        out += text[a:b]
    if ranges[-1][1] < len(text):
        out += "…"
    return out, [(s + shift, e + shift, label) for s, e, label in marks for a, b, shift in shifts if a <= s and e <= b]


def word_start(text: str, at: int) -> int:
    """``at`` moved back to the start of the word it falls in."""
    while 0 < at < len(text) and not text[at - 1].isspace():
        at -= 1
    return at


def word_end(text: str, at: int) -> int:
    """``at`` moved on to the end of the word it falls in."""
    while 0 < at < len(text) and not text[at].isspace():
        at += 1
    return at


def answer_marks(answer: Any, gold: Any) -> list[Mark]:
    """The gold spans (overlapping gold answers joined) and the predicted span, as context characters."""
    golds = merged([(start, start + len(text)) for text, start in (gold or ()) if text])
    marks = [(a, b, "gold") for a, b in golds]
    if answer.text:
        marks.append((answer.start, answer.end, "predicted"))
    return marks  # gold first: the reporters give labels their brackets and colours in the order they appear


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    """The shipped English stop words (``stopwords_en.txt``; its header names where they come from)."""
    text = resources.files(__package__).joinpath("stopwords_en.txt").read_text(encoding="utf-8")
    return frozenset(w.strip() for w in text.splitlines() if w.strip() and not w.startswith("#"))


def words(text: str) -> list[str]:
    """Lower-cased words (runs of letters and digits)."""
    return WORD.findall(text.lower())


def content_words(text: str) -> set[str]:
    """The word types of ``text`` that are no stop word and not a single letter."""
    stop = stop_words()
    return {w for w in words(text) if w not in stop and not (len(w) == 1 and w.isalpha())}


def sentences(context: str) -> list[tuple[int, int]]:
    """(start, end) characters of each sentence of ``context`` (see the module docstring)."""
    out, at = [], 0
    for m in SENTENCE_END.finditer(context):
        out.append((at, m.end()))
        at = m.end()
    if at < len(context) or not out:
        out.append((at, len(context)))
    return out


def answer_sentence(context: str, start: int, text: str) -> str:
    """The sentence(s) of ``context`` holding the answer ``text`` at character ``start``."""
    end = max(start + len(text), start + 1)
    return " ".join(context[a:b] for a, b in sentences(context) if a < end and b > start)


def overlap(question: str, sentence: str) -> float:
    """Share of the question's content words found among the sentence's words; NaN without content words."""
    wanted = content_words(question)
    if not wanted:
        return math.nan
    return len(wanted & set(words(sentence))) / len(wanted)
