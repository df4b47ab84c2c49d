"""Clark et al. 2019's attention-only probe: a head's weight on attention in both directions.

p(head = i | dependent j) is proportional to exp(sum_k w_k a^k_ji + u_k a^k_ij), where a^k_ji is head
k's word-level attention from j to i. Trained by cross-entropy on one treebank file, scored as UAS
(unlabelled attachment: share of non-root words whose predicted head is the gold one) on another.
Clark et al. add GloVe features (77 UAS); we do not (their attention-only variant scored 61 UAS).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch


def scores(words: torch.Tensor, w: torch.Tensor, u: torch.Tensor, n_words: torch.Tensor) -> torch.Tensor:
    """``words``: ``B x K x N x N`` (row j = attention from word j); ``B x N x N`` scores of head i for word j,
    -inf on the diagonal and beyond each sentence's words."""
    s = torch.einsum("bkji,k->bji", words, w) + torch.einsum("bkij,k->bji", words, u)
    n = words.shape[-1]
    idx = torch.arange(n, device=words.device)
    bad = (idx.view(1, 1, n) >= n_words.view(-1, 1, 1)) | (idx.view(1, n, 1) == idx.view(1, 1, n))
    return s.masked_fill(bad, float("-inf"))


def pad_batch(items: Sequence[tuple[torch.Tensor, Sequence[int]]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(K x n x n maps, heads 1-based) per sentence -> padded maps, 0-based gold heads (-1 for the root/pad), lengths."""
    n = max(m.shape[-1] for m, _ in items)
    k = items[0][0].shape[0]
    maps = torch.zeros(len(items), k, n, n)
    gold = torch.full((len(items), n), -1, dtype=torch.long)
    lengths = torch.tensor([m.shape[-1] for m, _ in items])
    for b, (m, heads) in enumerate(items):
        size = m.shape[-1]
        maps[b, :, :size, :size] = m.float()
        gold[b, :size] = torch.tensor([h - 1 for h in heads])
    return maps, gold, lengths


class AttentionParser:
    """The probe's weights ``w`` (dependent -> head attention) and ``u`` (head -> dependent), one per head."""

    def __init__(self, heads: int) -> None:
        self.w = torch.zeros(heads)
        self.u = torch.zeros(heads)

    def fit(self, sentences: Sequence[tuple[torch.Tensor, Sequence[int]]], epochs: int = 20, batch: int = 64,
            lr: float = 0.1, seed: int = 0) -> list[float]:
        """Adam on the mean negative log-likelihood of the gold heads; returns the loss per epoch."""
        w = self.w.clone().requires_grad_(True)
        u = self.u.clone().requires_grad_(True)
        optim = torch.optim.Adam([w, u], lr=lr)
        useful = [i for i, (_, heads) in enumerate(sentences) if any(heads)]  # a one-word sentence has only a root
        order = sorted(useful, key=lambda i: sentences[i][0].shape[-1])
        chunks = [order[s : s + batch] for s in range(0, len(order), batch)]
        padded = [pad_batch([sentences[i] for i in chunk]) for chunk in chunks]
        rng = random.Random(seed)
        history = []
        for _ in range(epochs):
            rng.shuffle(padded)
            total, count = 0.0, 0
            for maps, gold, lengths in padded:
                s = scores(maps, w, u, lengths)
                keep = gold >= 0
                loss = torch.nn.functional.cross_entropy(s[keep], gold[keep])
                optim.zero_grad()
                loss.backward()
                optim.step()
                total += float(loss.detach()) * int(keep.sum())
                count += int(keep.sum())
            history.append(total / max(1, count))
        self.w, self.u = w.detach(), u.detach()
        return history

    def correct(self, words: torch.Tensor, gold: torch.Tensor, lengths: torch.Tensor) -> tuple[int, int]:
        """(correct heads, scored words) on a padded batch; gold is 0-based, -1 for the root and padding."""
        pred = scores(words.float(), self.w.to(words.device), self.u.to(words.device), lengths.to(words.device)).argmax(-1)
        keep = gold >= 0
        return int((pred[keep] == gold[keep]).sum()), int(keep.sum())


def right_branching(heads: Sequence[int]) -> tuple[int, int]:
    """(correct, scored) of "every word's head is the next word" over the non-root words of one sentence."""
    scored = [j for j, h in enumerate(heads) if h != 0]
    return sum(heads[j] == j + 2 for j in scored), len(scored)
