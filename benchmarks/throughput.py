"""Benchmark: examples/s of the harness's batched prediction on SST-2 dev (872 sentences), per dtype.

Methods, measured in the same process on the same model, each given as its share of the model-only
bound (the model alone on batches already tokenised, collated and on the device, at the best batch
size tried):
  * bertprobe's default batching (`Target.predict`: a token budget on a GPU, batch 32 on a CPU);
  * bertprobe with a fixed batch of 32;
  * a plain tuned loop: length-sorted, the tokenizer pads, at its best batch size of those tried;
  * a plain loop that pads every batch of 32 to max_length (128);
  * transformers.pipeline("text-classification") with its defaults (one example at a time).
Every method's predictions are checked equal to the bound's (a mismatch is printed).

Usage: python benchmarks/throughput.py [--device cpu|cuda] [--dtype float32,bfloat16,float16] [--repeat N]
       [--sdpa bertprobe|pytorch]
       (default dtypes: float32 on a CPU; float32, bfloat16 and float16 on a GPU; --sdpa pytorch lets every
       method use PyTorch's own attention kernels, cuDNN's included, not the harness's choice on CUDA)
"""

from __future__ import annotations

import argparse
import os
from typing import Any
from unittest import mock

import torch
from common import SDPA_CHOICES, SST2_DEV, SST2_MODEL, attention_kernels, require, sst2_dev, sst2_target, sync, timed


