"""Ettinger 2020's diagnostics scored as her scripts score them (aetting/lm-diagnostics @ 080de8d).

Re-implemented from ``proc_datasets.py``, ``access_model.py``, ``prediction_accuracy_tests.py`` and
``sensitivity_tests.py`` (no code copied):

* Rows: CPRAG gives three rows per item (expected, within-, between-category target) on one context;
  ROLE one row per ``N-a``/``N-b`` item, target = the first word of ``target``, expected = the first
  word of each ``|``-separated ``expected``; NEG four rows per item in her order TA, FN, FA, TN (true /
  false target in the affirmative / negated context). NEG-SIMP drops ``(a|an)`` and appends "an" when
  the *row's target* starts with a lowercase vowel, else "a".
* Input: ``<context words> <mask> .`` between the model's own special tokens; one pass per distinct
  context gives the softmax at the mask over the whole vocabulary (special tokens included).
* A target's probability is that of its vocabulary token (BPE/SentencePiece: the word-start form,
  'Ġchess'); a word that is not one vocabulary token has none (her NaN), and every comparison with it
  is a miss, as NaN compares false in her scripts.
* Prediction accuracy at k: a hit when one of the top-k tokens (word-start marker stripped) equals an
  expected word; CPRAG and NEG count a context once (NEG: affirmative-true rows only), ROLE every row.
* Sensitivity: strict ``>`` between probabilities, and the same with both gaps above 0.01.
* ROLE, where the file has her ``exp_cloze`` and ``tgt_cloze`` columns: top-k accuracy per quartile of the
  expected completion's human cloze (bounds ``np.percentile`` over every row, a row in the first quartile
  whose cloze is at most the first bound), and the humans' mean cloze difference between the pairs' targets.

Deviation: her ROLE "average probability difference" is ``np.average`` over all pairs (NaN when any pair
lacks a probability); ours averages the pairs that have both. An empty cloze quartile (tied bounds) has no
figure; her script prints 0 for it.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bertprobe.data.dataset import check_text_file
from bertprobe.errors import ROW_LIMIT, DataError, ProbeError, problems_error

GAP = 0.01  # her probability-difference threshold
KS = (1, 5)  # her k values for prediction accuracy
KNOWN = "CPRAG-102.tsv, ROLE-88.tsv, NEG-136-SIMP.tsv or NEG-136-NAT.tsv"
COLUMNS = {
    "cprag": ("item", "context_s1", "context_s2", "expected", "within_category", "between_category", "constraint"),
    "role": ("item", "context", "expected", "target"),
    "neg_simp": ("item", "context_aff", "context_neg", "target_aff", "target_neg"),
    "neg_nat": ("item", "context_aff", "context_neg", "target_aff", "target_neg", "licensing"),
}
GROUPS = {"cprag": ("constraint", ("H", "L")), "neg_nat": ("licensing", ("Y", "N"))}


@dataclass(frozen=True)
class Row:
    """One of her (context, target) rows."""

    item: str
    cond: str  # exp/wc/bc (CPRAG), a/b (ROLE), TA/FN/FA/TN (NEG)
    context: str  # the words before the mask, whitespace-normalised
    target: str
    expected: tuple[str, ...]  # words a top-k prediction must equal to be a hit
    group: str = ""  # constraint H/L (CPRAG), licensing Y/N (NEG-NAT)
    line: int = 0
    cloze: float | None = None  # ROLE: the expected completion's human cloze (her maxcloze, column exp_cloze)
    target_cloze: float | None = None  # ROLE: the target's human cloze (column tgt_cloze)


@dataclass(frozen=True)
class EttingerSet:
    name: str  # the file's stem, e.g. CPRAG-102
    kind: str  # cprag, role, neg_simp, neg_nat
    rows: tuple[Row, ...]


def set_kind(path: Path) -> str:
    """Which of her four protocols a file follows, from its name."""
    name = path.stem.upper()
    for prefix, kind in (("CPRAG", "cprag"), ("ROLE", "role"), ("NEG-136-SIMP", "neg_simp"), ("NEG-136-NAT", "neg_nat")):
        if name.startswith(prefix):
            return kind
    raise DataError(f"{path}:1: '{path.name}' is not one of Ettinger's sets; name it {KNOWN} (the name picks the scoring)")


def read_table(path: Path) -> tuple[str, list[tuple[int, dict[str, str]]]]:
    """The set's kind and its rows (line number, fields stripped), every column its kind needs checked."""
    kind = set_kind(path)
    if not path.is_file():
        raise DataError(f"{path}: no such Ettinger tsv file; point ettinger: at a folder or file holding {KNOWN}")
    try:
        return kind, _read_rows(path, kind, io.StringIO(check_text_file(path), newline=""))
    except csv.Error as exc:
        raise DataError(f"{path}: not a readable tsv ({exc}); save it as tab-separated UTF-8 text") from None


