"""Masked-LM scoring of cloze items.

* The model-agnostic blank ``{mask}`` becomes the tokenizer's own mask token; inputs are built from
  token ids (prefix + masks + suffix), so BPE word-start markers come out right (RoBERTa's 'Ġone').
* Single-token candidates take the fast path: one forward pass with one mask gives the log-probability
  of every vocabulary token.
* A multi-token candidate of k pieces is scored by its masked span's pseudo log-likelihood, left to
  right: all k positions start masked; piece j is scored with pieces < j filled in and pieces > j still
  masked; the k log-probabilities are summed. All such rows, for all items, go through batched passes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from bertprobe.errors import ProbeError
from bertprobe.model.masked_scoring import masked_logits
from bertprobe.probes.cloze.items import MASK, ClozeItem


@dataclass
class ItemScores:
    """Scores of one item: log-probabilities of each candidate and the single-mask vocabulary distribution."""

    item: ClozeItem
    answers: dict[str, float]
    distractors: dict[str, float]
    vocab_logprobs: torch.Tensor  # over the vocabulary, one mask


def _spaced(item: ClozeItem, word: str) -> str:
    prefix = item.text.split(MASK)[0]
    return (" " if prefix[-1:].isspace() else "") + word


def encode_many(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """Token ids of each text without special tokens, each distinct text tokenized once.

    A fast tokenizer is called through its Rust backend: transformers' wrapper spends most of a batch
    call converting encodings to Python objects the scorer never reads (about 3x the tokenizing itself).
    """
    distinct = list(dict.fromkeys(texts))
    backend = getattr(tokenizer, "backend_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
    if backend is not None and backend.truncation is None:
        # a tokenizer once called with padding= keeps it in its backend: cut the padding off
        ids = [[t for t, a in zip(e.ids, e.attention_mask) if a]
               for e in backend.encode_batch(distinct, add_special_tokens=False)]
    else:
        ids = [list(x) for x in tokenizer(distinct, add_special_tokens=False)["input_ids"]] if distinct else []
    by_text = dict(zip(distinct, ids))
    return [list(by_text[t]) for t in texts]


def word_ids(tokenizer: Any, items: list[ClozeItem]) -> list[tuple[ClozeItem, str, list[int]]]:
    """(item, word, its token ids in place of the blank) for every answer and distractor of ``items``."""
    pairs = [(it, w) for it in items for w in (*it.answers, *it.distractors)]
    return [(it, word, ids) for (it, word), ids in zip(pairs, candidate_ids_many(tokenizer, pairs))]


def unknown_words(tokenizer: Any, items: list[ClozeItem]) -> dict[str, list[str]]:
    """Item id -> its answers and distractors that ``tokenizer`` maps to the unknown token (items with any)."""
    unk = tokenizer.unk_token_id
    if unk is None:
        return {}
    out: dict[str, list[str]] = {}
    for it, word, ids in word_ids(tokenizer, items):
        if unk in ids:
            out.setdefault(it.id, []).append(word)
    return out


def long_words(tokenizer: Any, items: list[ClozeItem], pieces: int) -> dict[str, dict[str, int]]:
    """Item id -> {word: its pieces}: the answers and distractors ``tokenizer`` splits into ``pieces`` or more."""
    out: dict[str, dict[str, int]] = {}
    for it, word, ids in word_ids(tokenizer, items):
        if len(ids) >= pieces:
            out.setdefault(it.id, {})[word] = len(ids)
    return out


def candidate_ids_many(tokenizer: Any, pairs: list[tuple[ClozeItem, str]]) -> list[list[int]]:
    """Token ids of each (item, word) as the word would appear in place of the blank.

    The word gets a leading space when one precedes the blank, so BPE vocabularies give 'Ġword'.
    """
    encoded = encode_many(tokenizer, [_spaced(it, w) for it, w in pairs])
    for (it, w), ids in zip(pairs, encoded):
        if not ids:
            raise ProbeError(f"cloze item {it.id!r}: candidate {w!r} tokenizes to nothing")
    return encoded


def candidate_ids(tokenizer: Any, item: ClozeItem, word: str) -> list[int]:
    """Token ids of ``word`` in place of the blank of ``item``."""
    return candidate_ids_many(tokenizer, [(item, word)])[0]


Row = tuple[tuple[int, ...], int]  # token ids and the scored position


class ClozeScorer:
    """Builds masked inputs for items and scores them in batches on a masked-LM target."""

    def __init__(self, target: Any, batch_size: int = 32, progress: Callable[..., Iterable[Any]] | None = None) -> None:
        self.target = target
        self.progress = progress
        self.tok = target.tokenizer
        if self.tok.mask_token_id is None:
            raise ProbeError("the tokenizer has no mask token; the cloze probe needs a masked language model")
        self.batch_size = batch_size
        self.passes = 0
        self.forward_seconds = 0.0  # time in model passes (inputs on the device to log-probs on the host)

    def _parts_many(self, items: list[ClozeItem]) -> list[tuple[list[int], list[int]]]:
        """Token ids before and after the blank of each item (two tokenizer calls for all items)."""
        splits = [it.text.split(MASK) for it in items]
        prefixes = [p.rstrip() if p[-1:].isspace() else p for p, _ in splits]
        pre = encode_many(self.tok, prefixes)
        suf = encode_many(self.tok, [s for _, s in splits])
        return list(zip(pre, suf))

    def unknown_items(self, items: list[ClozeItem]) -> set[str]:
        """Ids of items with an answer or distractor that tokenizes to the unknown token (unfair to score)."""
        return set(self.unknown_words(items))

    def unknown_words(self, items: list[ClozeItem]) -> dict[str, list[str]]:
        """Item id -> its answers and distractors that tokenize to the unknown token, for the items that have any."""
        return unknown_words(self.tok, items)

    def _specials(self) -> tuple[list[int], list[int]]:
        """The special tokens a single sequence gets before and after its content ([CLS] / [SEP], <s> / </s>)."""
        ids = self.tok(self.tok.mask_token, add_special_tokens=True)["input_ids"]
        at = ids.index(self.tok.mask_token_id)
        return list(ids[:at]), list(ids[at + 1 :])

    def _forward(self, rows: list[Row], full: list[int], picks: list[tuple[int, int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the distinct masked ``rows`` (ids, scored position) through the model in length-sorted batches.

        Returns the log-softmax over the vocabulary of each row in ``full`` (``len(full) x V``) and, for
        each (row, token) in ``picks``, that token's log-probability. Only the picked values of the other
        rows are kept, so memory grows with the rows' count, not with rows x vocabulary.
        """
        full_at: dict[int, list[int]] = {}
        for k, r in enumerate(full):
            full_at.setdefault(r, []).append(k)
        picks_of: dict[int, list[tuple[int, int]]] = {}
        for k, (r, token) in enumerate(picks):
            picks_of.setdefault(r, []).append((k, token))
        dists = torch.empty(len(full), self.target.model.config.vocab_size)
        picked = torch.empty(len(picks))
        pad = self.tok.pad_token_id or 0
        device = self.target.device
        order = sorted(range(len(rows)), key=lambda i: len(rows[i][0]))
        with torch.inference_mode():
            starts = range(0, len(order), self.batch_size)
            if self.progress is not None:
                starts = self.progress(starts, total=len(starts), desc=f"cloze ({len(rows)} masked inputs)")
            for start in starts:
                chunk = order[start : start + self.batch_size]
                width = max(len(rows[i][0]) for i in chunk)
                ids = torch.tensor([[*rows[i][0], *[pad] * (width - len(rows[i][0]))] for i in chunk], device=device)
                mask = torch.tensor([[1] * len(rows[i][0]) + [0] * (width - len(rows[i][0])) for i in chunk], device=device)
                pos = torch.tensor([rows[i][1] for i in chunk], device=device)
                keep = [(j, k) for j, i in enumerate(chunk) for k in full_at.get(i, ())]
                wanted = [(j, k, token) for j, i in enumerate(chunk) for k, token in picks_of.get(i, ())]
                self.passes += 1
                started = time.perf_counter()
                logprobs = masked_logits(self.target.model, ids, mask, pos).float().log_softmax(-1)
                if keep:
                    local, dest = zip(*keep)
                    dists[list(dest)] = logprobs[list(local)].cpu()
                if wanted:
                    local, dest, tokens = zip(*wanted)
                    picked[list(dest)] = logprobs[list(local), list(tokens)].cpu()
                self.forward_seconds += time.perf_counter() - started
        return dists, picked

    def score(self, items: list[ClozeItem], joint_batching: bool = True) -> list[ItemScores]:
        """Score every item's answers and distractors; ``joint_batching=False`` scores one item per pass.

        Each item contributes one single-mask row (its vocabulary distribution, which also scores every
        single-token candidate) and, per multi-token candidate of k pieces, k left-to-right rows.
        Identical rows (the first piece of same-length candidates) are computed once.
        """
        if not joint_batching:
            return [s for it in items for s in self.score([it])]
        mask_id = self.tok.mask_token_id
        head, tail = self._specials()
        words = [list(dict.fromkeys((*it.answers, *it.distractors))) for it in items]
        flat = iter(candidate_ids_many(self.tok, [(it, w) for it, ws in zip(items, words) for w in ws]))
        cand_ids = [{w: next(flat) for w in ws} for ws in words]
        index: dict[Row, int] = {}

        def row(ids: list[int], pos: int) -> int:
            return index.setdefault((tuple(ids), pos), len(index))

        full: list[int] = []
        picks: list[tuple[int, int]] = []
        spans: list[tuple[int, str, int]] = []  # (item, word, first pick) of each multi-token candidate
        for n, (pre, suf) in enumerate(self._parts_many(items)):
            at = len(head) + len(pre)
            full.append(row(head + pre + [mask_id] + suf + tail, at))
            for word, ids in cand_ids[n].items():
                if len(ids) > 1:
                    spans.append((n, word, len(picks)))
                    for j, piece in enumerate(ids):
                        span = ids[:j] + [mask_id] * (len(ids) - j)
                        picks.append((row(head + pre + span + suf + tail, at + j), piece))
        dists, picked = self._forward([key for key in index], full, picks)
        sums = {(n, word): float(picked[k : k + len(cand_ids[n][word])].sum()) for n, word, k in spans}
        out = []
        for n, it in enumerate(items):
            def score(word: str, n: int = n) -> float:
                ids = cand_ids[n][word]
                return float(dists[n, ids[0]]) if len(ids) == 1 else sums[(n, word)]
            out.append(ItemScores(it, {w: score(w) for w in it.answers}, {w: score(w) for w in it.distractors}, dists[n]))
        return out
