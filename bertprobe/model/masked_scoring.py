"""Masked-LM scoring that several probes share: log-probabilities of a sentence's own tokens, each read at a
masked position, in packed batches.

* ``pll``: the pseudo-log-likelihood (Salazar et al. 2020, "Masked Language Model Scoring"): every token but the
  special ones is masked in turn and its log-probability read; a sentence's PLL is their sum.
  ``metric="within_word_l2r"`` is Kauf & Ivanova 2023's PLL-word-l2r: a token is read with the later tokens of
  its own word masked too, so a word split in pieces is not scored from its own remainder.
* ``token_logprobs``: the same reading for any (sequence, masked positions, scored position) queries, e.g.
  CrowS-Pairs' shared tokens (Nangia et al. 2020).
* ``top_tokens``: the most probable vocabulary tokens at one masked position (fill-in proposals).

How it is fast: a query is one row (its sequence with its positions masked); identical rows run once; rows are
sorted by length and packed into batches of at most ``batch_tokens`` padded tokens, so every masked copy of a
sentence shares a batch with its siblings and with sentences of its length; the vocabulary projection (the
costliest layer of a small MLM: 384 x 30,522 per position) runs at the scored position of each row only, and so
does BERT's last layer (BERT, RoBERTa, ELECTRA: its queries, attention output and feed-forward; keys and values at
every position), about 11% of a MiniLM-L6 row's work on one thread. A bidirectional encoder has no unmasked prefix
to reuse past its embeddings: a mask changes every position's attention from the first layer on, so nothing else
is recomputed needlessly. ``batch_tokens`` 2048 measured best on 2 cores (benchmarks/mlm_scoring.py); the batch
building is under 1% of the time. The gold log-probabilities are read 32 rows at a time into reused buffers
(``GoldLogprobs``), and on a CPU the C heap keeps freed batch-sized memory (``heap.keep_freed_memory``): fresh
multi-megabyte allocations, mapped and zeroed page by page, had cost a bfloat16 pass about a tenth of its time.

``precision="bfloat16"`` runs the forward passes under bfloat16 autocast (matrix products in bfloat16, layer norms,
softmax, the MLM head's transform and the log-probabilities in float32): 2.3-3x faster on a 2-core CPU that
computes bfloat16 natively (AVX-512 BF16), with a pair's PLL margin off by up to about 0.02 nats on a MiniLM-L6
(``benchmarks/mlm_scoring.py``);
``"auto"`` picks it only where the device computes it natively. The default, ``"model"``, computes in the dtype the
model was loaded in (float32 on a CPU): the figures that equal minicons'. The probes that decide by a comparison
(``blimp``, ``crows-pairs``) re-check the near ties in the model's own precision (``near_ties``), which must then be
float32.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from bertprobe.errors import ProbeError
from bertprobe.model.bfloat16_copy import bfloat16_linears, head_transform_linears  # noqa: F401 (re-exported)
from bertprobe.model.budgets import pack_by_length
from bertprobe.model.heap import keep_freed_memory

PLL_METRICS = ("original", "within_word_l2r")
PRECISIONS = ("model", "bfloat16", "auto")  # the model's own dtype; bfloat16 autocast; bfloat16 where native

Query = tuple[tuple[int, ...], int]  # (positions masked, position scored); the scored one is among the masked


@dataclass(frozen=True)
class EncodedText:
    """A text as the masked LM reads it: token ids with the special tokens, the word each token belongs to
    (None for a special token) and which tokens are special."""

    text: str
    ids: tuple[int, ...]
    word_ids: tuple[int | None, ...]
    special: tuple[bool, ...]

    def scored_positions(self) -> list[int]:
        """Every position a PLL reads: all but the special tokens."""
        return [i for i, s in enumerate(self.special) if not s]


def encode_texts(tokenizer: Any, texts: Sequence[str]) -> list[EncodedText]:
    """Each text with the model's special tokens ([CLS] ... [SEP], <s> ... </s>), word ids where the tokenizer
    gives them (a fast tokenizer; a slow one gives None for every token)."""
    distinct = list(dict.fromkeys(texts))
    backend = getattr(tokenizer, "backend_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
    out: dict[str, EncodedText] = {}
    if backend is not None and backend.truncation is None:
        # a tokenizer called with padding= keeps that setting in its backend: the padding is cut off here
        for text, e in zip(distinct, backend.encode_batch(distinct, add_special_tokens=True)):
            kept = [i for i, a in enumerate(e.attention_mask) if a]  # either side's padding
            out[text] = EncodedText(text, tuple(e.ids[i] for i in kept), tuple(e.word_ids[i] for i in kept),
                                    tuple(bool(e.special_tokens_mask[i]) for i in kept))
    elif getattr(tokenizer, "is_fast", False):
        batch = tokenizer(distinct, add_special_tokens=True, padding=False, truncation=False,
                          return_special_tokens_mask=True)
        for i, text in enumerate(distinct):
            out[text] = EncodedText(text, tuple(batch["input_ids"][i]), tuple(batch.word_ids(i)),
                                    tuple(bool(s) for s in batch["special_tokens_mask"][i]))
    else:  # the positions the tokenizer adds around the text are special, never an [UNK] of the text itself
        for text in distinct:
            ids = tuple(tokenizer(text, add_special_tokens=True)["input_ids"])
            start, end = _content_span(ids, list(tokenizer(text, add_special_tokens=False)["input_ids"]))
            out[text] = EncodedText(text, ids, (None,) * len(ids), tuple(not start <= i < end for i in range(len(ids))))
    return [out[t] for t in texts]


def _content_span(ids: Sequence[int], plain: Sequence[int]) -> tuple[int, int]:
    """Where the text's own tokens ``plain`` sit in ``ids`` (the text with its special tokens)."""
    for start in range(len(ids) - len(plain) + 1):
        if list(ids[start : start + len(plain)]) == list(plain):
            return start, start + len(plain)
    raise ProbeError("the tokenizer's special tokens do not wrap the text's own tokens; use a fast tokenizer")


