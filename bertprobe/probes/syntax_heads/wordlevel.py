"""Token-level attention to word-level attention, as Clark et al. 2019 ("What Does BERT Look At?").

Attention *to* a word split into several tokens is the sum over its tokens; attention *from* it is the
mean over its tokens' rows. Special tokens ([CLS], [SEP], <s>, </s>) and padding are removed and each
word's row renormalised to sum to one, so a word-level map is a distribution over the sentence's words.
"""

from __future__ import annotations

import torch


def membership(word_index: torch.Tensor, n_words: int) -> torch.Tensor:
    """``B x N x T`` one-hot: token t belongs to word n (``word_index`` is ``B x T``, -1 for none)."""
    words = torch.arange(n_words, device=word_index.device)
    return (word_index.unsqueeze(1) == words.view(1, -1, 1)).to(torch.float32)


def word_attention(att: torch.Tensor, word_index: torch.Tensor, n_words: int) -> torch.Tensor:
    """``att``: ``B x K x T x T`` token maps (K = layers x heads, rows = queries) -> ``B x K x N x N`` word maps.

    Rows of words a sentence does not have (padding) are zero.
    """
    m = membership(word_index, n_words)  # B x N x T
    counts = m.sum(-1, keepdim=True)  # tokens per word
    to_words = att.float() @ m.transpose(1, 2).unsqueeze(1)  # B x K x T x N: sum over a word's tokens
    from_words = (m / counts.clamp_min(1)).unsqueeze(1) @ to_words  # B x K x N x N: mean over its rows
    total = from_words.sum(-1, keepdim=True)
    return torch.where(total > 0, from_words / total.clamp_min(1e-12), torch.zeros_like(from_words))
