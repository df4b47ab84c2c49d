"""The model under test: loading (safely, on any device), tokenising once, batched prediction."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from bertprobe.errors import TargetError
from bertprobe.model.budgets import pack_by_length
from bertprobe.model.spec import ModelSpec
from bertprobe.progress import active as active_progress
from bertprobe.tasks.base import Task


def word_index_of(offsets: list[tuple[int, int]], special: list[int], spans: tuple[tuple[int, int], ...]) -> list[int] | None:
    """The word each token belongs to (-1 for special tokens), from the tokenizer's character offsets
    and the words' spans; None when a word got no token (truncation cut the sentence)."""
    import bisect

    starts = [s for s, _ in spans]
    out = []
    for (s, e), sp in zip(offsets, special):
        if sp or e <= s:
            out.append(-1)
            continue
        w = bisect.bisect_right(starts, e - 1) - 1  # the word holding the token's last character
        out.append(w if 0 <= w < len(spans) and spans[w][0] <= e - 1 < spans[w][1] else -1)
    return out if set(range(len(spans))) <= set(out) else None


@dataclass
class Encoded:
    """Pre-tokenised examples; ``rows[i]`` is one dict of id lists, or a list of them (multiple choice)."""

    rows: list[Any]
    lengths: list[int]

    def __len__(self) -> int:
        return len(self.rows)

    def subset(self, indices: Sequence[int]) -> Encoded:
        """The rows at ``indices``, in that order."""
        return Encoded([self.rows[i] for i in indices], [self.lengths[i] for i in indices])


