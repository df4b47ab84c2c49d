"""The accuracy probe's section for models that rank texts (``ranks_texts``: a bi-encoder, a cross-encoder reranker).

On BEIR data (Thakur et al. 2021, "BEIR: A Heterogeneous Benchmark for Zero-shot Evaluation of Information
Retrieval Models") each query's ranked list is scored as trec_eval scores a run (``tasks.retrieval_metrics``:
nDCG@10 after Järvelin & Kekäläinen 2002, BEIR's headline metric; MRR@10, MS MARCO's; recall at 1, 10 and 100;
MAP over the ranked list), the mean over queries with an interval over queries (``stats.mean_interval``: the
percentile bootstrap from 30 queries up, Wilson's below and for 0/1 values), plus ``hit@10``, the share of
queries with a relevant document in the top 10 (Wilson interval; recall@10 where each query has one relevant
document). Per-query outcomes back every metric (``ndcg@10``, ``mrr@10``... as scores, ``hit@10`` as 0/1), so a
paired gate or ``compare`` pairs two models query by query, and ``prediction`` (the top 10 ids, ``outcomes.ranking_label``) gives a
matrix's agreement between builds. Findings: the worst-ranked queries, each with its gold passage, what was
ranked first instead and the gold's rank.

On pairs with a gold similarity (STS-B: Cer et al. 2017), Spearman's and Pearson's correlation between the
model's similarities and the gold scores (plain correlations in [-1, 1], where sentence-transformers' evaluators
print them x100), each with a percentile bootstrap interval over pairs; findings are the pairs whose rank by the
model lies furthest from their gold rank. A correlation is no mean of per-pair values, so these metrics name no
outcome: a paired gate judges them on their intervals.

Deviations: a gold document that the ranked list (``depth``, 100 by default; a reranker's first stage) does not
hold is reported "not in the top DEPTH", not at its exact rank. ``examples_per_s`` is the one pass's rate
(queries ranked, or pairs scored, per second), which includes embedding the corpus unless an earlier probe of
the run embedded it, and a reranker's first stage; it is a cost metric, never gated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bertprobe.data.dataset import Dataset
from bertprobe.errors import ProbeError
from bertprobe.results import Catalogue, Finding, ProbeResult
from bertprobe.results.outcomes import Outcomes, example_ids, ranking_label
from bertprobe.stats import BOOTSTRAP, interval_method, mean_interval, paired_bootstrap_statistic
from bertprobe.tasks.retrieval_metrics import first_relevant_rank, pearson, per_query, spearman
from bertprobe.tasks.sentence_embedding import PairScores, Ranked, judgements

# (metric, meaning) in the order the report lists them; each is the mean over queries of its per-query outcome
RANKING_METRICS = {
    "ndcg@10": "retrieval: nDCG@10, the mean over queries of DCG over the top 10 (linear gains, log2 discount) over "
               "the ideal DCG of the query's judgements (trec_eval's ndcg_cut_10; BEIR's headline metric)",
    "mrr@10": "retrieval: the mean over queries of the reciprocal rank of the first relevant document in the top 10 "
              "(0 when none; trec_eval's recip_rank on the run cut at 10)",
    "recall@1": "retrieval: share of a query's relevant documents ranked first, mean over queries",
    "recall@10": "retrieval: share of a query's relevant documents in the top 10, mean over queries",
    "recall@100": "retrieval: share of a query's relevant documents in the top 100, mean over queries",
    "map": "retrieval: mean average precision over the ranked list (the depth searched or reranked; trec_eval's map)",
}
HIT = "hit@10"
PAIR_METRICS = {
    "spearman": "similarity: Spearman's rank correlation between the model's similarities and the gold scores, in "
                "[-1, 1] (percentile bootstrap interval over pairs)",
    "pearson": "similarity: Pearson's correlation between the model's similarities and the gold scores, in [-1, 1] "
               "(percentile bootstrap interval over pairs)",
}
COUNTS = {"queries": "retrieval: queries evaluated", "documents": "retrieval: documents in the corpus searched",
          "pairs": "similarity: pairs evaluated"}
RANK_BINS = ((1, 1, "1"), (2, 3, "2-3"), (4, 10, "4-10"), (11, 100, "11-100"))
EXCERPT = 160  # characters of a passage a finding shows
SCATTER_POINTS = 300  # pairs drawn in the similarity figure (report.json stays small)


def _interval(values: Sequence[float], params: Any, seed: int) -> tuple[float, float] | None:
    """The interval of the mean of per-query values in [0, 1] (None when ``params.bootstrap`` is 0)."""
    if not params.bootstrap or not len(values):
        return None
    return mean_interval(list(values), params.bootstrap, params.confidence, seed)


def _how(values: Sequence[float], params: Any) -> str:
    if not params.bootstrap:
        return "no interval: bootstrap 0"
    method = interval_method(list(values), params.bootstrap)
    return "bootstrap interval over queries" if method == BOOTSTRAP else "Wilson interval over queries"


def _start(text: str) -> str:
    return text if len(text) <= EXCERPT else text[: EXCERPT - 1].rstrip() + "…"


def audit(result: ProbeResult, target: Any, data: Dataset, params: Any, ctx: Any) -> None:
    """Fill ``result`` with the retrieval metrics of ranked lists (BEIR data) or the correlations of similarities
    (pairs), as the module docstring says, from the run's one prediction pass (``ctx.predictions``)."""
    predicted = ctx.predictions(target, data, params.batch_size)
    answers = predicted.answers
    if isinstance(answers, Ranked):
        _rankings(result, answers, data, params, ctx.seed)
        unit = "queries ranked"
    elif isinstance(answers, PairScores):
        _pairs(result, answers, data, params, ctx.seed)
        unit = "pairs scored"
    else:
        raise ProbeError(f"accuracy: the {target.task.name} task predicted {type(answers).__name__}, neither ranked "
                         "lists nor pair similarities; give BEIR data or pairs with a gold score")
    result.add_metric("examples_per_s", len(data) / max(predicted.seconds, 1e-9), True,
                      f"{unit} per second in the run's one pass over the data (a corpus embedded by an earlier "
                      "probe of the run is not timed again; a reranker's first stage is included)", kind="cost")
    task = target.task
    result.details["task"] = {"name": task.name, **dict(task.settings)}


