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


def word_index_of(offsets: list[tuple[int, int]], special: list[int], spans: tuple[tuple[int, int], ...]) -> list[int] | None:
    """The word each token belongs to (-1 for special tokens), from the tokenizer's character offsets
    and the words' spans; None when a word got no token (truncation cut the sentence)."""
    import bisect

    starts = [s for s, _ in spans]
    out = []
    for (s, e), sp in zip(offsets, special):
        if sp or e <= s:
            out.append(-1)
            continue
        w = bisect.bisect_right(starts, e - 1) - 1  # the word holding the token's last character
        out.append(w if 0 <= w < len(spans) and spans[w][0] <= e - 1 < spans[w][1] else -1)
    return out if set(range(len(spans))) <= set(out) else None
