"""Sentence embeddings (a bi-encoder, sentence-transformers' kind): a text becomes one vector, and a query's
relevant documents are those whose vectors lie closest.

Detected from sentence-transformers' layout (``modules.json`` naming a ``Pooling`` module beside the model's
``config.json``): the pooling from ``1_Pooling/config.json``, normalisation from a ``Normalize`` module, the maximum
length and lower-casing from ``sentence_bert_config.json``, prompts and the similarity from
``config_sentence_transformers.json``. Any encoder may be read as one with ``task: sentence-embedding`` and
``model.options`` (``pooling: mean | cls | max``, ``normalize``, ``max_length``, ``query_prompt``,
``passage_prompt``: E5's ``"query: "`` and ``"passage: "``, ``similarity: cosine | dot``), which also override
the layout's. The forward passes are bertprobe's own (``tasks.embeddings``).

Data: BEIR folders (queries judged against a corpus: ``data.beir``), whose predictions are each query's ranked
documents, or pairs with a gold similarity (``text``, ``text_pair``, ``label``: STS-B's ``sentence1``,
``sentence2``, ``score``), whose predictions are each pair's similarity.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from bertprobe.data.dataset import Dataset, DataSpec
from bertprobe.errors import DataError, RowProblems, TargetError
from bertprobe.tasks.embeddings import POOLINGS, SIMILARITIES, EmbeddingSettings
from bertprobe.tasks.base import Task
from bertprobe.tasks.retrieval_metrics import DEPTH

DEFAULTS: dict[str, Any] = {"pooling": "mean", "normalize": False, "max_length": None, "lowercase": False,
                            "query_prompt": "", "passage_prompt": "", "similarity": "cosine", "depth": DEPTH}
DATA_OPTIONS = ("unjudged",)  # data.options BEIR data take


def st_modules(path: str | Path | None) -> list[dict[str, Any]] | None:
    """The modules of a sentence-transformers folder (``modules.json``), or None when ``path`` holds none."""
    if not path:
        return None
    file = Path(path).expanduser() / "modules.json"
    if not file.is_file() and not Path(path).expanduser().exists() and str(path).count("/") == 1:
        file = _cached_hub_file(str(path), "modules.json") or file  # a hub id: its layout as cached, never fetched
    if not file.is_file():
        return None
    try:
        modules = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TargetError(f"'{file}' is not readable JSON ({type(exc).__name__}); sentence-transformers' layout "
                          "lists its modules there") from None
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise TargetError(f"'{file}' is not a list of modules (sentence-transformers' layout)")
    return modules


def _cached_hub_file(repo: str, name: str) -> Path | None:
    """A hub model's file as the local cache holds it (None when it does not: nothing is downloaded here)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    found = try_to_load_from_cache(repo, name)
    return Path(found) if isinstance(found, str) else None


def _json(file: Path) -> dict[str, Any]:
    try:
        value = json.loads(file.read_text(encoding="utf-8")) if file.is_file() else {}
    except (OSError, ValueError) as exc:
        raise TargetError(f"'{file}' is not readable JSON ({type(exc).__name__})") from None
    return value if isinstance(value, dict) else {}


def layout_settings(path: str | Path) -> dict[str, Any]:
    """What a sentence-transformers folder says of its embeddings: pooling, normalisation, maximum length,
    lower-casing, prompts and similarity."""
    folder = Path(path).expanduser()
    modules = st_modules(path) or []
    if not folder.is_dir() and modules:  # a hub id: its files are in the cache, beside its modules.json
        folder = Path(_cached_hub_file(str(path), "modules.json")).parent  # type: ignore[arg-type]
    out: dict[str, Any] = {}
    kinds = {str(m.get("type", "")).rsplit(".", 1)[-1]: m for m in modules}
    transformer = kinds.get("Transformer")
    if transformer is not None and str(transformer.get("path") or "") not in ("", "."):
        raise TargetError(f"'{folder}' keeps its encoder in {transformer['path']}/ (an older sentence-transformers "
                          f"layout); pass --model {folder / str(transformer['path'])} and set task: sentence-embedding "
                          "with model.options (pooling, normalize)")
    if "Pooling" in kinds:
        pooling = _json(folder / str(kinds["Pooling"].get("path") or "1_Pooling") / "config.json")
        modes = [mode for key, mode in (("pooling_mode_mean_tokens", "mean"), ("pooling_mode_cls_token", "cls"),
                                        ("pooling_mode_max_tokens", "max")) if pooling.get(key)]
        other = [k for k in ("pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
                             "pooling_mode_lasttoken") if pooling.get(k)]
        if other or len(modes) > 1:
            raise TargetError(f"'{folder}': pooling {', '.join(other + modes)} is not one bertprobe computes (it pools "
                              "by mean, cls or max); set model.options.pooling to the one to audit")
        if modes:
            out["pooling"] = modes[0]
    out["normalize"] = "Normalize" in kinds
    unknown = sorted(set(kinds) - {"Transformer", "Pooling", "Normalize"})
    if unknown:
        raise TargetError(f"'{folder}' has sentence-transformers modules {', '.join(unknown)}, which bertprobe does not "
                          "compute (it reads Transformer, Pooling and Normalize); audit the encoder with "
                          "task: sentence-embedding and model.options")
    bert = _json(folder / "sentence_bert_config.json")
    if isinstance(bert.get("max_seq_length"), int):
        out["max_length"] = bert["max_seq_length"]
    if bert.get("do_lower_case"):
        out["lowercase"] = True
    st = _json(folder / "config_sentence_transformers.json")
    prompts = st.get("prompts") if isinstance(st.get("prompts"), dict) else {}
    if isinstance(prompts.get("query"), str):
        out["query_prompt"] = prompts["query"]
    for name in ("passage", "document", "corpus"):
        if isinstance(prompts.get(name), str):
            out["passage_prompt"] = prompts[name]
            break
    if st.get("similarity_fn_name") in SIMILARITIES:
        out["similarity"] = st["similarity_fn_name"]
    elif st.get("similarity_fn_name") not in (None, ""):
        raise TargetError(f"'{folder}': similarity {st['similarity_fn_name']} is not one bertprobe computes "
                          f"({', '.join(SIMILARITIES)}); set model.options.similarity")
    return out


