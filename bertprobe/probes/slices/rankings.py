"""The slices probe's section for models that rank texts (``ranks_texts``: a bi-encoder, a reranker) on BEIR data:
each query's nDCG@10 and hit@10, and the built-in query slices (``units(target, data, params, ctx)``, a
``SliceScores``). The probe then measures nDCG@10 per slice with its interval and tests each slice against the
rest (Welch's standard error, Benjamini-Hochberg across slices), as it does a reader's F1.

Built-in slices (from the data alone, no parser):

* query length in words (a whitespace split): 1-3, 4-6, 7-10, 11-15, 16 or more; fixed bins, so that two
  datasets' slices mean the same;
* question word: what, who, when, where, why, how, which, other (``squad_metrics.question_word``: the first
  wh-word among the query's words, so "in what year" is *what*; a keyword query is *other*);
* lexical overlap between the query and its gold passage: the share of the query's content words (lower-cased
  word types, scikit-learn's English stop words removed, one-letter words dropped: ``answer_text.overlap``)
  found among the passage's words (title and text), the largest over the query's relevant documents; binned
  low (under 1/3), medium (1/3 to under 2/3) and high (2/3 or more), as the reader's question-sentence overlap.
  After Thakur et al. 2021 (BEIR, section 6), who trace a lexical retriever's (BM25's) advantage and a dense
  retriever's weakness to how many query words the relevant passage repeats; a query without content words
  is in none. Deviation: exact word match, no stemming (BM25 as BEIR runs it stems).

Similarity pairs (STS) have no slices here: a correlation is no mean of per-pair values, so no slice of pairs
has a score of its own to test; the probe refuses them in one line.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bertprobe.data.dataset import Dataset
from bertprobe.errors import ProbeError
from bertprobe.probes.slices.answers import OVERLAP_BINS, bin_of
from bertprobe.probes.slices.units import SliceScore, SliceScores
from bertprobe.results import Catalogue
from bertprobe.tasks.answer_text import overlap
from bertprobe.tasks.retrieval_metrics import first_relevant_rank, per_query
from bertprobe.tasks.sentence_embedding import Ranked, judgements
from bertprobe.tasks.squad_metrics import QUESTION_WORDS, question_word

QUERY_LENGTHS = ((1, 3, "1-3 words"), (4, 6, "4-6 words"), (7, 10, "7-10 words"), (11, 15, "11-15 words"),
                 (16, math.inf, "16+ words"))
EXCERPT = 120  # characters of a passage a finding shows


def query_overlap(query: str, passages: list[str]) -> float:
    """The largest share of ``query``'s content words found in one of ``passages`` (NaN without content words)."""
    shares = [overlap(query, p) for p in passages]
    shares = [s for s in shares if not math.isnan(s)]
    return max(shares) if shares else math.nan


def query_slices(data: Dataset) -> dict[str, np.ndarray]:
    """The built-in slices of the module docstring as boolean masks over the queries."""
    examples, corpus = data.examples, data.corpus
    n = len(examples)
    masks: dict[str, np.ndarray] = {}

    def put(name: str, i: int) -> None:
        masks.setdefault(name, np.zeros(n, dtype=bool))[i] = True

    for i, ex in enumerate(examples):
        words = len(ex.text.split())
        put(f"query length {next(name for low, high, name in QUERY_LENGTHS if low <= words <= high)}", i)
    kinds = [question_word(ex.text) for ex in examples]
    for word in QUESTION_WORDS:
        if word in kinds:
            masks[f"question word: {word}"] = np.array([k == word for k in kinds])
    for i, ex in enumerate(examples):
        gold = [corpus.passage(corpus.index[d]) for d, g in judgements(ex.label).items() if g >= 1 and d in corpus.index]
        level = bin_of(query_overlap(ex.text, gold), OVERLAP_BINS)
        if level is not None:
            put(f"query-passage overlap {level}", i)
    order = ([f"query length {name}" for *_, name in QUERY_LENGTHS]
             + [f"question word: {w}" for w in QUESTION_WORDS]
             + [f"query-passage overlap {name}" for *_, name in OVERLAP_BINS])
    return {k: masks[k] for k in order if k in masks}


def _start(text: str) -> str:
    return text if len(text) <= EXCERPT else text[: EXCERPT - 1].rstrip() + "…"


def units(target: Any, data: Dataset, params: Any, ctx: Any) -> SliceScores:
    """The queries, scored by their ranked lists (nDCG@10 and hit@10 of the run's one pass), and the query slices."""
    ranked = ctx.predictions(target, data, params.batch_size).answers
    if not isinstance(ranked, Ranked):
        raise ProbeError("slices on a sentence-embedding or reranker model need BEIR data (queries judged against a "
                         "corpus); a correlation over similarity pairs is no mean per pair, so it has no slices")
    corpus = ranked.corpus
    rankings = [ranked.ids(i) for i in range(len(data.examples))]
    judged = [judgements(ex.label) for ex in data.examples]
    values = per_query(rankings, judged)
    gold_ranks = [first_relevant_rank(r, j) for r, j in zip(rankings, judged)]
    hits = np.array([float(r is not None and r <= 10) for r in gold_ranks])
    depth = int(ranked.indices.shape[1]) if len(data.examples) else 0
    expected, observed = [], []
    for r, j, rank in zip(rankings, judged, gold_ranks):
        gold = next((d for d, g in sorted(j.items(), key=lambda x: -x[1]) if g >= 1 and d in corpus.index), None)
        expected.append(f"{gold}: {_start(corpus.passage(corpus.index[gold]))}" if gold else "(no relevant document)")
        where = f"gold at rank {rank}" if rank is not None else f"gold not in the top {depth}"
        observed.append(f"{where}; first: {r[0]}: {_start(corpus.passage(corpus.index[r[0]]))}" if r else where)
    return SliceScores(
        scores=(SliceScore("ndcg@10", "ndcg@10", "score", values["ndcg@10"], "mean nDCG@10 over queries"),
                SliceScore("hit@10", "hit@10", "binary", hits,
                           "share of queries with a relevant document in the top 10")),
        masks=query_slices(data), expected=expected, observed=observed, unit="queries",
        notes={"query length": "words of the query (whitespace split), fixed bins",
               "question word": "the first wh-word among the query's words (other: none)",
               "overlap": "share of the query's content words (stop words removed) in its gold passage (title and "
                          "text; the largest over its relevant documents); low < 1/3 <= medium < 2/3 <= high"})


# what this section writes in the slices probe's place (merged by Probe.catalogue)
catalogue = Catalogue({"ndcg@10": "retrieval: mean nDCG@10 over queries, on all the data",
                       "hit@10": "retrieval: share of queries with a relevant document in the top 10, on all the data",
                       "worst_slice_ndcg@10": "retrieval: lowest mean nDCG@10 of a slice with >= min_size queries"},
                      {"ndcg@10": True, "hit@10": True, "worst_slice_ndcg@10": True})
