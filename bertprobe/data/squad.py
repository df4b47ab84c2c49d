"""Extractive QA data: SQuAD JSON, rows in the Hugging Face ``squad`` schema, and CSV/TSV question tables.

Every form becomes the same ``Example`` per question:

* ``text``: the question (stripped of surrounding whitespace);
* ``text_pair``: the context, verbatim (character offsets point into it, so it is never stripped);
* ``label``: the gold answers as a tuple of ``(answer text, character start)`` pairs, in the data's order,
  each checked to satisfy ``context[start:start + len(text)] == text``; ``()`` for an unanswerable
  question (SQuAD 2.0 ``is_impossible``, an empty ``answers`` list, an empty CSV answer cell); ``None``
  when the data carry no answers at all (unlabelled);
* ``id``: the question's id (SQuAD ``id``, a row's ``id`` column), else its row number from 0;
* ``meta``: ``title`` (SQuAD's article title, where given), ``is_impossible``, and a table's other columns.

Forms (``load_table`` routes a local ``.json`` file holding ``{"data": [...paragraphs...]}`` and any table
with ``question`` and ``context`` columns here; ``loader: squad``, in ``data.squad_loader``, names it explicitly):

* SQuAD JSON, v1.1 and v2.0: ``data[].paragraphs[].qas[]`` with ``id``, ``question``, ``answers[]``
  (``text``, ``answer_start``) and, in v2.0, ``is_impossible`` (``plausible_answers`` are ignored);
* JSONL rows, a saved Hugging Face dataset (``save_to_disk``, ``.parquet``, ``.arrow``) or a hub dataset in the
  ``squad`` schema: ``id``, ``title``, ``context``, ``question``, ``answers: {text: [...], answer_start: [...]}``;
* CSV/TSV with ``context``, ``question`` and ``answer`` columns (optional ``id`` and ``answer_start``):
  without ``answer_start`` the answer's start is found in the context, and an answer that does not occur
  there, or occurs more than once, is an error.

Every problem of a file is collected (``RowProblems``: the same problem on many rows is one line naming them)
and raised at once, naming the file and the question id (SQuAD JSON) or line: an ``answer_start`` that does
not point at its text (with the offset where the text does occur), an answer absent from its context, an
ambiguous CSV answer, an empty question or context, a question id used twice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bertprobe.data.dataset import Dataset, DataSpec, Example
from bertprobe.errors import DataError, RowProblems

ANSWER_COLUMNS = ("answers", "answer", "answer_text")
QA_COLUMNS = ("id", "title", "question", "context", "answer_start", *ANSWER_COLUMNS)  # the rest go into meta
UNIQUE_IDS = "ids key per-question outcomes: make each unique"


def looks_like_qa(columns: Sequence[str], spec: DataSpec | None = None) -> bool:
    """A table of questions: ``question`` and ``context`` columns, and no text columns named by the suite; with a
    label column (a sentence-pair classifier's ``question,context,label``), only where an answer column is too."""
    named = spec is not None and bool({"text", "text_pair"} & spec.named)
    labelled = "label" in columns or (spec is not None and "label" in spec.named)
    answered = bool(set(ANSWER_COLUMNS) & set(columns))
    return {"question", "context"} <= set(columns) and not named and (answered or not labelled)


def is_squad_document(value: Any) -> bool:
    """Whether a parsed JSON document is SQuAD JSON: an object whose ``data`` lists articles with paragraphs."""
    articles = value.get("data") if isinstance(value, dict) else None
    return isinstance(articles, list) and bool(articles) and isinstance(articles[0], dict) and "paragraphs" in articles[0]


def is_answers(label: Any) -> bool:
    """Whether ``label`` is a QA gold: a tuple of (answer text, character start) pairs (``()``: unanswerable)."""
    return isinstance(label, tuple) and all(
        isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], int) for p in label)


def is_question(ex: Example) -> bool:
    """Whether ``ex`` came from a QA reader: a question with its context, and answers or none."""
    return ex.text_pair is not None and "is_impossible" in ex.meta and (ex.label is None or is_answers(ex.label))


def holds_questions(data: Dataset) -> bool:
    """Whether every example of ``data`` is a question with its context (what the QA readers give)."""
    return bool(data.examples) and all(is_question(ex) for ex in data.examples)


def _short(text: str, width: int = 40) -> str:
    return repr(text if len(text) <= width else text[: width - 3] + "...")


def _occurrences(context: str, text: str) -> list[int]:
    out, at = [], context.find(text)
    while at >= 0 and text:
        out.append(at)
        at = context.find(text, at + 1)
    return out


def _offsets(found: Sequence[int], shown: int = 5) -> str:
    more = f" and {len(found) - shown} more" if len(found) > shown else ""
    return ", ".join(map(str, found[:shown])) + more


