"""Perturbations of the user's own data, each an ``inv`` or ``dir`` test (CheckList's perturbation functions,
rewritten on word lists and regular expressions: no spaCy model, nothing downloaded).

Each perturbation maps one text to its edited versions (none where it does not apply: a name swap needs
a name). Detection is a case-insensitive whole-word match against the lexicons, which misses what a
parser would catch: names or places not in the lists, a negation that needs the clause structure ("not
only good but..."), a number written in words, an identity term used in another sense ("black coffee").
Replacements keep the original's capitalisation (all lowercase in SST-2's tokenised text).
``perturbation_specs`` reads the suite's ``perturbations:`` against this catalogue or a section's own
(``answers_edits.qa_catalogue``, ``entities_edits.entity_catalogue``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bertprobe.errors import ProbeError
from bertprobe.probes.behaviour.cases import DirExpectation, TestType
from bertprobe.probes.behaviour.lexicon import IDENTITY_GROUPS, builtin_lexicons, edits, gender_pairs, keyboard
from bertprobe.registry import check_keys, did_you_mean


@dataclass(frozen=True)
class Edited:
    """One edited text, the words the edit changed (for findings), and its group (identity swaps)."""

    text: str
    changed: tuple[str, ...]
    group: str = ""
    source_group: str = ""  # the group of the text it was made from


@dataclass(frozen=True)
class Perturbation:
    """A named edit of texts with the test it makes: ``inv`` (the prediction must not change) or ``dir``."""

    name: str
    type: TestType
    capability: str
    edit: Callable[[str, random.Random, "Words"], list[Edited]]
    expect: DirExpectation | None = None
    variants: int = 1  # edited texts per example, where the edit allows several
    fairness: bool = False  # groups of an identity swap: the texts of a case cover every group
    description: str = ""


@dataclass
class Words:
    """The lexicons a perturbation reads, built once per run."""

    lexicons: dict[str, list[str]] = field(default_factory=builtin_lexicons)
    edits: dict[str, Any] = field(default_factory=edits)
    pairs: list[tuple[str, str]] = field(default_factory=gender_pairs)
    keys: dict[str, str] = field(default_factory=keyboard)
    variants: int = 1
    _patterns: dict[str, re.Pattern[str]] = field(default_factory=dict)

    def pattern(self, name: str) -> re.Pattern[str]:
        """A whole-word, case-insensitive pattern of every term of lexicon ``name`` (longest first)."""
        if name not in self._patterns:
            terms = sorted(self.lexicons[name], key=len, reverse=True)
            self._patterns[name] = re.compile(r"(?<![\w-])(" + "|".join(re.escape(t) for t in terms) + r")(?![\w-])",
                                              re.IGNORECASE)
        return self._patterns[name]


WORD = re.compile(r"[A-Za-z]{3,}")


def match_case(template: str, word: str) -> str:
    """``word`` capitalised as ``template`` is: UPPER, Capitalised or lower."""
    if template.isupper() and len(template) > 1:
        return word.upper()
    if template[:1].isupper():
        return word[:1].upper() + word[1:]
    if template.islower():
        return word.lower()
    return word


def _replace(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + match_case(text[start:end], new) + text[end:]


# ---- robustness: typos, case, punctuation, contractions, URLs ----------------------------------------
def one_typo(word: str, rng: random.Random, keys: dict[str, str]) -> str:
    i = rng.randrange(len(word))
    kind = rng.choice(("key", "swap", "drop")) if len(word) > 3 else rng.choice(("key", "swap"))
    if kind == "swap" and i < len(word) - 1:
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    if kind == "drop":
        return word[:i] + word[i + 1:]
    near = keys.get(word[i].lower(), "")
    if not near:
        return word[:i] + word[i + 1:]
    return word[:i] + match_case(word[i], rng.choice(near)) + word[i + 1:]


def typos(count: int) -> Callable[[str, random.Random, Words], list[Edited]]:
    def edit(text: str, rng: random.Random, words: Words) -> list[Edited]:
        spots = [m for m in WORD.finditer(text)]
        if not spots:
            return []
        out = []
        for _ in range(words.variants):
            new, changed = text, []
            for m in sorted(rng.sample(spots, min(count, len(spots))), key=lambda m: -m.start()):
                typo = one_typo(m.group(), rng, words.keys)
                new = new[:m.start()] + typo + new[m.end():]
                changed.append(typo)
            if new != text:
                out.append(Edited(new, tuple(changed)))
        return out
    return edit


def _whole(fn: Callable[[str], str]) -> Callable[[str, random.Random, Words], list[Edited]]:
    def edit(text: str, rng: random.Random, words: Words) -> list[Edited]:
        new = fn(text)
        return [Edited(new, ("(the whole text)",))] if new != text else []
    return edit


def _strip_punctuation(text: str, rng: random.Random, words: Words) -> list[Edited]:
    new = re.sub(r"[\s.!?,;:]+$", "", text)
    return [Edited(new, (text[len(new):].strip(),))] if new != text and new else []


def _add_punctuation(text: str, rng: random.Random, words: Words) -> list[Edited]:
    base = re.sub(r"[\s.!?]+$", "", text)
    marks = [m for m in words.edits["trailing_marks"] if base + m != text]
    return [Edited(base + m, (m,)) for m in rng.sample(marks, min(words.variants, len(marks)))]


def _contraction_pairs(words: Words) -> list[tuple[str, str]]:
    return [(a, b) for a, b in words.edits["contractions"]]


def _expand(text: str, rng: random.Random, words: Words) -> list[Edited]:
    new, changed = text, []
    for full, short in _contraction_pairs(words):
        pattern = re.compile(r"(?<!\w)" + re.escape(short).replace("'", r" ?'") + r"(?!\w)", re.IGNORECASE)
        if pattern.search(new):
            new = pattern.sub(lambda m: match_case(m.group(), full), new)
            changed.append(full)
    new = re.sub(r"(\w) n't\b", r"\1 not", new)  # PTB-tokenised text (SST-2): "does n't"
    if new != text and not changed:
        changed.append("not")
    return [Edited(new, tuple(changed))] if new != text else []


def _contract(text: str, rng: random.Random, words: Words) -> list[Edited]:
    new, changed = text, []
    for full, short in _contraction_pairs(words):
        pattern = re.compile(r"(?<!\w)" + re.escape(full) + r"(?!\w)", re.IGNORECASE)
        if pattern.search(new):
            new = pattern.sub(lambda m: match_case(m.group(), short), new)
            changed.append(short)
    return [Edited(new, tuple(changed))] if new != text else []


def _append(kind: str, at_start: bool) -> Callable[[str, random.Random, Words], list[Edited]]:
    def edit(text: str, rng: random.Random, words: Words) -> list[Edited]:
        picks = rng.sample(words.edits[kind], min(words.variants, len(words.edits[kind])))
        return [Edited(f"{p} {text}" if at_start else f"{text.rstrip()} {p}", (p,)) for p in picks]
    return edit


# ---- swaps: names, places, numbers, identity terms ------------------------------------------------------
def swap(lexicon: str, all_terms: bool = False) -> Callable[[str, random.Random, Words], list[Edited]]:
    """Replace the first term of ``lexicon`` found in the text by others of the same list (every other
    term with ``all_terms``: a fairness case then holds the same sentence for every group)."""

    def edit(text: str, rng: random.Random, words: Words) -> list[Edited]:
        m = words.pattern(lexicon).search(text)
        if m is None:
            return []
        found = m.group().lower()
        terms = words.lexicons[lexicon]
        source = next(t for t in terms if t.lower() == found)  # the list's own spelling names the group
        others = [t for t in terms if t.lower() != found]
        picks = others if all_terms else rng.sample(others, min(words.variants, len(others)))
        return [Edited(_replace(text, m.start(), m.end(), t), (t,), t, source) for t in picks]

    return edit


def _first_names(text: str, rng: random.Random, words: Words) -> list[Edited]:
    for group in ("female_name", "male_name"):  # a swap keeps the gender
        out = swap(group)(text, rng, words)
        if out:
            return out
    return []


def _full_names(text: str, rng: random.Random, words: Words) -> list[Edited]:
    first = "|".join(re.escape(n) for n in words.lexicons["first_name"])
    last = "|".join(re.escape(n) for n in words.lexicons["last_name"])
    m = re.search(rf"\b({first}) ({last})\b", text, re.IGNORECASE)
    if m is None:
        return []
    out = []
    for _ in range(words.variants):
        new = f"{rng.choice(words.lexicons['first_name'])} {rng.choice(words.lexicons['last_name'])}"
        if new.lower() != m.group().lower():
            out.append(Edited(_replace(text, m.start(), m.end(), new), (new,)))
    return out


NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")


def _numbers(text: str, rng: random.Random, words: Words) -> list[Edited]:
    m = NUMBER.search(text)
    if m is None:
        return []
    value = float(m.group())
    out = []
    for _ in range(words.variants):
        new = value * rng.uniform(0.8, 1.2) if value else float(rng.randint(1, 9))
        shown = f"{new:.{len(m.group().split('.')[1])}f}" if "." in m.group() else str(max(0, round(new)))
        if shown != m.group():
            out.append(Edited(text[:m.start()] + shown + text[m.end():], (shown,)))
    return out


def _gender(text: str, rng: random.Random, words: Words) -> list[Edited]:
    """Swap every gendered word (he <-> she, father <-> mother...): one edited text, its group the other gender."""
    table = {}
    for male, female in words.pairs:
        table.setdefault(male, female)
        table.setdefault(female, male)
    pattern = re.compile(r"(?<![\w-])(" + "|".join(re.escape(w) for w in sorted(table, key=len, reverse=True)) + r")(?![\w-])",
                         re.IGNORECASE)
    hits = list(pattern.finditer(text))
    if not hits:
        return []
    males = {m for m, _ in words.pairs}
    first = hits[0].group().lower()
    new = pattern.sub(lambda m: match_case(m.group(), table[m.group().lower()]), text)
    changed = tuple(table[h.group().lower()] for h in hits)
    source = "male" if first in males else "female"
    return [Edited(new, changed, "female" if source == "male" else "male", source)]


# ---- directional edits ----------------------------------------------------------------------------------
def _add_phrase(kind: str) -> Callable[[str, random.Random, Words], list[Edited]]:
    def edit(text: str, rng: random.Random, words: Words) -> list[Edited]:
        phrases = words.lexicons[kind]
        base = text.rstrip()
        joiner = " " if re.search(r"[.!?]$", base) else ". "
        return [Edited(f"{base}{joiner}{p}", (p,)) for p in rng.sample(phrases, min(words.variants, len(phrases)))]
    return edit


def _sentiment_adjectives(words: Words) -> re.Pattern[str]:
    terms = words.lexicons["pos_adj"] + words.lexicons["neg_adj"]
    return re.compile(r"(?<![\w-])(" + "|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True)) + r")(?![\w-])",
                      re.IGNORECASE)


def _modify(kind: str) -> Callable[[str, random.Random, Words], list[Edited]]:
    """Put an intensifier ("very") or a reducer ("somewhat") before the first sentiment adjective."""

    def edit(text: str, rng: random.Random, words: Words) -> list[Edited]:
        m = _sentiment_adjectives(words).search(text)
        if m is None:
            return []
        before = [w.lower() for w in text[:m.start()].split()]
        if before and before[-1] in {w.lower() for w in words.lexicons["intensifier"] + words.lexicons["reducer"]}:
            return []  # already modified
        negations = {w.lower() for w in words.edits["negation_words"]}
        if any(w in negations or w.endswith("n't") for w in before[-3:]):
            return []  # "isn't bad" -> "isn't very bad" says something else
        adjective = m.group()
        sentence_start = adjective[:1].isupper() and not adjective.isupper()
        article = before[-1] if before and before[-1] in ("a", "an") else ""

        def insert(word: str) -> str:
            if sentence_start:  # "Good fun" -> "Very good fun"
                return text[:m.start()] + word[:1].upper() + word[1:] + " " + adjective.lower() + text[m.end():]
            head = text[:m.start()]
            if article:  # "a charming" -> "an extremely charming"
                cut = head.rstrip()[: -len(article)]
                head = cut + ("an" if word[0].lower() in "aeiou" else "a") + " "
            return head + word + " " + text[m.start():]

        choices = [w for w in words.lexicons[kind] if not (article and w.split()[0] in ("a", "an"))]
        picks = rng.sample(choices, min(words.variants, len(choices)))
        return [Edited(insert(p), (p,)) for p in picks]

    return edit


def _negate(text: str, rng: random.Random, words: Words) -> list[Edited]:
    """"is good" -> "is not good": a copula followed (at most one word between) by a sentiment adjective."""
    verbs = "|".join(words.edits["negatable"])
    adjectives = "|".join(re.escape(t) for t in words.lexicons["pos_adj"] + words.lexicons["neg_adj"])
    m = re.search(rf"\b({verbs})\b(?! not\b| n't\b)(\s+\w+)?\s+({adjectives})\b", text, re.IGNORECASE)
    if m is None:
        return []
    at = m.end(1)
    return [Edited(text[:at] + " not" + text[at:], ("not",))]


def catalogue() -> dict[str, Perturbation]:
    """Every built-in perturbation by name."""
    inv = "inv"
    items = [
        Perturbation("typo", inv, "robustness", typos(1), variants=2, description="one typo: an adjacent key, a swap or a drop"),
        Perturbation("typos_2", inv, "robustness", typos(2), variants=2, description="two typos"),
        Perturbation("uppercase", inv, "robustness", _whole(str.upper), description="the whole text in capitals"),
        Perturbation("lowercase", inv, "robustness", _whole(str.lower), description="the whole text in lowercase"),
        Perturbation("strip_punctuation", inv, "robustness", _strip_punctuation, description="trailing punctuation removed"),
        Perturbation("add_punctuation", inv, "robustness", _add_punctuation, description="a trailing ! or . added"),
        Perturbation("expand_contractions", inv, "robustness", _expand, description="isn't -> is not"),
        Perturbation("contract", inv, "robustness", _contract, description="is not -> isn't"),
        Perturbation("add_url", inv, "robustness", _append("urls", False), description="a URL appended"),
        Perturbation("add_handle", inv, "robustness", _append("handles", True), description="an @handle prepended"),
        Perturbation("first_names", inv, "names", _first_names, variants=3, description="a first name swapped within its gender"),
        Perturbation("full_names", inv, "names", _full_names, variants=3, description="a full name swapped"),
        Perturbation("cities", inv, "locations", swap("city"), variants=3, description="a city swapped"),
        Perturbation("countries", inv, "locations", swap("country"), variants=3, description="a country swapped"),
        Perturbation("numbers", inv, "numbers", _numbers, variants=2, description="a number changed by up to 20%"),
        *[Perturbation(group, inv, "fairness", swap(group, all_terms=True), fairness=True,
                       description=f"the {group.replace('_', ' ')} term swapped for every other one")
          for group in IDENTITY_GROUPS],
        Perturbation("gender", inv, "fairness", _gender, fairness=True, description="gendered words swapped (he <-> she)"),
        Perturbation("add_positive", "dir", "vocabulary", _add_phrase("pos_phrase"),
                     DirExpectation("positive", "not_down"), variants=2, description="a clearly positive phrase appended"),
        Perturbation("add_negative", "dir", "vocabulary", _add_phrase("neg_phrase"),
                     DirExpectation("negative", "not_down"), variants=2, description="a clearly negative phrase appended"),
        Perturbation("intensify", "dir", "intensifiers", _modify("intensifier"), DirExpectation(None, "not_down"),
                     variants=2, description="'very' before a sentiment adjective: no less sure"),
        Perturbation("reduce", "dir", "intensifiers", _modify("reducer"), DirExpectation(None, "not_up"),
                     variants=2, description="'somewhat' before a sentiment adjective: no more sure"),
        Perturbation("negate", "dir", "negation", _negate, DirExpectation(None, "not_up"),
                     description="'is good' -> 'is not good': the predicted class no more likely"),
    ]
    return {p.name: p for p in items}


PERTURBATION_KEYS = ("name", "variants", "class", "direction", "tolerance", "field")


def perturbation_specs(raw: tuple[Any, ...] | None, known: dict[str, Any] | None = None,
                       keys: tuple[str, ...] = PERTURBATION_KEYS) -> list[tuple[Any, dict[str, Any]]]:
    """The chosen perturbations with their options (None: the whole catalogue ``known``), checked."""
    known = catalogue() if known is None else known
    chosen = list(known) if raw is None else list(raw)
    out = []
    for i, item in enumerate(chosen):
        options = {"name": item} if isinstance(item, str) else item
        if not isinstance(options, dict) or "name" not in options:
            raise ProbeError(f"perturbations[{i}]: a name or a mapping with a name")
        check_keys(options, keys, f"perturbations[{i}]", ProbeError)
        name = options["name"]
        if name not in known:
            raise ProbeError(f"perturbations[{i}]: no perturbation '{name}'{did_you_mean(str(name), list(known))}; "
                             f"known: {', '.join(known)}")
        out.append((known[name], options))
    return out