def _read_rows(path: Path, kind: str, fh: io.StringIO) -> list[tuple[int, dict[str, str]]]:
    reader = csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
    header = [h.strip() for h in reader.fieldnames or []]
    missing = [c for c in COLUMNS[kind] if c not in header]
    if missing:
        raise DataError(f"{path}:1: missing column {', '.join(repr(c) for c in missing)}; the header line of "
                        f"{path.stem} needs the tab-separated columns {', '.join(COLUMNS[kind])}")
    reader.fieldnames = header
    rows = []
    problems: list[str] = []  # every bad row of the file, raised at once
    for raw in reader:
        line = reader.line_num
        if None in raw or any(raw.get(c) is None for c in COLUMNS[kind]):
            problems.append(f"{path}:{line}: {len([v for v in raw.values() if v is not None])} fields where the "
                            f"header has {len(header)}; give the row one tab-separated value per column")
            continue
        fields = {k: v.strip() for k, v in raw.items()}
        if not any(fields.values()):
            continue
        empty = [c for c in COLUMNS[kind] if c != "context_s1" and not fields[c]]
        problems += [f"{path}:{line}: empty '{column}'; fill it in or delete the row" for column in empty]
        if kind in GROUPS:
            column, allowed = GROUPS[kind]
            if fields[column] not in allowed:
                problems.append(f"{path}:{line}: {column} '{fields[column]}' is not {' or '.join(allowed)}; "
                                f"write {' or '.join(allowed)}")
        if not empty:
            rows.append((line, fields))
    _raise_all(problems)
    return rows


def _raise_all(problems: list[str]) -> None:
    """The one problem as it would be raised alone, or one DataError listing them (the first ``ROW_LIMIT``, the
    rest counted)."""
    if len(problems) == 1:
        raise DataError(problems[0])
    if len(problems) > ROW_LIMIT:
        problems = [*problems[:ROW_LIMIT], f"and {len(problems) - ROW_LIMIT} more rows with problems"]
    if problems:
        raise problems_error(problems, DataError)


def _words(text: str) -> str:
    return " ".join(text.split())


def _article(word: str) -> str:
    return "an" if re.match("[aeiou]", word) else "a"  # her rule: a lowercase vowel, the row's target


def load_set(path: Path) -> EttingerSet:
    """One of her tsv files as her rows."""
    kind, table = read_table(path)
    rows: list[Row] = []
    seen: dict[str, int] = {}
    problems: list[str] = []
    for line, f in table:
        if f["item"] in seen:
            problems.append(f"{path}:{line}: item '{f['item']}' already on line {seen[f['item']]}; give each row its own item")
            continue
        seen[f["item"]] = line
        if kind == "cprag":
            context = _words(f"{f['context_s1']} {f['context_s2']}")
            for target, cond in ((f["expected"], "exp"), (f["within_category"], "wc"), (f["between_category"], "bc")):
                rows.append(Row(f["item"], cond, context, target, (f["expected"],), f["constraint"], line))
        elif kind == "role":
            number, _, cond = f["item"].partition("-")
            if cond not in ("a", "b"):
                problems.append(f"{path}:{line}: item '{f['item']}' is not NUMBER-a or NUMBER-b; "
                                "name the pair's rows 12-a and 12-b")
                continue
            expected = tuple(e.split()[0] for e in f["expected"].split("|") if e.split())
            cloze, target_cloze = (_cloze(path, line, f, c, problems) for c in ("exp_cloze", "tgt_cloze"))
            rows.append(Row(number, cond, _words(f["context"]), f["target"].split()[0], expected, "", line,
                            cloze, target_cloze))
        else:
            aff, neg = (re.sub(r" \(.+\)", "", f[c]) if kind == "neg_simp" else f[c] for c in ("context_aff", "context_neg"))
            for context, target, cond in ((aff, f["target_aff"], "TA"), (neg, f["target_aff"], "FN"),
                                          (aff, f["target_neg"], "FA"), (neg, f["target_neg"], "TN")):
                if kind == "neg_simp":
                    context = f"{context} {_article(target)}"
                expected = (f["target_aff"],) if cond in ("TA", "FA") else (f["target_neg"],)
                rows.append(Row(f["item"], cond, _words(context), target, expected, f.get("licensing", ""), line))
    if kind == "role":
        conds: dict[str, set[str]] = {}
        for r in rows:
            conds.setdefault(r.item, set()).add(r.cond)
        for r in rows:
            if conds[r.item] != {"a", "b"}:
                other = "b" if r.cond == "a" else "a"
                problems.append(f"{path}:{r.line}: item '{r.item}-{r.cond}' has no '{r.item}-{other}' row; "
                                "a role reversal needs both rows of its pair")
    _raise_all(problems)
    return EttingerSet(path.stem, kind, tuple(rows))


