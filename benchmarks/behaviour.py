"""Benchmark: the behaviour probe's prediction of suites/behaviour.yaml against a plain batched loop per test.

Builds the suite's cases on the SST-2 fixture exactly as the probe does (templates and the perturbation
catalogue on a seeded sample of SST-2 dev), then predicts them two ways, in interleaved rounds:

* bertprobe: every distinct text once, through ``Target.predict_proba`` (tokenised in one call,
  length-sorted batches);
* plain loop: test by test, each test's texts in order (repeats included), batches of 32 padded by the
  tokenizer, the way a script that runs one test at a time would.

Prints both times, the ratio, the texts each predicts, and checks that both give the same verdicts.

Usage: python benchmarks/behaviour.py [--rounds 3] [--threads N]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from common import SHARED, require

from bertprobe.data import DataSpec, load_table
from bertprobe.model import ModelSpec, load_target
from bertprobe.probe import ProbeContext
from bertprobe.probes.behaviour.classes import perturbation_cases, predict, text_key
from bertprobe.probes.behaviour.lexicon import lexicons_with
from bertprobe.probes.behaviour.params import BehaviourParams
from bertprobe.probes.behaviour.perturb import Words, perturbation_specs
from bertprobe.probes.behaviour.scoring import judge_case
from bertprobe.probes.behaviour.templates import expand_template
from bertprobe.suite import load_suite

MODEL = SHARED / "models" / "minilm-l6-sst2"
DEV = SHARED / "data" / "sst2" / "dev.tsv"
SUITE = Path(__file__).resolve().parent.parent / "suites" / "behaviour.yaml"


def suite_cases(target):
    suite = load_suite(SUITE, env={"BERTPROBE_SST2_MODEL": str(MODEL), "BERTPROBE_SST2_DATA": str(DEV)})
    spec = suite.probes[0]
    params = BehaviourParams(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in spec.params.items()})
    lexicons = lexicons_with({})
    cases = [c for i, t in enumerate(params.templates) for c in expand_template(t, lexicons, suite.seed, params.max_cases,
                                                                                 f"templates[{i}]")]
    data = load_table(DataSpec(path=str(DEV)))
    made, _ = perturbation_cases(data, perturbation_specs(None), Words(lexicons=lexicons), suite.seed, params.max_examples)
    return cases + made, params


def plain_loop(target, cases, batch_size: int = 32) -> dict[str, np.ndarray]:
    """Test by test, every text of the test in order, batches padded by the tokenizer."""
    by_test = defaultdict(list)
    for case in cases:
        by_test[case.test].append(case)
    out: dict[str, np.ndarray] = {}
    with torch.inference_mode():
        for test_cases in by_test.values():
            texts = [t for c in test_cases for t in c.texts]
            for start in range(0, len(texts), batch_size):
                chunk = texts[start:start + batch_size]
                enc = target.tokenizer([text_key(t) for t in chunk], padding=True, truncation=True,
                                       max_length=target.max_length, return_tensors="pt")
                probs = target.model(**enc).logits.float().softmax(-1).numpy()
                for t, p in zip(chunk, probs):
                    out[text_key(t)] = p
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    require(MODEL, DEV)
    if args.threads:
        torch.set_num_threads(args.threads)
    target = load_target(ModelSpec(path=str(MODEL), device="cpu", dtype="float32", max_length=128))
    cases, params = suite_cases(target)
    total_texts = sum(len(c.texts) for c in cases)
    distinct = len({text_key(t) for c in cases for t in c.texts})
    print(f"suites/behaviour.yaml on minilm-l6-sst2: {len(cases)} cases, {total_texts} texts, {distinct} distinct; "
          f"torch threads {torch.get_num_threads()}")
    plain_loop(target, cases[:50])  # warm-up, not timed
    times = defaultdict(list)
    results = {}
    for _ in range(args.rounds):
        start = time.perf_counter()
        results["bertprobe"] = predict(target, cases, params, ProbeContext())
        times["bertprobe"].append(time.perf_counter() - start)
        start = time.perf_counter()
        results["plain"] = plain_loop(target, cases)
        times["plain"].append(time.perf_counter() - start)
    labels = target.label_names
    verdicts = {name: [judge_case(c, lambda t, p=probs: p[text_key(t)], labels).passed for c in cases]
                for name, probs in results.items()}
    agree = np.mean([a == b for a, b in zip(verdicts["bertprobe"], verdicts["plain"])])
    best = {k: min(v) for k, v in times.items()}
    print(f"{'method':<34}{'best s':>8}{'median s':>10}{'texts':>8}")
    print(f"{'bertprobe (distinct texts once)':<34}{best['bertprobe']:>8.2f}{np.median(times['bertprobe']):>10.2f}{distinct:>8}")
    print(f"{'plain batched loop per test':<34}{best['plain']:>8.2f}{np.median(times['plain']):>10.2f}{total_texts:>8}")
    print(f"speed-up (best rounds): {best['plain'] / best['bertprobe']:.2f}x; verdicts agree on {agree:.2%} of cases")


if __name__ == "__main__":
    main()
