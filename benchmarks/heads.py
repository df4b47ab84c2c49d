"""Benchmark: head-pruning on the SST-2 fixture (6 layers x 12 heads = 72) over SST-2 dev, CPU.

Prints the cost of the importance map in units of one plain evaluation pass (target <= 3), the wall
time of the full single-head sweep, the pruning curve with prunable_fraction, and the physical-pruning
speed-up at batch 16 with half of the heads removed (Michel et al. 2019 measured about 17.5%).

With --stacking, times only the 72-head single-head sweep twice in the same run: one head per forward
pass, and heads stacked along the batch (--stack heads per pass), and checks that the per-head results
are identical. With --dtype bfloat16 the whole probe runs in bf16 (compare its prunable_fraction and
interval with an fp32 run's). With --dtypes, times the single-head sweep in each dtype and compares the
per-head accuracies with the first dtype's (when is bf16 sound for a sweep?).

Usage: python benchmarks/heads.py [--device cpu] [--mode mask|uniform] [--iterative] [--dtype float32|bfloat16]
       python benchmarks/heads.py --stacking [--stack 8] [--limit N]
       python benchmarks/heads.py --dtypes float32,bfloat16 [--limit N]
       (each with [--sdpa bertprobe|pytorch]: on CUDA, the harness's attention kernels, no cuDNN, or PyTorch's own)
"""

from __future__ import annotations

import argparse
import time

import torch
from common import SDPA_CHOICES, SST2_DEV, SST2_MODEL, attention_kernels, require, sst2_dev, sst2_target, sync, timed

from bertprobe.probe import ProbeContext
from bertprobe.probes.head_pruning.params import HeadParams
from bertprobe.probes.head_pruning.probe import HeadPruningProbe


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--mode", default="mask", choices=["mask", "uniform"])
    ap.add_argument("--iterative", action="store_true")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--stacking", action="store_true", help="time the single-head sweep unstacked vs stacked")
    ap.add_argument("--stack", type=int, default=8)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--dtypes", default=None, help="e.g. float32,bfloat16: time the single-head sweep in each and "
                    "compare per-head accuracies with the first")
    ap.add_argument("--sdpa", default="bertprobe", choices=SDPA_CHOICES,
                    help="attention kernels: the harness's (no cuDNN on CUDA) or PyTorch's own order")
    args = ap.parse_args()
    require(SST2_MODEL, SST2_DEV)
    with attention_kernels(args.sdpa, args.device):
        measure(args)


def measure(args: argparse.Namespace) -> None:
    """Everything main's flags ask for, inside the chosen attention kernels."""
    if args.dtypes:
        precision(args.limit, args)
        return
    target = sst2_target(args.device, dtype=args.dtype)
    data = sst2_dev(target)
    if args.limit:
        data.examples = data.examples[: args.limit]
    if args.stacking:
        stacking(target, data, args)
        return
    params = HeadParams(mode=args.mode, iterative=args.iterative, physical=True)
    plain = plain_pass_seconds(target, data, params.batch_size)
    start = time.perf_counter()
    result = HeadPruningProbe().run(target, data, params, ProbeContext(seed=13))
    wall = time.perf_counter() - start
    m = {k: v.value for k, v in result.metrics.items()}
    sweep = result.details.get("ablation", [])
    print(f"SST-2 dev ({len(data)} examples), {target.device}, threads {torch.get_num_threads()}, mode {args.mode}")
    print(f"baseline accuracy                 {m['baseline']:.4f}")
    print(f"importance cost                   {m['importance_cost_passes']:.2f} evaluation passes (target <= 3)")
    print(f"importance gini                   {m['importance_gini']:.3f}")
    print(f"max single-head drop              {m['max_single_head_drop'] * 100:.2f} points")
    print(f"heads improving when removed      {int(m['heads_improving_when_removed'])} of {len(sweep)}")
    print(f"largest layer-ablation drop       {m['layer_max_drop'] * 100:.2f} points")
    print(f"evaluations in the run            {result.details['evaluations']}")
    print(f"whole probe wall time             {wall:.1f} s (single-head sweep is {len(sweep)} of those evaluations)")
    phys_s = result.details.get("physical", {}).get("seconds", 0.0)
    evaluations = result.details["evaluations"]
    print(f"model-only bound                  one plain pass over pre-collated batches {plain:.3f} s; the probe's "
          f"{evaluations} evaluations as bare full passes {evaluations * plain:.1f} s")
    print(f"probe of bound                    {evaluations * plain / (wall - phys_s):.2f} (its {wall - phys_s:.1f} s "
          f"without the {phys_s:.1f} s physical-pruning timing; above 1: faster than full passes, the layer cache)")
    print("pruning curve (fraction of heads pruned -> accuracy):")
    for point in result.details["pruning_curve"]:
        print(f"  {point['fraction']:>5.2f}  {point['metric']:.4f}")
    ci = result.metrics["prunable_fraction"].ci
    print(f"prunable_fraction (within 1 point) {m['prunable_fraction']:.2f}, interval {ci[0]:.2f}..{ci[1]:.2f}; "
          f"plain reading {result.details['prunable_fraction_plain']:.2f}   (Michel et al.: up to 0.40 on MNLI, BERT-base)")
    phys = result.details.get("physical", {})
    if "examples_per_s_before" in phys:
        tp, lat = phys["throughput"], phys["latency"]
        print(f"physical pruning of {phys['heads_pruned']} heads, accuracy {phys['accuracy_pruned']:.4f}:")
        print(f"  throughput (batch {params.speed_batch_size}): {phys['examples_per_s_before']:.0f} -> "
              f"{phys['examples_per_s_after']:.0f} examples/s, {tp['speedup']:+.1%} (range {tp['spread'][0]:+.1%}.."
              f"{tp['spread'][1]:+.1%} over {tp['repeats']} interleaved repeats; Michel: +17.5%)")
        print(f"  latency (batch 1): {lat['per_s_before']:.0f} -> {lat['per_s_after']:.0f} examples/s, "
              f"{lat['speedup']:+.1%} (range {lat['spread'][0]:+.1%}..{lat['spread'][1]:+.1%})")


