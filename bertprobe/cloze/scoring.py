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

from dataclasses import dataclass
from typing import Any

import torch

from bertprobe.cloze.items import MASK, ClozeItem
from bertprobe.errors import ProbeError


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


def candidate_ids_many(tokenizer: Any, pairs: list[tuple[ClozeItem, str]]) -> list[list[int]]:
    """Token ids of each (item, word) as the word would appear in place of the blank, in one tokenizer call.

    The word gets a leading space when one precedes the blank, so BPE vocabularies give 'Ġword'.
    """
    if not pairs:
        return []
    encoded = tokenizer([_spaced(it, w) for it, w in pairs], add_special_tokens=False)["input_ids"]
    for (it, w), ids in zip(pairs, encoded):
        if not ids:
            raise ProbeError(f"cloze item {it.id!r}: candidate {w!r} tokenizes to nothing")
    return [list(ids) for ids in encoded]


def candidate_ids(tokenizer: Any, item: ClozeItem, word: str) -> list[int]:
    """Token ids of ``word`` in place of the blank of ``item``."""
    return candidate_ids_many(tokenizer, [(item, word)])[0]


class ClozeScorer:
    """Builds masked inputs for items and scores them in batches on a masked-LM target."""

    def __init__(self, target: Any, batch_size: int = 32) -> None:
        self.target = target
        self.tok = target.tokenizer
        if self.tok.mask_token_id is None:
            raise ProbeError("the tokenizer has no mask token; the cloze probe needs a masked language model")
        self.batch_size = batch_size
        self.passes = 0

    def _parts(self, item: ClozeItem) -> tuple[list[int], list[int]]:
        return self._parts_many([item])[0]

    def _parts_many(self, items: list[ClozeItem]) -> list[tuple[list[int], list[int]]]:
        """Token ids before and after the blank of each item (two tokenizer calls for all items)."""
        splits = [it.text.split(MASK) for it in items]
        prefixes = [p.rstrip() if p[-1:].isspace() else p for p, _ in splits]
        pre = self.tok(prefixes, add_special_tokens=False)["input_ids"]
        suf = self.tok([s for _, s in splits], add_special_tokens=False)["input_ids"]
        return [(list(a), list(b)) for a, b in zip(pre, suf)]

    def has_unknown_word(self, item: ClozeItem) -> bool:
        """Whether an answer or distractor tokenizes to the unknown token (it cannot be scored fairly)."""
        return bool(self.unknown_items([item]))

    def unknown_items(self, items: list[ClozeItem]) -> set[str]:
        """Ids of items with a word that tokenizes to the unknown token."""
        unk = self.tok.unk_token_id
        if unk is None:
            return set()
        pairs = [(it, w) for it in items for w in (*it.answers, *it.distractors)]
        return {it.id for (it, _), ids in zip(pairs, candidate_ids_many(self.tok, pairs)) if unk in ids}

    def _specials(self) -> tuple[list[int], list[int]]:
        """The special tokens a single sequence gets before and after its content ([CLS] / [SEP], <s> / </s>)."""
        ids = self.tok(self.tok.mask_token, add_special_tokens=True)["input_ids"]
        at = ids.index(self.tok.mask_token_id)
        return list(ids[:at]), list(ids[at + 1 :])

    def _forward_logprobs(self, rows: list[tuple[list[int], int]]) -> torch.Tensor:
        """Log-softmax over the vocabulary at each row's position: ``len(rows) x V``."""
        order = sorted(range(len(rows)), key=lambda i: len(rows[i][0]))
        result = torch.empty(len(rows), self.target.model.config.vocab_size)
        pad = self.tok.pad_token_id or 0
        with torch.inference_mode():
            for s in range(0, len(order), self.batch_size):
                chunk = order[s : s + self.batch_size]
                width = max(len(rows[i][0]) for i in chunk)
                ids = torch.full((len(chunk), width), pad, dtype=torch.long)
                mask = torch.zeros_like(ids)
                for j, i in enumerate(chunk):
                    seq = rows[i][0]
                    ids[j, : len(seq)] = torch.tensor(seq)
                    mask[j, : len(seq)] = 1
                self.passes += 1
                pos = torch.tensor([rows[i][1] for i in chunk], device=self.target.device)
                logits = self._masked_logits(ids.to(self.target.device), mask.to(self.target.device), pos)
                picked = logits.float().log_softmax(-1).cpu()
                for j, i in enumerate(chunk):
                    result[i] = picked[j]
        return result

    def _masked_logits(self, ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits at one position per row (``rows x V``).

        The vocabulary projection (hidden x 30k for BERT) is the costliest layer, so a pre-hook on the
        output embeddings hands it only the scored position of each row instead of every position.
        """
        head = self.target.model.get_output_embeddings()
        rows = torch.arange(ids.shape[0], device=ids.device)

        def only_scored(_module: Any, args: tuple) -> tuple:
            hidden = args[0]
            return (hidden[rows, pos].unsqueeze(1), *args[1:])

        handle = head.register_forward_pre_hook(only_scored) if head is not None else None
        try:
            logits = self.target.model(input_ids=ids, attention_mask=mask).logits
        finally:
            if handle is not None:
                handle.remove()
        return logits[:, 0] if logits.shape[1] == 1 else logits[rows, pos]

    def score(self, items: list[ClozeItem], joint_batching: bool = True) -> list[ItemScores]:
        """Score every item's answers and distractors; ``joint_batching=False`` runs one item per pass."""
        if not joint_batching:
            return [s for it in items for s in self.score([it])]
        mask_id = self.tok.mask_token_id
        parts = self._parts_many(items)
        head, tail = self._specials()
        offset = len(head)
        # 1. one mask per item: the vocabulary distribution (and every single-token candidate's score)
        single_rows = [(head + pre + [mask_id] + suf + tail, offset + len(pre)) for pre, suf in parts]
        vocab = self._forward_logprobs(single_rows)
        # 2. multi-token candidates, left to right
        multi_rows: list[tuple[list[int], int]] = []
        multi_keys: list[tuple[int, str, int]] = []  # (item index, candidate, piece id)
        pairs = [(it, w) for it in items for w in dict.fromkeys((*it.answers, *it.distractors))]
        flat = iter(candidate_ids_many(self.tok, pairs))
        cand_ids: list[dict[str, list[int]]] = [
            {w: next(flat) for w in dict.fromkeys((*it.answers, *it.distractors))} for it in items
        ]
        for n, (it, (pre, suf)) in enumerate(zip(items, parts)):
            ids_by_word = cand_ids[n]
            for word, ids in ids_by_word.items():
                if len(ids) == 1:
                    continue
                for j in range(len(ids)):
                    span = ids[:j] + [mask_id] * (len(ids) - j)
                    multi_rows.append((head + pre + span + suf + tail, offset + len(pre) + j))
                    multi_keys.append((n, word, ids[j]))
        multi = self._forward_logprobs(multi_rows) if multi_rows else torch.empty(0, 0)
        sums: dict[tuple[int, str], float] = {}
        for r, (n, word, piece) in enumerate(multi_keys):
            sums[(n, word)] = sums.get((n, word), 0.0) + float(multi[r, piece])
        out = []
        for n, it in enumerate(items):
            def score(word: str, n: int = n) -> float:
                ids = cand_ids[n][word]
                return float(vocab[n, ids[0]]) if len(ids) == 1 else sums[(n, word)]
            out.append(ItemScores(it, {w: score(w) for w in it.answers}, {w: score(w) for w in it.distractors}, vocab[n]))
        return out
