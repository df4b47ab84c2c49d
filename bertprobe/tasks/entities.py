"""Entity spans from tag sequences, and entity-level scores (seqeval's strict mode, as sets of spans).

A tag scheme is data: IOB2 (``B-`` starts every entity, ``I-`` continues one of the same type), IOB1
(``I-`` may start an entity; ``B-`` only separates two adjacent ones of the same type) and BIOES/BILOU
(``S-``/``U-`` single-word entities, ``E-``/``L-`` ends). Every sequence is decoded, in its own scheme, into
``(start, end, type)`` spans (end exclusive), and scores are set operations on them: a predicted entity is
right only with the exact span and type, seqeval's strict mode. Strict IOB2 decoding drops an orphan
``I-`` (one that does not continue an entity of its type), as seqeval's strict mode does; the default
(conlleval) reading would start an entity there. Conversion between schemes decodes and re-encodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Span = tuple[int, int, str]
SCHEMES = ("IOB2", "IOB1", "BIOES")


def split_tag(tag: str) -> tuple[str, str]:
    """``B-PER`` -> (``B``, ``PER``); ``O`` -> (``O``, ``""``). Both ``B-PER`` and ``B_PER`` are read."""
    if tag == "O" or not tag:
        return "O", ""
    if len(tag) > 2 and tag[1] in "-_":
        return tag[0].upper(), tag[2:]
    return "?", tag


def detect_scheme(tags: Sequence[str]) -> str:
    """The scheme a set of tags is written in: BIOES when S-/E-/U-/L- occur; IOB1 when an I- starts an
    entity somewhere (after O, or after another type) and B- is never used at an entity's start; else IOB2."""
    prefixes = {split_tag(t)[0] for t in tags}
    if prefixes & {"S", "E", "U", "L"}:
        return "BIOES"
    previous = ("O", "")
    starts_with_i = False
    for tag in tags:
        prefix, kind = split_tag(tag)
        if prefix == "I" and (previous[0] == "O" or previous[1] != kind):
            starts_with_i = True
        previous = (prefix, kind) if tag != "" else ("O", "")
    return "IOB1" if starts_with_i else "IOB2"


def spans(tags: Sequence[str], scheme: str = "IOB2") -> list[Span]:
    """The entities of one sentence as (start, end exclusive, type), decoded strictly in ``scheme``."""
    out: list[Span] = []
    start, kind = -1, ""

    def close(end: int) -> None:
        nonlocal start, kind
        if start >= 0:
            out.append((start, end, kind))
        start, kind = -1, ""

    for i, tag in enumerate(tags):
        prefix, t = split_tag(tag)
        if scheme == "BIOES":  # strict: only B- (I-)* E- and S- are entities; anything unended is dropped
            if prefix in ("I", "E", "L") and start >= 0 and kind == t:
                if prefix in ("E", "L"):
                    out.append((start, i + 1, kind))
                    start, kind = -1, ""
                continue
            start, kind = -1, ""  # an open entity not ended by E- here is no entity
            if prefix in ("S", "U"):
                out.append((i, i + 1, t))
            elif prefix == "B":
                start, kind = i, t
            continue
        if prefix == "B":
            close(i)
            start, kind = i, t
        elif prefix == "I":
            if start >= 0 and kind == t:
                continue
            close(i)
            if scheme == "IOB1":
                start, kind = i, t  # IOB1: an I- after O or another type starts an entity
            # IOB2 strict: an orphan I- starts nothing
        else:
            close(i)
    if scheme != "BIOES":  # (BIOES: an entity never ended by E- is not one)
        close(len(tags))
    return out


def encode(spans_: Sequence[Span], length: int, scheme: str = "IOB2") -> list[str]:
    """Tags of ``length`` words holding ``spans_`` in ``scheme`` (the inverse of ``spans``)."""
    tags = ["O"] * length
    ordered = sorted(spans_)
    for n, (start, end, kind) in enumerate(ordered):
        if scheme == "BIOES":
            if end - start == 1:
                tags[start] = f"S-{kind}"
            else:
                tags[start], tags[end - 1] = f"B-{kind}", f"E-{kind}"
                for i in range(start + 1, end - 1):
                    tags[i] = f"I-{kind}"
            continue
        adjacent = n > 0 and ordered[n - 1][1] == start and ordered[n - 1][2] == kind
        tags[start] = f"B-{kind}" if scheme == "IOB2" or adjacent else f"I-{kind}"
        for i in range(start + 1, end):
            tags[i] = f"I-{kind}"
    return tags


