"""Behavioural cases of an extractive reader: MFT (a context, a question and the expected answers) and INV
(an item and its edits, the original first), from JSONL, from templates and from the built-in templates
after CheckList's SQuAD suite (Ribeiro et al. 2020, ``notebooks/SQuAD.ipynb`` of marcotcr/checklist:
comparisons, taxonomy without negation, simple coreference). One JSONL line per kind:

    {"test": "comparison", "capability": "vocabulary", "type": "mft", "context": "Anna is taller than Maria.",
     "question": "Who is taller?", "answers": ["Anna"]}
    {"test": "typo", "type": "inv", "items": [{"context": "Anna lives in Paris.", "question": "Where does Anna live?",
     "answers": [["Paris", 13]]}, {"context": "Anna livse in Paris.", "question": "Where does Anna live?"}]}

An answer is its text (found in the context, case-insensitively, at its first occurrence) or ``[text,
start]``. A template test fills ``context``, ``question`` and ``answer`` (or ``answers``) with the same
words (``{first_name}``, ``{comparative}``... from the lexicons), so the expected answer always names what
the context says. With ``origins``, the person slots of a template are also filled as full names whose
surnames are of each origin group (the NER work's census lists), the same sentences for every group.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from bertprobe.errors import DataError, ProbeError
from bertprobe.probes.behaviour.answers_edits import Gold, Item
from bertprobe.probes.behaviour.cases import case_head
from bertprobe.probes.behaviour.templates import SLOT, case_limit, fill, fillings, template_slots
from bertprobe.registry import check_keys

KEYS = ("test", "capability", "type", "context", "question", "answers", "items", "id")
ITEM_KEYS = ("context", "question", "answers")
TEMPLATE_KEYS = ("test", "capability", "type", "context", "question", "answer", "answers", "max_cases", "origins")
PERSON_SLOTS = ("first_name", "female_name", "male_name")

# After CheckList's SQuAD suite (its "A is COMP than B. Who is more COMP?", "There is a tiny oval thing. What
# size is the thing?" and "John and Mary are friends. He is a doctor, and she is a nurse. Who is a nurse?").
BUILTIN_TEMPLATES: tuple[dict[str, Any], ...] = (
    {"test": "comparison", "capability": "vocabulary", "origins": True,
     "context": "{first_name} is {comparative} than {first_name2}.", "question": "Who is {comparative}?",
     "answer": "{first_name}"},
    {"test": "comparison, less", "capability": "vocabulary", "origins": True,
     "context": "{first_name} is less {quality} than {first_name2}.", "question": "Who is less {quality}?",
     "answer": "{first_name}"},
    {"test": "taxonomy: size", "capability": "taxonomy",
     "context": "There is a {size} {colour} {thing} in the room.", "question": "What size is the {thing}?",
     "answer": "{size}"},
    {"test": "taxonomy: colour", "capability": "taxonomy",
     "context": "There is a {size} {colour} {thing} in the room.", "question": "What colour is the {thing}?",
     "answer": "{colour}"},
    {"test": "taxonomy: shape", "capability": "taxonomy",
     "context": "There is a {shape} {colour} {thing} by the door.", "question": "What shape is the {thing}?",
     "answer": "{shape}"},
    {"test": "coreference: he and she", "capability": "coreference", "origins": True,
     "context": "{male_name} and {female_name} are friends. He is a {profession}, and she is a {profession2}.",
     "question": "Who is a {profession2}?", "answer": "{female_name}"},
    {"test": "coreference: former and latter", "capability": "coreference",
     "context": "{first_name} and {first_name2} are colleagues. The former is a {profession}, the latter a {profession2}.",
     "question": "Who is a {profession}?", "answer": "{first_name}"},
)


@dataclass(frozen=True)
class QACase:
    """One case: ``mft`` (every item's answer must match its expected answers) or ``inv`` (each edited item's
    answer must equal the original's, as normalised text). ``groups``: each item's origin group (fairness).
    ``cluster``: the context whose cases it is resampled with (a data question's: ``tasks.qa_clusters``); empty:
    its first item's context (``context_key``)."""

    test: str
    type: str
    items: tuple[Item, ...]
    capability: str = ""
    id: str = ""
    source: str = ""
    groups: tuple[str, ...] = ()
    changed: tuple[tuple[str, ...], ...] = ()
    cluster: str = ""

    @property
    def context_key(self) -> str:
        """The cluster its failure rates resample it with: ``cluster``, else its first item's context."""
        return self.cluster or (self.items[0].context if self.items else "")


def locate(answers: Any, context: str, where: str) -> Gold:
    """Answers given as texts (found in the context) or ``[text, start]`` pairs, checked against the context."""
    if not isinstance(answers, list):
        raise DataError(f"{where}: key 'answers' must be a list of answer texts or [text, start] pairs")
    out = []
    for answer in answers:
        if isinstance(answer, str) and answer.strip():
            at = context.lower().find(answer.lower())
            if at < 0:
                raise DataError(f"{where}: the answer '{answer}' is not in the context (an extractive reader answers "
                                "with a span of it)")
            out.append((context[at:at + len(answer)], at))
        elif (isinstance(answer, list) and len(answer) == 2 and isinstance(answer[0], str) and answer[0]
              and isinstance(answer[1], int) and not isinstance(answer[1], bool)):
            text, start = answer
            if context[start:start + len(text)] != text:
                raise DataError(f"{where}: the answer '{text}' is not at character {start} of the context "
                                f"(found '{context[start:start + len(text)]}')")
            out.append((text, start))
        else:
            raise DataError(f"{where}: an answer is a non-empty text or [text, start], got {answer!r}")
    return tuple(out)


def _item(raw: Any, where: str, need_answers: bool) -> Item:
    if not isinstance(raw, dict):
        raise DataError(f"{where}: an item is an object with context, question and answers")
    check_keys(raw, ITEM_KEYS, where, DataError)
    for key in ("context", "question"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise DataError(f"{where}: key '{key}' must be a non-empty string")
    if need_answers and not raw.get("answers"):
        raise DataError(f"{where}: an mft case needs 'answers' (the expected answer texts)")
    return Item(raw["question"], raw["context"], locate(raw.get("answers", []), raw["context"], where))


def qa_case_from_mapping(raw: Any, where: str, source: str = "") -> QACase:
    """A QACase from one JSON object; ``where`` names it in errors."""
    test, kind = case_head(raw, where, KEYS, ("mft", "inv"), " of a question-answering case")
    common = dict(test=test, type=kind, capability=str(raw.get("capability") or ""), id=str(raw.get("id", "")),
                  source=source)
    if kind == "mft":
        if "items" in raw:
            raise DataError(f"{where}: an mft case gives context, question and answers (items are for inv)")
        return QACase(**common, items=(_item({k: raw[k] for k in ITEM_KEYS if k in raw}, where, True),))
    items = raw.get("items")
    if not isinstance(items, list) or len(items) < 2:
        raise DataError(f"{where}: an inv case needs 'items': the original and at least one edited item")
    return QACase(**common, items=tuple(_item(it, f"{where}: items[{i}]", False) for i, it in enumerate(items)))


def _answer(template: str, words: dict[str, str]) -> str:
    return SLOT.sub(lambda m: words[m.group(1) + m.group(2)], template)


def expand_qa_template(spec: Any, lexicons: dict[str, list[str]], origins: dict[str, list[str]], seed: int,
                       default_max: int, where: str) -> list[QACase]:
    """The MFT cases of one template test, and (``origins: true``) those of its origin-group fairness test."""
    if not isinstance(spec, dict):
        raise ProbeError(f"{where}: a question-answering template is a mapping (test, context, question, answer)")
    check_keys(spec, TEMPLATE_KEYS, where, ProbeError)
    if spec.get("type", "mft") != "mft":
        raise ProbeError(f"{where}: a question-answering template makes mft cases (inv cases come from the "
                         "perturbations or a cases: file)")
    for key in ("test", "context", "question"):
        if not isinstance(spec.get(key), str) or not spec[key].strip():
            raise ProbeError(f"{where}: key '{key}' must be a non-empty string")
    if ("answer" in spec) == ("answers" in spec):
        raise ProbeError(f"{where}: give 'answer' (a template) or 'answers' (a list of templates)")
    answers = [spec["answer"]] if "answer" in spec else spec["answers"]
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) and a.strip() for a in answers):
        raise ProbeError(f"{where}: answers must be non-empty templates")
    texts = [spec["context"], spec["question"], *answers]
    slots = template_slots(texts, lexicons, where)
    limit = case_limit(spec, default_max, where)
    rng = random.Random(f"{seed}:{spec['test']}")
    test, capability = spec["test"].strip(), str(spec.get("capability") or "")
    persons = [slot for lexicon, slot in slots if lexicon in PERSON_SLOTS]
    fair = bool(spec.get("origins")) and bool(persons) and len(origins) > 1
    cases: list[QACase] = []
    for n, chosen in enumerate(fillings(slots, lexicons, rng, limit)):  # the origin groups draw from rng in between
        cases.append(QACase(test, "mft", (_filled(texts, chosen, f"{where} case t{n}"),), capability, f"t{n}", "template"))
        if fair:
            items, groups = [], []
            for group, surnames in origins.items():
                names = rng.sample(surnames, min(len(persons), len(surnames)))
                full = {**chosen, **{slot: f"{chosen[slot]} {names[i % len(names)]}" for i, slot in enumerate(persons)}}
                items.append(_filled(texts, full, f"{where} case t{n}"))
                groups.append(group)
            cases.append(QACase(f"{test} (name origin)", "mft", tuple(items), "fairness", f"t{n}", "template",
                                tuple(groups), tuple((g,) for g in groups)))
    return cases


def _filled(texts: list[str], words: dict[str, str], where: str) -> Item:
    context, question = fill(texts[0], words), fill(texts[1], words)
    golds = []
    for template in texts[2:]:
        answer = _answer(template, words)
        at = _find(context, answer)
        if at < 0:
            raise ProbeError(f"{where}: the answer '{answer}' is not in the context '{context}' (a template's answer "
                             "must be filled from slots the context holds)")
        golds.append((context[at:at + len(answer)], at))
    return Item(question, context, tuple(golds))


def _find(context: str, answer: str) -> int:
    """The first whole-word occurrence of ``answer`` in ``context`` (case-insensitive), -1 if none."""
    m = re.search(r"(?<!\w)" + re.escape(answer) + r"(?!\w)", context, re.IGNORECASE)
    return m.start() if m else -1
