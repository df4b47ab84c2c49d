"""Extractive QA: (question, context) pairs split into overlapping windows, and answers decoded over them.

Long contexts are never cut. ``encode_windows`` asks the fast tokenizer for windows (``truncation=
"only_second"`` with ``stride`` and ``return_overflowing_tokens``), then checks that every sub-token of
every context lies in some window: ``tokenizers`` 0.23.2 returned two windows for a context longer than
two and silently dropped its tail. Where the windows fall short (or do not match the context's own
tokenisation), the question's windows are rebuilt here from the full tokenisation of its context, the
way ``tokenizers`` 0.23.3 cuts them: the first ``capacity`` context sub-tokens, then each next window
starting ``stride`` sub-tokens before the previous one ended, until the context's end is in a window.

``decode`` picks one answer over all windows of a question (the usual SQuAD post-processing): in each
window the top ``n_best`` start and end positions inside the context, pairs with end >= start and at
most ``max_answer_tokens`` sub-tokens, scored start + end logit; the best pair over all windows, mapped
to characters of the original context through the tokenizer's offsets. Its ``confidence`` is its
probability under a softmax over the scores of the ``n_best`` best candidates of the question (all
windows together, each span of the context once: a span that two overlapping windows both propose keeps
its higher score, so its probability is not split between two copies of itself). The null score is the
[CLS] start + end logit, the minimum over windows; with a ``null_threshold`` (SQuAD 2.0 data) the
question is answered with the empty string when the null score exceeds the best span's score by more
than the threshold, and the null candidate then joins the softmax. ``answer`` runs a model over the
windows (length-sorted batches, ``torch.inference_mode``) and decodes every question.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from bertprobe.errors import DataError, TargetError


@dataclass(frozen=True)
class QuestionWindows:
    """The windows of one question. ``rows[w]`` holds the model inputs of window ``w`` (``input_ids``,
    ``token_type_ids``, ``attention_mask``); ``context_index[w][p]`` the index of position ``p``'s sub-token
    in the context's own tokenisation (-1 for the question and special tokens); ``offsets[k]`` the
    (start, end) characters of context sub-token ``k``. ``rebuilt``: the tokenizer's windows fell short
    and these were built here."""

    rows: tuple[dict[str, list[int]], ...]
    context_index: tuple[tuple[int, ...], ...]
    offsets: tuple[tuple[int, int], ...]
    cls_position: int = 0
    rebuilt: bool = False

    @property
    def context_tokens(self) -> int:
        return len(self.offsets)

    def covered(self) -> set[int]:
        """The context sub-tokens that lie in some window."""
        return {k for window in self.context_index for k in window if k >= 0}


@dataclass(frozen=True)
class Answer:
    """The decoded answer to one question: ``text`` = ``context[start:end]`` (characters; empty when the
    model abstains or the context has no sub-token), its ``score`` (start + end logit), its ``confidence``
    (probability among the n-best candidates of all windows), the ``null_score`` ([CLS] start + end, the
    minimum over windows), how many ``windows`` the question was split into, the ``window`` and the
    context sub-tokens ``tokens`` (first, last) of the span (-1 when none), and whether the windows were
    ``rebuilt`` because the tokenizer's fell short."""

    text: str
    start: int
    end: int
    score: float
    confidence: float
    null_score: float
    windows: int
    window: int = -1
    tokens: tuple[int, int] = (-1, -1)
    abstained: bool = False
    rebuilt: bool = False


def _require_fast(tokenizer: Any) -> None:
    if not getattr(tokenizer, "is_fast", False):
        raise TargetError("extractive QA maps answers back to characters through the tokenizer's offsets, which "
                          "needs a fast tokenizer (tokenizer.json next to the model)")


def _alone(tokenizer: Any, texts: list[str]) -> tuple[list[list[int]], list[list[tuple[int, int]]]]:
    """Each text's own sub-tokens and character offsets, untruncated, without special tokens (``verbose=False``:
    no warning that a long context exceeds the model's length, which the windows take care of)."""
    enc = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    return [list(i) for i in enc["input_ids"]], [[tuple(o) for o in offs] for offs in enc["offset_mapping"]]


def window_starts(total: int, capacity: int, stride: int) -> list[tuple[int, int]]:
    """The (first, end) context sub-tokens of each window: ``capacity`` a window, consecutive windows sharing
    ``stride`` sub-tokens, the last one ending at ``total`` (one empty window for an empty context)."""
    if capacity <= stride:
        raise ValueError(f"a window holds {capacity} context sub-tokens, not more than the stride {stride}")
    out = [(0, min(capacity, total))]
    while out[-1][1] < total:
        start = out[-1][1] - stride
        out.append((start, min(start + capacity, total)))
    return out


