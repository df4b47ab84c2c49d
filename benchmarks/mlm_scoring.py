"""Benchmark: BLiMP pseudo-log-likelihoods, bertprobe's masked-LM engine against minicons, on the same sentences.

Model: a random MiniLM-L6-shaped BertForMaskedLM (hidden 384, 6 layers, 12 heads, intermediate 1536) with the
tokenizer of ../shared/models/minilm-l6-base (30,522 WordPiece tokens): real sizes, meaningless predictions (no
English masked-LM fixture yet; BERTPROBE_MLM=DIR times a real one instead). Sentences: ``--per-paradigm`` pairs of
every BLiMP paradigm (seeded). Baseline: minicons' ``MaskedLMScorer.sequence_score`` in batches of 20 (its own
batching: every masked copy of a batch's sentences in one pass), measured in the same run, after a warm-up, the
better of ``--repeat`` runs. Both wall and process CPU seconds are printed: on a shared machine the CPU seconds
(the work this process did) move less than the wall time. The engine's variants: its defaults, the last layer run
whole (``full last layer``), other batch shapes (``--shapes``), and on a CPU with native bfloat16 (AMX or AVX-512
BF16) bfloat16 autocast, alone and as the blimp probe's ``precision: bfloat16`` runs it (near ties re-scored in
float32), with how many pairs change their outcome against float32. Then the estimate for all 67,000 pairs
(134,000 sentences): the seconds per masked row here times the masked rows of the whole of BLiMP (every sentence
tokenised and counted), or, with ``--all``, the blimp probe timed on all of them (``--precision``, default auto).

Target (issue #62 item 6): the engine at least 2x minicons' throughput on 2 cores.

Usage: python benchmarks/mlm_scoring.py [--per-paradigm 3] [--repeat 2] [--shapes 2048x4096,4096x4096] [--all]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from common import SHARED, require

from bertprobe.model import ModelSpec, load_target, masked_scoring
from bertprobe.model.masked_scoring import MaskedScorer, pll_queries
from bertprobe.probes.minimal_pairs.pairs import load_pairs, select_pairs
from bertprobe.model.near_ties import Settled, calibration_sample, settle

BLIMP = Path(os.environ.get("BERTPROBE_BLIMP", SHARED / "data" / "blimp"))
BASE = SHARED / "models" / "minilm-l6-base"


def minilm_mlm(directory: Path) -> Any:
    import transformers

    config = transformers.BertConfig.from_pretrained(BASE)
    config.architectures = ["BertForMaskedLM"]
    torch.manual_seed(0)
    transformers.BertForMaskedLM(config).save_pretrained(directory)
    transformers.AutoTokenizer.from_pretrained(BASE).save_pretrained(directory)
    return load_target(ModelSpec(path=str(directory), device="cpu"))


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """The best wall and best CPU seconds of ``repeat`` calls, and the last result."""
    wall, cpu, out = float("inf"), float("inf"), None
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        wall, cpu = min(wall, time.perf_counter() - w), min(cpu, time.process_time() - c)
    return wall, cpu, out


def minicons_scores(target: Any, texts: list[str], batch: int = 20) -> list[float]:
    from minicons import scorer

    tok = target.tokenizer
    tok.batch_encode_plus = tok.__call__  # minicons calls it; transformers 5 removed it
    mlm = scorer.MaskedLMScorer(target.model, device="cpu", tokenizer=tok)
    out: list[float] = []
    for i in range(0, len(texts), batch):
        out += mlm.sequence_score(texts[i:i + batch], reduction=lambda x: x.sum(0).item(), PLL_metric="original")
    return out


def engine_scores(target: Any, texts: list[str], batch_tokens: int, max_rows: int, full_last_layer: bool = False,
                  precision: str = "model") -> list[float]:
    scorer = MaskedScorer(target, batch_tokens, max_rows, precision=precision)
    if not full_last_layer:
        return [s.total for s in scorer.pll(texts)]
    original = masked_scoring.scored_position_layer
    masked_scoring.scored_position_layer = lambda model: None
    try:
        return [s.total for s in scorer.pll(texts)]
    finally:
        masked_scoring.scored_position_layer = original


CALIBRATION = 20  # of the sample's pairs; the probe's default, 200, is 0.3% of all 67,000 pairs


def rechecked(target: Any, pairs: list[Any], batch_tokens: int, max_rows: int) -> tuple[list[float], Settled]:
    """The blimp probe's ``precision: bfloat16``: every pair in bfloat16, then its near ties in float32 (a
    calibration sample of ``CALIBRATION`` pairs here)."""
    texts = [t for p in pairs for t in (p.good, p.bad)]
    fast = engine_scores(target, texts, batch_tokens, max_rows, precision="bfloat16")
    exact = MaskedScorer(target, batch_tokens, max_rows)

    def rescore(indices: list[int]) -> dict[int, tuple[float, float]]:
        got = [s.total for s in exact.pll([t for i in indices for t in (pairs[i].good, pairs[i].bad)])]
        return {i: (got[2 * k], got[2 * k + 1]) for k, i in enumerate(indices)}

    settled = settle(list(zip(fast[0::2], fast[1::2])), rescore, calibration_sample(len(pairs), CALIBRATION, 13))
    return [v for s in settled.scores for v in s], settled


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-paradigm", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--shapes", default="2048x4096,4096x4096", help="other batch_tokens x max_rows to time")
    ap.add_argument("--all", action="store_true", help="also run the blimp probe on all 67,000 pairs (15-40 min on 2 cores)")
    ap.add_argument("--precision", default="auto", help="the blimp probe's precision for --all (model, bfloat16, auto)")
    args = ap.parse_args()
    require(BLIMP, BASE)
    every = load_pairs(BLIMP)
    pairs = select_pairs(every, per_paradigm=args.per_paradigm, seed=0)
    texts = [t for p in pairs for t in (p.good, p.bad)]
    with tempfile.TemporaryDirectory() as tmp:
        real = os.environ.get("BERTPROBE_MLM")
        target = load_target(ModelSpec(path=real, device="cpu")) if real else minilm_mlm(Path(tmp) / "minilm")
        defaults = MaskedScorer(target)
        rows = sum(len(pll_queries(e)) for e in defaults.encode(texts))
        print(f"{len(texts)} BLiMP sentences ({args.per_paradigm} pairs x 67 paradigms), {rows} masked rows, "
              f"{'model ' + real if real else 'random MiniLM-L6-shaped BertForMaskedLM'}, torch threads "
              f"{torch.get_num_threads()}, cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
        minicons_scores(target, texts[:20])
        engine_scores(target, texts[:20], defaults.batch_tokens, defaults.max_rows)  # warm-up
        runs: list[tuple[str, float, float, list[float]]] = []
        wall, cpu, base = timed(lambda: minicons_scores(target, texts), args.repeat)
        runs.append(("minicons 0.3.39, batches of 20", wall, cpu, base))
        shapes = [(defaults.batch_tokens, defaults.max_rows)] + [
            tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",") if s]
        for k, (bt, mr) in enumerate(shapes):
            label = f"engine {bt} tokens x {mr} rows" + (" (defaults)" if k == 0 else "")
            wall, cpu, out = timed(lambda: engine_scores(target, texts, bt, mr), args.repeat)
            runs.append((label, wall, cpu, out))
        wall, cpu, out = timed(lambda: engine_scores(target, texts, *shapes[0], full_last_layer=True), args.repeat)
        runs.append(("engine defaults, full last layer", wall, cpu, out))
        half = None
        settled = None
        if masked_scoring.native_bfloat16("cpu"):  # bfloat16 autocast (AMX / AVX-512 BF16): faster, other numbers
            engine_scores(target, texts[:20], *shapes[0], precision="bfloat16")
            wall, cpu, half = timed(lambda: engine_scores(target, texts, *shapes[0], precision="bfloat16"), args.repeat)
            runs.append((f"engine bfloat16, {shapes[0][0]} tokens x {shapes[0][1]} rows", wall, cpu, half))
            wall, cpu, (mixed, settled) = timed(lambda: rechecked(target, pairs, *shapes[0]), 1)
            runs.append(("engine bfloat16, near ties re-scored (blimp)", wall, cpu, mixed))
        print(f"{'scorer':<44}{'wall s':>8}{'cpu s':>8}{'sent/s':>8}{'x wall':>8}{'x cpu':>8}{'max |dPLL|':>12}")
        for label, wall, cpu, out in runs:
            gap = max(abs(a - b) for a, b in zip(out, base))
            print(f"{label:<44}{wall:>8.2f}{cpu:>8.2f}{len(texts) / wall:>8.1f}{runs[0][1] / wall:>8.2f}"
                  f"{runs[0][2] / cpu:>8.2f}{gap:>12.1e}")
        if half is not None and settled is not None:
            fp32 = runs[1][3]
            flips = sum((half[2 * i] > half[2 * i + 1]) != (fp32[2 * i] > fp32[2 * i + 1]) for i in range(len(pairs)))
            mixed = runs[-1][3]
            left = sum((mixed[2 * i] > mixed[2 * i + 1]) != (fp32[2 * i] > fp32[2 * i + 1]) for i in range(len(pairs)))
            print(f"bfloat16 against float32: {flips} of {len(pairs)} pairs change their outcome; re-checked "
                  f"({settled.rescored} pairs re-scored, band {settled.band:.3f} nats, {settled.rounds} rounds): {left}")
        config = target.model.config
        tokens = sum(len(e.ids) * len(pll_queries(e)) for e in defaults.encode(texts))
        flops = 2 * tokens * config.num_hidden_layers * (4 * config.hidden_size ** 2
                                                         + 2 * config.hidden_size * config.intermediate_size)
        print(f"{tokens} token positions in the masked rows; the encoder's matrix products alone (all layers at every "
              f"position) are {flops / 1e12:.2f} TFLOP: {flops / runs[1][1] / 1e9:.0f} GFLOP/s at the engine's rate")
        ratio = runs[0][1] / runs[1][1]
        print(f"engine (defaults) / minicons throughput: {ratio:.2f}x wall, {runs[0][2] / runs[1][2]:.2f}x CPU "
              f"(target >= 2x): {'met' if ratio >= 2 else 'NOT met'}")
        all_texts = [t for p in every for t in (p.good, p.bad)]
        all_rows = sum(len(pll_queries(e)) for e in defaults.encode(all_texts))
        per_row = runs[1][1] / rows
        estimate = ""
        if settled is not None:  # bfloat16 for all, float32 for the same share of pairs re-scored
            # near ties found here, plus the probe's 200 calibration pairs of all 67,000
            share = (settled.rescored - settled.calibration) / (len(pairs) - settled.calibration) + 200 / len(every)
            minutes = (runs[-2][1] + share * runs[1][1]) / rows * all_rows / 60
            estimate = f", the blimp probe in bfloat16 with its near ties re-scored ({share:.0%} of pairs) {minutes:.0f} min"
        print(f"all of BLiMP: {len(every)} pairs, {len(all_texts)} sentences, {all_rows} masked rows; estimate at this "
              f"run's engine rate: {per_row * all_rows / 60:.0f} min wall ({runs[1][2] / rows * all_rows / 60:.0f} CPU-min), "
              f"minicons {runs[0][1] / rows * all_rows / 60:.0f} min{estimate} (target: 15 min)")
        if args.all:
            probe_all(target, args.precision)


def probe_all(target: Any, precision: str) -> None:
    """The blimp probe itself on all 67,000 pairs, timed (``--all``)."""
    from bertprobe.probe import ProbeContext
    from bertprobe.probes.minimal_pairs.probe import BlimpParams, BlimpProbe

    start, cpu = time.perf_counter(), time.process_time()
    result = BlimpProbe().run(target, None, BlimpParams(data=str(BLIMP), precision=precision), ProbeContext())
    wall = time.perf_counter() - start
    extra = result.details.get("recheck") or {}
    print(f"all of BLiMP measured, blimp probe, precision {precision} ({result.details['precision']}): "
          f"{wall / 60:.1f} min wall, {(time.process_time() - cpu) / 60:.1f} CPU-min, {result.value('pairs'):.0f} pairs, "
          f"accuracy {result.value('accuracy'):.4f}"
          + (f"; {extra['rescored_pairs']} pairs re-scored in float32 (band {extra['band']:.3f} nats, "
             f"{extra['flips']} flipped back)" if extra else "") + f"; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
