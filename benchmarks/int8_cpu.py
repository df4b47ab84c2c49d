"""Benchmark: does dynamic int8 speed up prediction on *this* CPU? Warm examples/s of each build of the
SST-2 fixture, as the models table of a run measures them (``bertprobe.model.timing.measure_throughput``: the
median of timed passes after a warm-up pass, with the slowest and fastest), and the matmul underneath.

Why: torchao's dynamic int8 runs its matmuls through ``aten::_int_mm``, whose CPU kernel is fast with
AVX-512 VNNI and slow without it. The same build is 1.85x faster than float32 on one EPYC and many
times slower on another; a user's run reports the CPU it ran on (``slow_int8_note``), and this script
says which case a machine is.

Usage: python benchmarks/int8_cpu.py [--limit 200] [--threads 2]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import torch
from common import SST2_DEV, SST2_MODEL, require, sst2_dev, sst2_target

from bertprobe.model.timing import measure_throughput
from bertprobe.model.variants import derive_variant


def matmul_seconds(dtype: torch.dtype, repeats: int = 3) -> float:
    """Best time of one (1280 x 384) @ (384 x 1536) product: MiniLM's FFN on 32 sentences of 40 tokens."""
    if dtype == torch.int8:
        a = torch.randint(-128, 127, (1280, 384), dtype=torch.int8)
        b = torch.randint(-128, 127, (1536, 384), dtype=torch.int8).t()
        run = lambda: torch._int_mm(a, b)  # noqa: E731
    else:
        a, b = torch.randn(1280, 384), torch.randn(384, 1536)
        run = lambda: a @ b  # noqa: E731
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    require(SST2_MODEL, SST2_DEV)
    torch.set_num_threads(args.threads)
    print(f"CPU capability (torch): {torch.backends.cpu.get_cpu_capability()}; threads {args.threads}")
    fp32_mm, int8_mm = matmul_seconds(torch.float32), matmul_seconds(torch.int8)
    print(f"matmul 1280x384x1536: float32 {fp32_mm * 1e3:.1f} ms, int8 (_int_mm) {int8_mm * 1e3:.1f} ms "
          f"({fp32_mm / int8_mm:.2f}x float32's speed)")
    base = sst2_target()
    examples = sst2_dev(base).examples[: args.limit]
    rows = []
    for name, quantize in (("float32", "none"), ("int8-dynamic", "int8-dynamic"), ("int8-weight-only", "int8-weight-only")):
        target = base if quantize == "none" else derive_variant(base, replace(base.spec, quantize=quantize))[0]
        encoded = target.encode(examples)
        start = time.perf_counter()
        target.logits(encoded)  # the run's full pass: the warm-up
        first = len(encoded) / (time.perf_counter() - start)
        speed = measure_throughput(target, encoded)
        rows.append((name, first, speed))
    baseline = rows[0][2].median
    print(f"{'build':18} {'first pass ex/s':>16} {'warm ex/s (spread)':>24} {'vs float32':>11}")
    for name, first, speed in rows:
        spread = f"{speed.median:,.1f} ({speed.slowest:,.1f}-{speed.fastest:,.1f})"
        print(f"{name:18} {first:16,.1f} {spread:>24} {speed.median / baseline:10.2f}x")


if __name__ == "__main__":
    main()
