"""A reranker (a cross-encoder, Nogueira & Cho 2019): one relevance score per (query, passage) pair, read
jointly.

A sequence classifier with one output; detected from sentence-transformers' ``CrossEncoder`` layout (its
``config.json`` carries a ``sentence_transformers`` entry), else named with ``task: reranker``. The score is the
logit (a sigmoid would not change any ranking). On BEIR data a reranker reorders a first stage's ranked list:
``model.options.first_stage`` names a bi-encoder folder (its top ``depth`` documents, 100 by default) or a run
file (TREC's ``query Q0 document rank score tag`` lines); on pairs, it scores each pair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from bertprobe.data.dataset import Dataset, DataSpec, Example
from bertprobe.errors import DataError, RowProblems
from bertprobe.tasks.base import Task
from bertprobe.tasks.classification import has_head
from bertprobe.tasks.retrieval_metrics import DEPTH
from bertprobe.tasks.sentence_embedding import PairScores, Ranked, read_texts

DEFAULTS: dict[str, Any] = {"first_stage": None, "depth": DEPTH, "max_length": None}


def read_run(path: Path, corpus: Any, queries: Sequence[str], depth: int) -> dict[str, list[str]]:
    """A TREC run file's ranked documents per query (by score, best first, cut at ``depth``); every problem at once."""
    from bertprobe.data.dataset import check_text_file

    rows = RowProblems()
    found: dict[str, list[tuple[float, str]]] = {}
    wanted = set(queries)
    for number, line in enumerate(check_text_file(path).splitlines(), start=1):
        cells = line.split()
        if not cells:
            continue
        if len(cells) != 6:
            rows.add(f"line {number} of {path.name}: {len(cells)} fields, not 6 (query Q0 document rank score tag)")
            continue
        query, _, doc, _, score, _ = cells
        try:
            value = float(score)
        except ValueError:
            rows.add(f"line {number} of {path.name}: score '{score}' is no number")
            continue
        if doc not in corpus.index:
            rows.add(f"line {number} of {path.name}: document '{doc}' is not in the corpus")
            continue
        if query in wanted:
            found.setdefault(query, []).append((value, doc))
    rows.raise_if_any()
    missing = [q for q in queries if q not in found]
    if missing:
        raise DataError(f"'{path}' ranks no document for {len(missing)} of the {len(queries)} queries (first: "
                        f"{', '.join(missing[:3])}); give a run over every query")
    return {q: [d for _, d in sorted(found[q], key=lambda x: (-x[0], x[1]))[:depth]] for q in queries}


