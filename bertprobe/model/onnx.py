"""ONNX Runtime models: the artefact a team serves on CPUs, audited as it is.

Two ways in. A ``model.path`` naming an ``.onnx`` file, or a folder holding ``model.onnx`` with its tokenizer and
``config.json`` (Hugging Face Optimum's layout), is loaded with ONNX Runtime (``loading.load_onnx_target``). And a PyTorch
model entry with ``runtime: onnx`` is exported to ONNX (the legacy TorchScript exporter, opset ``OPSET``),
checked against PyTorch on a sample (the logits; a bare encoder's, a sentence embedder's, last hidden states),
cached by the hash of its weights, and, with
``quantize: int8-dynamic``, quantized with ONNX Runtime's dynamic quantization (``onnx_variant``).

Either way the model sits behind the ``Target`` interface the probes use for forward passes (``OnnxTarget``): the
same tokenisation, sorted batches, padding and task layer; ``model(**batch)`` returns the session's outputs by
name (``logits``; ``start_logits``/``end_logits`` for a reader; ``last_hidden_state`` for an encoder, which
``tasks.embeddings.last_hidden`` pools into sentence embeddings). An ONNX model has predictions only: no
gradients, attention maps or heads to mask (``OnnxTarget.capabilities``), so the probes that need them are
refused before anything loads (``bertprobe.suite.validate``). A ``runtime: onnx`` build keeps the PyTorch model it
was exported from as its twin for input gradients (``Target.gradient_model``, as torchao's int8 keeps its float
weights): a trigger search (universal-trigger, backdoor-scan) takes its gradients from the twin and scores every
candidate on the build itself.

onnxruntime and onnx are the ``[onnx]`` extra, imported only when an ONNX model or build is asked for.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from bertprobe.errors import TargetError, first_line
from bertprobe.model.spec import ModelSpec
from bertprobe.model.target import Target

OPSET = 17  # the opset exports are pinned to (ONNX Runtime 1.14+ runs it; LayerNormalization is a single op)
INSTALL = "pip install 'bertprobe[onnx]' (or: pip install onnxruntime onnx)"
FP32_TOLERANCE = 1e-3  # largest |difference| of logits (an encoder's hidden states) between an fp32 export and PyTorch
# before the export is refused
LOGITS = ("start_logits", "end_logits", "logits")  # the outputs a head's graph returns (a reader's two first)
HIDDEN = "last_hidden_state"  # what a bare encoder's (a sentence embedder's) graph returns
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
ONNX_LACKS = {
    "gradients": "ONNX Runtime runs forward passes only: no backward pass",
    "input-gradients": "ONNX Runtime runs forward passes only: no gradients at the input embeddings",
    "attentions": "an ONNX graph returns its logits, not attention maps",
    "heads": "an ONNX graph has no attention heads bertprobe can mask or prune",
    "uniform-heads": "an ONNX graph has no attention heads bertprobe can read",
}


def onnx_runtime() -> Any:
    """The ``onnxruntime`` module, or the one-line error with the install command."""
    try:
        import onnx  # noqa: F401
        import onnxruntime
    except ImportError:
        raise TargetError(f"ONNX models and 'runtime: onnx' builds need onnxruntime and onnx; install them with {INSTALL}") from None
    return onnxruntime


def onnx_file(path: str) -> Path | None:
    """The ONNX graph ``path`` names: an ``.onnx`` file, or, in a folder without PyTorch weights, its
    ``model.onnx`` or its only graph (Optimum's quantizer writes ``model_quantized.onnx``), or, where the folder
    has no graph of its own, its ``onnx/model.onnx`` (sentence-transformers' and transformers.js' layout)."""
    local = Path(path).expanduser()
    if local.is_file() and local.suffix == ".onnx":
        return local
    graphs = folder_graphs(local)
    if (local / "model.onnx") in graphs:
        return local / "model.onnx"
    if not graphs and local.is_dir() and not _torch_weights(local) and (local / "onnx" / "model.onnx").is_file():
        return local / "onnx" / "model.onnx"
    return graphs[0] if len(graphs) == 1 else None


def layout_folder(file: Path) -> Path:
    """The folder holding an ONNX graph's ``config.json`` and tokenizer: the graph's own, or, where that has no
    ``config.json``, the one above it (sentence-transformers' backend keeps ``onnx/model.onnx`` beside
    ``modules.json``, its pooling and the tokenizer; transformers.js does the same)."""
    if not (file.parent / "config.json").is_file() and (file.parent.parent / "config.json").is_file():
        return file.parent.parent
    return file.parent


def _torch_weights(folder: Path) -> bool:
    return any(folder.glob("*.safetensors")) or any(folder.glob("pytorch_model*.bin"))


def folder_graphs(folder: Path) -> list[Path]:
    """The ``.onnx`` files of a folder that holds no PyTorch weights (none for anything else: such a folder loads
    as the PyTorch model; naming its ``.onnx`` file audits the graph)."""
    if not folder.is_dir() or _torch_weights(folder):
        return []
    return sorted(folder.glob("*.onnx"))


def runs_onnx(spec: ModelSpec) -> bool:
    """Whether ``spec`` is audited with ONNX Runtime (an ONNX file, or a ``runtime: onnx`` build)."""
    return spec.runtime == "onnx" or onnx_file(spec.path) is not None


def cache_dir() -> Path:
    """Where exports are kept: ``$BERTPROBE_CACHE``, else ``$XDG_CACHE_HOME/bertprobe`` (``~/.cache/bertprobe``)."""
    root = os.environ.get("BERTPROBE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "bertprobe")
    return Path(root) / "onnx"


class OnnxModel:
    """An ONNX Runtime session called as a PyTorch model is: ``model(**batch).logits`` (CPU float32 tensors), or
    ``.last_hidden_state`` for an encoder's graph."""

    def __init__(self, file: Path, config: Any, device: torch.device) -> None:
        ort = onnx_runtime()
        options = ort.SessionOptions()
        options.intra_op_num_threads = torch.get_num_threads()  # as many threads as torch uses
        options.log_severity_level = 3
        cuda = device.type == "cuda" and "CUDAExecutionProvider" in ort.get_available_providers()
        providers = (["CUDAExecutionProvider"] if cuda else []) + ["CPUExecutionProvider"]
        try:
            self.session = ort.InferenceSession(str(file), options, providers=providers)
        except Exception as exc:  # onnxruntime's Fail/InvalidGraph/...: a broken or foreign file
            raise TargetError(f"ONNX Runtime cannot load '{file}': {first_line(exc, type(exc).__name__)}") from None
        self.file, self.config = file, config
        self.device = torch.device("cuda") if cuda else torch.device("cpu")
        self.note = "" if cuda or device.type == "cpu" else (
            f"device {device} asked for, but this onnxruntime has no CUDA provider (providers: "
            f"{', '.join(ort.get_available_providers())}): the ONNX model runs on the CPU; install onnxruntime-gpu for CUDA")
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        unknown = [n for n in self.input_names if n not in INPUTS]
        if unknown or "input_ids" not in self.input_names:
            raise TargetError(f"'{file}': the graph's inputs are {', '.join(self.input_names)}; bertprobe feeds "
                              f"{', '.join(INPUTS)} (export with input_names=[...] as Optimum and torch.onnx.export do)")

    def __call__(self, **batch: torch.Tensor) -> Any:
        if any(k not in INPUTS for k in batch):
            raise TargetError(f"an ONNX model takes only its inputs ({', '.join(self.input_names)}), "
                              f"not {', '.join(k for k in batch if k not in INPUTS)}")
        feeds = {k: v.detach().cpu().numpy() for k, v in batch.items() if k in self.input_names}
        outputs = self.session.run(self.output_names, feeds)
        named = {n: torch.from_numpy(o) for n, o in zip(self.output_names, outputs)}
        named.setdefault("logits", torch.from_numpy(outputs[0]))
        if HIDDEN not in named and outputs[0].ndim == 3 and not set(LOGITS) & set(self.output_names):
            named[HIDDEN] = named[self.output_names[0]]  # an encoder's graph whose output is named otherwise
        if len(outputs) >= 2 and not {"start_logits", "end_logits"} & set(named):  # a reader's graph, outputs
            named.setdefault("start_logits", torch.from_numpy(outputs[0]))  # named otherwise: start, end in order
            named.setdefault("end_logits", torch.from_numpy(outputs[1]))
        return SimpleNamespace(**named)

    def eval(self) -> OnnxModel:
        return self

    def parameters(self) -> Iterator[torch.Tensor]:
        """The graph's weights (initializers), for the report's parameter count and bytes."""
        import onnx
        from onnx import numpy_helper

        graph = onnx.load(str(self.file)).graph
        for init in graph.initializer:
            yield torch.from_numpy(numpy_helper.to_array(init).copy())

    def buffers(self) -> list[torch.Tensor]:
        return []


@dataclass
class OnnxTarget(Target):
    """A Target whose forward passes run in ONNX Runtime: predictions only (see ``ONNX_LACKS``)."""

    @property
    def capabilities(self) -> frozenset[str]:
        caps = set(self.task.capabilities) - set(ONNX_LACKS)
        if self.gradient_model is not None:  # a build of a PyTorch model: its float twin gives input gradients
            caps.add("input-gradients")
        if getattr(self.tokenizer, "mask_token_id", None) is not None:
            caps.add("mask-token")
        return frozenset(caps)

    @property
    def input_names(self) -> frozenset[str]:  # type: ignore[override]
        return frozenset(self.model.input_names)

    @property
    def token_budget(self) -> int | None:  # type: ignore[override]
        return self.spec.token_budget

    def attention_sites(self) -> Any:
        raise TargetError(f"{self.name} runs in ONNX Runtime: {ONNX_LACKS['heads']}")

    @contextlib.contextmanager
    def eager_attention(self) -> Iterator[None]:
        raise TargetError(f"{self.name} runs in ONNX Runtime: {ONNX_LACKS['attentions']}")
        yield  # pragma: no cover


def lacks(spec: ModelSpec) -> frozenset[str]:
    """The capabilities a model ``spec`` names lacks because it runs in ONNX Runtime (none for a PyTorch model): a
    ``runtime: onnx`` build of a PyTorch model has its twin's input gradients, an ONNX file has no twin."""
    if onnx_file(spec.path) is not None:
        return frozenset(ONNX_LACKS)
    return frozenset(ONNX_LACKS) - {"input-gradients"} if spec.runtime == "onnx" else frozenset()


def refusal(probe_id: str, probe_name: str, missing: Sequence[str], model: str) -> str:
    """Why a probe cannot run on an ONNX model, and what to do instead."""
    reasons = "; ".join(f"{m}: {ONNX_LACKS.get(m, m)}" for m in missing)
    transfer = (f"; a trigger found there is tested on the ONNX model with params.transfer_model: {model}"
                if "input-gradients" in missing else "")
    return (f"probe {probe_id} ({probe_name}) cannot run on {model}, which runs in ONNX Runtime ({reasons}); run it on "
            f"the PyTorch model instead (give the probe 'model:' naming it{transfer}), or leave it out with --only")


def is_quantized(file: Path) -> bool:
    """Whether an ONNX graph holds integer matmuls (an int8 build, ours or the user's)."""
    import onnx

    graph = onnx.load(str(file), load_external_data=False).graph
    return any(node.op_type in ("DynamicQuantizeLinear", "MatMulInteger", "DynamicQuantizeMatMul", "QLinearMatMul")
               for node in graph.node)


# ---- builds: export and quantize -----------------------------------------------------------------
def onnx_variant(base: Target, model: Any, spec: ModelSpec, data: Any = None, say: Any = None) -> tuple[OnnxTarget, list[str]]:
    """The ONNX Runtime build of ``model`` (``base``'s, maybe pruned) that ``spec`` asks for, and notes."""
    say = say or (lambda message: None)
    onnx_runtime()
    notes: list[str] = []
    if isinstance(base, OnnxTarget):
        file = base.model.file
    else:
        file, diff, n, attention = export_verified(base, model, data, say)
        notes.append(f"exported to ONNX (torch.onnx legacy exporter, opset {OPSET}, {attention} attention traced); "
                     f"largest |{compared(base)} difference| against PyTorch on {n} examples: {diff:.2g}")
    quantized = False
    if spec.quantize == "int8-dynamic":
        say(f"quantizing {spec.label} (int8-dynamic, ONNX Runtime)")
        file = quantize_cached(file, spec.per_channel, spec.reduce_range)
        quantized = True
        notes.append(f"int8-dynamic (ONNX Runtime quantize_dynamic: QInt8 weights, per_channel={spec.per_channel}, "
                     f"reduce_range={spec.reduce_range}); activations are scaled per tensor, that is per batch, so a "
                     f"prediction may depend on the batch it runs in (padding included): batch_size: 1 audits the "
                     "build as served one request at a time")
    elif spec.quantize != "none":
        raise TargetError(f"quantize: {spec.quantize} has no ONNX Runtime build; use int8-dynamic with runtime: onnx")
    from bertprobe.tasks.resolve import task_options

    onnx_model = OnnxModel(file, base.model.config, base.device)
    task = replace(type(base.task).bind(base.model.config, task_options(spec)), label_map=base.task.label_map)
    twin = None if isinstance(base, OnnxTarget) else model  # the PyTorch weights exported: input gradients
    target = OnnxTarget(spec=spec, model=onnx_model, tokenizer=base.tokenizer, task=task, device=onnx_model.device,
                        dtype=torch.float32, quantized=quantized, encode_cache=base.encode_cache, gradient_model=twin)
    notes.append(f"runs in ONNX Runtime {onnx_runtime().__version__} ({', '.join(onnx_model.session.get_providers())}); "
                 f"the graph audited: {file.name}, sha256 {file_sha256(file)[:16]}")
    notes += [onnx_model.note] if onnx_model.note else []
    return target, notes


def weights_key(model: Any, *extra: str) -> str:
    """sha256 over the model's class, config and every tensor's name, shape, dtype and bytes."""
    digest = hashlib.sha256()
    for part in (type(model).__name__, model.config.to_json_string(use_diff=False), *extra):
        digest.update(part.encode("utf-8"))
    for name, tensor in model.state_dict().items():
        t = tensor.detach().cpu().contiguous().reshape(-1)  # 0-d tensors too
        digest.update(f"{name}:{tuple(tensor.shape)}:{t.dtype}".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def _sample(base: Target, data: Any, n: int = 32) -> list[Any]:
    """Examples to trace and verify the export with: the suite's first ``n``, and synthetic ones of two lengths
    (a padded row in every trace, so the exported graph keeps the attention mask)."""
    from bertprobe.data.dataset import Example

    pair = bool(data is not None and data.examples and data.examples[0].text_pair is not None)
    choices = None
    if base.task.rows_per_choice:  # as many choices as the data's (a batch holds one count of choices)
        theirs = data.examples[0].choices if data is not None and data.examples and data.examples[0].choices else ()
        choices = tuple(f"choice {i}" for i in range(len(theirs))) or ("it rained all day", "the sun came out")
    long = "the film was a quiet , patient delight from its first scene to the very last one , and I loved it"
    words = tuple(long.split(" "))
    spans, at = [], 0
    for w in words:
        spans.append((at, at + len(w)))
        at += len(w) + 1
    made = [Example(text=long, text_pair="a second text" if pair else None, choices=choices, words=words,
                    spans=tuple(spans)),
            Example(text="dull", text_pair="short" if pair else None, choices=choices, words=("dull",), spans=((0, 4),))]
    own = list(data.examples[:n]) if data is not None and getattr(data, "examples", None) else []
    if choices:
        own = [ex for ex in own if ex.choices and len(ex.choices) == len(choices)]
    return made + own


def export_verified(base: Target, model: Any, data: Any, say: Any) -> tuple[Path, float, int, str]:
    """Export ``model`` to ONNX once per weights and attention (cached), and check its logits (an encoder's last
    hidden states, at the tokens the attention mask keeps) against PyTorch's on a sample; also returns the attention
    implementation traced."""
    cpu = model if next(model.parameters()).device.type == "cpu" and next(model.parameters()).dtype == torch.float32 \
        else _float_cpu_copy(model)
    reference = replace(base, model=cpu, device=torch.device("cpu"), dtype=torch.float32, compiled=None,
                        encode_cache=None)
    examples = _sample(base, data)
    rows = [r for r in reference.encode(examples[:2], cache=False).rows]
    with contextlib.ExitStack() as stack:
        # traced with eager attention where the model has it: plain MatMul/Softmax, which ONNX Runtime runs 3-7%
        # faster in int8 than the SDPA trace's masking (IsNaN/Where; benchmarks/onnx_int8_ceiling.py); the export
        # is verified below against the model's own attention either way
        with contextlib.suppress(AttributeError, ValueError, NotImplementedError):  # no switchable attention
            stack.enter_context(reference.eager_attention())
        attention = str(getattr(cpu.config, "_attn_implementation", None) or "default")  # what is traced
        key = weights_key(cpu, f"opset={OPSET}", f"torch={torch.__version__}", "exporter=legacy",
                          f"attention={attention}")
        file = cache_dir() / key[:24] / "model.onnx"
        if not file.is_file():
            say(f"exporting {base.spec.label} to ONNX (opset {OPSET}) into {file.parent}")
            _export(reference, cpu, rows, file)
    onnx_model = OnnxModel(file, model.config, torch.device("cpu"))
    got = _outputs(reference, onnx_model, examples)
    want = _outputs(reference, cpu, examples)
    diff = max(float((g - w).abs().max()) for g, w in zip(got, want)) if got else 0.0
    if not diff <= FP32_TOLERANCE:  # also NaN
        raise TargetError(f"the ONNX export of {base.spec.label} differs from PyTorch by {diff:.3g} in the {compared(base)}s on "
                          f"{len(examples)} examples (tolerance {FP32_TOLERANCE:g}); the export is wrong for this "
                          f"model: audit the PyTorch model, or export it yourself and pass the .onnx as model.path "
                          f"(file: {file})")
    return file, diff, len(examples), attention


def _float_cpu_copy(model: Any) -> Any:
    import copy

    return copy.deepcopy(model).to("cpu", torch.float32).eval()


def compared(target: Target) -> str:
    """What an export is checked on: ``logit``, or ``hidden-state`` for a headless task (an embedder)."""
    return "hidden-state" if _headless(target) else "logit"


def _headless(target: Target) -> bool:
    """Whether ``target``'s task reads the encoder's hidden states (a bare encoder, a sentence embedder)."""
    return bool(getattr(target.task, "headless", False) or "embeddings" in target.task.capabilities)


def output_names(target: Target, out: Any) -> list[str]:
    """The outputs an export of ``target``'s model returns, of a forward pass's ``out``: a reader's start and end
    logits, a head's logits, or a headless model's last hidden states."""
    heads = [n for n in LOGITS if getattr(out, n, None) is not None]
    if _headless(target) or not heads:
        if getattr(out, HIDDEN, None) is None:
            raise TargetError(f"{target.spec.label}: its forward pass returns neither logits nor {HIDDEN}; "
                              "bertprobe exports one or the other")
        return [HIDDEN]
    return [n for n in heads if n != "logits"] or ["logits"]  # a reader's start and end, else the logits


def _outputs(target: Target, model: Any, examples: Sequence[Any]) -> list[torch.Tensor]:
    """Every named output of ``model`` on ``examples`` (one padded batch), as float32 CPU tensors; hidden states
    at the tokens the attention mask keeps (a padded position's state is no output anything reads)."""
    encoded = target.encode(list(examples), cache=False)
    batch = target.collate(encoded.rows)
    batch = {k: v.cpu() for k, v in batch.items()}
    with torch.inference_mode():
        out = model(**batch)
    names = output_names(target, out)
    if names == [HIDDEN]:
        keep = batch["attention_mask"].bool() if "attention_mask" in batch else slice(None)
        return [getattr(out, HIDDEN).float()[keep]]
    return [getattr(out, n).float() for n in names]


def _export(target: Target, model: Any, rows: list[Any], file: Path) -> None:
    """Trace ``model`` on ``rows`` (two rows of different lengths) with the legacy exporter, dynamic in batch,
    choices and sequence length, into ``file`` (written whole or not at all)."""
    import warnings

    batch = {k: v.cpu() for k, v in target.collate(rows).items()}
    names = [n for n in INPUTS if n in batch]
    width = batch["input_ids"].shape[-1]
    mc = target.task.rows_per_choice
    axes = {n: ({0: "batch", 1: "choices", 2: "sequence"} if mc else {0: "batch", 1: "sequence"}) for n in names}
    with torch.inference_mode():
        out = model(**batch)
    outputs = output_names(target, out)
    for n in outputs:
        shape = getattr(out, n).shape
        axes[n] = {0: "batch", 1: "sequence"} if n == HIDDEN else {
            0: "batch", **{i: ("choices" if mc else "sequence") for i in range(1, len(shape))
                           if shape[i] == (batch["input_ids"].shape[1] if mc else width)}}
    file.parent.mkdir(parents=True, exist_ok=True)
    partial = _partial(file)

    class Wrapped(torch.nn.Module):  # positional inputs in INPUTS order, outputs as a tuple
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, *args: torch.Tensor) -> Any:
            result = self.inner(**dict(zip(names, args)))
            return tuple(getattr(result, n) for n in outputs)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(Wrapped().eval(), tuple(batch[n] for n in names), str(partial), input_names=names,
                              output_names=outputs, dynamic_axes=axes, opset_version=OPSET, dynamo=False)
    except Exception as exc:
        partial.unlink(missing_ok=True)
        raise TargetError(f"cannot export {target.spec.label} to ONNX (opset {OPSET}): "
                          f"{type(exc).__name__}: {first_line(exc, type(exc).__name__)}") from None
    partial.replace(file)


def _partial(file: Path) -> Path:
    """A scratch file beside ``file``, its own for this process (two runs exporting the same weights at once
    each write their own, and the last replace wins whole)."""
    import tempfile

    handle, name = tempfile.mkstemp(prefix=f".{file.stem}.", suffix=".partial.onnx", dir=file.parent)
    os.close(handle)
    return Path(name)


def quantize_cached(file: Path, per_channel: bool, reduce_range: bool) -> Path:
    """``file`` quantized with ONNX Runtime's dynamic quantization (QInt8 weights), kept beside it."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    name = f"{file.stem}.int8{'.pc' if per_channel else ''}{'.rr' if reduce_range else ''}.onnx"
    if file.parent.parent == cache_dir():  # an export of ours: beside it
        out = file.with_name(name)
    else:  # a user's file: under the cache, by the file's hash
        out = cache_dir() / "int8" / hashlib.sha256(file.read_bytes()).hexdigest()[:24] / name
    import onnxruntime

    manifest = out.with_name(out.name + ".manifest")
    expected = f"source {file_sha256(file)} onnxruntime {onnxruntime.__version__}"
    if out.is_file():  # reused only when it is the quantization of this very file by this onnxruntime, unaltered
        recorded = manifest.read_text(encoding="utf-8").splitlines() if manifest.is_file() else []
        if recorded != [expected, f"output {file_sha256(out)}"] or not is_quantized(out):
            out.unlink()
            manifest.unlink(missing_ok=True)
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = _partial(out)
        try:
            with _quiet_root():  # quantize_dynamic logs advice on the root logger
                quantize_dynamic(str(file), str(partial), weight_type=QuantType.QInt8, per_channel=per_channel,
                                 reduce_range=reduce_range)
        except Exception as exc:
            partial.unlink(missing_ok=True)
            raise TargetError(f"cannot quantize '{file}' with ONNX Runtime: {type(exc).__name__}: "
                              f"{first_line(exc, type(exc).__name__)}") from None
        partial.replace(out)
        manifest.write_text(f"{expected}\noutput {file_sha256(out)}\n", encoding="utf-8")
    return out


def file_sha256(file: Path) -> str:
    """sha256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with file.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def _quiet_root() -> Iterator[None]:
    import logging

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def graph_problem(file: Path) -> str | None:
    """Why ``file`` is no readable ONNX graph (empty, truncated, not protobuf), in one line; None when it parses.
    Read without its external data, so a graph of any size is checked in a fraction of a second."""
    try:
        size = file.stat().st_size
    except OSError as exc:
        return f"'{file}' cannot be read ({type(exc).__name__})"
    if size == 0:
        return f"'{file}' is empty (0 bytes): the export did not finish; export the model again"
    try:
        import onnx
    except ImportError:
        return None  # the runtime check names the missing extra
    try:
        onnx.load(str(file), load_external_data=False)
    except Exception as exc:  # google.protobuf's DecodeError and friends
        return (f"'{file}' is not a readable ONNX graph ({type(exc).__name__}: {first_line(str(exc)) or 'no detail'}; "
                f"{size:,} bytes): it is truncated or not an ONNX file; export the model again")
    return None
