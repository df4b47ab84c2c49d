"""``suites/mlm.yaml`` on any masked LM with ``--model`` alone: tiny random BERT, RoBERTa (``<mask>``, byte-level
BPE), ELECTRA-generator and DeBERTa-v2 MLMs, and the fixture where ``../shared`` holds it."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import SHARED, only_run
from test_minimal_pairs import plain_pll
from test_suites import tiny_mlm_data

from bertprobe.cli import main
from bertprobe.model import ModelSpec, load_target
from bertprobe.testing import WORDS, save_tiny_model

SUITE = "suites/mlm.yaml"
WORDS_MLM = (*WORDS, "robin", "bird", "she", "he", "actor", "age")


@pytest.mark.parametrize("arch", ["bert", "roberta", "electra", "deberta-v2"])
def test_the_mlm_suite_runs_on_a_tiny_masked_lm_of_each_family(arch, tmp_path, monkeypatch):
    model = save_tiny_model(tmp_path / arch, task="masked-lm", arch=arch, labels=(), words=WORDS_MLM,
                            initializer_range=0.5)
    tiny_mlm_data(tmp_path, monkeypatch)
    flags = ["--model", str(model), "--device", "cpu", "--set=report.formats=[json]"]
    checked = CliRunner().invoke(main, ["validate", SUITE, *flags])
    assert checked.exit_code == 0, checked.output
    ran = CliRunner().invoke(main, ["run", SUITE, *flags, "--threads", "1", "--out", str(tmp_path / "out")])
    assert ran.exit_code in (0, 1), ran.output  # a decision on what ran: never bad input, never nothing checked
    _, report = only_run(tmp_path / "out", "mlm")
    by_id = {p["id"]: p for p in report["probes"]}
    assert {i: p["status"] for i, p in by_id.items() if p["status"] in ("error", "skipped")} == {}
    target = load_target(ModelSpec(path=str(model), device="cpu"))
    right = plain_pll(target, "the dog is good .") > plain_pll(target, "the dog are good .")  # each of the 3 pairs
    assert by_id["blimp"]["metrics"]["pair_accuracy"] == float(right)
    assert by_id["crows-pairs"]["metrics"]["pairs"] == 2
    assert "ettinger_neg_simp_aff" in by_id["ettinger"]["metrics"]


def test_the_mlm_suite_refuses_a_classifier_before_it_loads(tmp_path, tiny_clf_dir, monkeypatch):
    tiny_mlm_data(tmp_path, monkeypatch)
    result = CliRunner().invoke(main, ["validate", SUITE, "--model", str(tiny_clf_dir)])
    assert result.exit_code == 2
    assert "is a model of task classification, which none of this suite's probes can read" in result.output
    assert "mlm (a masked-LM head)" in result.output and "Traceback" not in result.output


@pytest.mark.reproduction
@pytest.mark.skipif(not (SHARED / "models" / "minilm-l6-mlm").is_dir(), reason="the masked-LM fixture is not in ../shared yet")
def test_the_mlm_suite_on_the_fixture_names_what_its_papers_measure(tmp_path):
    ran = CliRunner().invoke(main, ["run", SUITE, "--model", str(SHARED / "models" / "minilm-l6-mlm"),
                                    "--set=report.formats=[json]", "--out", str(tmp_path / "out")])
    assert ran.exit_code in (0, 1, 4), ran.output
    _, report = only_run(tmp_path / "out", "mlm")
    by_id = {p["id"]: p for p in report["probes"]}
    assert by_id["blimp"]["metrics"]["accuracy"] > 0.6  # a trained MLM knows more grammar than chance
    crows = by_id["crows-pairs"]["metrics"]
    assert crows["pairs"] == 1508 and 0 < crows["metric_score"] < 1 and crows["neutral"] < 100
