"""Re-record ``tests/data/recorded_report.json``: one report with every built-in probe, run on tiny models.

Usage (from the repository root): python tests/data/record_report.py. The figure test draws every
figure of the recorded report.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the ARCT file writer

from test_cues import write_arct  # noqa: E402

from bertprobe.cli import main  # noqa: E402
from bertprobe.testing import save_tiny_model, sentiment_examples, train_tiny_classifier  # noqa: E402


def record() -> None:
    tmp = Path(tempfile.mkdtemp())
    clf = train_tiny_classifier(tmp / "clf", layers=2, heads=4, steps=60)
    data = tmp / "d.tsv"
    data.write_text("sentence\tlabel\n" + "\n".join(f"{t}\t{y}" for t, y in sentiment_examples(40, 5)) + "\n")
    mc = save_tiny_model(tmp / "mc", task="multiple-choice", labels=("0", "1"))
    rows = [("the film is good", "the film is not good", i % 2, "it was fun", "movies are great") for i in range(10)]
    arct = write_arct(tmp / "arct.txt", rows)
    mlm = save_tiny_model(tmp / "mlm", task="masked-lm")
    suite = tmp / "all.yaml"
    suite.write_text(
        f"suite: recorded\nmodel: {{path: '{clf}', device: cpu}}\ndata: {{path: '{data}'}}\nseed: 1\n"
        f"report: {{dir: '{tmp / 'out'}', formats: [json]}}\nprobes:\n"
        "  - probe: accuracy\n    expect: {accuracy: {min: 0.5}}\n"
        "  - probe: universal-trigger\n    params: {target_label: positive, candidates: 4, iterations: 2, batch_size: 8, findings: 3}\n"
        "  - probe: head-pruning\n    params: {bootstrap: 0, step: 0.5, findings: 2}\n"
        "  - probe: attention-audit\n    params: {batch_size: 16, similarity_examples: 4}\n"
        f"  - probe: spurious-cues\n    model: {{path: '{mc}', device: cpu}}\n    data: {{loader: arct, path: '{arct}'}}\n"
        "    params: {min_applicability: 1, ngrams: [1], findings: 3}\n"
        f"  - probe: cloze\n    model: {{path: '{mlm}', device: cpu}}\n"
        "    params: {sets: ['builtin:counting', 'builtin:negation'], findings: 3}\n")
    result = CliRunner().invoke(main, ["run", str(suite), "--allow-skips"])
    if result.exit_code != 0:
        raise SystemExit(result.output)
    (run,) = (tmp / "out").glob("recorded-*")
    report = json.loads((run / "report.json").read_text())
    for key in ("run_dir", "started_at", "finished_at"):
        report[key] = ""
    text = json.dumps(report, indent=1).replace(str(tmp), "/tmp/recorded")
    (Path(__file__).parent / "recorded_report.json").write_text(text + "\n")
    print(f"{len(text):,} bytes: {', '.join(p['probe'] + ' ' + p['status'] for p in report['probes'])}")


if __name__ == "__main__":
    record()
