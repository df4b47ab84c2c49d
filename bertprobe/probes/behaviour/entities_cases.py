"""Behavioural cases of a token classifier (NER): JSONL lines, templates with entity slots, and the verdicts.

The JSONL interchange of ``cases.py`` extended with words and tags (one example per kind):

    {"test": "names in lists", "type": "mft", "tokens": ["Ask", "Maria", "Lopez", "."],
     "tags": ["O", "B-PER", "I-PER", "O"]}
    {"test": "lower case", "type": "inv", "tokens": [["Ask", "Maria", "."], ["ask", "maria", "."]]}
    {"test": "split contraction", "type": "inv", "tokens": [["Ed", "isn't", "here"], ["Ed", "is", "not", "here"]],
     "maps": [[[0, 1], [1, 3], [3, 4]]]}

``mft``: the predicted entities of every text equal its ``tags`` (any scheme; one list of tags for one
text, a list per text for several). ``inv``: the first text is the original; the entities the model
predicts on each edited text must equal those it predicts on the original, carried through the word map
(``maps``: one per edited text, each original word's ``[a, b)`` range of new words; omitted, the texts
must have as many words and the map is the identity). ``tags`` on an inv case are optional (gold, for
the entity F1 before and after). A ``dir`` case does not apply to a token classifier.

Templates: ``{first_name} {last_name} moved to {city} to work for {company}.``: words are split at spaces
and punctuation, each slot is filled from its lexicon, and the expected entities are the filled slots:
a slot's type comes from ``entities: {slot: TYPE}`` or its lexicon (names and surnames: person; city,
country: place; company, organisation: organisation), and adjacent slots of one type make one entity.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from bertprobe.errors import DataError, ProbeError
from bertprobe.probes.behaviour.entities_edits import Span, Tagged, WordMap, follow, identity_map
from bertprobe.registry import check_keys, did_you_mean

KEYS = ("test", "capability", "type", "tokens", "tags", "maps", "id")
TEMPLATE_KEYS = ("test", "capability", "type", "template", "entities", "max_cases")
SLOT_FAMILY = {"first_name": "person", "female_name": "person", "male_name": "person", "last_name": "person",
               "surname": "person", "name": "person", "city": "place", "country": "place", "company": "organisation",
               "organisation": "organisation", "organization": "organisation"}
TOKEN = re.compile(r"\{[a-z_]+\d*\}|[\w'&-]+|[^\w\s]")
SLOT = re.compile(r"^\{([a-z_]+?)(\d*)\}$")


@dataclass(frozen=True)
class EntityCase:
    """One NER case: ``mft`` (every sentence's predicted entities equal its gold ones) or ``inv`` (the first
    sentence is the original; each edit's predictions equal the original's, carried through its map)."""

    test: str
    type: Literal["mft", "inv"]
    sentences: tuple[Tagged, ...]
    capability: str = ""
    id: str = ""
    source: str = ""
    has_gold: bool = True

    @property
    def groups(self) -> tuple[str, ...]:
        return tuple(s.group for s in self.sentences)


@dataclass(frozen=True)
class EntityVerdict:
    """Passed; the text that decided it; the entities expected there and those predicted."""

    passed: bool
    worst: int
    expected: tuple[Span, ...]
    observed: tuple[Span, ...]


def judge_entities(case: EntityCase, predicted: Sequence[Sequence[Span]]) -> EntityVerdict:
    """The verdict of one case from the predicted entities of each of its sentences."""
    if case.type == "mft":
        expected = [tuple(sorted(s.gold)) for s in case.sentences]
    else:
        original = tuple(sorted(predicted[0]))
        expected = [original] + [follow(original, s.wmap or identity_map(len(s.words))) for s in case.sentences[1:]]
    ok = [set(e) == set(p) for e, p in zip(expected, predicted)]
    start = 0 if case.type == "mft" else 1
    worst = next((i for i in range(start, len(ok)) if not ok[i]), start if start < len(ok) else 0)
    return EntityVerdict(all(ok), worst, tuple(expected[worst]), tuple(sorted(predicted[worst])))


# ---- JSONL ---------------------------------------------------------------------------------------------
def _words(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(w, str) and w.strip() for w in value):
        raise DataError(f"{where}: expected a non-empty list of words, got {value!r}")
    return tuple(value)


def entity_case_from_mapping(raw: Any, where: str, decode: Any, source: str = "") -> EntityCase:
    """An EntityCase from one JSON object; ``decode(tags, where)`` turns a tag list into spans (and checks
    the tags against the model's)."""
    if not isinstance(raw, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    check_keys(raw, KEYS, where, DataError)
    test, kind = raw.get("test"), raw.get("type")
    if not isinstance(test, str) or not test.strip():
        raise DataError(f"{where}: key 'test' must name the test (a non-empty string)")
    if kind == "dir":
        raise DataError(f"{where}: a dir case does not apply to a token-classification model; use mft or inv")
    if kind not in ("mft", "inv"):
        raise DataError(f"{where}: key 'type' must be mft or inv for a token-classification model, got {kind!r}")
    if "tokens" not in raw:
        raise DataError(f"{where}: a token-classification case gives its words as 'tokens' (and 'tags' for an mft case)")
    tokens = raw["tokens"]
    nested = isinstance(tokens, list) and bool(tokens) and isinstance(tokens[0], list)
    texts = [_words(t, f"{where}: key 'tokens'") for t in tokens] if nested else [_words(tokens, f"{where}: key 'tokens'")]
    if kind == "inv" and len(texts) < 2:
        raise DataError(f"{where}: an inv case gives 'tokens' as a list of word lists: the original, then its edits")
    tags = raw.get("tags")
    if kind == "mft" and tags is None:
        raise DataError(f"{where}: an mft case needs 'tags', one per word")
    tag_lists: list[list[str] | None] = [None] * len(texts)
    if tags is not None:
        nested_tags = isinstance(tags, list) and bool(tags) and isinstance(tags[0], list)
        tag_lists = list(tags) if nested_tags else [tags]
        if len(tag_lists) != len(texts):
            raise DataError(f"{where}: key 'tags' gives {len(tag_lists)} tag lists for {len(texts)} texts")
    sentences = []
    for n, (words, tagged) in enumerate(zip(texts, tag_lists)):
        gold: tuple[Span, ...] = ()
        if tagged is not None:
            if not isinstance(tagged, list) or len(tagged) != len(words) or not all(isinstance(t, str) for t in tagged):
                raise DataError(f"{where}: text {n + 1} has {len(words)} words but its tags are {tagged!r}")
            gold = tuple(decode(tagged, f"{where}: text {n + 1}"))
        sentences.append(Tagged(words, gold))
    if kind == "inv":
        maps = raw.get("maps")
        if maps is not None and (not isinstance(maps, list) or len(maps) != len(texts) - 1):
            raise DataError(f"{where}: key 'maps' gives one word map per edited text ({len(texts) - 1})")
        for n in range(1, len(texts)):
            wmap = _word_map(maps[n - 1] if maps else None, len(texts[0]), len(texts[n]), f"{where}: text {n + 1}")
            s = sentences[n]
            sentences[n] = Tagged(s.words, s.gold if tag_lists[n] is not None else follow(sentences[0].gold, wmap), wmap,
                                  tuple(i for i, w in enumerate(s.words) if w not in texts[0]))
    return EntityCase(test=test.strip(), type=kind, sentences=tuple(sentences), capability=str(raw.get("capability") or ""),
                      id=str(raw.get("id", "")), source=source, has_gold=tags is not None)


def _word_map(raw: Any, n_old: int, n_new: int, where: str) -> WordMap:
    if raw is None:
        if n_old != n_new:
            raise DataError(f"{where}: {n_new} words against the original's {n_old}: give 'maps' (each original word's "
                            "[start, end) among the new words)")
        return identity_map(n_old)
    if not isinstance(raw, list) or len(raw) != n_old:
        raise DataError(f"{where}: a word map gives one [start, end) per original word ({n_old})")
    out = []
    for pair in raw:
        if (not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(v, int) for v in pair)
                or not 0 <= pair[0] <= pair[1] <= n_new):
            raise DataError(f"{where}: word map entry {pair!r} is not a [start, end) within the {n_new} new words")
        out.append((pair[0], pair[1]))
    return tuple(out)


# ---- templates -----------------------------------------------------------------------------------------
def slot_family(lexicon: str) -> str | None:
    """The entity family a lexicon's words are (None: no entity)."""
    if lexicon.startswith("surname_"):
        return "person"
    return SLOT_FAMILY.get(lexicon)


def expand_entity_template(spec: Any, lexicons: dict[str, list[str]], types: dict[str, str], seed: int,
                           default_max: int, where: str) -> list[EntityCase]:
    """The mft cases of one template with entity slots; ``types``: the model's type per family."""
    if not isinstance(spec, dict):
        raise ProbeError(f"{where}: a template test is a mapping (test, template, ...)")
    check_keys(spec, TEMPLATE_KEYS, where, ProbeError)
    if spec.get("type", "mft") != "mft":
        raise ProbeError(f"{where}: a template for a token-classification model is an mft test (its entities are the slots)")
    template = spec.get("template")
    if not isinstance(template, str) or not template.strip():
        raise ProbeError(f"{where}: 'template' must be a non-empty string")
    test = str(spec.get("test") or template)
    given = spec.get("entities") or {}
    if not isinstance(given, dict):
        raise ProbeError(f"{where}: 'entities' maps slots to the model's entity types, e.g. {{company: ORG}}")
    pieces = TOKEN.findall(template)
    slots: list[tuple[int, str, str | None]] = []  # piece index, slot, entity type
    for i, piece in enumerate(pieces):
        m = SLOT.match(piece)
        if not m:
            continue
        lexicon, slot = m.group(1), m.group(1) + m.group(2)
        if lexicon not in lexicons:
            raise ProbeError(f"{where}: no lexicon '{lexicon}'{did_you_mean(lexicon, list(lexicons))}; "
                             "add your own under the probe's lexicons: param")
        if slot in given or lexicon in given:
            kind = str(given.get(slot, given.get(lexicon)))
            if kind not in types.values():
                raise ProbeError(f"{where}: entities: '{kind}' is no entity type of the model ({', '.join(sorted(types.values()))})")
        else:
            family = slot_family(lexicon)
            if family is not None and family not in types:
                raise ProbeError(f"{where}: slot {{{slot}}} is a {family}, a type the model does not have "
                                 f"({', '.join(sorted(types.values()))}); map it with entities: {{{slot}: TYPE}}")
            kind = types.get(family) if family else None
        slots.append((i, slot, kind))
    if not any(kind for _, _, kind in slots):
        raise ProbeError(f"{where}: the template has no entity slot ({', '.join(sorted(SLOT_FAMILY))}, surname_*, "
                         "or a slot named in entities:)")
    limit = int(spec.get("max_cases", default_max))
    rng = random.Random(f"{seed}:{test}")
    cases: list[EntityCase] = []
    seen: set[tuple[str, ...]] = set()
    for _ in range(limit * 20):
        if len(cases) >= limit:
            break
        chosen: dict[str, str] = {}
        for _, slot, _ in slots:
            if slot not in chosen:
                lexicon = SLOT.match("{" + slot + "}").group(1)  # type: ignore[union-attr]
                taken = set(chosen.values())
                chosen[slot] = rng.choice([w for w in lexicons[lexicon] if w not in taken] or lexicons[lexicon])
        key = tuple(chosen[s] for _, s, _ in slots)
        if key in seen:
            continue
        seen.add(key)
        cases.append(_filled(test, spec, pieces, slots, chosen, len(cases)))
    return cases


def _filled(test: str, spec: dict[str, Any], pieces: list[str], slots: list[tuple[int, str, str | None]],
            chosen: dict[str, str], n: int) -> EntityCase:
    kinds = {i: (slot, kind) for i, slot, kind in slots}
    words: list[str] = []
    spans: list[list[Any]] = []
    last_kind_end: tuple[str | None, int] = (None, -1)
    for i, piece in enumerate(pieces):
        if i in kinds:
            slot, kind = kinds[i]
            new = chosen[slot].split()
            start = len(words)
            words += new
            if kind is not None:
                if last_kind_end == (kind, start) and spans:
                    spans[-1][1] = len(words)  # adjacent slots of one type: one entity
                else:
                    spans.append([start, len(words), kind])
                last_kind_end = (kind, len(words))
            continue
        words.append(piece)
    if words and words[0][:1].islower():
        words[0] = words[0][:1].upper() + words[0][1:]
    sentence = Tagged(tuple(words), tuple((a, b, k) for a, b, k in spans))
    return EntityCase(test=test, type="mft", sentences=(sentence,), capability=str(spec.get("capability") or "templates"),
                      id=f"t{n}", source="template")


__all__ = ["EntityCase", "EntityVerdict", "entity_case_from_mapping", "expand_entity_template", "judge_entities"]
