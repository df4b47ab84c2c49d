"""Target-span goal: the attack goal of a universal trigger on an extractive reader (Wallace et al. 2019, §5).

The context of every attacked question is prefixed with ``<trigger tokens> <target answer>. `` (Wallace et al.
prepend the trigger, whose last words are the fixed target answer). The trigger search splices the free trigger
tokens into rows that already hold ``<target answer>. <context>`` (``SplicedRows`` with the reader's own window
length, the context truncated: the first window of each question, the one that then holds the trigger); the
target span is the ``n`` sub-tokens right after the ``length`` trigger slots. The search loss of a row is
Hugging Face's QA loss (the mean of the start and end cross-entropies, padding masked: ``qa_rows.
masked_span_loss``) toward the target span's first and last sub-tokens. A row is hit when the span decoded
from it (``spans.decode``, as the task decodes a window) is the target answer, SQuAD-normalised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from bertprobe.data.dataset import Example
from bertprobe.tasks.qa_rows import masked_span_loss
from bertprobe.tasks.spans import Answer, QuestionWindows, decode
from bertprobe.tasks.squad_metrics import normalize_answer


def prefixed(context: str, answer: str, trigger_text: str = "") -> str:
    """The context as the attack edits it: ``<trigger text> <answer>. <context>`` (no trigger text: the answer alone)."""
    head = f"{trigger_text} {answer}".strip()
    return f"{head}. {context}"


def edited(ex: Example, answer: str, trigger_text: str) -> Example:
    """``ex`` (question in ``text``, context in ``text_pair``) with its context prefixed (``prefixed``) and its gold
    answers moved with the text they point at."""
    context = ex.text_pair or ""
    new = prefixed(context, answer, trigger_text)
    shift = len(new) - len(context)
    label = tuple((text, start + shift) for text, start in ex.label) if ex.label else ex.label
    return replace(ex, text_pair=new, label=label)


def is_target(text: str, answer: str) -> bool:
    """Whether an answer ``text`` is exactly the target ``answer`` once both are SQuAD-normalised."""
    return normalize_answer(text) == normalize_answer(answer)


@dataclass(frozen=True)
class SpanGoal:
    """Make the reader answer ``answer``. Per row r (its encoding without the trigger): ``first[r]`` the position
    where the context starts (the trigger's slot), ``n`` the target answer's sub-tokens (it opens the context),
    ``lengths[r]`` the row's length, ``context_index[r]``/``offsets[r]`` the row's context positions and their
    characters in the prefixed context (``prefixed(context, answer)``); ``shift``: the trigger's length."""

    answer: str
    n: int
    first: tuple[int, ...]
    lengths: tuple[int, ...]
    context_index: tuple[tuple[int, ...], ...]
    offsets: tuple[tuple[tuple[int, int], ...], ...]
    contexts: tuple[str, ...]
    shift: int
    n_best: int = 20
    max_answer_tokens: int = 30

    def _cube(self, logits: torch.Tensor, rows: Sequence[int]) -> tuple[torch.Tensor, list[int]]:
        """Logits as ``[n, T, 2]`` and each row's example: the scorer passes the model's ``[rows, T, 2]``, or
        ``[triggers * rows, T * 2]`` / ``[triggers, rows, T * 2]`` (every trigger in every row, trigger-major)."""
        if logits.dim() == 3 and logits.shape[-1] == 2:
            cube = logits
        elif logits.dim() == 3:
            cube = logits.reshape(logits.shape[0] * logits.shape[1], -1, 2)
        else:
            cube = logits.reshape(logits.shape[0], -1, 2)
        return cube, list(rows) * (cube.shape[0] // len(rows))

    def gold(self, owners: Sequence[int], shift: int) -> torch.Tensor:
        """Per row ``[start, end, length]`` of the target span with a trigger of ``shift`` tokens spliced in."""
        return torch.tensor([[self.first[r] + shift, self.first[r] + shift + self.n - 1, self.lengths[r] + shift]
                             for r in owners], dtype=torch.long).reshape(-1, 3)

    def objective(self, logits: torch.Tensor, rows: Sequence[int]) -> torch.Tensor:
        """Per row HF's QA loss toward the target span (lower: the target is likelier)."""
        cube, owners = self._cube(logits, rows)
        return masked_span_loss(cube, self.gold(owners, self.shift).to(cube.device))

    def spliced_windows(self, r: int, trigger_offsets: Sequence[tuple[int, int]], move: int) -> QuestionWindows:
        """Row r with the trigger spliced in, as one window of its edited context: the trigger's tokens (their
        characters ``trigger_offsets``) open the context, the row's own context characters moved by ``move``."""
        at, base, shift = self.first[r], self.context_index[r], len(trigger_offsets)
        index = list(base[:at]) + list(range(shift)) + [k + shift if k >= 0 else -1 for k in base[at:]]
        offsets = list(trigger_offsets) + [(a + move, b + move) for a, b in self.offsets[r]]
        return QuestionWindows(({"input_ids": []},), (tuple(index),), tuple(offsets))

    def answers(self, logits: torch.Tensor, rows: Sequence[int], trigger_text: str,
                trigger_offsets: Sequence[tuple[int, int]]) -> list[Answer]:
        """The answer decoded from each spliced row (``spans.decode`` on it as one window, as the task decodes a
        window), its characters in the edited context ``prefixed(context, answer, trigger_text)``;
        ``trigger_offsets``: the characters of the trigger's tokens in ``trigger_text`` (``trigger_offsets``)."""
        cube, owners = self._cube(logits, rows)
        move = len(trigger_text) + 1
        out = []
        for i, r in enumerate(owners):
            qw = self.spliced_windows(r, trigger_offsets, move)
            n = self.lengths[r] + len(trigger_offsets)
            out.append(decode([cube[i, :n, 0]], [cube[i, :n, 1]], qw, prefixed(self.contexts[r], self.answer, trigger_text),
                              self.n_best, self.max_answer_tokens))
        return out

    def hit(self, logits: torch.Tensor, rows: Sequence[int]) -> torch.Tensor:
        """Per row: the span decoded from it is the target answer (SQuAD-normalised). The trigger's tokens are
        read as a placeholder word each (a letter no answer normalises away): a span reaching into the trigger
        is never the target."""
        text = " ".join([PLACEHOLDER] * self.shift)
        offsets = [(2 * i, 2 * i + 1) for i in range(self.shift)]
        return torch.tensor([is_target(a.text, self.answer) for a in self.answers(logits, rows, text, offsets)],
                            dtype=torch.bool)


PLACEHOLDER = "\u03be"  # ξ: kept by SQuAD's normalisation, so a span holding it is never the target


def trigger_offsets(tokenizer: Any, text: str, ids: Sequence[int]) -> list[tuple[int, int]] | None:
    """The characters of each trigger token in ``text`` (the trigger's decoded text), when ``text`` tokenises back
    to exactly ``ids``; None when it does not (word pieces that do not round-trip)."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    if list(enc["input_ids"]) != list(ids):
        return None
    return [(int(a), int(b)) for a, b in enc["offset_mapping"]]


def span_goal(tokenizer: Any, contexts: Sequence[str], rows: Any, answer: str, question_first: bool = True,
              n_best: int = 20, max_answer_tokens: int = 30) -> SpanGoal:
    """The goal over the examples ``rows`` (``SplicedRows``) encoded, whose contexts (``contexts`` before the
    edit) open with ``<answer>. ``: where each row's context starts and its context sub-tokens' characters."""
    n = len(tokenizer(answer, add_special_tokens=False)["input_ids"])
    first, lengths, index, offsets = [], [], [], []
    context_seq = 1 if question_first else 0
    for r, enc in enumerate(rows.encodings):
        seq = enc.sequence_ids()
        mine = [p for p, s in enumerate(seq) if s == context_seq]
        at = {p: j for j, p in enumerate(mine)}
        first.append(rows.insert[r])
        lengths.append(len(rows.ids[r]))
        index.append(tuple(at.get(p, -1) for p in range(len(seq))))
        offsets.append(tuple((int(enc["offset_mapping"][p][0]), int(enc["offset_mapping"][p][1])) for p in mine))
    return SpanGoal(answer, n, tuple(first), tuple(lengths), tuple(index), tuple(offsets), tuple(contexts),
                    rows.length, n_best, max_answer_tokens)
