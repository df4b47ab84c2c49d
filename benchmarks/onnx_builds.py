"""Benchmark (named onnx_builds.py, not onnx.py, which would shadow the onnx package for anything run from here): the builds a team may serve on a CPU, in one run: examples/s of torch fp32, torch bf16, torchao int8,
ONNX Runtime fp32 and ONNX Runtime int8 on the SST-2 fixture's dev set, with the accuracy of each and its agreement
with torch fp32 (predictions equal).

Passes are interleaved: each round runs every build once over the same encoded examples, in a rotated order, so
that a machine's load drifts over all of them alike; a build's speed is the median of its rounds (with the slowest
and fastest). ONNX Runtime gets as many threads as torch (``--threads``). The CPU's features are printed first:
torch's kernel level and the flags that decide int8 speed (AVX-512 VNNI, AVX-VNNI, AMX).

The AVX2 path on an AVX-512 machine: torch's matmuls run in oneDNN and MKL, which pick their kernels themselves,
so ``ATEN_CPU_CAPABILITY=avx2`` alone leaves bf16 and int8 on their AVX-512 kernels; all three switches together
force torch's AVX2 path: ``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2``. ONNX
Runtime has no such switch (its MLAS kernels are chosen by cpuid at run time, limited only at build time), so
its builds keep this machine's kernels: the script says so where torch's are limited.

Usage: python benchmarks/onnx_builds.py [--limit 872] [--threads 2] [--rounds 5] [--batch-size 32] [--reduce-range]
       [--per-channel]   (needs the [onnx] extra; torchao's build is left out where torchao is not installed)
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from common import SST2_DEV, SST2_MODEL, require, sst2_dev, sst2_target

from bertprobe.model.variants import derive_variant

FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16")


def cpu_features() -> str:
    """Torch's kernel level and the int8/bf16-relevant flags of /proc/cpuinfo (Linux)."""
    flags: set[str] = set()
    model = ""
    info = Path("/proc/cpuinfo")
    if info.is_file():
        for line in info.read_text().splitlines():
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
            elif line.startswith("model name") and not model:
                model = line.split(":", 1)[1].strip()
    have = [f for f in FLAGS if f in flags] or ["(unknown)"]
    return f"{model or 'CPU'}; torch kernels: {torch.backends.cpu.get_cpu_capability()}; flags: {', '.join(have)}"


def builds(base: Any, args: argparse.Namespace) -> list[tuple[str, Any]]:
    """(name, target) of every build this machine can make."""
    out: list[tuple[str, Any]] = [("torch fp32", base)]
    out.append(("torch bf16", sst2_target(dtype="bfloat16")))
    import importlib.util

    if importlib.util.find_spec("torchao") is not None:  # imported quietly by the variant
        out.append(("torchao int8", derive_variant(base, replace(base.spec, quantize="int8-dynamic"))[0]))
    else:
        print("torchao is not installed: its int8 build is left out")
    onnx = replace(base.spec, runtime="onnx")
    out.append(("ORT fp32", derive_variant(base, onnx)[0]))
    int8 = replace(onnx, quantize="int8-dynamic", per_channel=args.per_channel, reduce_range=args.reduce_range)
    out.append(("ORT int8", derive_variant(base, int8)[0]))
    return out


def compare_builds(made: list[tuple[str, Any]], examples: list[Any], encoded: Any, batch_size: int, rounds: int,
                   indent: str = "") -> None:
    """Each build's predictions (a warm-up pass), then ``rounds`` interleaved timed passes over ``encoded`` (each
    round every build once, in a rotated order), printed against the first build (torch fp32): median examples/s
    with the slowest and fastest round, accuracy on the examples' labels, predictions equal to the first's."""
    preds: dict[str, list[int]] = {}
    for name, target in made:  # the warm-up pass gives each build's predictions
        preds[name] = target.task.predict(target.logits(encoded, batch_size)).tolist()
    speeds: dict[str, list[float]] = {name: [] for name, _ in made}
    for r in range(rounds):
        order = made[r % len(made):] + made[: r % len(made)]
        for name, target in order:
            start = time.perf_counter()
            target.logits(encoded, batch_size)
            speeds[name].append(len(examples) / (time.perf_counter() - start))
    first = made[0][0]
    reference = statistics.median(speeds[first])
    gold = [ex.label for ex in examples]
    width = max(14, *(len(name) for name, _ in made))
    print(f"\n{indent}{'build':{width}} {'examples/s (spread)':>26} {'vs ' + first:>14} {'accuracy':>9} "
          f"{'equal to ' + first:>20}")
    for name, _ in made:
        median = statistics.median(speeds[name])
        accuracy = sum(p == g for p, g in zip(preds[name], gold)) / len(gold)
        equal = sum(p == q for p, q in zip(preds[name], preds[first]))
        spread = f"{median:,.1f} ({min(speeds[name]):,.1f}-{max(speeds[name]):,.1f})"
        print(f"{indent}{name:{width}} {spread:>26} {median / reference:13.2f}x {accuracy:9.4f} "
              f"{equal:>6} of {len(gold)} ({equal / len(gold):.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=872)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--per-channel", action="store_true")
    parser.add_argument("--reduce-range", action="store_true")
    args = parser.parse_args()
    require(SST2_MODEL, SST2_DEV)
    torch.set_num_threads(args.threads)  # before the ONNX sessions: they take torch's thread count
    import onnxruntime

    print(cpu_features())
    import os

    if os.environ.get("ATEN_CPU_CAPABILITY") and not os.environ.get("ONEDNN_MAX_CPU_ISA"):
        print("note: ATEN_CPU_CAPABILITY alone leaves oneDNN (bf16, int8 matmuls) on this CPU's own kernels; "
              "set ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 too")
    if os.environ.get("ORT_AVX2_SHIM"):  # set by benchmarks/onnx_avx2_speed.sh
        print(f"ONNX Runtime from {Path(onnxruntime.__file__).parent.parent}: its cpuid/xgetbv answered as an "
              "AVX2-only CPU (benchmarks/cpuid_avx2.c), so MLAS runs its AVX2 kernels")
    elif os.environ.get("ONEDNN_MAX_CPU_ISA"):
        print(f"torch limited to {os.environ['ONEDNN_MAX_CPU_ISA']}; ONNX Runtime has no such switch: its builds run "
              "on this CPU's own kernels")
    print(f"threads {args.threads}; torch {torch.__version__}; onnxruntime {onnxruntime.__version__}; "
          f"batch size {args.batch_size}; int8 per_channel={args.per_channel} reduce_range={args.reduce_range}")
    base = sst2_target()
    data = sst2_dev(base)
    examples = data.examples[: args.limit]
    made = builds(base, args)
    encoded = base.encode(examples)  # one tokenizer: every build reads the same rows
    compare_builds(made, examples, encoded, args.batch_size, args.rounds)


if __name__ == "__main__":
    main()
