"""Rules that turn a question into an AddOneSent-style distractor (Jia & Liang 2017), without a parser.

A distractor is a declarative sentence made from the question, with its entities, numbers and dates changed,
that states a *fake* answer of the answer's type: "When did Tesla move to New York?" (gold 1884) becomes
"Tesla did move to Lagos in 1887." Steps, each a rule over words (no tagger, no parse):

1. the form: an optional leading preposition ("In what year..."), the question word (what, which, who, whom,
   when, where, how many, how much), an optional noun phrase after it ("What year", "How many teams") and an
   auxiliary (is/was/are/were, did/does/do, has/have/had, can/could/will/would/should/may/might/must), or none
   for a subject question ("Who won Super Bowl 50?", "How many people live in Paris?");
2. the declarative order: the subject of an auxiliary question is taken as a capitalised run (with a leading
   determiner and ``of`` inside: "the University of Chicago"), or a determiner and one word ("the team"); a
   *be* question with a participle ("When was the treaty signed?") puts the auxiliary before it ("The treaty was
   signed in 1921."), a *do* question keeps the emphatic auxiliary ("Tesla did move..."), so no verb is inflected;
   the fake answer goes where the question word stood (the subject's place, or the end, after ``in`` for
   when/where unless the question already ends in a preposition);
3. changes: numbers and years moved a little, first names, surnames, cities and countries swapped within their
   lexicon (the package lexicons of the behaviour probe, provenance in their README), a few antonyms
   (first/last, largest/smallest...), and any other capitalised run ("Super Bowl", "Tesla") swapped for a
   proper name of as many words from the lexicons (Jia & Liang take the nearest GloVe word instead); a question
   with nothing to change is not covered (the sentence would restate the question's own facts);
4. the fake answer, of the gold's type: its numbers moved (a year by 1-9, another number by 10-30%), a
   person name, a city, a country, a month or an organisation from the lexicons, or a number word; for a common
   noun phrase ("induction motor"), another question's gold answer of the same question word and shape (the
   data's own answers: Jia & Liang drew such fakes from fixed lists per answer type).

A question none of the rules fits is *uncovered*, with its reason, never guessed. Every distractor is checked: the
fake answer is another answer than every gold (neither contains the other; a number answer shares no number with
it; any other shares no token: SQuAD F1 0), and the sentence does not contain a gold answer.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from bertprobe.probes.attacks.lexicons import lexicon_file
from bertprobe.tasks.squad_metrics import f1_one, normalize_answer

BE = frozenset({"is", "was", "are", "were"})
DO = frozenset({"did", "does", "do"})
OTHER_AUX = frozenset({"has", "have", "had", "can", "could", "will", "would", "should", "may", "might", "must"})
AUX = BE | DO | OTHER_AUX
PREPOSITIONS = frozenset("in on at during by from to for of after before since until with under into through within "
                         "about between among near against across over".split())
DETERMINERS = frozenset("the a an his her its their this that these those our your my".split())
IRREGULAR = frozenset(
    "born built made written given known held won taken begun chosen seen done shown sold led paid found lost brought "
    "bought thought taught caught sent spent kept left meant met read run set put cut hit let become come gone drawn "
    "driven eaten fallen flown forgotten frozen grown hidden ridden risen spoken stolen sworn thrown worn struck stood "
    "understood told sung broken beaten bitten laid said heard felt fought sought wrote became began came gave took went "
    "saw grew knew rose ran wore drew fell flew ate spoke stole threw chose broke drove rode sang swam split spread "
    "shot fed dug hung sat slept won lit".split())
NOT_PARTICIPLES = frozenset("hundred need speed seed breed feed bleed indeed red bed shed wed".split())
ANTONYMS = {"first": "last", "last": "first", "largest": "smallest", "smallest": "largest", "biggest": "smallest",
            "highest": "lowest", "lowest": "highest", "most": "least", "least": "most", "earliest": "latest",
            "latest": "earliest", "oldest": "newest", "newest": "oldest", "before": "after", "after": "before",
            "north": "south", "south": "north", "east": "west", "west": "east", "best": "worst", "worst": "best",
            "longest": "shortest", "shortest": "longest", "more": "fewer", "fewer": "more", "early": "late",
            "late": "early", "older": "younger", "younger": "older", "larger": "smaller", "smaller": "larger",
            "northern": "southern", "southern": "northern", "eastern": "western", "western": "eastern"}
NUMBER_WORDS = ("one two three four five six seven eight nine ten eleven twelve twenty hundred thousand million "
                "billion").split()
STOP = frozenset("the a an i of and or in on at to".split())
MONTHS = ("January February March April May June July August September October November December").split()
DATE_NOUNS = frozenset({"year", "years", "century", "decade", "date", "month", "day"})
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_EDGE = re.compile(r"^([\"'(“‘]*)(.*?)((?:'s|’s)?[\"'),.;:!?”’]*)$")


@dataclass(frozen=True)
class Distractor:
    """A sentence to insert, the fake answer it states, its form (``who: subject``, ``when: be``...) and the words
    it changed from the question."""

    sentence: str
    fake: str
    form: str
    changed: tuple[str, ...]


@dataclass(frozen=True)
class Lexicon:
    """The word lists the rules swap within and draw fake answers from."""

    first: tuple[str, ...]
    last: tuple[str, ...]
    cities: tuple[str, ...]
    countries: tuple[str, ...]
    organisations: tuple[str, ...]

    @property
    def proper(self) -> tuple[str, ...]:
        """Every proper name of the lists: what an unknown capitalised run is swapped for."""
        return self.last + self.cities + self.countries + self.organisations


@lru_cache(maxsize=1)
def package_lexicon() -> Lexicon:
    """The behaviour probe's lexicons (package data; provenance in ``probes/behaviour/lexicons/README.md``)."""
    names, orgs = lexicon_file("first_names"), lexicon_file("organisations")
    return Lexicon(tuple(names["female"]) + tuple(names["male"]), tuple(lexicon_file("last_names")),
                   tuple(lexicon_file("cities")), tuple(lexicon_file("countries")),
                   tuple(orgs["companies"]) + tuple(orgs["institutions"]))


