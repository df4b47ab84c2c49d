"""BLiMP minimal pairs: the JSON Lines format, loading (every bad line reported at once), label merging and
seeded sampling per paradigm."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from bertprobe.errors import DataError, RowProblems, problems_error
from bertprobe.registry import did_you_mean

# ``field`` is ``syntax_semantics`` in 13 files and ``syntax/semantics`` in ``principle_A_case_2``: one field
FIELD_SPELLINGS = {"syntax/semantics": "syntax_semantics", "syntax-semantics": "syntax_semantics"}
# ``s-selection`` (animate_subject_passive, animate_subject_trans) is filed under argument_structure, as the BLiMP
# repository's own raw_results/summary/models_summary.jsonl does: 12 terms, as its README counts
TERM_MERGES = {"s-selection": "argument_structure"}


@dataclass(frozen=True)
class MinimalPair:
    """One BLiMP pair: the acceptable and the unacceptable sentence, its paradigm (``UID``), its phenomenon
    (``term``, merged as ``TERM_MERGES`` says) and ``field`` (spellings merged), and where it was read."""

    id: str  # UID/pairID: unique over the benchmark, the key per-pair outcomes are paired on
    uid: str
    good: str
    bad: str
    field: str
    term: str
    where: str  # "line N of FILE"

    @property
    def identical(self) -> bool:
        """The two sentences are the same text (7 BLiMP generation artefacts): no model can prefer one."""
        return self.good == self.bad


def blimp_files(path: Path) -> list[Path]:
    """The ``*.jsonl`` files of a BLiMP folder, or the one file ``path`` names."""
    if path.is_dir():
        files = sorted(path.glob("*.jsonl"))
        if not files:
            raise DataError(f"no BLiMP *.jsonl files in '{path}'")
        return files
    if not path.exists():
        raise DataError(f"BLiMP data '{path}' does not exist; give a folder of <UID>.jsonl files or one .jsonl file")
    return [path]


def load_pairs(path: str | Path) -> list[MinimalPair]:
    """Every pair of a BLiMP folder or file, in file and line order. Bad lines (not JSON, not an object,
    without a non-empty ``sentence_good``/``sentence_bad``, a repeated pairID) are reported together."""
    rows = RowProblems()
    out: list[MinimalPair] = []
    seen: set[str] = set()
    for file in blimp_files(Path(path).expanduser()):
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise DataError(f"cannot read BLiMP file '{file}': {exc}") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            where = f"line {number} of {file.name}"
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                rows.add(f"{where} is not JSON ({exc.msg}); BLiMP files hold one JSON object per line")
                continue
            if not isinstance(raw, dict):
                rows.add(f"{where} is a JSON {type(raw).__name__}, not an object with sentence_good and sentence_bad")
                continue
            missing = [k for k in ("sentence_good", "sentence_bad")
                       if not isinstance(raw.get(k), str) or not raw[k].strip()]
            if missing:
                rows.add(f"{where} has no {' and no '.join(missing)} (a non-empty string); give the line both "
                         "sentences, or remove it")
                continue
            uid = str(raw.get("UID") or file.stem)
            pair_id = f"{uid}/{raw.get('pairID', number - 1)}"
            if pair_id in seen:
                rows.add(f"{where}: pair '{pair_id}' appears twice (UID and pairID name a pair)")
                continue
            seen.add(pair_id)
            field = str(raw.get("field") or "unknown")
            term = str(raw.get("linguistics_term") or "unknown")
            out.append(MinimalPair(pair_id, uid, raw["sentence_good"], raw["sentence_bad"],
                                   FIELD_SPELLINGS.get(field, field), TERM_MERGES.get(term, term), where))
    rows.raise_if_any()
    if not out:
        raise DataError(f"no BLiMP pairs in '{path}'")
    return out


def select_pairs(pairs: list[MinimalPair], paradigms: tuple[str, ...] = (), per_paradigm: int = 0,
                 seed: int = 0) -> list[MinimalPair]:
    """The pairs of ``paradigms`` (default: all), at most ``per_paradigm`` of each (0: all), drawn with a
    generator seeded by (``seed``, paradigm) so a paradigm's sample does not depend on the others; file order kept."""
    known = list(dict.fromkeys(p.uid for p in pairs))
    unknown = [name for name in paradigms if name not in known]
    if unknown:
        messages = [f"unknown BLiMP paradigm '{name}'{did_you_mean(name, known)}" for name in unknown]
        if len(messages) == 1:
            raise DataError(f"{messages[0]}; {len(known)} paradigms are known, e.g. {', '.join(known[:3])}")
        raise problems_error(messages, DataError)
    wanted = set(paradigms or known)
    by_uid: dict[str, list[MinimalPair]] = {}
    for p in pairs:
        if p.uid in wanted:
            by_uid.setdefault(p.uid, []).append(p)
    out: list[MinimalPair] = []
    for uid, group in by_uid.items():
        if per_paradigm and len(group) > per_paradigm:
            keep = set(random.Random(f"{seed}:{uid}").sample(range(len(group)), per_paradigm))
            group = [p for i, p in enumerate(group) if i in keep]
        out += group
    return out
