"""What an attack on a bi-encoder wants from its embeddings: to lie close to a point (HotFlip on similarity).

A bi-encoder scores a (query, passage) pair by the cosine or dot product of their embeddings, so the attacks on it
maximise a similarity (Zhong et al. 2023, "Poisoning Retrieval Corpora by Injecting Adversarial Passages", EMNLP):

* ``CentroidGoal``: a passage's embedding pulled toward a set of queries. The mean cosine of a passage ``p`` to the
  queries ``q_i`` is ``n(p) . mean_i n(q_i)`` (``n``: unit length) and the mean dot product is ``p . mean_i q_i``,
  so one precomputed vector (``toward``) makes the mean over every attack query exact in a single row.
* ``DocumentGoal``: each (triggered) query pulled toward one document of the corpus; ``hit`` is exact: the document
  ranks within the query's ``top_k`` of the corpus.

``EmbeddingOutputs`` turns a forward pass into those embeddings exactly as ``tasks.embeddings.embed`` does (pooled
last hidden states, maybe normalised), with gradients, for ``hotflip.TriggerScorer.outputs``. The objective is the
attacker's loss: minus the similarity (the scorer minimises it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from bertprobe.tasks.embeddings import EmbeddingSettings, last_hidden, pool


def embedding_outputs(model: Any, batch: dict[str, torch.Tensor], settings: EmbeddingSettings) -> torch.Tensor:
    """The embedding of each row of ``batch`` (rows x D, float32), with gradients when they are enabled."""
    hidden = last_hidden(model(**batch)).float()
    pooled = pool(hidden, batch["attention_mask"], settings.pooling)
    return F.normalize(pooled, p=2, dim=1) if settings.normalize else pooled


def centroid(queries: torch.Tensor, similarity: str) -> torch.Tensor:
    """The vector whose product with a passage's (unit, for cosine) embedding is its mean similarity to ``queries``."""
    if similarity == "cosine":
        queries = F.normalize(queries.float(), p=2, dim=1)
    return queries.float().mean(0)


def similarity_to(embeddings: torch.Tensor, toward: torch.Tensor, similarity: str) -> torch.Tensor:
    """Each row's similarity term against ``toward`` (``centroid``'s vector, or a document's embedding, unit length
    for cosine)."""
    rows = F.normalize(embeddings.float(), p=2, dim=-1) if similarity == "cosine" else embeddings.float()
    return rows @ toward.to(rows.device)


@dataclass(frozen=True)
class CentroidGoal:
    """A passage pulled toward the attack queries: the objective is minus its mean similarity to them. ``hit`` is
    never true: a passage has no per-row goal that ends its search (it stops after its iterations)."""

    toward: torch.Tensor  # centroid(attack queries)
    similarity: str = "cosine"

    def objective(self, embeddings: torch.Tensor, rows: object = None) -> torch.Tensor:
        return -similarity_to(embeddings, self.toward, self.similarity)

    def hit(self, embeddings: torch.Tensor, rows: object = None) -> torch.Tensor:
        return torch.zeros(embeddings.shape[0], dtype=torch.bool)


@dataclass(frozen=True)
class DocumentGoal:
    """Queries pulled toward corpus document ``index``: the objective is minus each query's similarity to it; a
    query is hit when the document ranks within its ``top_k`` of ``documents`` (the corpus's embeddings; ties in
    the document's favour)."""

    documents: torch.Tensor  # C x D, the corpus
    index: int
    top_k: int = 10
    similarity: str = "cosine"

    @property
    def toward(self) -> torch.Tensor:
        doc = self.documents[self.index].float()
        return F.normalize(doc, p=2, dim=0) if self.similarity == "cosine" else doc

    def objective(self, embeddings: torch.Tensor, rows: object = None) -> torch.Tensor:
        return -similarity_to(embeddings, self.toward, self.similarity)

    def hit(self, embeddings: torch.Tensor, rows: object = None) -> torch.Tensor:
        docs = F.normalize(self.documents.float(), p=2, dim=1) if self.similarity == "cosine" else self.documents.float()
        rows_ = F.normalize(embeddings.float(), p=2, dim=1) if self.similarity == "cosine" else embeddings.float()
        scores = rows_ @ docs.T.to(rows_.device)
        own = scores[:, self.index : self.index + 1]
        return (scores > own).sum(1).cpu() < self.top_k