def _cloze(path: Path, line: int, fields: dict[str, str], column: str, problems: list[str]) -> float | None:
    """ROLE's optional human cloze column ``column`` of a row as a number (None where the file has no such
    column); a value that is no number between 0 and 1 is a problem of its line."""
    if column not in fields:
        return None
    try:
        value = float(fields[column])
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        problems.append(f"{path}:{line}: {column} '{fields[column]}' is not a cloze probability; write a number "
                        "from 0 to 1, or drop the column")
        return None
    return value


def ettinger_files(spec: str) -> list[Path]:
    """The tsv files an ``ettinger:DIR_OR_FILE`` spec names (a folder: all but the explanations file)."""
    target = Path(spec.split(":", 1)[1]).expanduser()
    files = sorted(p for p in target.glob("*.tsv") if "explanations" not in p.name) if target.is_dir() else [target]
    if not files or not files[0].exists():
        raise DataError(f"no Ettinger tsv files at '{target}'; point ettinger: at a folder holding {KNOWN}")
    return files


def ettinger_sets(specs: Iterable[str]) -> list[EttingerSet]:
    """Every Ettinger set named by ``ettinger:`` specs, in her rows; at most one set of each kind (her figures are
    named by the kind: a second CPRAG file would overwrite the first's)."""
    files = [p for spec in specs if spec.startswith("ettinger:") for p in ettinger_files(spec)]
    seen: dict[str, Path] = {}
    for path in files:
        kind = set_kind(path)
        if kind in seen:
            raise DataError(f"'{path}' and '{seen[kind]}' are both Ettinger {kind} sets: her figures are named by the "
                            "set (ettinger_" + kind + "_*), so name one of each in sets")
        seen[kind] = path
    return [load_set(p) for p in files]


# ---- the model's side: one masked pass per distinct context --------------------------------------
def word_marker(tok: Any) -> str:
    """The word-start marker of the tokenizer's vocabulary: 'Ġ' (byte-level BPE), '▁' (SentencePiece) or ''."""
    first = tok.convert_ids_to_tokens(tok(" a", add_special_tokens=False)["input_ids"][:1])
    head = (first[0] or "")[:1] if first else ""
    return head if head in ("Ġ", "▁") else ""


def target_token(tok: Any, vocab: dict[str, int], marker: str, word: str) -> tuple[int | None, str]:
    """The vocabulary id of ``word`` as one token (her ``convert_tokens_to_ids([word])``), or None and why not."""
    found = vocab.get(marker + word)
    if found is not None:
        return found, ""
    pieces = tok.tokenize(" " + word)
    if len(pieces) > 1:
        return None, f"'{word}' is {len(pieces)} tokens in this vocabulary ({' '.join(pieces)})"
    if not pieces or pieces[0] == tok.unk_token:
        return None, f"'{word}' is not in this vocabulary"
    return None, f"'{word}' is not a token of this vocabulary (the tokenizer reads it as '{pieces[0]}')"


def masked_input(tok: Any, context: str) -> tuple[list[int], int]:
    """Token ids of ``context <mask> .`` between the model's special tokens ([CLS] ... [SEP], <s> ... </s>), and
    the mask's position. Built from ids, so a BPE tokenizer whose mask token keeps its left space gets no
    stray 'Ġ' before the mask, and the '.' is the word-start form ('Ġ.')."""
    around = list(tok(tok.mask_token, add_special_tokens=True)["input_ids"])
    at = around.index(tok.mask_token_id)
    words = list(tok(context, add_special_tokens=False)["input_ids"])
    dot = list(tok(" .", add_special_tokens=False)["input_ids"])
    ids = around[:at] + words + [tok.mask_token_id] + dot + around[at + 1 :]
    return ids, at + len(words)


