"""NER data in CoNLL-style column files: one word per line, a blank line between sentences.

Recognised without configuration: UNER's ``.iob2`` (index, word, tag, then more columns: the first
column counts 1, 2, 3... within each sentence) and CoNLL-2003's layout (the word first, the tag last).
``data.text`` and ``data.label`` pick the word and tag columns by 0-based index instead. Lines starting
with ``#`` are comments (``# sent_id = ...`` becomes the example id), ``-DOCSTART-`` lines are skipped,
and columns are split on tabs (or on runs of spaces when a file has no tab). Each sentence becomes an
``Example`` with ``words``, their ``spans`` in ``text`` (the words joined by single spaces) and the tags
as its ``label``. A line with too few columns is a ``DataError`` naming the file and line.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from bertprobe.data.dataset import Dataset, DataSpec, Example, check_text_file
from bertprobe.errors import DataError, RowProblems

CONLL_SUFFIXES = (".iob2", ".iob", ".bio", ".conll", ".conll03", ".ner")


SNIFFED_SUFFIXES = (".txt", ".tsv")  # read as a table unless they look like a column file
_TAG = re.compile(r"^(O|[BIESLU][-_]\S+)$")


def looks_like_conll(path: Path, lines: int = 20) -> bool:
    """Whether a file's first lines are a CoNLL column file: ``-DOCSTART-`` first, or every line of the first
    ``lines`` (blank and ``#`` lines aside) a word and more columns whose last is an IOB tag (O, B-PER...)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            head = [line.strip() for line in itertools.islice(handle, 200)]
    except OSError:
        return False
    sample = [line for line in head if line and not line.startswith("#")][:lines]
    if sample and sample[0].split()[0] == "-DOCSTART-":
        return True
    rows = [_fields(line) for line in sample]
    return len(rows) >= 2 and all(len(r) >= 2 and _TAG.match(r[-1].strip()) for r in rows)


def _fields(line: str) -> list[str]:
    return line.split("\t") if "\t" in line else line.split()


def _layout(rows: list[list[str]]) -> tuple[int, int]:
    """(word column, tag column): UNER-like when the first column numbers the words, else first and last."""
    numbered = rows and all(r[0].isdigit() for r in rows[:50]) and len(rows[0]) >= 3
    return (1, 2) if numbered else (0, -1)


def read_conll(path: Path, spec: DataSpec | None = None) -> Dataset:
    """Every sentence of a column file as a word-level example (see the module docstring)."""
    text = check_text_file(path)
    blocks: list[tuple[int, list[tuple[int, list[str]]], str | None]] = []
    current: list[tuple[int, list[str]]] = []
    sent_id: str | None = None
    start = 1
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            if current:
                blocks.append((start, current, sent_id))
            current, sent_id = [], None
            continue
        if stripped.startswith("#"):
            if stripped.lower().startswith("# sent_id") and "=" in stripped:
                sent_id = stripped.split("=", 1)[1].strip()
            continue
        fields = _fields(line.rstrip("\n"))
        if fields[0] == "-DOCSTART-":
            continue
        if not current:
            start = number
        current.append((number, fields))
    if current:
        blocks.append((start, current, sent_id))
    if not blocks:
        raise DataError(f"'{path}' holds no sentence (one word per line, a blank line between sentences)")
    first_rows = [f for _, rows, _ in blocks[:20] for _, f in rows]
    word_col, tag_col = _layout(first_rows)
    if spec is not None and isinstance(spec.text, int):
        word_col = spec.text
    if spec is not None and isinstance(spec.label, int):
        tag_col = spec.label
    needed = max(word_col, tag_col) + 1 if tag_col >= 0 else 2
    examples = []
    seen: set[str] = set()
    bad = RowProblems()
    for index, (first, rows, sid) in enumerate(blocks):
        words, tags, lines = [], [], []
        for number, fields in rows:
            if len(fields) < needed:
                bad.add(f"line {number} of {path}: {len(fields)} column(s), but the word is column {word_col} "
                        f"and the tag column {tag_col} (0-based); is the tag missing? set data.text and "
                        "data.label to the column indexes")
                continue
            words.append(fields[word_col])
            tags.append(fields[tag_col])
            lines.append(number)
        spans, at = [], 0
        for word in words:
            spans.append((at, at + len(word)))
            at += len(word) + 1
        key = sid if sid and sid not in seen else str(index)
        seen.add(key)
        examples.append(Example(text=" ".join(words), label=tuple(tags), id=key, words=tuple(words),
                                spans=tuple(spans), where=f"line {first} of {path}", meta={"lines": tuple(lines)}))
    bad.raise_if_any()
    return Dataset(examples, name=path.stem)


class ConllLoader:
    """``loader: conll`` (or any ``.iob2``/``.conll`` path): NER tags in a column file, whatever its extension."""

    name = "conll"
    description = "CoNLL-style NER column file (UNER .iob2, CoNLL-2003): one word and its tag per line"

    def load(self, spec: DataSpec) -> Dataset:
        if not spec.path:
            raise DataError("loader conll needs data.path: a column file (one word and its tag per line)")
        return read_conll(Path(spec.path).expanduser(), spec)
