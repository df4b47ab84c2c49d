"""The spurious-cues probe's section for models that rank texts (``ranks_texts``: bi-encoders and rerankers;
``audit(result, target, data, params, ctx)``): how much a retriever's nDCG@10 rests on lexical overlap.

Paper: Niven & Kao 2019, "Probing Neural Network Comprehension of Natural Language Arguments" (ACL), in spirit: a
model that scores well may do so from surface cues, found by scoring it on inputs that keep the cue and drop what
the task needs. For retrieval the cue at hand is lexical overlap: the words a query shares with its relevant
passage (BEIR's lexical baselines are strong for this reason: Thakur et al. 2021, "BEIR: A Heterogeneous Benchmark
for Zero-shot Evaluation of Information Retrieval Models", NeurIPS Datasets and Benchmarks). Two measurements:

1. Reliance on lexical overlap: each query's overlap is the share of its content words (lower-cased words that are
   no stop word and not a single letter: ``tasks.answer_text.content_words``) found among the words of its relevant
   passage (title and text, as the model reads it; the largest share over its relevant passages where it has
   several). The queries are sorted by overlap (ties in an order fixed by the seed) and the lowest and highest
   ``overlap_share`` of them (terciles by default) form the low- and high-overlap groups; queries without a content
   word are left out. nDCG@10 of each group with its bootstrap interval, and the gap (high minus low) with an
   unpaired bootstrap interval (``stats.unpaired_bootstrap_diff``: the groups hold different queries). Where the
   gap's interval lies wholly above 0, the low-overlap queries are surely served worse: ``details["overlap_reliance"]``
   says so and the key finding flags it.
2. Partial queries (``partial_queries``): every query reduced to its question word as written ("What?", "How
   many?": ``answers.reduce_question``; empty where it has none) or to its stop words alone (the query without its
   content words, in order; ``tasks/stopwords_en.txt``), then ranked as the full query was. nDCG@10 of the partial
   queries with its interval, and its share of the full-query nDCG@10 with a paired bootstrap interval: a model
   that still ranks the relevant passage highly from "What?" or "what is the of" finds it from cues, not from the
   question. A bi-encoder searches the whole corpus with the partial query; a reranker (``pair-scores``) reorders
   the full query's first-stage list with it, so that only the reranker's own use of the query is measured.

Per-query nDCG@10 values are outcomes (``ndcg_full``, ``ndcg_question_word``...), so ``compare`` pairs two models
query by query. Every metric is measured, not gated: no published bar holds for a given retriever (set ``expect``
on ``ndcg_overlap_gap`` or ``ndcg_share_question_word`` for a bound of your own).

Deviations: Niven & Kao *train* models on partial inputs (warrants only); here the given model is scored on
partial queries, which audits that model. The overlap split compares different queries, so part of a gap may come
from what else differs between them (a high-overlap query may also be an easier one); the partial queries are the
causal test.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from bertprobe.data.dataset import Dataset
from bertprobe.probes.spurious_cues.answers import reduce_question
from bertprobe.results import Catalogue, Finding, ProbeResult
from bertprobe.results.outcomes import Outcomes, example_ids
from bertprobe.stats import mean_interval, paired_bootstrap_statistic, unpaired_bootstrap_diff
from bertprobe.tasks.answer_text import content_words, stop_words, words
from bertprobe.tasks.retrieval_metrics import per_query
from bertprobe.tasks.sentence_embedding import judgements

PARTIAL_MODES = ("question-word", "stopwords")
PARTIAL_KEYS = {"question-word": "question_word", "stopwords": "stopwords"}
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?")

RANKING_CUE_METRICS = {
    "ndcg_full": "retrieval: nDCG@10 of the full queries",
    "ndcg_low_overlap": "retrieval: nDCG@10 of the queries sharing the fewest content words with their relevant passage",
    "ndcg_high_overlap": "retrieval: nDCG@10 of the queries sharing the most content words with their relevant passage",
    "ndcg_overlap_gap": "retrieval: high- minus low-overlap nDCG@10 (unpaired bootstrap): above 0, the model leans "
                        "on lexical overlap",
    "overlap_mean": "retrieval: mean share of a query's content words found in its relevant passage",
    "ndcg_question_word": "retrieval: nDCG@10 with every query reduced to its question word ('What?')",
    "ndcg_stopwords": "retrieval: nDCG@10 with every query reduced to its stop words (its content words removed)",
    "ndcg_share_*": "retrieval: partial-query nDCG@10 as a share of the full-query nDCG@10 (paired bootstrap)",
}
RANKING_CUE_DIRECTIONS: dict[str, bool | None] = {
    "ndcg_full": True, "ndcg_low_overlap": True, "ndcg_high_overlap": True, "ndcg_overlap_gap": False,
    "overlap_mean": None, "ndcg_question_word": None, "ndcg_stopwords": None, "ndcg_share_*": None}


def stopwords_only(query: str) -> str:
    """``query`` without its content words: its stop words (and one-letter words) as written, in order."""
    stop = stop_words()
    kept = [m.group() for m in _TOKEN.finditer(query)
            if (w := m.group().lower()) in stop or (len(w) == 1 and w.isalpha())]
    return " ".join(kept)


def partial_query(query: str, mode: str) -> str:
    """``query`` under ``mode``: its question word (``question-word``) or its stop words (``stopwords``)."""
    if mode == "question-word":
        return reduce_question(query, "question-word")
    if mode == "stopwords":
        return stopwords_only(query)
    raise ValueError(f"unknown partial query {mode!r}: use one of {', '.join(PARTIAL_MODES)}")


def lexical_overlap(query: str, passages: Sequence[str]) -> float:
    """The largest share, over ``passages``, of the query's content words found among a passage's words; NaN when
    the query has no content word or no passage is given."""
    wanted = content_words(query)
    if not wanted or not passages:
        return float("nan")
    return max(len(wanted & set(words(p))) / len(wanted) for p in passages)


def overlap_groups(overlap: Sequence[float], share: float, seed: int) -> tuple[list[int], list[int]]:
    """The indices of the lowest and highest ``share`` of the queries by overlap (NaN left out; ties in an order
    fixed by ``seed``), each as large as the other: ``round(share * n)`` queries, at least one each where two or
    more queries have an overlap."""
    values = np.asarray(overlap, dtype=np.float64)
    valid = np.flatnonzero(~np.isnan(values))
    if len(valid) < 2:
        return [], []
    tiebreak = np.random.default_rng(seed).permutation(len(valid))
    order = valid[np.lexsort((tiebreak, values[valid]))]
    k = min(max(round(share * len(valid)), 1), len(valid) // 2)
    return sorted(order[:k].tolist()), sorted(order[-k:].tolist())


def relevant_passages(data: Dataset, example: Any) -> list[str]:
    """The texts (title and text) of ``example``'s relevant documents in ``data``'s corpus."""
    corpus = data.corpus
    return [corpus.passage(corpus.index[d]) for d, g in example.label if g >= 1 and d in corpus.index]


def rerank_lists(target: Any, queries: Sequence[str], ranked: Any) -> list[list[str]]:
    """Each query's candidates in ``ranked`` (a reranker's list for the full query) reordered by the cross-encoder's
    score for ``queries[i]`` (a partial query): the first stage stays the full query's."""
    import torch

    from bertprobe.tasks.reranker import pair_scores

    corpus = ranked.corpus
    lists = [[j for j in ranked.indices[i].tolist() if j >= 0] for i in range(len(queries))]
    pairs = [(q, corpus.passage(j)) for q, docs in zip(queries, lists) for j in docs]
    flat = pair_scores(target, pairs) if pairs else torch.empty(0)
    out, at = [], 0
    for docs in lists:
        part = flat[at:at + len(docs)]
        at += len(docs)
        order = torch.argsort(part, descending=True, stable=True).tolist()
        out.append([corpus.ids[docs[k]] for k in order])
    return out