@dataclass
class Target:
    """A loaded model with its tokenizer, device, dtype and task."""

    spec: ModelSpec
    model: Any
    tokenizer: Any
    task: Task  # what the outputs mean, bound to this model (a task's name, for a Target built by hand)
    device: torch.device
    dtype: torch.dtype
    quantized: bool = False
    notes: list[str] = field(default_factory=list)  # load warnings, shown in the report's model record
    gradient_model: Any = field(default=None, repr=False)  # float copy for input gradients of a quantized variant
    compiled: Any = field(default=None, repr=False)  # torch.compile'd model used by batched prediction
    encode_cache: dict[Any, Encoded] | None = field(default=None, repr=False)  # shared by a run's targets
    # loads another model (``ModelSpec`` fields as keywords) that this one's task reads beside it (a reranker's first-stage bi-encoder):
    # the run's cache under the harness, else ``loading.load_target``
    load_companion: Any = field(default=None, repr=False)
    _sites: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.task, str):  # built by hand with a task's name (a plugin's loader): the built-in task
            from bertprobe.tasks import builtin_tasks, task_options

            self.task = builtin_tasks().get(self.task).bind(self.model.config, task_options(self.spec))

    @property
    def outputs(self) -> Task:
        """Deprecated: ``task``, which holds the bound task (its name is ``task.name``)."""
        import warnings

        warnings.warn("Target.outputs is Target.task (the bound task; its name is task.name)", DeprecationWarning,
                      stacklevel=2)
        return self.task

    # ---- description -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.spec.label

    @property
    def label_names(self) -> list[str]:
        """Class or label names from ``id2label`` (classification, multi-label); empty for other tasks."""
        return list(self.task.label_names)

    @property
    def max_length(self) -> int:
        if self.spec.max_length:
            return self.spec.max_length
        limits = [512, getattr(self.model.config, "max_position_embeddings", 512)]
        tok_max = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(tok_max, int) and tok_max < 100_000:
            limits.append(tok_max)
        return min(limits)

    @property
    def capabilities(self) -> frozenset[str]:
        """What this model can do (names of ``bertprobe.capabilities``): its task's abilities and its own; never the
        task's name, which ``task.name`` gives."""
        caps = {"attentions", *self.task.capabilities}
        if not self.quantized:
            caps.add("gradients")
        if not self.quantized or self.gradient_model is not None:
            caps.add("input-gradients")  # the trigger search's HotFlip gradients (maybe from the float copy)
        if getattr(self.tokenizer, "mask_token_id", None) is not None:  # a masked LM's task offers it too
            caps.add("mask-token")
        try:
            sites = self.attention_sites()
            caps.add("heads")
            if len({s.num_heads for s in sites}) == 1:
                caps.add("uniform-heads")  # every layer has as many heads (not so after uneven physical pruning)
        except TargetError:
            caps.add("uniform-heads")  # heads unknown: attention maps come from the model's own output
        return frozenset(caps)

    def attention_sites(self) -> Any:
        from bertprobe.model.architectures import attention_sites

        if self._sites is None:
            self._sites = attention_sites(self.model)
        return self._sites

    # ---- tokenisation ------------------------------------------------------------------------
    def encode_words(self, examples: Sequence[Any]) -> list[tuple[dict[str, list[int]], list[int]] | None]:
        """Each word-annotated example's encoded row and, per token, the index of its word (-1 for special
        tokens), mapped through the tokenizer's character offsets; None where truncation cut words off."""
        if not getattr(self.tokenizer, "is_fast", False):
            raise TargetError(f"{self.name}: mapping words to tokens needs a fast tokenizer (tokenizer.json)")
        out: list[tuple[dict[str, list[int]], list[int]] | None] = []
        for start in range(0, len(examples), 512):
            chunk = examples[start : start + 512]
            enc = self.tokenizer([ex.text for ex in chunk], truncation=True, max_length=self.max_length,
                                 return_offsets_mapping=True, return_special_tokens_mask=True)
            for i, ex in enumerate(chunk):
                words = word_index_of(enc["offset_mapping"][i], enc["special_tokens_mask"][i], ex.spans or ())
                row = {k: list(enc[k][i]) for k in enc.keys() if k in self.input_names}
                out.append(None if words is None else (row, words))
        return out

    def _encode_one(self, text: str, pair: str | None) -> dict[str, list[int]]:
        enc = self.tokenizer(text, pair, truncation=True, max_length=self.max_length)
        return {k: list(v) for k, v in enc.items() if k in self.input_names}

    @functools.cached_property
    def input_names(self) -> frozenset[str]:
        """Tokenizer outputs the model's forward accepts (DistilBERT takes no token_type_ids).

        Cached: every tokenised example and every spliced trigger batch asks, and inspecting the
        signature costs about 15 us.
        """
        import inspect

        accepted = set(inspect.signature(self.model.forward).parameters)
        return frozenset({"input_ids", "attention_mask", "token_type_ids"} & accepted)

    @functools.cached_property
    def tokenizer_key(self) -> str:
        """A fingerprint of the tokenizer (class and vocabulary, or its full serialisation when fast)."""
        import hashlib

        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        text = backend.to_str() if backend is not None else repr(sorted(self.tokenizer.get_vocab().items()))
        return type(self.tokenizer).__name__ + ":" + hashlib.sha1(text.encode("utf-8")).hexdigest()

    def encode(self, examples: Sequence[Any], cache: bool = True) -> Encoded:
        """Tokenise examples once; multiple-choice examples become one row per choice.

        With a run's ``encode_cache``, the same examples are tokenised once per distinct tokenizer,
        max_length and task, however many models (variants of one checkpoint) and probes ask.
        ``cache=False`` for inputs seen once (an attack's queries), which would only fill the cache.
        """
        if self.encode_cache is None or not cache:
            return self._encode(examples)
        import hashlib

        digest = hashlib.sha1()
        for ex in examples:
            digest.update(repr((ex.text, ex.text_pair, ex.choices)).encode("utf-8"))
        key = (self.tokenizer_key, self.max_length, self.task.name, self.input_names, digest.hexdigest())
        if key not in self.encode_cache:
            self.encode_cache[key] = self._encode(examples)
        return self.encode_cache[key]

    def _encode(self, examples: Sequence[Any]) -> Encoded:
        """One batched tokenizer call for all texts (a fast tokenizer's batch runs in Rust, in parallel)."""
        texts: list[str] = []
        pairs: list[str | None] = []
        for ex in examples:
            if self.task.rows_per_choice:
                if not ex.choices:
                    raise TargetError("a multiple-choice model needs examples with choices")
                texts += [ex.text] * len(ex.choices)
                pairs += list(ex.choices)
            else:
                texts.append(ex.text)
                pairs.append(ex.text_pair)
        flat = self._encode_many(texts, pairs)
        rows: list[Any] = []
        lengths: list[int] = []
        at = 0
        for ex in examples:
            if self.task.rows_per_choice:
                row: Any = flat[at : at + len(ex.choices)]
                at += len(ex.choices)
                lengths.append(max(len(r["input_ids"]) for r in row))
            else:
                row = flat[at]
                at += 1
                lengths.append(len(row["input_ids"]))
            rows.append(row)
        return Encoded(rows, lengths)

    def _encode_many(self, texts: list[str], pairs: list[str | None]) -> list[dict[str, list[int]]]:
        """Rows of ``input_names`` for each text (and pair), equal to tokenising them one by one."""
        if not texts:
            return []
        with_pair = [p is not None for p in pairs]
        if any(with_pair) and not all(with_pair):  # a batch call takes pairs for all texts or for none
            return [self._encode_one(t, p) for t, p in zip(texts, pairs)]
        enc = self.tokenizer(texts, pairs if all(with_pair) else None, truncation=True, max_length=self.max_length)
        keys = [k for k in enc.keys() if k in self.input_names]
        return [{k: list(enc[k][i]) for k in keys} for i in range(len(texts))]

    def collate(self, rows: Sequence[Any], pad_to: int | None = None) -> dict[str, torch.Tensor]:
        """Pad rows to the longest one (or ``pad_to``, cutting longer rows) and move them to the device.

        Filled into one preallocated array per input: for SST-2 dev's batches 2 ms, against 15 ms with the
        tokenizer's ``pad`` and 16 ms with a tensor per row and torch's ``pad_sequence`` (same tensors);
        host time is what a GPU waits on."""
        import numpy as np

        pad_id = self.tokenizer.pad_token_id or 0
        flat = [r for row in rows for r in row] if self.task.rows_per_choice else list(rows)
        width = pad_to or max(len(r["input_ids"]) for r in flat)
        batch: dict[str, torch.Tensor] = {}
        for key in flat[0]:
            array = np.full((len(flat), width), pad_id if key == "input_ids" else 0, dtype=np.int64)
            for i, r in enumerate(flat):
                values = r[key][:width]
                array[i, : len(values)] = values
            tensor = torch.from_numpy(array)
            if self.task.rows_per_choice:
                tensor = tensor.view(len(rows), -1, width)
            batch[key] = tensor.to(self.device, non_blocking=True)
        return batch

    @functools.cached_property
    def token_budget(self) -> int | None:
        """Tokens per batch (rows x padded length): the spec's, else sized to a GPU's free memory when first
        asked (``budgets.token_budget``: 4,096 to 262,144); None (fixed batch size) on a CPU, where a
        bigger batch only adds memory traffic."""
        if self.spec.token_budget is not None:
            return self.spec.token_budget
        from bertprobe.model.budgets import token_budget

        return token_budget(self.model.config, self.device, self.dtype.itemsize)

    def batches(
        self, encoded: Encoded, batch_size: int | None = None, sort: bool = True
    ) -> Iterator[tuple[list[int], dict[str, torch.Tensor]]]:
        """Yield ``(indices, batch)``; batches hold similar lengths when ``sort`` is set.

        An explicit ``batch_size`` fixes the rows per batch. Otherwise, with a token budget (on a GPU
        by default), a batch takes sorted rows while rows x longest length stays within the budget;
        without one, the spec's ``batch_size`` rows.
        """
        order = sorted(range(len(encoded)), key=encoded.lengths.__getitem__) if sort else list(range(len(encoded)))
        for idx in self.plan_batches(encoded, order, batch_size):
            yield idx, self.collate([encoded.rows[i] for i in idx])

    def plan_batches(self, encoded: Encoded, order: list[int], batch_size: int | None = None) -> list[list[int]]:
        """The indices of each batch (see ``batches``)."""
        budget = None if batch_size else self.token_budget
        if budget is None:
            size = batch_size or self.spec.batch_size
            return [order[start : start + size] for start in range(0, len(order), size)]
        per_row = max(1, len(encoded.rows[order[0]]) if order and self.task.rows_per_choice else 1)
        return pack_by_length(order, encoded.lengths.__getitem__,
                              lambda rows, longest: rows * per_row * longest <= budget)

    # ---- prediction --------------------------------------------------------------------------
    def forward(self, batch: dict[str, torch.Tensor], **kwargs: Any) -> Any:
        return self.model(**batch, **kwargs)

    def logits(
        self, data: Sequence[Any] | Encoded, batch_size: int | None = None, progress: Any = None
    ) -> torch.Tensor:
        """Float32 logits (``N x C``; choices for multiple choice) on the CPU, in input order."""
        encoded = data if isinstance(data, Encoded) else self.encode(data)
        order = sorted(range(len(encoded)), key=encoded.lengths.__getitem__)
        plans = self.plan_batches(encoded, order, batch_size)
        batches: Any = ((idx, self.collate([encoded.rows[i] for i in idx])) for idx in plans)
        progress = progress if progress is not None else active_progress()  # a probe's, under the harness
        if progress is not None:
            batches = progress(batches, total=len(plans), desc="predict")
        out: torch.Tensor | None = None
        with torch.inference_mode():
            model = self.compiled if self.compiled is not None else self.model
            for idx, batch in batches:
                logits = model(**batch).logits.float()  # stays on the device until the evaluation ends
                if out is None:
                    out = torch.empty(len(encoded), logits.shape[-1], device=logits.device)
                out[torch.tensor(idx, device=logits.device)] = logits
        return out.cpu() if out is not None else torch.empty(0, len(self.label_names) or 0)

    def predict_proba(self, data: Sequence[Any] | Encoded, batch_size: int | None = None, progress: Any = None) -> torch.Tensor:
        return self.task.probs(self.logits(data, batch_size, progress))

    def predict(self, data: Sequence[Any] | Encoded, batch_size: int | None = None, progress: Any = None) -> list[Any]:
        """Class ids (single-label), or 0/1 rows per label (multi-label), as the task decides."""
        return self.task.predict(self.logits(data, batch_size, progress)).tolist()

    @contextlib.contextmanager
    def eager_attention(self) -> Iterator[None]:
        """Switch to eager attention (SDPA returns no weights) for the duration of the block."""
        before = getattr(self.model.config, "_attn_implementation", None)
        if before == "eager":
            yield
            return
        self.model.set_attn_implementation("eager")
        try:
            yield
        finally:
            if before:
                self.model.set_attn_implementation(before)