def _other_case(context: str, text: str) -> str:
    """Where ``text`` occurs in ``context`` in another case, as a hint for an absent answer ('' if nowhere)."""
    low = context.lower()
    if len(low) != len(context):
        return ""
    at = low.find(text.lower())
    return f"; it occurs at {at} as {_short(context[at : at + len(text)])}" if at >= 0 else ""


def check_answer(context: str, text: Any, start: Any, where: str) -> tuple[str, int]:
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
    if 0 <= start and context[start : start + len(text)] == text:
        return text, start
    found = _occurrences(context, text)
    if not found:
        raise DataError(f"{where}: answer {_short(text)} does not occur in its context (answer_start {start}"
                        f"{_other_case(context, text)}); fix the answer's text")
    nearest = min(found, key=lambda at: (abs(at - start), at))
    rest = [a for a in found if a != nearest]
    others = f" (it also occurs at {_offsets(rest, 3)})" if rest else ""
    encoded = text.encode("utf-8")
    in_bytes = start >= 0 and context.encode("utf-8")[start : start + len(encoded)] == encoded
    cause = " (answer_start counts UTF-8 bytes: count characters)" if in_bytes else ""
    raise DataError(f"{where}: answer {_short(text)} starts at {nearest} in its context, not {start}{others}; "
                    f"fix its answer_start{cause}")


def find_answer(context: str, text: str, where: str) -> tuple[str, int]:
    """A CSV answer without a start: its one occurrence in the context, else a DataError (absent, or ambiguous)."""
    found = _occurrences(context, text)
    if not found:
        raise DataError(f"{where}: answer {_short(text)} does not occur in its context{_other_case(context, text)}; "
                        "fix the answer (it must be a span of the context, character for character)")
    if len(found) > 1:
        raise DataError(f"{where}: answer {_short(text)} occurs {len(found)} times in its context (at "
                        f"{_offsets(found)}); add an answer_start column giving the right one's offset")
    return text, found[0]


class _Questions:
    """The examples of one QA file and every problem found in it (raised together by ``done``)."""

    def __init__(self) -> None:
        self.examples: list[Example] = []
        self.rows = RowProblems()

    def problem(self, message: str) -> None:
        self.rows.add(message)

    def answers(self, context: Any, pairs: Iterable[tuple[Any, Any]], where: str) -> tuple[tuple[str, int], ...]:
        """Each (text, start) pair checked against ``context``; a bad one is recorded, the good ones kept."""
        out = []
        for text, start in pairs:
            try:
                out.append(check_answer(context, text, start, where))
            except DataError as exc:
                self.problem(str(exc))
        return tuple(out)

    def add(self, question: Any, context: Any, label: tuple[tuple[str, int], ...] | None, qid: str, where: str,
            meta: Mapping[str, Any]) -> None:
        if not isinstance(question, str) or not question.strip():
            self.problem(f"{where}: the question is empty; give its text, or remove the question")
        if not isinstance(context, str) or not context.strip():
            self.problem(f"{where}: the context is empty; give the passage the question is asked of")
            return
        if isinstance(question, str) and question.strip():
            self.examples.append(Example(text=question.strip(), text_pair=context, label=label, id=qid, where=where,
                                         meta=dict(meta)))

    def done(self, name: str, source: str) -> Dataset:
        self.rows.raise_if_any()
        if not self.examples:
            raise DataError(f"'{source}' holds no question")
        return Dataset(self.examples, name=name)


def _context_usable(context: Any) -> bool:
    return isinstance(context, str) and bool(context.strip())


