"""Expand the item-set names of the cloze probe (``builtin``, ``builtin:CATEGORY``, ``ettinger:PATH``, files)."""

from __future__ import annotations

from pathlib import Path

from bertprobe.errors import DataError
from bertprobe.probes.cloze.builtin import CATEGORIES, builtin_items
from bertprobe.probes.cloze.ettinger import ettinger_files
from bertprobe.probes.cloze.items import ClozeItem, load_ettinger, load_item_file
from bertprobe.registry import did_you_mean


def resolve_sets(specs: tuple[str, ...], seed: int, per_category: int) -> list[ClozeItem]:
    """Expand item-set names: ``builtin``, ``builtin:CATEGORY``, ``ettinger:DIR_OR_FILE``, or a file path."""
    items: list[ClozeItem] = []
    for spec in specs:
        if spec == "builtin":
            items += builtin_items(seed, per_category)
        elif spec.startswith("builtin:"):
            name = spec.split(":", 1)[1]
            if name not in CATEGORIES:
                raise DataError(f"unknown built-in category '{name}'{did_you_mean(name, list(CATEGORIES))}; "
                                f"known: {', '.join(CATEGORIES)}")
            items += builtin_items(seed, per_category, (name,))
        elif spec.startswith("ettinger:"):
            for file in ettinger_files(spec):
                items += load_ettinger(file)
        else:
            items += load_item_file(Path(spec).expanduser())
    ids = [it.id for it in items]
    if len(ids) != len(set(ids)):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise DataError(f"cloze item id '{dup}' appears twice; give every item its own id")
    return items