def encode_windows(tokenizer: Any, questions: Sequence[str], contexts: Sequence[str], max_length: int = 384,
                   stride: int = 128, question_first: bool = True, names: Sequence[str] | None = None) -> list[QuestionWindows]:
    """The windows of each (question, context) pair, every context sub-token in at least one of them (see the
    module docstring). ``names`` label the questions in errors (their ids); a question too long to leave
    room for more than ``stride`` context sub-tokens is a DataError."""
    _require_fast(tokenizer)
    if len(questions) != len(contexts):
        raise ValueError(f"{len(questions)} questions for {len(contexts)} contexts")
    if not questions:
        return []
    names = list(names) if names is not None else [str(i) for i in range(len(questions))]
    specials = tokenizer.num_special_tokens_to_add(pair=True)
    q_lengths = [len(ids) for ids in _alone(tokenizer, list(questions))[0]]
    for name, question, n in zip(names, questions, q_lengths):
        if max_length - specials - n <= stride:
            raise DataError(f"question {name} ({question[:60]!r}) is {n} sub-tokens: windows of max_length {max_length} "
                            f"overlapping by stride {stride} leave no room for its context ({max_length - specials - n} "
                            f"sub-tokens after the question, not more than the stride); lower the stride "
                            f"(model.stride) below {max_length - specials - n}, raise max_length, or shorten the question")
    unique = list(dict.fromkeys(contexts))
    full = dict(zip(unique, zip(*_alone(tokenizer, unique))))
    first, second = (questions, contexts) if question_first else (contexts, questions)
    context_seq = 1 if question_first else 0
    enc = tokenizer(list(first), list(second), truncation="only_second" if question_first else "only_first",
                    max_length=max_length, stride=stride, return_overflowing_tokens=True, return_offsets_mapping=True)
    per_question: list[list[int]] = [[] for _ in questions]
    for w, q in enumerate(enc["overflow_to_sample_mapping"]):
        per_question[q].append(w)
    keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc]
    out = []
    for q, windows in enumerate(per_question):
        ids, offsets = full[contexts[q]]
        rows, index = [], []
        for w in windows:
            seq = enc.sequence_ids(w)
            rows.append({k: list(enc[k][w]) for k in keys})
            index.append(_context_index(seq, context_seq, enc["input_ids"][w], enc["offset_mapping"][w], ids, offsets))
        cls = _cls_position(tokenizer, rows[0]["input_ids"]) if rows else 0
        windows_ok = rows and all(i is not None for i in index)
        if windows_ok and {k for i in index for k in i if k >= 0} == set(range(len(ids))):
            kept = tuple(tuple(i) for i in index if i is not None)
            out.append(QuestionWindows(tuple(rows), kept, tuple(offsets), cls))
            continue
        if not rows:
            raise TargetError(f"the tokenizer returned no window for question {names[q]}")
        capacity = max_length - specials - q_lengths[q]
        rebuilt_rows, rebuilt_index = _rebuild(rows[0], enc.sequence_ids(windows[0]), context_seq, ids, capacity, stride)
        out.append(QuestionWindows(tuple(rebuilt_rows), tuple(rebuilt_index), tuple(offsets), cls, rebuilt=True))
    return out


def rebuilt_note(windows: Sequence[QuestionWindows]) -> str | None:
    """A line for the report when the installed ``tokenizers`` returned windows that left part of some
    contexts out (and they were rebuilt here), naming its version; None when its windows covered every context."""
    count = sum(qw.rebuilt for qw in windows)
    if not count:
        return None
    import tokenizers

    return (f"tokenizers {tokenizers.__version__} returned windows that left part of {count} context(s) out; "
            "bertprobe rebuilt them so that every sub-token lies in some window")


def _context_index(seq: list[int | None], context_seq: int, row_ids: list[int], row_offsets: list[Any],
                   ids: list[int], offsets: list[tuple[int, int]]) -> list[int] | None:
    """Per position of a window, its sub-token's index in the context's own tokenisation (-1 outside the
    context); None when the window's context is not one contiguous run of that tokenisation."""
    positions = [p for p, s in enumerate(seq) if s == context_seq]
    out = [-1] * len(seq)
    if not positions:
        return out
    if positions != list(range(positions[0], positions[-1] + 1)):
        return None
    window_ids = [row_ids[p] for p in positions]
    window_offsets = [tuple(row_offsets[p]) for p in positions]
    length = len(positions)
    for a in (k for k, o in enumerate(offsets) if o == window_offsets[0]):
        if ids[a : a + length] == window_ids and offsets[a : a + length] == window_offsets:
            for j, p in enumerate(positions):
                out[p] = a + j
            return out
    return None