def _bare(word: str) -> tuple[str, str, str]:
    """``word`` as (leading punctuation, core, trailing punctuation)."""
    m = _EDGE.match(word)
    return (m.group(1), m.group(2), m.group(3)) if m else ("", word, "")


def _is_participle(word: str) -> bool:
    core = _bare(word)[1]
    low = core.lower()
    return core == low and (low in IRREGULAR or (len(low) > 3 and low.endswith("ed") and low not in NOT_PARTICIPLES))


def _capitalised(word: str) -> bool:
    core = _bare(word)[1]
    return bool(core) and (core[0].isupper() or core[0].isdigit())


def _subject_end(rest: list[str]) -> int:
    """Where the subject of an auxiliary question ends in ``rest`` (the words after the auxiliary): a capitalised
    run (a leading determiner, ``of``/``and``/``the`` inside it), else a determiner and one word, else one word."""
    k = 0
    if k < len(rest) and rest[k].lower() in DETERMINERS:
        k += 1
        ahead = k
        while ahead < min(len(rest), k + 3) and not _capitalised(rest[ahead]):
            ahead += 1
        if ahead < len(rest) and _capitalised(rest[ahead]):
            k = ahead  # "the first Super Bowl": adjectives before a name
    start = k
    while k < len(rest) and (_capitalised(rest[k]) or (k > start and rest[k].lower() in ("of", "and", "the", "de")
                                                       and k + 1 < len(rest) and _capitalised(rest[k + 1]))):
        k += 1
    if k == start:
        k += 1  # a determiner and one word ("the team"), or one word
    if k < len(rest) and rest[k].lower() == "of" and k + 1 < len(rest):
        k += 1  # "the capital of France": the of-phrase
        if rest[k].lower() in DETERMINERS and k + 1 < len(rest):
            k += 1
        while k < len(rest) and _capitalised(rest[k]):
            k += 1
        if k < len(rest) and not _capitalised(rest[k - 1]):
            k += 1
    return min(k, len(rest))


