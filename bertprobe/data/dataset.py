"""What data is: DataSpec (how to read it), Example, Dataset, and the loader protocol."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from bertprobe.errors import DataError

LABEL_LIKE = {"label", "labels", "sentiment", "class", "target", "gold", "y", "category", "polarity"}


TEXT_DEFAULTS = ("sentence", "text", "sentence1", "premise", "question", "content", "review")


LOCAL_FORMATS = {".csv": "csv", ".tsv": "tsv", ".txt": "tsv", ".jsonl": "json", ".json": "json", ".conllu": "conllu",
                 ".iob2": "conll", ".iob": "conll", ".bio": "conll", ".conll": "conll", ".conll03": "conll", ".ner": "conll",
                 ".parquet": "saved", ".arrow": "saved"}

SAVED_MARKERS = ("state.json", "dataset_dict.json")  # what datasets' save_to_disk writes into its folder


COLUMN_KEYS = ("text", "text_pair", "label", "choices")


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
    label_sep: str = ","  # multi-label: the separator of a label set written in one CSV/TSV column ("a,b")
    label_columns: tuple[str, ...] | None = None  # multi-label: one 0/1 column per label (default: the model's labels)
    options: dict[str, Any] = field(default_factory=dict)
    # the column keys a suite or a flag named (text, text_pair, label, choices): each must exist in the data,
    # where the default label column may be absent (unlabelled data); left out of equality and fingerprints
    named: frozenset[str] = field(default=frozenset(), compare=False, metadata={"internal": True})

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise ValueError("limit must be at least 1 (leave it out to use every example)")

    def with_overrides(self, **changes: Any) -> DataSpec:
        given = {k: v for k, v in changes.items() if v is not None}
        columns = {k for k in given if k in COLUMN_KEYS}
        return replace(self, **given, named=self.named | columns) if columns else replace(self, **given)

    def describe(self) -> str:
        if self.loader:
            return f"{self.loader}:{self.path or ''}"
        extra = f" ({self.config}/{self.split})" if self.config and not is_local(self.path or "") else ""
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
    where: str = field(default="", compare=False)  # "line 3 of reviews.csv", as an editor counts lines
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
    # retrieval data: the documents the examples (queries) are searched against (``bertprobe.data.beir.Corpus``);
    # a query's label holds its judgements as (document id, grade) pairs
    corpus: Any = None

    def __len__(self) -> int:
        return len(self.examples)

    def where(self, index: int) -> str:
        """Where example ``index`` came from, for an error message ("line 3 of reviews.csv")."""
        ex = self.examples[index]
        return ex.where or f"row {index + 1} of {self.name}"

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
                "data:words": all(ex.words and ex.spans for ex in self.examples),
                "data:corpus": self.corpus is not None}
        layers = set.intersection(*(set(ex.layers) for ex in self.examples))
        return frozenset([k for k, ok in have.items() if ok] + [f"data:layer:{name}" for name in sorted(layers)])


class DatasetLoader(Protocol):
    """A named loader registered through ``bertprobe_register_datasets``."""

    name: str
    description: str

    def load(self, spec: DataSpec) -> Dataset: ...


COMPRESSED = ((b"\x1f\x8b", "gzip", "gunzip -c"), (b"BZh", "bzip2", "bunzip2 -c"), (b"\xfd7zXZ\x00", "xz", "unxz -c"),
              (b"PK\x03\x04", "zip", "unzip -p"), (b"\x28\xb5\x2f\xfd", "zstd", "zstd -dc"))


def check_text_file(path: Path) -> str:
    """The one check of an external text file: it exists, is a file, is not binary and decodes as UTF-8.
    Returns the text, so that a reader parses what was checked instead of reading the file again.

    Every problem is a DataError naming the file (and the line, for a decoding error).
    """
    if path.is_dir():
        raise DataError(f"'{path}' is a folder, not a data file; name a csv/tsv/jsonl file in it")
    if not path.is_file():
        raise DataError(f"data file '{path}' does not exist; pass --data PATH to a csv/tsv/jsonl file")
    data = path.read_bytes()
    if not data:
        raise DataError(f"data file '{path}' is empty")
    try:
        data.decode("utf-8")
        text = b"\x00" not in data[:65536]
    except UnicodeDecodeError:
        text = False
    for magic, kind, tool in COMPRESSED if not text else ():  # compressed bytes are never clean UTF-8 text
        if data.startswith(magic):
            raise DataError(f"'{path}' is {kind}-compressed, not a plain csv/tsv/jsonl file; decompress it first "
                            f"({tool} '{path}' > plain{path.suffix})")
    if b"\x00" in data[:65536]:
        raise DataError(f"'{path}' looks binary (it holds NUL bytes), not a csv/tsv/jsonl text file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DataError(f"'{path}' line {line}: not UTF-8 text ({exc.reason}); save the file as UTF-8") from None


def is_saved_dataset(path: Path) -> bool:
    """A Hugging Face dataset stored locally: a folder ``save_to_disk`` wrote, or a ``.parquet``/``.arrow`` file."""
    if path.is_dir():
        return any((path / name).is_file() for name in SAVED_MARKERS)
    return path.is_file() and LOCAL_FORMATS.get(path.suffix.lower()) == "saved"


def is_local(path: str) -> bool:
    p = Path(path).expanduser()
    return p.exists() or p.suffix.lower() in LOCAL_FORMATS or path.startswith((".", "/", "~"))


LoaderFn = Callable[[DataSpec], Dataset]


@dataclass
class FunctionLoader:
    """Adapt a plain function into a DatasetLoader."""

    name: str
    fn: LoaderFn
    description: str = ""

    def load(self, spec: DataSpec) -> Dataset:
        return self.fn(spec)
