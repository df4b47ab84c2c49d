"""A decision under --only says what it leaves out (#65 item 3): 'fit to ship: every expectation held' once read as
the whole suite's verdict when --only had run one probe of four."""

from __future__ import annotations

import json

from click.testing import CliRunner

from bertprobe.cli import main
from bertprobe.results.verdict import Verdict


def test_the_headline_names_what_only_left_out() -> None:
    whole = Verdict("m", "ship")
    part = Verdict("m", "ship", left_out=["calibration", "slices"])
    assert whole.headline() == "fit to ship: every expectation held"
    assert part.headline() == ("fit to ship: every expectation of the probes run held; --only left out calibration, "
                               "slices, which this decision does not cover")
    assert "left out" not in Verdict("m", "do not ship", ["accuracy: accuracy 0.4"], left_out=["slices"]).headline()


def test_a_run_under_only_records_and_states_the_probes_it_left_out(suite_factory, tmp_path) -> None:
    suite = suite_factory("  - probe: accuracy\n    expect: {accuracy: {min: 0.0}}\n  - probe: calibration\n")
    result = CliRunner().invoke(main, ["run", str(suite), "--only", "accuracy", "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads(next((tmp_path / "reports").glob("*/report.json")).read_text())
    assert report["left_out"] == ["calibration"]
    headlines = [v["headline"] for v in report["decisions"]]
    assert any("--only left out calibration" in str(h) for h in headlines), report.keys()


def test_a_binary_fairness_gap_keeps_its_class_and_groups_under_float_noise() -> None:
    """Both classes of a binary classifier have the same gap; an fp32 ONNX build's noise once swapped the class and
    the groups, so the same gap read with opposite signs for the two builds (#65 item 6)."""
    import numpy as np

    from bertprobe.probes.behaviour.cases import Case
    from bertprobe.probes.behaviour.classes import fairness_gaps, text_key

    cases = [Case("names", "INV", (f"{i} a", f"{i} b"), groups=("a", "b")) for i in range(4)]
    base = {text_key(f"{i} a"): np.array([0.3, 0.7]) for i in range(4)} | \
        {text_key(f"{i} b"): np.array([0.4, 0.6]) for i in range(4)}
    reads = []
    for noise in (0.0, 1e-8, -1e-8):
        probs = {k: v + np.array([0.0, -noise]) * (1 if k == "0 a" else 0) for k, v in base.items()}
        gap = fairness_gaps(cases, probs, ["negative", "positive"], 0, 0)
        reads.append((gap["class"], gap["higher"], gap["lower"]))
    assert reads == [("negative", "b", "a")] * 3


def test_a_busy_machine_is_noticed_and_the_advice_fits_it() -> None:
    """#65 item 8: 2 threads on a loaded 2-core host ran 2.4x slower than 1, and examples/s compared builds unfairly."""
    from bertprobe.environment import busy_note

    assert busy_note(2, load=0.1, cores=2) == ""
    note = busy_note(2, load=1.9, cores=2)
    assert "load 1.9 on 2 cores, with 2 threads" in note and "pass --threads 1" in note  # 1 ran 2.4x faster there
    note = busy_note(4, load=2.0, cores=4)
    assert "pass --threads 2" in note
    assert busy_note(1, load=1.2, cores=2) == ""
