"""Where one ``Target.predict`` call spends its time, per dtype, in the order given (GPU question of issue #38).

``throughput.py`` on an H200 found bf16 and fp16 slower than fp32 end to end (12,273 and 12,612 examples/s
against 18,262) while the model alone was 4x faster. This splits one prediction of SST-2 dev into its stages,
each timed on its own after a warm-up (median of ``--repeat`` rounds, the device synchronised around each):
encoding the texts, planning and collating the batches, the forward passes, and the whole call; then the same
whole call again at the end, to see whether a dtype measured later in the process pays more. Run it with the
dtypes in both orders to tell a dtype's cost from an order effect.

Usage: python benchmarks/gpu/predict_breakdown.py [--device cuda] [--dtype float32,bfloat16] [--repeat 15]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from common import SST2_DEV, SST2_MODEL, attention_kernels, require, sst2_dev, sst2_target, sync  # noqa: E402


def median_ms(fn: Any, device: Any, repeat: int) -> float:
    """Median wall time of ``fn`` in milliseconds, the device synchronised before and after each call."""
    times = []
    for _ in range(repeat):
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def stages(device: str, dtype: str, repeat: int) -> dict[str, float]:
    """Milliseconds of each stage of one prediction of SST-2 dev in ``dtype``."""
    target = sst2_target(device, dtype=dtype)
    data = sst2_dev(target)
    examples = data.examples
    encoded = target.encode(examples)
    order = sorted(range(len(encoded)), key=encoded.lengths.__getitem__)
    plans = target.plan_batches(encoded, order)
    collated = [target.collate([encoded.rows[i] for i in idx]) for idx in plans]

    def forward() -> None:
        with torch.inference_mode():
            for batch in collated:
                target.model(**batch).logits.float()

    target.predict(examples)  # warm-up: allocator, kernels at these shapes
    forward()
    out = {
        "encode": median_ms(lambda: target.encode(examples), target.device, repeat),
        "plan + collate": median_ms(lambda: [target.collate([encoded.rows[i] for i in idx])
                                             for idx in target.plan_batches(encoded, order)], target.device, repeat),
        "forward (collated)": median_ms(forward, target.device, repeat),
        "predict (whole call)": median_ms(lambda: target.predict(examples), target.device, repeat),
        "batches": float(len(plans)),
    }
    out["predict of pre-encoded"] = median_ms(lambda: target.predict(encoded), target.device, repeat)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="float32,bfloat16")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    require(SST2_MODEL, SST2_DEV)
    dtypes = args.dtype.split(",")
    results = {}
    with attention_kernels("bertprobe", args.device):
        for dtype in dtypes:
            results[dtype] = stages(args.device, dtype, args.repeat)
        again = {dtype: stages(args.device, dtype, args.repeat)["predict (whole call)"] for dtype in dtypes}
    names = list(next(iter(results.values())))
    print(f"SST-2 dev, {args.device}, dtypes in this order: {', '.join(dtypes)}; median ms of {args.repeat}")
    print(f"{'stage':<26}" + "".join(f"{d:>12}" for d in dtypes))
    for name in names:
        print(f"{name:<26}" + "".join(f"{results[d][name]:>12.1f}" for d in dtypes))
    print(f"{'predict, measured again':<26}" + "".join(f"{again[d]:>12.1f}" for d in dtypes))


if __name__ == "__main__":
    main()
