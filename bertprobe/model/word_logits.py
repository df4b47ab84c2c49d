"""Per-word logits of a token classifier: each word read from its first sub-token, long sentences in windows.

The words are tokenised one by one (``is_split_into_words``, a fast tokenizer's ``word_ids``); a word's
prediction is its first sub-token's, the convention of the Hugging Face token-classification examples
(the other sub-tokens are ignored). A sentence longer than ``max_length`` is never cut: it is predicted
in windows of ``max_length`` tokens overlapping by ``stride`` sub-tokens, and each word takes its logits
from the window where its first sub-token sits most centrally (the farthest from either edge).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from bertprobe.errors import TargetError
from bertprobe.progress import active as active_progress

STRIDE = 32  # sub-tokens two windows of a long sentence share, where model.stride is not given


@dataclass
class WordLogits:
    """Float32 logits ``[words, tags]`` per sentence, and how many sentences needed windows."""

    logits: list[torch.Tensor]
    windowed: int
    words_without_tokens: int


def _plan(n_tokens: int, room: int, stride: int) -> list[tuple[int, int]]:
    """Sub-token ranges ``[a, b)`` of the windows of one sentence (one when it fits)."""
    if n_tokens <= room:
        return [(0, n_tokens)]
    step = max(1, room - stride)
    out, a = [], 0
    while True:
        b = min(n_tokens, a + room)
        out.append((a, b))
        if b == n_tokens:
            return out
        a += step


def word_logits(target: Any, words: Sequence[Sequence[str]], batch_size: int | None = None, stride: int | None = None,
                progress: Any = None) -> WordLogits:
    """Per-word logits of each sentence (see the module docstring); ``stride`` (``model.stride``) None: ``STRIDE``."""
    stride = STRIDE if stride is None else stride
    tok = target.tokenizer
    if not getattr(tok, "is_fast", False):
        raise TargetError(f"{target.name}: word-level prediction needs a fast tokenizer (tokenizer.json)")
    sample = tok(["a"], is_split_into_words=True)  # the special tokens around one word: [CLS] a [SEP]
    marks = [i for i, w in enumerate(sample.word_ids()) if w is not None]
    head, tail = list(sample["input_ids"][: marks[0]]), list(sample["input_ids"][marks[-1] + 1 :])
    prefix = len(head)
    room = target.max_length - len(head) - len(tail)
    if stride >= room:
        raise TargetError(f"stride {stride} must be smaller than the {room} sub-tokens a window holds")
    rows: list[dict[str, list[int]]] = []
    owners: list[tuple[int, int, int]] = []  # (sentence, window start a, window index)
    firsts: list[list[int | None]] = []
    windows_of: list[list[tuple[int, int]]] = []
    windowed = missing = 0
    for s, sentence in enumerate(words):
        enc = tok(list(sentence), is_split_into_words=True, add_special_tokens=False, truncation=False)
        ids, word_ids = enc["input_ids"], enc.word_ids()
        first: list[int | None] = [None] * len(sentence)
        for position, w in enumerate(word_ids):
            if w is not None and first[w] is None:
                first[w] = position
        missing += sum(f is None for f in first)
        plan = _plan(len(ids), room, stride)
        windowed += len(plan) > 1
        firsts.append(first)
        windows_of.append(plan)
        for k, (a, b) in enumerate(plan):
            full = head + list(ids[a:b]) + tail
            row = {"input_ids": full, "attention_mask": [1] * len(full)}
            if "token_type_ids" in target.input_names:
                row["token_type_ids"] = [0] * len(full)
            rows.append({k2: v for k2, v in row.items() if k2 in target.input_names})
            owners.append((s, a, k))
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]["input_ids"]))
    size = batch_size or target.spec.batch_size
    window_out: list[torch.Tensor | None] = [None] * len(rows)
    chunks = [order[i : i + size] for i in range(0, len(order), size)]
    progress = progress if progress is not None else active_progress()  # a probe's, under the harness
    if progress is not None:
        chunks = progress(chunks, total=len(chunks), desc="predict")
    with torch.inference_mode():
        model = target.compiled if getattr(target, "compiled", None) is not None else target.model
        for idx in chunks:
            logits = model(**target.collate([rows[i] for i in idx])).logits.float().cpu()
            for j, i in enumerate(idx):
                window_out[i] = logits[j]
    by_sentence: dict[tuple[int, int], torch.Tensor] = {(s, k): window_out[i] for i, (s, _, k) in enumerate(owners)}  # type: ignore[misc]
    tags = int(target.model.config.num_labels)
    out = []
    for s, first in enumerate(firsts):
        plan = windows_of[s]
        sentence = torch.zeros(len(first), tags)
        for w, f in enumerate(first):
            if f is None:
                continue  # a word the tokenizer drops (a lone control character): logits 0, the first tag
            k = max((k for k, (a, b) in enumerate(plan) if a <= f < b), key=lambda k: min(f - plan[k][0], plan[k][1] - 1 - f))
            sentence[w] = by_sentence[(s, k)][prefix + f - plan[k][0]]
        out.append(sentence)
    return WordLogits(out, windowed, missing)


def padded(per_sentence: Sequence[torch.Tensor]) -> torch.Tensor:
    """Per-sentence ``[words, tags]`` logits stacked as ``[sentences, longest, tags]`` (zeros past each end)."""
    width = max((t.shape[0] for t in per_sentence), default=0)
    tags = per_sentence[0].shape[1] if per_sentence else 0
    out = torch.zeros(len(per_sentence), width, tags)
    for i, t in enumerate(per_sentence):
        out[i, : t.shape[0]] = t
    return out