def read_set(target: Any, eset: EttingerSet, batch_size: int = 32, k: int = max(KS),
             logits_at: Callable[..., torch.Tensor] | None = None) -> dict[str, Any]:
    """Score one set: per distinct context its top-k tokens (marker stripped) with probabilities, per row
    the target's probability (None: not one vocabulary token) and the reasons, and the passes taken."""
    from bertprobe.model.masked_scoring import masked_logits, max_positions

    logits_at = logits_at or masked_logits
    tok = target.tokenizer
    if tok.mask_token_id is None:
        raise ProbeError("the tokenizer has no mask token; Ettinger's diagnostics need a masked language model")
    vocab, marker = tok.get_vocab(), word_marker(tok)
    tokens = {w: target_token(tok, vocab, marker, w) for w in dict.fromkeys(r.target for r in eset.rows)}
    contexts = list(dict.fromkeys(r.context for r in eset.rows))
    inputs = [masked_input(tok, c) for c in contexts]
    limit = max_positions(target.model)
    for c, (ids, _) in zip(contexts, inputs):
        if len(ids) > limit:
            raise ProbeError(f"Ettinger context {c!r} is {len(ids)} tokens, more than the model's {limit} positions")
    wanted = [[tokens[r.target][0] for r in eset.rows if r.context == c and tokens[r.target][0] is not None]
              for c in contexts]
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    top: list[list[list[Any]]] = [[] for _ in contexts]
    probs: list[dict[int, float]] = [{} for _ in contexts]
    passes = 0
    order = sorted(range(len(contexts)), key=lambda i: len(inputs[i][0]))
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            width = max(len(inputs[i][0]) for i in chunk)
            ids = torch.tensor([inputs[i][0] + [pad] * (width - len(inputs[i][0])) for i in chunk], device=target.device)
            attention = torch.tensor([[1] * len(inputs[i][0]) + [0] * (width - len(inputs[i][0])) for i in chunk],
                                     device=target.device)
            pos = torch.tensor([inputs[i][1] for i in chunk], device=target.device)
            soft = logits_at(target.model, ids, attention, pos).float().softmax(-1).cpu()
            passes += 1
            best = soft.topk(min(k, soft.shape[-1]))
            for j, i in enumerate(chunk):
                names = tok.convert_ids_to_tokens([int(t) for t in best.indices[j]])
                top[i] = [[_strip(n, marker), float(p)] for n, p in zip(names, best.values[j])]
                probs[i] = {t: float(soft[j, t]) for t in wanted[i]}
    at = {c: n for n, c in enumerate(contexts)}
    row_probs = [None if tokens[r.target][0] is None else probs[at[r.context]][tokens[r.target][0]] for r in eset.rows]
    return {"top": {c: top[n] for c, n in at.items()}, "probs": row_probs,
            "not_one_token": {w: why for w, (t, why) in tokens.items() if t is None}, "passes": passes}


def _strip(name: str | None, marker: str) -> str:
    name = name or ""
    return name[len(marker):] if marker and name.startswith(marker) else name


# ---- her tests, on the readings ------------------------------------------------------------------
Share = tuple[list[str], list[bool]]  # case ids and hits