def _ci(ci: tuple[float, float] | None) -> str:
    return f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""


class _RankingAudit:
    """One run of the section: the full queries' rankings and the helpers each measurement shares."""

    def __init__(self, result: ProbeResult, target: Any, data: Dataset, params: Any, ctx: Any) -> None:
        self.result, self.target, self.data, self.params, self.ctx = result, target, data, params, ctx
        self.examples = data.examples
        self.ids = example_ids(self.examples)
        self.judged = [judgements(ex.label) for ex in self.examples]
        self.ranked = ctx.predictions(target, data, params.batch_size).answers
        self.lists = [self.ranked.ids(i) for i in range(len(self.examples))]
        self.full = per_query(self.lists, self.judged)["ndcg@10"]

    def interval(self, values: Sequence[float], seed_key: str) -> tuple[float, float] | None:
        if not self.params.bootstrap or not len(values):
            return None
        return mean_interval(list(map(float, values)), self.params.bootstrap, self.params.confidence,
                             self.ctx.unit_seed(seed_key))

    def mean_metric(self, name: str, values: Sequence[float], ids: Sequence[str], higher: bool | None,
                    what: str) -> None:
        self.result.outcomes.append(Outcomes.from_values(name, ids, [float(v) for v in values], "score"))
        self.result.add_metric(name, float(np.mean(values)) if len(values) else None, higher, what,
                               self.interval(values, name), outcome=name)

    def ranks_of(self, queries: list[str]) -> list[list[str]]:
        """Each query's ranked document ids for the (partial) query texts ``queries``."""
        if "pair-scores" in self.target.task.capabilities:  # a reranker: the full query's first stage, reranked
            return rerank_lists(self.target, queries, self.ranked)
        partial = replace(self.data, examples=[replace(ex, text=q) for ex, q in zip(self.examples, queries)])
        ranked = self.ctx.predictions(self.target, partial, self.params.batch_size).answers
        return [ranked.ids(i) for i in range(len(queries))]

    # ---- 1. lexical overlap -------------------------------------------------------------------------
    def overlap(self) -> None:
        p = self.params
        overlap = [lexical_overlap(ex.text, relevant_passages(self.data, ex)) for ex in self.examples]
        measured = [v for v in overlap if not math.isnan(v)]
        self.result.details["queries_without_content_words"] = len(overlap) - len(measured)
        if measured:
            self.result.add_metric("overlap_mean", float(np.mean(measured)), None,
                                   "mean share of a query's content words found in its relevant passage")
        low, high = overlap_groups(overlap, p.overlap_share, self.ctx.unit_seed("overlap-ties"))
        if not low:
            self.result.details["overlap"] = "fewer than two queries have a content word: no overlap groups"
            return
        for name, rows, which in (("ndcg_low_overlap", low, "fewest"), ("ndcg_high_overlap", high, "most")):
            self.mean_metric(name, self.full[rows], [self.ids[i] for i in rows], True,
                             f"nDCG@10 of the {len(rows)} queries ({p.overlap_share:.0%}) sharing the {which} content "
                             "words with their relevant passage")
        gap = float(self.full[high].mean() - self.full[low].mean())
        ci = (unpaired_bootstrap_diff(self.full[low], self.full[high], p.bootstrap, p.confidence,
                                      self.ctx.unit_seed("overlap-gap")) if p.bootstrap else None)
        self.result.add_metric("ndcg_overlap_gap", gap, False, "high- minus low-overlap nDCG@10 (unpaired bootstrap "
                               "over the two groups' queries): above 0, the model serves queries that share words with "
                               "their passage better", ci)
        ranges = {key: [float(min(overlap[i] for i in rows)), float(max(overlap[i] for i in rows))]
                  for key, rows in (("low", low), ("high", high))}
        reliance = bool(ci is not None and ci[0] > 0)
        self.result.details["overlap"] = {"queries_per_group": len(low), "low_range": ranges["low"],
                                          "high_range": ranges["high"], "share": p.overlap_share}
        self.result.details["overlap_reliance"] = reliance

    # ---- 2. partial queries -------------------------------------------------------------------------
    def partial(self) -> None:
        p = self.params
        full_mean = float(self.full.mean()) if len(self.full) else 0.0
        full = self.full
        for mode in p.partial_queries:
            key = PARTIAL_KEYS[mode]
            queries = [partial_query(ex.text, mode) for ex in self.examples]
            got = per_query(self.ranks_of(queries), self.judged)["ndcg@10"]
            what = "its question word ('What?')" if mode == "question-word" else "its stop words (content words removed)"
            self.mean_metric(f"ndcg_{key}", got, self.ids, None, f"nDCG@10 with every query reduced to {what}")

            def share(idx: np.ndarray, got: np.ndarray = got, full: np.ndarray = full) -> list[float]:
                denominator = float(full[idx].mean())
                return [float(got[idx].mean()) / denominator if denominator else float("nan")]

            [ci] = (paired_bootstrap_statistic(share, len(got), p.bootstrap, p.confidence,
                                               self.ctx.unit_seed(f"share-{key}")) if p.bootstrap else [None])
            self.result.add_metric(f"ndcg_share_{key}", share(np.arange(len(got)))[0] if full_mean else None, None,
                                   f"nDCG@10 with every query reduced to {what}, as a share of the full-query nDCG@10 "
                                   "(paired bootstrap over queries): near 1, the rest of the query adds little", ci)
            self.result.details[f"empty_{key}"] = sum(not q for q in queries)
            hits = sorted((i for i in range(len(got)) if got[i] >= 1.0 and queries[i]), key=lambda i: -self.full[i])
            for i in hits[: max(p.findings // 2, 1) if p.findings else 0]:
                self.result.findings.append(Finding(
                    title=f"relevant passage ranked first from {what}", input=self.examples[i].text,
                    perturbed=queries[i], expected=", ".join(d for d, g in self.judged[i].items() if g >= 1),
                    observed=self.lists[i][0] if self.lists[i] else "", score=float(got[i]),
                    extra={"kind": "partial-query", "id": self.ids[i], "highlight": queries[i].split()}))

    # ---- the report ---------------------------------------------------------------------------------
    def figures(self) -> None:
        r = self.result
        labels = {"ndcg_full": "full", "ndcg_low_overlap": "low overlap", "ndcg_high_overlap": "high overlap",
                  "ndcg_question_word": "question word only", "ndcg_stopwords": "stop words only"}
        names = [n for n in labels if n in r.metrics]
        series: dict[str, Any] = {"name": "nDCG@10", "values": [r.value(n) for n in names]}
        if self.params.bootstrap:
            series["errors"] = [list(r.metrics[n].ci or ()) for n in names]
        r.details["figures"] = [{"kind": "bars", "title": "nDCG@10 of full queries, by lexical overlap, and of "
                                 "partial queries", "metrics": list(names),
                                 "data": {"labels": [labels[n] for n in names], "series": [series]},
                                 "axes": {"y": "nDCG@10"}}]

    def key_finding(self) -> str:
        r = self.result
        parts = []
        if "ndcg_overlap_gap" in r.metrics:
            gap = r.metrics["ndcg_overlap_gap"]
            lead = "relies on lexical overlap: " if r.details.get("overlap_reliance") else ""
            parts.append(f"{lead}nDCG@10 {r.value('ndcg_low_overlap'):.2f} on low-overlap queries against "
                         f"{r.value('ndcg_high_overlap'):.2f} on high-overlap ones (gap {gap.value:+.2f}{_ci(gap.ci)})")
        for mode in self.params.partial_queries:
            key = PARTIAL_KEYS[mode]
            value, share = r.metrics[f"ndcg_{key}"], r.metrics[f"ndcg_share_{key}"]
            lead = "from its question word alone" if mode == "question-word" else "from its stop words alone"
            tail = f", {share.value:.0%} of the full query's" if share.value is not None else ""
            parts.append(f"{lead}, nDCG@10 {value.value:.2f}{_ci(value.ci)}{tail}")
        return "; ".join(parts) or f"{len(self.examples)} queries, no cue measured"


def audit(result: ProbeResult, target: Any, data: Dataset, params: Any, ctx: Any) -> None:
    """Fill ``result`` with the spurious-cues probe's measurements on a retriever (see the module docstring)."""
    from bertprobe.errors import ProbeError

    if data.corpus is None:
        raise ProbeError("spurious-cues on a model that ranks texts needs retrieval data (a BEIR folder: queries judged "
                         "against a corpus); similarity pairs hold no passage to overlap with")
    run = _RankingAudit(result, target, data, params, ctx)
    run.mean_metric("ndcg_full", run.full, run.ids, True, "nDCG@10 of the full queries")
    result.details["queries"] = len(data.examples)
    result.details["documents"] = len(data.corpus)
    run.overlap()
    run.partial()
    run.figures()
    result.details["task"] = {"name": target.task.name, **dict(target.task.settings)}
    result.details["key_finding"] = run.key_finding()


# what this section writes in the spurious-cues probe's place (merged by Probe.catalogue)
catalogue = Catalogue(RANKING_CUE_METRICS, RANKING_CUE_DIRECTIONS,
                      key_metrics=("ndcg_overlap_gap", "ndcg_share_*"))
