"""Evaluation data: a DataSpec names a hub dataset, a local csv/tsv/jsonl file, or a named loader."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from bertprobe.errors import DataError
from bertprobe.registry import did_you_mean

LABEL_LIKE = {"label", "labels", "sentiment", "class", "target", "gold", "y", "category", "polarity"}
TEXT_DEFAULTS = ("sentence", "text", "sentence1", "premise", "question", "content", "review")
LOCAL_FORMATS = {".csv": "csv", ".tsv": "tsv", ".txt": "tsv", ".jsonl": "json", ".json": "json", ".conllu": "conllu"}


@dataclass(frozen=True)
class DataSpec:
    """Where the examples come from and which fields hold text, pair text, label and choices."""

    path: str | None = None
    loader: str | None = None
    config: str | None = None
    split: str = "validation"
    text: str | int | None = None
    text_pair: str | int | None = None
    label: str | int | None = "label"
    choices: tuple[str | int, ...] | None = None
    limit: int | None = None
    sample: Literal["random", "first"] = "random"
    label_map: dict[str, str] = field(default_factory=dict)  # the data's label -> the model's class name
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise ValueError("limit must be at least 1 (leave it out to use every example)")

    def with_overrides(self, **changes: Any) -> DataSpec:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def describe(self) -> str:
        if self.loader:
            return f"{self.loader}:{self.path or ''}"
        extra = f" ({self.config}/{self.split})" if self.config and not _is_local(self.path or "") else ""
        return f"{self.path}{extra}"


@dataclass(frozen=True)
class Example:
    """One input. ``label`` is an int class index (or choice index) once aligned to a target."""

    text: str
    text_pair: str | None = None
    label: int | str | None = None
    choices: tuple[str, ...] | None = None
    id: str = ""
    meta: dict[str, Any] = field(default_factory=dict, compare=False)
    # token-level data (a treebank): the words, their (start, end) characters in ``text``, and per-word
    # annotation layers such as head (1-based, 0 = root), deprel and upos; Target maps words to tokens
    words: tuple[str, ...] | None = None
    spans: tuple[tuple[int, int], ...] | None = None
    layers: dict[str, tuple[Any, ...]] = field(default_factory=dict, compare=False)


@dataclass
class Dataset:
    """Examples plus what is known about their labels."""

    examples: list[Example]
    name: str = ""
    label_names: list[str] | None = None

    def __len__(self) -> int:
        return len(self.examples)

    def labels(self) -> list[int]:
        return [int(ex.label) for ex in self.examples]  # type: ignore[arg-type]

    @property
    def features(self) -> frozenset[str]:
        """What every example has, as probe requirements name it: ``data:labels``, ``data:text-pair``,
        ``data:choices``, ``data:words`` and ``data:layer:<name>`` for each annotation layer."""
        if not self.examples:
            return frozenset()
        have = {"data:labels": all(ex.label is not None for ex in self.examples),
                "data:text-pair": all(ex.text_pair is not None for ex in self.examples),
                "data:choices": all(ex.choices for ex in self.examples),
                "data:words": all(ex.words and ex.spans for ex in self.examples)}
        layers = set.intersection(*(set(ex.layers) for ex in self.examples))
        return frozenset([k for k, ok in have.items() if ok] + [f"data:layer:{name}" for name in sorted(layers)])


class DatasetLoader(Protocol):
    """A named loader registered through ``bertprobe_register_datasets``."""

    name: str
    description: str

    def load(self, spec: DataSpec) -> Dataset: ...


def check_text_file(path: Path) -> None:
    """The one check of an external text file: it exists, is a file, is not binary and decodes as UTF-8.

    Every problem is a DataError naming the file (and the line, for a decoding error).
    """
    if path.is_dir():
        raise DataError(f"'{path}' is a folder, not a data file; name a csv/tsv/jsonl file in it")
    if not path.is_file():
        raise DataError(f"data file '{path}' does not exist; pass --data PATH to a csv/tsv/jsonl file")
    data = path.read_bytes()
    if not data:
        raise DataError(f"data file '{path}' is empty")
    if b"\x00" in data[:65536]:
        raise DataError(f"'{path}' looks binary (it holds NUL bytes), not a csv/tsv/jsonl text file")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(f"'{path}' line {line}: not UTF-8 text ({exc.reason}); save the file as UTF-8") from None


def _root_message(exc: BaseException) -> str:
    """The most specific message in an exception chain (datasets wraps pandas' 'Expected 2 fields in line 5')."""
    messages = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current).strip()
        if text:
            messages.append(text.splitlines()[0])
        current = current.__cause__ or current.__context__
    generic = ("An error occurred while generating the dataset",)
    useful = [m for m in messages if not m.startswith(generic)]
    return (useful[-1] if useful else messages[0] if messages else type(exc).__name__)