def _gt(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and a > b  # NaN compares false


def _gap(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(a - b) > GAP


def _hit(predicted: Sequence[Sequence[Any]], expected: Sequence[str], k: int) -> bool:
    return any(str(p[0]).strip() in expected for p in predicted[:k])


def accuracy(eset: EttingerSet, top: dict[str, list[list[Any]]], k: int) -> Share:
    """Her prediction accuracy at ``k``: CPRAG/NEG once per distinct context (NEG: affirmative-true rows
    only; a context first met on another row is not counted again), ROLE every row."""
    ids: list[str] = []
    hits: list[bool] = []
    used: set[str] = set()
    for r in eset.rows:
        if eset.kind != "role":
            if r.context in used:
                continue
            used.add(r.context)
            if eset.kind.startswith("neg") and r.cond != "TA":
                continue
        ids.append(f"{r.item}-{r.cond}" if eset.kind == "role" else r.item)
        hits.append(_hit(top[r.context], r.expected, k))
    return ids, hits


def _by_item(eset: EttingerSet, probs: Sequence[float | None]) -> dict[str, dict[str, tuple[float | None, str]]]:
    out: dict[str, dict[str, tuple[float | None, str]]] = {}
    for r, p in zip(eset.rows, probs):
        out.setdefault(r.item, {})[r.cond] = (p, r.group)
    return out


def sensitivity(eset: EttingerSet, probs: Sequence[float | None]) -> dict[str, Share]:
    """Her sensitivity tests: the shares (ids, hits) by the suffix of their metric name."""
    out: dict[str, Share] = {}

    def add(name: str, case: str, hit: bool) -> None:
        ids, hits = out.setdefault(name, ([], []))
        ids.append(case)
        hits.append(hit)

    for item, conds in _by_item(eset, probs).items():
        if eset.kind == "cprag":
            (e, group), (w, _), (b, _) = conds["exp"], conds["wc"], conds["bc"]
            raw = _gt(e, w) and _gt(e, b)
            gap = raw and _gap(e, w) and _gap(e, b)
            for suffix in ("", f"_{group.lower()}"):
                add(f"sensitivity{suffix}", item, raw)
                add(f"sensitivity_gap{suffix}", item, gap)
        elif eset.kind == "role":
            a, b = conds["a"][0], conds["b"][0]
            add("sensitivity", item, _gt(a, b))
            add("sensitivity_gap", item, _gt(a, b) and _gap(a, b))
        else:
            natural = {"Y": "natural", "N": "less_natural"}.get(conds["TA"][1], "")
            for true, false, pol in (("TA", "FA", "aff"), ("TN", "FN", "neg")):
                t, f = conds[true][0], conds[false][0]
                case = f"{item}-{pol}"
                add("sensitivity", case, _gt(t, f))
                add(pol, case, _gt(t, f))
                add("sensitivity_gap", case, _gt(t, f) and _gap(t, f))
                add(f"{pol}_gap", case, _gt(t, f) and _gap(t, f))
                if natural:
                    add(natural, case, _gt(t, f))
                    add(f"{natural}_{pol}", case, _gt(t, f))
    return out


def cloze_quartiles(eset: EttingerSet, top: dict[str, list[list[Any]]], k: int) -> dict[str, Share]:
    """Her ROLE top-``k`` accuracy per quartile of the expected completion's human cloze, by suffix
    (``top5_cloze_q1`` ...); none where a row lacks its cloze, an empty quartile left out."""
    if eset.kind != "role" or not eset.rows or any(r.cloze is None for r in eset.rows):
        return {}
    import numpy as np

    bounds = [float(np.percentile([r.cloze for r in eset.rows], q)) for q in (25, 50, 75)]
    out: dict[str, Share] = {}
    for r in eset.rows:
        quartile = next((n for n, bound in enumerate(bounds, 1) if r.cloze <= bound), 4)  # type: ignore[operator]
        ids, hits = out.setdefault(f"top{k}_cloze_q{quartile}", ([], []))
        ids.append(f"{r.item}-{r.cond}")
        hits.append(_hit(top[r.context], r.expected, k))
    return dict(sorted(out.items()))


def role_cloze_diff(eset: EttingerSet) -> tuple[float | None, int]:
    """The humans' mean cloze of the target in the good order less in the reversal (her "AVG CLOZE DIFF", a
    property of the items to set beside the model's ``prob_diff``), over the pairs with both, and their count."""
    pairs: dict[str, dict[str, float | None]] = {}
    for r in eset.rows:
        pairs.setdefault(r.item, {})[r.cond] = r.target_cloze
    diffs = [c["a"] - c["b"] for c in pairs.values() if c.get("a") is not None and c.get("b") is not None]
    return (sum(diffs) / len(diffs) if diffs else None), len(diffs)


def role_prob_diff(eset: EttingerSet, probs: Sequence[float | None]) -> tuple[float | None, int]:
    """Mean P(target | a) - P(target | b) over the pairs with both probabilities, and their count."""
    diffs = [c["a"][0] - c["b"][0] for c in _by_item(eset, probs).values()
             if c["a"][0] is not None and c["b"][0] is not None]
    return (sum(diffs) / len(diffs) if diffs else None), len(diffs)


def shares(eset: EttingerSet, reading: dict[str, Any]) -> dict[str, Share]:
    """Every proportion of her tests on one set, by metric-name suffix (top1, top5, sensitivity, ...)."""
    out = {f"top{k}": accuracy(eset, reading["top"], k) for k in KS}
    for k in KS:
        out.update(cloze_quartiles(eset, reading["top"], k))
    out.update(sensitivity(eset, reading["probs"]))
    return out
