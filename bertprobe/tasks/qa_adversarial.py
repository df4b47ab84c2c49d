"""Adversarial SQuAD files scored as their authors scored them (Jia & Liang 2017, AddSent and AddOneSent).

Jia & Liang release their adversarial sets in SQuAD's format: each original question keeps its id, and each
adversarial copy of it (the same question over the context with a distractor sentence added) has the original's
id plus a suffix (``<id>-high-conf``, ``<id>-high-conf-turk0``, ...). Their score for a model is, per original
question, the *lowest* F1 over the original and its adversarial variants, averaged over the originals: the
model is only credited with a question that no variant fooled it on.

How a file is recognised (``data.options.adversarial``, read by ``group``):

* ``auto`` (the default): a question whose id is another question's id plus ``-suffix`` is a variant of that one
  (of the shortest such id, so ``<id>-high-conf-turk0`` belongs to ``<id>`` even when ``<id>-high-conf`` is there
  too); the report says the layout was detected, and ``none`` turns it off;
* ``jia-liang``: declared; every id holding a ``-`` is a variant of the id before its first ``-`` (the layout of
  the released files, whose original ids are SQuAD's dash-free hex ids), whether or not that original is in the
  data (a ``--limit`` sample may leave it out: the group is then scored over the variants present);
* ``none``: plain questions.

Each variant carries ``meta["adversarial_of"]`` (its original's id) from then on. The accuracy probe's
adversarial section (``probes/accuracy/adversarial.py``) adds to its answers section: EM and F1 on the originals, on the variants alone, and the adversarial score (``adversarial_f1``
and ``adversarial_exact_match``, the lowest over each group), with bootstrap intervals over originals (over their
contexts where originals share one: ``tasks.qa_clusters``); the
paired change per original (``adversarial_delta_f1``, adversarial score minus the original's F1, with a paired
bootstrap interval) and outcomes keyed by the original's id (``f1_original``, ``f1_adversarial``) for paired
gates; findings: the variants that cost the most F1, with the distractor (the text the variant's context adds to
its original's), the gold answer and the prediction marked in the context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bertprobe.data.dataset import Dataset, Example
from bertprobe.errors import DataError
from bertprobe.tasks.qa_clusters import (  # ORIGINAL: a variant's meta key
    ORIGINAL,
)

MODES = ("auto", "jia-liang", "none")
OPTION = "adversarial"
DECLARED = "adversarial_declared"  # a variant's meta key: True where data.options declared the layout

def mode_of(options: Any) -> str:
    """``data.options.adversarial`` checked (``auto`` when absent); a DataError names the allowed values."""
    value = (options or {}).get(OPTION, "auto")
    if value is False or value is None:
        return "none"
    if value not in MODES:
        raise DataError(f"data.options.{OPTION}: {value!r} is no layout of adversarial questions; give one of "
                        f"{', '.join(MODES)} (jia-liang: ids '<original id>-<suffix>', as Jia & Liang's files)")
    return str(value)


def originals_of(ids: Sequence[str], mode: str) -> list[str | None]:
    """Each question's original id when it is an adversarial variant (see the module docstring), else None."""
    if mode == "none":
        return [None] * len(ids)
    if mode == "jia-liang":
        return [i.split("-", 1)[0] if "-" in i and i.split("-", 1)[0] else None for i in ids]
    present = set(ids)
    out: list[str | None] = []
    for i in ids:
        cut = i.find("-")
        found = None
        while cut > 0:
            if i[:cut] in present:
                found = i[:cut]
                break
            cut = i.find("-", cut + 1)
        out.append(found)
    return out


def group(data: Dataset, options: Any) -> Dataset:
    """``data`` with each adversarial variant marked (``meta["adversarial_of"]``); unchanged when none is found.
    A declared layout that matches no id is a DataError."""
    mode = mode_of(options)
    ids = [ex.id for ex in data.examples]
    of = originals_of(ids, mode)
    if mode == "jia-liang" and not any(of):
        raise DataError(f"data.options.{OPTION}: jia-liang, but no question id of {data.name or 'the data'} is an "
                        "original's id plus a suffix ('<id>-high-conf', '<id>-high-conf-turk0'); leave the option "
                        "out for plain questions")
    if not any(of):
        return data
    examples = [replace(ex, meta={**ex.meta, ORIGINAL: o, DECLARED: mode == "jia-liang"}) if o else ex
                for ex, o in zip(data.examples, of)]
    return Dataset(examples, data.name, data.label_names)


def distractor_span(original: str, variant: str) -> tuple[int, int] | None:
    """The characters of ``variant`` that ``original`` lacks (the longest common prefix and suffix removed,
    surrounding whitespace trimmed), or None when the contexts are equal or nothing was added."""
    if original == variant:
        return None
    start = 0
    while start < min(len(original), len(variant)) and original[start] == variant[start]:
        start += 1
    end_v, end_o = len(variant), len(original)
    while end_v > start and end_o > start and original[end_o - 1] == variant[end_v - 1]:
        end_v, end_o = end_v - 1, end_o - 1
    while start < end_v and variant[start].isspace():
        start += 1
    while end_v > start and variant[end_v - 1].isspace():
        end_v -= 1
    return (start, end_v) if end_v > start else None


def groups_of(examples: Sequence[Example]) -> dict[str, dict[str, Any]]:
    """Per original id (every question that is no variant is one, with or without variants), its index (None
    when absent from the data) and its variants' indices, in data order."""
    out: dict[str, dict[str, Any]] = {}
    for i, ex in enumerate(examples):
        key = ex.meta.get(ORIGINAL)
        entry = out.setdefault(key or ex.id, {"original": None, "variants": []})
        if key:
            entry["variants"].append(i)
        else:
            entry["original"] = i
    return out
