"""Safe loading of a Hugging Face model: weights, tokenizer, task, device and dtype, each checked."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import torch

from bertprobe.errors import TargetError, first_line
from bertprobe.model.spec import ModelSpec
from bertprobe.model.target import Target
from bertprobe.tasks.base import Task

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


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


def looks_local(path: str) -> bool:
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


def detect_task(config: Any, requested: str = "auto", tasks: Any = None) -> str:
    """The name of the model's task (see ``bertprobe.tasks.task_class``)."""
    from bertprobe.tasks import task_class

    return task_class(config, requested, tasks).name


_LOCAL_LOADER: ContextVar[Callable[[ModelSpec, Any], Target] | None] = ContextVar("bertprobe_local_loader", default=None)


@contextlib.contextmanager
def local_models_through(loader: Callable[[ModelSpec, Any], Target]) -> Iterator[None]:
    """While the block runs, a served model's twin loads through ``loader(spec, tasks)`` (the run's model cache, so
    a checkpoint that is also the suite's baseline loads once) instead of ``load_target``."""
    token = _LOCAL_LOADER.set(loader)
    try:
        yield
    finally:
        _LOCAL_LOADER.reset(token)


def load_target(spec: ModelSpec, tasks: Any = None, codecs: Any = None) -> Target:
    """Load tokenizer and model per ``spec``, refusing pickle weights and remote code unless allowed.
    ``tasks``: the registered tasks (default: the built-in ones). An ``.onnx`` file, or a folder holding
    ``model.onnx`` and no PyTorch weights, runs in ONNX Runtime (``bertprobe.model.onnx``)."""
    from bertprobe.model.onnx import folder_graphs, onnx_file

    if spec.endpoint is not None:  # a served model (bertprobe.model.endpoint)
        from bertprobe.model.endpoint import load_endpoint_target

        return load_endpoint_target(spec, tasks, codecs, load_local=_LOCAL_LOADER.get() or load_target)
    if onnx_file(spec.path) is not None:
        return load_onnx_target(spec, tasks)
    graphs = folder_graphs(Path(spec.path).expanduser())
    if graphs:  # several graphs, none named model.onnx
        raise TargetError(f"'{spec.path}' holds {len(graphs)} ONNX graphs ({', '.join(g.name for g in graphs)}) and no "
                          f"model.onnx: name the one to audit in model.path, e.g. {graphs[0]}")
    from bertprobe.model.quantize import defer_torchao, preload_quietly, uses_torchao

    defer_torchao()  # torchao only when a variant quantizes (bertprobe.model.variants)
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
    elif looks_local(path):
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
            raise TargetError(f"cannot read the model config in '{path}': {first_line(exc, type(exc).__name__)}") from None
        raise TargetError(
            f"cannot load '{path}': the Hugging Face Hub is unreachable and the model is not cached; "
            "pass --model PATH to a local model directory"
        ) from None
    except ValueError as exc:
        raise TargetError(f"cannot load '{path}': {first_line(exc, type(exc).__name__)}") from None
    if uses_torchao(config):
        preload_quietly()  # transformers imports torchao for such a checkpoint: quietly
    from bertprobe.tasks import resolve_task, task_options

    task = resolve_task(config, spec.task, tasks, task_options(spec))
    device = resolve_device(spec.device)
    dtype = resolve_dtype(spec.dtype, device, getattr(config, "dtype", None) or getattr(config, "torch_dtype", None))
    if local.is_dir():
        check_tokenizer_files(local)
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(source, **common)
    except OSError as exc:
        raise TargetError(f"cannot load the tokenizer of '{path}': {first_line(exc, type(exc).__name__)}") from None
    except Exception as exc:  # tokenizers raises plain Exception for a corrupt tokenizer.json
        where = f"{local / 'tokenizer.json'}" if (local / "tokenizer.json").is_file() else path
        raise TargetError(f"cannot read the tokenizer in '{where}': {first_line(exc, type(exc).__name__)}; "
                          "is the file complete and from the model's training?") from None
    try:
        model, info = getattr(transformers, task.model_class).from_pretrained(
            source,
            dtype=dtype,
            use_safetensors=None if spec.allow_pickle else True,
            output_loading_info=True,
            ignore_mismatched_sizes=True,  # reported below by tensor name, not as a 60-line RuntimeError
            **common,
        )
    except OSError as exc:
        first = first_line(exc, type(exc).__name__)
        if "safetensors" in first.lower() and not spec.allow_pickle:
            raise TargetError(
                f"'{path}' has no safetensors weights; if you trust it, set 'allow_pickle: true' under model:"
            ) from None
        raise TargetError(f"cannot load '{path}': {first}; pass --model PATH to a local model directory") from None
    except Exception as exc:  # SafetensorError, UnpicklingError, RuntimeError, ...: a broken weights file
        files = ", ".join(p.name for p in sorted(local.glob("*.safetensors")) + sorted(local.glob("*.bin"))) if local.is_dir() else path
        raise TargetError(f"cannot read the weights of '{path}' ({files}): {type(exc).__name__}: {first_line(exc, type(exc).__name__)}; "
                          "the file is truncated, corrupt or not a weights file") from None
    notes = check_loading_info(info, path, task, spec.allow_missing_weights)
    check_vocabulary(tokenizer, model, path)
    notes += check_padding(tokenizer, model, path)
    model.to(device)
    model.eval()
    return Target(spec=spec, model=model, tokenizer=tokenizer, task=task, device=device, dtype=dtype, notes=notes,
                  load_companion=lambda **fields: load_target(ModelSpec(**fields), tasks))