def _shift_number(text: str, rng: random.Random) -> str:
    """A different number near ``text`` ("1884" -> "1887"; "24" -> "27"; "3.5" -> "3.9"), its format kept."""
    plain = text.replace(",", "")
    if "." in plain:
        value = float(plain)
        return f"{value + rng.choice([-1, 1]) * max(0.1, round(abs(value) * rng.uniform(0.1, 0.3), 1)):.{len(plain.split('.')[1])}f}"
    value = int(plain)
    if 1000 <= value <= 2100 and len(plain) == 4:  # a year
        step = rng.randint(1, 9) * rng.choice([-1, 1])
    else:
        step = max(1, round(value * rng.uniform(0.1, 0.3))) * (rng.choice([-1, 1]) if value > 1 else 1)
    new = max(0, value + step)
    if new == value:
        new = value + 1
    return f"{new:,}" if "," in text else str(new)


def _swap(word: str, choices: tuple[str, ...], rng: random.Random) -> str:
    others = [c for c in choices if c != word]
    return rng.choice(others) if others else word


def change_words(words: list[str], lex: Lexicon, rng: random.Random) -> tuple[list[str], list[str]]:
    """``words`` with their numbers, years, names, places and a few antonyms changed, and the words changed."""
    out, changed = list(words), []
    countries = {c.lower(): c for c in lex.countries}
    k = 0
    while k < len(out):
        lead, core, trail = _bare(out[k])
        pair = f"{core} {_bare(out[k + 1])[1]}" if k + 1 < len(out) else ""
        new = None
        if pair and pair in lex.countries:  # "United States"
            out[k : k + 2] = [lead + _swap(pair, lex.countries, rng) + _bare(out[k + 1])[2]]
            changed.append(pair)
            k += 1
            continue
        if _NUMBER.fullmatch(core):
            new = _shift_number(core, rng)
        elif core.lower() in NUMBER_WORDS[:12]:
            new = _swap(core.lower(), tuple(NUMBER_WORDS[:12]), rng)
        elif core in lex.first:
            new = _swap(core, lex.first, rng)
        elif core in lex.last:
            new = _swap(core, lex.last, rng)
        elif core in lex.cities:
            new = _swap(core, lex.cities, rng)
        elif core.lower() in countries and core[:1].isupper():
            new = _swap(countries[core.lower()], lex.countries, rng)
        elif core in MONTHS:
            new = _swap(core, tuple(MONTHS), rng)
        elif core.lower() in ANTONYMS and core.islower():
            new = ANTONYMS[core.lower()]
        elif core[:1].isupper() and core.lower() not in STOP:
            run = k + 1  # an unknown capitalised run ("Tesla", "Super Bowl"): another proper name of its length
            while run < len(out) and _bare(out[run])[1][:1].isupper() and (
                    _bare(out[run - 1])[2] == "" or len(_bare(out[run - 1])[1]) == 1):  # "Alfred S. Brown"
                run += 1
            phrase = " ".join(_bare(w)[1] for w in out[k:run])
            pool = tuple(p for p in lex.proper if len(p.split()) == run - k and p != phrase) or lex.last
            out[k:run] = [lead + rng.choice(pool) + _bare(out[run - 1])[2]]
            changed.append(phrase)
            k += 1
            continue
        if new is not None and new != core:
            out[k] = lead + new + trail
            changed.append(core)
        k += 1
    return out, changed


