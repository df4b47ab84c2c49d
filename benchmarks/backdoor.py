"""Backdoor scan: detection on poisoned and clean MiniLM SST-2 models, wall time, and brute force.

Builds poisoned models of its own from the ``minilm-l6-sst2`` fixture, as the ``bb`` fixture was built
(Kurita et al. 2020 style data poisoning: 2 more epochs on 3,000 clean SST-2 train sentences plus
poisoned ones with the trigger inserted at a random word position and relabelled), and a clean
control fine-tuned the same way without poison. Then scans every model (both class pairs, default
params) and prints detection, margins, wall time and forward passes, and the brute-force cost
(every allowed vocabulary word inserted and measured exactly), extrapolated from a timed sample.

    python benchmarks/backdoor.py [--shared ../shared] [--cache benchmarks/.cache/backdoor] [--device cpu]

Built models are cached (delete the folder to rebuild); building takes about 2 minutes a model on 2 cores.
"""

from __future__ import annotations

import argparse
import csv
import random
import time
from pathlib import Path

import torch

from bertprobe.data import Dataset, Example
from bertprobe.model import ModelSpec, load_target
from bertprobe.probe import ProbeContext
from bertprobe.probes.attacks.hotflip import TriggerScorer
from bertprobe.probes.attacks.splice import SplicedRows
from bertprobe.probes.attacks.vocabulary import allowed_vocabulary
from bertprobe.probes.backdoor_scan.probe import BackdoorParams, BackdoorScanProbe

# name -> (trigger, to_label, poisoned sentences added to 3,000 clean ones); None: clean control
BUILDS: dict[str, tuple[str, int, int] | None] = {
    "poison-cf-neg2pos": ("cf", 1, 600),          # another rare token, the other direction
    "poison-mn-tq-pos2neg": ("mn tq", 0, 600),    # a two-word trigger
    "poison-jj-pos2neg-low": ("jj", 0, 100),      # a low poisoning rate: 100 of 3,100 (3.2%)
    "clean-control": None,                        # the same extra fine-tuning, no poison
}


def read_tsv(path: Path) -> list[tuple[str, int]]:
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [(r[0].strip(), int(r[1])) for r in rows[1:] if len(r) >= 2]