def load_onnx_target(spec: ModelSpec, tasks: Any = None) -> Target:
    """Load the ONNX graph ``spec.path`` names with its folder's config and tokenizer."""
    from bertprobe.model.onnx import (
        OnnxModel,
        OnnxTarget,
        folder_graphs,
        graph_problem,
        is_quantized,
        layout_folder,
        onnx_file,
        onnx_runtime,
    )

    onnx_runtime()
    import transformers

    from bertprobe.tasks import resolve_task, task_options

    file = onnx_file(spec.path)
    if file is None:
        raise TargetError(f"'{spec.path}' is neither an .onnx file nor a folder holding model.onnx")
    folder = layout_folder(file)  # the graph's own, or above onnx/ (sentence-transformers' layout)
    if not (folder / "config.json").is_file():
        raise TargetError(f"'{file}' needs its model's config.json beside it (Optimum's layout: model.onnx, config.json "
                          "and the tokenizer files in one folder; or the folder above it, sentence-transformers' "
                          "onnx/model.onnx); save it with config.save_pretrained(FOLDER)")
    transformers.utils.logging.set_verbosity_error()
    try:
        config = transformers.AutoConfig.from_pretrained(str(folder), trust_remote_code=False)
    except (OSError, ValueError) as exc:
        raise TargetError(f"cannot read the model config in '{folder}': {first_line(exc, type(exc).__name__)}") from None
    task = resolve_task(config, spec.task, tasks, task_options(spec))
    check_tokenizer_files(folder)
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
    except Exception as exc:
        raise TargetError(f"cannot load the tokenizer in '{folder}': {first_line(exc, type(exc).__name__)}") from None
    problem = graph_problem(file)
    if problem:
        raise TargetError(problem)
    model = OnnxModel(file, config, resolve_device(spec.device))
    vocab = getattr(config, "vocab_size", None)
    if isinstance(vocab, int) and len(tokenizer) > vocab:
        raise TargetError(f"'{folder}': the tokenizer has {len(tokenizer)} tokens but the model's vocabulary only "
                          f"{vocab}; the tokenizer is not the model's own")
    notes = check_padding(tokenizer, model, spec.path)
    notes.append(f"runs in ONNX Runtime {onnx_runtime().__version__} ({', '.join(model.session.get_providers())}): "
                 f"{file.name} as stored" + (f", with the config, tokenizer and layout of {folder}"
                                             if folder != file.parent else ""))
    others = [g.name for g in folder_graphs(file.parent) if g != file] if file != Path(spec.path).expanduser() else []
    if others:  # a folder given: model.onnx chosen among several
        notes.append(f"the folder also holds {', '.join(others)}: name one in model.path ({folder / others[0]}) "
                     "to audit that graph")
    notes += [model.note] if model.note else []
    return OnnxTarget(spec=spec, model=model, tokenizer=tokenizer, task=task, device=model.device,
                      dtype=torch.float32, quantized=is_quantized(file), notes=notes)


TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model",
                   "tokenizer.model", "spm.model", "bpe.codes")


# Tensors a checkpoint may lack or carry without harm: buffers rebuilt at load, and heads the task
# does not use (the NSP head of a pre-training checkpoint loaded as a masked LM, a pooler it ignores).
_HARMLESS = ("position_ids", "token_type_ids", "cls.seq_relationship.", "pooler.", "lm_head.", "cls.predictions.")


def local_tokenizer(directory: Path) -> Any | None:
    """The tokenizer of a local model folder, without its weights (None where it does not load: loading the model
    names the problem then). Never runs the folder's own code."""
    import transformers

    if not directory.is_dir() or not any((directory / n).is_file() for n in TOKENIZER_FILES):
        return None
    transformers.utils.logging.set_verbosity_error()  # as load_target: its notes are bertprobe's to give
    try:
        return transformers.AutoTokenizer.from_pretrained(str(directory), trust_remote_code=False)
    except Exception:  # noqa: BLE001 - any failure is loading's to report, with its own message
        return None


def check_tokenizer_files(directory: Path) -> None:
    """A model folder without tokenizer files would get a placeholder tokenizer (every word [UNK])."""
    names = {p.name for p in directory.iterdir()}
    if not any(n in names for n in TOKENIZER_FILES):
        raise TargetError(f"{directory} has no tokenizer files ({', '.join(TOKENIZER_FILES[:3])}, ...); copy the "
                          "tokenizer the model was trained with into it (tokenizer.save_pretrained)")


def check_loading_info(info: dict[str, Any], path: str, task: Task, allow_missing: bool) -> list[str]:
    """Missing, unexpected or re-initialised tensors are an error naming them (a random head gives random
    numbers); with ``allow_missing_weights: true`` they are notes in the report instead."""
    def named(keys: Any) -> list[str]:
        return sorted(str(k if isinstance(k, str) else k[0]) for k in keys)

    missing = [k for k in named(info.get("missing_keys") or ()) if not k.endswith(("position_ids", "token_type_ids"))]
    unexpected = [k for k in named(info.get("unexpected_keys") or ()) if not any(h in k for h in _HARMLESS)]
    mismatched = named(info.get("mismatched_keys") or ())
    notes = []
    if task.headless:
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
        problems.append(f"in the checkpoint but not used by a {task.name} model: {', '.join(unexpected[:6])}")
    if problems and not allow_missing:
        raise TargetError(f"'{path}': weights do not fit the model: {'; '.join(problems)}; the audit would measure "
                          "random weights. Fix the checkpoint, or set 'allow_missing_weights: true' under model: "
                          "to accept it (recorded as a warning)")
    return notes + [f"WARNING (allow_missing_weights): {p}" for p in problems]


def check_padding(tokenizer: Any, model: Any, path: str) -> list[str]:
    """Make sure inputs can be batched: the harness pads every batch. A tokenizer without a padding token
    (GPT-2 and other decoders) pads with its end-of-sequence token, which the model is told about
    (``config.pad_token_id``), so its classifier reads the last real token; with neither, the model is refused."""
    notes: list[str] = []
    if tokenizer.pad_token is None:
        eos = tokenizer.eos_token
        if eos is None:
            raise TargetError(f"'{path}': the tokenizer has no padding token and no end-of-sequence token to pad with, "
                              "so inputs cannot be batched; add a pad_token to its tokenizer_config.json")
        tokenizer.pad_token = eos
        notes.append(f"the tokenizer has no padding token: batches are padded with its end-of-sequence token {eos!r} "
                     f"(id {tokenizer.pad_token_id}), set as the model's pad_token_id")
    config = getattr(model, "config", None)
    if config is not None and getattr(config, "pad_token_id", None) is None:
        config.pad_token_id = tokenizer.pad_token_id
    return notes


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
