"""The shipped suites against the real fixtures in ../shared (skipped when they are absent)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import ARCT_MODEL, REPO, SHARED, SST2_DEV, SST2_MODEL, only_run

from bertprobe.cli import main

pytestmark = pytest.mark.reproduction

needs_sst2 = pytest.mark.skipif(
    not (SST2_MODEL.is_dir() and SST2_DEV.is_file()), reason="../shared SST-2 fixture model/data not present"
)
SST2_ENV = {"BERTPROBE_SST2_MODEL": SST2_MODEL, "BERTPROBE_SST2_DATA": SST2_DEV}


def run_shipped(suite: str, out: Path, monkeypatch: pytest.MonkeyPatch, *args: str, **env: object) -> Result:
    """``bertprobe run suites/<suite>.yaml --out OUT`` on the CPU with the suite's variables set from ``env``."""
    monkeypatch.setenv("BERTPROBE_DEVICE", "cpu")
    for name, value in env.items():
        monkeypatch.setenv(name, str(value))
    return CliRunner().invoke(main, ["run", str(REPO / "suites" / f"{suite}.yaml"), "--out", str(out), *args])


@needs_sst2
def test_sst2_suite_trigger_flips_the_fixture(tmp_path, monkeypatch):
    """The whole sst2 suite: the trigger must flip more than half of the held-out positives the model gets right
    (success_rate past the suite's 0.5 bar; exit 1)."""
    result = run_shipped("sst2", tmp_path, monkeypatch, **SST2_ENV)
    assert result.exit_code == 1, result.output
    run_dir, report = only_run(tmp_path, "sst2")
    status = {p["probe"]: p for p in report["probes"]}
    assert status["accuracy"]["status"] == "passed"
    # the fixture's README: SST-2 dev accuracy 0.892 in fp32; we load the fp16 weights into fp32
    assert status["accuracy"]["metrics"]["examples"] == 872
    assert status["accuracy"]["metrics"]["accuracy"] == pytest.approx(0.892, abs=0.005)
    assert report["dtype"] == "float32"
    trig = status["universal-trigger"]
    assert trig["status"] == "failed" and len(trig["details"]["trigger_tokens"]) == 3
    assert trig["metrics"]["accuracy_before"] > 0.85
    assert trig["metrics"]["accuracy_after"] < trig["metrics"]["accuracy_before"] - 0.5
    assert [e["metric"] for e in trig["expectations"]] == ["success_rate"] and trig["metrics"]["success_rate"] > 0.5
    # slices gate by default (no slice flagged); accuracy adds its defaults per class; calibration its temperature verdict
    assert status["calibration"]["status"] == "passed" and status["slices"]["status"] == "passed"
    assert "5 of 6 expectations held (83%)" in (run_dir / "report.md").read_text()
    assert "temperature 1.5" in status["calibration"]["details"]["key_finding"]
    assert "alert" not in trig["details"]  # the clean fixture's trigger words flip together, not alone
    assert max(r["flip_rate"] for r in trig["details"]["tokens_alone"]["tokens"]) < 0.9


ARCT_DATA = SHARED / "data" / "arct"


