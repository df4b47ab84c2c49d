"""Table readers: csv, tsv, jsonl and json files, the hub's datasets, and .conllu through the treebank reader."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from bertprobe.data.dataset import (
    LABEL_LIKE,
    LOCAL_FORMATS,
    TEXT_DEFAULTS,
    Dataset,
    DataSpec,
    Example,
    check_text_file,
    is_local,
    is_saved_dataset,
)
from bertprobe.errors import DataError, RowProblems, first_line
from bertprobe.registry import did_you_mean


def _root_message(exc: BaseException) -> str:
    """The most specific message in an exception chain (datasets wraps pandas' 'Expected 2 fields in line 5')."""
    messages = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current).strip()
        if text:
            messages.append(first_line(text))
        current = current.__cause__ or current.__context__
    generic = ("An error occurred while generating the dataset",)
    useful = [m for m in messages if not m.startswith(generic)]
    return (useful[-1] if useful else messages[0] if messages else type(exc).__name__)


def _load_file(path: Path, builder: str, checked: bool = False, **kwargs: Any) -> Any:
    """Parse one local file with a datasets builder; every failure becomes a one-line DataError.
    ``checked``: the caller already ran ``check_text_file`` on it (the builder reads the file itself)."""
    import logging

    import datasets

    if not checked:
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


def read_delimited(path: Path, sep: str = "\t", quoted: bool = False, checked: bool = False) -> Any:
    """Read a delimited file; ``quoted=False`` treats every '"' as text (GLUE, SemEval) and cells such as
    'NA' or 'null' stay text either way. ``checked``: the caller already ran ``check_text_file``."""
    return _load_file(path, "csv", checked, sep=sep, quoting=0 if quoted else 3, keep_default_na=False)


def _read_local(path: Path) -> tuple[Any, str | None]:
    """A local csv/tsv table and its text: the file is checked (and its text kept) once, then parsed."""
    fmt = LOCAL_FORMATS.get(path.suffix.lower())
    if fmt is None and path.is_file():
        raise DataError(f"data file '{path}' has an unknown extension; use .csv, .tsv, .jsonl, .json, .parquet, .arrow, "
                        ".conllu or .iob2/.conll, or a folder a datasets.Dataset was saved to (or data.loader: conll "
                        "for NER columns in a .txt)")
    text = check_text_file(path)
    if fmt == "tsv":  # GLUE-style: tab separated, bare quotes are literal text
        return read_delimited(path, "\t", quoted=False, checked=True), text
    return read_delimited(path, ",", quoted=True, checked=True), text


_NO_VALUE = object()


def parse_json(path: Path, text: str) -> tuple[Any, list[int] | None]:
    """A .json/.jsonl file's text parsed once: ``(value, None)`` for one JSON document (SQuAD JSON, an array of
    rows), or ``(rows, line numbers)`` for JSON Lines, one object per non-blank line. Every bad line is collected
    into one DataError naming it (a JSON parser alone says 'Extra data at position 74')."""
    import json

    decoder = json.JSONDecoder()
    begin = len(text) - len(text.lstrip())
    first: Any = _NO_VALUE
    try:
        first, end = decoder.raw_decode(text, begin)
    except json.JSONDecodeError:
        end = -1
    if first is not _NO_VALUE and not text[end:].strip():
        return first, None  # one document
    if first is not _NO_VALUE and "\n" in text[begin:end].strip():
        after = end + len(text[end:]) - len(text[end:].lstrip())
        raise DataError(f"'{path}' line {text[:after].count(chr(10)) + 1}: not valid JSON (more data after the document "
                        f"ending on line {text[:end].count(chr(10)) + 1}); a .json file holds one JSON document, a .jsonl "
                        "file one JSON object per line")
    rows, lines = [], []
    problems = RowProblems()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if first is not _NO_VALUE and not lines and not rows:
            value = first  # the first line, parsed above
        else:
            try:
                value = decoder.decode(line)
            except json.JSONDecodeError as exc:
                problems.add(f"line {number} of '{path}': not valid JSON ({exc.msg} at column {exc.colno}); "
                             + ("a .json file holds one JSON document (an array of rows, an object of columns, or "
                                "SQuAD JSON)" if path.suffix.lower() == ".json" else
                                "a .jsonl file holds one JSON object per line"))
                continue
        if not isinstance(value, dict):
            problems.add(f"line {number} of '{path}': expected a JSON object such as "
                         f"{{\"text\": ..., \"label\": ...}}, got {type(value).__name__}")
            continue
        rows.append(value)
        lines.append(number)
    problems.raise_if_any()
    return rows, lines


