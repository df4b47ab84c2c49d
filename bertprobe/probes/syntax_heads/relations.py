"""Per-relation head accuracy (Clark et al. 2019), fixed-offset baselines and head roles (Voita et al. 2019).

Everything streams: ``HeadStatistics`` adds batches of word-level and token-level maps into fixed-size
counters (relations x heads), so memory does not grow with the number of sentences.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch


def relation_of(deprel: str, subtypes: bool) -> str:
    """UD relation name, without its subtype (``nsubj:pass`` -> ``nsubj``) unless ``subtypes``."""
    return deprel if subtypes else deprel.split(":", 1)[0]


@dataclass
class Baselines:
    """Per relation: how many dependents, and the best fixed-offset guess (head at j + k) with its accuracy."""

    counts: dict[str, int]
    offset: dict[str, int]
    accuracy: dict[str, float]


def offset_baselines(trees: Sequence[tuple[Sequence[int], Sequence[str]]], subtypes: bool = False,
                     max_offset: int = 10) -> Baselines:
    """``trees``: (heads 1-based with 0 = root, deprels) per sentence. The root relation is left out.

    For each relation the best k in [-max_offset, max_offset] (k != 0) of "the head is the word at
    j + k". The same k read backwards is the best guess from the head to the dependent, so one
    baseline serves both directions."""
    offsets: dict[str, Counter[int]] = {}
    for heads, rels in trees:
        for j, (h, rel) in enumerate(zip(heads, rels)):
            if h == 0:
                continue
            name = relation_of(rel, subtypes)
            offsets.setdefault(name, Counter())[h - 1 - j] += 1
    counts = {r: sum(c.values()) for r, c in offsets.items()}
    best = {r: max((k for k in c if 0 < abs(k) <= max_offset), key=lambda k: (c[k], -abs(k)), default=1)
            for r, c in offsets.items()}
    return Baselines(counts, best, {r: offsets[r][best[r]] / counts[r] for r in offsets})


@dataclass
class HeadStatistics:
    """Counters over relations x heads (K = layers x heads, flattened layer-major)."""

    relations: list[str]
    heads: int
    dep_to_head: torch.Tensor = field(init=False)
    head_to_dep: torch.Tensor = field(init=False)
    dependents: torch.Tensor = field(init=False)
    prev_hits: torch.Tensor = field(init=False)
    next_hits: torch.Tensor = field(init=False)
    queries: int = 0
    rare_hits: torch.Tensor = field(init=False)
    rare_sentences: int = 0

    def __post_init__(self) -> None:
        r, k = len(self.relations), self.heads
        self.dep_to_head = torch.zeros(r, k)
        self.head_to_dep = torch.zeros(r, k)
        self.dependents = torch.zeros(r)
        self.prev_hits = torch.zeros(k)
        self.next_hits = torch.zeros(k)
        self.rare_hits = torch.zeros(k)
        self.index = {name: i for i, name in enumerate(self.relations)}

    def add_words(self, words: torch.Tensor, heads: torch.Tensor, rels: torch.Tensor) -> torch.Tensor:
        """``words``: ``B x K x N x N`` word maps; ``heads``: ``B x N`` 0-based head word (-1: root or padding);
        ``rels``: ``B x N`` relation index (-1: not counted). Returns the argmax predictions ``B x K x N``."""
        pred = words.argmax(-1)
        b, j = (rels >= 0).nonzero(as_tuple=True)
        if len(b):
            gold = heads[b, j]
            rel = rels[b, j]
            self.dep_to_head.index_add_(0, rel, (pred[b, :, j] == gold.unsqueeze(1)).float())
            self.head_to_dep.index_add_(0, rel, (pred[b, :, gold] == j.unsqueeze(1)).float())
            self.dependents.index_add_(0, rel, torch.ones(len(b)))
        return pred

    def add_tokens(self, att: torch.Tensor, content: torch.Tensor, rarest: torch.Tensor) -> None:
        """``att``: ``B x K x T x T`` token maps; ``content``: ``B x T`` (not special, not padding);
        ``rarest``: ``B`` position of each sentence's least frequent token (-1: skip the sentence)."""
        keys = content.unsqueeze(1).unsqueeze(2)  # B x 1 x 1 x T
        masked = att.float().masked_fill(~keys, -1.0)
        top = masked.argmax(-1)  # B x K x T: most-attended content token per query
        t = torch.arange(att.shape[-1], device=att.device)
        prev_ok = content & torch.cat([content.new_zeros(content.shape[0], 1), content[:, :-1]], 1)
        next_ok = content & torch.cat([content[:, 1:], content.new_zeros(content.shape[0], 1)], 1)
        q = content.unsqueeze(1)  # queries that count
        self.prev_hits += ((top == t - 1) & prev_ok.unsqueeze(1) & q).sum((0, 2)).float().cpu()
        self.next_hits += ((top == t + 1) & next_ok.unsqueeze(1) & q).sum((0, 2)).float().cpu()
        self.queries += int(content.sum())
        keep = rarest >= 0
        if keep.any():
            mass = (att.float() * q.unsqueeze(-1)).sum(2).masked_fill(~content.unsqueeze(1), -1.0)  # B x K x T
            hit = mass.argmax(-1) == rarest.unsqueeze(1)
            self.rare_hits += (hit & keep.unsqueeze(1)).sum(0).float().cpu()
            self.rare_sentences += int(keep.sum())

    def accuracy(self, direction: str = "dep_to_head") -> torch.Tensor:
        """Relations x heads accuracy in one direction."""
        hits = self.dep_to_head if direction == "dep_to_head" else self.head_to_dep
        return hits / self.dependents.clamp_min(1).unsqueeze(1)


@dataclass
class RoleParams:
    positional: float = 0.9
    syntactic_margin: float = 0.1
    rare_word: float = 0.3


def head_roles(stats: HeadStatistics, baselines: Baselines, relations: list[str], grid: tuple[int, int],
               params: RoleParams) -> dict[str, Any]:
    """Voita et al. 2019's roles per head, each a ``layers x heads`` bool map:

    * positional: the most-attended token is the previous (or the next) one for at least
      ``positional`` of the queries;
    * syntactic: the best head of some relation (either direction) with at least
      ``syntactic_margin`` more accuracy than that relation's offset baseline;
    * rare-word: the most-attended token (attention averaged over the sentence's queries) is the
      sentence's least frequent token in at least ``rare_word`` of the sentences.
    """
    layers, heads = grid
    share = torch.maximum(stats.prev_hits, stats.next_hits) / max(1, stats.queries)
    positional = share >= params.positional
    syntactic = torch.zeros(layers * heads, dtype=torch.bool)
    best_of: dict[int, list[str]] = {}
    for rel in relations:
        i = stats.index[rel]
        for direction in ("dep_to_head", "head_to_dep"):
            acc = stats.accuracy(direction)[i]
            k = int(acc.argmax())
            if float(acc[k]) >= baselines.accuracy[rel] + params.syntactic_margin:
                syntactic[k] = True
                best_of.setdefault(k, []).append(f"{rel} ({'dep->head' if direction == 'dep_to_head' else 'head->dep'})")
    rare_share = stats.rare_hits / max(1, stats.rare_sentences)
    rare = rare_share >= params.rare_word
    return {
        "positional": positional.view(layers, heads), "syntactic": syntactic.view(layers, heads),
        "rare_word": rare.view(layers, heads), "positional_share": share.view(layers, heads),
        "rare_word_share": rare_share.view(layers, heads), "syntactic_relations": best_of,
    }