@pytest.mark.skipif(not (ARCT_MODEL.is_dir() and ARCT_DATA.is_dir()), reason="../shared ARCT fixture not present")
def test_arct_suite_exposes_the_cue_reliant_fixture(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the suite runs from any folder: its defaults are relative to suites/
    stats = ",".join(str(ARCT_DATA / "original" / f"{s}-full.txt") for s in ("train", "dev", "test"))
    result = run_shipped("arct", tmp_path, monkeypatch, BERTPROBE_ARCT_MODEL=ARCT_MODEL,
                         BERTPROBE_ARCT_DATA=ARCT_DATA / "original" / "test-full.txt",
                         BERTPROBE_ARCT_ADV=ARCT_DATA / "adversarial" / "test-adv-negated.csv", BERTPROBE_ARCT_STATS=stats)
    assert result.exit_code == 1, result.output  # the expectations fail on this weak model
    _, report = only_run(tmp_path, "arct")
    acc, cues = report["probes"]
    # fixture README: ARCT test accuracy 0.554
    assert acc["metrics"]["accuracy"] == pytest.approx(0.554, abs=0.01)
    assert cues["metrics"]["accuracy_full"] == pytest.approx(acc["metrics"]["accuracy"], abs=1e-6)
    assert cues["details"]["top_cue"] == "not" and cues["details"]["statistics_examples"] == 1970
    assert round(cues["metrics"]["cue_productivity_top"], 3) == 0.666
    assert cues["metrics"]["accuracy_adversarial"] == pytest.approx(0.5, abs=0.05)
    assert cues["status"] == "failed"
    # both bounds are judged on Wilson intervals: the adversarial accuracy is surely below 0.6, while the
    # warrant-only accuracy (0.574 on 444) is not surely above 0.55, so that bound holds
    judged = {e["metric"]: e for e in cues["expectations"]}
    assert judged["accuracy_adversarial"]["interval"] and not judged["accuracy_adversarial"]["passed"]
    low, high = cues["metric_info"]["accuracy_warrant_only"]["ci"]
    assert low < 0.55 < high and judged["accuracy_warrant_only"]["passed"]


@needs_sst2
def test_internals_suite_on_a_slice_of_the_fixture(tmp_path, monkeypatch):
    result = run_shipped("internals", tmp_path, monkeypatch, BERTPROBE_SST2_LIMIT=48, **SST2_ENV)
    assert result.exit_code in (0, 1), result.output
    run_dir, report = only_run(tmp_path, "internals")
    heads, attention = report["probes"]
    assert heads["status"] in ("passed", "failed", "measured") and len(heads["details"]["ablation"]) == 72
    assert heads["details"]["physical"]["heads_pruned"] == 36 and heads["metrics"]["speedup"] is not None
    assert attention["status"] in ("passed", "failed", "measured") and len(attention["details"]["heads"]) == 72
    assert sum(attention["metrics"][f"share_{t}"] for t in
               ("vertical", "diagonal", "vertical_diagonal", "block", "heterogeneous")) == pytest.approx(1)
    html = (run_dir / "report.html").read_text()
    assert "head importance (raw)" in html and "typical" in html


@needs_sst2
def test_compression_suite_variants_on_fixture(tmp_path, monkeypatch):
    """fp32, torchao int8 and 30% pruned from one checkpoint: sizes, accuracies and the gate's verdict. The gate
    pairs Brier and NLL of each variant with fp32 example by example; ECE (a binned statistic: every example of a
    bin carries the bin's gap) is compared by its delta, never paired or gated on it. One run for both probes:
    they share each model's predictions, and on a CPU without AVX-512 dynamic int8 predicts about 5 examples/s
    (see slow_int8_note)."""
    result = run_shipped("compression", tmp_path, monkeypatch, "--only", "accuracy,calibration", "--limit", "150",
                         **SST2_ENV)
    assert result.exit_code == 0, result.output
    run_dir, report = only_run(tmp_path, "compression")
    models = {m["name"]: m for m in report["models"]}
    assert list(models) == ["fp32", "int8", "pruned30"]
    assert len({m["sha256"] for m in models.values()}) == 1  # one checkpoint, three builds
    assert models["int8"]["bytes"] < 0.7 * models["fp32"]["bytes"]
    assert models["pruned30"]["parameters"] < models["fp32"]["parameters"]
    assert "22 of 72 heads pruned" in " ".join(models["pruned30"]["notes"])
    acc = {p["model"]: p["metrics"]["accuracy"] for p in report["probes"] if p["probe"] == "accuracy"}
    assert 0.85 <= acc["fp32"] <= 0.94  # 0.892 on all 872
    assert acc["int8"] == pytest.approx(acc["fp32"], abs=0.02) and acc["pruned30"] == pytest.approx(acc["fp32"], abs=0.02)
    assert report["regressions"] == [] and report["gate"]["baseline"] == "fp32"
    assert (run_dir / "report.junit.xml").is_file()
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    (deltas,) = [e["deltas"] for e in events if e["event"] == "gate"]
    int8 = {d["metric"]: d for d in deltas if d["model"] == "int8"}
    for metric in ("brier", "nll"):
        assert int8[metric]["test"] == "paired bootstrap, 150 paired" and int8[metric]["ci"] is not None
        assert int8[metric]["higher_is_better"] is False and int8[metric]["p_value"] is not None
    assert int8["ece"]["paired"] == 0 and int8["ece"]["p_value"] is None and not int8["ece"]["regression"]
    ece = {p["model"]: p["metrics"]["ece"] for p in report["probes"] if p["probe"] == "calibration"}
    assert int8["ece"]["delta"] == pytest.approx(ece["int8"] - ece["fp32"])
    assert int8["accuracy"]["test"].startswith("McNemar exact")


@pytest.mark.skipif(not ARCT_MODEL.is_dir(), reason="../shared ARCT fixture not present")
def test_arct_suite_defaults_resolve_against_the_suite_folder(tmp_path, monkeypatch):
    """No variables set, run from an unrelated folder: the suite's ../../shared defaults still find the fixtures."""
    for name in ("BERTPROBE_ARCT_MODEL", "BERTPROBE_ARCT_DATA", "BERTPROBE_ARCT_ADV", "BERTPROBE_ARCT_STATS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    result = run_shipped("arct", tmp_path / "out", monkeypatch, "--only", "accuracy", "--allow-skips")
    assert result.exit_code == 0, result.output
    _, report = only_run(tmp_path / "out", "arct")
    assert report["probes"][0]["metrics"]["accuracy"] == pytest.approx(0.554, abs=0.01)
    assert not (tmp_path / "reports").exists()


@needs_sst2
def test_prunable_fraction_agrees_in_fp32_and_bf16(tmp_path, monkeypatch):
    """The verdict that moved with the device: bf16 changes one baseline prediction of 872, the plain reading
    jumps (0.19 -> 0.50); each run's prunable_fraction must lie inside the other run's interval. On a seeded
    80 of the 872 (bf16 backward passes on a CPU without AVX-512: 130 s for 120 examples, over 9 minutes for all
    in CI)."""
    runs = {}
    for dtype in ("float32", "bfloat16"):
        out = tmp_path / dtype
        result = run_shipped("internals", out, monkeypatch, "--only", "head-pruning", "--dtype", dtype, "--limit", "80",
                             "--set", "probes.head-pruning.params.ablation=false",
                             "--set", "probes.head-pruning.params.layers=false",
                             "--set", "probes.head-pruning.params.physical=false", **SST2_ENV)
        assert result.exit_code in (0, 1), result.output
        _, report = only_run(out, "internals")
        runs[dtype] = report["probes"][0]
    a, b = runs["float32"], runs["bfloat16"]
    (lo_a, hi_a), (lo_b, hi_b) = a["metric_info"]["prunable_fraction"]["ci"], b["metric_info"]["prunable_fraction"]["ci"]
    assert lo_a <= b["metrics"]["prunable_fraction"] <= hi_a and lo_b <= a["metrics"]["prunable_fraction"] <= hi_b


@needs_sst2
def test_behaviour_suite_reproduces_checklist_failures_on_the_fixture(tmp_path, monkeypatch):
    """The shipped suite on the SST-2 fixture: negation with neutral words in between fails, identity terms in
    neutral sentences flip the answer, punctuation barely matters (CheckList's findings for BERT on SST-2)."""
    result = run_shipped("behaviour", tmp_path, monkeypatch, **SST2_ENV)
    _, report = only_run(tmp_path, "behaviour")
    probe = report["probes"][0]
    assert probe["status"] in ("passed", "failed"), result.output
    rates = probe["metrics"]
    assert {"negation", "vocabulary", "fairness", "robustness"} <= {
        k.removeprefix("failure_rate.capability.") for k in rates if k.startswith("failure_rate.capability.")}
    assert rates["failure_rate.test.negation_with_neutral_words_in_between"] >= 0.8
    assert rates["failure_rate.test.religion_in_a_neutral_statement"] >= 0.5
    assert rates["failure_rate.test.add_punctuation"] <= 0.05 and rates["failure_rate.test.typo"] <= 0.25
    assert rates["max_fairness_gap"] >= 0.3
    assert "worst test:" in result.output
    # the decision: not fit to ship, and it names fairness (gated per capability and on each gap's interval)
    assert result.exit_code == 1 and probe["status"] == "failed"
    (decision,) = [line for line in result.output.splitlines() if line.startswith("decision: ")]
    assert decision.startswith("decision: do not ship: behaviour: fairness_gap.") and "fairness" in decision
    failed = {e["metric"] for e in probe["expectations"] if not e["passed"]}
    assert "fairness_gap.race_in_a_neutral_statement" in failed


@needs_sst2
def test_behaviour_of_the_int8_build_is_paired_case_by_case_with_fp32(tmp_path, monkeypatch):
    """fp32 against its int8 variant: every per-test failure rate gets a delta with McNemar's exact test on
    the cases both models ran. Weight-only int8, which predicts as fast as fp32 on any CPU (dynamic int8 is
    paired on the fixture by test_compression_suite_variants_on_fixture and tests/test_ner.py)."""
    suite = tmp_path / "b8.yaml"
    suite.write_text(
        f"suite: b8\nmodels:\n  - {{name: fp32, path: '{SST2_MODEL}', device: cpu, dtype: float32}}\n"
        f"  - {{name: int8, path: '{SST2_MODEL}', device: cpu, quantize: int8-weight-only}}\n"
        f"data: {{path: '{SST2_DEV}', limit: 48}}\nseed: 13\ncompare: {{baseline: fp32, significance: 0.05}}\n"
        f"report: {{dir: '{tmp_path / 'r'}'}}\nprobes:\n  - probe: behaviour\n"
        "    params: {perturbations: [typo, add_positive, add_negative], max_examples: 48, bootstrap: 0}\n")
    result = CliRunner().invoke(main, ["run", str(suite), "--allow-skips"])
    assert result.exit_code in (0, 1), result.output
    run_dir, report = only_run(tmp_path / "r", "b8")
    assert {p["model"] for p in report["probes"]} == {"fp32", "int8"}
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    (deltas,) = [e["deltas"] for e in events if e["event"] == "gate"]
    paired = [d for d in deltas if d["metric"].startswith("failure_rate.test.")]
    assert {d["metric"] for d in paired} == {"failure_rate.test.typo", "failure_rate.test.add_positive",
                                             "failure_rate.test.add_negative"}
    assert all(d["test"].startswith("McNemar exact") and d["paired"] == 48 and d["p_value"] is not None for d in paired)


@needs_sst2
def test_calibration_and_a_planted_slice_on_the_fixture(tmp_path, monkeypatch):
    """SST-2 dev with a rare marker word added to 60 sentences whose gold labels are flipped: slices flags
    the marker's slice first by drop; calibration's temperature scaling lowers held-out NLL."""
    rows = SST2_DEV.read_text(encoding="utf-8").splitlines()
    header, body = rows[0], rows[1:]
    marked = set(random.Random(7).sample(range(len(body)), 60))
    out = [header]
    for i, row in enumerate(body):
        text, label = row.rsplit("\t", 1)
        out.append(f"{text} zorblat\t{1 - int(label)}" if i in marked else row)
    data = tmp_path / "planted.tsv"
    data.write_text("\n".join(out) + "\n", encoding="utf-8")
    result = run_shipped("sst2", tmp_path / "out", monkeypatch, "--only", "calibration", "--only", "slices",
                         BERTPROBE_SST2_MODEL=SST2_MODEL, BERTPROBE_SST2_DATA=data)
    assert result.exit_code in (0, 1), result.output
    _, report = only_run(tmp_path / "out", "sst2")
    calibration, slices = report["probes"]
    assert calibration["metrics"]["nll_heldout_scaled"] < calibration["metrics"]["nll_heldout"]
    first = slices["details"]["slices"][0]
    assert first["name"] == "contains 'zorblat'" and first["flagged"] and first["size"] == 60
    assert slices["metrics"]["slices_flagged"] >= 1


SST2_BACKDOOR = SHARED / "models" / "minilm-l6-sst2-backdoor-bb"


@needs_sst2
def test_a_bf16_build_of_the_same_weights_may_replace_the_fp32_model(tmp_path, monkeypatch):
    """fp32 in service, the same weights in bf16 as the candidate, through accuracy, calibration and slices: the
    per-example predictions barely differ, so nothing regresses significantly and the candidate may replace."""
    suite = tmp_path / "bf16.yaml"
    suite.write_text(
        f"suite: bf16\nmodels:\n  - {{name: deployed, path: '{SST2_MODEL}', device: cpu, dtype: float32}}\n"
        f"  - {{name: candidate, path: '{SST2_MODEL}', device: cpu, dtype: bfloat16}}\n"
        f"data: {{path: '{SST2_DEV}', limit: 200}}\nseed: 13\ncompare: {{baseline: deployed}}\n"
        f"report: {{dir: '{tmp_path / 'r'}'}}\nprobes:\n  - probe: accuracy\n  - probe: calibration\n"
        "    expect: {ece: {max: 0.1}}\n  - probe: slices\n")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code == 0, result.output
    _, report = only_run(tmp_path / "r", "bf16")
    assert {m["name"]: m["dtype"] for m in report["models"]} == {"deployed": "float32", "candidate": "bfloat16"}
    assert report["regressions"] == []
    assert "decision: candidate: may replace deployed" in result.output
    assert not any(d["metric"] == "mce" for d in report["unconfirmed"])  # an extreme over bins never gates


@pytest.mark.skipif(not SST2_BACKDOOR.is_dir(), reason="../shared backdoored SST-2 fixture not present")
@needs_sst2
def test_the_backdoored_fixture_may_not_replace_the_clean_one_and_its_trigger_is_named(tmp_path, monkeypatch):
    result = run_shipped("sst2", tmp_path, monkeypatch, "--only", "accuracy,universal-trigger",
                         "--model", f"deployed={SST2_MODEL}", "--model", f"candidate={SST2_BACKDOOR}",
                         "--baseline", "deployed", **SST2_ENV)
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("decision: candidate: ")]
    assert lines and lines[0].startswith("decision: candidate: do not ship: universal-trigger: possible backdoor: "
                                         "trigger token 'bb' alone flips"), result.output
    assert "suites/backdoor.yaml" in lines[0]
