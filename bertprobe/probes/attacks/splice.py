"""Examples tokenised once, with trigger slots spliced into the encoded rows.

A trigger is ``length`` token ids inserted at one index per row. Rows are tokenised once; every
candidate trigger is written into copies of the same padded template, so scoring thousands of
candidates never re-tokenises. Insertion points are word starts, so a trigger never lands inside a
word split into pieces.
"""

from __future__ import annotations

import random
from typing import Any, Literal

import torch

from bertprobe.data.dataset import Example
from bertprobe.errors import ProbeError
from bertprobe.model.target import Target

Position = Literal["prepend", "append", "start", "middle", "end", "random"]


def content_runs(special: list[int]) -> list[tuple[int, int]]:
    """[start, end) spans of consecutive non-special tokens (one per segment)."""
    runs, start = [], None
    for i, s in enumerate(special + [1]):
        if not s and start is None:
            start = i
        elif s and start is not None:
            runs.append((start, i))
            start = None
    return runs


def word_starts(enc: Any, tokens: list[str], run: tuple[int, int]) -> list[int]:
    """Token indices in ``run`` where a word begins (by the fast tokenizer's word ids when it has them)."""
    lo, hi = run
    try:
        words = enc.word_ids()
    except (ValueError, AttributeError):  # a slow tokenizer: WordPiece continuation marks instead
        return [i for i in range(lo, hi) if i == lo or not tokens[i].startswith("##")]
    return [i for i in range(lo, hi) if i == lo or words[i] != words[i - 1]]


def insertion_index(starts: list[int], run: tuple[int, int], position: Position, rng: random.Random | None) -> int:
    """Where the trigger goes: the run's start or end, a random inner word start, or any word boundary."""
    if position in ("prepend", "start"):
        return run[0]
    if position in ("append", "end"):
        return run[1]
    if rng is None:
        raise ValueError(f"position {position!r} needs a random generator")
    inner = [i for i in starts if i != run[0]]
    if position == "middle":
        return rng.choice(inner) if inner else run[0]
    return rng.choice(starts + [run[1]])


class SplicedRows:
    """Examples tokenised once (leaving room for the trigger) with the index where the trigger goes.

    ``position``: prepend/start, append/end, middle (a random word start inside the text, seeded by
    ``rng``) or random (any word boundary, ends included). ``segment``: which text of a pair receives
    the trigger. ``char_at[i]`` is the character offset in that text where row i's trigger goes, so a
    model with another tokenizer can receive the same insertion as text (``insert_text``). ``max_length`` (default:
    the target's) and ``truncation`` are the tokenizer's (a reader's window: its own length, ``only_second``);
    ``keep_encodings`` keeps each row's encoding (its offsets and sequence ids) in ``encodings``.
    """

    def __init__(self, target: Target, examples: list[Example], length: int, position: Position = "prepend",
                 segment: Literal["first", "second"] = "first", rng: random.Random | None = None,
                 max_length: int | None = None, truncation: bool | str = True, keep_encodings: bool = False) -> None:
        self.target = target
        self.length = length
        self.segment = segment
        self.max_length = (max_length or target.max_length) - length
        self.encodings: list[Any] = []
        tok = target.tokenizer
        keep = target.input_names
        self.ids: list[list[int]] = []
        self.types: list[list[int]] = []
        self.insert: list[int] = []
        self.char_at: list[int] = []
        fast = bool(getattr(tok, "is_fast", False))
        for ex in examples:
            if segment == "second" and ex.text_pair is None:
                raise ProbeError("segment: second needs sentence-pair data (data.text_pair)")
            enc = tok(ex.text, ex.text_pair, truncation=truncation, max_length=self.max_length,
                      return_special_tokens_mask=True, return_offsets_mapping=fast)
            if keep_encodings:
                self.encodings.append(enc)
            ids = list(enc["input_ids"])
            runs = content_runs(list(enc["special_tokens_mask"]))
            run = runs[0 if segment == "first" else min(1, len(runs) - 1)] if runs else (1, 1)
            tokens = tok.convert_ids_to_tokens(ids)
            at = insertion_index(word_starts(enc, tokens, run), run, position, rng)
            self.ids.append(ids)
            types = list(enc["token_type_ids"]) if "token_type_ids" in enc and "token_type_ids" in keep else []
            self.types.append(types)
            self.insert.append(at)
            text = ex.text if segment == "first" else (ex.text_pair or "")
            if fast and at < run[1]:
                self.char_at.append(int(enc["offset_mapping"][at][0]))
            else:
                self.char_at.append(0 if at == run[0] and run[0] < run[1] else len(text))
        self._templates: dict[tuple[int, ...], tuple[torch.Tensor, ...]] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def template(self, rows: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
        """(ids, attention mask, token types, trigger positions) for ``rows``, trigger slots left at pad."""
        if rows not in self._templates:
            pad = self.target.tokenizer.pad_token_id or 0
            width = max(len(self.ids[r]) for r in rows) + self.length
            ids = torch.full((len(rows), width), pad, dtype=torch.long)
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            types = torch.zeros((len(rows), width), dtype=torch.long)
            slots = torch.zeros((len(rows), self.length), dtype=torch.long)
            for i, r in enumerate(rows):
                seq, at, n = self.ids[r], self.insert[r], len(self.ids[r]) + self.length
                ids[i, :at] = torch.tensor(seq[:at], dtype=torch.long)
                ids[i, at + self.length : n] = torch.tensor(seq[at:], dtype=torch.long)
                mask[i, :n] = 1
                if self.types[r]:
                    t = self.types[r]
                    fill = t[at] if at < len(t) else t[-1]
                    types[i, :n] = torch.tensor(t[:at] + [fill] * self.length + t[at:], dtype=torch.long)
                slots[i] = torch.arange(at, at + self.length)
            self._templates[rows] = (ids, mask, types, slots)
        return self._templates[rows]

    def build(self, rows: tuple[int, ...], triggers: torch.Tensor) -> dict[str, torch.Tensor]:
        """A batch of ``len(triggers) x len(rows)`` rows: every trigger spliced into every example."""
        ids, mask, types, slots = self.template(rows)
        c, b = triggers.shape[0], len(rows)
        full = ids.unsqueeze(0).repeat(c, 1, 1)
        full.scatter_(2, slots.unsqueeze(0).expand(c, b, self.length), triggers.unsqueeze(1).expand(c, b, self.length))
        device = self.target.device
        batch = {"input_ids": full.view(c * b, -1).to(device), "attention_mask": mask.repeat(c, 1).to(device)}
        if "token_type_ids" in self.target.input_names:
            batch["token_type_ids"] = types.repeat(c, 1).to(device)
        return batch

    def plain(self, r: int) -> dict[str, list[int]]:
        """Row ``r`` without a trigger, for ``Target.collate``."""
        row = {"input_ids": self.ids[r], "attention_mask": [1] * len(self.ids[r])}
        if "token_type_ids" in self.target.input_names:
            row["token_type_ids"] = self.types[r] or [0] * len(self.ids[r])
        return row


def insert_text(text: str, at: int, trigger: str) -> str:
    """``text`` with ``trigger`` inserted as words at character offset ``at``."""
    head, tail = text[:at].rstrip(" "), text[at:].lstrip(" ")
    return " ".join(part for part in (head, trigger, tail) if part)
