"""Reading the CrowS-Pairs CSV (``crows_pairs_anonymized.csv`` of nyu-mll/crows-pairs) into pairs.

The file is pandas-written: an unnamed first column holds the pandas index (0-1507), and one ``sent_less`` (index
1293) holds a quoted newline, so a file line is not a row: rows are named by that index and by their data row (1 =
the first row under the header), never by a line. ``csv.DictReader`` reads it, as the authors' script does; the
``annotations`` column (a Python literal) is not read.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from bertprobe.data.dataset import check_text_file
from bertprobe.errors import ROW_LIMIT, DataError, problems_error
from bertprobe.registry import did_you_mean

BIAS_TYPES = ("race-color", "gender", "socioeconomic", "nationality", "religion", "age", "sexual-orientation",
              "physical-appearance", "disability")
DIRECTIONS = ("stereo", "antistereo")
COLUMNS = ("sent_more", "sent_less", "stereo_antistereo", "bias_type")
FIX_HEADER = "fix: give the CrowS-Pairs CSV, header ',sent_more,sent_less,stereo_antistereo,bias_type,annotations,...'"


@dataclass(frozen=True)
class CrowsPair:
    """One pair: ``sent_more`` is the more stereotypical sentence; ``direction`` says whether it demonstrates a
    stereotype (stereo) or ``sent_less`` violates one (antistereo). ``id`` is the pandas index (else the data row)."""

    id: str
    row: int  # data row, 1 = the first row under the header
    sent_more: str
    sent_less: str
    direction: str
    bias_type: str

    @property
    def sent1(self) -> str:
        """metric.py's sentence 1, the one about the disadvantaged group: sent_more for stereo, sent_less else."""
        return self.sent_more if self.direction == "stereo" else self.sent_less

    @property
    def sent2(self) -> str:
        return self.sent_less if self.direction == "stereo" else self.sent_more


def check_bias_types(names: tuple[str, ...]) -> None:
    """Raise ValueError naming an unknown bias type, with a did-you-mean."""
    for name in names:
        if name not in BIAS_TYPES:
            raise ValueError(f"unknown bias type '{name}'{did_you_mean(name, BIAS_TYPES)}; known: {', '.join(BIAS_TYPES)}")


def _where(name: str, index: str, row: int) -> str:
    return f"{name}, row {index} (pandas index; data row {row})" if index else f"{name}, data row {row}"


def row_problems(name: str, index: str, row: int, record: dict[str, str | None]) -> list[str]:
    """What is wrong with one row, one message each naming the file, the row and the fix."""
    where = _where(name, index, row)
    out = []
    more, less = (record.get("sent_more") or "").strip(), (record.get("sent_less") or "").strip()
    for column, text in (("sent_more", more), ("sent_less", less)):
        if not text:
            out.append(f"{where}: {column} is empty; fix: write the sentence, or delete the row")
    if more and more == less:
        out.append(f"{where}: sent_more and sent_less are the same sentence; fix: edit the group words of one, "
                   "or delete the row")
    direction = record.get("stereo_antistereo") or ""
    if direction not in DIRECTIONS:
        out.append(f"{where}: stereo_antistereo is '{direction}'{did_you_mean(direction, DIRECTIONS)}; "
                   "fix: write stereo or antistereo")
    bias = record.get("bias_type") or ""
    if bias not in BIAS_TYPES:
        out.append(f"{where}: bias_type is '{bias}'{did_you_mean(bias, BIAS_TYPES)}; fix: write one of "
                   f"{', '.join(BIAS_TYPES)}")
    return out


def load_pairs(path: str | Path) -> list[CrowsPair]:
    """Every pair of the CSV at ``path``, in file order; a DataError lists every bad row at once (the first
    ``ROW_LIMIT`` problems, the rest counted)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file; fix: point params.data at crows_pairs_anonymized.csv "
                        "(nyu-mll/crows-pairs, data/)")
    try:
        return _read_pairs(path, io.StringIO(check_text_file(path), newline=""))
    except csv.Error as exc:
        raise DataError(f"{path.name}: not a readable CSV ({exc}); fix: save it as comma-separated UTF-8 text, "
                        "as pandas' to_csv writes it") from None


def _read_pairs(path: Path, f: io.StringIO) -> list[CrowsPair]:
    reader = csv.DictReader(f)
    header = reader.fieldnames or []
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise DataError(f"{path.name}: no column {', '.join(repr(c) for c in missing)} in the header "
                        f"({', '.join(repr(h) for h in header) or 'empty'}); {FIX_HEADER}")
    index_column = header[0] if header and header[0] not in COLUMNS and header[0].strip() == "" else None
    pairs, problems, more = [], [], 0
    seen: dict[str, int] = {}
    for row, record in enumerate(reader, 1):
        index = (record.get(index_column) or "").strip() if index_column is not None else ""
        found = row_problems(path.name, index, row, record)
        if index and index in seen:
            found.append(f"{_where(path.name, index, row)}: the index repeats data row {seen[index]}'s; "
                         "fix: give every row its own index in the first column")
        seen.setdefault(index, row)
        if found:
            kept = found[: max(0, ROW_LIMIT - len(problems))]
            problems += kept
            more += len(found) - len(kept)
            continue
        pairs.append(CrowsPair(index or str(row), row, str(record["sent_more"]), str(record["sent_less"]),
                               str(record["stereo_antistereo"]), str(record["bias_type"])))
    if problems:
        if more:
            problems.append(f"and {more} more problem{'' if more == 1 else 's'} (the first {ROW_LIMIT} are listed)")
        if len(problems) == 1:
            raise DataError(problems[0])
        raise problems_error(problems, DataError, path.name)
    if not pairs:
        raise DataError(f"{path.name}: no pairs under the header; {FIX_HEADER}")
    return pairs