def _rebuild(template: dict[str, list[int]], seq: list[int | None], context_seq: int, ids: list[int],
             capacity: int, stride: int) -> tuple[list[dict[str, list[int]]], list[tuple[int, ...]]]:
    """Windows cut here from the context's full tokenisation, wrapped in the first window's special tokens
    and question (its positions before and after the context)."""
    positions = [p for p, s in enumerate(seq) if s == context_seq]
    first = positions[0] if positions else next(p for p in range(len(seq)) if seq[p] is None and p > 0)
    last = positions[-1] + 1 if positions else first
    context_type = template["token_type_ids"][first] if positions and "token_type_ids" in template else 0
    rows, index = [], []
    for a, b in window_starts(len(ids), capacity, stride):
        row = {}
        for key, values in template.items():
            middle = {"input_ids": ids[a:b], "attention_mask": [1] * (b - a),
                      "token_type_ids": [context_type] * (b - a)}.get(key, [0] * (b - a))
            row[key] = list(values[:first]) + middle + list(values[last:])
        rows.append(row)
        index.append(tuple([-1] * first + list(range(a, b)) + [-1] * (len(seq) - last)))
    return rows, index


def _cls_position(tokenizer: Any, row: list[int]) -> int:
    cls = getattr(tokenizer, "cls_token_id", None)
    return row.index(cls) if cls is not None and cls in row else 0


def decode(start_logits: Sequence[torch.Tensor], end_logits: Sequence[torch.Tensor], windows: QuestionWindows,
           context: str, n_best: int = 20, max_answer_tokens: int = 30, null_threshold: float | None = None) -> Answer:
    """The answer to one question from the start and end logits of each of its windows (see the module
    docstring); ``null_threshold`` None never abstains (SQuAD 1.1)."""
    candidates: list[tuple[float, int, int, int]] = []  # (score, window, first position, last position)
    null_score = math.inf
    for w, (s, e) in enumerate(zip(start_logits, end_logits)):
        s, e = s.float().flatten(), e.float().flatten()
        null_score = min(null_score, float(s[windows.cls_position] + e[windows.cls_position]))
        inside = torch.tensor([k >= 0 for k in windows.context_index[w]][: len(s)], dtype=torch.bool)
        if not bool(inside.any()):
            continue
        k = min(n_best, int(inside.sum()))
        starts = s.masked_fill(~inside, -math.inf).topk(k).indices
        ends = e.masked_fill(~inside, -math.inf).topk(k).indices
        length = ends[None, :] - starts[:, None]
        valid = (length >= 0) & (length < max_answer_tokens)
        scores = s[starts][:, None] + e[ends][None, :]
        for i, j in valid.nonzero().tolist():
            candidates.append((float(scores[i, j]), w, int(starts[i]), int(ends[j])))
    candidates.sort(key=lambda c: (-c[0], c[1], c[2], c[3]))
    best: list[tuple[float, int, int, int]] = []  # one candidate per span of the context: the best of its copies
    seen: set[tuple[int, int]] = set()
    for c in candidates:
        span = (windows.context_index[c[1]][c[2]], windows.context_index[c[1]][c[3]])
        if span not in seen:
            seen.add(span)
            best.append(c)
            if len(best) == n_best:
                break
    null_score = null_score if math.isfinite(null_score) else 0.0
    abstain = null_threshold is not None and (not best or null_score - best[0][0] > null_threshold)
    pool = [c[0] for c in best] + ([null_score] if null_threshold is not None else [])
    probs = torch.tensor(pool, dtype=torch.float64).softmax(0).tolist() if pool else []
    common = dict(null_score=null_score, windows=len(windows.rows), rebuilt=windows.rebuilt)
    if abstain or not best:
        return Answer("", 0, 0, null_score if abstain else -math.inf, probs[-1] if abstain else 0.0, abstained=abstain, **common)
    score, w, i, j = best[0]
    first, last = windows.context_index[w][i], windows.context_index[w][j]
    start, end = windows.offsets[first][0], windows.offsets[last][1]
    return Answer(context[start:end], start, end, score, probs[0], window=w, tokens=(first, last), **common)


def gold_positions(windows: QuestionWindows, start: int, text: str) -> list[tuple[int, int]]:
    """Per window, the positions of the first and last sub-tokens of the answer ``text`` at character ``start``
    where the window holds the whole answer, else the [CLS] position twice: the labels QA models are trained
    on (what the start/end cross-entropy of ``span_loss`` is taken against)."""
    end = start + len(text)
    inside = [k for k, (a, b) in enumerate(windows.offsets) if a < end and b > start and b > a]
    cls = (windows.cls_position, windows.cls_position)
    if not inside:
        return [cls] * len(windows.rows)
    out = []
    for index in windows.context_index:
        where = {k: p for p, k in enumerate(index) if k >= 0}
        out.append((where[inside[0]], where[inside[-1]]) if inside[0] in where and inside[-1] in where else cls)
    return out


