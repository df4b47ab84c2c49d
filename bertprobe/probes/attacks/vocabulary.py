"""Which vocabulary tokens a trigger may use, and classes named by the user."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch

from bertprobe.data.classes import class_problem, find_class
from bertprobe.errors import ProbeError


def resolve_label(value: str | int, names: list[str], what: str, label_map: Mapping[str, str] | None = None) -> int:
    """A class given by index, name (case-insensitive, through ``--label-map``) or role (``positive`` for a
    ``POS`` class): ``bertprobe.data.classes``."""
    match = find_class(value, names, label_map)
    if match is None:
        raise ProbeError(class_problem(value, names, what))
    return match.index


def word_of(token: str) -> tuple[str, bool]:
    """(the token's text without word-piece markers, whether it continues a word)."""
    if token.startswith("##"):
        return token[2:], True
    if token[:1] in ("Ġ", "▁"):  # byte-level BPE / SentencePiece word-start markers
        return token[1:], False
    return token, False


def allowed_vocabulary(tokenizer: Any, allow_subwords: bool = False, alphabetic_only: bool = True,
                       blacklist: Iterable[str] = (), min_chars: int = 1) -> torch.Tensor:
    """Boolean mask over the vocabulary of tokens a trigger may use.

    Special tokens never; '##' continuation pieces only with ``allow_subwords``; with
    ``alphabetic_only`` only tokens whose text is letters; never a word in ``blacklist``
    (case-insensitive); never one shorter than ``min_chars``.
    """
    vocab = tokenizer.get_vocab()
    size = max(len(tokenizer), max(vocab.values()) + 1)
    allowed = torch.zeros(size, dtype=torch.bool)
    special = set(tokenizer.all_special_ids)
    banned = {w.lower() for w in blacklist}
    for token, idx in vocab.items():
        if idx in special:
            continue
        word, continuation = word_of(token)
        if continuation and not allow_subwords:
            continue
        if alphabetic_only and not word.isalpha():
            continue
        if len(word) < min_chars or word.lower() in banned:
            continue
        allowed[idx] = True
    return allowed
