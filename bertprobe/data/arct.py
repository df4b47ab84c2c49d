"""The Argument Reasoning Comprehension Task (Habernal et al. 2018) as multiple-choice examples.

Reads the SemEval-2018 Task 12 tab format (``#id warrant0 warrant1 correctLabelW0orW1 reason claim
debateTitle debateInfo``, quoting off: fields hold bare quotes) and Niven & Kao's adversarial files
(tab-separated, pandas-quoted, a 9th flag column ``adversarial`` or ``swapped``, column order varying).
Each example is ``text = "claim reason"``, ``choices = (warrant0, warrant1)``, ``label`` = the
correct warrant, the way the fixture model was fine-tuned; the fields are kept in ``meta``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bertprobe.data.dataset import Dataset, DataSpec, Example, check_text_file
from bertprobe.data.tables import read_delimited
from bertprobe.errors import DataError

COLUMNS = ("#id", "warrant0", "warrant1", "correctLabelW0orW1", "reason", "claim")
FLAGS = ("adversarial", "swapped")


def _header(path: Path) -> list[str]:
    """The column names of an ARCT file (checked as text once: its parser is told so)."""
    if not path.is_file():
        raise DataError(f"ARCT file '{path}' does not exist; pass --data PATH")
    return check_text_file(Path(path)).split("\n", 1)[0].rstrip("\r").split("\t")


def load_arct_file(path: str | Path, rows: str = "all") -> Dataset:
    """Load one ARCT file, original or adversarial; ``rows``: all | original | flagged."""
    path = Path(path).expanduser()
    header = _header(path)
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise DataError(f"'{path}' is not an ARCT file: no column {missing[0]!r} (columns: {', '.join(header)})")
    flag = next((f for f in FLAGS if f in header), None)
    table = read_delimited(path, quoted=flag is not None, checked=True)
    examples = []
    for i, row in enumerate(table):
        flagged = flag is not None and str(row[flag]).strip().lower() == "true"
        if (rows == "original" and flagged) or (rows == "flagged" and not flagged):
            continue
        label = str(row["correctLabelW0orW1"]).strip()
        if label not in ("0", "1"):
            raise DataError(f"'{path}' row {i + 1}: correctLabelW0orW1 is {label!r}, expected 0 or 1")
        claim, reason = str(row["claim"]).strip(), str(row["reason"]).strip()
        warrants = (str(row["warrant0"]).strip(), str(row["warrant1"]).strip())
        examples.append(Example(
            text=f"{claim} {reason}",
            choices=warrants,
            label=int(label),
            id=str(row["#id"]),
            meta={"claim": claim, "reason": reason, "flagged": flagged, "debate": str(row.get("debateTitle", ""))},
        ))
    if not examples:
        raise DataError(f"'{path}' has no ARCT rows (rows={rows})")
    return Dataset(examples, name=path.stem)


class ArctLoader:
    """Named loader ``arct``: ``data: {loader: arct, path: FILE[, options: {rows: all|original|flagged}]}``.

    ``path`` may list several files separated by commas (e.g. train, dev and test for cue statistics).
    """

    name = "arct"
    description = "ARCT / SemEval-2018 Task 12 tab files and Niven & Kao's adversarial sets (multiple choice)"

    def load(self, spec: DataSpec) -> Dataset:
        if not spec.path:
            raise DataError("the arct loader needs data.path (an ARCT .txt or adversarial .csv file)")
        unknown = set(spec.options) - {"rows"}
        if unknown:
            raise DataError(f"data.options.{sorted(unknown)[0]}: unknown option for the arct loader; allowed: rows")
        rows = spec.options.get("rows", "all")
        if rows not in ("all", "original", "flagged"):
            raise DataError(f"data.options.rows: {rows!r} is not one of all, original, flagged")
        parts = [load_arct_file(p.strip(), rows) for p in spec.path.split(",") if p.strip()]
        examples: list[Any] = [ex for part in parts for ex in part.examples]
        return Dataset(examples, name="+".join(p.name for p in parts))