def check_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings checked, each problem a one-line DataError naming ``model.options.KEY``."""
    out = dict(settings)
    if out["pooling"] not in POOLINGS:
        raise DataError(f"model.options.pooling: '{out['pooling']}' is not one of {', '.join(POOLINGS)}")
    if out["similarity"] not in SIMILARITIES:
        raise DataError(f"model.options.similarity: '{out['similarity']}' is not one of {', '.join(SIMILARITIES)}")
    for key in ("normalize", "lowercase"):
        if not isinstance(out[key], bool):
            raise DataError(f"model.options.{key}: must be true or false, not {out[key]!r}")
    for key in ("query_prompt", "passage_prompt"):
        if not isinstance(out[key], str):
            raise DataError(f"model.options.{key}: must be a string (a prefix such as 'query: '), not {out[key]!r}")
    for key in ("max_length", "depth"):
        value = out[key]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise DataError(f"model.options.{key}: must be a positive whole number, not {value!r}")
    return out


@dataclass(frozen=True)
class Ranked:
    """Each query's ``depth`` best documents of the corpus, best first: corpus indices and their scores."""

    indices: Any  # Q x depth, long
    scores: Any  # Q x depth, float32
    corpus: Any  # data.beir.Corpus

    def ids(self, i: int) -> list[str]:
        """Query ``i``'s ranked document ids (a reranked list shorter than the widest is padded with -1)."""
        return [self.corpus.ids[j] for j in self.indices[i].tolist() if j >= 0]


@dataclass(frozen=True)
class PairScores:
    """A similarity per (text, text_pair) example."""

    scores: Any  # N, float32


def judgements(label: Any) -> dict[str, int]:
    """A query's judgements as a mapping, document id -> grade."""
    return {str(d): int(g) for d, g in label}


def relevant_indices(data: Dataset) -> list[list[int]]:
    """Each query's relevant documents (grade >= 1) as corpus indices."""
    index = data.corpus.index
    return [[index[d] for d, g in ex.label if g >= 1 and d in index] for ex in data.examples]


