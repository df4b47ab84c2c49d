"""Benchmark: suites/ner.yaml on the UNER fixture (UNER English-EWT test, 2,077 sentences), CPU.

Prints the suite's wall time (issue target: under 3 minutes on 2 CPU cores), each probe's time, the
forward passes the run made over the data and the share saved because accuracy, calibration and slices
read one shared per-word prediction (``ctx.predictions``) instead of predicting the data once each, and the
entity F1 against the fixture's model card (0.723; PER 0.848, LOC 0.726, ORG 0.515).

Usage: python benchmarks/ner.py
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from common import REPO, SHARED, require

MODEL = SHARED / "models" / "minilm-l6-uner"
DATA = SHARED / "data" / "uner" / "en_ewt-ud-test.iob2"


def main() -> None:
    require(MODEL, DATA)
    from click.testing import CliRunner

    import bertprobe.model.word_logits as words
    from bertprobe.cli import main as cli

    passes = {"word_logits": 0, "sentences": 0, "other": 0}
    original = words.word_logits

    def counted(target, sentences, *args, **kwargs):  # one call predicts every sentence of the data once
        if len(sentences) == 2077:  # the data (behaviour predicts its own edited sentences in one more call)
            passes["word_logits"] += 1
            passes["sentences"] += len(sentences)
        else:
            passes["other"] += len(sentences)
        return original(target, sentences, *args, **kwargs)

    words.word_logits = counted
    os.environ.update(BERTPROBE_NER_MODEL=str(MODEL), BERTPROBE_NER_DATA=str(DATA), BERTPROBE_DEVICE="cpu",
                      BERTPROBE_NO_PROGRESS="1")
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        result = CliRunner().invoke(cli, ["run", str(REPO / "suites" / "ner.yaml"), "--out", out,
                                          "--set", "report.formats=[json]"])
        seconds = time.perf_counter() - start
        (run_dir,) = Path(out).glob("ner-*")
        report = json.loads((run_dir / "report.json").read_text())
    probes = {p["probe"]: p for p in report["probes"]}
    sharing = [name for name in ("accuracy", "calibration", "slices") if name in probes]
    print(f"suites/ner.yaml on {DATA.name}: {seconds:.1f} s wall on {os.cpu_count()} CPUs (exit {result.exit_code})")
    for name, p in probes.items():
        print(f"  {name:16s} {p['duration_s']:6.1f} s  {p['status']}")
    print(f"per-word prediction passes over the data: {passes['word_logits']} for {len(sharing)} probes that read it "
          f"({passes['sentences']} sentences predicted); saved: {1 - passes['word_logits'] / len(sharing):.0%} of the passes; "
          f"behaviour predicted {passes['other']} distinct edited sentences once each")
    if "behaviour" in probes:
        b = probes["behaviour"]
        total, distinct = b["details"]["sentences_in_cases"], int(b["metrics"]["predicted_texts"])
        print(f"behaviour: {int(b['metrics']['cases'])} cases hold {total} sentences; {distinct} distinct predicted once "
              f"each: {1 - distinct / total:.0%} of the forward passes saved")
    m = probes["accuracy"]["metrics"]
    print(f"entity F1 {m['entity_f1']:.4f} (model card 0.723): PER {m['f1_PER']:.4f} (0.848), LOC {m['f1_LOC']:.4f} "
          f"(0.726), ORG {m['f1_ORG']:.4f} (0.515); windowed sentences {int(m['windowed_sentences'])}")


if __name__ == "__main__":
    main()
