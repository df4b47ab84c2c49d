"""The data a probe sees: loaded once, ids checked, labels mapped and aligned to the model, fingerprinted."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bertprobe.data.dataset import Dataset, DataSpec
from bertprobe.data.tables import load_table
from bertprobe.errors import BertprobeError, DataError, RowProblems, first_line


def subsample(dataset: Dataset, limit: int | None, how: str, seed: int) -> Dataset:
    """Keep ``limit`` examples: a seeded random sample (in original order) or the first ones."""
    if not limit or limit >= len(dataset):
        return dataset
    if how == "first":
        keep = list(range(limit))
    else:
        keep = sorted(random.Random(seed).sample(range(len(dataset)), limit))
    return replace(dataset, examples=[dataset.examples[i] for i in keep])


def map_labels(dataset: Dataset, label_map: dict[str, str]) -> Dataset:
    """Rename the data's labels (``{pos: positive}``) before they are matched to the model's classes."""
    if not label_map:
        return dataset
    lookup = {str(k).strip().lower(): v for k, v in label_map.items()}
    out = [replace(ex, label=lookup.get(str(ex.label).strip().lower(), ex.label)) if ex.label is not None else ex
           for ex in dataset.examples]
    names = [lookup.get(n.lower(), n) for n in dataset.label_names] if dataset.label_names else None
    return replace(dataset, examples=out, label_names=names)


def align_labels(dataset: Dataset, label_names: Sequence[str], num_choices: int | None = None,
                 label_map: dict[str, str] | None = None) -> Dataset:
    """Turn raw labels into the model's class indices; an unknown label raises DataError.

    String labels match the model's names case-insensitively (or are integer strings). Integer labels
    from a hub ClassLabel are re-mapped by name when both sides carry real names. ``label_map`` (already
    applied) lets the error correct the map's own right-hand side (``neg=negativ`` -> ``neg=negative``).
    """
    lookup = {name.lower(): i for i, name in enumerate(label_names)}
    remap: dict[int, int] | None = None
    if dataset.label_names and all(n.lower() in lookup for n in dataset.label_names):
        remap = {i: lookup[n.lower()] for i, n in enumerate(dataset.label_names)}
    size = num_choices if num_choices is not None else len(label_names)
    known = ", ".join(label_names) if label_names else f"0..{size - 1}"
    out = []
    rows = RowProblems()
    fixes: list[str] = []  # the --label-map fix, worked out once for every unknown label of the file
    for i, ex in enumerate(dataset.examples):
        raw = ex.label
        if raw is None:
            rows.add(f"{dataset.where(i)} has no label; set data.label to the label column")
            continue
        if isinstance(raw, (list, tuple, set, dict)):
            rows.add(f"label {raw!r} on {dataset.where(i)} is a set of labels, but the model is a single-label "
                     "classifier (one class per example); give one label per example, or audit a multi-label "
                     "model (problem_type: multi_label_classification in its config.json)")
            continue
        value: int | None = None
        if isinstance(raw, bool):
            value = int(raw)
        elif isinstance(raw, int):
            value = remap.get(raw, raw) if remap else raw
        elif isinstance(raw, float) and raw.is_integer():
            value = int(raw)
        elif isinstance(raw, str):
            text = raw.strip()
            value = lookup.get(text.lower())
            if value is None and text.lstrip("-").isdigit():
                value = int(text)
        if value is None or not 0 <= value < size:
            if not fixes:
                fixes.append(label_map_hint(dataset, label_names, lookup, label_map or {}) if label_names else "")
            fix = fixes[0]
            rows.add(
                f"label {raw!r} on {dataset.where(i)} is not one the model knows ({known}); "
                + (f"map them with --label-map {fix}, " if fix else "") + "fix the data's labels or point data.label "
                "at the right column"
            )
            continue
        out.append(replace(ex, label=value))
    rows.raise_if_any()
    return replace(dataset, examples=out, label_names=list(label_names) or None)


def label_map_hint(dataset: Dataset, label_names: Sequence[str], lookup: dict[str, int],
                   label_map: dict[str, str] | None = None) -> str:
    """``pos=positive,neg=negative``: each unknown string label of the data paired with the model's class it
    most plausibly means (a prefix, or a close spelling); empty when any cannot be paired. A label that a
    ``label_map`` entry produced (a typo on its right-hand side) is paired under that entry's own key."""
    import difflib

    keys_of: dict[str, list[str]] = {}
    for key, value in (label_map or {}).items():
        keys_of.setdefault(str(value).strip().lower(), []).append(str(key))
    unknown = sorted({str(ex.label).strip() for ex in dataset.examples
                      if isinstance(ex.label, str) and ex.label.strip().lower() not in lookup})
    pairs = []
    for raw in unknown[:10]:
        low = raw.lower()
        prefixed = [n for n in label_names if n.lower().startswith(low) or low.startswith(n.lower())]
        close = difflib.get_close_matches(low, [n.lower() for n in label_names], n=1, cutoff=0.5)
        name = prefixed[0] if len(prefixed) == 1 else next((n for n in label_names if close and n.lower() == close[0]), None)
        if name is None:
            return ""
        pairs += [f"{key}={name}" for key in keys_of.get(low, [raw])]
    if label_map:  # the whole map as it should read: its good entries kept, the broken ones corrected
        fixed = {str(k): str(v) for k, v in label_map.items()}
        fixed.update(pair.split("=", 1) for pair in pairs)  # type: ignore[arg-type]
        return ",".join(f"{k}={v}" for k, v in fixed.items())
    return ",".join(pairs)


def load_with(loader: Any, spec: DataSpec) -> Dataset:
    """A named loader's data; anything it raises besides a BertprobeError becomes a DataError naming it."""
    if isinstance(loader, type):  # registered as a class: an instance is what loads
        loader = loader()
    try:
        data = loader.load(spec)
    except BertprobeError:
        raise
    except Exception as exc:  # a plugin's loader: its failure on this input is bad input, reported in one line
        message = first_line(exc)
        raise DataError(f"data loader '{spec.loader}' failed on '{spec.path}': {type(exc).__name__}"
                        + (f": {message}" if message else "")) from None
    if not isinstance(data, Dataset):
        raise DataError(f"data loader '{spec.loader}' returned {type(data).__name__}, not a bertprobe Dataset")
    return data


def check_ids(data: Dataset) -> None:
    """Example ids key per-example outcomes: they must be unique (and stable for a given file)."""
    seen: set[str] = set()
    for i, ex in enumerate(data.examples):
        if ex.id in seen:
            raise DataError(f"{data.name}: example id '{ex.id}' ({data.where(i)}) is not unique; ids key per-example outcomes")
        seen.add(ex.id)


def fingerprint(data: Dataset) -> str:
    """sha256 over the examples' ids, texts, labels and choices: equal data give equal fingerprints."""
    digest = hashlib.sha256()
    for ex in data.examples:
        digest.update(json.dumps([ex.id, ex.text, ex.text_pair, ex.label, ex.choices], default=str).encode("utf-8"))
    if data.corpus is not None:  # retrieval: the same queries over another corpus are other data
        digest.update(data.corpus.fingerprint.encode("ascii"))
    return digest.hexdigest()


def read_data(spec: DataSpec, loader: Any, seed: int) -> Dataset:
    """Read the data ``spec`` names (with a named ``loader``, else the table readers), check its ids, map
    its labels and take the suite's sample."""
    raw = load_with(loader, spec) if loader is not None else load_table(spec)
    check_ids(raw)
    raw = map_labels(raw, spec.label_map)
    return subsample(raw, spec.limit, spec.sample, seed)