def json_rows(path: Path, value: Any, lines: list[int] | None, text: str = "") -> tuple[list[dict[str, Any]], list[int] | None]:
    """The rows of parsed JSON (``parse_json``), as the datasets json builder read them: JSON Lines as they are, an
    array's objects (an array of strings: one ``text`` each), an object of columns (``{"text": [...], "label":
    [...]}``, or pandas' ``to_json`` ``{"text": {"0": ...}}``), else one object a row (a JSON Lines file of one row;
    ``text`` numbers its line)."""
    if lines is not None:
        return value, lines
    if isinstance(value, dict):
        columns = list(value.values())
        if columns and all(isinstance(c, list) for c in columns) and len({len(c) for c in columns}) == 1:
            return [dict(zip(value, cells)) for cells in zip(*columns)], None
        if columns and all(isinstance(c, dict) for c in columns) and len({tuple(c) for c in columns}) == 1:
            return [{name: value[name][key] for name in value} for key in columns[0]], None
        if path.suffix.lower() == ".json":  # one object that is neither columns nor SQuAD: not data of any task
            keys = ", ".join(map(str, list(value)[:6])) + (", ..." if len(value) > 6 else "")
            squad = " (its data holds no articles with paragraphs)" if "data" in value else ""
            raise DataError(f"'{path}' holds one JSON object (keys: {keys}), which is neither rows nor SQuAD JSON"
                            f"{squad}; give an array of row objects, an object of equal-length columns, SQuAD JSON "
                            "({\"data\": [{\"title\", \"paragraphs\": [...]}]}), or one object per line in a .jsonl file")
        return [value], [text[: len(text) - len(text.lstrip())].count("\n") + 1]
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        return [{"text": item} for item in value], None
    if not isinstance(value, list):
        raise DataError(f"'{path}' holds a JSON {type(value).__name__}, not rows; give one JSON object per line "
                        "(.jsonl), an array of objects, or SQuAD JSON")
    problems = RowProblems()
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            problems.add(f"item {i + 1} of '{path}': expected a JSON object such as {{\"text\": ..., \"label\": ...}}, "
                         f"got {type(item).__name__}")
    problems.raise_if_any()
    return value, None


class JsonRows:
    """Parsed JSON rows as a table (what the readers ask of a datasets table: ``column_names``, ``features``, the
    rows as dicts): the values as JSON gave them, a key a row lacks read as None; the file is not parsed again."""

    features: dict[str, Any] = {}  # JSON carries no class names (a hub dataset's ClassLabel does)

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self.column_names = list(dict.fromkeys(k for row in rows for k in row))

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Any:
        return ({c: row.get(c) for c in self.column_names} for row in self.rows)


def check_json_lines(path: Path, text: str | None = None) -> None:
    """A JSON Lines file: every non-blank line one JSON object, or one DataError naming every bad line."""
    parse_json(path, check_text_file(path) if text is None else text)


