"""Variants of a loaded model: the build you will deploy (pruned, quantized, compiled).

A model entry of a suite derives a variant from its stored weights: ``prune_heads: 0.3`` physically
removes that share of heads, least important first by Michel et al.'s importance on the suite's data
(the head-pruning probe's code, ``bertprobe.model.pruning``); ``quantize: int8-dynamic | int8-weight-only``
quantizes every linear layer with torchao; ``compile: true`` runs batched prediction through
``torch.compile(dynamic=True)``; ``runtime: onnx`` exports it to ONNX and runs it in ONNX Runtime, quantized
there with ``quantize: int8-dynamic`` (``bertprobe.model.onnx``). Pruning comes first (importance needs a
backward pass), then export, then quantization, then compilation. The stored model is never modified: each variant is a copy.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import torch

from bertprobe.errors import TargetError
from bertprobe.model.architectures import heads_per_layer
from bertprobe.model.target import Encoded, Target
from bertprobe.tasks.resolve import task_options


def slow_int8_note(mode: str, device: Any) -> str:
    """A warning when dynamic int8 will run slower than float32: on a CPU without AVX-512 (torch's kernel
    dispatch reports AVX2 or less) ``aten::_int_mm`` has no fast kernel. Measured on MiniLM-L6, SST-2:
    about 7 examples/s against float32's 170 on an AVX2-only EPYC, where an AVX-512 VNNI EPYC ran int8
    1.85x faster than float32. Weight-only int8 keeps float matmuls and is unaffected."""
    if mode != "int8-dynamic" or torch.device(device).type != "cpu":
        return ""
    capability = str(torch.backends.cpu.get_cpu_capability())
    if "AVX512" in capability:
        return ""
    return (f"this CPU runs torch at {capability} (no AVX-512): int8-dynamic matmuls take a slow path here "
            "and run far slower than float32, and its 8-bit products may saturate (logits further from float32's "
            "than on a VNNI CPU); measure speed and agreement on the CPU you deploy on, or use int8-weight-only")


def slow_half_note(dtype: Any, device: Any) -> str:
    """A warning when a half-precision model will run far slower than float32 on this CPU: without native
    bfloat16 (AVX-512 BF16 or AMX) or float16 (AMX-FP16) instructions, torch converts to float32 around each
    matmul. Measured at BERT-base size on an AVX2-only EPYC, 2 threads: a bfloat16 pass over 64 SST-2
    sentences took 23.7 s against float32's 3.36 s (7.1x); at MiniLM size, one padded batch of 64 took
    3.69 s in float16 against 0.71 s (5.2x). The note is about time, not the numbers."""
    if torch.device(device).type != "cpu" or dtype not in (torch.bfloat16, torch.float16):
        return ""
    cpu = torch.cpu
    native = getattr(cpu, "_is_amx_fp16_supported", lambda: False)() if dtype == torch.float16 else (
        getattr(cpu, "_is_avx512_bf16_supported", lambda: False)() or getattr(cpu, "_is_amx_tile_supported", lambda: False)())
    if native:
        return ""
    name = str(dtype).removeprefix("torch.")
    return (f"this CPU has no native {name} instructions (torch runs at {torch.backends.cpu.get_cpu_capability()}): "
            f"{name} is converted around every matmul and runs several times slower than float32 (on an AVX2 CPU: "
            "bfloat16 7.1x at BERT-base size, float16 5.2x at MiniLM size); audit in float32 unless you deploy "
            "this dtype on this CPU")


def derive_variant(base: Target, spec: Any, data: Any = None, log: Any = None) -> tuple[Target, list[str]]:
    """Return the variant of ``base`` that ``spec`` asks for, and notes for the report.

    ``data`` (labelled, aligned to the model) is needed only by ``prune_heads``.
    """
    notes: list[str] = []
    say = log or (lambda message: None)
    model = base.model
    if spec.prune_heads:
        model = _pruned(base, spec.prune_heads, data, notes, say)
    from bertprobe.model.onnx import OnnxTarget

    if spec.runtime == "onnx" or isinstance(base, OnnxTarget):
        from bertprobe.model.onnx import onnx_variant

        variant, onnx_notes = onnx_variant(base, model, spec, data, say)
        return variant, notes + onnx_notes
    if spec.per_channel or spec.reduce_range:
        raise TargetError(f"{spec.label}: per_channel and reduce_range are settings of ONNX Runtime's int8 build; "
                          "add runtime: onnx, or leave them out for torchao's")
    gradient_model = None
    quantized = False
    if spec.quantize != "none":
        from bertprobe.model.quantize import quantize_model

        say(f"quantizing {spec.label} ({spec.quantize}, torchao)")
        gradient_model = model  # the float weights, kept for input gradients (trigger search)
        model = quantize_model(copy.deepcopy(model), spec.quantize)
        quantized = True
        notes.append(f"{spec.quantize} (torchao); gradients for the trigger search come from the float weights")
        slow = slow_int8_note(spec.quantize, base.device)
        if slow:
            notes.append(slow)
            say(f"warning: {slow}")
    # the variant's own settings (thresholds), and the run's --label-map read as for the stored model
    task = replace(type(base.task).bind(model.config, task_options(spec)), label_map=base.task.label_map)
    variant = Target(spec=spec, model=model, tokenizer=base.tokenizer, task=task, device=base.device,
                     dtype=base.dtype, quantized=quantized, gradient_model=gradient_model,
                     encode_cache=base.encode_cache)
    if spec.compile:
        variant.compiled = torch.compile(model, dynamic=True)
        notes.append("batched prediction runs through torch.compile(dynamic=True); probes' own passes run eager")
    return variant, notes


def _pruned(base: Target, share: float, data: Any, notes: list[str], say: Any) -> Any:
    from bertprobe.model.pruning import (
        head_importance,
        least_important,
        normalize_by_layer,
        prune_heads,
    )

    if data is None or not data.examples or any(ex.label is None for ex in data.examples):
        raise TargetError(f"prune_heads needs labelled suite data to rank heads ({base.spec.path}); add a data: section")
    if "predictions" not in base.task.capabilities or base.task.word_tags:  # a loss over whole examples' rows
        raise TargetError(f"prune_heads ranks heads by the task loss; '{base.task.name}' models have none")
    sites = base.attention_sites()
    say(f"ranking heads of {base.spec.path} on {len(data)} examples for prune_heads: {share:g}")
    rows = base.task.example_rows(base, data)  # a reader: its questions' windows, a question's gradients summed
    if rows is not None:
        encoded, labels, owner = Encoded(list(rows.rows), list(rows.lengths)), rows.labels, rows.owner
    else:
        encoded, labels, owner = base.encode(data.examples), base.task.gold(data), None
    scores = normalize_by_layer(head_importance(base, base.batches(encoded), labels, owner=owner))
    drop = least_important(scores, share, heads_per_layer(sites))
    try:
        pruned, pruning_notes = prune_heads(base.model, drop)
    except ValueError as exc:
        raise TargetError(f"prune_heads: {exc}") from None
    pruned.eval()
    total = sum(heads_per_layer(sites))
    notes.append(f"{len(drop)} of {total} heads pruned by importance on the suite data")
    notes.extend(pruning_notes)
    return pruned
