"""How fast the model under test predicts: one model's throughput after a warm-up (accuracy,
``benchmarks/int8_cpu.py``), and two models' interleaved speed-up (head-pruning's physical pruning)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from bertprobe.model.target import Target


@dataclass(frozen=True)
class Throughput:
    """Examples per second of batched prediction, warm-up excluded: the median of ``repeats`` timed
    passes over ``examples`` rows, and the slowest and fastest of them (their spread)."""

    median: float
    slowest: float
    fastest: float
    repeats: int
    examples: int

    def describe(self) -> str:
        return (f"prediction throughput, warm-up excluded: median of {self.repeats} timed pass(es) over "
                f"{self.examples} examples (whole batches of the full pass, spread over its lengths), after it "
                "(interval: slowest and fastest pass; tokenisation excluded)")


THROUGHPUT_ROWS = 64  # rows timed per pass, picked evenly over the length-sorted data
THROUGHPUT_SECONDS = 3.0  # timing stops after this much, once at least one pass is done


def measure_throughput(target: Target, encoded: Any, batch_size: int | None = None, repeats: int = 3) -> Throughput:
    """Time batched prediction after a warm-up (a full pass over ``encoded`` that came before): up to ``repeats``
    passes over at most ``THROUGHPUT_ROWS`` rows, stopping early after ``THROUGHPUT_SECONDS``.

    The first pass over a model pays one-off costs (``torch.compile``, kernel selection, allocator
    growth): on a compiled int8 build it took minutes where a warm pass takes a second, so the first
    pass's rate is never reported as the model's speed."""
    order = sorted(range(len(encoded)), key=encoded.lengths.__getitem__)
    plans = target.plan_batches(encoded, order, batch_size)
    # whole batches of the real pass, evenly spread over the lengths: the same padding as the pass itself
    # (rows picked one by one would share batches with rows of other lengths and pad more)
    wanted = max(1, min(len(plans), math.ceil(THROUGHPUT_ROWS / max(1, len(plans[0])))))
    picked = sorted({round((k + 0.5) * len(plans) / wanted - 0.5) for k in range(wanted)})
    batches = [encoded.subset(plans[i]) for i in picked]
    rows = sum(len(b) for b in batches)
    rates: list[float] = []
    spent = 0.0
    while len(rates) < repeats and (not rates or spent < THROUGHPUT_SECONDS):
        start = time.perf_counter()
        for batch in batches:
            target.logits(batch, batch_size or len(batch))
        took = time.perf_counter() - start
        spent += took
        rates.append(rows / max(took, 1e-9))
    rates.sort()
    return Throughput(rates[len(rates) // 2], rates[0], rates[-1], len(rates), rows)


def _timed_pass(model: Any, batches: list[dict[str, torch.Tensor]], device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    for batch in batches:
        model(**batch)
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # the clock reads when the GPU has finished, not when launches return
    return time.perf_counter() - start


def compare_speed(before: Any, after: Any, batches: list[dict[str, torch.Tensor]], device: torch.device,
                  budget_s: float = 10.0, repeats: int = 5) -> dict[str, Any]:
    """Examples/s of two models on the same batches: interleaved repeats, median speed-up and its spread.

    The two models alternate (A B, B A, ...) so drift (a busy neighbour, clocks) hits both alike. The
    batches are cut to a prefix so that the whole measurement stays within about ``budget_s`` seconds.
    """
    with torch.inference_mode():
        one = _timed_pass(before, batches[:1], device) + _timed_pass(after, batches[:1], device)  # warm-up
        per_batch = max(one / 2, 1e-6)
        keep = max(1, min(len(batches), int(budget_s / (2 * repeats * per_batch))))
        used = batches[:keep]
        n = sum(int(b["input_ids"].shape[0]) for b in used)
        pairs = []
        for r in range(repeats):
            if r % 2:
                tb, ta = _timed_pass(after, used, device), _timed_pass(before, used, device)
            else:
                ta, tb = _timed_pass(before, used, device), _timed_pass(after, used, device)
            pairs.append((ta, tb))
    ratios = sorted(ta / tb - 1 for ta, tb in pairs)
    ta_med = sorted(t for t, _ in pairs)[len(pairs) // 2]
    tb_med = sorted(t for _, t in pairs)[len(pairs) // 2]
    return {"speedup": ratios[len(ratios) // 2], "spread": (ratios[0], ratios[-1]), "batches": keep,
            "per_s_before": n / ta_med, "per_s_after": n / tb_med, "repeats": repeats}