@dataclass(frozen=True)
class Reranker(Task):
    """A cross-encoder: ``…ForSequenceClassification`` with one output, the relevance of a (query, passage) pair."""

    settings: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULTS))
    name: ClassVar[str] = "reranker"
    description: ClassVar[str] = "cross-encoder: a relevance score per (query, passage), reranking a first stage"
    model_class: ClassVar[str] = "AutoModelForSequenceClassification"
    capabilities: ClassVar[frozenset[str]] = frozenset({"predictions", "pair-scores"})
    priority: ClassVar[int] = 5
    listed_probes_only: ClassVar[bool] = True
    own_predictions: ClassVar[bool] = True
    ranks_texts: ClassVar[bool] = True
    option_keys: ClassVar[frozenset[str]] = frozenset(DEFAULTS)
    lacks: ClassVar[Mapping[str, str]] = {"probabilities": "its scores are relevance scores, not probabilities of a "
                                                           "class that come true or not"}

    @classmethod
    def detect(cls, config: Any) -> bool:
        return has_head(config, "ForSequenceClassification") and getattr(config, "num_labels", 2) == 1 \
            and getattr(config, "sentence_transformers", None) is not None

    @classmethod
    def bind(cls, config: Any, options: Mapping[str, Any] | None = None) -> Task:
        settings = dict(DEFAULTS) | {k: v for k, v in (options or {}).items() if k in DEFAULTS and v is not None}
        if getattr(config, "num_labels", 1) != 1:
            from bertprobe.errors import TargetError

            raise TargetError(f"a reranker has one output (a relevance score); this model has {config.num_labels} "
                              "classes: drop task: reranker, or give a cross-encoder")
        depth = settings["depth"]
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise DataError(f"model.options.depth: must be a positive whole number, not {depth!r}")
        first = settings["first_stage"]
        if first is not None and not isinstance(first, str):
            raise DataError(f"model.options.first_stage: must be a path (a bi-encoder folder or a TREC run file), "
                            f"not {first!r}")
        return cls(settings=settings)

    def read_labels(self, data: Dataset, spec: DataSpec, model: str) -> Dataset:
        """BEIR data need a first stage to rerank; pairs need a second text (``sentence_embedding.read_texts``)."""
        if data.corpus is not None and not self.settings.get("first_stage"):
            raise DataError(f"{model} is a reranker, which reorders a first stage's list: set "
                            "model.options.first_stage to a bi-encoder folder or a TREC run file")
        return read_texts(data, spec, DEFAULTS)

    def first_stage(self, data: Dataset, target: Any, batch_size: int | None, progress: Any) -> list[list[str]]:
        """Each query's first-stage documents, best first (a bi-encoder's search, or the run file's)."""
        path = Path(str(self.settings["first_stage"])).expanduser()
        depth = int(self.settings["depth"])
        if path.is_file():
            run = read_run(path, data.corpus, [ex.id for ex in data.examples], depth)
            return [run[ex.id] for ex in data.examples]
        if not path.is_dir():
            raise DataError(f"model.options.first_stage: '{path}' is neither a bi-encoder folder nor a run file")
        if target.load_companion is None:
            raise DataError(f"model.options.first_stage: {target.name} was loaded without a way to load its first stage "
                            "(Target.load_companion); give a TREC run file instead")
        encoder = target.load_companion(path=str(path), task="sentence-embedding", device=target.spec.device,
                                        options={"depth": depth})
        if encoder.encode_cache is None:
            encoder.encode_cache = target.encode_cache
        ranked = encoder.task.predict_data(encoder, data, batch_size, progress)
        return [ranked.ids(i) for i in range(len(data.examples))]

    def predict_data(self, target: Any, data: Dataset, batch_size: int | None = None, progress: Any = None) -> Any:
        """The first stage's lists reordered by the cross-encoder's scores (BEIR data), or a score per pair."""
        import torch

        if data.corpus is None:
            return PairScores(pair_scores(target, [(ex.text, ex.text_pair or "") for ex in data.examples], batch_size,
                                          progress))
        lists = self.first_stage(data, target, batch_size, progress)
        pairs = [(ex.text, data.corpus.passage(data.corpus.index[d])) for ex, docs in zip(data.examples, lists)
                 for d in docs]
        flat = pair_scores(target, pairs, batch_size, progress)
        width = max(len(docs) for docs in lists)
        indices = torch.full((len(lists), width), -1, dtype=torch.long)
        scores = torch.full((len(lists), width), float("-inf"))
        at = 0
        for i, docs in enumerate(lists):
            part = flat[at:at + len(docs)]
            at += len(docs)
            order = torch.argsort(part, descending=True, stable=True)
            indices[i, : len(docs)] = torch.tensor([data.corpus.index[docs[j]] for j in order.tolist()])
            scores[i, : len(docs)] = part[order]
        return Ranked(indices, scores, data.corpus)


def pair_scores(target: Any, pairs: Sequence[tuple[str, str]], batch_size: int | None = None,
                progress: Any = None) -> Any:
    """The cross-encoder's score (its one logit) of each (query, passage) pair."""
    examples = [Example(text=q, text_pair=p) for q, p in pairs]
    return target.logits(target.encode(examples, cache=False), batch_size, progress)[:, 0]
