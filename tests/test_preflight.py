"""``validate`` makes every check ``run`` makes before weights load, and both say the same thing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from bertprobe.cli import main


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def error_line(result) -> str:
    """The error, with the numbered problems that follow its headline (when it lists several) on the same line."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    return " ".join(line.strip() for line in lines[errors[0]:])


def suite_file(tmp: Path, model: Path, data: Path, probes: str = "  - probe: accuracy\n") -> Path:
    path = tmp / "s.yaml"
    path.write_text(f"suite: pre\nmodel: {{path: '{model}', device: cpu}}\ndata: {{path: '{data}'}}\n"
                    f"report: {{dir: '{tmp / 'reports'}'}}\nprobes:\n{probes}", encoding="utf-8")
    return path


def same_refusal(suite: Path, *extra: str) -> str:
    """validate and run refuse alike, and run leaves no run folder (nothing loaded, nothing written)."""
    checked = error_line(invoke("validate", str(suite), *extra))
    ran = error_line(invoke("run", str(suite), *extra))
    assert checked == ran
    assert not list((suite.parent / "reports").glob("pre-*")), "run wrote a run folder before refusing"
    return ran


@pytest.fixture
def csv_pos_neg(tmp_path: Path) -> Path:
    path = tmp_path / "reviews.csv"
    path.write_text("text,label\nthe movie was good,pos\nboring and dull,neg\n", encoding="utf-8")
    return path


def test_labels_the_model_does_not_know_are_refused_by_both_with_the_map_to_use(tmp_path, tiny_clf_dir, csv_pos_neg):
    line = same_refusal(suite_file(tmp_path, tiny_clf_dir, csv_pos_neg))
    assert "label 'pos' on line 2 of" in line and "not one the model knows (negative, positive)" in line
    assert "--label-map neg=negative,pos=positive" in line


def test_a_typo_in_the_label_map_is_corrected_on_its_right_hand_side(tmp_path, tiny_clf_dir, csv_pos_neg):
    line = same_refusal(suite_file(tmp_path, tiny_clf_dir, csv_pos_neg), "--label-map", "neg=negativ,pos=positive")
    assert "label 'negativ' on line 3" in line
    assert "--label-map neg=negative,pos=positive" in line and "negativ=" not in line
    assert invoke("validate", str(tmp_path / "s.yaml"), "--label-map", "neg=negative,pos=positive").exit_code == 0


def test_a_list_of_labels_for_a_single_label_model_is_refused_by_both(tmp_path, tiny_clf_dir):
    data = tmp_path / "tagged.jsonl"
    data.write_text(json.dumps({"text": "good", "label": ["positive"]}) + "\n", encoding="utf-8")
    line = same_refusal(suite_file(tmp_path, tiny_clf_dir, data))
    assert "label ['positive'] on line 1 of" in line and "single-label classifier" in line


def with_architecture(source: Path, folder: Path, architecture: str) -> Path:
    """A copy of the model at ``source`` whose config names another architecture."""
    shutil.copytree(source, folder)
    config = json.loads((folder / "config.json").read_text())
    config["architectures"] = [architecture]
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_a_task_the_architecture_does_not_tell_is_refused_by_both(tmp_path, tiny_clf_dir, sst_tsv):
    model = with_architecture(tiny_clf_dir, tmp_path / "other", "BertForNextSentencePrediction")
    line = same_refusal(suite_file(tmp_path, model, sst_tsv))
    assert "cannot tell the task from the config" in line and "BertForNextSentencePrediction" in line


def test_sentence_labels_for_a_token_classifier_are_refused_by_both(tmp_path, tiny_clf_dir, sst_tsv):
    model = with_architecture(tiny_clf_dir, tmp_path / "tagger", "BertForTokenClassification")
    line = same_refusal(suite_file(tmp_path, model, sst_tsv))
    assert "is a token-classification model, which needs one tag per word" in line and "lines 2, 3, 4 and 3 more of" in line


def test_a_class_param_the_model_lacks_is_refused_by_both_with_the_set_to_fix_it(tmp_path, tiny_clf_dir, sst_tsv):
    probes = "  - probe: accuracy\n  - probe: universal-trigger\n    params: {target_label: postive}\n"
    line = same_refusal(suite_file(tmp_path, tiny_clf_dir, sst_tsv, probes))
    assert "'postive' is not a class of" in line and "did you mean 'positive'" in line
    assert "--set probes.universal-trigger.params.target_label=CLASS" in line


