"""Retrieval data in BEIR's layout: a folder of ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``.

The layout and field names are BEIR's (Thakur et al. 2021; ``GenericDataLoader`` in ``beir/datasets/data_loader.py``):
corpus rows ``{"_id", "title", "text"}``, query rows ``{"_id", "text"}``, and a qrels TSV with a header row
(``query-id``, ``corpus-id``, ``score``). Every form becomes one ``Example`` per query that has qrels:

* ``text``: the query, verbatim; ``id``: its ``_id``;
* ``label``: its judgements as a tuple of ``(corpus id, grade)`` pairs in file order (grade 0 is a judged
  non-relevant document, as in TREC);
* the dataset's ``corpus`` (``Corpus``): every document, in file order.

Unlike BEIR's loader, which skips what it cannot read, every problem of the folder is collected and raised at
once, naming the file, line and id: a row that is no JSON object, a missing or repeated ``_id``, an empty text, a
qrel naming no document or no query, a grade that is no whole number, a query without qrels (named, not dropped:
an audit that silently drops queries reports a better score than the data hold), a query without a relevant
document. Queries without qrels may be allowed with ``data.options.unjudged: drop``.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertprobe.data.dataset import Dataset, DataSpec, Example, check_text_file
from bertprobe.errors import DataError, RowProblems

FILES = ("corpus.jsonl", "queries.jsonl")
SPLITS = ("test", "dev", "validation", "train")  # the split read when the suite's (validation) is absent


@dataclass(frozen=True)
class Corpus:
    """The documents a query is searched against, in file order (``ids[i]``, ``titles[i]``, ``texts[i]``)."""

    ids: tuple[str, ...]
    texts: tuple[str, ...]
    titles: tuple[str, ...] = ()
    name: str = ""
    index: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.index:
            self.index.update({d: i for i, d in enumerate(self.ids)})
        if not self.titles:
            object.__setattr__(self, "titles", ("",) * len(self.ids))

    def __len__(self) -> int:
        return len(self.ids)

    def passage(self, i: int) -> str:
        """What a bi-encoder reads of document ``i``: its title and text, as BEIR's models read them."""
        title = self.titles[i]
        return f"{title} {self.texts[i]}".strip() if title else self.texts[i]

    def with_documents(self, ids: Sequence[str], texts: Sequence[str]) -> Corpus:
        """This corpus with documents appended (a poisoned corpus)."""
        return Corpus(self.ids + tuple(ids), self.texts + tuple(texts), self.titles + ("",) * len(ids), self.name)

    @functools.cached_property
    def fingerprint(self) -> str:
        """sha256 over the documents (ids, titles, texts), computed once: every search and cache key asks."""
        digest = hashlib.sha256()
        for d, title, text in zip(self.ids, self.titles, self.texts):
            digest.update(json.dumps([d, title, text]).encode("utf-8"))
        return digest.hexdigest()


def is_beir_folder(path: Path) -> bool:
    """A folder in BEIR's layout: ``corpus.jsonl`` and ``queries.jsonl`` (and a ``qrels`` folder)."""
    return path.is_dir() and all((path / name).is_file() for name in FILES)


def title_text(title: str) -> str:
    """A BEIR title as a model reads it: SQuAD- and Wikipedia-style underscores are spaces."""
    return title.replace("_", " ").strip()


def _jsonl(path: Path, rows: RowProblems, wants: Sequence[str]) -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSONL file with their 1-based line numbers; a bad line is a problem in ``rows``."""
    out = []
    for number, line in enumerate(check_text_file(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            rows.add(f"line {number} of {path.name}: not JSON ({exc.msg}); each line must be one object with "
                     f"{', '.join(wants)}")
            continue
        if not isinstance(value, dict):
            rows.add(f"line {number} of {path.name}: a JSON {type(value).__name__}, not an object with "
                     f"{', '.join(wants)}")
            continue
        out.append((number, value))
    return out


def _row_id(row: dict[str, Any], number: int, file: str, rows: RowProblems) -> str | None:
    """A row's ``_id`` as a string (a number is read as its digits); None, with the problem in ``rows``, without one."""
    value = row.get("_id")
    if not isinstance(value, (str, int)) or str(value) == "":
        rows.add(f"line {number} of {file}: no _id")
        return None
    return str(value)


def qrels_file(folder: Path, split: str) -> Path:
    """The qrels file of ``split`` (``qrels/<split>.tsv``); a suite's default split (validation) falls back to the
    first of test, dev, train that exists."""
    qrels = folder / "qrels"
    if not qrels.is_dir():
        raise DataError(f"'{folder}' has corpus.jsonl and queries.jsonl but no qrels/ folder; BEIR data keep their "
                        "judgements in qrels/<split>.tsv (query-id, corpus-id, score)")
    wanted = qrels / f"{split}.tsv"
    if wanted.is_file():
        return wanted
    present = sorted(p.stem for p in qrels.glob("*.tsv"))
    if split == DataSpec.split:
        for name in SPLITS:
            if name in present:
                return qrels / f"{name}.tsv"
    raise DataError(f"'{wanted}' does not exist; the splits in {qrels}: {', '.join(present) or 'none'} "
                    "(set data.split to one of them)")


