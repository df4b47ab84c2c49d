"""Benchmark: cloze scoring throughput (items/s), batched versus one item per forward pass.

Runs on (a) tiny random masked LMs (a WordPiece one whose vocabulary holds every built-in word, so all
items are single-token, and a byte-level BPE one, where every word is several tokens), (b) a
MiniLM-L6-sized masked LM built from the SST-2 fixture's encoder with an untrained MLM head (real
sizes: 6 layers, hidden 384, 30,522-token vocabulary; for speed only, its predictions mean nothing)
and (c) a real masked LM when BERTPROBE_MLM names a local directory. Items: the built-in sets plus
Ettinger's diagnostics when ../shared has them. Target: batched >= 10x the one-item-per-pass rate.

Usage: python benchmarks/cloze.py [--device cpu]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch
from common import SHARED, SST2_MODEL

from bertprobe.model import ModelSpec, load_target
from bertprobe.probes.cloze.builtin import builtin_items
from bertprobe.probes.cloze.items import load_ettinger
from bertprobe.probes.cloze.scoring import ClozeScorer, candidate_ids
from bertprobe.testing import save_tiny_model

ETTINGER = SHARED / "data" / "cloze" / "ettinger2020"


def all_items() -> list:
    items = builtin_items(0)
    if ETTINGER.is_dir():
        for f in sorted(ETTINGER.glob("*.tsv")):
            if "explanations" not in f.name:
                items += load_ettinger(f)
    return items


def split(target, items) -> tuple[list, list]:
    scorer = ClozeScorer(target)
    skip = scorer.unknown_items(items)
    usable = [it for it in items if it.id not in skip]
    multi = [it for it in usable if any(len(candidate_ids(target.tokenizer, it, w)) > 1 for w in (*it.answers, *it.distractors))]
    single = [it for it in usable if it not in multi]
    return single, multi


def rate(target, items, joint: bool, batch_size: int) -> tuple[float, int, float]:
    """Items/s end to end, forward passes, and seconds spent in the model passes alone (best of 3 runs)."""
    scorer = ClozeScorer(target, batch_size=batch_size)
    scorer.score(items[:4], joint)  # warm-up
    best = (0.0, 0, 0.0)
    for _ in range(3):
        scorer.passes, scorer.forward_seconds = 0, 0.0
        start = time.perf_counter()
        scorer.score(items, joint)
        items_s = len(items) / (time.perf_counter() - start)
        if items_s > best[0]:
            best = (items_s, scorer.passes, scorer.forward_seconds)
    return best


def report(name: str, target, items, batch_size: int) -> None:
    single, multi = split(target, items)
    for kind, group in (("single-token", single), ("multi-token", multi)):
        if not group:
            print(f"{name:<34}{kind:<14}{0:>6}   (no such items)")
            continue
        batched, p_b, f_b = rate(target, group, True, batch_size)
        one, p_o, f_o = rate(target, group, False, batch_size)
        print(f"{name:<34}{kind:<14}{len(group):>6}{batched:>11.1f}{p_b:>7}{one:>11.1f}{p_o:>7}"
              f"{batched / one:>8.1f}x{f_o / f_b:>9.1f}x")


def minilm_mlm(directory: Path, device: str):
    import transformers

    config = transformers.AutoConfig.from_pretrained(SST2_MODEL)
    config.architectures = ["BertForMaskedLM"]
    model = transformers.BertForMaskedLM(config)
    encoder = transformers.AutoModelForSequenceClassification.from_pretrained(SST2_MODEL, dtype=torch.float32)
    model.bert.load_state_dict(encoder.bert.state_dict(), strict=False)
    model.save_pretrained(directory)
    transformers.AutoTokenizer.from_pretrained(SST2_MODEL).save_pretrained(directory)
    return load_target(ModelSpec(path=str(directory), device=device))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args()
    items = all_items()
    words = sorted({w.lower() for it in items for text in (it.text, *it.answers, *it.distractors)
                    for w in text.replace("{mask}", " ").replace(".", " ").replace(",", " ").split()})
    print(f"{len(items)} items, {args.device}, threads {torch.get_num_threads()}, batch {args.batch_size}; "
          "items/s end to end (best of 3) and forward passes")
    print("ratio: end to end; model-only: the same ratio counting only the time inside model passes, i.e. the")
    print("most that batching can gain on this device whatever the scorer's own overhead")
    print(f"{'model':<34}{'items':<14}{'n':>6}{'batched/s':>11}{'passes':>7}{'1-by-1/s':>11}{'passes':>7}"
          f"{'ratio':>9}{'model-only':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        wp = save_tiny_model(Path(tmp) / "wp", task="masked-lm", words=words)
        report("tiny WordPiece (2x32)", load_target(ModelSpec(path=str(wp), device=args.device)), items, args.batch_size)
        bpe = save_tiny_model(Path(tmp) / "bpe", task="masked-lm", arch="roberta")
        report("tiny byte-level BPE (2x32)", load_target(ModelSpec(path=str(bpe), device=args.device)), items, args.batch_size)
        if SST2_MODEL.is_dir():
            report("MiniLM-L6 size, untrained head", minilm_mlm(Path(tmp) / "minilm", args.device), items, args.batch_size)
        real = os.environ.get("BERTPROBE_MLM")
        if real and Path(real).is_dir():
            report(f"real MLM {Path(real).name}", load_target(ModelSpec(path=real, device=args.device)), items, args.batch_size)
        else:
            print("no local real masked LM (set BERTPROBE_MLM=DIR to include one)")


if __name__ == "__main__":
    main()