def test_only_checks_the_probes_it_runs_in_validate_and_in_run(tmp_path, tiny_clf_dir, sst_tsv):
    probes = "  - probe: accuracy\n  - probe: universal-trigger\n    params: {target_label: postive}\n"
    suite = suite_file(tmp_path, tiny_clf_dir, sst_tsv, probes)
    checked = invoke("validate", str(suite), "--only", "accuracy")
    assert checked.exit_code == 0 and "ok (1 probe: accuracy)" in checked.output, checked.output
    ran = invoke("run", str(suite), "--only", "accuracy")
    assert ran.exit_code == 0, ran.output  # the left-out trigger's bad class is not this run's problem
    assert "postive" in error_line(invoke("validate", str(suite), "--only", "accuracy,universal-trigger"))


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")
def test_a_device_this_machine_lacks_is_refused_by_both_before_a_run_folder(tmp_path, tiny_clf_dir, sst_tsv):
    """--device cuda without CUDA (or a probe's own model on one) is refused by validate as by run, before anything
    loads; a joined Ray cluster's workers may have the device, so there the check is theirs."""
    from dataclasses import replace

    from bertprobe.harness import check_devices
    from bertprobe.suite import load_suite
    from bertprobe.suite.schema import ExecutorSpec

    suite = suite_file(tmp_path, tiny_clf_dir, sst_tsv)
    assert "device 'cuda' requested but CUDA is not available" in same_refusal(suite, "--device", "cuda")
    own = suite_file(tmp_path, tiny_clf_dir, sst_tsv,
                     f"  - probe: accuracy\n  - probe: accuracy\n    id: on-gpu\n    model: {{path: '{tiny_clf_dir}', device: cuda:1}}\n")
    assert "device 'cuda:1' requested" in same_refusal(own)
    joined = replace(load_suite(own), executor=ExecutorSpec(name="ray", address="10.0.0.5:6379"))
    check_devices(joined)  # no error: the cluster's workers check their own devices


def test_a_reader_is_refused_by_every_probe_not_written_for_it_before_it_loads(tmp_path):
    """A question-answering model under a classifier's probes: refused by validate and run alike, naming the
    probes that support it, not loaded and then skipped probe by probe (exit 5)."""
    from bertprobe.testing import save_tiny_model

    model = save_tiny_model(tmp_path / "reader", task="question-answering")
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"id": "q1", "question": "Who sang?", "context": "Anna sang.",
                                "answers": {"text": ["Anna"], "answer_start": [0]}}) + "\n", encoding="utf-8")
    line = same_refusal(suite_file(tmp_path, model, data, "  - probe: cloze\n  - probe: backdoor-scan\n"))
    # every probe refuses it: one line for the suite, not one per probe
    assert "is a question-answering model, and none of this suite's 2 probes (cloze, backdoor-scan) supports it" in line
    assert "(they support: classification, masked-lm" in line and "probes that support them: accuracy" in line
    assert line.count("does not support") == 0
    mixed = suite_file(tmp_path, model, data, "  - probe: cloze\n  - probe: accuracy\n")
    result = invoke("validate", str(mixed))  # one probe runs on it: the other is refused by name
    assert result.exit_code == 2 and "probe cloze (cloze) does not support question-answering models" in result.output
    assert "none of this suite's" not in result.output


def test_a_suite_none_of_whose_probes_can_read_the_model_is_refused_before_it_loads(tmp_path, tiny_clf_dir, sst_tsv):
    """An MLM suite pointed at a classifier: every probe would be skipped for the masked-LM head it lacks, so
    validate and run refuse it in one line naming what is missing (exit 2), not a run that checks nothing (5)."""
    suite = suite_file(tmp_path, tiny_clf_dir, sst_tsv, "  - probe: cloze\n    id: one\n  - probe: cloze\n    id: two\n")
    line = same_refusal(suite)
    assert ("is a model of task classification, which none of this suite's probes can read: one, two need mlm "
            "(a masked-LM head)") in line
    mixed = suite_file(tmp_path, tiny_clf_dir, sst_tsv, "  - probe: cloze\n  - probe: accuracy\n")
    assert invoke("validate", str(mixed)).exit_code == 0  # one probe runs: the other skips, as before


def test_a_bad_value_an_environment_variable_set_names_the_variable(tmp_path, tiny_clf_dir, sst_tsv, monkeypatch):
    """The value to fix is outside the file: the line says which variable put it there, and only when it did."""
    suite = suite_file(tmp_path, tiny_clf_dir, sst_tsv, "  - probe: accuracy\n    params: {batch_size: \"${BP_BATCH:-8}\"}\n")
    monkeypatch.setenv("BP_BATCH", "many")
    line = same_refusal(suite)
    assert "probes[0].params.batch_size (from BP_BATCH=many): " in line
    monkeypatch.delenv("BP_BATCH")
    assert invoke("validate", str(suite)).exit_code == 0  # the default stands
    pathed = tmp_path / "p.yaml"
    pathed.write_text(suite.read_text().replace(f"'{tiny_clf_dir}'", "'${BP_MODEL:-nowhere}'"), encoding="utf-8")
    monkeypatch.setenv("BP_MODEL", str(tmp_path / "gone"))
    assert f"model.path (from BP_MODEL={tmp_path / 'gone'}): " in error_line(invoke("validate", str(pathed)))
    overridden = error_line(invoke("validate", str(pathed), "--model", str(tmp_path / "elsewhere")))
    assert "from BP_MODEL" not in overridden and "elsewhere" in overridden  # --model put the value there, not it
