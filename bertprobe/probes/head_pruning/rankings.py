"""``head-pruning`` on a bi-encoder (``ranks_texts``, task sentence-embedding): the sweeps score nDCG@10 of queries
searched against passages embedded under the same head mask.

Michel et al. 2019 ("Are Sixteen Heads Really Better than One?", NeurIPS) mask heads and re-evaluate; a bi-encoder
is evaluated by ranking, and a head mask changes both sides of the ranking, the query's embedding and every
passage's. So a unit's rows are the sampled queries *and* the documents of a corpus subset, all read under the
unit's mask: a row's raw outcome is its pooled embedding (pooling, normalisation and prompts as the task's settings
say: ``tasks.embeddings``), and ``collect`` ranks the subset's documents for each query by the task's similarity and
scores each query's nDCG@10 (or ``metric: mrr@10``, ``recall@10``, ``recall@1``, ``map``) against its judgements
(``tasks.retrieval_metrics``, trec_eval's definitions). The unmasked model's outcomes equal those of the task's own
search over the same subset.

Importance (Michel's E_x |dL(x)/d xi_h|) needs a differentiable loss, which a ranking metric is not. Its proxy is the
contrastive loss bi-encoders are trained with (in-batch negatives, sentence-transformers'
``MultipleNegativesRankingLoss``): for batches of ``IMPORTANCE_PAIRS`` (query, relevant passage) pairs, the
cross-entropy of each query's similarities to the batch's passages (scaled by 20 for cosine, as that loss does)
against its own passage; another query's copy of the same passage is no negative. A pair's query and passage share
one mask variable, so |dL/d xi_h| is taken per pair (of the loss summed over the batch), and averaged over pairs.

Deviations, all for cost: every unit re-embeds its rows, so the sweep runs on a *sample*: ``retrieval_queries``
queries (unless ``max_examples`` is set) and a corpus subset of their relevant documents plus ``distractors``
others drawn with the run's seed (``sweep.sampled``). nDCG@10 over that subset is higher than over the full corpus
(fewer rivals), so read ``baseline`` and the drops against each other, not against a full-corpus nDCG. The
importance proxy is a training loss, not the metric the sweeps score.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from bertprobe.data.dataset import Dataset
from bertprobe.errors import ProbeError
from bertprobe.model.architectures import head_grid
from bertprobe.model.interventions import frozen_parameters, head_intervention
from bertprobe.model.target import Encoded, Target
from bertprobe.probes.head_pruning.rows import SweepRows
from bertprobe.progress import progress
from bertprobe.tasks.embeddings import EmbeddingSettings, last_hidden, pool
from bertprobe.tasks.retrieval_metrics import per_query
from bertprobe.tasks.scores import OutcomeScore
from bertprobe.tasks.sentence_embedding import judgements

METRICS = ("ndcg@10", "mrr@10", "recall@1", "recall@10", "map")
IMPORTANCE_PAIRS = 32  # (query, passage) pairs per batch of the contrastive importance: the in-batch negatives
COSINE_SCALE = 20.0  # sentence-transformers' MultipleNegativesRankingLoss scale (a temperature of 0.05)


def metric_of(metric: str) -> str:
    """The ranking metric head sweeps score (``auto``: nDCG@10)."""
    name = "ndcg@10" if metric in ("auto", "ndcg") else metric
    if name not in METRICS:
        raise ProbeError(f"metric '{metric}' does not apply to a bi-encoder's head sweeps; use auto (ndcg@10) or one "
                         f"of {', '.join(METRICS)}")
    return name


def ranking_score(metric: str) -> OutcomeScore:
    """The per-query metric of the sweeps (a score in [0, 1], its mean the value)."""
    name = metric_of(metric)

    def outcome(logits: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        raise ProbeError("a query's outcome depends on the corpus's embeddings: head sweeps use the section's rows")

    return OutcomeScore(name, outcome, f"mean per-query {name} of the sampled queries against the corpus subset, "
                        "both embedded under the head mask", graded=True)


def token_rows(target: Target, texts: Sequence[str], settings: EmbeddingSettings, role: str) -> Encoded:
    """``texts`` as the model reads them for ``role`` (query or passage): prompt, lower-casing and maximum length as
    ``tasks.embeddings.embed`` tokenises them."""
    prompt = settings.query_prompt if role == "query" else settings.passage_prompt
    inputs = [prompt + (t.lower() if settings.lowercase else t) for t in texts]
    if not inputs:
        return Encoded([], [])
    enc = target.tokenizer(inputs, truncation=True, max_length=settings.max_length or target.max_length)
    keys = [k for k in enc if k in target.input_names]
    rows = [{k: enc[k][i] for k in keys} for i in range(len(inputs))]
    return Encoded(rows, [len(r["input_ids"]) for r in rows])


def token_mask(lengths: torch.Tensor, width: int, left: bool) -> torch.Tensor:
    """The attention mask (rows x ``width``) of rows of ``lengths`` tokens, padded on the right (or the left)."""
    at = torch.arange(width, device=lengths.device).unsqueeze(0)
    lengths = lengths.unsqueeze(1)
    return (at >= width - lengths) if left else (at < lengths)


def embedding_judge(settings: EmbeddingSettings, left_padded: bool) -> Any:
    """A judge: each row's embedding from its last hidden states, its gold being its token count (float32)."""

    def judge(hidden: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        mask = token_mask(lengths, hidden.shape[1], left_padded)
        pooled = pool(hidden.float(), mask, settings.pooling)
        return torch.nn.functional.normalize(pooled, p=2, dim=1) if settings.normalize else pooled

    return judge


def similarities(queries: torch.Tensor, documents: torch.Tensor, similarity: str) -> torch.Tensor:
    """Query x document similarities (cosine or dot), differentiable."""
    if similarity == "cosine":
        queries = torch.nn.functional.normalize(queries, p=2, dim=1)
        documents = torch.nn.functional.normalize(documents, p=2, dim=1)
    return queries @ documents.T


def ranked_metric(embeddings: np.ndarray, queries: int, doc_ids: Sequence[str], judged: Sequence[dict[str, int]],
                  similarity: str, metric: str, depth: int = 100) -> np.ndarray:
    """Per query, ``metric`` of the documents ranked by similarity: ``embeddings`` holds the queries' rows first,
    then the documents' (ties keep the corpus order, as ``torch.topk`` on a CPU does not promise: they are rare)."""
    q = torch.from_numpy(np.asarray(embeddings[:queries], dtype=np.float32))
    d = torch.from_numpy(np.asarray(embeddings[queries:], dtype=np.float32))
    scores = similarities(q, d, similarity).numpy()
    order = np.argsort(-scores, axis=1, kind="stable")[:, :depth]
    lists = [[doc_ids[j] for j in row] for row in order.tolist()]
    return per_query(lists, judged)[metric]


def first_relevant(example: Any, index: dict[str, int]) -> int | None:
    """The corpus index of the example's best-graded relevant document (the first of equals), None without one."""
    best = [(g, k, d) for k, (d, g) in enumerate(example.label) if g >= 1 and d in index]
    if not best:
        return None
    _, _, doc = max(best, key=lambda x: (x[0], -x[1]))
    return index[doc]


def contrastive_importance(target: Target, query_rows: Encoded, passage_rows: Encoded, passage_of: Sequence[int],
                           settings: EmbeddingSettings, mask: torch.Tensor | None = None,
                           pairs: int = IMPORTANCE_PAIRS) -> torch.Tensor:
    """Michel's E |dL/d xi_h| (``L x H``) with the in-batch-negatives loss over (query, relevant passage) pairs as L
    (see the module docstring); ``passage_of[i]`` names query ``i``'s passage, so that a copy of it is no negative."""
    sites = target.attention_sites()
    shape = head_grid(sites)
    base = torch.ones(shape) if mask is None else mask.float()
    total, count = torch.zeros(shape), 0
    judge = embedding_judge(settings, getattr(target.tokenizer, "padding_side", "right") == "left")
    scale = COSINE_SCALE if settings.similarity == "cosine" else 1.0
    n = len(query_rows)
    starts = list(range(0, n, pairs))
    with frozen_parameters(target.model):
        for start in progress(starts, desc="head importance (contrastive)"):
            idx = list(range(start, min(start + pairs, n)))
            rows = [query_rows.rows[i] for i in idx] + [passage_rows.rows[i] for i in idx]
            lengths = torch.tensor([query_rows.lengths[i] for i in idx] + [passage_rows.lengths[i] for i in idx])
            batch = target.collate(rows)
            xi = base.unsqueeze(0).repeat(len(idx), 1, 1).to(target.device).requires_grad_(True)
            with torch.enable_grad(), head_intervention(target.model, sites, mask=torch.cat([xi, xi])):
                hidden = last_hidden(target.forward(batch))
                emb = judge(hidden, lengths.to(hidden.device))
                sims = similarities(emb[: len(idx)], emb[len(idx):], settings.similarity) * scale
                same = torch.tensor([[passage_of[i] == passage_of[j] and i != j for j in idx] for i in idx],
                                    device=sims.device)
                sims = sims.masked_fill(same, float("-inf"))
                loss = torch.nn.functional.cross_entropy(sims, torch.arange(len(idx), device=sims.device),
                                                         reduction="sum")
                loss.backward()
            if xi.grad is None:
                raise ValueError("no gradient reached the head masks (a quantized model has no backward pass)")
            total += xi.grad.abs().sum(0).cpu()
            count += len(idx)
    return total / max(count, 1)


def sweep_rows(target: Target, data: Dataset, metric: str = "auto", subset: Sequence[int] | None = None) -> SweepRows:
    """The queries ``subset`` of ``data`` (None: all) and every document of its corpus as rows, each judged to its
    embedding; each query scored by ``metric`` over the documents ranked for it (see the module docstring)."""
    if data.corpus is None:
        raise ProbeError("head-pruning on a bi-encoder needs retrieval data (a BEIR folder: queries judged against a "
                         "corpus); similarity pairs are not ranked")
    if "embeddings" not in target.task.capabilities:
        raise ProbeError(f"head-pruning's section for ranked texts sweeps bi-encoders; task '{target.task.name}' "
                         "embeds no texts")
    score = ranking_score(metric)
    settings = EmbeddingSettings.of(target.task.settings)
    examples = list(data.examples) if subset is None else [data.examples[i] for i in subset]
    corpus = data.corpus
    queries = token_rows(target, [ex.text for ex in examples], settings, "query")
    passages = token_rows(target, [corpus.passage(i) for i in range(len(corpus))], settings, "passage")
    encoded = Encoded(queries.rows + passages.rows, queries.lengths + passages.lengths)
    labels = torch.tensor(encoded.lengths, dtype=torch.long)  # a row's gold: its token count (the judge's mask)
    judged = [judgements(ex.label) for ex in examples]
    doc_ids = list(corpus.ids)
    name = score.name

    def collect(raw: np.ndarray) -> np.ndarray:
        return ranked_metric(raw, len(examples), doc_ids, judged, settings.similarity, name)

    gold = [first_relevant(ex, corpus.index) for ex in examples]
    paired = [i for i, g in enumerate(gold) if g is not None]

    def importance(mask: torch.Tensor | None = None) -> torch.Tensor:
        if not paired:
            raise ProbeError("no sampled query has a relevant document in the corpus: no pair for the importance loss")
        q = queries.subset(paired)
        p = passages.subset([gold[i] for i in paired])  # type: ignore[misc]
        return contrastive_importance(target, q, p, [gold[i] for i in paired], settings, mask)  # type: ignore[misc]

    left = getattr(target.tokenizer, "padding_side", "right") == "left"
    return SweepRows(examples, encoded, labels, score, judge=embedding_judge(settings, left), collect=collect,
                     logits_of=last_hidden, importance=importance,
                     notes=((f"{len(examples)} queries against a corpus subset of {len(corpus)} documents (their "
                             "relevant ones and sampled distractors), both embedded under each mask"),))