def read_saved(path: Path, spec: DataSpec) -> Any:
    """A Hugging Face dataset stored locally: a folder ``save_to_disk`` wrote (a ``DatasetDict``'s split is
    ``data.split``, or its only one), a ``.parquet`` file or an ``.arrow`` file; no hub is asked."""
    import datasets

    datasets.disable_progress_bars()
    try:
        if path.is_dir():
            table = datasets.load_from_disk(str(path))
        elif path.suffix.lower() == ".parquet":
            table = datasets.Dataset.from_parquet(str(path))
        else:
            table = datasets.Dataset.from_file(str(path))
    except Exception as exc:  # pyarrow and datasets raise many types for a damaged file
        raise DataError(f"cannot read '{path}': {_root_message(exc)}") from None
    if isinstance(table, datasets.DatasetDict):
        splits = list(table)
        if spec.split in table:
            return table[spec.split]
        if len(splits) == 1:
            return table[splits[0]]
        raise DataError(f"'{path}' holds the splits {', '.join(splits)}, not '{spec.split}'; set data.split")
    return table


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
        raise DataError(f"dataset '{spec.path}': {first_line(exc)}") from None
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
        hint_col = None
        if role == "label" and not did_you_mean(str(spec_value), free):
            like = [c for c in free if c.lower() in LABEL_LIKE]  # 'label' -> 'sentiment'
            hint_col = like[0] if len(like) == 1 else None
        flag = {"text": "--text", "text_pair": "--text-pair", "label": "--label"}.get(role)
        hint = f" (or pass {flag} COL)" if flag else ""
        guess = f" (did you mean '{hint_col}'?)" if hint_col else did_you_mean(spec_value, free)
        if hint_col:
            hint = f" (or pass --label {hint_col})"
        raise DataError(
            f"'{source}' has no column '{spec_value}' for {role}{guess}; "
            f"columns: {', '.join(columns)}; set data.{role}{hint}"
        )
    return spec_value


