"""Perturbations of a question-answering item that keep a character map, so that the gold answers follow
the edit (the INV tests of the behaviour probe on an extractive reader, after CheckList's SQuAD suite).

An edit is a list of replacements ``(start, end, new)`` of the context (and one of the question); ``shift``
moves a character offset through them. An answer span keeps its offsets' meaning: replacements before it
shift it, replacements inside it (a name swapped in the answer too) stretch it, and none may straddle its
boundary (the edits below never touch an answer's edge except to replace a whole name or place). Typos,
contractions and punctuation edits stay outside every gold span; an irrelevant sentence is added before or
after the context; a name or place is swapped everywhere it occurs (context, question and so answer).

Detection is the behaviour probe's: whole-word, case-insensitive matches against its lexicons (no parser).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bertprobe.probes.behaviour.perturb import WORD, Words, match_case, one_typo

Gold = tuple[tuple[str, int], ...]  # (answer text, character start) pairs, as an Example's label
Replacement = tuple[int, int, str]


@dataclass(frozen=True)
class Item:
    """A question, its context and its gold answers (``()`` when unknown)."""

    question: str
    context: str
    answers: Gold = ()
    changed: tuple[str, ...] = ()  # what an edit changed, for findings
    group: str = ""  # the origin group of a fairness case's names
    edits: tuple[Replacement, ...] | None = None  # the context replacements that made it (None: not an edit)


def apply(text: str, replacements: Sequence[Replacement]) -> str:
    """``text`` with the non-overlapping replacements made."""
    out, at = [], 0
    for start, end, new in sorted(replacements):
        if start < at:
            raise ValueError(f"overlapping replacements at {start}")
        out += [text[at:start], new]
        at = end
    return "".join(out) + text[at:]


def shift(position: int, replacements: Sequence[Replacement], side: str) -> int:
    """Where character offset ``position`` (a span's ``start`` or ``end`` side) lies after the replacements:
    moved by each replacement wholly before it; a replacement that straddles it takes it to its own new
    start (``start`` side) or end (``end`` side); an insertion at the offset goes before a span's start
    and after its end."""
    moved = 0
    for start, end, new in sorted(replacements):
        if start == end == position:  # an insertion at the offset: before a span's start, after its end
            if side == "end":
                break
            moved += len(new)
        elif end <= position:
            moved += len(new) - (end - start)
        elif start < position:
            return start + moved + (len(new) if side == "end" else 0)
        else:
            break
    return position + moved


def move_span(start: int, end: int, replacements: Sequence[Replacement]) -> tuple[int, int]:
    """A character span of the original text, moved through the replacements."""
    return shift(start, replacements, "start"), shift(end, replacements, "end")


def edited(item: Item, context: Sequence[Replacement], question: Sequence[Replacement] = (),
           changed: Sequence[str] = (), group: str = "") -> Item:
    """The item with the replacements made and its gold answers moved (their text read at the new offsets)."""
    new_context = apply(item.context, context)
    answers = []
    for text, start in item.answers:
        a, b = move_span(start, start + len(text), context)
        answers.append((new_context[a:b], a))
    return Item(apply(item.question, question), new_context, tuple(answers), tuple(changed), group,
                tuple(sorted(context)))


def gold_spans(item: Item) -> list[tuple[int, int]]:
    return [(s, s + len(t)) for t, s in item.answers]


def outside(spans: Sequence[tuple[int, int]], start: int, end: int) -> bool:
    """Whether [start, end) keeps clear of every span (touching counts as clear)."""
    return all(end <= a or start >= b for a, b in spans)


# ---- the edits ------------------------------------------------------------------------------------------
Edit = Callable[[Item, random.Random, Words], list[Item]]


def typos(count: int) -> Edit:
    """``count`` typos in context words outside every gold span."""
    def edit(item: Item, rng: random.Random, words: Words) -> list[Item]:
        spans = gold_spans(item)
        spots = [m for m in WORD.finditer(item.context) if outside(spans, m.start(), m.end())]
        out = []
        for _ in range(words.variants if spots else 0):
            reps = [(m.start(), m.end(), one_typo(m.group(), rng, words.keys))
                    for m in rng.sample(spots, min(count, len(spots)))]
            reps = [r for r in reps if r[2] != item.context[r[0]:r[1]]]
            if reps:
                out.append(edited(item, reps, changed=[r[2] for r in reps]))
        return out
    return edit


def _question_typo(item: Item, rng: random.Random, words: Words) -> list[Item]:
    spots = list(WORD.finditer(item.question))
    if not spots:
        return []
    m = rng.choice(spots)
    new = one_typo(m.group(), rng, words.keys)
    return [edited(item, (), [(m.start(), m.end(), new)], [new])] if new != m.group() else []


def _contraction_replacements(text: str, pairs: Sequence[tuple[str, str]], expand: bool,
                              spans: Sequence[tuple[int, int]]) -> list[Replacement]:
    reps: list[Replacement] = []
    for full, short in pairs:
        find, put = (short, full) if expand else (full, short)
        tag = r"(?!\s+(?:it|he|she|they|you|we|i|there)\b)" if expand else ""  # "isn't it?" is no "is not it?"
        for m in re.finditer(r"(?<!\w)" + re.escape(find) + r"(?!\w)" + tag, text, re.IGNORECASE):
            if outside(spans, m.start(), m.end()) and outside([(a, b) for a, b, _ in reps], m.start(), m.end()):
                reps.append((m.start(), m.end(), match_case(m.group(), put)))
    return reps


def contractions(expand: bool) -> Edit:
    """Contract ("is not" -> "isn't") or expand every contraction of the context outside the gold spans, and of
    the question."""
    def edit(item: Item, rng: random.Random, words: Words) -> list[Item]:
        pairs = [(a, b) for a, b in words.edits["contractions"]]
        context = _contraction_replacements(item.context, pairs, expand, gold_spans(item))
        question = _contraction_replacements(item.question, pairs, expand, [])
        if not context and not question:
            return []
        return [edited(item, context, question, [r[2] for r in (*context, *question)])]
    return edit


def _punctuation(item: Item, rng: random.Random, words: Words) -> list[Item]:
    """The question's trailing ``?`` dropped and the context's commas outside the gold spans removed."""
    question = [(m.start(), m.end(), "") for m in re.finditer(r"\s*[?.!]+\s*$", item.question)]
    spans = gold_spans(item)
    context = [(m.start(), m.end(), "") for m in re.finditer(r",", item.context)
               if outside(spans, m.start(), m.end()) and not (m.start() > 0 and item.context[m.start() - 1].isdigit())]
    if not question and not context:
        return []
    return [edited(item, context, question, ["(punctuation removed)"])]


def irrelevant(at_start: bool) -> Edit:
    """A sentence that says nothing of the question added before or after the context (one not holding a gold
    answer's text)."""
    def edit(item: Item, rng: random.Random, words: Words) -> list[Item]:
        golds = [t.lower() for t, _ in item.answers if t]
        pool = [s for s in words.lexicons["irrelevant_sentence"] if not any(g in s.lower() for g in golds)]
        out = []
        for sentence in rng.sample(pool, min(words.variants, len(pool))):
            if at_start:
                rep = (0, 0, sentence + " ")
            else:
                end = len(item.context)
                rep = (end, end, ("" if item.context[-1:].isspace() or not item.context else " ") + sentence)
            out.append(edited(item, [rep], changed=[sentence]))
        return out
    return edit


def swap_everywhere(lexicons: Sequence[str]) -> Edit:
    """The first term of the lexicons found in the context swapped for another of its list, in every
    occurrence in the context and the question (so in the answer too, where it holds the term)."""
    def edit(item: Item, rng: random.Random, words: Words) -> list[Item]:
        for name in lexicons:
            m = words.pattern(name).search(item.context)
            if m is None:
                continue
            found = m.group().lower()
            pattern = re.compile(r"(?<![\w-])" + re.escape(found) + r"(?![\w-])", re.IGNORECASE)
            spans = gold_spans(item)
            hits = list(pattern.finditer(item.context))
            if not all(outside(spans, h.start(), h.end()) or any(a <= h.start() and h.end() <= b for a, b in spans)
                       for h in hits):
                continue  # the term straddles an answer's edge: the answer could not follow it
            others = [t for t in words.lexicons[name] if t.lower() != found]
            out = []
            for new in rng.sample(others, min(words.variants, len(others))):
                context = [(h.start(), h.end(), match_case(h.group(), new)) for h in hits]
                question = [(h.start(), h.end(), match_case(h.group(), new)) for h in pattern.finditer(item.question)]
                out.append(edited(item, context, question, [new]))
            return out
        return []
    return edit


@dataclass(frozen=True)
class QAPerturbation:
    name: str
    capability: str
    edit: Edit
    variants: int = 1
    description: str = ""


def qa_catalogue() -> dict[str, QAPerturbation]:
    """Every built-in QA perturbation by name (each an INV test)."""
    items = [
        QAPerturbation("typo", "robustness", typos(1), 2, "one typo in a context word outside the answer"),
        QAPerturbation("typos_2", "robustness", typos(2), 2, "two typos in context words outside the answer"),
        QAPerturbation("question_typo", "robustness", _question_typo, 2, "one typo in the question"),
        QAPerturbation("contract", "robustness", contractions(False), 1, "is not -> isn't, outside the answer"),
        QAPerturbation("expand_contractions", "robustness", contractions(True), 1, "isn't -> is not, outside the answer"),
        QAPerturbation("punctuation", "robustness", _punctuation, 1,
                       "the question's '?' and the context's commas (outside the answer) removed"),
        QAPerturbation("irrelevant_before", "robustness", irrelevant(True), 1,
                       "an irrelevant sentence added before the context"),
        QAPerturbation("irrelevant_after", "robustness", irrelevant(False), 1,
                       "an irrelevant sentence added after the context"),
        QAPerturbation("swap_names", "names", swap_everywhere(("female_name", "male_name", "last_name")), 2,
                       "a person's name swapped everywhere (context, question, answer), within its list"),
        QAPerturbation("swap_places", "locations", swap_everywhere(("city", "country")), 2,
                       "a city or country swapped everywhere (context, question, answer)"),
    ]
    return {p.name: p for p in items}


def item_of(example: Any) -> Item:
    """The Item of a QA ``Example`` (question in ``text``, context in ``text_pair``, gold in ``label``)."""
    return Item(example.text, example.text_pair or "", tuple((str(t), int(s)) for t, s in (example.label or ())))
