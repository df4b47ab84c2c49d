"""Benchmark: suites/squad.yaml on the SQuAD fixture's held-out split (12 articles, 2,777 questions), CPU.

Prints the suite's wall time (issue #53's target: under 3 minutes on 2 CPU cores), each probe's time, how many
windows were predicted and in how many passes over the data (accuracy, calibration and slices read one shared
decoding through ``ctx.predictions``), and, as the baseline measured in the same run, one bare decoding of the
same questions (windows, forward pass and span decoding, no audit): the suite's time is given as a ratio of it.
EM/F1 are checked against the fixture's model card (58.44 / 71.20).

Usage: python benchmarks/qa_suite.py [--limit N]   (N: the first N questions; default all 2,777)
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from common import REPO, SHARED, require

MODEL = SHARED / "models" / "minilm-l6-squad"
DATA = SHARED / "data" / "squad" / "test-split.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="the first N questions only")
    args = parser.parse_args()
    require(MODEL, DATA)
    import torch
    from click.testing import CliRunner

    import bertprobe.tasks.spans as spans
    from bertprobe.cli import main as cli
    from bertprobe.data.dataset import DataSpec
    from bertprobe.data.tables import load_table
    from bertprobe.model.loading import load_target
    from bertprobe.model.spec import ModelSpec

    questions = load_table(DataSpec(path=str(DATA))).examples[: args.limit]
    passes: list[int] = []
    original = spans.window_logits

    def counted(model, rows, *a, **k):  # one call per decoding pass: its windows
        passes.append(len(rows))
        return original(model, rows, *a, **k)

    spans.window_logits = counted
    # the baseline: one bare decoding of every question, in this process, as the suite's model is loaded
    target = load_target(ModelSpec(path=str(MODEL), device="cpu", dtype="float32"))
    start = time.perf_counter()
    target.task.answers(target, questions)
    bare = time.perf_counter() - start
    windows = passes[0]
    passes.clear()
    os.environ.update(BERTPROBE_QA_MODEL=str(MODEL), BERTPROBE_QA_DATA=str(DATA), BERTPROBE_DEVICE="cpu",
                      BERTPROBE_NO_PROGRESS="1", BERTPROBE_QA_LIMIT=str(args.limit or 100000))
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        result = CliRunner().invoke(cli, ["run", str(REPO / "suites" / "squad.yaml"), "--out", out,
                                          "--set", "report.formats=[json]"])
        seconds = time.perf_counter() - start
        runs = list(Path(out).glob("squad-*"))
        if not runs:
            raise SystemExit(f"the suite left no run folder (exit {result.exit_code}): {result.output[-2000:]}")
        report = json.loads((runs[0] / "report.json").read_text())
    probes = {p["probe"]: p for p in report["probes"]}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs")
    print(f"suites/squad.yaml on {len(questions)} questions of {DATA.name}: {seconds:.1f} s wall (exit {result.exit_code})")
    for name, p in probes.items():
        print(f"  {name:16s} {p['duration_s']:6.1f} s  {p['status']}")
    full = [n for n in passes if n == windows]
    print(f"windows: {windows} for {len(questions)} questions; decoding passes over the whole data in the suite: "
          f"{len(full)} (shared by {sum(n in probes for n in ('accuracy', 'calibration', 'slices'))} probes); "
          f"other windows predicted: {sum(passes) - sum(full)}")
    print(f"baseline, one bare decoding in this process: {bare:.1f} s ({windows / bare:.1f} windows/s); "
          f"suite / bare decoding: {seconds / bare:.2f}x")
    m = probes["accuracy"]["metrics"] if "accuracy" in probes else {}
    if "exact_match" in m and "f1" in m:
        print(f"EM {100 * m['exact_match']:.2f}  F1 {100 * m['f1']:.2f}  (model card on the whole split: 58.44 / 71.20)")


if __name__ == "__main__":
    main()