def read_squad_json(path: Path, data: Any) -> Dataset:
    """Every question of a SQuAD v1.1 / v2.0 document (``data``: the file, parsed once by the caller)."""
    name = str(path)
    articles = data.get("data") if isinstance(data, dict) else None
    if not isinstance(articles, list) or not all(isinstance(a, dict) and isinstance(a.get("paragraphs"), list) for a in articles):
        raise DataError(f"'{name}' is not SQuAD JSON: expected {{\"data\": [{{\"paragraphs\": [{{\"context\": ..., "
                        "\"qas\": [...]}]}]}; for other questions use JSONL rows with question, context and answers")
    found = _Questions()
    ids: Counter[str] = Counter()
    for a, article in enumerate(articles):
        for p, paragraph in enumerate(article["paragraphs"]):
            context = paragraph.get("context") if isinstance(paragraph, dict) else None
            qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
            if not isinstance(qas, list):
                found.problem(f"'{name}': paragraph {p} of article {a} has no list of qas")
                continue
            for q, qa in enumerate(qas):
                qid = str(qa.get("id", f"{a}.{p}.{q}")) if isinstance(qa, dict) else f"{a}.{p}.{q}"
                ids[qid] += 1
                where = f"question {qid} of {name}"
                if not isinstance(qa, dict):
                    found.problem(f"{where}: a question must be a JSON object with id, question and answers")
                    continue
                impossible = qa.get("is_impossible", False)
                if not isinstance(impossible, bool):  # "false" as a string would read as true
                    found.problem(f"{where}: is_impossible must be true or false (a JSON boolean), not "
                                  f"{impossible!r}")
                    continue
                answers = qa.get("answers")
                label: tuple[tuple[str, int], ...] | None = None
                if answers is not None and not isinstance(answers, list):
                    found.problem(f"{where}: answers must be a list of {{text, answer_start}}")
                elif answers is not None and _context_usable(context):
                    if not answers and not impossible and "is_impossible" not in qa:
                        found.problem(f"{where}: no answer, and the question is not marked is_impossible (SQuAD 2.0); "
                                      "give its answers or set is_impossible: true")
                    pairs = [(ans.get("text"), ans.get("answer_start")) if isinstance(ans, dict) else (None, None)
                             for ans in answers]
                    label = () if impossible else found.answers(context, pairs, where)
                meta = {"title": article.get("title", ""), "is_impossible": impossible}
                found.add(qa.get("question"), context, label, qid, where, meta)
    for qid, count in ids.items():
        if count > 1:
            found.problem(f"question {qid} of {name}: the id is given to {count} questions; {UNIQUE_IDS}")
    return found.done(path.stem, name)


def _row_answers(found: _Questions, row: Mapping[str, Any], context: str, where: str) -> tuple[tuple[str, int], ...] | None:
    """A row's gold answers: ``answers`` in the ``squad`` schema (or a list of {text, answer_start}), or an
    ``answer`` column with an optional ``answer_start``; None without an answer column."""
    column = next((c for c in ANSWER_COLUMNS if c in row), None)
    if column is None:
        return None
    value = row[column]
    if isinstance(value, Mapping):  # the squad schema: {text: [...], answer_start: [...]}
        texts, starts = list(value.get("text") or []), list(value.get("answer_start") or [])
        if len(texts) != len(starts):
            found.problem(f"{where}: answers has {len(texts)} text(s) but {len(starts)} answer_start(s); give one "
                          "answer_start per text")
            return None
        return found.answers(context, zip(texts, starts), where)
    if isinstance(value, list) and all(isinstance(v, Mapping) for v in value):  # SQuAD JSON's list in a row
        return found.answers(context, [(v.get("text"), v.get("answer_start")) for v in value], where)
    if value is None or (isinstance(value, str) and not value.strip()):
        return ()  # an empty answer cell: unanswerable
    if isinstance(value, str):
        start = row.get("answer_start")
        try:
            if start is not None and str(start).strip() != "":
                return (check_answer(context, value, start, where),)
            return (find_answer(context, value, where),)
        except DataError as exc:
            found.problem(str(exc))
            return None
    found.problem(f"{where}: {column} must be an answer's text or {{text: [...], answer_start: [...]}}, not {value!r}")
    return None


def qa_rows(rows: Iterable[Mapping[str, Any]], source: str, lines: Sequence[int] | None = None,
            name: str | None = None) -> Dataset:
    """The questions of table rows with ``question`` and ``context`` (see the module docstring); ``lines``
    number the rows as an editor counts a file's lines (else rows are counted from 1)."""
    found = _Questions()
    first: dict[str, str] = {}  # id -> where it was first used
    for i, row in enumerate(rows):
        where = f"line {lines[i]} of {source}" if lines else f"row {i + 1} of {source}"
        context = row.get("context")
        qid = str(row["id"]) if row.get("id") not in (None, "") else str(i)
        if qid in first:
            found.problem(f"{where}: id {qid!r} is also the id of {first[qid].split(' of ')[0]}; {UNIQUE_IDS}")
        first.setdefault(qid, where)
        label = _row_answers(found, row, context, where) if _context_usable(context) else None
        meta = {"title": row.get("title") or "", "is_impossible": label == (),
                **{k: v for k, v in row.items() if k not in QA_COLUMNS}}
        found.add(row.get("question"), context, label, qid, where, meta)
    return found.done(name if name is not None else Path(source).stem, source)


def qa_table(table: Any, spec: DataSpec, lines: Sequence[int] | None = None) -> Dataset:
    """A table (a datasets ``Dataset``, or a list of row dicts) of QA rows as examples; ``lines``: each row's line."""
    source = spec.path or ""
    if len(table) == 0:
        raise DataError(f"'{source}' has no rows")
    local = Path(source).expanduser().exists()
    return qa_rows(table, source, lines, name=Path(source).stem if local else source)
