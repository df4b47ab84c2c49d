"""Benchmark: universal-trigger search on the SST-2 fixture (positive class, 3 tokens, default params), CPU.

Runs the same search side by side in one process:
  reference    one forward pass per candidate, every candidate on the full batch, fixed iterations
               (the method of Wallace et al.'s reference code)
  batched      all candidates of a beam step in one forward pass (ids spliced into pre-encoded rows)
  +halving     ... scored on a quarter of the batch first, only the best 4 on the full batch
  default      ... plus early stopping (patience 2, or every batch example flipped): the probe's defaults
It also times what re-tokenising every candidate x example would cost instead of splicing ids.

Usage: python benchmarks/trigger.py [--device cpu] [--skip-reference]
"""

from __future__ import annotations

import argparse
import time

import torch
from common import SST2_DEV, SST2_MODEL, require, sst2_dev, sst2_target

from bertprobe.probe import ProbeContext
from bertprobe.probes.universal_trigger.probe import TriggerParams, UniversalTriggerProbe


def run(target, data, label: str, **overrides) -> dict:
    params = TriggerParams(target_label="positive", **overrides)
    start = time.perf_counter()
    result = UniversalTriggerProbe().run(target, data, params, ProbeContext(seed=13))
    wall = time.perf_counter() - start
    iters = len(result.details["history"][0]["iterations"])
    row = {
        "variant": label,
        "wall_s": wall,
        "search_s": result.value("search_seconds"),
        "iterations": iters,
        "forward_passes": int(result.value("forward_passes")),
        "rows_scored": result.details["rows_scored"],
        "acc_before": result.value("accuracy_before"),
        "acc_after": result.value("accuracy_after"),
        "trigger": result.details["trigger_text"],
    }
    print(f"{label:<12}{wall:>8.1f}{row['search_s']:>9.1f}{iters:>6}{row['forward_passes']:>8}{row['rows_scored']:>9}"
          f"{row['acc_before']:>9.3f}{row['acc_after']:>9.3f}  {row['trigger']}", flush=True)
    return row


def retokenise_cost(target, data, candidates: int = 41, positions: int = 3, batch: int = 32) -> float:
    """Seconds to tokenise candidates x positions x batch (trigger text + sentence) strings: one iteration's worth."""
    texts = [ex.text for ex in data.examples[:batch]]
    start = time.perf_counter()
    for _ in range(candidates * positions):
        target.tokenizer(["the the the " + t for t in texts], truncation=True, max_length=target.max_length)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--skip-reference", action="store_true")
    args = ap.parse_args()
    require(SST2_MODEL, SST2_DEV)
    target = sst2_target(args.device)
    data = sst2_dev(target)
    print(f"SST-2 dev, positive class (444 -> 222 search / 222 held out), {target.device}, threads {torch.get_num_threads()}")
    print(f"{'variant':<12}{'wall s':>8}{'search s':>9}{'iters':>6}{'fwd':>8}{'rows':>9}{'acc pre':>9}{'acc post':>9}  trigger")
    rows = []
    if not args.skip_reference:
        rows.append(run(target, data, "reference", scoring="per-candidate", halving=False, patience=None))
    rows.append(run(target, data, "batched", halving=False, patience=None))
    rows.append(run(target, data, "+halving", patience=None))
    rows.append(run(target, data, "default"))
    tok = retokenise_cost(target, data)
    print(f"re-tokenising 41 candidates x 3 positions x 32 sentences would add {tok:.2f} s per iteration")
    base = rows[0]["search_s"]
    print("search-time ratio vs the first row: " + ", ".join(f"{r['variant']} {r['search_s'] / base:.2f}" for r in rows))
    drop = (rows[-1]["acc_before"] - rows[-1]["acc_after"]) * 100
    print(f"default: accuracy falls by {drop:.1f} points")


if __name__ == "__main__":
    main()
