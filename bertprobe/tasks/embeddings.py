"""Sentence embeddings from a bi-encoder, and exact search over a corpus of them.

A bi-encoder's embedding of a text is its encoder's last hidden states pooled over the text's tokens (mean over
the attention mask, the [CLS] token, or the maximum per dimension), then optionally normalised to unit length, as
sentence-transformers' ``Transformer -> Pooling -> Normalize`` modules compute it (Reimers & Gurevych 2019). The
forward passes are bertprobe's own (``target.forward``), so an audit sees exactly the weights it loaded (a variant,
an ONNX build), not a second copy. Texts are tokenised in one batched call, sorted by length and packed into
batches of similar lengths (``Target.plan_batches``: the spec's 32 rows on a CPU, as sentence-transformers' ``encode``; a GPU's token budget); identical texts are embedded once.

Search is exact: scores of every query against every document by chunked matrix products, then ``torch.topk``
(no approximate index in an audit's path: a miss is the model's, never the index's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from bertprobe.progress import active as active_progress

POOLINGS = ("mean", "cls", "max")
SIMILARITIES = ("cosine", "dot")


@dataclass(frozen=True)
class EmbeddingSettings:
    """How a bi-encoder turns a text into its embedding (a sentence-embedding task's settings)."""

    pooling: str = "mean"
    normalize: bool = False
    max_length: int | None = None
    lowercase: bool = False
    query_prompt: str = ""
    passage_prompt: str = ""
    similarity: str = "cosine"

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> EmbeddingSettings:
        keys = cls.__dataclass_fields__
        return cls(**{k: v for k, v in settings.items() if k in keys})


def pool(hidden: torch.Tensor, mask: torch.Tensor, how: str) -> torch.Tensor:
    """``hidden`` (B x T x D) pooled over the tokens ``mask`` (B x T) keeps: mean, cls or max."""
    if how == "cls":
        return hidden[:, 0]
    keep = mask.unsqueeze(-1).to(hidden.dtype)
    if how == "max":
        return hidden.masked_fill(keep == 0, torch.finfo(hidden.dtype).min).amax(dim=1)
    return (hidden * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1e-9)


def last_hidden(output: Any) -> torch.Tensor:
    """The last hidden states of a forward pass's output (a bare encoder's ``last_hidden_state``, else the last of
    ``hidden_states``)."""
    hidden = getattr(output, "last_hidden_state", None)
    if hidden is None and isinstance(output, Mapping):
        hidden = output.get("last_hidden_state")
    if hidden is None:
        states = getattr(output, "hidden_states", None)
        hidden = states[-1] if states else output[0]
    return hidden


def embed(target: Any, texts: Sequence[str], settings: EmbeddingSettings, *, role: str = "query",
          batch_size: int | None = None, progress: Any = None, desc: str = "embed") -> torch.Tensor:
    """Embeddings of ``texts`` (N x D, float32, on the CPU, in input order) as ``settings`` say; ``role``
    (query or passage) picks the prompt prepended to each text."""
    prompt = settings.query_prompt if role == "query" else settings.passage_prompt
    distinct: dict[str, int] = {}
    where = [distinct.setdefault(text, len(distinct)) for text in texts]
    unique = list(distinct)
    if not unique:
        return torch.empty(0, 0)
    inputs = [prompt + (t.lower() if settings.lowercase else t) for t in unique]
    max_length = settings.max_length or target.max_length
    enc = target.tokenizer(inputs, truncation=True, max_length=max_length)
    keys = [k for k in enc.keys() if k in target.input_names]
    rows = [{k: enc[k][i] for k in keys} for i in range(len(inputs))]
    lengths = [len(r["input_ids"]) for r in rows]
    order = sorted(range(len(rows)), key=lambda i: -lengths[i])
    from types import SimpleNamespace

    # the target's own batching: the spec's rows on a CPU, a GPU's token budget (longest first, as
    # sentence-transformers' encode sorts)
    plans = target.plan_batches(SimpleNamespace(rows=rows, lengths=lengths), order, batch_size)
    progress = progress if progress is not None else active_progress()
    batches: Any = plans
    if progress is not None:
        batches = progress(plans, total=len(plans), desc=desc)
    out: torch.Tensor | None = None
    with torch.inference_mode():
        for idx in batches:
            batch = target.collate([rows[i] for i in idx])
            hidden = last_hidden(target.forward(batch)).float()
            pooled = pool(hidden, batch["attention_mask"], settings.pooling)
            if settings.normalize:
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
            if out is None:
                out = torch.empty(len(rows), pooled.shape[-1])
            out[torch.tensor(idx)] = pooled.cpu()
    assert out is not None
    return out[torch.tensor(where)]


def cached_embed(target: Any, texts: Sequence[str], settings: EmbeddingSettings, *, role: str, key: str,
                 **kwargs: Any) -> torch.Tensor:
    """``embed``, kept in the run's cache under (model, settings, role, ``key``: the texts' fingerprint): a corpus is
    embedded once per model however many probes search it."""
    cache = getattr(target, "encode_cache", None)
    if cache is None:
        return embed(target, texts, settings, role=role, **kwargs)
    name = ("embeddings", target.spec, settings, role, key)
    if name not in cache:
        cache[name] = embed(target, texts, settings, role=role, **kwargs)
    return cache[name]


def scores(queries: torch.Tensor, documents: torch.Tensor, similarity: str = "cosine") -> torch.Tensor:
    """Similarity of each query to each document (Q x C): cosine, or the dot product."""
    if similarity == "cosine":
        queries = torch.nn.functional.normalize(queries, p=2, dim=1)
        documents = torch.nn.functional.normalize(documents, p=2, dim=1)
    return queries @ documents.T


def search(queries: torch.Tensor, documents: torch.Tensor, k: int, similarity: str = "cosine",
           chunk: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` best documents of each query, exactly: (indices Q x k, scores Q x k), best first; queries in
    chunks of ``chunk`` rows so that Q x C scores never sit in memory at once."""
    k = min(k, documents.shape[0])
    if similarity == "cosine":
        documents = torch.nn.functional.normalize(documents, p=2, dim=1)
    found, best = [], []
    for start in range(0, queries.shape[0], chunk):
        part = queries[start:start + chunk]
        if similarity == "cosine":
            part = torch.nn.functional.normalize(part, p=2, dim=1)
        values, indices = torch.topk(part @ documents.T, k, dim=1)
        found.append(indices)
        best.append(values)
    if not found:
        return torch.empty(0, k, dtype=torch.long), torch.empty(0, k)
    return torch.cat(found), torch.cat(best)


def ranks(queries: torch.Tensor, documents: torch.Tensor, targets: Sequence[int], similarity: str = "cosine",
          chunk: int = 1024) -> torch.Tensor:
    """The 1-based rank of document ``targets[i]`` for query ``i`` among all documents (a tie is in its favour)."""
    out = []
    for start in range(0, queries.shape[0], chunk):
        s = scores(queries[start:start + chunk], documents, similarity)
        idx = torch.tensor(list(targets[start:start + chunk]), dtype=torch.long)
        own = s.gather(1, idx.unsqueeze(1))
        out.append((s > own).sum(dim=1) + 1)
    return torch.cat(out) if out else torch.empty(0, dtype=torch.long)
