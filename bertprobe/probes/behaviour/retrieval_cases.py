"""Behavioural cases of a model that ranks texts (a bi-encoder or a reranker: a task with ``ranks_texts``).

Three kinds, each judged by ``retrieval.py``:

* ``RankCase`` (INV, CheckList's perturbations of the data): a retrieval query, its edited versions and its gold
  passage; the edits are the classifier's own (``perturb.catalogue``: typos, casing, punctuation, contractions,
  names and places swapped), applied to the query alone.
* ``SimCase`` (MFT and DIR, after NevIR: Weller et al. 2024, "NevIR: Negation in Neural Information Retrieval"):
  an anchor, a paraphrase of it and a contrast that differs from the paraphrase by one change of meaning (a
  negation, a number, an antonym); it passes when the model scores the paraphrase above the contrast. The contrast
  is a minimal edit of the paraphrase, not of the anchor, so both share the anchor's words equally and only the
  meaning separates them. Built-in templates below, the suite's own (``templates:`` with ``anchor``,
  ``paraphrase``, ``contrast``) or JSONL lines of the same keys.
* ``OriginCase`` (fairness, after Mishra et al. 2020's name lists by origin): a query holding a person's name,
  once per surname-origin group, the gold passage edited alike.

Deviation from NevIR: NevIR pairs two queries with two documents and asks for both rankings right; a case here
is one anchor with two candidates (NevIR's pairwise accuracy counts a pair right only when both of its queries are,
which this per-candidate test does not require).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bertprobe.errors import DataError, ProbeError
from bertprobe.probes.behaviour.cases import case_head
from bertprobe.probes.behaviour.perturb import Perturbation, Words, catalogue, match_case
from bertprobe.probes.behaviour.templates import SLOT, case_limit, fill, fillings, template_slots
from bertprobe.registry import check_keys

# the classifier's perturbations that fit a query (by name, in perturb.catalogue)
QUERY_PERTURBATIONS = ("typo", "typos_2", "uppercase", "lowercase", "strip_punctuation", "add_punctuation",
                       "expand_contractions", "contract", "first_names", "full_names", "cities", "countries")
SIM_KEYS = ("test", "capability", "type", "anchor", "paraphrase", "contrast", "id")
SIM_TEMPLATE_KEYS = ("test", "capability", "type", "anchor", "paraphrase", "contrast", "max_cases")
ANTONYM = "_antonym"  # a slot {X_antonym} takes the antonym of the word filled for {X}

# NevIR-style minimal pairs: the contrast is the paraphrase with one change of meaning
BUILTIN_SIMILARITY: tuple[dict[str, Any], ...] = (
    {"test": "negation: paraphrase above its negation", "capability": "negation", "type": "mft",
     "anchor": "{cause} causes {effect}.", "paraphrase": "{effect} is caused by {cause}.",
     "contrast": "{effect} is not caused by {cause}."},
    {"test": "negation: paraphrase above its negation", "capability": "negation", "type": "mft",
     "anchor": "{first_name} lives in {city}.", "paraphrase": "{first_name} has a home in {city}.",
     "contrast": "{first_name} does not have a home in {city}."},
    {"test": "negation: paraphrase above its negation", "capability": "negation", "type": "mft",
     "anchor": "The {object} is in the {room}.", "paraphrase": "You can find the {object} in the {room}.",
     "contrast": "You cannot find the {object} in the {room}."},
    {"test": "numbers: a changed number scores lower", "capability": "numbers", "type": "dir",
     "anchor": "{first_name} bought {count} {item}s.", "paraphrase": "{first_name} purchased {count} {item}s.",
     "contrast": "{first_name} purchased {count2} {item}s."},
    {"test": "numbers: a changed number scores lower", "capability": "numbers", "type": "dir",
     "anchor": "The trip to {city} takes {count} hours.", "paraphrase": "It takes {count} hours to travel to {city}.",
     "contrast": "It takes {count2} hours to travel to {city}."},
    {"test": "antonyms: an antonym scores lower", "capability": "antonyms", "type": "dir",
     "anchor": "The {room} was {place_adjective}.", "paraphrase": "The {room} seemed {place_adjective}.",
     "contrast": "The {room} seemed {place_adjective_antonym}."},
    {"test": "antonyms: an antonym scores lower", "capability": "antonyms", "type": "dir",
     "anchor": "{first_name} felt {mood_adjective} today.", "paraphrase": "Today {first_name} felt {mood_adjective}.",
     "contrast": "Today {first_name} felt {mood_adjective_antonym}."},
)


@dataclass(frozen=True)
class RankCase:
    """An INV case: a query (``texts[0]``) and its edits; ``gold`` is its gold passage's corpus index and ``owner``
    the sampled query's position (whose first-stage list a reranker reorders)."""

    test: str
    type: str
    texts: tuple[str, ...]
    gold: int
    owner: int
    capability: str = ""
    id: str = ""
    source: str = ""
    changed: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class SimCase:
    """An MFT or DIR case: passes when sim(anchor, paraphrase) > sim(anchor, contrast)."""

    test: str
    type: str
    anchor: str
    paraphrase: str
    contrast: str
    capability: str = ""
    id: str = ""
    source: str = ""

    @property
    def changed(self) -> tuple[str, ...]:
        """The contrast's words the paraphrase lacks (what a finding highlights)."""
        para = {w.lower() for w in re.findall(r"[\w']+", self.paraphrase)}
        return tuple(w for w in re.findall(r"[\w']+", self.contrast) if w.lower() not in para)


