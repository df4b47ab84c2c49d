"""The shipped suites against the real fixtures in ../shared (skipped when they are absent)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import ARCT_MODEL, REPO, SHARED, SST2_DEV, SST2_MODEL

from bertprobe.cli import main

pytestmark = pytest.mark.integration

needs_sst2 = pytest.mark.skipif(
    not (SST2_MODEL.is_dir() and SST2_DEV.is_file()), reason="../shared SST-2 fixture model/data not present"
)


@needs_sst2
def test_sst2_suite_on_fixture(tmp_path, monkeypatch):
    monkeypatch.setenv("BERTPROBE_SST2_MODEL", str(SST2_MODEL))
    monkeypatch.setenv("BERTPROBE_SST2_DATA", str(SST2_DEV))
    monkeypatch.setenv("BERTPROBE_DEVICE", "cpu")
    result = CliRunner().invoke(main, ["run", str(REPO / "suites" / "sst2.yaml"), "--out", str(tmp_path), "--only", "accuracy"])
    assert result.exit_code == 0, result.output
    (run_dir,) = tmp_path.glob("sst2-*")
    report = json.loads((run_dir / "report.json").read_text())
    acc = report["probes"][0]
    # The fixture's README: SST-2 dev accuracy 0.892 in fp32; we load the fp16 weights into fp32.
    assert acc["metrics"]["examples"] == 872
    assert acc["metrics"]["accuracy"] == pytest.approx(0.892, abs=0.005)
    assert report["dtype"] == "float32"


@needs_sst2
def test_sst2_suite_trigger_flips_the_fixture(tmp_path, monkeypatch):
    """The whole sst2 suite: the trigger must take held-out positive accuracy below the 0.5 bar (exit 1)."""
    monkeypatch.setenv("BERTPROBE_SST2_MODEL", str(SST2_MODEL))
    monkeypatch.setenv("BERTPROBE_SST2_DATA", str(SST2_DEV))
    monkeypatch.setenv("BERTPROBE_DEVICE", "cpu")
    result = CliRunner().invoke(main, ["run", str(REPO / "suites" / "sst2.yaml"), "--out", str(tmp_path)])
    assert result.exit_code == 1, result.output
    (run_dir,) = tmp_path.glob("sst2-*")
    report = json.loads((run_dir / "report.json").read_text())
    status = {p["probe"]: p for p in report["probes"]}
    assert status["accuracy"]["status"] == "passed"
    trig = status["universal-trigger"]
    assert trig["status"] == "failed" and len(trig["details"]["trigger_tokens"]) == 3
    assert trig["metrics"]["accuracy_before"] > 0.85
    assert trig["metrics"]["accuracy_after"] < trig["metrics"]["accuracy_before"] - 0.5
    assert "Overall score: 50%" in (run_dir / "report.md").read_text()


ARCT_DATA = SHARED / "data" / "arct"


@pytest.mark.skipif(not (ARCT_MODEL.is_dir() and ARCT_DATA.is_dir()), reason="../shared ARCT fixture not present")
def test_arct_suite_exposes_the_cue_reliant_fixture(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # the suite's defaults are relative to the repository root
    monkeypatch.setenv("BERTPROBE_ARCT_MODEL", str(ARCT_MODEL))
    monkeypatch.setenv("BERTPROBE_DEVICE", "cpu")
    for var, sub in (("BERTPROBE_ARCT_DATA", "original/test-full.txt"), ("BERTPROBE_ARCT_ADV", "adversarial/test-adv-negated.csv")):
        monkeypatch.setenv(var, str(ARCT_DATA / sub))
    monkeypatch.setenv("BERTPROBE_ARCT_STATS", ",".join(str(ARCT_DATA / "original" / f"{s}-full.txt") for s in ("train", "dev", "test")))
    result = CliRunner().invoke(main, ["run", str(REPO / "suites" / "arct.yaml"), "--out", str(tmp_path)])
    assert result.exit_code == 1, result.output  # the expectations fail on this weak model
    (run_dir,) = tmp_path.glob("arct-*")
    report = json.loads((run_dir / "report.json").read_text())
    acc, cues = report["probes"]
    # fixture README: ARCT test accuracy 0.554
    assert acc["metrics"]["accuracy"] == pytest.approx(0.554, abs=0.01)
    assert cues["metrics"]["accuracy_full"] == pytest.approx(acc["metrics"]["accuracy"], abs=1e-6)
    assert cues["details"]["top_cue"] == "not" and cues["details"]["statistics_examples"] == 1970
    assert round(cues["metrics"]["cue_productivity_top"], 3) == 0.666
    assert cues["metrics"]["accuracy_adversarial"] == pytest.approx(0.5, abs=0.05)
    assert cues["status"] == "failed"


@needs_sst2
def test_internals_suite_on_a_slice_of_the_fixture(tmp_path, monkeypatch):
    monkeypatch.setenv("BERTPROBE_SST2_MODEL", str(SST2_MODEL))
    monkeypatch.setenv("BERTPROBE_SST2_DATA", str(SST2_DEV))
    monkeypatch.setenv("BERTPROBE_SST2_LIMIT", "48")
    monkeypatch.setenv("BERTPROBE_DEVICE", "cpu")
    result = CliRunner().invoke(main, ["run", str(REPO / "suites" / "internals.yaml"), "--out", str(tmp_path)])
    assert result.exit_code in (0, 1), result.output
    (run_dir,) = tmp_path.glob("internals-*")
    report = json.loads((run_dir / "report.json").read_text())
    heads, attention = report["probes"]
    assert heads["status"] in ("passed", "failed") and len(heads["details"]["ablation"]) == 72
    assert heads["details"]["physical"]["heads_pruned"] == 36 and heads["metrics"]["speedup"] is not None
    assert attention["status"] in ("passed", "failed") and len(attention["details"]["heads"]) == 72
    assert sum(attention["metrics"][f"share_{t}"] for t in
               ("vertical", "diagonal", "vertical_diagonal", "block", "heterogeneous")) == pytest.approx(1)
    html = (run_dir / "report.html").read_text()
    assert "head importance (raw)" in html and "typical" in html


ETTINGER = SHARED / "data" / "cloze" / "ettinger2020"


@pytest.mark.skipif(not ETTINGER.is_dir(), reason="../shared Ettinger data not present")
def test_cloze_suite_runs_with_a_local_masked_lm(tmp_path, monkeypatch):
    from bertprobe.testing import save_tiny_model

    mlm = save_tiny_model(tmp_path / "mlm", task="masked-lm", arch="roberta")
    monkeypatch.setenv("BERTPROBE_MLM", str(mlm))
    monkeypatch.setenv("BERTPROBE_ETTINGER", str(ETTINGER))
    monkeypatch.setenv("BERTPROBE_DEVICE", "cpu")
    result = CliRunner().invoke(main, ["run", str(REPO / "suites" / "cloze.yaml"), "--out", str(tmp_path / "out")])
    assert result.exit_code in (0, 1), result.output
    (run_dir,) = (tmp_path / "out").glob("cloze-*")
    report = json.loads((run_dir / "report.json").read_text())
    builtin, ettinger = report["probes"]
    assert builtin["metrics"]["items"] == 200 and ettinger["metrics"]["items"] == 190
    assert "negation_sensitivity_neg_136_simp" in ettinger["metrics"]
    assert {e["metric"] for e in builtin["expectations"]} == {"top1_accuracy", "negation_sensitivity"}
