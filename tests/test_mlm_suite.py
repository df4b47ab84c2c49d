"""``suites/mlm.yaml`` on any masked LM with ``--model`` alone: tiny random BERT, RoBERTa (``<mask>``, byte-level
BPE), ELECTRA-generator and DeBERTa-v2 MLMs, and the fixture where ``../shared`` holds it."""

from __future__ import annotations

import os

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
    flags = ["--model", str(model), "--device", "cpu", "--set=report.formats=[json,markdown]"]
    checked = CliRunner().invoke(main, ["validate", SUITE, *flags])
    assert checked.exit_code == 0, checked.output
    ran = CliRunner().invoke(main, ["run", SUITE, *flags, "--threads", "1", "--out", str(tmp_path / "out")])
    assert ran.exit_code in (0, 1), ran.output  # a decision on what ran: never bad input, never nothing checked
    run_dir, report = only_run(tmp_path / "out", "mlm")
    by_id = {p["id"]: p for p in report["probes"]}
    assert {i: p["status"] for i, p in by_id.items() if p["status"] in ("error", "skipped")} == {}
    # every figure carries its meaning, and the meaning says whose figure it is (Ettinger's or bertprobe's)
    assert {(p["id"], m) for p in report["probes"] for m, info in p["metric_info"].items() if not info["description"]} == set()
    info = by_id["ettinger"]["metric_info"]
    assert info["ettinger_neg_simp_top1"]["description"].startswith("Ettinger 2020 prediction accuracy, k=1")
    assert info["top1_accuracy"]["description"].startswith("bertprobe's, not Ettinger's")
    markdown = (run_dir / "report.md").read_text()
    assert "| meaning" in markdown and "| bertprobe's, not Ettinger's: share of items" in markdown
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


def test_the_mlm_suite_refuses_an_embedding_model_saying_it_has_no_masked_lm_head(tmp_path, monkeypatch):
    """minilm-l6-base's case: a sentence-transformers bi-encoder is refused in one line that says why."""
    from bertprobe.testing import save_tiny_embedder

    tiny_mlm_data(tmp_path, monkeypatch)
    result = CliRunner().invoke(main, ["validate", SUITE, "--model", str(save_tiny_embedder(tmp_path / "emb"))])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "sentence-embedding models lack mlm: no masked-LM head" in result.output


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
    # issue #62 item 4: the counting items on the English MLM, every failure a finding with its sentence and the
    # MLM's top predictions beside the candidates' ranking
    arithmetic = by_id["arithmetic"]
    counting = [f for f in arithmetic["findings"] if f["title"].startswith("counting:")]
    wrong = [i for i in arithmetic["details"]["items"] if i["category"] == "counting" and i["rank"] != 1]
    assert sorted(f["title"] for f in counting) == sorted(f"counting: {i['id']}" for i in wrong)
    for finding in counting:
        assert finding["input"].startswith("If I have ") and "[MASK]" in finding["input"]
        assert "candidates:" in finding["observed"] and "top predictions:" in finding["observed"]


def test_bad_files_of_every_mlm_probe_are_listed_at_once_before_any_weights_load(tmp_path, monkeypatch):
    """Issue #62 item 8: an Ettinger file without a column (and a row without a value), a BLiMP line without
    sentence_good, a CrowS-Pairs row whose two sentences are equal: validate and run name each with its file and
    line, all at once, exit 2; run creates no run folder (the weights never load: they are not even readable)."""
    import json

    tiny_mlm_data(tmp_path, monkeypatch)
    ettinger = tmp_path / "ettinger"
    (ettinger / "NEG-136-SIMP.tsv").write_text("item\tcontext_aff\tcontext_neg\ttarget_aff\n"
                                               "0\tA robin is\tA robin is not\tbird\n")
    (ettinger / "ROLE-88.tsv").write_text("item\tcontext\texpected\ttarget\n0-a\tthe dog saw the\t\tcat\n"
                                          "0-b\tthe cat saw the\tdog\n")
    (tmp_path / "blimp" / "sva.jsonl").write_text(json.dumps({"sentence_bad": "the dog are good .", "UID": "sva",
                                                              "field": "morphology", "linguistics_term": "x"}) + "\n")
    crows = tmp_path / "crows.csv"
    crows.write_text(crows.read_text().replace(",he was a bad actor", ",she was a bad actor"))
    model = save_tiny_model(tmp_path / "mlm", task="masked-lm", labels=(), words=WORDS_MLM)
    for weights in model.glob("*.safetensors"):
        weights.write_bytes(b"not weights")  # any load would fail with another message
    flags = ["--model", str(model), "--device", "cpu"]
    checked = CliRunner().invoke(main, ["validate", SUITE, *flags])
    ran = CliRunner().invoke(main, ["run", SUITE, *flags, "--out", str(tmp_path / "out")])
    for result in (checked, ran):
        assert result.exit_code == 2, result.output
        assert "5 problems" in result.output and "Traceback" not in result.output
        lines = [line for line in result.output.splitlines() if line.strip()[:2] in ("1.", "2.", "3.", "4.", "5.")]
        assert len(lines) == 5, result.output
        assert "NEG-136-SIMP.tsv:1: missing column 'target_neg'" in lines[0]
        assert "ROLE-88.tsv:2: empty 'expected'" in lines[1] and "ROLE-88.tsv:3: 3 fields where the header has 4" in lines[2]
        assert "probes[2].params: line 1 of sva.jsonl has no sentence_good (a non-empty string); give the line both " \
               "sentences, or remove it" in lines[3]
        assert "probes[3].params: crows.csv, row 0 (pandas index; data row 1): sent_more and sent_less are the " \
               "same sentence" in lines[4]
    assert not (tmp_path / "out").exists()


