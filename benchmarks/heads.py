"""Benchmark: head-pruning on the SST-2 fixture (6 layers x 12 heads = 72) over SST-2 dev, CPU.

Prints the cost of the importance map in units of one plain evaluation pass (target <= 3), the wall
time of the full single-head sweep, the pruning curve with prunable_fraction, and the physical-pruning
speed-up at batch 16 with half of the heads removed (Michel et al. 2019 measured about 17.5%).

Usage: python benchmarks/heads.py [--device cpu] [--mode mask|uniform] [--iterative]
"""

from __future__ import annotations

import argparse
import time

import torch
from common import SST2_DEV, SST2_MODEL, require, sst2_dev, sst2_target

from bertprobe.probe import ProbeContext
from bertprobe.probes.heads import HeadParams, HeadPruningProbe


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--mode", default="mask", choices=["mask", "uniform"])
    ap.add_argument("--iterative", action="store_true")
    args = ap.parse_args()
    require(SST2_MODEL, SST2_DEV)
    target = sst2_target(args.device)
    data = sst2_dev(target)
    params = HeadParams(mode=args.mode, iterative=args.iterative, physical=True)
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
    print("pruning curve (fraction of heads pruned -> accuracy):")
    for point in result.details["pruning_curve"]:
        print(f"  {point['fraction']:>5.2f}  {point['metric']:.4f}")
    print(f"prunable_fraction (within 1 point) {m['prunable_fraction']:.2f}   (Michel et al.: up to 0.40 on MNLI, BERT-base)")
    phys = result.details.get("physical", {})
    if "examples_per_s_before" in phys:
        print(f"physical pruning of {phys['heads_pruned']} heads: {phys['examples_per_s_before']:.0f} -> "
              f"{phys['examples_per_s_after']:.0f} examples/s at batch 16, speedup {m['speedup'] * 100:+.1f}% "
              f"(Michel: +17.5%), accuracy {phys['accuracy_pruned']:.4f}")


if __name__ == "__main__":
    main()