def plain_pass_seconds(target, data, batch_size: int | None, repeat: int = 3) -> float:
    """The model-only bound: the best time of one plain pass over batches already tokenised, collated and
    on the device (the probe's own batch plan)."""
    ready = [batch for _, batch in target.batches(target.encode(data.examples), batch_size)]

    def once() -> None:
        with torch.inference_mode():
            for batch in ready:
                target.model(**batch).logits.argmax(-1)
        sync(target.device)

    once()
    return timed(once, repeat)[0]


def stacking(target, data, args) -> None:
    """The single-head sweep one head per pass against --stack heads per pass: wall time and equality."""
    plain = plain_pass_seconds(target, data, None)
    times, tables = [], []
    rows_per_pass = 32 * args.stack
    for budget, label in ((0, "one head per pass"), (1 << 40, f"{args.stack} heads stacked per pass")):
        params = HeadParams(mode=args.mode, pruning=False, layers=False, physical=False, bootstrap=0,
                            stack=args.stack, stack_budget=budget)
        start = time.perf_counter()
        result = HeadPruningProbe().run(target, data, params, ProbeContext(seed=13))
        times.append(time.perf_counter() - start)
        tables.append(result.details["ablation"])
        heads = len(result.details["ablation"])
        print(f"{label:<28} {times[-1]:6.1f} s  ({heads} heads, {len(data)} examples, {target.dtype}); "
              f"of the model-only bound ({heads} bare full passes, {heads * plain:.1f} s): {heads * plain / times[-1]:.2f}")
    print(f"stacked / one-per-pass time: {times[1] / times[0]:.2f}  (passes of up to {rows_per_pass} rows); "
          f"identical per-head results: {tables[0] == tables[1]}")


def precision(data_limit: int | None, args) -> None:
    """The single-head sweep in each of --dtypes: wall time, its model-only bound, and how far each
    dtype's per-head accuracies are from the first one's."""
    tables: dict[str, list[float]] = {}  # per-head accuracy with the head removed
    for dtype in args.dtypes.split(","):
        target = sst2_target(args.device, dtype=dtype)
        data = sst2_dev(target)
        if data_limit:
            data.examples = data.examples[:data_limit]
        plain = plain_pass_seconds(target, data, None)
        params = HeadParams(mode=args.mode, pruning=False, layers=False, physical=False, bootstrap=0)
        start = time.perf_counter()
        result = HeadPruningProbe().run(target, data, params, ProbeContext(seed=13))
        wall = time.perf_counter() - start
        base = result.metrics["baseline"].value
        table = tables[dtype] = [base + row["delta"] for row in result.details["ablation"]]
        print(f"{dtype:<9} single-head sweep {wall:6.1f} s ({len(table)} heads, {len(data)} examples); baseline "
              f"{base:.4f}; of the model-only bound ({len(table)} bare full passes, {len(table) * plain:.1f} s): "
              f"{len(table) * plain / wall:.2f}")
    first, *others = tables
    ref = tables[first]
    for dtype in others:
        rows = tables[dtype]
        diffs = [abs(a - b) for a, b in zip(ref, rows)]
        rank = lambda t: sorted(range(len(t)), key=t.__getitem__)  # noqa: E731
        top = lambda t: set(rank(t)[:5])  # noqa: E731
        r_ref, r_other = rank(ref), rank(rows)
        pos_ref = {h: i for i, h in enumerate(r_ref)}
        pos_other = {h: i for i, h in enumerate(r_other)}
        n = len(ref)
        rho = 1 - 6 * sum((pos_ref[h] - pos_other[h]) ** 2 for h in range(n)) / (n * (n * n - 1))
        print(f"{dtype} against {first}: identical per-head accuracy for {sum(d < 1e-9 for d in diffs)} of {n} heads; "
              f"largest difference {max(diffs) * 100:.2f} points ({max(diffs) * len(data):.0f} examples); "
              f"rank correlation of the heads {rho:.3f}; the 5 most harmful removals shared: {len(top(ref) & top(rows))} of 5")


if __name__ == "__main__":
    main()