def measure(device: str, dtype: str, repeat: int, sizes: list[int]) -> dict[str, tuple[float, int, float]]:
    """Each method's (seconds, best batch size or 0, accuracy) for one dtype."""
    target = sst2_target(device, dtype=dtype)
    data = sst2_dev(target)
    texts = [ex.text for ex in data.examples]
    n = len(texts)
    gold = data.labels()
    order = sorted(range(n), key=lambda i: len(target.tokenizer.tokenize(texts[i])))
    encoded = target.encode(data.examples)

    collated: dict[int, list[tuple[list[int], dict[str, torch.Tensor]]]] = {}

    def model_only(size: int) -> list[int]:
        if size not in collated:  # built by the warm-up call, outside the timing
            plans = target.plan_batches(encoded, sorted(range(n), key=encoded.lengths.__getitem__), size)
            collated[size] = [(idx, target.collate([encoded.rows[i] for i in idx])) for idx in plans]
            sync(target.device)
        ready = collated[size]
        preds = torch.empty(n, dtype=torch.long, device=target.device)
        with torch.inference_mode():
            for idx, batch in ready:
                preds[torch.tensor(idx, device=target.device)] = target.model(**batch).logits.argmax(-1)
        return preds.tolist()  # one copy to the host, which also waits for the GPU

    def plain_tuned(size: int) -> list[int]:
        preds = [0] * n
        with torch.inference_mode():
            for start in range(0, n, size):
                idx = order[start : start + size]
                enc = target.tokenizer([texts[i] for i in idx], padding=True, truncation=True, max_length=128,
                                       return_tensors="pt").to(target.device)
                for i, p in zip(idx, target.model(**enc).logits.argmax(-1).tolist()):
                    preds[i] = p
        return preds

    def padded_loop() -> list[int]:
        preds: list[int] = []
        with torch.inference_mode():
            for i in range(0, n, 32):
                enc = target.tokenizer(texts[i : i + 32], padding="max_length", truncation=True, max_length=128,
                                       return_tensors="pt").to(target.device)
                preds += target.model(**enc).logits.argmax(-1).tolist()
        return preds

    def pipeline() -> list[int]:
        import transformers

        # transformers' pipeline sets TOKENIZERS_PARALLELISM=false for the whole process, which made every
        # later encode single-threaded: on an H200, 16 ms -> 87 ms for SST-2 dev, so a dtype measured after
        # another looked slower end to end (bf16 0.67x fp32 when fp32 ran first). The environment is restored.
        with mock.patch.dict(os.environ):
            pipe = transformers.pipeline("text-classification", model=target.model, tokenizer=target.tokenizer,
                                         device=target.device)
            names = target.label_names
            return [names.index(r["label"]) for r in pipe(texts)]

    # Every (method, batch size) once per round, rounds interleaved, best of the rounds: a noisy machine
    # then slows all methods alike instead of whichever ran during a burst.
    candidates: list[tuple[str, int, Any]] = [("bound", size, lambda size=size: model_only(size)) for size in sizes]
    candidates += [("default", 0, lambda: target.predict(data.examples)),  # encodes the texts each time
                   ("fixed", 32, lambda: target.predict(data.examples, batch_size=32))]
    candidates += [("tuned", size, lambda size=size: plain_tuned(size)) for size in sizes]
    candidates += [("padded", 32, padded_loop)]
    seconds = {(name, size): float("inf") for name, size, _ in candidates}
    outputs: dict[tuple[str, int], list[int]] = {}
    for name, size, fn in candidates:
        fn()  # warm-up (allocator, kernels for these shapes, collated batches of the bound)
    for _ in range(repeat):
        for name, size, fn in candidates:
            sync(target.device)
            t, outputs[name, size] = timed(fn)
            seconds[name, size] = min(seconds[name, size], t)
    t_pipe, p_pipe = timed(pipeline, 1)

    def best(name: str) -> tuple[float, int, list[int]]:
        size = min((s for n_, s in seconds if n_ == name), key=lambda s: seconds[name, s])
        return seconds[name, size], size, outputs[name, size]

    def acc(predicted: list[int]) -> float:
        return sum(a == b for a, b in zip(predicted, gold)) / n

    labels = {"bound": "model only, best batch (the bound)", "default": "bertprobe, default batching",
              "fixed": "bertprobe, batch 32", "tuned": "plain loop, sorted, tokenizer pads, best batch",
              "padded": "plain loop, padded to 128, batch 32"}
    rows = {label: best(name) for name, label in labels.items()}
    rows[labels["default"]] = (rows[labels["default"]][0], 0, rows[labels["default"]][2])  # batches by its own rule
    rows["transformers.pipeline defaults"] = (t_pipe, 0, p_pipe)
    t_bound, _, p_bound = rows[labels["bound"]]
    t_default, t_tuned, t_padded = (rows[labels[k]][0] for k in ("default", "tuned", "padded"))
    for name, (_, _, preds) in rows.items():
        if preds != p_bound:
            print(f"  ! {name}: {sum(a != b for a, b in zip(preds, p_bound))} predictions differ from the bound's")
    budget = target.token_budget
    print(f"\n{dtype}: SST-2 dev, {n} examples, {target.device}, threads {torch.get_num_threads()}, "
          f"default batching: {f'a token budget of {budget:,}' if budget else f'batch {target.spec.batch_size}'}")
    print(f"{'method':<50}{'batch':>7}{'seconds':>9}{'ex/s':>9}{'accuracy':>10}{'of bound':>10}")
    for name, (t, size, preds) in rows.items():
        print(f"{name:<50}{size or '-':>7}{t:>9.3f}{n / t:>9.0f}{acc(preds):>10.4f}{t_bound / t:>10.2f}")
    print(f"bertprobe default vs the tuned loop at its best batch: {t_tuned / t_default:.2f}x; "
          f"vs padded loop {t_padded / t_default:.2f}x; vs pipeline {t_pipe / t_default:.2f}x")
    return {name: (t, size, acc(preds)) for name, (t, size, preds) in rows.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default=None, help="comma-separated compute dtypes")
    ap.add_argument("--repeat", type=int, default=5, help="interleaved rounds; each method's best round counts")
    ap.add_argument("--sizes", default=None, help="batch sizes to try for the bound and the tuned loop")
    ap.add_argument("--sdpa", default="bertprobe", choices=SDPA_CHOICES,
                    help="attention kernels of every method: the harness's (no cuDNN on CUDA) or PyTorch's own order")
    args = ap.parse_args()
    require(SST2_MODEL, SST2_DEV)
    torch.manual_seed(0)
    gpu = args.device.startswith("cuda")
    dtypes = (args.dtype or ("float32,bfloat16,float16" if gpu else "float32")).split(",")
    sizes = [int(s) for s in (args.sizes or ("64,256,1024" if gpu else "16,32,64")).split(",")]
    with attention_kernels(args.sdpa, args.device):
        results = {dtype: measure(args.device, dtype, args.repeat, sizes) for dtype in dtypes}
    if len(dtypes) > 1:
        print(f"\nend to end, bertprobe default batching, against {dtypes[0]}:")
        base = results[dtypes[0]]["bertprobe, default batching"][0]
        for dtype in dtypes:
            t = results[dtype]["bertprobe, default batching"][0]
            bound = results[dtype]["model only, best batch (the bound)"][0]
            print(f"  {dtype:<9} {base / t:.2f}x (model only: {results[dtypes[0]]['model only, best batch (the bound)'][0] / bound:.2f}x)")


if __name__ == "__main__":
    main()
