"""Benchmark: examples/s of the harness's batched prediction on SST-2 dev (872 sentences).

Baselines, measured in the same process on the same model, and each method's share of the model-only
bound (the model alone on batches already tokenised, collated and on the device):
  * a plain loop that pads every batch of 32 to max_length (128);
  * transformers.pipeline("text-classification") with its defaults (one example at a time).

Usage: python benchmarks/throughput.py [--device cpu|cuda] [--repeat N]
"""

from __future__ import annotations

import argparse

import torch
from common import SST2_DEV, SST2_MODEL, require, sst2_dev, sst2_target, timed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    require(SST2_MODEL, SST2_DEV)
    torch.manual_seed(0)
    target = sst2_target(args.device)
    data = sst2_dev(target)
    texts = [ex.text for ex in data.examples]
    n = len(texts)
    bs = args.batch_size

    def harness() -> list[int]:
        return target.predict(data.examples, batch_size=bs)  # tokenise, sort by length, pad per batch

    def padded_loop() -> list[int]:
        preds: list[int] = []
        with torch.inference_mode():
            for i in range(0, n, bs):
                enc = target.tokenizer(texts[i : i + bs], padding="max_length", truncation=True, max_length=128, return_tensors="pt")
                enc = {k: v.to(target.device) for k, v in enc.items()}
                preds += target.model(**enc).logits.argmax(-1).tolist()
        return preds

    def pipeline() -> list[int]:
        import transformers

        pipe = transformers.pipeline("text-classification", model=target.model, tokenizer=target.tokenizer, device=target.device)
        names = target.label_names
        return [names.index(r["label"]) for r in pipe(texts)]

    encoded = target.encode(data.examples)
    on_device = [(idx, batch) for idx, batch in target.batches(encoded, batch_size=bs)]

    def model_only() -> list[int]:
        """The bound: the model alone on batches already tokenised, collated and on the device."""
        out = [0] * n
        with torch.inference_mode():
            for idx, batch in on_device:
                for i, p in zip(idx, target.model(**batch).logits.argmax(-1).tolist()):
                    out[i] = p
        return out

    harness()  # warm-up
    t_m, p_m = timed(model_only, args.repeat)
    t_h, p_h = timed(harness, args.repeat)
    t_p, p_p = timed(padded_loop, args.repeat)
    t_l, p_l = timed(pipeline, 1)
    gold = data.labels()
    acc = lambda p: sum(a == b for a, b in zip(p, gold)) / n  # noqa: E731
    print(f"SST-2 dev, {n} examples, {target.device}, {str(target.dtype).replace('torch.', '')}, batch {bs}, threads {torch.get_num_threads()}")
    print(f"{'method':<44}{'seconds':>9}{'ex/s':>9}{'accuracy':>10}{'of bound':>10}")
    for name, t, p in [
        ("model only (pre-collated batches on device)", t_m, p_m),
        ("bertprobe (length-sorted, dynamic padding)", t_h, p_h),
        ("plain loop, padded to max_length=128", t_p, p_p),
        ("transformers.pipeline defaults", t_l, p_l),
    ]:
        print(f"{name:<44}{t:>9.2f}{n / t:>9.0f}{acc(p):>10.4f}{t_m / t:>10.2f}")
    print(f"speed-up vs padded loop: {t_p / t_h:.2f}x   vs pipeline: {t_l / t_h:.2f}x")


if __name__ == "__main__":
    main()
