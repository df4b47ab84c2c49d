"""Benchmark: scale-out (#17) on the SST-2 fixture, with ratios measured in the same run.

1. ``cache``: the head-pruning probe (defaults, 872 examples) without and with the layer cache
   (ablations from their lowest intervened layer); the metrics must be identical.
2. ``sweep``: the full single-head ablation (72 heads x 872 examples) through ``bertprobe run`` on
   ``local`` and on ``ray`` with N workers (shards); identical per-head results required.
3. ``matrix``: 1, 2 and 4 fixture-sized models (the fixture, bf16, int8-dynamic and 30%-pruned
   variants) through accuracy + a single-head ablation on ``--limit`` examples, ``local`` against
   ``ray`` (one model job per worker, no sharding): wall time as the matrix grows.
4. ``backdoor`` (not in the default parts): the backdoor scan of the planted-trigger fixture, its two
   class pairs one after the other (``local``) against the pairs on N Ray workers; identical scans.

Ray's own start-up (``ray.init`` of a private 127.0.0.1 cluster) is timed once and left out of the
runs' times (a long-lived cluster pays it once). ``--device cuda`` runs the models' jobs with
``num_gpus: 1`` each.

Usage: python benchmarks/scale.py [--parts cache,sweep,matrix,backdoor] [--workers 2] [--limit 300] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from common import SST2_DEV, SST2_MODEL, require, sst2_dev, sst2_target

from bertprobe.harness import run_suite
from bertprobe.plugins import build_plugins
from bertprobe.probe import ProbeContext
from bertprobe.probes.head_pruning.params import HeadParams
from bertprobe.probes.head_pruning.probe import HeadPruningProbe
from bertprobe.run.control import RunControl
from bertprobe.suite import load_suite

VARIANTS = [
    "{name: fp32, path: '%s', device: %s}",
    "{name: bf16, path: '%s', device: %s, dtype: bfloat16}",
    "{name: int8, path: '%s', device: %s, quantize: int8-dynamic}",
    "{name: pruned, path: '%s', device: %s, prune_heads: 0.3}",
]


def cache_part() -> None:
    target = sst2_target("cpu")
    data = sst2_dev(target)
    times, metrics = {}, {}
    for cache in (False, True):
        start = time.perf_counter()
        result = HeadPruningProbe().run(target, data, HeadParams(layer_cache=cache), ProbeContext(seed=13))
        times[cache] = time.perf_counter() - start
        metrics[cache] = {k: v.value for k, v in result.metrics.items() if v.kind != "cost"}
        note = result.details["summary"].get("layer cache")
    same = metrics[False] == metrics[True]
    print(f"head-pruning probe, SST-2 dev ({len(data)}), cpu, threads {torch.get_num_threads()}")
    print(f"  every layer computed      {times[False]:7.1f} s")
    print(f"  from the lowest layer     {times[True]:7.1f} s   ({times[False] / times[True]:.2f}x; cache {note})")
    print(f"  metrics identical         {same}")


def write_suite(folder: Path, models: list[str], probes: str, limit: int | None) -> Path:
    listed = "".join(f"  - {m}\n" for m in models)
    data = f"{{path: '{SST2_DEV}', text: sentence" + (f", limit: {limit}" if limit else "") + "}"
    text = (f"suite: scale\nmodels:\n{listed}data: {data}\nseed: 13\n"
            f"report: {{dir: '{folder}', formats: [json]}}\nprobes:\n{probes}")
    path = folder / f"scale-{len(models)}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def timed_run(path: Path, executor: str, workers: int, shard: bool = True, threads: int | None = None) -> tuple[float, dict[str, Any]]:
    from dataclasses import replace

    from bertprobe.executors import ExecutorSpec

    suite = load_suite(path)
    if executor == "ray":
        suite = replace(suite, executor=ExecutorSpec(name="ray", workers=workers, shard=shard))
    start = time.perf_counter()
    session = run_suite(suite, build_plugins(), control=RunControl(threads=threads))
    wall = time.perf_counter() - start
    return wall, json.loads((session.run_dir / "report.json").read_text())


def results(report: dict[str, Any]) -> list[Any]:
    return sorted((r["model"], r["id"], {k: v for k, v in r["metrics"].items() if r["metric_info"][k]["kind"] != "cost"},
                   json.dumps(r["details"].get("ablation"), sort_keys=True)) for r in report["probes"])


def sweep_part(folder: Path, device: str, workers: int) -> None:
    probes = "  - {probe: head-pruning, params: {layers: false, pruning: false, bootstrap: 0}}\n"
    path = write_suite(folder, [VARIANTS[0] % (SST2_MODEL, device)], probes, None)
    one_s, one = timed_run(path, "local", workers, threads=1)
    local_s, local = timed_run(path, "local", workers)
    ray_s, remote = timed_run(path, "ray", workers)
    print(f"single-head ablation (72 heads x 872 examples) through 'bertprobe run', {device}")
    print(f"  local, 1 process, 1 thread      {one_s:7.1f} s")
    print(f"  local, 1 process, {torch.get_num_threads()} threads     {local_s:7.1f} s   ({one_s / local_s:.2f}x the 1-thread run)")
    print(f"  ray, {workers} workers of 1 thread      {ray_s:7.1f} s   ({one_s / ray_s:.2f}x the 1-thread run, "
          f"{local_s / ray_s:.2f}x local)")
    same_heads = [r[3] for r in results(local)] == [r[3] for r in results(one)]
    print(f"  identical: ray vs local {results(local) == results(remote)}; per-head results at 1 thread {same_heads}")


def backdoor_part(folder: Path, device: str, workers: int) -> None:
    """The backdoor scan of the planted-trigger fixture (both class pairs), local against the pairs
    sharded over ``workers`` Ray workers; the scans must be identical (timings aside)."""
    model = SST2_MODEL.parent / "minilm-l6-sst2-backdoor-bb"
    require(model)
    probes = "  - {probe: backdoor-scan}\n"
    path = write_suite(folder, [VARIANTS[0] % (model, device)], probes, None)
    local_s, local = timed_run(path, "local", workers)
    ray_s, remote = timed_run(path, "ray", workers)

    def scans(report: dict[str, Any]) -> Any:
        (probe,) = report["probes"]
        pairs = [{k: v for k, v in p.items() if k != "seconds"} for p in probe["details"]["pairs"]]
        return probe["metrics"].get("backdoor_detected"), probe["details"].get("suspected_trigger"), pairs

    print(f"backdoor scan of the bb fixture, 2 class pairs, SST-2 dev, {device}")
    print(f"  local, one pair after the other   {local_s:7.1f} s   (suspected trigger: {scans(local)[1]})")
    print(f"  ray, pairs on {workers} workers          {ray_s:7.1f} s   ({local_s / ray_s:.2f}x local)")
    print(f"  identical scans: {scans(local) == scans(remote)}")


def matrix_part(folder: Path, device: str, workers: int, limit: int) -> None:
    probes = ("  - probe: accuracy\n"
              "  - {probe: head-pruning, params: {layers: false, pruning: false, bootstrap: 0, layer_cache: false}}\n")
    print(f"matrix of fixture-sized models: accuracy + single-head ablation on {limit} examples, {device}")
    print("  models  local s   ray s   ratio  identical")
    for n in (1, 2, 4):
        models = [v % (SST2_MODEL, device) for v in VARIANTS[:n]]
        path = write_suite(folder, models, probes, limit)
        local_s, local = timed_run(path, "local", workers)
        ray_s, remote = timed_run(path, "ray", workers, shard=False)
        print(f"  {n:6d}  {local_s:7.1f}  {ray_s:6.1f}  {local_s / ray_s:5.2f}x  {results(local) == results(remote)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="cache,sweep,matrix")
    ap.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    require(SST2_MODEL, SST2_DEV)
    os.environ.setdefault("BERTPROBE_NO_PROGRESS", "1")
    parts = set(args.parts.split(","))
    if "cache" in parts:
        cache_part()
    if parts & {"sweep", "matrix", "backdoor"}:
        import ray

        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
        start = time.perf_counter()
        ray.init(address="local", num_cpus=args.workers, num_gpus=torch.cuda.device_count(),
                 _node_ip_address="127.0.0.1", include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        print(f"ray {ray.__version__}: private cluster of {args.workers} CPUs started in {time.perf_counter() - start:.1f} s "
              "(not counted below)")
        with tempfile.TemporaryDirectory() as tmp:
            if "sweep" in parts:
                sweep_part(Path(tmp), args.device, args.workers)
            if "matrix" in parts:
                matrix_part(Path(tmp), args.device, args.workers, args.limit)
            if "backdoor" in parts:
                backdoor_part(Path(tmp), args.device, args.workers)
        ray.shutdown()


if __name__ == "__main__":
    main()
