"""Dependency treebanks in CoNLL-U (Universal Dependencies) as examples with words and annotation layers.

Parsing is the ``conllu`` package's; this module only checks what it parses and maps each sentence to an
``Example``: ``words`` (the FORM column), ``spans`` (each word's characters in ``text``, the words joined
by single spaces) and the layers ``head`` (1-based, 0 for the root), ``deprel`` and ``upos``.
Multiword tokens (ids such as ``3-4``: "don't" over "do" and "n't") and empty nodes (``8.1``, enhanced
dependencies only) are skipped: the syntactic words carry the basic tree. Any malformed line is a
``DataError`` naming the file and the line.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bertprobe.data.dataset import Dataset, DataSpec, Example, check_text_file
from bertprobe.errors import DataError


def _blocks(text: str) -> Iterator[tuple[int, list[str]]]:
    """(first line number, lines) of each sentence block, blocks separated by blank lines."""
    start, lines = 1, []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            if not lines:
                start = number
            lines.append(line)
        elif lines:
            yield start, lines
            lines = []
    if lines:
        yield start, lines


def _parse_block(path: Path, start: int, lines: list[str]) -> Any:
    import conllu
    from conllu.exceptions import ParseException

    for offset, line in enumerate(lines):
        if not line.startswith("#") and len(line.split("\t")) != 10:
            raise DataError(f"'{path}' line {start + offset}: a token line has {len(line.split(chr(9)))} tab-separated "
                            "fields, CoNLL-U has 10 (ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC)")
    try:
        sentences = conllu.parse("\n".join(lines) + "\n\n")
    except ParseException as exc:
        for offset, line in enumerate(lines):  # find the line conllu rejects
            if line.startswith("#"):
                continue
            try:
                conllu.parse(line + "\n\n")
            except ParseException as inner:
                raise DataError(f"'{path}' line {start + offset}: {inner}") from None
        raise DataError(f"'{path}' lines {start}-{start + len(lines) - 1}: {exc}") from None
    return sentences[0] if sentences else None


def sentence_example(path: Path, start: int, sentence: Any, index: int) -> Example | None:
    """The example of one parsed sentence (None for a block of comments only)."""
    words: list[str] = []
    heads: list[int] = []
    deprels: list[str] = []
    upos: list[str] = []
    line = start + len(sentence.metadata)
    for offset, token in enumerate(sentence):
        if not isinstance(token["id"], int):  # multiword token (tuple with '-') or empty node (tuple with '.')
            continue
        where = f"'{path}' line {line + offset}"
        if token["id"] != len(words) + 1:
            raise DataError(f"{where}: word id {token['id']} out of order (expected {len(words) + 1})")
        if not isinstance(token["head"], int):
            raise DataError(f"{where}: HEAD is {token['head']!r}; basic dependencies need a word id (0 for the root)")
        if not token["form"] or not token["deprel"] or token["deprel"] == "_":
            raise DataError(f"{where}: FORM and DEPREL must not be empty")
        words.append(str(token["form"]))
        heads.append(token["head"])
        deprels.append(str(token["deprel"]))
        upos.append(str(token["upos"] or "_"))
    if not words:
        return None
    for offset, head in enumerate(heads):
        if head > len(words):
            raise DataError(f"'{path}' sentence at line {start}: word {offset + 1} has head {head}, "
                            f"but the sentence has {len(words)} words")
    spans, text, at = [], [], 0
    for word in words:
        spans.append((at, at + len(word)))
        text.append(word)
        at += len(word) + 1
    sent_id = str(sentence.metadata.get("sent_id", index))
    return Example(text=" ".join(text), id=sent_id, words=tuple(words), spans=tuple(spans),
                   layers={"head": tuple(heads), "deprel": tuple(deprels), "upos": tuple(upos)})


def read_conllu(path: Path, name: str | None = None) -> Dataset:
    """Every sentence of a CoNLL-U file, checked (see the module docstring)."""
    text = check_text_file(path)
    examples = []
    for start, lines in _blocks(text):
        sentence = _parse_block(path, start, lines)
        example = sentence_example(path, start, sentence, len(examples)) if sentence is not None else None
        if example is not None:
            examples.append(example)
    if not examples:
        raise DataError(f"'{path}' holds no sentences; is it a CoNLL-U file?")
    return Dataset(examples, name=name or path.stem)


class ConlluLoader:
    """``loader: conllu`` (or any ``.conllu`` path): a Universal Dependencies treebank file."""

    name = "conllu"
    description = "CoNLL-U dependency treebank (Universal Dependencies): words, heads, relations"

    def load(self, spec: DataSpec) -> Dataset:
        if not spec.path:
            raise DataError("loader conllu needs data.path: a .conllu file")
        return read_conllu(Path(spec.path).expanduser())