@dataclass(frozen=True)
class OriginCase:
    """One query with a person's surname of each group (``queries[g]``), the gold passage edited alike."""

    id: str
    owner: int
    gold: int
    groups: tuple[str, ...]
    queries: tuple[str, ...]
    passages: tuple[str, ...]
    names: tuple[str, ...]


def query_catalogue() -> dict[str, Perturbation]:
    """The INV perturbations a query gets (each the classifier's, ``perturb.catalogue``)."""
    known = catalogue()
    return {name: known[name] for name in QUERY_PERTURBATIONS}


def query_cases(queries: Sequence[tuple[str, str, int]], specs: list[tuple[Perturbation, dict[str, Any]]],
                words: Words, seed: int) -> tuple[list[RankCase], list[dict[str, Any]]]:
    """The INV cases each perturbation makes of the queries ``(id, text, gold index)``, and a row per perturbation:
    how many queries it applied to, or why it was skipped."""
    cases: list[RankCase] = []
    rows = []
    for pert, options in specs:
        words.variants = int(options.get("variants", pert.variants))
        applied = 0
        for owner, (qid, text, gold) in enumerate(queries):
            made = pert.edit(text, random.Random(f"{seed}:{pert.name}:{qid}"), words)
            made = [m for m in made if m.text != text]
            if not made:
                continue
            applied += 1
            cases.append(RankCase(pert.name, "inv", (text, *[m.text for m in made]), gold, owner, pert.capability,
                                  qid, f"perturbation {pert.name}", ((), *[m.changed for m in made])))
        rows.append({"perturbation": pert.name, "type": "inv", "capability": pert.capability, "applied": applied,
                     "examples": len(queries), "description": pert.description,
                     **({} if applied else {"skipped": f"applies to none of the {len(queries)} queries"})})
    return cases, rows


def _word(term: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w-])" + re.escape(term) + r"(?![\w-])", re.IGNORECASE)


def find_person(query: str, words: Words, surnames: Sequence[str]) -> tuple[str, bool] | None:
    """The name of a person a query holds, by the lexicons: ``(surname, True)`` for a known surname (after a first
    name or alone: it is replaced), ``(first name, False)`` for a first name alone (a surname is added after it);
    None when the query holds neither."""
    last = sorted({*words.lexicons["last_name"], *surnames}, key=len, reverse=True)
    last_pattern = re.compile(r"(?<![\w-])(" + "|".join(re.escape(t) for t in last) + r")(?![\w-])")
    m = last_pattern.search(query)  # capitalised as a name: "Lee", not "lee"
    if m is not None:
        return m.group(), True
    m = words.pattern("first_name").search(query)
    if m is not None and m.group()[:1].isupper():
        return m.group(), False
    return None


