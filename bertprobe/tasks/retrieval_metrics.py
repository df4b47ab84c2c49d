"""Retrieval and similarity metrics per query, as trec_eval computes them.

Per query, over a ranked list (best first) and its judgements (document -> grade; relevant: grade >= 1, trec_eval's
default relevance level):

* ``ndcg@k`` (trec_eval's ``ndcg_cut_k``, Järvelin & Kekäläinen 2002): DCG with linear gains and a log2(rank + 1)
  discount over the top k, over the ideal DCG of the judgements' grades;
* ``mrr@k``: the reciprocal rank of the first relevant document in the top k (0 when none; trec_eval's
  ``recip_rank`` on a run cut at k);
* ``recall@k`` (``recall_k``): relevant documents in the top k over all relevant ones;
* ``map`` (``map``): average precision over the whole ranked list (the first stage's depth), over all relevant
  documents (those never retrieved add 0).

The mean over queries is each metric's value; ``tests/test_retrieval.py`` holds them equal to ``pytrec_eval``'s on
the same run. Similarity: Spearman's and Pearson's correlation between a model's scores and gold scores.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from bertprobe.tasks.labelset_metrics import average_ranks

CUTOFFS = (1, 10, 100)  # recall@k
DEPTH = 100  # the ranked list's length: what MAP and recall@100 read


def query_metrics(ranked: Sequence[str], judged: Mapping[str, int], cutoffs: Sequence[int] = CUTOFFS,
                  k: int = 10) -> dict[str, float]:
    """``ndcg@k``, ``mrr@k``, ``recall@c`` for each of ``cutoffs`` and ``map`` of one query."""
    relevant = {d for d, g in judged.items() if g >= 1}
    gains = [max(0, judged.get(d, 0)) for d in ranked]
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains[:k]))
    ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    out = {f"ndcg@{k}": dcg / idcg if idcg else 0.0}
    first = next((i for i, d in enumerate(ranked[:k]) if d in relevant), None)
    out[f"mrr@{k}"] = 0.0 if first is None else 1.0 / (first + 1)
    for c in cutoffs:
        out[f"recall@{c}"] = len(relevant & set(ranked[:c])) / len(relevant) if relevant else 0.0
    hits, precision = 0, 0.0
    for i, d in enumerate(ranked):
        if d in relevant:
            hits += 1
            precision += hits / (i + 1)
    out["map"] = precision / len(relevant) if relevant else 0.0
    return out


def per_query(rankings: Sequence[Sequence[str]], judgements: Sequence[Mapping[str, int]],
              cutoffs: Sequence[int] = CUTOFFS, k: int = 10) -> dict[str, np.ndarray]:
    """Each metric's value per query (arrays in the queries' order)."""
    rows = [query_metrics(r, j, cutoffs, k) for r, j in zip(rankings, judgements)]
    names = list(rows[0]) if rows else []
    return {name: np.array([row[name] for row in rows], dtype=float) for name in names}


def first_relevant_rank(ranked: Sequence[str], judged: Mapping[str, int]) -> int | None:
    """The 1-based rank of the first relevant document in ``ranked`` (None: none retrieved)."""
    return next((i + 1 for i, d in enumerate(ranked) if judged.get(d, 0) >= 1), None)


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation (ties get their mean rank), as scipy.stats.spearmanr."""
    return pearson(average_ranks(np.asarray(a, dtype=float)), average_ranks(np.asarray(b, dtype=float)))


def pearson(a: Sequence[float], b: Sequence[float]) -> float:
    """Pearson's correlation (0 where either side is constant)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    x, y = x - x.mean(), y - y.mean()
    denom = math.sqrt(float((x * x).sum() * (y * y).sum()))
    return float((x * y).sum() / denom) if denom else 0.0
