"""Backdoor scan: what screening saves, on the two SST-2 fixtures, against the exact check it replaced.

Scans ``minilm-l6-sst2-backdoor-bb`` and ``minilm-l6-sst2`` (both class pairs, SST-2 dev) twice in the same
run: with the previous scan's settings (every candidate on 25 held-out rows, the best 20 on all 100; every
gradient step on all 32 search examples; phrases searched even once a token is suspicious) and with the
defaults (successive halving from 8 rows by 4 down to 10 finalists, of which only the undecided and the best
single token go on to every row; gradient steps on windows of 8 search examples; no phrase search once a token
is suspicious; the headline's per-example flips reuse the rows it was measured on). Prints the verdict, the headline trigger, wall time,
model rows (a row that also went backward counted twice) and forward calls, the ratios, and where the time
went, stage by stage. ``--models bert-base`` profiles the stages on a random-weight model of bert-base-uncased's
size (benchmarks/common.base_size_model; it plants nothing, so it costs what a clean model costs).

    python benchmarks/backdoor_screening.py [--models bb,clean] [--pairs 1->0] [--settings previous,screened]
        [--dtype float32]
"""

from __future__ import annotations

import argparse
import time

from common import BASE_SIZES, SHARED, SST2_DEV, base_size_model, require
from tabulate import tabulate

PREVIOUS = {"screen_examples": 25, "halving": 4, "finalists": 20, "gradient_rows": 32, "extend_found": True,
            "screen_alpha": 0}
MODELS = {"bb": "minilm-l6-sst2-backdoor-bb", "clean": "minilm-l6-sst2"}


def model_path(key: str) -> str:
    return str(base_size_model(key)) if key in BASE_SIZES else str(SHARED / "models" / MODELS[key])


def scan(path: str, params: dict, pairs: tuple[str, ...], dtype: str) -> dict:
    from bertprobe.data import DataSpec, load_table
    from bertprobe.model import ModelSpec, load_target
    from bertprobe.probe import ProbeContext
    from bertprobe.probes.backdoor_scan.probe import BackdoorParams, BackdoorScanProbe

    data = load_table(DataSpec(path=str(SST2_DEV), text="sentence", label="label"))
    target = load_target(ModelSpec(path=path, device="cpu", dtype=dtype))
    began = time.perf_counter()
    result = BackdoorScanProbe().run(target, data, BackdoorParams(**params, pairs=pairs), ProbeContext(seed=13))
    seconds = time.perf_counter() - began
    heads = {f"{p['source']}->{p['target']}": p["best"] for p in result.details["pairs"] if "best" in p}
    stages: dict[str, list[float]] = {}
    for pair in result.details["pairs"]:
        for stage in pair.get("stages", []):
            got = stages.setdefault(stage["stage"], [0.0, 0])
            got[0] += stage["seconds"]
            got[1] += stage["model_rows"]
    return {"stages": stages, "seconds": seconds, "rows": result.value("model_rows"), "calls": result.value("forward_passes"),
            "verdict": result.details["summary"]["verdict"], "suspected": result.details["suspected_trigger"],
            "max_flip": result.value("max_flip_rate"), "anomaly": result.value("anomaly_score"),
            "best": "; ".join(f"{k}: {v['text']} {v['flip_rate']:.2f} z {v['anomaly']:.1f}" for k, v in heads.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="bb,clean", help="which fixtures: bb, clean (comma-separated)")
    parser.add_argument("--pairs", default="", help="class pairs to scan, e.g. 1->0 (default: both)")
    parser.add_argument("--settings", default="previous,screened", help="previous, screened or both")
    parser.add_argument("--dtype", default="float32", help="the model's dtype (float32, bfloat16)")
    args = parser.parse_args()
    pairs = tuple(p for p in args.pairs.split(",") if p)
    settings = {"previous": PREVIOUS, "screened": {}}
    rows, profile = [], []
    for key in args.models.split(","):
        if key not in BASE_SIZES:
            require(SHARED / "models" / MODELS[key], SST2_DEV)
        runs = {label: scan(model_path(key), settings[label], pairs, args.dtype) for label in args.settings.split(",")}
        for label, r in runs.items():
            rows.append([key, label, r["verdict"], r["suspected"] or "-", f"{r['max_flip']:.2f}",
                         f"{r['anomaly']:.1f}", r["best"], f"{r['seconds']:.0f}", f"{r['rows']:.0f}", f"{r['calls']:.0f}"])
            profile += [[key, label, stage, f"{sec:.1f}", f"{n:.0f}", f"{sec / r['seconds']:.0%}"]
                        for stage, (sec, n) in r["stages"].items()]
        if len(runs) == 2:
            before, after = runs["previous"], runs["screened"]
            same = before["verdict"] == after["verdict"] and before["suspected"] == after["suspected"]
            rows.append([key, "ratio", "same" if same else "DIFFERENT", "", "", "", "",
                         f"{after['seconds'] / before['seconds']:.2f}", f"{after['rows'] / before['rows']:.2f}",
                         f"{after['calls'] / before['calls']:.2f}"])
        print(tabulate(rows[-len(runs) - (len(runs) == 2):], tablefmt="plain"), flush=True)
    print()
    print(tabulate(rows, headers=["model", "settings", "verdict", "suspected", "max flip", "anomaly", "headline per pair",
                                  "seconds", "model rows", "forward calls"], tablefmt="github"))
    print()
    print(tabulate(profile, headers=["model", "settings", "stage", "seconds", "model rows", "share of the time"],
                   tablefmt="github"))


if __name__ == "__main__":
    main()