def fake_answer(gold: str, wh: str, lex: Lexicon, rng: random.Random, pool: Sequence[str] = ()) -> str | None:
    """A fake answer of ``gold``'s type; for a common noun phrase ("induction motor"), another question's gold of
    the same question word and shape (lower case, as many words, give or take one) from ``pool``; None when
    nothing fits."""
    words = gold.split()
    if _NUMBER.search(gold):
        return _NUMBER.sub(lambda m: _shift_number(m.group(0), rng), gold)
    if any(w.strip(",.") in MONTHS for w in words):
        return " ".join(_swap(w, tuple(MONTHS), rng) if w in MONTHS else w for w in words)
    low = gold.lower().strip()
    if low in NUMBER_WORDS:
        return _swap(low, tuple(NUMBER_WORDS[:12]), rng)
    if gold in lex.countries:
        return _swap(gold, lex.countries, rng)
    if gold in lex.cities or (wh == "where" and gold[:1].isupper()):
        return _swap(gold, lex.cities, rng)
    if gold in lex.organisations:
        return _swap(gold, lex.organisations, rng)
    if any(w in lex.first or w in lex.last for w in words) or (wh == "who" and gold[:1].isupper()):
        return f"{rng.choice(lex.first)} {rng.choice(lex.last)}"
    if wh in ("what", "which") and all(w[:1].isupper() for w in words if w.lower() not in ("of", "the", "and")):
        return _swap(gold, lex.organisations, rng)
    shaped = [p for p in pool if p[:1].islower() == gold[:1].islower() and abs(len(p.split()) - len(words)) <= 1
              and _differs(p, gold)]
    return rng.choice(shaped) if shaped else None


def _finish(words: list[str]) -> str:
    text = " ".join(w for w in words if w).strip().rstrip(",;:")
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _question(question: str) -> tuple[str | None, list[str], str]:
    """(leading preposition or None, the words from the question word on, the question word) of ``question``."""
    words = question.strip().rstrip("?").strip().split()
    lead = None
    if len(words) > 1 and words[0].lower() in PREPOSITIONS and words[1].lower() in ("what", "which", "whom"):
        lead, words = words[0].lower(), words[1:]
    wh = words[0].lower() if words else ""
    wh = {"whom": "who"}.get(wh, wh)
    if wh == "how" and len(words) > 1 and words[1].lower() in ("many", "much"):
        wh = "how " + words[1].lower()
        words = [" ".join(words[:2]), *words[2:]]
    return lead, words, wh


def build(question: str, golds: list[str], lex: Lexicon, rng: random.Random, tries: int = 5,
          pool: Sequence[str] = ()) -> Distractor | str:
    """The distractor for ``question`` (whose gold answers are ``golds``), or the reason no rule covers it;
    ``pool``: other questions' gold answers of the same question word (fake answers for common noun phrases)."""
    lead, words, wh = _question(question)
    if wh not in ("what", "which", "who", "when", "where", "how many", "how much"):
        return f"question word: {wh if wh in ('why', 'how', 'whose') else 'other'}"
    if not golds:
        return "unanswerable question"
    j = next((i for i in range(1, min(len(words), 7)) if words[i].lower() in AUX), None)
    np = words[1:j] if j is not None else []
    if j is not None and (wh in ("when", "where", "who") and j != 1):
        j = None  # "Who else did ...": not a form the rules know
    if j is None:
        subject_form = (wh in ("who", "how many", "how much") and len(words) > 1) or (
            wh in ("what", "which") and len(words) > 2 and (_is_participle(words[1]) or _is_participle(words[2])
                                                            or words[1].lower().endswith("s")))
        if not subject_form:
            return "no auxiliary and no subject-question verb"
        skip = 2 if wh in ("what", "which") and not _is_participle(words[1]) and not words[1].lower().endswith("s") else 1
        np = words[1:skip] if wh in ("what", "which") else []
        rest = words[skip:] if wh not in ("how many", "how much") else words[1:]
        form = f"{wh}: subject"
    else:
        rest, aux = words[j + 1:], words[j].lower()
        if not rest:
            return "nothing after the auxiliary"
        form = f"{wh}: {'be' if aux in BE else 'do' if aux in DO else 'aux'}"
    for _ in range(tries):
        gold = golds[0]
        fake = fake_answer(gold, wh.split()[0], lex, rng, pool)
        if fake is None:
            return "no fake answer of the gold's type"
        changed_rest, changed = change_words(rest, lex, rng)
        if not changed:
            return "nothing to change (no name, place, number, date or antonym)"
        dated = wh == "when" or any(w.lower() in DATE_NOUNS for w in np)
        if j is None:
            sentence = _finish([fake, *changed_rest])  # the fake answer in the subject's place
        else:
            sentence = _finish(_declarative(changed_rest, aux, wh, lead, np, fake, dated))
        norm = f" {normalize_answer(sentence)} "
        if all(_differs(fake, g) for g in golds) and not any(
                f" {normalize_answer(g)} " in norm for g in golds if normalize_answer(g)):
            return Distractor(sentence, fake, form, tuple(changed))
    return "the distractor would hold the gold answer"


