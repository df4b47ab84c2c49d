"""``loader: squad``: extractive QA data named explicitly (``data.squad`` reads it; this module adds the
check that a table really holds questions, which needs the table readers that route to ``data.squad``)."""

from __future__ import annotations

from bertprobe.data.dataset import Dataset, DataSpec
from bertprobe.data.squad import holds_questions
from bertprobe.data.tables import load_table
from bertprobe.errors import DataError


class SquadLoader:
    """``loader: squad``: SQuAD JSON, or JSONL/CSV/TSV/saved/hub rows with question, context and answers."""

    name = "squad"
    reads_local_files = True  # quick and local: validate and run's preflight read it before any weights load
    description = ("extractive QA: SQuAD JSON (v1.1, v2.0), JSONL/hub rows in the squad schema, CSV/TSV with question, "
                   "context, answer")

    def load(self, spec: DataSpec) -> Dataset:
        if not spec.path:
            raise DataError("loader squad needs data.path: a SQuAD JSON file, or a JSONL/CSV/TSV of questions")
        data = load_table(spec)  # SQuAD JSON and question tables are recognised there (each file parsed once)
        if not holds_questions(data):
            raise DataError(f"'{spec.path}' is not question-answering data (it has no question and context columns); "
                            "give SQuAD JSON, or rows with question, context and answers")
        return data