def _rankings(result: ProbeResult, ranked: Ranked, data: Dataset, params: Any, seed: int) -> None:
    examples = data.examples
    corpus = ranked.corpus
    rankings = [ranked.ids(i) for i in range(len(examples))]
    judged = [judgements(ex.label) for ex in examples]
    values = per_query(rankings, judged)
    ids = example_ids(examples)
    gold_ranks = [first_relevant_rank(r, j) for r, j in zip(rankings, judged)]
    for name, meaning in RANKING_METRICS.items():
        v = values[name]
        result.outcomes.append(Outcomes.from_values(name, ids, v, "score"))
        result.add_metric(name, float(v.mean()), True, f"{meaning}; {_how(v, params)}", _interval(v, params, seed),
                          outcome=name)
    hits = np.array([float(r is not None and r <= 10) for r in gold_ranks])
    result.outcomes.append(Outcomes.from_values(HIT, ids, hits))
    result.add_metric(HIT, float(hits.mean()), True, "retrieval: share of queries with a relevant document in the top "
                      "10 (Wilson interval)", _interval(hits, params, seed), outcome=HIT)
    # the top 10 as a ranking label: a matrix's agreement compares builds' first documents and their top-10 overlap
    result.outcomes.append(Outcomes.from_values("prediction", ids, [ranking_label(r) for r in rankings], "label"))
    result.add_metric("queries", float(len(examples)), None, COUNTS["queries"], kind="count")
    result.add_metric("documents", float(len(corpus)), None, COUNTS["documents"], kind="count")
    depth = int(ranked.indices.shape[1]) if len(examples) else 0

    ndcg = values["ndcg@10"]
    worst = sorted((i for i in range(len(examples)) if ndcg[i] < 1.0),
                   key=lambda i: (ndcg[i], -(gold_ranks[i] or depth + 1), ids[i]))
    for i in worst[: params.findings]:
        gold = [d for d, g in sorted(judged[i].items(), key=lambda x: -x[1]) if g >= 1 and d in corpus.index]
        top = rankings[i][0] if rankings[i] else None
        rank = gold_ranks[i]
        where = f"at rank {rank}" if rank is not None else f"not in the top {depth}"
        result.findings.append(Finding(
            title=f"gold passage {where}", input=examples[i].text,
            expected=f"{gold[0]}: {_start(corpus.passage(corpus.index[gold[0]]))}" if gold else None,
            observed=f"{top}: {_start(corpus.passage(corpus.index[top]))}" if top is not None else "(nothing ranked)",
            score=round(float(ndcg[i]), 4),
            extra={"kind": "ranking", "id": ids[i], "gold_rank": rank, "ndcg@10": round(float(ndcg[i]), 4),
                   "relevant": len(gold)}))

    bins = [sum(1 for r in gold_ranks if r is not None and lo <= r <= hi) for lo, hi, _ in RANK_BINS]
    labels = [name for *_, name in RANK_BINS]
    if depth > 100:
        bins.append(sum(1 for r in gold_ranks if r is not None and r > 100))
        labels.append(f"101-{depth}")
    bins.append(sum(1 for r in gold_ranks if r is None))
    labels.append(f"not in the top {depth}")
    names = list(RANKING_METRICS) + [HIT]
    result.details["ranking"] = {"depth": depth, "first_relevant_rank": dict(zip(labels, bins))}
    result.details["figures"] = [
        {"kind": "bars", "title": "retrieval metrics (means over queries, with their intervals)",
         "metrics": names,
         "data": {"labels": names, "series": [{"name": "mean over queries", "values": [result.value(n) for n in names],
                                               **({"errors": [list(result.metrics[n].ci or ()) for n in names]}
                                                  if params.bootstrap else {})}]},
         "axes": {"y": "score"}},
        {"kind": "bars", "title": "rank of each query's first relevant document", "metrics": ["recall@*", HIT],
         "data": {"labels": labels, "series": [{"name": "queries", "values": bins}]}, "axes": {"y": "queries"}},
    ]
    m = result.metrics["ndcg@10"]
    finding = f"nDCG@10 {m.value:.3f}"
    if m.ci:
        finding += f" [{m.ci[0]:.3f}, {m.ci[1]:.3f}]"
    result.details["key_finding"] = (f"{finding}, MRR@10 {result.value('mrr@10'):.3f}, R@10 "
                                     f"{result.value('recall@10'):.3f} on {len(examples):,} queries over "
                                     f"{len(corpus):,} documents")