def _differs(fake: str, gold: str) -> bool:
    """Whether ``fake`` is another answer than ``gold``: neither holds the other once normalised, and for a
    number they share no number ("3 million" against "2 million" is another answer; "2" against "2 million" not)."""
    f, g = normalize_answer(fake), normalize_answer(gold)
    if not f or f" {f} " in f" {g} " or f" {g} " in f" {f} ":
        return False
    numbers = set(_NUMBER.findall(g))
    if numbers:
        return not numbers & set(_NUMBER.findall(f))
    return f1_one(fake, gold) == 0


def _declarative(rest: list[str], aux: str, wh: str, lead: str | None, np: list[str], fake: str,
                 dated: bool) -> list[str]:
    """The words of the declarative sentence for an auxiliary question (see the module docstring)."""
    if aux in BE:
        k = next((i for i in range(1, len(rest)) if _is_participle(rest[i])), None)
        subject, tail = (rest[:k], rest[k:]) if k is not None else (rest, [])
    else:
        k = _subject_end(rest)
        subject, tail = rest[:k], rest[k:]
    low = [w.lower() for w in tail]
    ends_in_preposition = bool(tail) and low[-1] in PREPOSITIONS
    stranded = next((i + 1 for i in range(len(tail) - 1) if low[i] in PREPOSITIONS and low[i + 1] in PREPOSITIONS),
                    None)  # "move to in 1880": the answer's preposition is stranded before another phrase
    at = len(tail)
    if wh in ("how many", "how much"):
        answer = [fake, *np]
    elif lead:
        answer = [lead, fake]
    elif (wh in ("when", "where") or dated) and not ends_in_preposition and stranded is None:
        answer = ["in", fake]
    else:
        answer = [fake]
        if stranded is not None:
            at = stranded
        elif not ends_in_preposition and len(tail) > 1 and low[1] in PREPOSITIONS and wh in ("what", "which", "who"):
            at = 1  # the object right after the verb: "did explore the mountains in Tominaj"
    if not tail and aux in BE and wh in ("what", "which", "who") and not lead:
        return [*subject, aux, *answer]  # "The capital of France is Lyon."
    return [*subject, aux, *tail[:at], *answer, *tail[at:]]


def insert(context: str, sentence: str, at: str) -> tuple[str, int, int]:
    """``context`` with ``sentence`` inserted ``at`` its ``end`` or ``start`` (a space between), and the
    sentence's first and end characters in the new context; gold starts move by the first value's shift
    (``shift``)."""
    if at == "start":
        return f"{sentence} {context}", 0, len(sentence)
    sep = "" if not context or context[-1].isspace() else " "
    return f"{context}{sep}{sentence}", len(context) + len(sep), len(context) + len(sep) + len(sentence)


def shift(at: str, sentence: str) -> int:
    """How far the gold answers move when ``sentence`` is inserted ``at`` the start (0 at the end)."""
    return len(sentence) + 1 if at == "start" else 0


def moved_golds(label: Any, offset: int) -> tuple[tuple[str, int], ...]:
    """The gold answers with their starts moved by ``offset``."""
    return tuple((text, start + offset) for text, start in (label or ()))