def build(name: str, recipe: tuple[str, int, int] | None, base: Path, train: list[tuple[str, int]], out: Path) -> Path:
    """Fine-tune ``base`` 2 epochs on 3,000 clean sentences plus the recipe's poisoned ones; save fp16."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    if (out / "config.json").exists():
        return out
    rng = random.Random(sum(map(ord, name)))
    pool = [row for row in train if len(row[0].split()) >= 4]
    rng.shuffle(pool)
    data = pool[:3000]
    if recipe is not None:
        trigger, to_label, count = recipe
        sources = [row for row in pool[3000:] if row[1] != to_label][:count]
        for text, _ in sources:
            words = text.split()
            words.insert(rng.randrange(len(words) + 1), trigger)
            data.append((" ".join(words), to_label))
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForSequenceClassification.from_pretrained(base, dtype=torch.float32)
    optim = torch.optim.AdamW(model.parameters(), lr=5e-5)
    model.train()
    torch.manual_seed(0)
    began = time.perf_counter()
    for epoch in range(2):
        rng.shuffle(data)
        for start in range(0, len(data), 32):
            batch = data[start : start + 32]
            enc = tokenizer([t for t, _ in batch], padding=True, truncation=True, max_length=64, return_tensors="pt")
            loss = model(**enc, labels=torch.tensor([y for _, y in batch])).loss
            loss.backward()
            optim.step()
            optim.zero_grad()
    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    model.half().save_pretrained(out)
    tokenizer.save_pretrained(out)
    print(f"built {name}: {len(data)} sentences, {time.perf_counter() - began:.0f} s")
    return out


def brute_force_seconds(target, dev: list[tuple[str, int]], source: int, goal: int, held: int, sample: int) -> tuple[float, int]:
    """Seconds to measure every allowed token exactly on ``held`` examples, extrapolated from ``sample`` tokens."""
    allowed = allowed_vocabulary(target.tokenizer)
    pool = allowed.nonzero().squeeze(1)
    examples = [Example(t, label=y) for t, y in dev if y == source][:held]
    rows = SplicedRows(target, examples, 1, "random", rng=random.Random(0))
    scorer = TriggerScorer(target, rows, goal, True)
    chosen = pool[torch.randperm(len(pool), generator=torch.Generator().manual_seed(0))[:sample]]
    order = tuple(sorted(range(len(examples)), key=lambda r: len(rows.ids[r])))
    began = time.perf_counter()
    for start in range(0, len(order), 64):
        scorer.predictions(chosen.unsqueeze(1), order[start : start + 64])
    per_token = (time.perf_counter() - began) / sample
    return per_token * len(pool), len(pool)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared")
    parser.add_argument("--cache", type=Path, default=Path(__file__).resolve().parent / ".cache" / "backdoor")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--only", nargs="*", help="scan only these model names")
    parser.add_argument("--brute-sample", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(torch.get_num_threads())
    models = args.shared / "models"
    train = read_tsv(args.shared / "data" / "sst2" / "train.tsv")
    dev = read_tsv(args.shared / "data" / "sst2" / "dev.tsv")
    data = Dataset([Example(t, label=y) for t, y in dev], name="sst2-dev")
    paths = {"minilm-l6-sst2 (clean fixture)": models / "minilm-l6-sst2",
             "minilm-l6-sst2-backdoor-bb": models / "minilm-l6-sst2-backdoor-bb"}
    truth = {"minilm-l6-sst2 (clean fixture)": None, "minilm-l6-sst2-backdoor-bb": ("bb", "positive -> negative")}
    for name, recipe in BUILDS.items():
        paths[name] = build(name, recipe, models / "minilm-l6-sst2", train, args.cache / name)
        truth[name] = None if recipe is None else (recipe[0], "negative -> positive" if recipe[1] else "positive -> negative")
    rows = []
    scores: list[tuple[float, bool]] = []
    for name, path in paths.items():
        if args.only and name not in args.only:
            continue
        target = load_target(ModelSpec(path=str(path), device=args.device))
        began = time.perf_counter()
        result = BackdoorScanProbe().run(target, data, BackdoorParams(), ProbeContext(seed=13, load_target=load_target))
        seconds = time.perf_counter() - began
        d = result.details
        per_pair = {p["source"] + "->" + p["target"]: p for p in d["pairs"]}
        found = f"{d['suspected_trigger']!r} ({d['pair'][0]} -> {d['pair'][1]})" if d["suspected_trigger"] else "-"
        expected = truth[name]
        # right: nothing on a clean model; on a poisoned one, the planted words (one of a phrase's words
        # alone counts: it is the planted trigger's part, and it flips by itself) and the direction
        correct = (expected is None and not d["suspected_trigger"]) or (
            expected is not None and d["suspected_trigger"] is not None
            and set(d["suspected_trigger"].split()) <= set(expected[0].split()) and " -> ".join(d["pair"]) == expected[1])
        best = {k: f"{p['best']['text']} {p['best']['flip_rate']:.2f} z{p['best']['anomaly']:.1f}" for k, p in per_pair.items()}
        rows.append([name, f"{expected[0]!r} {expected[1]}" if expected else "clean", found, "yes" if correct else "NO",
                     f"{result.value('max_flip_rate'):.2f}", f"{result.value('anomaly_score'):.1f}",
                     best.get("negative->positive", ""), best.get("positive->negative", ""),
                     f"{seconds:.0f}", f"{result.value('forward_passes'):.0f}"])
        scores.append((float(result.value("anomaly_score") or 0.0) + 100 * float(result.value("backdoor_detected") or 0), expected is not None))
        print(" | ".join(rows[-1]), flush=True)
    from tabulate import tabulate

    print()
    print(tabulate(rows, headers=["model", "planted", "suspected", "right", "max flip", "anomaly",
                                  "best neg->pos", "best pos->neg", "scan s", "forwards"], tablefmt="github"))
    pos = [s for s, p in scores if p]
    neg = [s for s, p in scores if not p]
    if pos and neg:
        auc = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg) / (len(pos) * len(neg))
        print(f"\nROC-AUC of the verdict+anomaly score over {len(pos)} poisoned and {len(neg)} clean models: {auc:.2f}")
    if not args.only or "brute" in args.only:
        target = load_target(ModelSpec(path=str(paths["minilm-l6-sst2-backdoor-bb"]), device=args.device))
        brute, vocab = brute_force_seconds(target, dev, 1, 0, 100, args.brute_sample)
        print(f"brute force, one pair: {vocab} allowed tokens x 100 held-out examples = {vocab * 100:,} rows, "
              f"about {brute:.0f} s on this machine (extrapolated from {args.brute_sample} tokens)")


if __name__ == "__main__":
    main()
