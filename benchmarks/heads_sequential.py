"""Benchmark: sequential against exact head sweeps on the SST-2 fixture, at growing data sizes, CPU.

For each size (872 = SST-2 dev; larger sizes add sentences sampled from SST-2 train by seed: that the
fixture saw them in training does not matter for cost), runs head-pruning's single-head and layer
ablations (72 heads + 6 layers = 78 units) twice in the same process: ``sequential: false`` (one full pass
per unit; cached in benchmarks/.cache, since it does not depend on the sequential rule) and the default
sequential sweep. Prints wall time, the ablations' full-pass equivalents and
their ratio, and checks the issue's targets: at 3,000 at most a third of the exact passes, at 8,000 at
most a fifth, at 872 no more than the exact passes plus 5%; every unit classified as in the exact mode
(within, drop or gain against the tolerance) unless its exact interval straddles it. The pruning curve
is left out (``pruning: false``): its cost is the same in both modes.

Usage: python benchmarks/heads_sequential.py [--sizes 872,3000,8000] [--tolerance 0.01]
"""

from __future__ import annotations

import argparse
import random
import time

from common import SHARED, SST2_DEV, SST2_MODEL, require, sst2_target

from bertprobe.data import Dataset, DataSpec, align_labels, load_table
from bertprobe.params import parse_params
from bertprobe.probe import ProbeContext
from bertprobe.probes.head_pruning import HeadParams, HeadPruningProbe

TRAIN = SHARED / "data" / "sst2" / "train.tsv"
TARGETS = {3000: 1 / 3, 8000: 1 / 5}


def data_of(size: int, target) -> Dataset:
    dev = load_table(DataSpec(path=str(SST2_DEV), text="sentence"))
    examples = list(dev.examples)
    if size > len(examples):
        train = load_table(DataSpec(path=str(TRAIN), text="sentence")).examples
        seen = {ex.text for ex in examples}
        pool = [ex for ex in train if ex.text not in seen and len(ex.text.split()) >= 4]
        examples += random.Random(13).sample(pool, size - len(examples))
    examples = [type(ex)(ex.text, label=ex.label, id=f"x{i}") for i, ex in enumerate(examples[:size])]
    return align_labels(Dataset(examples, name=f"sst2-{size}", label_names=dev.label_names), target.label_names)


def exact_run(size: int, target, data, tolerance: float):
    """The exact sweep of this size, cached in benchmarks/.cache (it does not change with the sequential rule)."""
    import json

    from common import REPO

    cache = REPO / "benchmarks" / ".cache" / f"heads-exact-{size}-{tolerance}.json"
    if cache.is_file():
        return json.loads(cache.read_text())
    params = parse_params(HeadParams, {"sequential": False, "pruning": False, "tolerance": tolerance}, "p")
    start = time.perf_counter()
    result = HeadPruningProbe().run(target, data, params, ProbeContext(seed=13))
    out = {"seconds": time.perf_counter() - start, "passes": result.value("ablation_passes"),
           "ablation": result.details["ablation"], "layer_ablation": result.details["layer_ablation"]}
    cache.parent.mkdir(exist_ok=True)
    cache.write_text(json.dumps(out))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="872,3000,8000")
    parser.add_argument("--tolerance", type=float, default=0.01)
    args = parser.parse_args()
    require(SST2_MODEL, SST2_DEV, TRAIN)
    target = sst2_target()
    print(f"{'examples':>8}  {'exact s':>8}  {'seq s':>7}  {'exact passes':>12}  {'seq passes':>10}  {'ratio':>6}  "
          f"{'target':>7}  disagreements (exact interval not straddling)")
    for size in [int(s) for s in args.sizes.split(",")]:
        data = data_of(size, target)
        exact = exact_run(size, target, data, args.tolerance)
        params = parse_params(HeadParams, {"pruning": False, "tolerance": args.tolerance}, "p")
        start = time.perf_counter()
        seq = HeadPruningProbe().run(target, data, params, ProbeContext(seed=13))
        t_exact, t_seq = exact["seconds"], time.perf_counter() - start
        disagree = []
        for table in ("ablation", "layer_ablation"):
            for e, s in zip(exact[table], seq.details[table]):
                if e["settled"] != "straddles" and e["settled"] != s["settled"]:
                    disagree.append(f"{table} {e.get('layer')},{e.get('head', '-')}: {e['settled']} vs {s['settled']}")
        used, full = seq.value("ablation_passes"), exact["passes"]
        ratio = used / full
        bound = TARGETS.get(size, 1.05)
        ok = "ok" if ratio <= bound + 1e-9 else "MISSED"
        print(f"{size:8d}  {t_exact:8.1f}  {t_seq:7.1f}  {full:12.1f}  {used:10.1f}  {ratio:6.3f}  <={bound:.3f} {ok}  "
              f"{len(disagree)}" + (f": {'; '.join(disagree[:5])}" if disagree else ""))
        settled = [r["examples"] for r in seq.details["ablation"]]
        print(f"          single heads: median {sorted(settled)[len(settled) // 2]} examples used of {size}; "
              f"{sum(r['settled'] == 'within' for r in seq.details['ablation'])} within, "
              f"{sum(r['settled'] == 'straddles' for r in seq.details['ablation'])} straddling at the end")


if __name__ == "__main__":
    main()