def bracketed(words: Sequence[str], entities: Sequence[Span]) -> list[str]:
    """Each entity as it is shown in findings: ``[PER Maria Lopez]``."""
    return [f"[{kind} " + " ".join(words[a:b]) + "]" for a, b, kind in entities]


def marked(words: Sequence[str], entities: Sequence[Span]) -> str:
    """The sentence with each entity bracketed and typed: ``[PER Maria Lopez] lives in [LOC Lima]``."""
    out = list(words)
    for a, b, kind in sorted(entities, reverse=True):
        out[a:b] = [f"[{kind} " + " ".join(out[a:b]) + "]"]
    return " ".join(out)


def convert(tags: Sequence[str], source: str, target: str) -> list[str]:
    """``tags`` re-written from scheme ``source`` into ``target`` (decoded to spans and encoded again)."""
    if source == target:
        return list(tags)
    return encode(spans(tags, source), len(tags), target)


@dataclass(frozen=True)
class EntityCounts:
    """Per sentence, per type: true positives, predicted and gold entities."""

    tp: dict[str, int]
    pred: dict[str, int]
    gold: dict[str, int]


def sentence_counts(gold: Sequence[str], pred: Sequence[str], scheme: str = "IOB2") -> EntityCounts:
    g, p = set(spans(gold, scheme)), set(spans(pred, scheme))
    tp: dict[str, int] = {}
    n_pred: dict[str, int] = {}
    n_gold: dict[str, int] = {}
    for _, _, kind in p:
        n_pred[kind] = n_pred.get(kind, 0) + 1
    for _, _, kind in g:
        n_gold[kind] = n_gold.get(kind, 0) + 1
    for _, _, kind in g & p:
        tp[kind] = tp.get(kind, 0) + 1
    return EntityCounts(tp, n_pred, n_gold)


def prf(tp: float, pred: float, gold: float) -> tuple[float, float, float]:
    """Precision, recall, F1 (0 where undefined, as seqeval's zero_division default)."""
    precision = tp / pred if pred else 0.0
    recall = tp / gold if gold else 0.0
    f1 = 2 * tp / (pred + gold) if pred + gold else 0.0
    return precision, recall, f1


def entity_scores(counts: Sequence[EntityCounts], types: Sequence[str] | None = None) -> dict[str, Any]:
    """Micro precision/recall/F1 over all entities, and per type (``types``: those to report, default: every
    type seen in gold or predictions). ``absent`` lists the types of ``types`` that neither the gold nor the
    predictions hold: their per-type scores are 0/0, no finding about the model."""
    kinds = sorted(set(types) if types is not None else {k for c in counts for k in (*c.gold, *c.pred)})
    totals = {k: [sum(c.tp.get(k, 0) for c in counts), sum(c.pred.get(k, 0) for c in counts),
                  sum(c.gold.get(k, 0) for c in counts)] for k in kinds}
    tp, pred, gold = (sum(v[i] for v in totals.values()) for i in range(3))
    precision, recall, f1 = prf(tp, pred, gold)
    per_type = {k: dict(zip(("precision", "recall", "f1"), prf(*v)), support=v[2], predicted=v[1]) for k, v in totals.items()}
    absent = [k for k, v in totals.items() if not v[1] and not v[2]]
    return {"precision": precision, "recall": recall, "f1": f1, "support": gold, "predicted": pred, "per_type": per_type,
            "absent": absent}


def error_kinds(gold: Sequence[str], pred: Sequence[str], scheme: str = "IOB2") -> dict[str, int]:
    """Each gold and predicted entity that is not matched exactly, by kind: ``wrong_type`` (the same span,
    another type), ``wrong_boundary`` (overlapping spans of the same type), ``missed`` (a gold entity no
    prediction overlaps) and ``spurious`` (a predicted entity no gold one overlaps). A wrong type or
    boundary counts once per gold entity."""
    g, p = set(spans(gold, scheme)), set(spans(pred, scheme))
    out = {"wrong_type": 0, "wrong_boundary": 0, "missed": 0, "spurious": 0}

    def overlap(a: Span, b: Span) -> bool:
        return a[0] < b[1] and b[0] < a[1]

    for s in g - p:
        if any((q[0], q[1]) == (s[0], s[1]) for q in p):
            out["wrong_type"] += 1
        elif any(overlap(s, q) for q in p):
            out["wrong_boundary"] += 1
        else:
            out["missed"] += 1
    for q in p - g:
        if not any(overlap(q, s) for s in g):
            out["spurious"] += 1
    return out
