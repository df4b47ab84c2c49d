"""ModelSpec: how to load a target and which variant to derive from it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

TaskName = str  # a registered task's name ("classification", "multi-label", ...; see bertprobe.tasks)


QUANTIZE_MODES = ("none", "int8-dynamic", "int8-weight-only")
PROTOCOLS = ("v2", "v1", "hf")  # the built-in wire shapes of an endpoint (a plugin's codec adds its own name)
RUNTIMES = ("torch", "onnx")


@dataclass(frozen=True)
class ModelSpec:
    """How to load a target. ``path`` is a hub id or a local directory.

    ``name`` labels the model in a matrix (default: the folder name or the hub id's last part).
    ``quantize``, ``prune_heads``, ``compile`` and ``runtime: onnx`` derive a variant from the loaded weights (see
    ``bertprobe.model.variants``); ``dtype`` is the compute dtype. ``runtime: onnx`` exports the model to ONNX and
    runs it in ONNX Runtime, quantized there with ``quantize: int8-dynamic`` (``per_channel``, ``reduce_range``:
    ONNX Runtime's settings; reduce_range suits CPUs without VNNI). A path naming an ``.onnx`` file (or a folder
    holding ``model.onnx``) runs in ONNX Runtime as stored (``bertprobe.model.onnx``).
    """

    path: str
    name: str | None = None
    quantize: Literal["none", "int8-dynamic", "int8-weight-only"] = "none"
    prune_heads: float | None = None
    compile: bool = False
    runtime: Literal["torch", "onnx"] = "torch"
    per_channel: bool = False  # runtime: onnx, quantize: int8-dynamic: one scale per output channel
    reduce_range: bool = False  # runtime: onnx, quantize: int8-dynamic: 7-bit weights (CPUs without VNNI)
    device: str = "auto"
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"
    task: TaskName = "auto"  # auto: from the config (architectures, problem_type); else a registered task's name
    threshold: float = 0.5  # multi-label: the probability at and above which a label is predicted
    thresholds: dict[str, float] = field(default_factory=dict, hash=False)  # multi-label: per-label thresholds ({toxic: 0.3})
    max_length: int | None = None  # sub-tokens per input (a reader's window: the same as options.max_length)
    # sub-tokens two windows share: token classification, a sentence longer than max_length (32 when not given);
    # extractive QA, a context longer than a window (the same as options.stride, 128 when not given)
    stride: int | None = None
    # the task's own settings, checked when it binds (extractive QA: question_first, max_length, stride, n_best,
    # max_answer_tokens, null_threshold; a key the task does not read is an error)
    options: dict[str, Any] = field(default_factory=dict, hash=False)
    batch_size: int = 32
    token_budget: int | None = None  # tokens per batch (default: sized to a GPU's free memory; fixed batch_size on a CPU)
    revision: str | None = None
    trust_remote_code: bool = False
    allow_pickle: bool = False
    allow_missing_weights: bool = False
    # ---- a served model (``bertprobe.model.endpoint``): ``endpoint`` instead of ``path`` ----
    endpoint: str | None = None  # the server's base URL (http or https), e.g. http://127.0.0.1:8080
    protocol: str = "v2"  # v2 (Open Inference Protocol), v1 (KServe v1 predict), hf (TEI /predict, QA pipeline), or a codec plugin's
    served_name: str | None = None  # the model's name on the server (default: name, else the last part of the URL path)
    # HTTP headers; values may name ${VAR}s, read from the environment when the model loads and never written down
    headers: dict[str, str] = field(default_factory=dict, hash=False)
    twin: str | None = None  # the checkpoint the endpoint serves: probes needing gradients, attentions, heads run on it
    labels: tuple[str, ...] = ()  # the endpoint's class names in class order, where neither server nor twin names them
    outputs: Literal["auto", "logits", "probabilities", "labels"] = "auto"  # what the endpoint's scores are
    concurrency: int = 4  # requests in flight
    timeout_s: float = 30.0  # per request
    retries: int = 5  # on 429, 5xx, dropped connections and timeouts, with exponential backoff and jitter
    max_requests: int | None = None  # a budget of HTTP requests (a paid API): the run stops before exceeding it
    verify_tls: bool = True  # false is allowed for a staging host's own certificate, and warned

    def __post_init__(self) -> None:
        if self.prune_heads is not None and not 0 <= self.prune_heads < 1:
            raise ValueError("prune_heads must be a share of heads in [0, 1), e.g. 0.3")
        if self.batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if self.runtime == "onnx":
            if self.quantize == "int8-weight-only":
                raise ValueError("runtime: onnx quantizes with int8-dynamic only (ONNX Runtime's quantize_dynamic)")
            if self.compile:
                raise ValueError("compile: true is torch.compile; a runtime: onnx build runs in ONNX Runtime, leave it out")
            if self.dtype in ("float16", "bfloat16"):
                raise ValueError(f"dtype: {self.dtype} is a PyTorch dtype; a runtime: onnx build runs in float32 "
                                 "(or int8 with quantize: int8-dynamic)")
        if self.endpoint is not None:
            self._check_endpoint()
        if (self.per_channel or self.reduce_range) and self.quantize != "int8-dynamic":
            raise ValueError("per_channel and reduce_range are settings of ONNX Runtime's int8 build: use them with "
                             "runtime: onnx and quantize: int8-dynamic")

    def _check_endpoint(self) -> None:
        from urllib.parse import urlsplit

        url = urlsplit(self.endpoint or "")
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"endpoint {self.endpoint!r}: expected an http:// or https:// URL with a host")
        if url.username or url.password or url.query or url.fragment:
            raise ValueError(f"endpoint {url.scheme}://{url.hostname}...: a user, password, query or fragment in the URL "
                             "would be written into the report; give the base URL, and tokens as headers: "
                             "{Authorization: 'Bearer ${VAR}'}")
        if re.search(r"/v[12]/models/[^/]+", url.path):
            raise ValueError(f"endpoint {self.endpoint}: give the server's base URL (e.g. {url.scheme}://{url.netloc}) and the "
                             "model's name as served_name; the protocol adds /v2/models/NAME/infer")
        if self.variant.keys() - {"dtype"} or self.dtype != "auto":
            raise ValueError(f"endpoint {self.endpoint}: a served model is audited as served; quantize, prune_heads, "
                             "compile, runtime and dtype derive variants of local weights (give them to the twin's own entry)")
        if self.concurrency < 1 or self.timeout_s <= 0 or self.retries < 0:
            raise ValueError("concurrency must be at least 1, timeout_s above 0, retries at least 0")
        if self.max_requests is not None and self.max_requests < 1:
            raise ValueError("max_requests must be at least 1 (or left out: no budget)")

    def with_overrides(self, **changes: Any) -> ModelSpec:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @property
    def default_name(self) -> str:
        """The folder name of a local path, or the last part of a hub id; an endpoint's served name."""
        if self.endpoint is not None:
            return self.served_name or endpoint_model_name(self.endpoint)
        return Path(self.path.rstrip("/\\")).name or self.path

    @property
    def served_model(self) -> str:
        """The model's name on the server: ``served_name``, else the entry's ``name``, else the URL's last part."""
        return self.served_name or self.name or endpoint_model_name(self.endpoint or "")

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
        if self.runtime != "torch":
            out["runtime"] = self.runtime
        if self.per_channel:
            out["per_channel"] = True
        if self.reduce_range:
            out["reduce_range"] = True
        if self.dtype != "auto":
            out["dtype"] = self.dtype
        return out

    @property
    def base(self) -> ModelSpec:
        """The same model as stored: no variant fields, no name (variants share its loaded weights)."""
        return replace(self, name=None, quantize="none", prune_heads=None, compile=False, runtime="torch",
                       per_channel=False, reduce_range=False)


def endpoint_model_name(url: str) -> str:
    """The model name an endpoint URL implies: its path's last part (``.../models/sst2`` -> ``sst2``), else its host."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    tail = [p for p in parts.path.split("/") if p]
    return tail[-1] if tail else (parts.hostname or "endpoint")


def resolve_model_param(name_or_path: str, like: ModelSpec | None = None,
                        models: tuple[ModelSpec, ...] | list[ModelSpec] = ()) -> ModelSpec:
    """The model a probe param names (``transfer_model``, ``compare_model``): a model of the run's matrix
    by name first, then a path the matrix loads as stored (no variant, no endpoint), then a path or hub id loaded as
    ``like`` is (its device, dtype, length, batch size and loading options, no variant; from a served model, as its
    ``twin:`` loads). Runs and the probe test kit both resolve through this one function."""
    for spec in models:
        if spec.label == name_or_path:
            return spec
    for spec in models:  # a path the matrix loads as stored: that model (its weights load once per run)
        if spec.endpoint is None and not spec.variant and same_model(spec.path, name_or_path):
            return spec
    if like is not None and like.endpoint is not None:  # a path named from a served model: loaded as its twin is
        like = ModelSpec(path=name_or_path, device=like.device, max_length=like.max_length, batch_size=like.batch_size,
                         options=dict(like.options), trust_remote_code=like.trust_remote_code,
                         allow_pickle=like.allow_pickle)
    base = like.base if like is not None else ModelSpec(path=name_or_path)
    return replace(base, path=name_or_path, name=None, task="auto")


def same_model(a: str, b: str) -> bool:
    """Whether two model paths (or hub ids) name the same model: the same folder once resolved, or the same id."""
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    return pa.resolve() == pb.resolve() if pa.exists() and pb.exists() else a.rstrip("/") == b.rstrip("/")
