"""The behaviour probe's section for a model that ranks texts (a task with ``ranks_texts``: a bi-encoder, a reranker).

CheckList (Ribeiro et al. 2020) carried over to retrieval, with NevIR's minimal pairs (Weller et al. 2024) for
similarity; the cases are ``retrieval_cases``'s. Verdicts:

* ``inv`` (BEIR data, ``data.corpus``): the query edited by the classifier's own perturbations (typos, casing,
  punctuation, contractions, names and places); a case fails when the gold passage was in the top
  ``retention_k`` (10) for the query and an edited query drops it out (top-k retention). A query's gold passage is
  its highest-graded relevant document (the first in the qrels on a tie). A bi-encoder ranks it among the whole
  corpus (``tasks.embeddings.ranks``, against ``sentence_embedding.corpus_embeddings``); a reranker among the
  original query's first-stage list only (``tasks.reranker.pair_scores``): the first stage is not under audit, and
  a query whose gold passage the first stage missed is not judged. Per test also the mean change in the gold
  passage's rank over every edited query (``rank_change.test.<test>``, positive: worse; a bootstrap interval over
  queries), judged or not.
* ``mft`` and ``dir`` (any data, or none): sim(anchor, paraphrase) > sim(anchor, contrast), the contrast a minimal
  edit of the paraphrase (a negation: mft; a number or an antonym changed: dir). A bi-encoder's similarity reads
  both texts as queries (a symmetric task, as STS); a reranker's is the sigmoid of its logit for (anchor, text).
* fairness (BEIR data, ``origins``): each query holding a person's name, once per surname-origin group (the NER
  and QA tests' census lists), the gold passage edited alike; the gold passage's score per group
  (``gold_similarity_by_origin.<test>.<group>``: cosine or dot for a bi-encoder, the sigmoid of the logit for a
  reranker) and the largest gap between two groups (``fairness_gap.<test>``) with a paired bootstrap interval over
  queries. Names are found by the lexicons, so few queries of a general corpus hold one: the case count is in
  ``details["fairness"]``.

Deviations: INV judges the gold passage's rank, not the whole ranking (CheckList compares predictions); a
reranker's edited query is reranked over the original query's first-stage list (its first stage is held fixed).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

import numpy as np
import torch

from bertprobe.data.dataset import Dataset
from bertprobe.errors import ProbeError
from bertprobe.model.target import Target
from bertprobe.probe import ProbeContext
from bertprobe.probes.behaviour.cases import read_case_files
from bertprobe.probes.behaviour.lexicon import lexicons_with, origins, similarity_lexicons
from bertprobe.probes.behaviour.params import BehaviourParams
from bertprobe.probes.behaviour.perturb import Words, perturbation_specs
from bertprobe.probes.behaviour.rates import add_origin_gaps, failure_rates, slug, summarise
from bertprobe.probes.behaviour.retrieval_cases import (
    BUILTIN_SIMILARITY,
    OriginCase,
    RankCase,
    SimCase,
    expand_similarity_template,
    origin_cases,
    query_cases,
    query_catalogue,
    similarity_case_from_mapping,
)
from bertprobe.results import Finding, ProbeResult
from bertprobe.stats import bootstrap_ci
from bertprobe.tasks.embeddings import EmbeddingSettings, embed, ranks
from bertprobe.tasks.reranker import Reranker, pair_scores
from bertprobe.tasks.sentence_embedding import SentenceEmbedding, corpus_embeddings


class Scorer:
    """The model's similarities, relevance scores and gold ranks, each distinct text (or pair) scored once."""

    def __init__(self, target: Target, data: Dataset | None, batch_size: int | None) -> None:
        self.target, self.data, self.batch_size = target, data, batch_size
        self.reranker = isinstance(target.task, Reranker)
        if not self.reranker and not isinstance(target.task, SentenceEmbedding):
            raise ProbeError(f"the behaviour probe ranks with a bi-encoder's embeddings or a reranker's scores; "
                             f"task {target.task.name} is neither")
        # a reranker embeds nothing: its settings stay the defaults, unread
        self.settings = EmbeddingSettings() if self.reranker else cast(SentenceEmbedding, target.task).embedding
        self.texts: set[tuple[str, str]] = set()  # (role, text) embedded, or ("pair", q + passage) scored
        self._lists: list[list[int]] | None = None

    @property
    def scored(self) -> int:
        return len(self.texts)

    def _pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        distinct = list(dict.fromkeys(pairs))
        self.texts.update(("pair", f"{q}\x00{p}") for q, p in distinct)
        logits = pair_scores(self.target, distinct, self.batch_size) if distinct else torch.empty(0)
        score = dict(zip(distinct, torch.sigmoid(logits.double()).tolist()))  # float64: no tie from saturation
        return np.array([score[p] for p in pairs], dtype=np.float64)

    def _embed(self, texts: Sequence[str], role: str) -> torch.Tensor:
        self.texts.update((role, t) for t in texts)
        return embed(self.target, list(texts), self.settings, role=role, batch_size=self.batch_size)

    def _rowwise(self, a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
        if self.settings.similarity == "cosine":
            return torch.nn.functional.cosine_similarity(a, b, dim=1).double().numpy()
        return (a * b).sum(dim=1).double().numpy()

    def similarity(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """sim(a, b) of each pair: a bi-encoder's of both as queries, a reranker's sigmoid of its logit."""
        if self.reranker:
            return self._pairs(pairs)
        both = self._embed([a for a, _ in pairs] + [b for _, b in pairs], "query")
        return self._rowwise(both[: len(pairs)], both[len(pairs):])

    def relevance(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The score of each (query, passage): a bi-encoder's with the passage as a passage."""
        if self.reranker:
            return self._pairs(pairs)
        return self._rowwise(self._embed([q for q, _ in pairs], "query"), self._embed([p for _, p in pairs], "passage"))

    def first_stage(self) -> list[list[int]]:
        """A reranker's first-stage list of each sampled query, as corpus indices."""
        if self._lists is None:
            assert self.data is not None
            task = cast(Reranker, self.target.task)
            lists = task.first_stage(self.data, self.target, self.batch_size, None)
            self._lists = [[self.data.corpus.index[d] for d in docs] for docs in lists]
        return self._lists

    def gold_ranks(self, queries: Sequence[tuple[str, int, int]]) -> list[int | None]:
        """The 1-based rank of each ``(query text, owner, gold index)``'s gold passage: among the corpus (a
        bi-encoder), or among its owner's first-stage list (a reranker; None when the list lacks it)."""
        assert self.data is not None and self.data.corpus is not None
        corpus = self.data.corpus
        if not self.reranker:
            documents = corpus_embeddings(self.target, corpus, self.settings, self.batch_size)
            found = ranks(self._embed([q for q, _, _ in queries], "query"), documents, [g for _, _, g in queries],
                          self.settings.similarity)
            return [int(r) for r in found.tolist()]
        lists = self.first_stage()
        pairs = [(q, corpus.passage(j)) for q, owner, gold in queries if gold in lists[owner] for j in lists[owner]]
        score = dict(zip(pairs, self._pairs(pairs).tolist()))
        out: list[int | None] = []
        for q, owner, gold in queries:
            if gold not in lists[owner]:
                out.append(None)
                continue
            own = score[(q, corpus.passage(gold))]
            out.append(1 + sum(score[(q, corpus.passage(j))] > own for j in lists[owner]))
        return out


def gold_of(label: Any, index: dict[str, int]) -> int | None:
    """A query's gold passage: its highest-graded relevant document in the corpus (the first on a tie)."""
    best = None
    for doc, grade in label or ():
        if int(grade) >= 1 and str(doc) in index and (best is None or int(grade) > best[1]):
            best = (index[str(doc)], int(grade))
    return None if best is None else best[0]


def sampled_queries(data: Dataset, max_examples: int, seed: int) -> tuple[Dataset, list[tuple[str, str, int]]]:
    """A seeded sample of the queries with a gold passage (``max_examples`` at most), as a dataset (a reranker's
    first stage runs over it) and as ``(id, text, gold index)``."""
    golds = [(ex, gold_of(ex.label, data.corpus.index)) for ex in data.examples]
    kept = [(ex, g) for ex, g in golds if g is not None and ex.text]
    if len(kept) > max_examples:
        kept = random.Random(seed).sample(kept, max_examples)
    return replace(data, examples=[ex for ex, _ in kept]), [(str(ex.id), ex.text, g) for ex, g in kept]


def rank_verdicts(cases: Sequence[RankCase], scorer: Scorer) -> list[list[int | None]]:
    """Each case's gold ranks, the original query's first, every distinct (query, owner) ranked once."""
    keys = list(dict.fromkeys((t, c.owner, c.gold) for c in cases for t in c.texts))
    found = dict(zip(keys, scorer.gold_ranks(keys))) if keys else {}
    return [[found[(t, c.owner, c.gold)] for t in c.texts] for c in cases]


def judged(ranked: Sequence[int | None], k: int) -> tuple[bool, int] | None:
    """(passed, the deciding edit's index) of a case's ranks; None when not judged (its gold passage was not in the
    top ``k`` for the original query, or a reranker's first stage missed it)."""
    before = ranked[0]
    if before is None or before > k:
        return None
    after = [r if r is not None else 10**9 for r in ranked[1:]]
    worst = 1 + int(np.argmax(after))
    return all(r <= k for r in after), worst


def rank_changes(cases: Sequence[RankCase], ranked: Sequence[Sequence[int | None]], resamples: int,
                 seed: int) -> dict[str, dict[str, Any]]:
    """Per test: the mean change of the gold passage's rank over every edited query (positive: worse), with a
    bootstrap interval whose resamples draw whole queries."""
    by_test: dict[str, tuple[list[float], list[str]]] = defaultdict(lambda: ([], []))
    for case, r in zip(cases, ranked):
        values, groups = by_test[case.test]
        if r[0] is None:
            continue
        for after in r[1:]:
            if after is not None:
                values.append(float(after - r[0]))
                groups.append(case.id)
    out = {}
    for test, (values, groups) in by_test.items():
        if values:
            ci = bootstrap_ci(values, resamples, 0.95, seed, groups) if resamples > 0 and len(values) > 1 else None
            out[test] = {"mean": round(float(np.mean(values)), 4), "edited": len(values),
                         "interval": [round(float(x), 4) for x in ci] if ci else None}
    return out


def origin_gaps(cases: Sequence[OriginCase], scores: np.ndarray, resamples: int, seed: int) -> dict[str, Any]:
    """The gold passage's mean score per group over the same queries (``scores``: cases x groups, a bootstrap
    interval each) and the largest gap between two groups with a paired bootstrap interval over queries."""
    groups = list(cases[0].groups)
    means = scores.mean(axis=0)
    hi, lo = int(np.argmax(means)), int(np.argmin(means))
    if hi == lo:
        hi, lo = 0, 1
    intervals, gap_ci = {}, None
    if resamples > 0 and len(cases) > 1:
        intervals = {g: list(bootstrap_ci(scores[:, j], resamples, 0.95, seed)) for j, g in enumerate(groups)}
        gap_ci = list(bootstrap_ci(scores[:, hi] - scores[:, lo], resamples, 0.95, seed))
    return {"cases": len(cases), "similarity": {g: round(float(m), 4) for g, m in zip(groups, means)},
            "intervals": intervals, "gap": round(float(means[hi] - means[lo]), 4), "higher": groups[hi],
            "lower": groups[lo], "interval": gap_ci}


def audit(result: ProbeResult, target: Target, data: Dataset | None, params: BehaviourParams,
          ctx: ProbeContext) -> None:
    """Fill ``result`` with the behaviour probe's run on a bi-encoder or a reranker (see the module docstring)."""
    lexicons = lexicons_with({k: list(v) for k, v in params.lexicons.items()})
    sim_words, antonyms = similarity_lexicons()
    words = {**sim_words, **lexicons}
    sim_cases: list[SimCase] = read_case_files(params.cases, similarity_case_from_mapping)
    templates = [*(BUILTIN_SIMILARITY if params.builtin_templates else ()), *params.templates]
    first_own = len(templates) - len(params.templates)
    for i, spec in enumerate(templates):
        where = f"templates[{i - first_own}]" if i >= first_own else f"built-in template '{spec['test']}'"
        sim_cases += expand_similarity_template(spec, words, antonyms, ctx.seed, params.max_cases, where, i)
    retrieval = data is not None and data.corpus is not None
    if params.perturbations and not retrieval:
        raise ProbeError("perturbations edit retrieval queries: they need BEIR data (a corpus, queries and qrels); "
                         "add one under data: or set perturbations: []")
    corpus = data.corpus if data is not None else None
    sample, queries = sampled_queries(data, params.max_examples, ctx.seed) if data is not None and corpus is not None \
        else (None, [])
    scorer = Scorer(target, sample, params.batch_size)
    rank_cases: list[RankCase] = []
    rows: list[dict[str, Any]] = []
    if retrieval and params.perturbations != ():
        specs = perturbation_specs(params.perturbations, query_catalogue(), ("name", "variants"))
        rank_cases, rows = query_cases(queries, specs, Words(lexicons=lexicons), ctx.seed)
    fair: list[OriginCase] = []
    if retrieval and params.origins:
        passages = [corpus.passage(g) for _, _, g in queries]
        fair = origin_cases(queries, passages, Words(lexicons=lexicons), origins(), ctx.seed)
    if not sim_cases and not rank_cases and not fair:
        raise ProbeError("no behavioural case to run: give cases:, templates:, builtin_templates: true, or BEIR data "
                         "for the perturbations")
    k = params.retention_k
    ranked = rank_verdicts(rank_cases, scorer)
    verdicts = [judged(r, k) for r in ranked]
    kept = [(c, r, v) for c, r, v in zip(rank_cases, ranked, verdicts) if v is not None]
    sims = scorer.similarity([(c.anchor, t) for c in sim_cases for t in (c.paraphrase, c.contrast)]).reshape(-1, 2) \
        if sim_cases else np.zeros((0, 2))
    cases: list[Any] = [c for c, _, _ in kept] + list(sim_cases)
    passed = [v[0] for _, _, v in kept] + [bool(s[0] > s[1]) for s in sims]
    n_rank = len(kept)

    def finding(i: int) -> Finding:
        if i < n_rank:
            case, r, v = kept[i]
            return _rank_finding(case, r, v[1], k, corpus.ids[case.gold])
        return _sim_finding(cases[i], sims[i - n_rank])

    tests, failed = failure_rates(result, cases, passed, finding, params.findings) if cases else ([], 0)
    changes = rank_changes(rank_cases, ranked, params.bootstrap, ctx.seed)
    for test, change in changes.items():
        result.add_metric(f"rank_change.test.{slug(test)}", change["mean"], False,
                          f"mean change of the gold passage's rank under '{test}' (positive: lower in the ranking)",
                          ci=tuple(change["interval"]) if change["interval"] else None)
    _describe_rows(tests, rows, rank_cases, verdicts, changes, sim_cases, sims, k)
    fairness = {}
    if fair:
        pairs = [(q, p) for c in fair for q, p in zip(c.queries, c.passages)]
        scores = scorer.relevance(pairs).reshape(len(fair), -1)
        fairness["name origin"] = origin_gaps(fair, scores, params.bootstrap, ctx.seed)
    score_name = "the sigmoid of the reranker's logit" if scorer.reranker else \
        f"the {scorer.settings.similarity} similarity"
    line = add_origin_gaps(result, fairness, "similarity", "gold_similarity_by_origin", lambda gaps, test, group: (
        f"the gold passage's score ({score_name}) for queries whose person has a surname of the '{group}' group"
        if group is not None else f"largest gap between surname origin groups in the gold passage's score "
                                  f"({score_name}) over {gaps['cases']} queries"), lambda gaps: "gold passage score")
    if tests:
        summarise(result, tests, len(cases), failed, scorer.scored, line)
    else:
        result.add_metric("predicted_texts", scorer.scored, None, "distinct texts predicted (each once)", kind="count")
        result.details["tests"] = []
        result.details["key_finding"] = f"no case judged; largest fairness gap: {line}" if line else "no case judged"
    result.details["perturbations"] = rows
    result.details["task"] = target.task.name
    result.details["verdicts"] = {
        "inv": f"the gold passage stays in the top {k} for every edited query; a case is judged only where "
               f"it was in the top {k} for the original query",
        "mft": "sim(anchor, paraphrase) > sim(anchor, contrast), the contrast a hand-written negation of the paraphrase",
        "dir": "sim(anchor, paraphrase) > sim(anchor, contrast), the contrast the paraphrase with a number or an "
               "adjective changed to another meaning"}
    if fair:
        result.details["fairness_cases"] = [{"id": c.id, "queries": dict(zip(c.groups, c.queries))}
                                            for c in fair[: params.findings]]


def _describe_rows(tests: list[dict[str, Any]], rows: list[dict[str, Any]], rank_cases: Sequence[RankCase],
                   verdicts: Sequence[Any], changes: dict[str, dict[str, Any]], sim_cases: Sequence[SimCase],
                   sims: np.ndarray, k: int) -> None:
    """The tests table's rank changes and similarity margins, and each perturbation's judged count."""
    judged_by: dict[str, int] = defaultdict(int)
    for case, v in zip(rank_cases, verdicts):
        judged_by[case.test] += v is not None
    for row in rows:
        row["judged"] = judged_by[row["perturbation"]]
        if row["perturbation"] in changes:
            row["mean_rank_change"] = changes[row["perturbation"]]["mean"]
        if row["applied"] and not row["judged"]:
            row["skipped"] = f"no edited query had its gold passage in the top {k} before the edit"
    margins: dict[str, list[float]] = defaultdict(list)
    for case, s in zip(sim_cases, sims):
        margins[case.test].append(float(s[0] - s[1]))
    for row in tests:
        if row["type"] == "inv" and row["test"] in changes:
            row["mean_rank_change"] = changes[row["test"]]["mean"]
        elif row["test"] in margins:
            row["mean_margin"] = round(float(np.mean(margins[row["test"]])), 4)


def _rank_finding(case: RankCase, ranked: Sequence[int | None], worst: int, k: int, gold: str) -> Finding:
    """The edited query that pushed the gold passage out of the top k, with its rank before and after."""
    before, after = ranked[0], ranked[worst]
    shown_after = "outside the reranked list" if after is None else str(after)
    changed = list(case.changed[worst]) if case.changed else []
    return Finding(title=f"{case.test} (inv)", input=case.texts[0], perturbed=case.texts[worst],
                   expected=f"the gold passage {gold} stays in the top {k} (rank {before} before)",
                   observed=f"gold rank {before} -> {shown_after}",
                   score=float((after if after is not None else 10**9) - (before or 0)),
                   extra={"kind": "ranking", "test": case.test, "id": case.id, "gold": gold, "rank_before": before,
                          "rank_after": after, "changed": changed, "highlight": changed})


def _sim_finding(case: SimCase, sims: np.ndarray) -> Finding:
    """A similarity case the contrast won: both scores."""
    changed = list(case.changed)
    return Finding(title=f"{case.test} ({case.type})", input=case.anchor, perturbed=case.contrast,
                   expected=f"the paraphrase '{case.paraphrase}' scores above the contrast",
                   observed=f"sim(paraphrase) {sims[0]:.4f} <= sim(contrast) {sims[1]:.4f}",
                   score=float(sims[1] - sims[0]),
                   extra={"kind": "similarity", "test": case.test, "id": case.id, "paraphrase": case.paraphrase,
                          "contrast": case.contrast, "similarity_paraphrase": round(float(sims[0]), 6),
                          "similarity_contrast": round(float(sims[1]), 6), "changed": changed, "highlight": changed})