def span_loss(start_logits: torch.Tensor, end_logits: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
    """Per window (``reduction='none'``) the mean of the start and end cross-entropies, as Hugging Face's
    ``…ForQuestionAnswering`` heads compute their training loss (whose batch mean it is)."""
    import torch.nn.functional as F

    start = F.cross_entropy(start_logits.float(), starts.to(start_logits.device), reduction="none")
    end = F.cross_entropy(end_logits.float(), ends.to(end_logits.device), reduction="none")
    return (start + end) / 2


def accepted_inputs(model: Any) -> frozenset[str]:
    """The tokenizer outputs ``model``'s forward accepts (DistilBERT takes no token_type_ids)."""
    accepted = set(inspect.signature(model.forward).parameters)
    return frozenset({"input_ids", "attention_mask", "token_type_ids"} & accepted)


def window_logits(model: Any, rows: Sequence[dict[str, list[int]]], batch_size: int | None = None,
                  progress: Callable[..., Iterable[Any]] | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(start, end) logits of each window, float32 on the CPU, in input order, from length-sorted batches under
    ``torch.inference_mode``. ``model`` is a ``Target`` (its batch planning, padding, device and compiled
    model) or a plain ``…ForQuestionAnswering`` module (batches of ``batch_size`` on its own device)."""
    if hasattr(model, "plan_batches") and hasattr(model, "collate"):  # a Target (the model floor, not imported here)
        names = model.input_names
        encoded = _Rows([{k: v for k, v in r.items() if k in names} for r in rows], [len(r["input_ids"]) for r in rows])
        order = sorted(range(len(encoded.rows)), key=encoded.lengths.__getitem__)
        plans = model.plan_batches(encoded, order, batch_size)
        collate: Callable[[list[dict[str, list[int]]]], dict[str, torch.Tensor]] = model.collate
        net = model.compiled if model.compiled is not None else model.model
        rows = encoded.rows
    else:
        names = accepted_inputs(model)
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]["input_ids"]))
        size = batch_size or 32
        plans = [order[a : a + size] for a in range(0, len(order), size)]
        device = next(model.parameters()).device
        collate = lambda chunk: _pad(chunk, names, device)  # noqa: E731
        net = model
    out: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(rows)
    batches: Iterable[Any] = plans if progress is None else progress(plans, total=len(plans), desc="answer")
    with torch.inference_mode():
        for idx in batches:
            result = net(**collate([rows[i] for i in idx]))
            starts, ends = result.start_logits.float().cpu(), result.end_logits.float().cpu()
            for k, i in enumerate(idx):
                n = len(rows[i]["input_ids"])
                out[i] = (starts[k, :n].clone(), ends[k, :n].clone())
    return out  # type: ignore[return-value]


@dataclass
class _Rows:
    """Encoded rows and their lengths, as ``Target.plan_batches`` reads them (``model.target.Encoded``'s shape)."""

    rows: list[dict[str, list[int]]]
    lengths: list[int]


def _pad(rows: list[dict[str, list[int]]], names: frozenset[str], device: torch.device) -> dict[str, torch.Tensor]:
    """Rows padded with zeros to the longest (the attention mask hides the padding; pad id 0 as BERT's)."""
    width = max(len(r["input_ids"]) for r in rows)
    batch = {}
    for key in (k for k in rows[0] if k in names):
        tensor = torch.zeros(len(rows), width, dtype=torch.long)
        for i, r in enumerate(rows):
            tensor[i, : len(r[key])] = torch.tensor(r[key])
        batch[key] = tensor.to(device)
    return batch


def answer(model: Any, questions: Sequence[str], contexts: Sequence[str], tokenizer: Any = None, *,
           max_length: int = 384, stride: int = 128, n_best: int = 20, max_answer_tokens: int = 30,
           null_threshold: float | None = None, question_first: bool = True, batch_size: int | None = None,
           names: Sequence[str] | None = None, progress: Callable[..., Iterable[Any]] | None = None) -> list[Answer]:
    """Answer each question from its context: windows (``encode_windows``), the model's start/end logits
    (``window_logits``), one answer decoded over all windows of each question (``decode``). ``model`` is a
    ``Target`` (its tokenizer is used) or a plain QA module with ``tokenizer``."""
    tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise TargetError("answer() needs the model's tokenizer")
    windows = encode_windows(tokenizer, questions, contexts, max_length, stride, question_first, names)
    flat = [row for qw in windows for row in qw.rows]
    logits = window_logits(model, flat, batch_size, progress)
    out, at = [], 0
    for qw, context in zip(windows, contexts):
        mine = logits[at : at + len(qw.rows)]
        at += len(qw.rows)
        out.append(decode([s for s, _ in mine], [e for _, e in mine], qw, context, n_best, max_answer_tokens, null_threshold))
    return out
