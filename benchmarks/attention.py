"""Benchmark: attention-audit on the SST-2 fixture over SST-2 dev, CPU.

Prints wall time, peak memory for 100, 400 and 872 examples (each in a fresh subprocess, so the
peak RSS of one run does not hide another's; it must stay flat, since statistics are streamed into
L x H accumulators), and the pattern-type shares next to Kovaleva et al.'s range (heterogeneous 32-61%
across GLUE tasks) and Clark et al.'s [SEP] figure (over half of the attention in BERT-base layers 6-10).

Usage: python benchmarks/attention.py [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from common import SST2_DEV, SST2_MODEL, require, sst2_dev, sst2_target


def one_run(n: int, device: str, similarity: bool, repeat: bool = False) -> dict:
    from dataclasses import replace

    import torch

    from bertprobe.data import subsample
    from bertprobe.probe import ProbeContext
    from bertprobe.probes.attention_audit import AttentionAuditProbe, AttentionParams

    target = sst2_target(device)
    data = sst2_dev(target)
    if repeat:  # the first 100 sentences cycled to n: same lengths, so only n changes
        data = replace(data, examples=[data.examples[i % 100] for i in range(n)])
    else:
        data = subsample(data, n, "first", 0)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    result = AttentionAuditProbe().run(target, data, AttentionParams(similarity=similarity), ProbeContext())
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    longest = max(target.encode(data.examples).lengths)
    out = {"n": n, "longest": longest, "wall_s": wall, "peak_rss_mb": peak / 1024, "probe_rss_growth_mb": (peak - base_rss) / 1024,
           "threads": torch.get_num_threads()}
    out.update({k: v.value for k, v in result.metrics.items()})
    out["layer_sep"] = [round(sum(r) / len(r), 3) for r in next(f for f in result.details["figures"] if f["title"] == "attention to [SEP]")["data"]["matrix"]]
    out["layer_heterogeneous"] = [round(x, 3) for x in result.details["layer_type_shares"]["heterogeneous"]]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--similarity", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--repeat", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(one_run(args.child, args.device, args.similarity, args.repeat)))
        return
    require(SST2_MODEL, SST2_DEV)
    runs = []
    env = {**os.environ, "MALLOC_ARENA_MAX": "1"}  # fewer allocator arenas: less RSS noise
    for n, sim, rep in ((100, False, False), (400, False, False), (872, False, False), (872, True, False),
                        (100, False, True), (400, False, True), (872, False, True)):
        flags = (["--similarity"] if sim else []) + (["--repeat"] if rep else [])
        proc = subprocess.run([sys.executable, str(Path(__file__)), "--child", str(n), "--device", args.device, *flags],
                              capture_output=True, text=True, check=True, env=env)
        runs.append((sim, rep, json.loads(proc.stdout.strip().splitlines()[-1])))
    print(f"SST-2 dev, MiniLM-L6 fixture (6 x 12 heads), {args.device}, threads {runs[0][2]['threads']}, batch 16")
    print(f"{'examples':>9}{'inputs':>22}{'longest':>8}{'head sim.':>10}{'wall s':>8}{'peak RSS MB':>13}{'growth in probe MB':>20}")
    for sim, rep, r in runs:
        kind = "first 100, cycled" if rep else "first n of dev"
        print(f"{r['n']:>9}{kind:>22}{r['longest']:>8}{'yes' if sim else 'no':>10}{r['wall_s']:>8.1f}"
              f"{r['peak_rss_mb']:>13.0f}{r['probe_rss_growth_mb']:>20.1f}")
    keeping_all = 872 * 72 * runs[2][2]["longest"] ** 2 * 4 / 2**20
    print(f"(keeping every map of 872 examples padded to the longest would take {keeping_all:.0f} MB)")
    full = runs[2][2]
    print("pattern-type shares over all 872 x 72 maps:")
    for t in ("heterogeneous", "vertical", "diagonal", "vertical_diagonal", "block"):
        print(f"  {t:<18}{full['share_' + t] * 100:6.1f}%")
    print("  Kovaleva et al. 2019: heterogeneous 32-61% across GLUE tasks (BERT-base, CNN classifier)")
    print(f"heterogeneous share per layer: {full['layer_heterogeneous']}")
    print(f"[SEP] attention, middle third of layers: {full['sep_attention_mid_layers'] * 100:.1f}%   per layer: {full['layer_sep']}")
    print("  Clark et al. 2019: over 50% of attention goes to [SEP] in BERT-base layers 6-10")
    print(f"[CLS] attention {full['cls_attention'] * 100:.1f}%, mean entropy {full['mean_entropy']:.2f} nats, "
          f"heads mostly on special tokens {full['heads_mostly_special'] * 100:.0f}%")


if __name__ == "__main__":
    main()