def _load_file(path: Path, builder: str, **kwargs: Any) -> Any:
    """Load one local file with a datasets builder; every failure becomes a one-line DataError."""
    import logging

    import datasets

    check_text_file(path)
    datasets.disable_progress_bars()
    logger = logging.getLogger("datasets")
    level = logger.level
    logger.setLevel(logging.CRITICAL)  # datasets logs the parser's error separately: it goes into ours
    try:
        return datasets.load_dataset(builder, data_files=str(path), split="train", **kwargs)
    except Exception as exc:  # datasets raises many types for malformed files
        if "corresponds to no data" in str(exc):
            raise DataError(f"'{path}' has no rows") from None
        raise DataError(f"cannot read '{path}': {_root_message(exc)}") from None
    finally:
        logger.setLevel(level)


def read_delimited(path: Path, sep: str = "\t", quoted: bool = False) -> Any:
    """Read a delimited file; ``quoted=False`` treats every '"' as text (GLUE, SemEval) and cells such as
    'NA' or 'null' stay text either way."""
    return _load_file(path, "csv", sep=sep, quoting=0 if quoted else 3, keep_default_na=False)


def _read_local(path: Path) -> Any:
    fmt = LOCAL_FORMATS.get(path.suffix.lower())
    if fmt is None and path.is_file():
        raise DataError(f"data file '{path}' has an unknown extension; use .csv, .tsv, .jsonl or .conllu")
    if fmt == "tsv":  # GLUE-style: tab separated, bare quotes are literal text
        return read_delimited(path, "\t", quoted=False)
    if fmt == "csv":
        return read_delimited(path, ",", quoted=True)
    return _load_file(path, "json")


def _read_hub(spec: DataSpec) -> Any:
    import datasets

    from bertprobe.hub import hub_reachable, offline_mode, quiet_hub_logs

    quiet_hub_logs()
    datasets.disable_progress_bars()
    if not offline_mode() and not hub_reachable():
        raise DataError(
            f"cannot load dataset '{spec.path}': the Hugging Face Hub is unreachable; pass --data PATH to a local "
            "csv/tsv/jsonl file (or set HF_HUB_OFFLINE=1 to use a cached copy)"
        )
    try:
        return datasets.load_dataset(spec.path, spec.config, split=spec.split)
    except ValueError as exc:
        raise DataError(f"dataset '{spec.path}': {str(exc).splitlines()[0]}") from None
    except Exception:
        raise DataError(
            f"cannot load dataset '{spec.path}' from the Hugging Face Hub (offline, or not cached); "
            "pass --data PATH to a local csv/tsv/jsonl file"
        ) from None


def _column(spec_value: str | int | None, columns: list[str], role: str, source: str,
            taken: tuple[str | None, ...] = ()) -> str | None:
    """The column for ``role``; a did-you-mean never points at a column another role already uses."""
    if spec_value is None:
        return None
    if isinstance(spec_value, int):
        if not 0 <= spec_value < len(columns):
            raise DataError(f"{role} column #{spec_value} is out of range: '{source}' has {len(columns)} columns")
        return columns[spec_value]
    if spec_value not in columns:
        free = [c for c in columns if c not in taken and not (role != "label" and c.lower() in LABEL_LIKE)]
        flag = {"text": "--text", "text_pair": "--text-pair", "label": "--label"}.get(role)
        hint = f" (or pass {flag} COL)" if flag else ""
        raise DataError(
            f"'{source}' has no column '{spec_value}' for {role}{did_you_mean(spec_value, free)}; "
            f"columns: {', '.join(columns)}; set data.{role}{hint}"
        )
    return spec_value