def ranks(values: np.ndarray) -> np.ndarray:
    """The 1-based ranks of each row of ``values`` (ties get their mean rank, as scipy's ``rankdata``)."""
    values = np.atleast_2d(values)
    ordered = np.sort(values, axis=1)
    out = np.empty(values.shape, dtype=np.float64)
    for r in range(values.shape[0]):
        left = np.searchsorted(ordered[r], values[r], "left")
        right = np.searchsorted(ordered[r], values[r], "right")
        out[r] = (left + right + 1) / 2
    return out


def _correlation(x: np.ndarray, y: np.ndarray) -> float:
    x, y = x - x.mean(), y - y.mean()
    denom = float(np.sqrt((x * x).sum() * (y * y).sum()))
    return float((x * y).sum() / denom) if denom else 0.0


def _pairs(result: ProbeResult, predicted: PairScores, data: Dataset, params: Any, seed: int) -> None:
    examples = data.examples
    if any(ex.label is None for ex in examples):
        raise ProbeError("accuracy on similarity pairs needs a gold score for every pair (data.label: STS-B's score)")
    gold = np.array([float(ex.label) for ex in examples], dtype=np.float64)  # type: ignore[arg-type]
    model = np.asarray(predicted.scores, dtype=np.float64)
    if len(examples) < 2:
        raise ProbeError(f"accuracy on similarity pairs needs at least 2 pairs for a correlation, not {len(examples)}")
    values = {"spearman": spearman(model, gold), "pearson": pearson(model, gold)}
    intervals: dict[str, tuple[float, float] | None] = {"spearman": None, "pearson": None}
    if params.bootstrap:
        def statistic(idx: np.ndarray) -> list[float]:
            a, b = model[idx], gold[idx]
            return [_correlation(ranks(a)[0], ranks(b)[0]), _correlation(a, b)]

        drawn = paired_bootstrap_statistic(statistic, len(examples), params.bootstrap, params.confidence, seed)
        intervals = dict(zip(("spearman", "pearson"), drawn))
    for name, meaning in PAIR_METRICS.items():
        result.add_metric(name, values[name], True, meaning, intervals[name])
    result.add_metric("pairs", float(len(examples)), None, COUNTS["pairs"], kind="count")
    n = len(examples)
    by_model, by_gold = ranks(model)[0], ranks(gold)[0]
    gap = np.abs(by_model - by_gold) / n  # how far a pair's rank by the model lies from its gold rank
    for i in sorted(range(n), key=lambda i: (-gap[i], i))[: params.findings]:
        ex = examples[i]
        result.findings.append(Finding(
            title="similarity ranked far from its gold", input=ex.text, perturbed=ex.text_pair,
            expected=f"gold {gold[i]:g} (rank {by_gold[i]:g} of {n})",
            observed=f"similarity {model[i]:.4f} (rank {by_model[i]:g} of {n})", score=round(float(gap[i]), 4),
            extra={"kind": "similarity", "id": ex.id}))
    shown = np.unique(np.linspace(0, n - 1, min(n, SCATTER_POINTS)).round().astype(int))  # a spread sample
    result.details["figures"] = [{
        "kind": "scatter", "title": f"model similarity against gold score ({len(shown)} of {n} pairs)",
        "metrics": ["spearman", "pearson"], "tabulate": False,
        "data": {"points": [{"x": round(float(gold[i]), 4), "y": round(float(model[i]), 4)} for i in shown]},
        "axes": {"x": "gold score", "y": "model similarity"}}]
    s = result.metrics["spearman"]
    finding = f"Spearman {s.value:.3f}"
    if s.ci:
        finding += f" [{s.ci[0]:.3f}, {s.ci[1]:.3f}]"
    result.details["key_finding"] = f"{finding}, Pearson {values['pearson']:.3f} on {n:,} pairs"


# what this section writes in the accuracy probe's place (merged by Probe.catalogue)
catalogue = Catalogue(
    {**RANKING_METRICS, HIT: "retrieval: share of queries with a relevant document in the top 10 (Wilson interval)",
     **PAIR_METRICS, **COUNTS},
    {**dict.fromkeys(RANKING_METRICS, True), HIT: True, "spearman": True, "pearson": True,
     **dict.fromkeys(COUNTS, None)},
    (),
    ("ndcg@10", "mrr@10", "recall@10", "spearman"))
