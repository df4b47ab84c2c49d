"""Benchmark: spurious-cue statistics and the ARCT fixture's accuracy on full, partial and adversarial inputs.

Prints the ARCT cue table for "not" (contraction-normalised and literal) and the top 10 cues over
train+dev+test (n = 1,970) next to Niven & Kao 2019; the fixture model's accuracy on full inputs,
warrants only, reason+warrants, claim+warrants and the adversarial test set; and the time of the
statistics over ARCT and over SST-2 train (67,349 sentences).

Usage: python benchmarks/cues.py [--device cpu]
"""

from __future__ import annotations

import argparse
import time

from common import SHARED, require

from bertprobe.data import DataSpec, load_table
from bertprobe.data.arct import ArctLoader
from bertprobe.probes.spurious_cues.stats import choice_cues, label_cues, top_cues

ARCT = SHARED / "data" / "arct"
ARCT_MODEL = SHARED / "models" / "minilm-l6-arct"
SST2_TRAIN = SHARED / "data" / "sst2" / "train.tsv"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    require(ARCT, ARCT_MODEL, SST2_TRAIN)
    files = ",".join(str(ARCT / "original" / f"{s}-full.txt") for s in ("train", "dev", "test"))
    data = ArctLoader().load(DataSpec(path=files))
    labels = [ex.label for ex in data.examples]
    choices = [ex.choices for ex in data.examples]
    start = time.perf_counter()
    norm = choice_cues(choices, labels)
    arct_seconds = time.perf_counter() - start
    literal = choice_cues(choices, labels, normalize_contractions=False)
    print(f"ARCT train+dev+test, n = {len(data)}; unigrams + bigrams; no smoothing")
    print(f"{'cue':<22}{'applic.':>8}{'product.':>10}{'coverage':>10}")
    n_not = {c.cue: c for c in norm}["not"]
    l_not = {c.cue: c for c in literal}["not"]
    label = "not (n't -> not)"
    print(f"{label:<22}{n_not.applicability:>8}{n_not.productivity:>10.3f}{n_not.coverage:>10.3f}")
    print(f"{'not (literal)':<22}{l_not.applicability:>8}{l_not.productivity:>10.3f}{l_not.coverage:>10.3f}")
    print(f"{'not (Niven & Kao)':<22}{'':>8}{0.61:>10.2f}{0.64:>10.2f}")
    print("top 10 cues (productivity above chance x coverage):")
    for c in top_cues(norm, 0.5, 10):
        print(f"  {c.cue:<20}{c.applicability:>8}{c.productivity:>10.3f}{c.coverage:>10.3f}")
    start = time.perf_counter()
    sst = load_table(DataSpec(path=str(SST2_TRAIN), text="sentence"))
    load_seconds = time.perf_counter() - start
    start = time.perf_counter()
    sst_cues = label_cues([ex.text for ex in sst.examples], [int(ex.label) for ex in sst.examples], 2)
    sst_seconds = time.perf_counter() - start
    print(f"statistics time: ARCT {arct_seconds:.2f} s; SST-2 train ({len(sst)} rows, {len(sst_cues)} uni+bigrams) "
          f"{sst_seconds:.2f} s (+ {load_seconds:.2f} s loading)")
    print("SST-2 train top cues:", ", ".join(f"{c.cue} ({['neg', 'pos'][c.label]} {c.productivity:.2f}/{c.coverage:.3f})"
                                            for c in top_cues(sst_cues, 0.5, 8)))

    from bertprobe.model import ModelSpec, load_target
    from bertprobe.probe import ProbeContext
    from bertprobe.probes.spurious_cues.probe import CueParams, SpuriousCuesProbe

    target = load_target(ModelSpec(path=str(ARCT_MODEL), device=args.device, max_length=128))
    test = ArctLoader().load(DataSpec(path=str(ARCT / "original" / "test-full.txt")))
    loader = ArctLoader()
    params = CueParams(statistics_path=files, statistics_loader="arct",
                       adversarial_path=str(ARCT / "adversarial" / "test-adv-negated.csv"))
    start = time.perf_counter()
    result = SpuriousCuesProbe().run(target, test, params, ProbeContext(load_data=loader.load))
    probe_seconds = time.perf_counter() - start
    v = {k: m.value for k, m in result.metrics.items()}
    print(f"\nARCT fixture (MiniLM-L6, multiple choice) on the test set, {target.device}; probe took {probe_seconds:.1f} s")
    # Niven & Kao trained separate models on partial inputs, so only two of their figures compare directly.
    print(f"{'input':<34}{'ours':>7}{'Niven & Kao (BERT-base, mean)':>32}")
    for label, key, paper in [("full (claim, reason, warrants)", "accuracy_full", "0.623"),
                              ("warrants only (W)", "accuracy_warrant_only", "-"),
                              ("reason + warrants (R, W)", "accuracy_reason_warrant", "-"),
                              ("claim + warrants (C, W)", "accuracy_claim_warrant", "-"),
                              ("adversarial test set", "accuracy_adversarial", "0.504")]:
        print(f"{label:<34}{v[key]:>7.3f}{paper:>32}")
    print(f"adversarial set: original rows {result.details['accuracy_original_rows']:.3f}, "
          f"negated rows {result.details['accuracy_adversarial_rows']:.3f}; "
          f"cue flip rate ('not' into the wrong warrant) {v['cue_flip_rate']:.3f}")


if __name__ == "__main__":
    main()
