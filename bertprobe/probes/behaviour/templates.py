"""Template tests written in a suite: ``"{first_name} is {pos_adj}."`` filled from lexicons, seeded.

A template test is a mapping:

* ``test``, ``capability``, ``type`` (mft, inv, dir) and, by type, ``label`` / ``not_label`` (mft; for a
  multi-label model also ``labels``, ``contains``, ``not_contains``),
  ``tolerance`` (inv), ``expect: {class, direction, tolerance}`` (dir);
* ``template`` (one text) or ``templates`` (several texts filled with the same words: for mft, texts that
  must all pass; for inv and dir, the original first, then its edits);
* ``vary: LEXICON`` (inv): one case holds the same sentence once per term of that lexicon, so the case
  covers every group and the fairness report can compare the groups on identical sentences;
* ``max_cases`` (default: the probe's ``max_cases``).

``{name}`` takes a word from lexicon ``name``; ``{name2}`` another word of the same lexicon (a trailing
digit tells two slots apart). Fillers are sampled without repeats, seeded by the suite's seed and the
test's name. "a"/"an" are made to agree with the word after them, and a text starts with a capital.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from bertprobe.errors import ProbeError
from bertprobe.probes.behaviour.cases import Case, case_from_mapping
from bertprobe.registry import check_keys, did_you_mean

SLOT = re.compile(r"\{([a-z_]+?)(\d*)\}")
TEMPLATE_KEYS = ("test", "capability", "type", "template", "templates", "label", "not_label", "labels", "contains",
                 "not_contains", "tolerance", "expect", "vary", "max_cases")
ARTICLE = re.compile(r"\b([Aa])(n?) (?=(\w))")


def _articles(text: str) -> str:
    def fix(m: re.Match[str]) -> str:
        vowel = m.group(3).lower() in "aeiou"
        return m.group(1) + ("n" if vowel else "") + " "
    return ARTICLE.sub(fix, text)


PLURAL_SLOT = re.compile(r"\{([a-z_]+?)(\d*)\}s\b")


def plural(word: str) -> str:
    """English plural of a lexicon word: story -> stories, actress -> actresses, film -> films (the regular
    rules; a lexicon of irregular nouns should list its plurals)."""
    low = word.lower()
    if len(low) > 1 and low.endswith("y") and low[-2] not in "aeiou":
        return word[:-1] + "ies"
    if low.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    return word + "s"


def fill(template: str, words: dict[str, str]) -> str:
    """The template with each slot replaced (``{noun}s`` as the word's plural), articles agreeing, the first
    letter capital."""
    text = PLURAL_SLOT.sub(lambda m: plural(words[m.group(1) + m.group(2)]), template)
    text = SLOT.sub(lambda m: words[m.group(1) + m.group(2)], text)
    text = _articles(text)
    return text[:1].upper() + text[1:]


def template_slots(texts: list[str], lexicons: dict[str, list[str]], where: str) -> list[tuple[str, str]]:
    """The (lexicon, slot) pairs of ``texts``' slots, sorted; ProbeError naming ``where`` for an unknown lexicon."""
    slots = sorted({(m.group(1), m.group(1) + m.group(2)) for t in texts for m in SLOT.finditer(t)})
    for lexicon, _ in slots:
        if lexicon not in lexicons:
            raise ProbeError(f"{where}: no lexicon '{lexicon}'{did_you_mean(lexicon, list(lexicons))}; "
                             "add your own under the probe's lexicons: param")
    return slots


def case_limit(spec: dict[str, Any], default_max: int, where: str) -> int:
    """A template's ``max_cases`` (default ``default_max``); ProbeError below 1."""
    limit = int(spec.get("max_cases", default_max))
    if limit < 1:
        raise ProbeError(f"{where}: max_cases must be at least 1")
    return limit


def fillings(slots: list[tuple[str, str]], lexicons: dict[str, list[str]], rng: random.Random,
             limit: int) -> Iterator[dict[str, str]]:
    """Up to ``limit`` distinct fillings of ``slots`` (slot -> word), drawn with ``rng`` in at most ``limit * 20``
    draws; two slots of one lexicon get different words while the lexicon has enough. Lazy: a caller may draw
    from ``rng`` between fillings."""
    seen: set[tuple[str, ...]] = set()
    attempts = 0
    while len(seen) < limit and attempts < limit * 20:
        attempts += 1
        chosen: dict[str, str] = {}
        for lexicon, slot in slots:  # two slots of one lexicon get different words
            taken = {chosen[s] for lx, s in slots if lx == lexicon and s in chosen}
            options = [w for w in lexicons[lexicon] if w not in taken] or lexicons[lexicon]
            chosen[slot] = rng.choice(options)
        key = tuple(chosen[s] for _, s in slots)
        if key in seen:
            if not slots:
                break
            continue
        seen.add(key)
        yield chosen


def expand_template(spec: dict[str, Any], lexicons: dict[str, list[str]], seed: int, default_max: int,
                    where: str) -> list[Case]:
    """The cases of one template test; ProbeError naming ``where`` for a bad spec."""
    if not isinstance(spec, dict):
        raise ProbeError(f"{where}: a template test is a mapping (test, type, template, ...)")
    check_keys(spec, TEMPLATE_KEYS, where, ProbeError)
    if ("template" in spec) == ("templates" in spec):
        raise ProbeError(f"{where}: give 'template' or 'templates' (a list)")
    texts = [spec["template"]] if "template" in spec else list(spec["templates"] or [])
    if not texts or not all(isinstance(t, str) and t.strip() for t in texts):
        raise ProbeError(f"{where}: templates must be non-empty strings")
    slots = template_slots(texts, lexicons, where)
    vary = spec.get("vary")
    if vary is not None:
        if spec.get("type") != "inv" or len(texts) != 1:
            raise ProbeError(f"{where}: vary: fits an inv test with one template")
        if vary not in {s for _, s in slots}:
            raise ProbeError(f"{where}: vary: '{vary}' is no slot of the template")
    limit = case_limit(spec, default_max, where)
    rng = random.Random(f"{seed}:{spec.get('test')}")
    fixed = [(lexicon, slot) for lexicon, slot in slots if slot != vary]
    raw = {k: v for k, v in spec.items() if k in ("test", "capability", "type", "label", "not_label", "labels", "contains",
                                                  "not_contains", "tolerance", "expect")}
    cases: list[Case] = []
    for chosen in fillings(fixed, lexicons, rng, limit):
        if vary is not None:
            groups = list(lexicons[vary])
            filled = [fill(texts[0], {**chosen, vary: g}) for g in groups]
            case = case_from_mapping({**raw, "texts": filled, "id": f"t{len(cases)}"}, where, source="template")
            cases.append(replace(case, groups=tuple(groups), changed=tuple((g,) for g in groups)))
            continue
        filled = [fill(t, chosen) for t in texts]
        body = {**raw, "id": f"t{len(cases)}"}
        body.update({"text": filled[0]} if len(filled) == 1 else {"texts": filled})
        cases.append(case_from_mapping(body, where, source="template"))
    return cases

