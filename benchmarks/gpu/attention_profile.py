"""Benchmark: does a GPU pass pay for attention kernels at every new batch shape? Per dtype, on the SST-2 fixture.

For float32 and bfloat16 (twice each, alternating), on SST-2 dev (872 sentences):

* ``encode``, ``logits`` on pre-encoded rows and ``predict`` from the examples, each the best of 7 after 3
  warm-up passes (the same batch shapes every time);
* ``fresh shapes``: one pass with a batch size not used before (so new batch x length shapes) against a
  second pass at the same shapes: what the first meeting of a shape costs;
* the top operations of one ``logits`` pass by self CPU and self CUDA time (torch.profiler).

The first GPU run (an H200, torch 2.11) of its first part found bf16 1.9x fp32 at repeated shapes, while bf16
probes that meet many shapes paid seconds that fp32 did not, with ``aten::_cudnn_attention_forward`` chosen
in bf16 and the memory-efficient kernel in fp32 (docs/benchmarks.md). The harness now leaves cuDNN's attention
out on CUDA (``bertprobe.model.kernels``; ``--sdpa bertprobe``, the default); ``--sdpa pytorch`` restores
PyTorch's own order, cuDNN included, to test that reading against it.

Usage: python benchmarks/gpu/attention_profile.py [--device cuda] [--sdpa bertprobe|pytorch] [--no-profile]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import SDPA_CHOICES, attention_kernels, sst2_dev, sst2_target, sync, timed  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--sdpa", default="bertprobe", choices=SDPA_CHOICES)
    ap.add_argument("--no-profile", action="store_true", help="skip the operator tables")
    args = ap.parse_args()

    def best(fn: Callable[[], object], repeat: int = 7) -> float:
        """The best wall time of ``repeat`` calls, each until the device has finished."""
        return timed(lambda: (fn(), sync(args.device)), repeat)[0]

    with attention_kernels(args.sdpa, args.device):
        for round_, dtype in enumerate(("float32", "bfloat16", "float32", "bfloat16")):
            target = sst2_target(args.device, dtype=dtype)
            data = sst2_dev(target)
            encoded = target.encode(data.examples)
            for _ in range(3):
                target.logits(encoded)
            sync(args.device)
            times = {"encode": best(lambda: target.encode(data.examples)),
                     "logits (pre-encoded)": best(lambda: target.logits(encoded)),
                     "predict (examples)": best(lambda: target.predict(data.examples))}
            fresh = 24 + round_  # a batch size no earlier pass used: every batch a new shape
            times[f"fresh shapes, batch {fresh}: first"] = best(lambda: target.logits(encoded, batch_size=fresh), 1)
            times[f"fresh shapes, batch {fresh}: again"] = best(lambda: target.logits(encoded, batch_size=fresh), 1)
            plans = target.plan_batches(encoded, sorted(range(len(encoded)), key=encoded.lengths.__getitem__))
            print(f"{dtype} ({args.sdpa} attention kernels, {len(plans)} batches by default): "
                  + "; ".join(f"{k} {v * 1000:.1f} ms" for k, v in times.items()), flush=True)
            if not args.no_profile and round_ >= 2:
                from torch.profiler import ProfilerActivity, profile

                cuda = args.device.startswith("cuda")
                with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
                    target.logits(encoded)
                    sync(args.device)
                table = prof.key_averages()
                print(table.table(sort_by="self_cpu_time_total", row_limit=10, max_name_column_width=60))
                if cuda:
                    print(table.table(sort_by="self_cuda_time_total", row_limit=6, max_name_column_width=60))


if __name__ == "__main__":
    main()
