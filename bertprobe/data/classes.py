"""Which class of a model a class name written in a suite means: its own name, a role (positive), an index.

A suite written for a task names classes by role (``target_label: positive``, a template's ``label: negative``,
an entity type ``organisation``),
while models name them as their training did: ``POSITIVE``, ``pos``, ``LABEL_1``. One rule, used by the probes'
class params, behaviour templates and cases, and ``validate`` alike, reads such a name, in this order:

1. a class index (``1``, or the digits ``"1"``);
2. ``--label-map`` / ``data.label_map`` (``positive=LABEL_0``): the map renames the name first;
3. the model's own class name, case-insensitively;
4. a role alias: ``positive`` also means ``pos``, ``good``...; the one class of the model in that role;
5. the GLUE convention (SST-2: 0 negative, 1 positive), only for a two-class model whose config names no
   classes (``LABEL_0``/``LABEL_1``); a run that loads such a model says so (``glue_note``).

Anything else is an error naming ``--label-map``. The data's own labels are facts about a file: they match the
model's names exactly (case aside) or through ``--label-map`` (``bertprobe.data.prepare.align_labels``), whose
refusal proposes the map.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Role -> the names that mean it (lower case). A model's class is in a role when its name is one of these.
ROLES: dict[str, tuple[str, ...]] = {
    "positive": ("positive", "pos", "good", "favorable", "favourable"),
    "negative": ("negative", "neg", "bad", "unfavorable", "unfavourable"),
    "neutral": ("neutral", "neu"),
    # entity types (token classification): CoNLL's PER/LOC/ORG, OntoNotes' PERSON/GPE/ORG...
    "person": ("person", "per"),
    "place": ("place", "loc", "location", "gpe"),
    "organisation": ("organisation", "organization", "org"),
}
# GLUE's binary sentiment (SST-2) numbers its classes 0 negative, 1 positive.
GLUE_INDEX: dict[str, int] = {"negative": 0, "positive": 1}
_GENERIC = re.compile(r"(label_)?(\d+)")


def role_of(name: str) -> str | None:
    """The role a name plays (``POS`` -> positive), or None."""
    low = name.strip().lower()
    return next((role for role, names in ROLES.items() if low in names), None)


def unnamed(names: Sequence[str]) -> bool:
    """Whether the model's config names no classes: ``LABEL_0, LABEL_1, ...`` (or ``0, 1, ...``) in order."""
    matches = [_GENERIC.fullmatch(n.strip().lower()) for n in names]
    return bool(names) and all(m is not None and int(m.group(2)) == i for i, m in enumerate(matches))


@dataclass(frozen=True)
class ClassMatch:
    """The class a name means, and how it was read: index, map, name, alias or glue."""

    index: int
    how: str


def find_class(value: str | int, names: Sequence[str], label_map: Mapping[str, str] | None = None) -> ClassMatch | None:
    """The model's class ``value`` means (the rules of this module, in order), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return ClassMatch(value, "index") if 0 <= value < len(names) else None
    text, how = str(value).strip(), "name"
    mapped = {str(k).strip().lower(): str(v).strip() for k, v in (label_map or {}).items()}
    if text.lower() in mapped:
        text, how = mapped[text.lower()], "map"
    lowered = [n.lower() for n in names]
    if text.lower() in lowered:
        return ClassMatch(lowered.index(text.lower()), how)
    if text.isdigit():
        return ClassMatch(int(text), "index") if int(text) < len(names) else None
    role = role_of(text)
    if role is None:
        return None
    in_role = [i for i, n in enumerate(names) if role_of(n) == role]
    if len(in_role) == 1:
        return ClassMatch(in_role[0], "alias")
    if role in GLUE_INDEX and len(names) == 2 and unnamed(names):
        return ClassMatch(GLUE_INDEX[role], "glue")
    return None


def class_problem(value: str | int, names: Sequence[str], what: str) -> str:
    """Why ``value`` names no class of the model, and the ``--label-map`` that would map it."""
    import difflib

    close = difflib.get_close_matches(str(value).lower(), [n.lower() for n in names], n=1, cutoff=0.6)
    near = next((f" (did you mean '{n}'?)" for n in names if close and n.lower() == close[0]), "")
    return (f"{what} {value!r} is not a class of the model{near}; classes: {', '.join(names)}; map it with "
            f"--label-map {value}=CLASS (or data.label_map in the suite)")


def glue_note(names: Sequence[str], label_map: Mapping[str, str] | None = None) -> str | None:
    """What a run says when it loads a two-class model whose config names no classes (``LABEL_0``,
    ``LABEL_1``): a class the suite names positive or negative (a trigger's target, a template's label, a
    directional perturbation) reads it by the GLUE convention. None where that cannot happen: named classes,
    not two, or the map says what both roles are."""
    mapped = {str(k).strip().lower() for k in (label_map or {})}
    if len(names) != 2 or not unnamed(names) or set(GLUE_INDEX) <= mapped:
        return None
    return (f"the model's config names no classes ({', '.join(names)}): a class the suite names positive reads "
            f"{names[GLUE_INDEX['positive']]} and negative reads {names[GLUE_INDEX['negative']]} by the GLUE convention "
            f"(SST-2: 0 negative, 1 positive); if this model says otherwise, pass --label-map "
            f"positive={names[GLUE_INDEX['negative']]},negative={names[GLUE_INDEX['positive']]}")