def pll_queries(encoded: EncodedText, metric: str = "original") -> list[Query]:
    """The masked readings of a PLL: one per non-special token; ``within_word_l2r`` also masks the later tokens
    of the same word (Kauf & Ivanova 2023)."""
    if metric not in PLL_METRICS:
        raise ProbeError(f"unknown PLL metric '{metric}'; known: {', '.join(PLL_METRICS)}")
    positions = encoded.scored_positions()
    if metric == "original":
        return [((p,), p) for p in positions]
    if positions and all(w is None for w in encoded.word_ids):
        raise ProbeError("PLL metric 'within_word_l2r' needs a fast tokenizer (word ids); this one gives none")
    out = []
    for p in positions:
        word = encoded.word_ids[p]
        later = [j for j in range(p + 1, len(encoded.ids)) if word is not None and encoded.word_ids[j] == word
                 and not encoded.special[j]]
        out.append(((p, *later), p))
    return out


@dataclass(frozen=True)
class SentenceScore:
    """A sentence's PLL and the log-probability of each scored token (in order)."""

    text: str
    total: float
    tokens: tuple[str, ...]
    logprobs: tuple[float, ...]


class MaskedScorer:
    """Reads token log-probabilities at masked positions of a masked-LM ``target`` in packed batches."""

    def __init__(self, target: Any, batch_tokens: int = 2048, max_rows: int = 512,
                 progress: Callable[..., Iterable[Any]] | None = None, precision: str = "model") -> None:
        self.target = target
        self.precision = resolve_precision(precision, target)
        self.tok = target.tokenizer
        problem = mask_token_problem(self.tok)
        if problem:
            raise ProbeError(problem)
        self.batch_tokens = batch_tokens
        self.max_rows = max_rows
        self.progress = progress
        self.passes = 0
        self.rows = 0
        self.forward_seconds = 0.0
        self._reduced: Any = None
        self._gold = GoldLogprobs()

    @property
    def max_length(self) -> int:
        """The longest sequence the model's position embeddings hold."""
        return max_positions(self.target.model)

    def encode(self, texts: Sequence[str]) -> list[EncodedText]:
        return encode_texts(self.tok, texts)

    def computing(self) -> contextlib.AbstractContextManager[Any]:
        """The forward passes' numerics: bfloat16 autocast on the model's device, or nothing (its own dtype)."""
        if self.precision == "bfloat16":
            return torch.autocast(device_type=torch.device(self.target.device).type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    @property
    def model(self) -> Any:
        """The model the passes run: the target's, or with bfloat16 a copy whose linear layers hold bfloat16
        weights (``bfloat16_copy``: autocast then casts no weight per pass; on a CPU oneDNN-reordered products and
        attention with its softmax written out), made once; a model with hooks (an intervention) is run itself
        under autocast."""
        if self.precision != "bfloat16":
            return self.target.model
        if self._reduced is None:
            self._reduced = bfloat16_linears(self.target.model)
        return self._reduced

    def token_logprobs(self, sequences: Sequence[Sequence[int]], queries: Sequence[Sequence[Query]],
                       desc: str = "masked readings") -> list[list[float]]:
        """For each sequence, each query's log P(token at the scored position | the sequence with the query's
        positions masked). Identical (sequence, query) rows are computed once."""
        index: dict[tuple[int, Query], int] = {}
        seq_of: dict[tuple[int, ...], int] = {}
        seqs: list[tuple[int, ...]] = []
        where: list[list[int]] = []
        for ids, qs in zip(sequences, queries):
            key = tuple(ids)
            s = seq_of.get(key)
            if s is None:
                s = seq_of[key] = len(seqs)
                seqs.append(key)
            if len(key) > self.max_length:
                raise ProbeError(f"a sequence of {len(key)} tokens is longer than the model's {self.max_length} "
                                 "positions")
            where.append([index.setdefault((s, (tuple(sorted(q[0])), q[1])), len(index)) for q in qs])
        rows = list(index)
        values = self._run(seqs, rows, desc)
        return [[float(values[r]) for r in rs] for rs in where]

    def _batches(self, seqs: list[tuple[int, ...]], rows: list[tuple[int, Query]]) -> list[list[int]]:
        order = sorted(range(len(rows)), key=lambda r: (len(seqs[rows[r][0]]), rows[r][0]))
        return pack_by_length(order, lambda r: len(seqs[rows[r][0]]),
                              lambda n, width: width * n <= self.batch_tokens and n <= self.max_rows)

    def _run(self, seqs: list[tuple[int, ...]], rows: list[tuple[int, Query]], desc: str) -> torch.Tensor:
        out = torch.empty(len(rows))
        if not rows:
            return out
        pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else 0
        mask_id = self.tok.mask_token_id
        device = self.target.device
        lengths = torch.tensor([len(s) for s in seqs])
        width_all = int(lengths.max())
        table = torch.full((len(seqs), width_all), pad, dtype=torch.long)
        for i, s in enumerate(seqs):
            table[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        batches = self._batches(seqs, rows)
        if torch.device(device).type == "cpu":
            keep_freed_memory()
        steps: Iterable[list[int]] = batches
        if self.progress is not None:
            steps = self.progress(batches, total=len(batches), desc=f"{desc} ({len(rows)} masked rows, in batches)")
        with torch.inference_mode():
            for batch in steps:
                seq_idx = torch.tensor([rows[r][0] for r in batch])
                width = int(lengths[seq_idx].max())
                ids = table[seq_idx, :width].clone()
                attention = (torch.arange(width)[None, :] < lengths[seq_idx][:, None]).long()
                scored = torch.tensor([rows[r][1][1] for r in batch])
                gold = ids[torch.arange(len(batch)), scored].clone()
                mask_rows = [j for j, r in enumerate(batch) for _ in rows[r][1][0]]
                mask_cols = [p for r in batch for p in rows[r][1][0]]
                ids[mask_rows, mask_cols] = mask_id
                started = time.perf_counter()
                with self.computing():
                    logits = masked_logits(self.model, ids.to(device), attention.to(device), scored.to(device))
                out[batch] = self._gold(logits, gold.to(logits.device)).cpu()
                self.forward_seconds += time.perf_counter() - started
                self.passes += 1
                self.rows += len(batch)
        return out

    def pll(self, texts: Sequence[str], metric: str = "original", desc: str = "pseudo-log-likelihood") -> list[SentenceScore]:
        """Each text's PLL (Salazar et al. 2020), or PLL-word-l2r with ``metric="within_word_l2r"``."""
        encoded = self.encode(texts)
        queries = [pll_queries(e, metric) for e in encoded]
        values = self.token_logprobs([e.ids for e in encoded], queries, desc=desc)
        out = []
        for e, qs, vs in zip(encoded, queries, values):
            tokens = tuple(self.tok.convert_ids_to_tokens([e.ids[q[1]] for q in qs]))
            out.append(SentenceScore(e.text, float(sum(vs)), tokens, tuple(vs)))
        return out

    def top_tokens(self, sequences: Sequence[Sequence[int]], positions: Sequence[int], k: int) -> list[list[tuple[int, float]]]:
        """The ``k`` most probable tokens (id, probability) at ``positions[i]`` of ``sequences[i]``, masked there."""
        pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else 0
        out: list[list[tuple[int, float]]] = []
        order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
        found: dict[int, list[tuple[int, float]]] = {}
        step = max(1, self.batch_tokens // max(1, max((len(s) for s in sequences), default=1)))
        with torch.inference_mode():
            for start in range(0, len(order), step):
                chunk = order[start : start + step]
                width = max(len(sequences[i]) for i in chunk)
                ids = torch.tensor([[*sequences[i], *[pad] * (width - len(sequences[i]))] for i in chunk])
                attention = torch.tensor([[1] * len(sequences[i]) + [0] * (width - len(sequences[i])) for i in chunk])
                pos = torch.tensor([positions[i] for i in chunk])
                ids[torch.arange(len(chunk)), pos] = self.tok.mask_token_id
                device = self.target.device
                with self.computing():
                    logits = masked_logits(self.model, ids.to(device), attention.to(device), pos.to(device))
                probs = logits.float().softmax(-1)
                best = probs.topk(min(k, probs.shape[-1]))
                self.passes += 1
                for j, i in enumerate(chunk):
                    found[i] = [(int(t), float(p)) for t, p in zip(best.indices[j], best.values[j])]
        out = [found[i] for i in range(len(sequences))]
        return out


class GoldLogprobs:
    """Reads ``log_softmax(logits)[i, gold[i]]`` for each row ``i``, in float32. On a CPU ``rows`` rows at a time,
    in two float32 buffers kept from call to call: a whole batch's float32 log-probabilities (512 x 30,522 x 4
    bytes) is a fresh allocation that the kernel maps and zeroes page by page: converting and normalising it took
    22-45 ms per 512 rows on 2 cores, as long as the vocabulary projection itself (20 ms) or twice; 6-8 ms in the
    buffers (``docs/benchmarks.md``). Each row's arithmetic is the same either way: the values are identical."""

    def __init__(self, rows: int = 32) -> None:
        self.rows = rows
        self._work: torch.Tensor | None = None

    def __call__(self, logits: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
        if logits.device.type != "cpu":
            return logits.float().log_softmax(-1).gather(1, gold[:, None])[:, 0]
        count, width = logits.shape
        work = self._work
        if work is None or work.shape[-1] != width:
            work = self._work = torch.empty(2, self.rows, width, dtype=torch.float32)
        out = torch.empty(count, dtype=torch.float32)
        for start in range(0, count, self.rows):
            n = min(self.rows, count - start)
            part = logits[start : start + n]
            if part.dtype != torch.float32:
                part = work[0, :n].copy_(part)
            normalised = torch.log_softmax(part, -1, out=work[1, :n])
            out[start : start + n] = normalised.gather(1, gold[start : start + n, None])[:, 0]
        return out


def native_bfloat16(device: Any) -> bool:
    """Whether ``device`` computes bfloat16 matrix products natively: a CPU with AMX or AVX-512 BF16, a CUDA GPU
    that supports it (Ampere and later)."""
    kind = torch.device(device).type
    if kind == "cpu":
        cpu = torch.cpu
        return bool(getattr(cpu, "_is_amx_tile_supported", lambda: False)()
                    or getattr(cpu, "_is_avx512_bf16_supported", lambda: False)())
    if kind == "cuda":  # Ampere (compute capability 8) and later; is_bf16_supported() counts emulation too
        return bool(torch.cuda.is_available() and torch.cuda.get_device_properties(torch.device(device)).major >= 8)
    return False


def precision_spec_problem(precision: str, spec: Any) -> str | None:
    """Why ``precision`` cannot run on the model ``spec`` describes, known before it loads (what
    ``resolve_precision`` would refuse once it has): bfloat16 asked for by name on an ONNX Runtime build or a served
    model, on an ``mps`` device, or with a ``dtype`` other than float32; None when it can, or cannot be told yet."""
    if precision != "bfloat16":
        return None
    if getattr(spec, "endpoint", None) or getattr(spec, "runtime", "torch") == "onnx":
        what = "a served model" if getattr(spec, "endpoint", None) else "an ONNX Runtime build"
        return f"precision 'bfloat16' needs a PyTorch model, and this is {what}; use precision: model or auto"
    if str(getattr(spec, "device", "auto")).startswith("mps"):
        return "precision 'bfloat16' runs on a CPU or a CUDA GPU, not on mps; use precision: model or auto"
    if getattr(spec, "dtype", "auto") in ("float16", "bfloat16"):
        return (f"precision 'bfloat16' re-checks near ties in the model's own precision, which must be float32, not "
                f"dtype: {spec.dtype}; use precision: model, or load the model in float32")
    return None


def resolve_precision(precision: str, target: Any) -> str:
    """``"model"`` or ``"bfloat16"``: what ``precision`` means for ``target`` (``"auto"``: bfloat16 where its
    device computes it natively and the model is a PyTorch one in float32, else the model's own)."""
    if precision not in PRECISIONS:
        raise ProbeError(f"unknown precision '{precision}'; known: {', '.join(PRECISIONS)}")
    if precision == "model":
        return "model"
    model = getattr(target, "model", None)
    torch_model = isinstance(model, torch.nn.Module)
    if precision == "auto":
        first = next(model.parameters(), None) if torch_model else None
        floating32 = first is not None and first.dtype == torch.float32
        return "bfloat16" if floating32 and native_bfloat16(target.device) else "model"
    if not torch_model:
        raise ProbeError("precision 'bfloat16' needs a PyTorch model; this one is not (use precision: model)")
    first = next(model.parameters(), None)
    if first is not None and first.dtype != torch.float32:
        raise ProbeError(f"precision 'bfloat16' re-checks near ties in the model's own precision, which is "
                         f"{str(first.dtype).replace('torch.', '')} here, not float32: load the model in float32 "
                         "(dtype: float32) or use precision: model")
    if torch.device(target.device).type not in ("cpu", "cuda"):
        raise ProbeError(f"precision 'bfloat16' runs on a CPU or a CUDA GPU, not on '{target.device}'; use "
                         "precision: model or auto")
    return "bfloat16"


def mask_token_problem(tokenizer: Any) -> str | None:
    """Why ``tokenizer`` cannot serve masked-LM scoring (it has no mask token), or None."""
    if getattr(tokenizer, "mask_token_id", None) is None:
        return ("its tokenizer has no mask token ([MASK], <mask>), which masked-LM scoring needs; give a masked LM's "
                "folder, or name its mask token in tokenizer_config.json")
    return None


def unknown_words(tokenizer: Any, texts: Sequence[str]) -> dict[str, list[str]]:
    """Each text of ``texts`` that ``tokenizer`` maps in part to its unknown token, with the stretches of text so
    mapped (``{'Grace sees a Ω.': ['Ω']}``): a PLL then scores the unknown token, not the word. Empty for a
    tokenizer without an unknown token (byte-level BPE) or whose offsets it cannot give (a slow one)."""
    unk = getattr(tokenizer, "unk_token_id", None)
    texts = list(dict.fromkeys(texts))
    if unk is None or not texts or not getattr(tokenizer, "is_fast", False):
        return {}
    encoded = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    out: dict[str, list[str]] = {}
    for text, ids, offsets in zip(texts, encoded["input_ids"], encoded["offset_mapping"]):
        spans = [text[a:b] for i, (a, b) in zip(ids, offsets) if i == unk]
        if spans:
            out[text] = spans
    return out


def unknown_token_items(tokenizer: Any, items: Sequence[tuple[str, Sequence[str]]],
                        what: str = "pairs") -> tuple[list[str], str | None]:
    """The ids of ``items`` (an id and its texts, as scored) that hold text ``tokenizer`` maps to its unknown token
    (``unknown_words``), and the warning naming the words (None when no item does)."""
    found = unknown_words(tokenizer, [t for _, texts in items for t in texts])
    ids = [i for i, texts in items if any(t in found for t in texts)]
    if not ids:
        return [], None
    words = list(dict.fromkeys(w for spans in found.values() for w in spans))
    shown = ", ".join(repr(w) for w in words[:5]) + (f" and {len(words) - 5} more" if len(words) > 5 else "")
    noun, verb = (what[:-1], "holds") if len(ids) == 1 and what.endswith("s") else (what, "hold")
    return ids, (f"{len(ids)} {noun} {verb} text the tokenizer maps to its unknown token ({shown}): their scores read "
                 "the unknown token, not the words; a tokenizer whose vocabulary holds them scores them as written")


def max_positions(model: Any) -> int:
    """The longest sequence ``model``'s position embeddings hold: ``max_position_embeddings``, less the offset of a
    family whose positions start after its padding index (RoBERTa, XLM-R, CamemBERT, MPNet, data2vec-text: their
    position embeddings carry a ``padding_idx``)."""
    limit = int(getattr(model.config, "max_position_embeddings", None) or 512)
    for name, module in model.named_modules():
        if name.endswith("position_embeddings") and isinstance(module, torch.nn.Embedding):
            if module.padding_idx is not None:
                return min(limit, module.num_embeddings) - module.padding_idx - 1
            return min(limit, module.num_embeddings)
    return limit


OFFSET_POSITION_FAMILIES = ("roberta", "xlm-roberta", "camembert", "mpnet", "data2vec-text", "roberta-prelayernorm",
                            "xmod", "longformer")  # position embeddings with a padding_idx: positions start after it


def config_positions(config: dict[str, Any] | None) -> int | None:
    """``max_positions`` as a model's config.json tells it before the weights load (None when it does not say):
    ``max_position_embeddings``, less ``pad_token_id + 1`` for a family whose positions start after its padding
    index."""
    limit = (config or {}).get("max_position_embeddings")
    if not isinstance(limit, int):
        return None
    pad = config.get("pad_token_id") if config else None
    if config and config.get("model_type") in OFFSET_POSITION_FAMILIES and isinstance(pad, int):
        return limit - pad - 1
    return limit


def masked_logits(model: Any, ids: torch.Tensor, attention: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Vocabulary logits at one position per row (``rows x V``). Where the encoder's last layer is BERT's
    (BERT, RoBERTa, ELECTRA: ``last_layer_at``), that layer runs at each row's scored position only (its keys and
    values at every position); elsewhere a pre-hook on the output embeddings hands the vocabulary projection
    only each row's scored position. Either way the logits are those of the full pass (the same arithmetic)."""
    rows = torch.arange(ids.shape[0], device=ids.device)
    layer = scored_position_layer(model)
    if layer is not None:
        with last_layer_at(layer, rows, positions):
            logits = model(input_ids=ids, attention_mask=attention).logits
        return logits[:, 0]
    head = model.get_output_embeddings()

    def only_scored(_module: Any, args: tuple) -> tuple:
        return (args[0][rows, positions].unsqueeze(1), *args[1:])

    handle = head.register_forward_pre_hook(only_scored) if head is not None else None
    try:
        logits = model(input_ids=ids, attention_mask=attention).logits
    finally:
        if handle is not None:
            handle.remove()
    return logits[:, 0] if logits.shape[1] == 1 else logits[rows, positions]


BERT_LAYERS = ("BertLayer", "RobertaLayer", "XLMRobertaLayer", "CamembertLayer", "ElectraLayer")


def scored_position_layer(model: Any) -> Any | None:
    """The encoder's last layer where it is BERT's own (self-attention with absolute positions, no cross-attention,
    no chunked feed-forward), so it can run at the scored positions alone; else None."""
    config = getattr(model, "config", None)
    base = getattr(model, "base_model", None)
    layers = getattr(getattr(base, "encoder", None), "layer", None)
    if config is None or not layers or getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
        return None
    if getattr(config, "position_embedding_type", "absolute") != "absolute" or getattr(config, "chunk_size_feed_forward", 0):
        return None
    layer = layers[-1]
    if type(layer).__name__ not in BERT_LAYERS or "forward" in vars(layer):
        return None
    parts = (getattr(layer, "attention", None), getattr(layer, "intermediate", None), getattr(layer, "output", None))
    if any(p is None for p in parts) or not hasattr(parts[0], "self") or not hasattr(parts[0].self, "query"):
        return None
    if any(m._forward_hooks or m._forward_pre_hooks for m in model.modules()):
        return None  # something watches or changes a part of the model (an intervention, a rigged head): run it whole
    return layer


@contextmanager
def last_layer_at(layer: Any, rows: torch.Tensor, positions: torch.Tensor) -> Iterator[None]:
    """Run BERT's last ``layer`` at one position per row: queries, attention output and feed-forward at
    ``positions`` only (keys and values at all), so its output is ``rows x 1 x hidden`` and the MLM head reads
    just that. The arithmetic of each kept position is the full layer's."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    from transformers.models.bert.modeling_bert import eager_attention_forward

    attention = layer.attention.self

    def forward(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, *args: Any,
                **kwargs: Any) -> torch.Tensor:
        batch, length = hidden_states.shape[:2]
        at = hidden_states[rows, positions].unsqueeze(1)
        heads, size = attention.num_attention_heads, attention.attention_head_size
        query = attention.query(at).view(batch, 1, heads, size).transpose(1, 2)
        key = attention.key(hidden_states).view(batch, length, heads, size).transpose(1, 2)
        value = attention.value(hidden_states).view(batch, length, heads, size).transpose(1, 2)
        mask = attention_mask
        if mask is not None and mask.dim() == 4 and mask.shape[-2] > 1:
            mask = mask.expand(batch, -1, -1, -1)[rows, :, positions].unsqueeze(2)
        function = ALL_ATTENTION_FUNCTIONS.get_interface(attention.config._attn_implementation, eager_attention_forward)
        kept = {k: v for k, v in kwargs.items() if k not in ("cache", "encoder_attention_mask", "past_key_values")}
        context, _ = function(attention, query, key, value, mask, dropout=0.0, scaling=attention.scaling, **kept)
        attended = layer.attention.output(context.reshape(batch, 1, -1).contiguous(), at)
        return layer.feed_forward_chunk(attended)

    layer.forward = forward
    try:
        yield
    finally:
        del layer.forward
