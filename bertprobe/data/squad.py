"""Extractive QA data: SQuAD JSON, rows in the Hugging Face ``squad`` schema, and CSV/TSV question tables.

Every form becomes the same ``Example`` per question:

* ``text``: the question (stripped of surrounding whitespace);
* ``text_pair``: the context, verbatim (character offsets point into it, so it is never stripped);
* ``label``: the gold answers as a tuple of ``(answer text, character start)`` pairs, in the data's order,
  each checked to satisfy ``context[start:start + len(text)] == text``; ``()`` for an unanswerable
  question (SQuAD 2.0 ``is_impossible``, an empty ``answers`` list, an empty CSV answer cell); ``None``
  when the data carry no answers at all (unlabelled);
* ``id``: the question's id (SQuAD ``id``, a row's ``id`` column), else its row number from 0;
* ``meta``: ``title`` (SQuAD's article title, where given) and ``is_impossible``.

Forms (``load_table`` routes a local ``.json`` file holding ``{"data": [...paragraphs...]}`` and any table
with ``question`` and ``context`` columns here; ``loader: squad``, in ``data.squad_loader``, names it explicitly):

* SQuAD JSON, v1.1 and v2.0: ``data[].paragraphs[].qas[]`` with ``id``, ``question``, ``answers[]``
  (``text``, ``answer_start``) and, in v2.0, ``is_impossible``;
* JSONL rows or a hub dataset in the ``squad`` schema: ``id``, ``context``, ``question``, ``answers:
  {text: [...], answer_start: [...]}``;
* CSV/TSV with ``context``, ``question`` and ``answer`` columns (optional ``id`` and ``answer_start``):
  without ``answer_start`` the answer's start is found in the context, and an answer that does not occur
  there, or occurs more than once, is an error.

Each problem is one DataError naming the file and the question (or line): an ``answer_start`` that does
not point at its text (with the offset where the text does occur), an answer absent from its context, an
empty question or context, or a file of another task's shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bertprobe.data.dataset import Dataset, DataSpec, Example, check_text_file
from bertprobe.errors import DataError

ANSWER_COLUMNS = ("answers", "answer", "answer_text")


def looks_like_qa(columns: Sequence[str], spec: DataSpec | None = None) -> bool:
    """A table of questions: ``question`` and ``context`` columns, and no text columns named by the suite; with a
    label column (a sentence-pair classifier's ``question,context,label``), only where an answer column is too."""
    named = spec is not None and bool({"text", "text_pair"} & spec.named)
    labelled = "label" in columns or (spec is not None and "label" in spec.named)
    answered = bool(set(ANSWER_COLUMNS) & set(columns))
    return {"question", "context"} <= set(columns) and not named and (answered or not labelled)


def _short(text: str, width: int = 40) -> str:
    return repr(text if len(text) <= width else text[: width - 3] + "...")


def _occurrences(context: str, text: str) -> list[int]:
    out, at = [], context.find(text)
    while at >= 0 and text:
        out.append(at)
        at = context.find(text, at + 1)
    return out


def check_answer(context: str, text: str, start: Any, where: str) -> tuple[str, int]:
    """One gold answer as ``(text, start)``, checked to stand at ``start`` in ``context``; a DataError naming
    ``where`` ("question 56be4db0... of dev.json") and the offset where the text does occur."""
    if not isinstance(text, str) or not text.strip():
        raise DataError(f"{where}: an answer's text is empty; remove it (an unanswerable question has no answers)")
    if isinstance(start, str) and start.strip().lstrip("-").isdigit():
        start = int(start)
    if isinstance(start, float) and start.is_integer():
        start = int(start)
    if isinstance(start, bool) or not isinstance(start, int):
        raise DataError(f"{where}: answer_start of answer {_short(text)} is {start!r}, not a character offset")
    if context[start : start + len(text)] == text:
        return text, start
    found = _occurrences(context, text)
    if not found:
        raise DataError(f"{where}: answer {_short(text)} does not occur in its context (answer_start {start}); "
                        "fix the answer's text")
    nearest = min(found, key=lambda at: (abs(at - start), at))
    others = f" (it also occurs at {', '.join(map(str, [a for a in found if a != nearest][:3]))})" if len(found) > 1 else ""
    raise DataError(f"{where}: answer {_short(text)} starts at {nearest}, not {start}{others}; fix its answer_start")


def find_answer(context: str, text: str, where: str) -> tuple[str, int]:
    """A CSV answer without a start: its one occurrence in the context, else a DataError (absent, or ambiguous)."""
    found = _occurrences(context, text)
    if not found:
        raise DataError(f"{where}: answer {_short(text)} does not occur in its context; fix the answer (it must be a "
                        "span of the context, character for character)")
    if len(found) > 1:
        raise DataError(f"{where}: answer {_short(text)} occurs {len(found)} times in its context (at "
                        f"{', '.join(map(str, found[:5]))}); add an answer_start column to say which")
    return text, found[0]


def _example(question: Any, context: Any, label: tuple[tuple[str, int], ...] | None, qid: str, where: str,
             meta: Mapping[str, Any]) -> Example:
    if not isinstance(question, str) or not question.strip():
        raise DataError(f"{where}: the question is empty")
    if not isinstance(context, str) or not context.strip():
        raise DataError(f"{where}: the context is empty")
    return Example(text=question.strip(), text_pair=context, label=label, id=qid, where=where, meta=dict(meta))


def read_squad_json(path: Path, data: Any = None) -> Dataset:
    """Every question of a SQuAD v1.1 / v2.0 JSON file (``data``: the file already parsed)."""
    if data is None:
        data = _parse(path)
    name = str(path)
    articles = data.get("data") if isinstance(data, dict) else None
    if not isinstance(articles, list) or not all(isinstance(a, dict) and isinstance(a.get("paragraphs"), list) for a in articles):
        raise DataError(f"'{name}' is not SQuAD JSON: expected {{\"data\": [{{\"paragraphs\": [{{\"context\": ..., "
                        "\"qas\": [...]}]}]}; for other questions use JSONL rows with question, context and answers")
    examples = []
    for a, article in enumerate(articles):
        for p, paragraph in enumerate(article["paragraphs"]):
            context = paragraph.get("context") if isinstance(paragraph, dict) else None
            qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
            if not isinstance(qas, list):
                raise DataError(f"'{name}': paragraph {p} of article {a} has no list of qas")
            for q, qa in enumerate(qas):
                qid = str(qa.get("id", f"{a}.{p}.{q}")) if isinstance(qa, dict) else f"{a}.{p}.{q}"
                where = f"question {qid} of {name}"
                if not isinstance(qa, dict):
                    raise DataError(f"{where}: a question must be a JSON object with id, question and answers")
                impossible = bool(qa.get("is_impossible", False))
                answers = qa.get("answers")
                if answers is None:
                    label = None
                elif not isinstance(answers, list):
                    raise DataError(f"{where}: answers must be a list of {{text, answer_start}}")
                else:
                    if not isinstance(context, str) or not context.strip():
                        raise DataError(f"{where}: the context is empty")
                    if not answers and not impossible and "is_impossible" not in qa:
                        raise DataError(f"{where}: no answer, and the question is not marked is_impossible "
                                        "(SQuAD 2.0); give its answers or set is_impossible: true")
                    label = () if impossible else tuple(
                        check_answer(context, ans.get("text") if isinstance(ans, dict) else None,
                                     ans.get("answer_start") if isinstance(ans, dict) else None, where)
                        for ans in answers)
                meta = {"title": article.get("title", ""), "is_impossible": impossible}
                examples.append(_example(qa.get("question"), context, label, qid, where, meta))
    if not examples:
        raise DataError(f"'{name}' holds no question")
    return Dataset(examples, name=path.stem)


def _parse(path: Path) -> Any:
    text = check_text_file(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"line {exc.lineno} of '{path}': not valid JSON ({exc.msg} at column {exc.colno})") from None


def maybe_squad_json(path: Path) -> Dataset | None:
    """The questions of ``path`` when it is SQuAD JSON (one JSON object with a ``data`` list of articles that
    have paragraphs), else None (JSON Lines, or JSON of another shape, left to the table readers)."""
    text = check_text_file(path)
    if not text.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None  # JSON Lines ("Extra data"): the table reader's
    articles = data.get("data") if isinstance(data, dict) else None
    if isinstance(articles, list) and articles and isinstance(articles[0], dict) and "paragraphs" in articles[0]:
        return read_squad_json(path, data)
    return None


def qa_rows(rows: Iterable[Mapping[str, Any]], source: str, lines: Sequence[int] | None = None) -> list[Example]:
    """Examples from table rows with ``question`` and ``context`` (see the module docstring): ``answers`` in the
    ``squad`` schema, or an ``answer`` column (with an optional ``answer_start``); ``lines`` number the rows."""
    examples = []
    for i, row in enumerate(rows):
        where = f"line {lines[i]} of {source}" if lines else f"row {i + 1} of {source}"
        context = row.get("context")
        qid = str(row["id"]) if row.get("id") not in (None, "") else str(i)
        label: tuple[tuple[str, int], ...] | None = None
        column = next((c for c in ANSWER_COLUMNS if c in row), None)
        if column is not None and isinstance(context, str) and context.strip():
            value = row[column]
            if isinstance(value, Mapping):  # the squad schema: {text: [...], answer_start: [...]}
                texts, starts = list(value.get("text") or []), list(value.get("answer_start") or [])
                if len(texts) != len(starts):
                    raise DataError(f"{where}: answers has {len(texts)} text(s) but {len(starts)} answer_start(s)")
                label = tuple(check_answer(context, t, s, where) for t, s in zip(texts, starts))
            elif value is None or (isinstance(value, str) and not value.strip()):
                label = ()  # an empty answer cell: unanswerable
            elif isinstance(value, str):
                start = row.get("answer_start")
                given = start is not None and str(start).strip() != ""
                label = (check_answer(context, value, start, where) if given else find_answer(context, value, where),)
            else:
                raise DataError(f"{where}: {column} must be an answer's text or {{text: [...], answer_start: [...]}}, "
                                f"not {value!r}")
        meta = {"title": row.get("title") or "", "is_impossible": label == ()}
        examples.append(_example(row.get("question"), context, label, qid, where, meta))
    return examples


def qa_table(table: Any, spec: DataSpec, lines: Sequence[int] | None = None) -> Dataset:
    """A table (a datasets ``Dataset``) of QA rows as examples; ``lines``: the file line of each row."""
    source = spec.path or ""
    if len(table) == 0:
        raise DataError(f"'{source}' has no rows")
    local = Path(source).expanduser().exists()
    return Dataset(qa_rows(table, source, lines), name=Path(source).stem if local else source)
