"""Model matrix, variants, regression gates, `bertprobe compare`, JUnit and rebuilt reports (tiny models)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from conftest import only_run, sentiment_tsv

from bertprobe.cli import main
from bertprobe.stats import mcnemar_exact
from bertprobe.testing import sentiment_examples


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="module")
def trained_dir(trained_model) -> Path:
    return trained_model("good", layers=2, heads=4)


@pytest.fixture(scope="module")
def random_dir(tmp_path_factory) -> Path:
    from bertprobe.testing import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("bad"), seed=5, layers=2, heads=4)


@pytest.fixture(scope="module")
def senti_tsv(tmp_path_factory) -> Path:
    return sentiment_tsv(tmp_path_factory.mktemp("data") / "senti.tsv", 120)


def matrix_suite(tmp_path: Path, models: str, data: Path, probes: str = "  - probe: accuracy\n", extra: str = "",
                 formats: str = "[json, markdown, html, junit]") -> Path:
    text = (f"suite: mx\nmodels:\n{models}data: {{path: '{data}'}}\nseed: 3\n{extra}"
            f"report: {{dir: '{tmp_path / 'reports'}', formats: {formats}}}\nprobes:\n{probes}")
    path = tmp_path / "mx.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_mcnemar_exact_matches_a_hand_computed_table():
    # b = 2, c = 8 discordant pairs: p = 2 * P(X <= 2), X ~ Bin(10, 1/2) = 2 * (1 + 10 + 45) / 1024
    assert mcnemar_exact(2, 8) == pytest.approx(112 / 1024)
    assert mcnemar_exact(8, 2) == pytest.approx(112 / 1024)
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(0, 12) == pytest.approx(2 / 4096)


def test_matrix_runs_every_probe_on_every_model_in_model_order(tmp_path, trained_dir, random_dir, senti_tsv):
    models = (f"  - {{name: good, path: '{trained_dir}', device: cpu}}\n"
              f"  - {{path: '{random_dir}', device: cpu}}\n")
    probes = "  - probe: accuracy\n  - probe: accuracy\n    id: again\n"
    result = invoke("run", "--allow-skips", str(matrix_suite(tmp_path, models, senti_tsv, probes)))
    assert result.exit_code == 1, result.output  # the random model misses the default per-class bound
    assert "decision: good: fit to ship" in result.output
    assert re.search(rf"decision: {random_dir.name}: do not ship: accuracy: accuracy_\w+ 0(\.\d+)? \(expected >= 0\.5",
                     result.output)
    run_dir, report = only_run(tmp_path / "reports", "mx")
    assert report["schema_version"] == 2
    names = [m["name"] for m in report["models"]]
    assert names == ["good", random_dir.name]  # an unnamed model is named after its folder
    good = report["models"][0]
    assert len(good["sha256"]) == 64 and good["parameters"] > 0 and good["bytes"] >= 4 * good["parameters"]
    assert good["dtype"] == "float32" and good["device"] == "cpu" and good["task"] == "classification"
    # model by model: both probes of the first model, then both of the second
    bad = random_dir.name
    assert [(p["model"], p["id"]) for p in report["probes"]] == [("good", "accuracy"), ("good", "again"),
                                                                 (bad, "accuracy"), (bad, "again")]
    accs = {p["model"]: p["metrics"]["accuracy"] for p in report["probes"]}
    assert accs["good"] > 0.9 > accs[bad] + 0.2
    outcomes = [json.loads(line) for line in (run_dir / "outcomes.jsonl").read_text().splitlines()]
    correct = [o for o in outcomes if o["name"] == "correct"]
    assert len(correct) == 4 and all(len(o["ids"]) == 120 for o in correct)
    md = (run_dir / "report.md").read_text()
    assert "## Metrics side by side" in md and "| good " in md


def test_repeated_model_flags_build_the_matrix(tmp_path, trained_dir, random_dir, suite_factory):
    suite = suite_factory()
    result = invoke("run", "--allow-skips", str(suite), "--model", f"a={trained_dir}", "--model", str(random_dir))
    assert result.exit_code == 0, result.output
    _, report = only_run(suite.parent / "reports", "tiny")
    assert [m["name"] for m in report["models"]] == ["a", random_dir.name]
    assert [m["path"] for m in report["models"]] == [str(trained_dir), str(random_dir)]


def test_one_model_suite_keeps_its_shape(suite_factory, tiny_clf_dir):
    result = invoke("run", "--allow-skips", str(suite_factory()))
    assert result.exit_code == 0, result.output
    _, report = only_run(suite_factory().parent / "reports", "tiny")
    assert report["model"] == str(tiny_clf_dir) and len(report["models"]) == 1
    assert report["probes"][0]["model"] == tiny_clf_dir.name and report["regressions"] == []


def test_encoded_data_are_shared_by_targets_with_one_tokenizer(trained_dir, random_dir):
    from bertprobe.data import Example
    from bertprobe.model import ModelSpec, load_target

    cache: dict = {}
    a = load_target(ModelSpec(path=str(trained_dir), device="cpu"))
    b = load_target(ModelSpec(path=str(random_dir), device="cpu"))
    a.encode_cache = b.encode_cache = cache
    examples = [Example("the movie was good"), Example("boring plot")]
    first = a.encode(examples)
    assert b.encode(examples) is first and len(cache) == 1
    assert a.encode([Example("another text")]) is not first and len(cache) == 2


def test_int8_variant_logits_stay_close_to_fp32(trained_dir, senti_tsv):
    from bertprobe.data import DataSpec, load_table
    from bertprobe.model import ModelSpec, load_target
    from bertprobe.model.variants import derive_variant

    spec = ModelSpec(path=str(trained_dir), device="cpu")
    base = load_target(spec)
    int8, notes = derive_variant(base, ModelSpec(path=str(trained_dir), device="cpu", name="q", quantize="int8-dynamic"))
    assert int8.quantized and "gradients" not in int8.capabilities and "input-gradients" in int8.capabilities
    assert type(int8.model.bert.encoder.layer[0].attention.output.dense.weight).__name__ == "Int8Tensor"
    assert base.model is not int8.model  # the stored model is untouched
    examples = load_table(DataSpec(path=str(senti_tsv))).examples
    ref, q = base.logits(examples), int8.logits(examples)
    # close, on every kernel path: with VNNI the largest gap is 0.2% of the largest logit; on AVX2 kernels
    # (an AVX2-only CPU, or ONEDNN_MAX_CPU_ISA=AVX2) oneDNN's 8-bit products saturate and the logits shrink, by
    # 26% here, while every prediction and the logits' order hold; a broken quantization misses all three
    assert (ref - q).abs().max() < 0.35 * ref.abs().max()
    assert torch.corrcoef(torch.stack([ref.flatten(), q.flatten()]))[0, 1] > 0.95
    assert (ref.argmax(-1) == q.argmax(-1)).float().mean() > 0.95
    from bertprobe.model.modelinfo import model_bytes

    assert model_bytes(int8.model) < model_bytes(base.model)


def test_pruned_variant_has_the_expected_heads_and_runs_every_probe(tmp_path, trained_dir, senti_tsv):
    models = (f"  - {{name: full, path: '{trained_dir}', device: cpu}}\n"
              f"  - {{name: half, path: '{trained_dir}', device: cpu, prune_heads: 0.5}}\n")
    probes = ("  - probe: accuracy\n"
              "  - probe: universal-trigger\n    params: {target_label: positive, candidates: 4, iterations: 2, batch_size: 8}\n"
              "  - probe: head-pruning\n    params: {bootstrap: 0, step: 0.5}\n"
              "  - probe: attention-audit\n    params: {batch_size: 16}\n")
    result = invoke("run", "--allow-skips", str(matrix_suite(tmp_path, models, senti_tsv, probes)))
    assert result.exit_code in (0, 1), result.output  # 1 where a 2-iteration trigger beats the default bound
    _, report = only_run(tmp_path / "reports", "mx")
    half = [p for p in report["probes"] if p["model"] == "half"]
    # judged: accuracy and the trigger by their defaults; described: the research probes
    assert [p["status"] for p in half][::2] == ["passed", "measured"] and half[1]["status"] in ("passed", "failed")
    assert half[3]["status"] == "measured", [p["message"] for p in half]
    info = {m["name"]: m for m in report["models"]}
    assert info["half"]["variant"] == {"prune_heads": 0.5}
    assert "4 of 8 heads pruned" in " ".join(info["half"]["notes"])
    # each attention head of a layer has 3 projections of 32/4 rows: 4 of 8 heads fewer parameters
    assert info["full"]["parameters"] - info["half"]["parameters"] == 4 * (3 * (8 * 32 + 8) + 8 * 32)
    importance = next(p for p in half if p["probe"] == "head-pruning")["details"]["importance"]
    assert sum(v > 0 for row in importance for v in row) == 4  # only the 4 remaining heads carry importance


def test_pruned_model_head_count_read_from_module_shapes(trained_dir):
    from bertprobe.model import ModelSpec, load_target
    from bertprobe.model.architectures import attention_sites, heads_per_layer
    from bertprobe.model.pruning import prune_heads

    target = load_target(ModelSpec(path=str(trained_dir), device="cpu"))
    pruned, _ = prune_heads(target.model, [(0, 1), (0, 3), (1, 0)])
    assert heads_per_layer(attention_sites(pruned)) == [2, 3]


def gate_models(trained_dir: Path, other: Path) -> str:
    return (f"  - {{name: base, path: '{trained_dir}', device: cpu}}\n"
            f"  - {{name: cand, path: '{other}', device: cpu}}\n")


def test_gate_flags_a_worse_candidate_and_exits_1(tmp_path, trained_dir, random_dir, senti_tsv):
    suite = matrix_suite(tmp_path, gate_models(trained_dir, random_dir), senti_tsv,
                         extra="compare: {baseline: base, tolerance: 0.01, significance: 0.05}\n")
    result = invoke("run", "--allow-skips", str(suite))
    assert result.exit_code == 1, result.output
    assert "regression" in result.output
    run_dir, report = only_run(tmp_path / "reports", "mx")
    (reg,) = [r for r in report["regressions"] if r["metric"] == "accuracy"]
    assert reg["model"] == "cand" and reg["baseline"] == "base" and reg["delta"] < -0.2
    assert reg["p_value"] < 0.001 and reg["test"].startswith("McNemar")
    assert "Regressions against base" in (run_dir / "report.md").read_text()
    # JUnit: one suite per model, a testcase per probe, one failed testcase per regression
    root = ET.parse(run_dir / "report.junit.xml").getroot()
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["mx: base", "mx: cand"]
    cand = suites[1]
    regressions = [c for c in cand.findall("testcase") if c.get("name").startswith("regression")]
    assert len(regressions) == len(report["regressions"]) >= 1
    # the random candidate also fails its own default per-class bound: one failed probe testcase more, and its
    # decision testcase fails with the decision line the terminal printed; the baseline's decision passes
    assert int(cand.get("tests")) == 2 + len(regressions) and int(cand.get("failures")) == len(regressions) + 2
    assert int(root.get("failures")) == len(regressions) + 2
    (decision,) = [c for c in cand.findall("testcase") if c.get("name") == "decision"]
    line = decision.find("failure").get("message")
    assert line.startswith("cand: do not ship: ") and f"decision: {line}" in result.output
    (base_decision,) = [c for c in suites[0].findall("testcase") if c.get("name") == "decision"]
    assert base_decision.find("failure") is None and base_decision.find("system-out").text.startswith("base: baseline")


def test_candidate_within_tolerance_passes(tmp_path, trained_dir, senti_tsv):
    suite = matrix_suite(tmp_path, gate_models(trained_dir, trained_dir), senti_tsv,
                         extra="compare: {baseline: base, tolerance: {accuracy: 0.0}}\n")
    result = invoke("run", "--allow-skips", str(suite))
    assert result.exit_code == 0, result.output
    _, report = only_run(tmp_path / "reports", "mx")
    assert report["regressions"] == [] and report["gate"]["baseline"] == "base"


def test_gate_ignores_cost_metrics_and_small_changes():
    from bertprobe.results import ProbeResult
    from bertprobe.results.gates import compare_metric, judge_deltas
    from bertprobe.results.outcomes import Outcomes

    base, cand = ProbeResult("p", model="a"), ProbeResult("p", model="b")
    base.add_metric("seconds", 1.0, False, kind="cost")
    cand.add_metric("seconds", 9.0, False, kind="cost")
    assert not judge_deltas([compare_metric("seconds", base, cand, {}, {}, 0.01)], None)[0].regression
    ids = [str(i) for i in range(40)]
    a = Outcomes("correct", ids, [1.0] * 40)
    b = Outcomes("correct", ids, [0.0] * 3 + [1.0] * 37)  # 3 of 40 worse: delta -0.075, McNemar p = 0.25
    base.add_metric("accuracy", 1.0, True, outcome="correct")
    cand.add_metric("accuracy", 37 / 40, True, outcome="correct")
    (plain,) = judge_deltas([compare_metric("accuracy", base, cand, {"correct": a}, {"correct": b}, 0.01)], None)
    (tested,) = judge_deltas([compare_metric("accuracy", base, cand, {"correct": a}, {"correct": b}, 0.01)], 0.05)
    assert plain.regression and not tested.regression and tested.past_tolerance  # past it, not significant
    assert tested.p_value == pytest.approx(0.25) and tested.paired == 40
    (wide,) = judge_deltas([compare_metric("accuracy", base, cand, {"correct": a}, {"correct": b}, 0.1)], None)
    assert not wide.regression and not wide.past_tolerance


def test_gate_baseline_must_name_a_model(tmp_path, trained_dir, senti_tsv):
    suite = matrix_suite(tmp_path, gate_models(trained_dir, trained_dir), senti_tsv, extra="compare: {baseline: bsae}\n")
    result = invoke("run", "--allow-skips", str(suite))
    assert result.exit_code == 2 and "did you mean 'base'" in result.output


def _single_run(tmp_path: Path, name: str, model: Path, data: Path) -> Path:
    out = tmp_path / name
    out.mkdir()
    suite = matrix_suite(out, f"  - {{name: m, path: '{model}', device: cpu}}\n", data)
    assert invoke("run", "--allow-skips", str(suite)).exit_code in (0, 1)  # a random model misses its defaults
    run_dir, _ = only_run(out / "reports", "mx")
    return run_dir


def test_compare_exit_codes(tmp_path, trained_dir, random_dir, senti_tsv):
    good_a = _single_run(tmp_path, "a", trained_dir, senti_tsv)
    good_b = _single_run(tmp_path, "b", trained_dir, senti_tsv)
    bad = _single_run(tmp_path, "c", random_dir, senti_tsv)
    same = invoke("compare", str(good_a), str(good_b), "--significance", "0.05")
    assert same.exit_code == 0, same.output
    assert "no regression" in same.output and (good_b / "compare.json").is_file()
    worse = invoke("compare", str(good_a), str(bad), "--out", str(tmp_path / "cmp"))
    assert worse.exit_code == 1, worse.output
    data = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    (acc,) = [d for d in data["deltas"] if d["metric"] == "accuracy"]
    assert acc["regression"] and acc["paired"] == 120 and acc["p_value"] < 0.001
    per_class = [d for d in data["deltas"] if d["metric"].startswith("accuracy_") and d["metric"] != "accuracy_"]
    per_class = [d for d in per_class if d["metric"] != "examples_per_s"]
    assert len(per_class) == 2 and all(d["p_value"] is not None and 0 < d["paired"] < 120 for d in per_class)
    assert sum(d["paired"] for d in per_class) == 120  # each class's own examples, paired by id
    # B's predictions against A's, counted here from each run's outcomes.jsonl
    preds = [{o["ids"][k]: o["values"][k] for k in range(len(o["ids"]))}
             for run in (good_a, bad) for o in map(json.loads, (run / "outcomes.jsonl").read_text().splitlines())
             if o["name"] == "prediction"]
    changed = sorted((i, preds[0][i], preds[1][i]) for i in preds[0] if preds[0][i] != preds[1][i])
    (agreement,) = data["agreement"]
    assert 0 < len(changed) < 120 and set(preds[0].values()) <= {"negative", "positive"}
    assert (agreement["paired"], agreement["agreed"]) == (120, 120 - len(changed))
    assert sorted(map(tuple, agreement["changed"])) == changed
    assert "Predictions changed from A to B" in worse.output and f"{120 - len(changed)} of 120" in worse.output
    first, a, b = agreement["changed"][0]
    assert f"{first}: {a!r} -> {b!r}" in (tmp_path / "cmp" / "compare.md").read_text()
    # a run written before label outcomes kept class codes: never equal to names, so not compared, and said so
    records = [json.loads(line) for line in (good_a / "outcomes.jsonl").read_text().splitlines()]
    for r in records:
        if r["name"] == "prediction":
            r["kind"], r["values"] = "categorical", [float(v == "positive") for v in r["values"]]
    (good_a / "outcomes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    across = invoke("compare", str(good_a), str(bad), "--out", str(tmp_path / "old"))
    assert across.exit_code == 1 and "predictions not compared" in across.output, across.output
    assert json.loads((tmp_path / "old" / "compare.json").read_text())["agreement"] == []
    assert (tmp_path / "cmp" / "compare.md").is_file() and (tmp_path / "cmp" / "compare.html").is_file()
    missing = invoke("compare", str(good_a), str(tmp_path / "nope"))
    assert missing.exit_code == 2 and "does not exist" in missing.output


def test_compare_refuses_runs_that_do_not_pair(tmp_path, trained_dir, senti_tsv, sst_tsv):
    a = _single_run(tmp_path, "a", trained_dir, senti_tsv)
    out = tmp_path / "other"
    out.mkdir()
    suite = matrix_suite(out, f"  - {{name: m, path: '{trained_dir}', device: cpu}}\n", sst_tsv,
                         probes="  - probe: accuracy\n    id: different\n")
    assert invoke("run", "--allow-skips", str(suite)).exit_code == 0
    b, _ = only_run(out / "reports", "mx")
    result = invoke("compare", str(a), str(b), "--allow-different-data")
    assert result.exit_code == 2 and "nothing to compare" in result.output
    # same probe id, different data: refused, or with --allow-different-data shown and never gated
    c = _single_run(tmp_path, "c", trained_dir, sst_tsv)
    for extra in ((), ("--significance", "0.05")):
        refused = invoke("compare", str(a), str(c), *extra)
        assert refused.exit_code == 2 and "used different data" in refused.output
        assert "--allow-different-data" in refused.output
    shown = invoke("compare", str(a), str(c), "--allow-different-data", "--tolerance", "0", "--out", str(tmp_path / "d"))
    assert shown.exit_code == 0 and "no regression" in shown.output, shown.output
    deltas = json.loads((tmp_path / "d" / "compare.json").read_text())["deltas"]
    assert deltas and not any(d["regression"] or d["gated"] or d["paired"] for d in deltas)
    assert any(d["delta"] for d in deltas)  # the data differ, so the numbers do: shown, not judged


def test_rebuilt_report_equals_the_original(tmp_path, trained_dir, random_dir, senti_tsv):
    suite = matrix_suite(tmp_path, gate_models(trained_dir, random_dir), senti_tsv, extra="compare: {baseline: base}\n")
    assert invoke("run", "--allow-skips", str(suite)).exit_code == 1
    run_dir, original = only_run(tmp_path / "reports", "mx")
    (run_dir / "report.json").unlink()
    result = invoke("report", str(run_dir), "--format", "json", "--format", "junit")
    assert result.exit_code == 0, result.output
    assert json.loads((run_dir / "report.json").read_text()) == original


def test_report_rebuilds_a_killed_run(tmp_path, trained_dir, senti_tsv):
    run_dir = _single_run(tmp_path, "a", trained_dir, senti_tsv)
    events = (run_dir / "events.jsonl").read_text().splitlines()
    (run_dir / "events.jsonl").write_text("\n".join(e for e in events if '"run_finish"' not in e) + "\n{torn")
    result = invoke("report", str(run_dir))
    assert result.exit_code == 0, result.output
    report = json.loads((run_dir / "report.json").read_text())
    assert report["status"] == "interrupted" and [p["id"] for p in report["probes"]] == ["accuracy"]
    assert (run_dir / "report.html").is_file() and (run_dir / "report.junit.xml").is_file()


def test_schema_1_reports_are_still_read():
    from bertprobe.results import RunReport

    old = {"suite": "s", "model": "m/path", "device": "cpu", "dtype": "float32", "schema_version": 1,
           "status": "completed", "probes": [{"probe": "accuracy", "id": "accuracy", "model": "m/path",
                                              "metrics": {"accuracy": 0.9}, "metric_info": {"accuracy": {"higher_is_better": True}}}]}
    report = RunReport.from_dict(old)
    assert report.model_names == ["m/path"] and report.result("m/path", "accuracy").value("accuracy") == 0.9
    assert report.probes[0].metrics["accuracy"].gated and report.schema_version == 2


def test_trigger_of_the_baseline_is_measured_on_the_variant(tmp_path, trained_dir, senti_tsv):
    models = (f"  - {{name: fp32, path: '{trained_dir}', device: cpu}}\n"
              f"  - {{name: int8, path: '{trained_dir}', device: cpu, quantize: int8-dynamic}}\n")
    probes = "  - probe: universal-trigger\n    params: {target_label: positive, candidates: 4, iterations: 2, batch_size: 8}\n"
    result = invoke("run", "--allow-skips", str(matrix_suite(tmp_path, models, senti_tsv, probes)))
    assert result.exit_code in (0, 1), result.output  # judged by the default bound: a short search's numerics
    _, report = only_run(tmp_path / "reports", "mx")
    fp32, int8 = report["probes"]
    assert {fp32["status"], int8["status"]} <= {"passed", "failed"}
    assert all(e["source"] == "default" and e["metric"] == "success_rate" for e in fp32["expectations"])
    assert "baseline_trigger_accuracy_after" not in fp32["metrics"]
    assert int8["details"]["baseline_trigger"]["trigger_text"] == fp32["details"]["trigger_text"]
    # the same trigger on nearly the same model: held-out accuracy close to the fp32 model's own
    assert int8["metrics"]["baseline_trigger_accuracy_after"] == pytest.approx(fp32["metrics"]["accuracy_after"], abs=0.1)
    # the terminal's note answers the compression question: what the baseline's attack does to this build
    assert f"fp32's trigger {fp32['details']['trigger_text']!r} leaves" in int8["details"]["key_finding"]
    assert re.search(r"int8 +universal-trigger +(PASSED|FAILED) .*fp32's trigger", result.output)


def test_unevenly_pruned_model_skips_the_attention_audit_and_runs_head_pruning(trained_dir):
    from dataclasses import replace

    from bertprobe.data import Dataset, Example
    from bertprobe.model import ModelSpec, load_target
    from bertprobe.model.pruning import prune_heads
    from bertprobe.probe import ProbeContext
    from bertprobe.probes.attention_audit import AttentionAuditProbe
    from bertprobe.probes.head_pruning.params import HeadParams
    from bertprobe.probes.head_pruning.probe import HeadPruningProbe

    target = load_target(ModelSpec(path=str(trained_dir), device="cpu"))
    model, _ = prune_heads(target.model, [(0, 0), (0, 1), (0, 2)])
    pruned = replace(target, model=model, _sites=None)
    assert AttentionAuditProbe.missing_requirements(pruned.capabilities) == ["uniform-heads"]
    data = Dataset([Example(t, label=y, id=str(i)) for i, (t, y) in enumerate(sentiment_examples(24))])
    result = HeadPruningProbe().run(pruned, data, HeadParams(bootstrap=0, step=0.5), ProbeContext())
    assert len(result.details["ablation"]) == 1 + 4  # one head left in layer 0, four in layer 1
    assert result.details["pruning_curve"][-1]["heads_pruned"] == 5
