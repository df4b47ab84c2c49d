"""Cloze items: the format, file loaders (YAML/JSONL, Ettinger 2020 tsv) and name resolution."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bertprobe.data.dataset import check_text_file
from bertprobe.errors import DataError
from bertprobe.probes.cloze.ettinger import read_table

MASK = "{mask}"
CONTRASTS = ("negation", "roles")  # what the second sentence of a pair changes


@dataclass(frozen=True)
class ClozeItem:
    """One blank to fill. ``text`` holds exactly one ``{mask}``; answers/distractors are words or phrases.

    ``pair`` groups minimal pairs (e.g. a sentence and its negation, ``negated`` marking the latter);
    ``contrast`` says what the pair's second sentence changes: ``negation`` or ``roles`` (its roles reversed).
    """

    id: str
    category: str
    text: str
    answers: tuple[str, ...]
    distractors: tuple[str, ...] = ()
    pair: str | None = None
    negated: bool = False
    contrast: str = "negation"
    source: str = "builtin"
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.text.count(MASK) != 1:
            raise DataError(f"cloze item {self.id!r}: text must contain {MASK} exactly once: {self.text!r}")
        if not self.answers or not all(a.strip() for a in self.answers):
            raise DataError(f"cloze item {self.id!r}: needs at least one non-empty answer")
        if self.contrast not in CONTRASTS:
            raise DataError(f"cloze item {self.id!r}: contrast must be one of {', '.join(CONTRASTS)}, not "
                            f"{self.contrast!r}")


def category_key(name: str) -> str:
    """A metric-name-safe form of a category: lowercase letters, digits and underscores."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def _as_tuple(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value)


def item_from_mapping(raw: dict[str, Any], where: str, default_category: str) -> ClozeItem:
    allowed = {"id", "category", "text", "answers", "answer", "distractors", "pair", "negated", "contrast"}
    if not isinstance(raw, dict):
        raise DataError(f"{where}: an item must be a mapping with 'text' and 'answers', got {type(raw).__name__}")
    unknown = set(raw) - allowed
    if unknown:
        raise DataError(f"{where}: unknown field '{sorted(unknown)[0]}'; fields: {', '.join(sorted(allowed))}")
    if "text" not in raw:
        raise DataError(f"{where}: missing 'text' (a sentence with {MASK})")
    try:
        return _item(raw, where, default_category)
    except DataError as exc:
        raise DataError(f"{where}: {exc}") from None


def _item(raw: dict[str, Any], where: str, default_category: str) -> ClozeItem:
    return ClozeItem(
        id=str(raw.get("id", where)),
        category=str(raw.get("category", default_category)),
        text=str(raw["text"]),
        answers=_as_tuple(raw.get("answers", raw.get("answer"))),
        distractors=_as_tuple(raw.get("distractors")),
        pair=None if raw.get("pair") is None else str(raw["pair"]),
        negated=bool(raw.get("negated", False)),
        contrast=str(raw.get("contrast", "negation")),
        source=where.split(":")[0],
    )


def load_item_file(path: Path) -> list[ClozeItem]:
    """Items from a ``.yaml``/``.yml`` list (or ``{items: [...]}``) or a ``.jsonl`` file, one item per line."""
    if not path.exists():
        raise DataError(f"cloze item file '{path}' does not exist")
    text = check_text_file(path)  # a folder, an empty, binary or non-UTF-8 file: one line naming it
    category = path.stem
    if path.suffix.lower() == ".jsonl":
        items = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    raw = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataError(f"{path}:{n}: not JSON: {exc.msg}") from None
                items.append(item_from_mapping(raw, f"{path}:{n}", category))
        return items
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DataError(f"{path}: not valid YAML: {exc}") from None
    entries = doc.get("items") if isinstance(doc, dict) else doc
    if not isinstance(entries, list):
        raise DataError(f"{path}: expected a list of items (or a mapping with 'items:')")
    return [item_from_mapping(raw, f"{path}: item {i}", category) for i, raw in enumerate(entries, 1)]


# ---- Ettinger 2020 diagnostics, native tsv ----------------------------------------------------
def _rows(path: Path) -> list[dict[str, str]]:
    """The rows of one of Ettinger's tsv files, each column its set needs checked (``DataError`` naming the line)."""
    return [fields for _, fields in read_table(path)[1]]


def _article(context: str, word: str) -> str:
    return context.replace("(a|an)", "an" if word[:1].lower() in "aeiou" else "a")


def load_ettinger(path: Path) -> list[ClozeItem]:
    """CPRAG-102, ROLE-88, NEG-136-SIMP or NEG-136-NAT in Ettinger's tsv format.

    Each context gets `` {mask}.`` appended (Ettinger scored the word at the end of the context).
    CPRAG: the expected word against the within- and between-category words. ROLE: ``-a``/``-b``
    items form a role-reversal pair; a reversed item's distractor is its partner's expected word.
    NEG: each row is an affirmative/negated pair; the affirmative answer is target_aff, the negated
    one target_neg (each the other's distractor); ``(a|an)`` agrees with the item's answer.
    """
    name = path.stem.upper()
    rows = _rows(path)
    items: list[ClozeItem] = []
    source = f"ettinger:{path.stem}"
    if name.startswith("CPRAG"):
        for r in rows:
            text = f"{r['context_s1'].strip()} {r['context_s2'].strip()} {MASK}."
            items.append(ClozeItem(f"cprag-{r['item']}", path.stem, text, (r["expected"].strip(),),
                                   (r["within_category"].strip(), r["between_category"].strip()), source=source,
                                   meta={"constraint": r.get("constraint", "")}))
    elif name.startswith("ROLE"):
        by_item = {r["item"]: r for r in rows}
        for r in rows:
            answers = tuple(a.strip() for a in r["expected"].split("|") if a.strip())
            key, _, side = r["item"].partition("-")
            partner = by_item.get(f"{key}-{'a' if side == 'b' else 'b'}")
            other = tuple(a.strip() for a in partner["expected"].split("|")) if partner else ()
            distractors = tuple(a for a in other if a not in answers)
            items.append(ClozeItem(f"role-{r['item']}", path.stem, f"{r['context'].strip()} {MASK}.", answers,
                                   distractors, pair=f"role-{key}", negated=side == "b", contrast="roles",
                                   source=source))
    elif name.startswith("NEG"):
        for r in rows:
            aff, neg = r["target_aff"].strip(), r["target_neg"].strip()
            pair = f"neg-{path.stem}-{r['item']}"
            items.append(ClozeItem(f"{pair}-aff", path.stem, f"{_article(r['context_aff'].strip(), aff)} {MASK}.",
                                   (aff,), (neg,), pair=pair, negated=False, source=source))
            items.append(ClozeItem(f"{pair}-neg", path.stem, f"{_article(r['context_neg'].strip(), neg)} {MASK}.",
                                   (neg,), (aff,), pair=pair, negated=True, source=source))
    else:
        raise DataError(f"'{path.name}' is not one of Ettinger's sets (CPRAG-102, ROLE-88, NEG-136-SIMP, NEG-136-NAT)")
    return items