def _line_numbers(path: Path, text: str, rows: int) -> list[int] | None:
    """The line (1-based, as an editor counts) on which each row of a local table starts: after the header
    of a csv/tsv, skipping blank lines; None where the count disagrees (quoted cells spanning lines)."""
    fmt = LOCAL_FORMATS.get(path.suffix.lower())
    numbered = [n for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if fmt in ("csv", "tsv"):
        numbered = numbered[1:]  # the header
    elif fmt == "json" and text.lstrip().startswith("["):
        return None  # one JSON array: rows are not lines
    return numbered if len(numbered) == rows else None


def load_table(spec: DataSpec) -> Dataset:
    """Load a hub dataset or local file into examples using the spec's field mapping."""
    if not spec.path:
        raise DataError("no data given: set data.path in the suite or pass --data PATH")
    local = is_local(spec.path)
    if local and Path(spec.path).suffix.lower() == ".conllu":
        from bertprobe.data.treebank import read_conllu

        return read_conllu(Path(spec.path).expanduser())
    from bertprobe.data.conll import CONLL_SUFFIXES, SNIFFED_SUFFIXES, looks_like_conll, read_conll

    if local and Path(spec.path).suffix.lower() in CONLL_SUFFIXES:
        return read_conll(Path(spec.path).expanduser(), spec)
    if local and Path(spec.path).suffix.lower() in SNIFFED_SUFFIXES and looks_like_conll(Path(spec.path).expanduser()):
        return read_conll(Path(spec.path).expanduser(), spec)  # a CoNLL file named .txt: word and tag columns

    from bertprobe.data import squad  # extractive QA: SQuAD JSON, and tables with question and context columns

    path, source = Path(spec.path).expanduser(), spec.path
    lines: list[int] | None = None
    from bertprobe.data.beir import is_beir_folder, read_beir

    if local and is_beir_folder(path):  # retrieval: corpus, queries and qrels
        return read_beir(path, spec)
    if local and is_saved_dataset(path):
        table = read_saved(path, spec)
    elif local and LOCAL_FORMATS.get(path.suffix.lower()) == "json":
        text = check_text_file(path)
        value, lines = parse_json(path, text)  # parsed once, whatever it holds
        if lines is None and squad.is_squad_document(value):
            return squad.read_squad_json(path, value)
        rows, lines = json_rows(path, value, lines, text)
        if not rows:
            raise DataError(f"'{path}' has no rows")
        table = JsonRows(rows)
    elif local:
        table, text = _read_local(path)
        lines = _line_numbers(path, text, len(table))
    else:
        table = _read_hub(spec)
    columns = list(table.column_names)
    if squad.looks_like_qa(columns, spec):
        return squad.qa_table(table, spec, lines)
    if "tokens" in columns and spec.text in (None, "tokens"):
        return _word_table(table, spec, path if local else None, lines)
    # The default label column is optional (unlabelled data); one that a suite or flag names must exist.
    default_missing = "label" not in spec.named and spec.label == DataSpec.label and spec.label not in columns
    if default_missing and "labels" in columns:  # a label set per text, the documented multi-label form
        spec, default_missing = dataclasses.replace(spec, label="labels"), False
    label_error = None
    try:
        label_col = None if default_missing else _column(spec.label, columns, "label", source)
    except DataError as exc:  # the text column is named first: a file that has neither says so about text
        label_col, label_error = None, exc
    text_col = _column(spec.text, columns, "text", source, (label_col,)) if spec.text is not None else next(
        (c for c in TEXT_DEFAULTS if c in columns), None
    )
    if text_col is None:
        raise DataError(f"'{source}' has no text column; set data.text (or --text COL) to one of: {', '.join(columns)}")
    if label_error is not None:
        raise label_error
    pair_col = _column(spec.text_pair, columns, "text_pair", source, (label_col, text_col))
    choice_cols = [_column(c, columns, "choices", source) for c in spec.choices] if spec.choices else None
    set_cols = [_column(c, columns, "label_columns", source) for c in spec.label_columns] if spec.label_columns else None
    label_names = None
    feature = table.features.get(label_col) if label_col else None
    if feature is not None and hasattr(feature, "names"):
        label_names = list(feature.names)
    elif feature is not None and hasattr(getattr(feature, "feature", None), "names"):  # a list of ClassLabel (label sets)
        label_names = list(feature.feature.names)
    elif isinstance(feature, list) and feature and hasattr(feature[0], "names"):
        label_names = list(feature[0].names)
    if len(table) == 0:
        raise DataError(f"'{source}' has no rows")
    used = {label_col, text_col, pair_col, *(choice_cols or []), *(set_cols or [])}
    extra = [c for c in columns if c not in used]  # kept on each example (Example.meta) for slices by column
    examples = []
    rows = RowProblems()
    for i, row in enumerate(table):
        where = f"line {lines[i]} of {source}" if lines else f"row {i + 1} of {source}"
        text = row[text_col]
        if text is None:
            rows.add(f"{where}: empty {text_col}")
            continue
        examples.append(
            Example(
                text=str(text).strip(),
                text_pair=None if pair_col is None else str(row[pair_col]).strip(),
                label={c: row[c] for c in set_cols} if set_cols else None if label_col is None else row[label_col],
                choices=None if choice_cols is None else tuple(str(row[c]) for c in choice_cols),  # type: ignore[index]
                id=str(i),
                meta={c: row[c] for c in extra},
                where=where,
            )
        )
    rows.raise_if_any()
    return Dataset(examples, name=Path(source).stem if local else source, label_names=label_names)


TAG_COLUMNS = ("tags", "ner_tags", "labels", "label")


def _word_table(table: Any, spec: DataSpec, path: Path | None, lines: list[int] | None) -> Dataset:
    """Word-level rows (NER): a ``tokens`` list and a list of tags per row (``tags``, ``ner_tags``, or the column
    ``data.label`` names); tag ids of a hub ``ClassLabel`` sequence become their names."""
    columns = list(table.column_names)
    tag_col = spec.label if "label" in spec.named else next((c for c in TAG_COLUMNS if c in columns), None)
    if tag_col not in columns:
        tag_col = None
    feature = table.features.get(tag_col) if tag_col else None
    inner = getattr(feature, "feature", None) or (feature[0] if isinstance(feature, list) and feature else None)
    names = list(getattr(inner, "names", None) or [])
    source = spec.path or ""
    examples = []
    rows = RowProblems()
    for i, row in enumerate(table):
        where = f"line {lines[i]} of {source}" if lines else f"row {i + 1} of {source}"
        words = row["tokens"]
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            rows.add(f"{where}: 'tokens' must be a list of words, got {words!r}")
            continue
        tags = row[tag_col] if tag_col else None
        if tags is not None:
            if not isinstance(tags, list) or len(tags) != len(words):
                rows.add(f"{where}: '{tag_col}' must be a list of one tag per word ({len(words)} words), got {tags!r}")
                continue
            tags = tuple(names[t] if names and isinstance(t, int) and 0 <= t < len(names) else str(t) for t in tags)
        spans, at = [], 0
        for word in words:
            spans.append((at, at + len(word)))
            at += len(word) + 1
        examples.append(Example(text=" ".join(words), label=tags, id=str(row.get("id", i)), words=tuple(words),
                                spans=tuple(spans), where=where))
    rows.raise_if_any()
    return Dataset(examples, name=Path(source).stem if path is not None else source, label_names=names or None)