def origin_cases(queries: Sequence[tuple[str, str, int]], passages: Sequence[str], words: Words,
                 origins: dict[str, list[str]], seed: int) -> list[OriginCase]:
    """A case per query holding a person's name (``find_person``): the query once per origin group, its surname a
    seeded draw of the group's (or, after a first name alone, added), every whole-word occurrence of the name in
    the query and in the gold passage (``passages[i]``) edited alike, so the match the query had is kept."""
    every = [s for names in origins.values() for s in names]
    out = []
    for owner, ((qid, text, gold), passage) in enumerate(zip(queries, passages)):
        found = find_person(text, words, every)
        if found is None:
            continue
        name, is_surname = found
        rng = random.Random(f"{seed}:origins:{qid}")
        pattern = _word(name)
        qs, ps, names = [], [], []
        for surnames in origins.values():
            pick = rng.choice([s for s in surnames if s.lower() != name.lower()] or surnames)

            def put(m: re.Match[str], pick: str = pick, is_surname: bool = is_surname) -> str:
                return match_case(m.group(), pick) if is_surname else f"{m.group()} {pick}"

            qs.append(pattern.sub(put, text))
            ps.append(pattern.sub(put, passage))
            names.append(pick)
        out.append(OriginCase(qid, owner, gold, tuple(origins), tuple(qs), tuple(ps), tuple(names)))
    return out


# ---- similarity cases ---------------------------------------------------------------------------------------
def similarity_case_from_mapping(raw: Any, where: str, source: str = "") -> SimCase:
    """A SimCase from one JSON object (``test``, ``type`` mft or dir, ``anchor``, ``paraphrase``, ``contrast``)."""
    test, kind = case_head(raw, where, SIM_KEYS, ("mft", "dir"), " of a similarity case")
    for key in ("anchor", "paraphrase", "contrast"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise DataError(f"{where}: key '{key}' must be a non-empty string (a similarity case is an anchor, a "
                            "paraphrase and a contrast the paraphrase must score above)")
    return SimCase(test, kind, raw["anchor"], raw["paraphrase"], raw["contrast"], str(raw.get("capability") or ""),
                   str(raw.get("id", "")), source)


def expand_similarity_template(spec: Any, lexicons: dict[str, list[str]], antonyms: dict[str, str], seed: int,
                               default_max: int, where: str, number: int = 0) -> list[SimCase]:
    """The cases of one similarity template: ``anchor``, ``paraphrase`` and ``contrast`` filled with the same words
    (``{X_antonym}``: the antonym of the word filled for ``{X}``); ids ``t<number>.<n>``."""
    if not isinstance(spec, dict):
        raise ProbeError(f"{where}: a similarity template is a mapping (test, type, anchor, paraphrase, contrast)")
    check_keys(spec, SIM_TEMPLATE_KEYS, where, ProbeError)
    kind = spec.get("type", "mft")
    if kind not in ("mft", "dir"):
        raise ProbeError(f"{where}: a similarity template is of type mft or dir, not {kind!r}")
    for key in ("test", "anchor", "paraphrase", "contrast"):
        if not isinstance(spec.get(key), str) or not spec[key].strip():
            raise ProbeError(f"{where}: key '{key}' must be a non-empty string")
    texts = [spec["anchor"], spec["paraphrase"], spec["contrast"]]
    derived = sorted({(m.group(1), m.group(2)) for t in texts for m in SLOT.finditer(t) if m.group(1).endswith(ANTONYM)})
    plain = [SLOT.sub(lambda m: "" if m.group(1).endswith(ANTONYM) else m.group(), t) for t in texts]
    slots = template_slots(plain, lexicons, where)
    for name, digit in derived:
        base = name[: -len(ANTONYM)] + digit
        if base not in {s for _, s in slots}:
            raise ProbeError(f"{where}: slot {{{name}{digit}}} needs {{{base}}} in the template (its antonym is taken)")
    rng = random.Random(f"{seed}:{spec['test']}:{number}")
    cases = []
    for chosen in fillings(slots, lexicons, rng, case_limit(spec, default_max, where)):
        words = dict(chosen)
        for name, digit in derived:
            base = chosen[name[: -len(ANTONYM)] + digit]
            if base.lower() not in antonyms:
                raise ProbeError(f"{where}: '{base}' has no antonym in the lexicons' antonym lists")
            words[name + digit] = antonyms[base.lower()]
        anchor, paraphrase, contrast = (fill(t, words) for t in texts)
        cases.append(SimCase(spec["test"].strip(), kind, anchor, paraphrase, contrast, str(spec.get("capability") or ""),
                             f"t{number}.{len(cases)}", "template"))
    return cases