def test_tokenizer_problems_are_found_before_any_weights_load(tmp_path, monkeypatch):
    """Issue #62 item 8, the tokenizer's half: a model whose tokenizer has no mask token, and an item file's words
    that the vocabulary maps to [UNK], are refused by validate and by run with only the tokenizer read (the
    weights are not even readable), one line per problem, exit 2; ``skip_unknown: true`` lets the items through."""
    import json

    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    model = save_tiny_model(tmp_path / "mlm", task="masked-lm", labels=(), words=WORDS_MLM)
    for weights in model.glob("*.safetensors"):
        weights.write_bytes(b"not weights")
    items = tmp_path / "mine.jsonl"
    items.write_text("\n".join(json.dumps(r) for r in [
        {"id": "ok", "text": "A robin is a {mask}.", "answers": ["bird"]},
        {"id": "typo", "text": "It is a {mask}.", "answers": ["brid"], "distractors": ["dog"]}]) + "\n")

    def suite(skip: bool) -> str:
        path = tmp_path / f"s{int(skip)}.yaml"
        path.write_text(f"suite: mine\nmodel: {{path: '{model}', device: cpu}}\nreport: {{dir: '{tmp_path / 'out'}'}}\n"
                        f"probes:\n  - probe: cloze\n    params: {{sets: ['{items}'], skip_unknown: {str(skip).lower()}}}\n")
        return str(path)

    for command in ("validate", "run"):
        result = CliRunner().invoke(main, [command, suite(False)])
        assert result.exit_code == 2, result.output
        assert "mlm for cloze: " in result.output and "item 'typo': 'brid' is the unknown token '[UNK]'" in result.output
        assert "'ok'" not in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()
    assert CliRunner().invoke(main, ["validate", suite(True)]).exit_code == 0

    items.write_bytes('{"id": "caf\u00e9", "text": "A {mask}.", "answers": ["bird"]}\n'.encode("latin-1"))
    result = CliRunner().invoke(main, ["validate", suite(False)])  # not UTF-8: one line, never a traceback
    assert result.exit_code == 2 and "not UTF-8" in result.output and "Traceback" not in result.output, result.output

    tok = AutoTokenizer.from_pretrained(model)  # the same vocabulary, no mask token
    PreTrainedTokenizerFast(tokenizer_object=tok.backend_tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                            cls_token="[CLS]", sep_token="[SEP]").save_pretrained(model)
    tiny_mlm_data(tmp_path, monkeypatch)
    result = CliRunner().invoke(main, ["validate", SUITE, "--model", str(model)])
    assert result.exit_code == 2, result.output
    assert "mlm for ettinger, arithmetic, blimp, crows-pairs: its tokenizer has no mask token" in result.output


def test_a_cached_hub_id_of_another_task_is_refused_before_it_loads(tmp_path, tiny_clf_dir, monkeypatch):
    """A hub id whose config the local cache holds has a known task: a classifier under the MLM suite is refused
    by validate in one line, as a local folder is (it used to load, then have every probe skipped: exit 5)."""
    import shutil

    import huggingface_hub.constants

    tiny_mlm_data(tmp_path, monkeypatch)
    repo = tmp_path / "hub" / "models--org--clf"
    snapshot = repo / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    for file in tiny_clf_dir.iterdir():
        shutil.copy(file, snapshot / file.name)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    result = CliRunner().invoke(main, ["validate", SUITE, "--model", "org/clf"])
    assert result.exit_code == 2, result.output
    assert "clf is a model of task classification, which none of this suite's probes can read" in result.output
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty"))
    uncached = CliRunner().invoke(main, ["validate", SUITE, "--model", "org/clf"])
    assert uncached.exit_code == 0 and "Traceback" not in uncached.output, uncached.output  # known once it loads
    assert "task classification" not in uncached.output  # not cached: its task is known only once it loads


