"""Entity suppression: the attack goal of a universal trigger on a token classifier (NER).

A phrase prepended to every sentence should make the model miss the entities of one type. Per sentence,
the goal knows where each word's first sub-token sits in the encoding the trigger search splices
(``SplicedRows`` tokenises the sentence's text once), and the gold tags of the words inside entities of the
attacked type. The search loss of a row is the cross-entropy toward ``O`` at those words' first sub-tokens
(the convention the word's prediction is read from), averaged over them; a row is hit when none of its
entities of the type is still found exactly. Reading a row's words back (``word_tags``) gives the spans,
so recall of the type is scored strictly, as the accuracy probe scores it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from bertprobe.tasks.entities import spans


@dataclass(frozen=True)
class EntityGoal:
    """Suppress entities of type ``kind``. ``firsts[r]``: the token index (without the trigger) of each word's
    first sub-token of example r, -1 for a word cut by truncation; ``gold[r]``: its gold entity spans of the
    type; ``shift``: how far the trigger moves the words (its length, prepended)."""

    kind: str
    o_id: int
    tag_names: tuple[str, ...]
    scheme: str
    firsts: tuple[tuple[int, ...], ...]
    gold: tuple[tuple[tuple[int, int, str], ...], ...]
    shift: int

    def _targets(self, rows: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Row and token index of every word inside a gold entity of the type (first sub-tokens, shifted)."""
        row_ix, tok_ix = [], []
        for i, r in enumerate(rows):
            for a, b, _ in self.gold[r]:
                for w in range(a, b):
                    if self.firsts[r][w] >= 0:
                        row_ix.append(i)
                        tok_ix.append(self.firsts[r][w] + self.shift)
        return torch.tensor(row_ix, dtype=torch.long), torch.tensor(tok_ix, dtype=torch.long)

    def _rows(self, logits: torch.Tensor, rows: Sequence[int]) -> tuple[torch.Tensor, list[int]]:
        """Logits as ``[n, seq, tags]`` and the example of each of the n rows. The scorer passes the model's
        ``[rows, seq, tags]``, or ``[triggers, rows, seq * tags]`` / ``[triggers * rows, seq * tags]``
        (every trigger spliced into every row, trigger-major)."""
        n_tags = len(self.tag_names)
        if logits.dim() == 3 and logits.shape[-1] == n_tags:
            n = logits.shape[0]
        else:
            n = logits.shape[0] * (logits.shape[1] if logits.dim() == 3 else 1)
        return logits.reshape(n, -1, n_tags), list(rows) * (n // len(rows))

    def objective(self, logits: torch.Tensor, rows: Sequence[int]) -> torch.Tensor:
        """Per row: the mean cross-entropy toward O over the attacked entities' words (lower: more suppressed)."""
        cube, owners = self._rows(logits, rows)
        out = torch.zeros(cube.shape[0], device=cube.device)
        reps = cube.shape[0] // len(rows)
        row_ix, tok_ix = self._targets(rows)
        if row_ix.numel() == 0:
            return out
        full_rows = (row_ix.unsqueeze(0) + torch.arange(reps).unsqueeze(1) * len(rows)).reshape(-1)
        full_toks = tok_ix.repeat(reps)
        picked = cube[full_rows.to(cube.device), full_toks.to(cube.device)].float()
        ce = F.cross_entropy(picked, torch.full((picked.shape[0],), self.o_id, device=cube.device), reduction="none")
        out.index_add_(0, full_rows.to(cube.device), ce)
        counts = torch.zeros(cube.shape[0], device=cube.device).index_add_(0, full_rows.to(cube.device),
                                                                           torch.ones_like(ce))
        return out / counts.clamp(min=1)

    def word_tags(self, logits: torch.Tensor, r: int, shift: int) -> list[str]:
        """The predicted tag of each word of example r from one row's ``[seq, tags]`` logits (O past truncation)."""
        ids = logits.argmax(-1).tolist()
        return [self.tag_names[ids[t + shift]] if t >= 0 and t + shift < len(ids) else "O" for t in self.firsts[r]]

    def found(self, logits: torch.Tensor, r: int, shift: int) -> list[bool]:
        """For each gold entity of the type in example r: whether it is predicted with its exact span."""
        predicted = set(spans(self.word_tags(logits, r, shift), self.scheme))
        return [g in predicted for g in self.gold[r]]

    def hit(self, logits: torch.Tensor, rows: Sequence[int]) -> torch.Tensor:
        """Per row: no entity of the type is found any more."""
        cube, owners = self._rows(logits, rows)
        return torch.tensor([not any(self.found(cube[i], r, self.shift)) for i, r in enumerate(owners)])


def word_firsts(tokenizer: Any, text: str, words: Sequence[str], max_length: int) -> tuple[int, ...]:
    """Token index of each word's first sub-token when ``text`` (the words joined by spaces) is encoded as
    the trigger search encodes it (truncated to ``max_length``); -1 for a word cut off."""
    enc = tokenizer(text, truncation=True, max_length=max_length, return_offsets_mapping=True)
    starts, at = [], 0
    for w in words:
        starts.append(at)
        at += len(w) + 1
    out = [-1] * len(words)
    for t, (s, e) in enumerate(enc["offset_mapping"]):
        if e <= s:
            continue
        w = bisect_right(starts, s) - 1
        if 0 <= w < len(words) and out[w] < 0:
            out[w] = t
    return tuple(out)