@dataclass(frozen=True)
class SentenceEmbedding(Task):
    """A bi-encoder: pooled (maybe normalised) last hidden states; predictions are rankings or similarities."""

    settings: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULTS))
    name: ClassVar[str] = "sentence-embedding"
    description: ClassVar[str] = "bi-encoder: sentence embeddings for retrieval (nDCG, MRR, recall) and similarity"
    model_class: ClassVar[str] = "AutoModel"
    capabilities: ClassVar[frozenset[str]] = frozenset({"predictions", "embeddings"})
    priority: ClassVar[int] = 5  # before the bare encoder it also is
    listed_probes_only: ClassVar[bool] = True  # rankings are no classes: a probe must be written for them
    own_predictions: ClassVar[bool] = True
    ranks_texts: ClassVar[bool] = True
    option_keys: ClassVar[frozenset[str]] = frozenset(DEFAULTS)
    # what its scores are not: a similarity is no probability that comes true or not
    lacks: ClassVar[Mapping[str, str]] = {"probabilities": "its scores are similarities, not probabilities of a "
                                                           "class that come true or not",
                                          "mlm": "no masked-LM head: a bi-encoder is trained without one (give the "
                                                 "masked LM it was trained from)"}

    @classmethod
    def detect(cls, config: Any) -> bool:
        modules = st_modules(getattr(config, "name_or_path", None))
        return bool(modules) and any(str(m.get("type", "")).endswith(".Pooling") for m in modules)

    @classmethod
    def bind(cls, config: Any, options: Mapping[str, Any] | None = None) -> Task:
        settings = dict(DEFAULTS)
        path = getattr(config, "name_or_path", None)
        if st_modules(path):
            settings |= layout_settings(path)
        given = {k: v for k, v in (options or {}).items() if k in DEFAULTS and v is not None}
        if (options or {}).get("model.max_length") is not None and "max_length" not in given:
            given["max_length"] = options["model.max_length"]  # type: ignore[index]
        settings |= given
        return cls(settings=check_settings(settings))

    @property
    def embedding(self) -> EmbeddingSettings:
        return EmbeddingSettings.of(self.settings)

    # ---- data ----------------------------------------------------------------------------------
    def read_labels(self, data: Dataset, spec: DataSpec, model: str) -> Dataset:
        """BEIR data pass as read (``data.beir`` checked them); pairs need a second text and a numeric gold score
        (``read_texts``)."""
        return read_texts(data, spec, DEFAULTS)

    def gold(self, data: Dataset) -> Any:
        import torch

        if data.corpus is not None:
            raise self._unsupported("class gold (its gold are judgements: tasks.sentence_embedding.judgements)")
        return torch.tensor([float(ex.label) for ex in data.examples])  # type: ignore[arg-type]

    # ---- predictions ---------------------------------------------------------------------------
    def predict_data(self, target: Any, data: Dataset, batch_size: int | None = None, progress: Any = None) -> Any:
        """Rankings of the corpus (BEIR data) or a similarity per pair."""
        from bertprobe.data.prepare import fingerprint
        from bertprobe.tasks.embeddings import cached_embed, search

        settings = self.embedding
        if data.corpus is not None:
            documents = corpus_embeddings(target, data.corpus, settings, batch_size, progress)
            queries = cached_embed(target, [ex.text for ex in data.examples], settings, role="query",
                                   key=fingerprint(data), batch_size=batch_size, progress=progress, desc="queries")
            indices, scores = search(queries, documents, int(self.settings["depth"]), settings.similarity)
            return Ranked(indices, scores, data.corpus)
        return PairScores(pair_similarity(target, [ex.text for ex in data.examples],
                                          [ex.text_pair or "" for ex in data.examples], settings, batch_size, progress))


def read_texts(data: Dataset, spec: DataSpec, settings: Mapping[str, Any]) -> Dataset:
    """What a model that ranks texts reads: BEIR data as read (``data.beir`` checked them), or pairs with a second
    text and a numeric gold score, every bad row named at once; ``data.options`` other than ``DATA_OPTIONS`` are
    refused (one of the model's ``settings`` is pointed to ``model.options``). A treebank (words, no labels) passes
    unchanged: encoder-level probes (syntax-heads, attention-audit) read the model's encoder on its sentences."""
    from dataclasses import replace

    if data.corpus is None and data.examples and all(ex.words is not None and ex.label is None
                                                     for ex in data.examples):
        return data
    for key in spec.options:
        if key not in DATA_OPTIONS:
            raise DataError(f"data.options.{key}: retrieval data take one option, unjudged (refuse or drop)"
                            + (f"; {key} is a setting of the model: set model.options.{key}" if key in settings else ""))
    if data.corpus is not None:
        return data
    rows = RowProblems()
    out = []
    for i, ex in enumerate(data.examples):
        if ex.text_pair is None:
            rows.add(f"{data.where(i)} has no second text: similarity data are pairs (text, text_pair, score: "
                     "STS-B's sentence1, sentence2, score); retrieval data are a BEIR folder")
            continue
        if ex.label is None:
            out.append(ex)
            continue
        try:
            value = float(ex.label)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            rows.add(f"{data.where(i)}: score '{ex.label}' is no number (a gold similarity)")
            continue
        if value != value:
            rows.add(f"{data.where(i)}: score is NaN")
            continue
        out.append(replace(ex, label=value))
    rows.raise_if_any()
    return replace(data, examples=out)


def corpus_embeddings(target: Any, corpus: Any, settings: EmbeddingSettings, batch_size: int | None = None,
                      progress: Any = None) -> Any:
    """The corpus's embeddings, once per model in a run (cached by the corpus's fingerprint)."""
    from bertprobe.tasks.embeddings import cached_embed

    texts = [corpus.passage(i) for i in range(len(corpus))]
    return cached_embed(target, texts, settings, role="passage", key=corpus.fingerprint, batch_size=batch_size,
                        progress=progress, desc="corpus")


def pair_similarity(target: Any, first: Sequence[str], second: Sequence[str], settings: EmbeddingSettings,
                    batch_size: int | None = None, progress: Any = None) -> Any:
    """The similarity of each pair (both sides read as queries: a symmetric task such as STS)."""
    import torch

    from bertprobe.tasks.embeddings import embed

    both = embed(target, list(first) + list(second), settings, role="query", batch_size=batch_size,
                 progress=progress, desc="pairs")
    a, b = both[: len(first)], both[len(first):]
    if settings.similarity == "cosine":
        return torch.nn.functional.cosine_similarity(a, b, dim=1)
    return (a * b).sum(dim=1)
