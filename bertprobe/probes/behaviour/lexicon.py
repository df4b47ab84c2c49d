"""The built-in word lists (package data under ``lexicons/``, provenance in its README) and the user's own."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from bertprobe.errors import ProbeError

IDENTITY_GROUPS = ("nationality", "religion", "race", "sexual_orientation", "gender_identity")
# lexicon names of the surname groups (``{surname_hispanic}``), in the order of ``surnames_by_origin.json``
ORIGIN_SLUGS = ("white", "black", "asian", "hispanic", "native")


@lru_cache(maxsize=None)
def _file(name: str) -> Any:
    return json.loads(resources.files("bertprobe.probes.behaviour").joinpath("lexicons").joinpath(f"{name}.json").read_text("utf-8"))


def builtin_lexicons() -> dict[str, list[str]]:
    """Every built-in list by the name a template writes (``{first_name}``, ``{pos_adj}``, ``{religion}``...)."""
    names = _file("first_names")
    identity = _file("identity")
    out: dict[str, list[str]] = {
        "female_name": list(names["female"]), "male_name": list(names["male"]),
        "first_name": list(names["female"]) + list(names["male"]), "last_name": list(_file("last_names")),
        "city": list(_file("cities")), "country": list(_file("countries")),
    }
    orgs = _file("organisations")
    out.update({"company": list(orgs["companies"]), "organisation": list(orgs["companies"]) + list(orgs["institutions"])})
    out.update({f"surname_{slug}": names for slug, names in zip(ORIGIN_SLUGS, origins().values())})
    out.update({group: list(identity[group]) for group in IDENTITY_GROUPS})
    out.update({key: list(words) for key, words in _file("sentiment").items()})
    return out


def qa_lexicons() -> dict[str, list[str]]:
    """The question-answering words (``lexicons/qa.json``): the built-in MFT templates' slots and the irrelevant
    sentences of the INV tests."""
    return {key: list(words) for key, words in _file("qa").items()}


def similarity_lexicons() -> tuple[dict[str, list[str]], dict[str, str]]:
    """The similarity templates' words (``lexicons/similarity.json``: causes, effects, objects, rooms, counts, items)
    and its antonym lists: each list's words (both sides) by its name, and the antonym of every word (both ways)."""
    raw = _file("similarity")
    words = {key: list(values) for key, values in raw.items() if key != "antonyms"}
    antonym: dict[str, str] = {}
    for name, pairs in raw["antonyms"].items():
        words[name] = [w for pair in pairs for w in pair]
        for a, b in pairs:
            antonym[a], antonym[b] = b, a
    return words, antonym


def origins() -> dict[str, list[str]]:
    """Surnames by origin group (US Census 2010 self-identification; provenance in ``lexicons/README.md``)."""
    return {group: list(names) for group, names in _file("surnames_by_origin").items()}


def edits() -> dict[str, Any]:
    """Contractions, negatable verbs, negation words, URLs, handles, trailing marks."""
    return dict(_file("edits"))


def gender_pairs() -> list[tuple[str, str]]:
    return [(a, b) for a, b in _file("identity")["gender_pairs"]]


def keyboard() -> dict[str, str]:
    """Each lowercase letter's QWERTY neighbours."""
    return dict(_file("keyboard"))


def lexicons_with(own: dict[str, list[str]] | None) -> dict[str, list[str]]:
    """The built-in lists, with the user's own added (a user list of a built-in name replaces it)."""
    merged = builtin_lexicons()
    for name, words in (own or {}).items():
        if not words or not all(isinstance(w, str) and w.strip() for w in words):
            raise ProbeError(f"lexicons.{name}: give a non-empty list of words")
        merged[name] = [w.strip() for w in words]
    return merged