def read_beir(folder: Path, spec: DataSpec | None = None) -> Dataset:
    """Queries with their judgements and the corpus, from a BEIR folder; every problem at once (a DataError)."""
    spec = spec or DataSpec(path=str(folder))
    rows = RowProblems()
    ids: list[str] = []
    texts: list[str] = []
    titles: list[str] = []
    seen: dict[str, int] = {}
    corpus_path = folder / "corpus.jsonl"
    for number, row in _jsonl(corpus_path, rows, ("_id", "text")):
        doc = _row_id(row, number, "corpus.jsonl", rows)
        text = row.get("text")
        title = row.get("title") or ""
        if doc is None:
            continue
        if doc in seen:
            rows.add(f"line {number} of corpus.jsonl: document id '{doc}' repeats line {seen[doc]}; ids must be unique")
            continue
        seen[doc] = number
        if not isinstance(text, str) or not (text.strip() or str(title).strip()):
            rows.add(f"line {number} of corpus.jsonl: document '{doc}' has an empty text")
            continue
        ids.append(doc)
        texts.append(text)
        titles.append(title_text(str(title)))
    queries: dict[str, tuple[int, str]] = {}
    for number, row in _jsonl(folder / "queries.jsonl", rows, ("_id", "text")):
        query = _row_id(row, number, "queries.jsonl", rows)
        text = row.get("text")
        if query is None:
            continue
        if query in queries:
            rows.add(f"line {number} of queries.jsonl: query id '{query}' repeats line {queries[query][0]}")
            continue
        if not isinstance(text, str) or not text.strip():
            rows.add(f"line {number} of queries.jsonl: query '{query}' has an empty text")
            continue
        queries[query] = (number, text)
    qrels_path = qrels_file(folder, spec.split)
    judged: dict[str, list[tuple[str, int]]] = {}
    kept = set(ids)
    lines = check_text_file(qrels_path).splitlines()
    where = f"{qrels_path.parent.name}/{qrels_path.name}"
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        cells = line.rstrip("\r").split("\t")
        if number == 1 and cells and not cells[-1].strip().lstrip("-").isdigit():
            continue  # the header row BEIR keeps
        if len(cells) == 4:  # TREC's qrels: query, iteration, document, grade
            cells = [cells[0], cells[2], cells[3]]
        if len(cells) != 3:
            rows.add(f"line {number} of {where}: {len(cells)} tab-separated fields, not 3 (query-id, corpus-id, score)")
            continue
        query, doc, grade = (c.strip() for c in cells)
        try:
            value = int(grade)
        except ValueError:
            rows.add(f"line {number} of {where}: score '{grade}' is no whole number (a relevance grade)")
            continue
        if doc not in seen:
            rows.add(f"line {number} of {where}: corpus-id '{doc}' names no document of corpus.jsonl")
        elif doc not in kept:
            rows.add(f"line {number} of {where}: corpus-id '{doc}' names a document that could not be read")
        if query not in queries:
            rows.add(f"line {number} of {where}: query-id '{query}' names no query of queries.jsonl")
            continue
        judged.setdefault(query, []).append((doc, value))
    unjudged = str((spec.options or {}).get("unjudged", "refuse"))
    if unjudged not in ("refuse", "drop"):
        raise DataError(f"data.options.unjudged: '{unjudged}' is neither refuse nor drop")
    examples = []
    for query, (number, text) in queries.items():
        grades = judged.get(query)
        if not grades:
            if unjudged == "refuse":
                rows.add(f"line {number} of queries.jsonl: query '{query}' has no qrels in {where}; give it its "
                         "judgements, or set data.options.unjudged: drop to leave such queries out")
            continue
        if not any(g > 0 for _, g in grades):
            rows.add(f"line {number} of queries.jsonl: query '{query}' has no relevant document in {where} (every "
                     "grade is 0), so no metric can score it")
            continue
        examples.append(Example(text=text, label=tuple(grades), id=query,
                                where=f"line {number} of {folder.name}/queries.jsonl"))
    rows.raise_if_any()
    if not examples:
        raise DataError(f"'{folder}' holds no query with qrels")
    corpus = Corpus(tuple(ids), tuple(texts), tuple(titles), name=folder.name)
    return Dataset(examples, name=folder.name, corpus=corpus)


class BeirLoader:
    """``loader: beir``: a folder in BEIR's layout (also found by ``--data FOLDER`` alone)."""

    name = "beir"
    reads_local_files = True
    description = "retrieval: a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)"

    def load(self, spec: DataSpec) -> Dataset:
        if not spec.path:
            raise DataError("loader beir needs data.path: a folder with corpus.jsonl, queries.jsonl and qrels/")
        folder = Path(spec.path).expanduser()
        if not is_beir_folder(folder):
            raise DataError(f"'{spec.path}' is not a BEIR folder (it needs corpus.jsonl and queries.jsonl, and "
                            "qrels/<split>.tsv)")
        return read_beir(folder, spec)
