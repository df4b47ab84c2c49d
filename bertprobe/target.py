"""The model under test: loading (safely, on any device), tokenising once, batched prediction."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import torch

from bertprobe.errors import TargetError

Task = Literal["classification", "multiple-choice", "masked-lm", "encoder"]
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
_SUFFIX_TASK: dict[str, Task] = {
    "ForSequenceClassification": "classification",
    "ForMultipleChoice": "multiple-choice",
    "ForMaskedLM": "masked-lm",
    "ForPreTraining": "masked-lm",
}


QUANTIZE_MODES = ("none", "int8-dynamic", "int8-weight-only")


@dataclass(frozen=True)
class ModelSpec:
    """How to load a target. ``path`` is a hub id or a local directory.

    ``name`` labels the model in a matrix (default: the folder name or the hub id's last part).
    ``quantize``, ``prune_heads`` and ``compile`` derive a variant from the loaded weights (see
    ``bertprobe.variants``); ``dtype`` is the compute dtype.
    """

    path: str
    name: str | None = None
    quantize: Literal["none", "int8-dynamic", "int8-weight-only"] = "none"
    prune_heads: float | None = None
    compile: bool = False
    device: str = "auto"
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"
    task: Literal["auto", "classification", "multiple-choice", "masked-lm", "encoder"] = "auto"
    max_length: int | None = None
    batch_size: int = 32
    token_budget: int | None = None  # tokens per batch (default: sized to a GPU's free memory; fixed batch_size on a CPU)
    revision: str | None = None
    trust_remote_code: bool = False
    allow_pickle: bool = False
    allow_missing_weights: bool = False

    def __post_init__(self) -> None:
        if self.prune_heads is not None and not 0 <= self.prune_heads < 1:
            raise ValueError("prune_heads must be a share of heads in [0, 1), e.g. 0.3")
        if self.batch_size < 1:
            raise ValueError("batch_size must be at least 1")

    def with_overrides(self, **changes: Any) -> ModelSpec:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @property
    def default_name(self) -> str:
        """The folder name of a local path, or the last part of a hub id."""
        return Path(self.path.rstrip("/\\")).name or self.path

    @property
    def label(self) -> str:
        return self.name or self.default_name

    @property
    def variant(self) -> dict[str, Any]:
        """The fields that derive a variant from the stored weights (empty for the model as stored)."""
        out: dict[str, Any] = {}
        if self.quantize != "none":
            out["quantize"] = self.quantize
        if self.prune_heads:
            out["prune_heads"] = self.prune_heads
        if self.compile:
            out["compile"] = True
        if self.dtype != "auto":
            out["dtype"] = self.dtype
        return out

    @property
    def base(self) -> ModelSpec:
        """The same model as stored: no variant fields, no name (variants share its loaded weights)."""
        return replace(self, name=None, quantize="none", prune_heads=None, compile=False)


def resolve_device(name: str) -> torch.device:
    """auto -> cuda, then mps, then cpu. Explicit devices are checked before use."""
    name = (name or "auto").strip().lower()
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise TargetError(f"device '{name}' requested but CUDA is not available; use --device cpu")
        dev = torch.device(name)
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise TargetError(f"device '{name}' does not exist: {torch.cuda.device_count()} CUDA device(s) visible")
        return dev
    if name == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise TargetError("device 'mps' requested but MPS is not available; use --device cpu")
        return torch.device("mps")
    raise TargetError(f"unknown device '{name}'; use auto, cpu, cuda, cuda:N or mps")


def resolve_dtype(name: str, device: torch.device, checkpoint_dtype: Any) -> torch.dtype:
    """auto -> float32 on CPU (even for a float16 checkpoint); the checkpoint's half type on GPU."""
    if name != "auto":
        if name not in DTYPES:
            raise TargetError(f"unknown dtype '{name}'; use auto, float32, float16 or bfloat16")
        return DTYPES[name]
    if device.type == "cpu":
        return torch.float32
    text = str(checkpoint_dtype).replace("torch.", "")
    return DTYPES.get(text, torch.float32)


def _looks_local(path: str) -> bool:
    """A hub id is 'name' or 'org/name'; anything relative, absolute or deeper is a local path."""
    return path.startswith((".", "/", "~")) or path.count("/") > 1 or Path(path).exists()


def _check_weights(directory: Path, allow_pickle: bool) -> None:
    names = {p.name for p in directory.iterdir()}
    if any(n.endswith(".safetensors") or n.endswith(".safetensors.index.json") for n in names):
        return
    pickles = sorted(n for n in names if n.endswith((".bin", ".pt", ".pth", ".ckpt")))
    if pickles and not allow_pickle:
        raise TargetError(
            f"{directory} has only pickle weights ({pickles[0]}), which can run code when loaded; "
            "convert them to safetensors, or if you trust the model set 'allow_pickle: true' under "
            "model: in the suite (or pass --allow-pickle)"
        )
    if not pickles:
        raise TargetError(f"{directory} holds no model weights (model.safetensors); is this a model directory?")


def _base_model_names() -> set[str]:
    """transformers' bare model classes (``BertModel``, ``RobertaModel``, ...), by name."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    names: set[str] = set()
    for value in MODEL_MAPPING_NAMES.values():
        names.update(value if isinstance(value, (tuple, list)) else (value,))
    return names


def detect_task(config: Any, requested: str = "auto") -> Task:
    if requested != "auto":
        return requested  # type: ignore[return-value]
    architectures = getattr(config, "architectures", None) or []
    for arch in architectures:
        for suffix, task in _SUFFIX_TASK.items():
            if arch.endswith(suffix):
                return task
    if set(architectures) & _base_model_names():
        return "encoder"  # a bare encoder (BertModel, RobertaModel, ...): no task head
    raise TargetError(
        f"cannot tell the task from the config (architectures={architectures or None}); "
        "set 'task: classification | multiple-choice | masked-lm | encoder' under model:"
    )


def _auto_class(task: Task) -> Any:
    import transformers

    return {
        "classification": transformers.AutoModelForSequenceClassification,
        "multiple-choice": transformers.AutoModelForMultipleChoice,
        "masked-lm": transformers.AutoModelForMaskedLM,
        "encoder": transformers.AutoModel,
    }[task]


def load_target(spec: ModelSpec) -> Target:
    """Load tokenizer and model per ``spec``, refusing pickle weights and remote code unless allowed."""
    from bertprobe.quantize import preload_quietly

    preload_quietly()
    import transformers

    from bertprobe.progress import progress_enabled

    if not progress_enabled():
        transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    path = spec.path
    local = Path(path).expanduser()
    if local.is_dir():
        _check_weights(local, spec.allow_pickle)
        source = str(local)
    elif _looks_local(path):
        raise TargetError(f"model path '{path}' does not exist or is not a directory; pass --model PATH")
    else:
        source = path
    from bertprobe.hub import hub_reachable, quiet_hub_logs

    quiet_hub_logs()
    common: dict[str, Any] = {"revision": spec.revision, "trust_remote_code": spec.trust_remote_code}
    if not local.is_dir() and not hub_reachable():
        common["local_files_only"] = True  # use the cache, fail at once when the model is not there
    try:
        config = transformers.AutoConfig.from_pretrained(source, **common)
    except OSError as exc:
        if local.is_dir():
            raise TargetError(f"cannot read the model config in '{path}': {str(exc).splitlines()[0]}") from None
        raise TargetError(
            f"cannot load '{path}': the Hugging Face Hub is unreachable and the model is not cached; "
            "pass --model PATH to a local model directory"
        ) from None
    except ValueError as exc:
        raise TargetError(f"cannot load '{path}': {str(exc).splitlines()[0]}") from None
    task = detect_task(config, spec.task)
    device = resolve_device(spec.device)
    dtype = resolve_dtype(spec.dtype, device, getattr(config, "dtype", None) or getattr(config, "torch_dtype", None))
    if local.is_dir():
        check_tokenizer_files(local)
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(source, **common)
    except OSError as exc:
        raise TargetError(f"cannot load the tokenizer of '{path}': {_first_line(exc)}") from None
    except Exception as exc:  # tokenizers raises plain Exception for a corrupt tokenizer.json
        where = f"{local / 'tokenizer.json'}" if (local / "tokenizer.json").is_file() else path
        raise TargetError(f"cannot read the tokenizer in '{where}': {_first_line(exc)}; "
                          "is the file complete and from the model's training?") from None
    try:
        model, info = _auto_class(task).from_pretrained(
            source,
            dtype=dtype,
            use_safetensors=None if spec.allow_pickle else True,
            output_loading_info=True,
            ignore_mismatched_sizes=True,  # reported below by tensor name, not as a 60-line RuntimeError
            **common,
        )
    except OSError as exc:
        first = _first_line(exc)
        if "safetensors" in first.lower() and not spec.allow_pickle:
            raise TargetError(
                f"'{path}' has no safetensors weights; if you trust it, set 'allow_pickle: true' under model:"
            ) from None
        raise TargetError(f"cannot load '{path}': {first}; pass --model PATH to a local model directory") from None
    except Exception as exc:  # SafetensorError, UnpicklingError, RuntimeError, ...: a broken weights file
        files = ", ".join(p.name for p in sorted(local.glob("*.safetensors")) + sorted(local.glob("*.bin"))) if local.is_dir() else path
        raise TargetError(f"cannot read the weights of '{path}' ({files}): {type(exc).__name__}: {_first_line(exc)}; "
                          "the file is truncated, corrupt or not a weights file") from None
    notes = check_loading_info(info, path, task, spec.allow_missing_weights)
    check_vocabulary(tokenizer, model, path)
    model.to(device)
    model.eval()
    return Target(spec=spec, model=model, tokenizer=tokenizer, task=task, device=device, dtype=dtype, notes=notes)


TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model",
                   "tokenizer.model", "spm.model", "bpe.codes")
# Tensors a checkpoint may lack or carry without harm: buffers rebuilt at load, and heads the task
# does not use (the NSP head of a pre-training checkpoint loaded as a masked LM, a pooler it ignores).
_HARMLESS = ("position_ids", "token_type_ids", "cls.seq_relationship.", "pooler.", "lm_head.", "cls.predictions.")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def check_tokenizer_files(directory: Path) -> None:
    """A model folder without tokenizer files would get a placeholder tokenizer (every word [UNK])."""
    names = {p.name for p in directory.iterdir()}
    if not any(n in names for n in TOKENIZER_FILES):
        raise TargetError(f"{directory} has no tokenizer files ({', '.join(TOKENIZER_FILES[:3])}, ...); copy the "
                          "tokenizer the model was trained with into it (tokenizer.save_pretrained)")


def check_loading_info(info: dict[str, Any], path: str, task: str, allow_missing: bool) -> list[str]:
    """Missing, unexpected or re-initialised tensors are an error naming them (a random head gives random
    numbers); with ``allow_missing_weights: true`` they are notes in the report instead."""
    def named(keys: Any) -> list[str]:
        return sorted(str(k if isinstance(k, str) else k[0]) for k in keys)

    missing = [k for k in named(info.get("missing_keys") or ()) if not k.endswith(("position_ids", "token_type_ids"))]
    unexpected = [k for k in named(info.get("unexpected_keys") or ()) if not any(h in k for h in _HARMLESS)]
    mismatched = named(info.get("mismatched_keys") or ())
    notes = []
    if task == "encoder":
        # an encoder ignores the pooler; a task checkpoint loaded as an encoder drops its head by design
        missing = [k for k in missing if not k.startswith("pooler.")]
        if unexpected:
            notes.append(f"WARNING: loaded as an encoder, so the task head is dropped: {', '.join(unexpected[:6])}")
            unexpected = []
    problems = []
    if missing:
        problems.append(f"missing from the checkpoint, so randomly initialised: {', '.join(missing[:6])}"
                        + (f" and {len(missing) - 6} more" if len(missing) > 6 else ""))
    if mismatched:
        problems.append(f"shaped differently from the config, so re-initialised: {', '.join(mismatched[:6])} "
                        "(does config.json's label count match the weights?)")
    if unexpected:
        problems.append(f"in the checkpoint but not used by a {task} model: {', '.join(unexpected[:6])}")
    if problems and not allow_missing:
        raise TargetError(f"'{path}': weights do not fit the model: {'; '.join(problems)}; the audit would measure "
                          "random weights. Fix the checkpoint, or set 'allow_missing_weights: true' under model: "
                          "to accept it (recorded as a warning)")
    return notes + [f"WARNING (allow_missing_weights): {p}" for p in problems]


def check_vocabulary(tokenizer: Any, model: Any, path: str) -> None:
    """The tokenizer must fit the embedding matrix: larger ids index out of range, a far smaller one is
    not the model's own (a 5-token placeholder turns every word into [UNK])."""
    embeddings = model.get_input_embeddings()
    rows = getattr(embeddings, "num_embeddings", None) or embeddings.weight.shape[0]
    size = len(tokenizer)
    if size > rows:
        raise TargetError(f"'{path}': the tokenizer has {size} tokens but the model's embedding has only {rows} rows; "
                          "the tokenizer is not the model's own")
    if size < rows // 2:
        raise TargetError(f"'{path}': the tokenizer has {size} tokens for an embedding of {rows} rows; "
                          "the tokenizer files are missing or not the model's own")


@dataclass
class Encoded:
    """Pre-tokenised examples; ``rows[i]`` is one dict of id lists, or a list of them (multiple choice)."""

    rows: list[Any]
    lengths: list[int]

    def __len__(self) -> int:
        return len(self.rows)


@dataclass
class Target:
    """A loaded model with its tokenizer, device, dtype and task."""

    spec: ModelSpec
    model: Any
    tokenizer: Any
    task: Task
    device: torch.device
    dtype: torch.dtype
    quantized: bool = False
    notes: list[str] = field(default_factory=list)  # load warnings, shown in the report's model record
    gradient_model: Any = field(default=None, repr=False)  # float copy for input gradients of a quantized variant
    compiled: Any = field(default=None, repr=False)  # torch.compile'd model used by batched prediction
    encode_cache: dict[Any, Encoded] | None = field(default=None, repr=False)  # shared by a run's targets
    _sites: Any = field(default=None, repr=False)

    # ---- description -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.spec.label

    @property
    def label_names(self) -> list[str]:
        """Class names from ``id2label`` (classification), or choice indices (multiple choice)."""
        if self.task == "classification":
            id2label = self.model.config.id2label
            return [str(id2label[i]) for i in range(self.model.config.num_labels)]
        return []

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
        caps = {"attentions", self.task}
        if not self.quantized:
            caps.add("gradients")
        if not self.quantized or self.gradient_model is not None:
            caps.add("input-gradients")  # the trigger search's HotFlip gradients (maybe from the float copy)
        if self.task in ("classification", "multiple-choice"):
            caps.add("predictions")
        if self.task == "classification":
            caps.add("classifier")
        if self.task == "masked-lm" or getattr(self.tokenizer, "mask_token_id", None) is not None:
            caps.add("mask-token")
        if self.task == "masked-lm":
            caps.add("mlm")
        try:
            sites = self.attention_sites()
            caps.add("heads")
            if len({s.num_heads for s in sites}) == 1:
                caps.add("uniform-heads")  # every layer has as many heads (not so after uneven physical pruning)
        except TargetError:
            caps.add("uniform-heads")  # heads unknown: attention maps come from the model's own output
        return frozenset(caps)

    def attention_sites(self) -> Any:
        from bertprobe.architectures import attention_sites

        if self._sites is None:
            self._sites = attention_sites(self.model)
        return self._sites

    # ---- tokenisation ------------------------------------------------------------------------
    def encode_words(self, examples: Sequence[Any]) -> list[tuple[dict[str, list[int]], list[int]] | None]:
        """Each word-annotated example's encoded row and, per token, the index of its word (-1 for special
        tokens), mapped through the tokenizer's character offsets; None where truncation cut words off."""
        from bertprobe.syntax.wordlevel import word_index_of

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
        key = (self.tokenizer_key, self.max_length, self.task, self.input_names, digest.hexdigest())
        if key not in self.encode_cache:
            self.encode_cache[key] = self._encode(examples)
        return self.encode_cache[key]

    def _encode(self, examples: Sequence[Any]) -> Encoded:
        """One batched tokenizer call for all texts (a fast tokenizer's batch runs in Rust, in parallel)."""
        texts: list[str] = []
        pairs: list[str | None] = []
        for ex in examples:
            if self.task == "multiple-choice":
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
            if self.task == "multiple-choice":
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
        flat = [r for row in rows for r in row] if self.task == "multiple-choice" else list(rows)
        width = pad_to or max(len(r["input_ids"]) for r in flat)
        batch: dict[str, torch.Tensor] = {}
        for key in flat[0]:
            array = np.full((len(flat), width), pad_id if key == "input_ids" else 0, dtype=np.int64)
            for i, r in enumerate(flat):
                values = r[key][:width]
                array[i, : len(values)] = values
            tensor = torch.from_numpy(array)
            if self.task == "multiple-choice":
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
        from bertprobe.budgets import token_budget

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
        per_row = max(1, len(encoded.rows[order[0]]) if order and self.task == "multiple-choice" else 1)
        plans: list[list[int]] = []
        current: list[int] = []
        longest = 0
        for i in order:
            length = encoded.lengths[i]
            if current and (len(current) + 1) * per_row * max(longest, length) > budget:
                plans.append(current)
                current, longest = [], 0
            current.append(i)
            longest = max(longest, length)
        if current:
            plans.append(current)
        return plans

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
        return self.logits(data, batch_size, progress).softmax(dim=-1)

    def predict(self, data: Sequence[Any] | Encoded, batch_size: int | None = None, progress: Any = None) -> list[int]:
        return self.logits(data, batch_size, progress).argmax(dim=-1).tolist()

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