def _is_local(path: str) -> bool:
    p = Path(path).expanduser()
    return p.exists() or p.suffix.lower() in LOCAL_FORMATS or path.startswith((".", "/", "~"))


def load_table(spec: DataSpec) -> Dataset:
    """Load a hub dataset or local file into examples using the spec's field mapping."""
    if not spec.path:
        raise DataError("no data given: set data.path in the suite or pass --data PATH")
    local = _is_local(spec.path)
    if local and Path(spec.path).suffix.lower() == ".conllu":
        from bertprobe.treebank import read_conllu

        return read_conllu(Path(spec.path).expanduser())
    table = _read_local(Path(spec.path).expanduser()) if local else _read_hub(spec)
    columns = list(table.column_names)
    source = spec.path
    # The default label column is optional (unlabelled data); an explicitly named one must exist.
    default_missing = spec.label == DataSpec.label and spec.label not in columns
    label_col = None if default_missing else _column(spec.label, columns, "label", source)
    text_col = _column(spec.text, columns, "text", source, (label_col,)) if spec.text is not None else next(
        (c for c in TEXT_DEFAULTS if c in columns), None
    )
    if text_col is None:
        raise DataError(f"'{source}' has no text column; set data.text (or --text COL) to one of: {', '.join(columns)}")
    pair_col = _column(spec.text_pair, columns, "text_pair", source, (label_col, text_col))
    choice_cols = [_column(c, columns, "choices", source) for c in spec.choices] if spec.choices else None
    label_names = None
    feature = table.features.get(label_col) if label_col else None
    if feature is not None and hasattr(feature, "names"):
        label_names = list(feature.names)
    if len(table) == 0:
        raise DataError(f"'{source}' has no rows")
    examples = []
    for i, row in enumerate(table):
        text = row[text_col]
        if text is None:
            raise DataError(f"'{source}' row {i + 1}: empty {text_col}")
        examples.append(
            Example(
                text=str(text).strip(),
                text_pair=None if pair_col is None else str(row[pair_col]).strip(),
                label=None if label_col is None else row[label_col],
                choices=None if choice_cols is None else tuple(str(row[c]) for c in choice_cols),  # type: ignore[index]
                id=str(i),
            )
        )
    return Dataset(examples, name=Path(source).stem if local else source, label_names=label_names)


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


def align_labels(dataset: Dataset, label_names: Sequence[str], num_choices: int | None = None) -> Dataset:
    """Turn raw labels into the model's class indices; an unknown label raises DataError.

    String labels match the model's names case-insensitively (or are integer strings). Integer labels
    from a hub ClassLabel are re-mapped by name when both sides carry real names.
    """
    lookup = {name.lower(): i for i, name in enumerate(label_names)}
    remap: dict[int, int] | None = None
    if dataset.label_names and all(n.lower() in lookup for n in dataset.label_names):
        remap = {i: lookup[n.lower()] for i, n in enumerate(dataset.label_names)}
    size = num_choices if num_choices is not None else len(label_names)
    known = ", ".join(label_names) if label_names else f"0..{size - 1}"
    out = []
    for i, ex in enumerate(dataset.examples):
        raw = ex.label
        if raw is None:
            raise DataError(f"{dataset.name} row {i + 1} has no label; set data.label to the label column")
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
            raise DataError(
                f"label {raw!r} in {dataset.name} row {i + 1} is not one the model knows ({known}); "
                "fix the data's labels or point data.label at the right column"
            )
        out.append(replace(ex, label=value))
    return replace(dataset, examples=out, label_names=list(label_names) or None)


LoaderFn = Callable[[DataSpec], Dataset]


@dataclass
class FunctionLoader:
    """Adapt a plain function into a DatasetLoader."""

    name: str
    fn: LoaderFn
    description: str = ""

    def load(self, spec: DataSpec) -> Dataset:
        return self.fn(spec)