def test_one_bad_file_read_by_two_probes_is_one_line_and_a_long_list_is_cut(tmp_path, monkeypatch):
    """suites/blimp.yaml's two entries read one folder: each bad line is listed once, naming both; an Ettinger
    file with a bad row on every line lists the first 20 and counts the rest."""
    import json

    tiny_mlm_data(tmp_path, monkeypatch)
    (tmp_path / "blimp" / "sva.jsonl").write_text(json.dumps({"sentence_bad": "the dog are good ."}) + "\n")
    model = save_tiny_model(tmp_path / "mlm", task="masked-lm", labels=(), words=WORDS_MLM)
    result = CliRunner().invoke(main, ["validate", "suites/blimp.yaml", "--model", str(model)])
    assert result.exit_code == 2, result.output
    assert result.output.count("line 1 of sva.jsonl has no sentence_good") == 1, result.output
    assert "probes[0].params and probes[1].params: line 1 of sva.jsonl" in result.output
    role = tmp_path / "ettinger" / "ROLE-88.tsv"
    role.write_text("item\tcontext\texpected\ttarget\n" + "".join(f"{i}-a\tthe dog saw\n" for i in range(30)))
    result = CliRunner().invoke(main, ["validate", SUITE, "--model", str(model)])
    assert result.exit_code == 2 and "and 10 more rows with problems" in result.output, result.output
    assert result.output.count("ROLE-88.tsv:") == 20


@pytest.mark.parametrize("arch", ["bert", "roberta", "electra", "deberta-v2", "distilbert", "albert"])
def test_the_position_limit_read_from_config_json_is_the_loaded_models(arch, tmp_path):
    """validate reads the limit from config.json (no weights); run reads the loaded model's position table: they
    must be the same number, or validate and run would disagree on a long sentence."""
    import json

    from bertprobe.model.masked_scoring import config_positions, max_positions

    model = save_tiny_model(tmp_path / arch, task="masked-lm", arch=arch, labels=(), words=WORDS_MLM)
    config = json.loads((model / "config.json").read_text())
    assert config_positions(config) == max_positions(load_target(ModelSpec(path=str(model), device="cpu")).model)


def test_a_sentence_longer_than_the_models_positions_is_refused_by_validate_as_by_run(tmp_path, monkeypatch):
    """A CrowS-Pairs row and a BLiMP sentence too long for a tiny RoBERTa's positions: validate names both before
    any weights load, and run gives the same lines (it used to say ok, then stop inside crows-pairs)."""
    import json

    tiny_mlm_data(tmp_path, monkeypatch)
    model = save_tiny_model(tmp_path / "roberta", task="masked-lm", arch="roberta", labels=(), words=WORDS_MLM)
    limit = json.loads((model / "config.json").read_text())["max_position_embeddings"]
    long = " ".join(["the dog is good"] * limit) + " ."
    crows = tmp_path / "crows.csv"
    crows.write_text(crows.read_text() + f"2,{long},{long.replace('dog', 'cat')},stereo,age,[],c,[]\n")
    blimp = tmp_path / "blimp" / "sva.jsonl"
    blimp.write_text(blimp.read_text() + json.dumps({"sentence_good": long, "sentence_bad": long.replace("is", "are"),
                                                     "UID": "sva", "pairID": "9"}) + "\n")
    outputs = []
    for command in ("validate", "run"):
        result = CliRunner().invoke(main, [command, SUITE, "--model", str(model), "--out", str(tmp_path / "out")]
                                    if command == "run" else [command, SUITE, "--model", str(model)])
        assert result.exit_code == 2, result.output
        assert "row 2 (pandas index): a sentence of" in result.output and "longer than the model's" in result.output
        assert "sva.jsonl" in result.output and "Traceback" not in result.output
        outputs.append(result.output)
    assert outputs[0] == outputs[1] and not (tmp_path / "out").exists()


def test_a_precision_the_model_cannot_compute_is_refused_before_anything_loads(tmp_path, monkeypatch):
    """precision: bfloat16 by name on a model loaded in float16 (the re-check needs float32) or on an ONNX Runtime
    build: one line per model naming both probes, from validate and from run, exit 2, no run folder."""
    model = save_tiny_model(tmp_path / "mlm", task="masked-lm", labels=(), words=WORDS_MLM)
    for weights in model.glob("*.safetensors"):
        weights.write_bytes(b"not weights")  # nothing may load
    tiny_mlm_data(tmp_path, monkeypatch)
    blimp, crows = (os.environ["BERTPROBE_BLIMP"], os.environ["BERTPROBE_CROWS"])
    path = tmp_path / "p.yaml"
    path.write_text(
        "suite: p\nmodels:\n"
        f"  - {{name: half, path: '{model}', device: cpu, dtype: float16}}\n"
        f"  - {{name: built, path: '{model}', device: cpu, runtime: onnx}}\n"
        f"  - {{name: plain, path: '{model}', device: cpu}}\n"
        f"report: {{dir: '{tmp_path / 'out'}'}}\nprobes:\n"
        f"  - probe: blimp\n    params: {{data: '{blimp}', precision: bfloat16}}\n"
        f"  - probe: crows-pairs\n    params: {{data: '{crows}', precision: bfloat16}}\n")
    for command in ("validate", "run"):
        result = CliRunner().invoke(main, [command, str(path)])
        assert result.exit_code == 2, result.output
        lines = [line for line in result.output.splitlines() if "precision 'bfloat16'" in line]
        assert len(lines) == 2 and "Traceback" not in result.output, result.output
        assert any("half for blimp, crows-pairs: " in line and "not dtype: float16" in line for line in lines)
        assert any("built for blimp, crows-pairs: " in line and "an ONNX Runtime build" in line for line in lines)
        assert "plain for" not in result.output
    assert not (tmp_path / "out").exists()
