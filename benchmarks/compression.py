"""Benchmark: the compressed builds of the SST-2 fixture side by side (the compression suite's variants).

For fp32 (the baseline), bf16, torchao int8 (dynamic activations, eager and compiled; weight-only) and
30% of heads physically pruned by importance, on SST-2 dev (872 sentences), prints:
  * size in memory;
  * examples/s of batched prediction (length-sorted batches of 64, best of 3) and its ratio to fp32,
    measured in this run;
  * accuracy, and agreement with fp32's predictions;
  * held-out positive accuracy under the trigger found on fp32 (does the fp32 attack transfer?);
  * the variant's own trigger search: its trigger and held-out accuracy after it.
The deprecated torch.ao dynamic int8 is timed as a reference row (no trigger: it is not a variant we ship).

Usage: python benchmarks/compression.py [--no-compile] [--no-trigger]
"""

from __future__ import annotations

import argparse
import io
import time
import warnings
from contextlib import redirect_stderr
from dataclasses import replace

import torch
from common import SST2_DEV, SST2_MODEL, require, sst2_dev, sst2_target

from bertprobe.model import ModelSpec
from bertprobe.model.modelinfo import model_bytes
from bertprobe.model.variants import derive_variant
from bertprobe.probe import ProbeContext
from bertprobe.probes.universal_trigger.probe import TriggerParams, UniversalTriggerProbe
from bertprobe.reporters.summary import fmt


def throughput(target, encoded, repeat: int = 3) -> tuple[float, torch.Tensor]:
    best, preds = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        preds = target.logits(encoded, batch_size=64).argmax(-1)
        best = min(best, time.perf_counter() - start)
    return len(encoded) / best, preds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile row (about 40 s of compiling)")
    ap.add_argument("--no-trigger", action="store_true", help="skip the trigger searches")
    args = ap.parse_args()
    require(SST2_MODEL, SST2_DEV)
    torch.manual_seed(0)
    base = sst2_target("cpu")
    base.encode_cache = {}
    data = sst2_dev(base)
    encoded = base.encode(data.examples)
    gold = torch.tensor(data.labels())
    path = str(SST2_MODEL)
    variants = [("fp32", None), ("bf16", ModelSpec(path=path, device="cpu", dtype="bfloat16", max_length=128)),
                ("int8 dynamic (torchao, eager)", ModelSpec(path=path, device="cpu", quantize="int8-dynamic", max_length=128))]
    if not args.no_compile:
        variants.append(("int8 dynamic (torchao, compiled)",
                         ModelSpec(path=path, device="cpu", quantize="int8-dynamic", compile=True, max_length=128)))
    variants += [("int8 weight-only (torchao)", ModelSpec(path=path, device="cpu", quantize="int8-weight-only", max_length=128)),
                 ("pruned 30% of heads", ModelSpec(path=path, device="cpu", prune_heads=0.3, max_length=128)),
                 ("torch.ao dynamic int8 (deprecated, reference)", "torch.ao")]
    trig = TriggerParams(target_label="positive", length=3, candidates=40, iterations=10)
    rows, fp32_preds, fp32_rate, fp32_trigger = [], None, None, None
    for name, spec in variants:
        start = time.perf_counter()
        if spec is None:
            target = base
        elif spec == "torch.ao":
            import copy

            with warnings.catch_warnings(), redirect_stderr(io.StringIO()):
                warnings.simplefilter("ignore")
                model = torch.ao.quantization.quantize_dynamic(copy.deepcopy(base.model), {torch.nn.Linear}, dtype=torch.qint8)
            target = replace(base, model=model, quantized=True)
        elif spec.dtype == "bfloat16":
            target = replace(base, model=copy_to(base.model, torch.bfloat16), dtype=torch.bfloat16)
        else:
            target, _ = derive_variant(base, spec, data)
        build = time.perf_counter() - start
        if spec is not None and spec != "torch.ao" and spec.compile:
            start = time.perf_counter()
            target.logits(encoded, batch_size=64)  # compile (and recompile for new shapes) outside the timing
            build += time.perf_counter() - start
        rate, preds = throughput(target, encoded)
        if fp32_preds is None:
            fp32_preds, fp32_rate = preds, rate
        row = {"variant": name, "size MB": model_bytes(target.model) / 2**20, "ex/s": rate, "vs fp32": rate / fp32_rate,
               "accuracy": (preds == gold).float().mean().item(), "agree": (preds == fp32_preds).float().mean().item(),
               "build s": build}
        if not args.no_trigger and spec != "torch.ao":
            ctx = ProbeContext(seed=13, model_name=name, baseline_result=lambda: fp32_trigger)
            result = UniversalTriggerProbe().run(target, data, trig, ctx)
            result.model = name
            if fp32_trigger is None:
                fp32_trigger = result
            row["fp32 trigger acc"] = result.value("baseline_trigger_accuracy_after") if name != "fp32" else result.value("accuracy_after")
            row["own trigger"] = result.details["trigger_text"]
            row["own acc after"] = result.value("accuracy_after")
            row["search s"] = result.value("search_seconds")
        rows.append(row)
        print(_format_row(row), flush=True)
    print()
    print("| " + " | ".join(rows[0].keys()) + " |")
    print("|" + "---|" * len(rows[0]))
    for row in rows:
        print("| " + " | ".join(_cell(row.get(k)) for k in rows[0]) + " |")


def copy_to(model, dtype):
    import copy

    return copy.deepcopy(model).to(dtype)


def _cell(value) -> str:
    return fmt(value)


def _format_row(row: dict) -> str:
    return "  ".join(f"{k}={_cell(v)}" for k, v in row.items())


if __name__ == "__main__":
    main()
