"""`validate` (and `run`, before anything loads) reports every problem it can find at once, numbered one per
line: suite keys, --set, params, the class names a suite uses against the model's config.json, bad data rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import write_suite

from bertprobe.cli import main
from bertprobe.data.dataset import DataSpec
from bertprobe.data.tables import load_table
from bertprobe.errors import ROW_LIMIT

NER_TAGS = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG")


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def problems_of(result) -> tuple[str, list[str]]:
    """The headline and the numbered problems of an exit-2 error, one per line."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.startswith("error: "))
    items = lines[start + 1:]
    assert all(line.startswith(f"  {i}. ") for i, line in enumerate(items, 1)), result.stderr
    return lines[start], [line.split(". ", 1)[1] for line in items]


@pytest.fixture(scope="module")
def ml_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bertprobe.testing import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("ml"), task="multi-label", labels=("PER", "LOC", "ORG"))


@pytest.fixture(scope="module")
def ner_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bertprobe.testing import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("ner"), task="token-classification", labels=NER_TAGS)


def suite_file(tmp_path: Path, model: Path, data: Path, probes: str = "  - probe: accuracy\n", data_keys: str = "",
               head: str = "") -> Path:
    return write_suite(tmp_path / "suite.yaml", (
        f"suite: tiny\n{head}model: {{path: '{model}', device: cpu}}\n"
        f"data: {{path: '{data}'{data_keys}}}\nreport: {{dir: '{tmp_path / 'reports'}'}}\nprobes:\n{probes}"))


def tsv(tmp_path: Path, rows: list[tuple[str, str]], name: str = "d.tsv") -> Path:
    path = tmp_path / name
    path.write_text("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows), encoding="utf-8")
    return path


CONLL = ("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\n\n"
         "Peter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n")


def test_three_key_typos_are_reported_in_one_run_each_with_its_path_and_a_did_you_mean(tmp_path, tiny_clf_dir):
    data = tsv(tmp_path, [("good", "positive"), ("bad", "negative")])
    suite = write_suite(tmp_path / "suite.yaml", (
        f"suite: tiny\nsed: 3\nmodel: {{path: '{tiny_clf_dir}', device: cpu}}\n"
        f"data: {{path: '{data}', text: sentence, label: label, limt: 5}}\n"
        "probes:\n  - probe: calibraton\n  - probe: accuracy\n"))
    head, problems = problems_of(invoke("validate", str(suite)))
    assert head == f"error: {suite}: 3 problems:"
    assert problems[0].startswith("sed: unknown key (did you mean 'seed'?)")
    assert problems[1].startswith("data.limt: unknown parameter (did you mean 'limit'?)")
    assert problems[2].startswith("probes[0].probe: unknown probe 'calibraton' (did you mean 'calibration'?)")


def test_a_bad_set_does_not_hide_bad_data_rows(tmp_path, tiny_clf_dir):
    data = tsv(tmp_path, [("good", "positive"), ("bad", "negativ"), ("fine", "positve")])
    suite = suite_file(tmp_path, tiny_clf_dir, data, data_keys=", text: sentence, label: label")
    _, problems = problems_of(invoke("validate", str(suite), "--set", "probes.accuracy.params.bootstap=10",
                                     "--set", "probes.acuracy.params.findings=2", "--set", "nothing",
                                     "--set", "probes.accuracy.params.findings=many"))
    assert problems[0].startswith("--set probes.acuracy.params.findings=2: no single entry 'acuracy' under probes "
                                  "(did you mean 'accuracy'?)")
    assert problems[1].startswith("--set nothing: expected PATH=VALUE")
    assert problems[2].startswith("probes[0].params.bootstap: unknown parameter (did you mean 'bootstrap'?)")
    assert problems[3] == "probes[0].params.findings: expected int, got 'many'"  # a probe's every bad param
    assert problems[4].startswith("label 'negativ' on line 3 of") and "--label-map negativ=negative" in problems[4]
    assert problems[5].startswith("label 'positve' on line 4 of")
    assert len(problems) == 6


def test_every_bad_row_is_reported_up_to_a_limit_then_counted(tmp_path, tiny_clf_dir):
    two = tsv(tmp_path, [("a", "positive"), ("b", "postive"), ("c", "negative"), ("d", "negatve")], "two.tsv")
    suite = suite_file(tmp_path, tiny_clf_dir, two, data_keys=", text: sentence, label: label")
    _, problems = problems_of(invoke("validate", str(suite)))
    assert [p.split(" of ")[0] for p in problems] == ["label 'postive' on line 3", "label 'negatve' on line 5"]
    many = tsv(tmp_path, [(f"text {i}", f"bad{i}") for i in range(ROW_LIMIT + 5)], "many.tsv")
    _, problems = problems_of(invoke("validate", str(suite), "--data", str(many)))
    assert len(problems) == ROW_LIMIT + 1
    assert [p.split(" of ")[0] for p in problems[:ROW_LIMIT]] == [f"label 'bad{i}' on line {i + 2}" for i in range(ROW_LIMIT)]
    assert problems[-1] == f"and 5 more rows with other problems (the first {ROW_LIMIT} are listed)"


def test_rows_with_the_same_problem_are_one_item_naming_their_lines(tmp_path, tiny_clf_dir):
    rows = [("a", "positive")] + [(f"t{i}", "postive") for i in range(30)] + [("z", "negatve")]
    same = tsv(tmp_path, rows, "same.tsv")
    suite = suite_file(tmp_path, tiny_clf_dir, same, data_keys=", text: sentence, label: label")
    _, problems = problems_of(invoke("validate", str(suite)))
    assert len(problems) == 2, problems  # 30 rows with one problem, one row with another
    assert problems[0].startswith("label 'postive' on lines 3, 4, 5 and 27 more of ")
    assert problems[1].startswith("label 'negatve' on line 33 of ")


def test_every_class_name_a_suite_uses_is_checked_against_the_models_config(tmp_path, ml_dir):
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "Anna in Paris", "labels": ["PER", "LOC"]}\n', encoding="utf-8")
    probes = ("  - probe: accuracy\n    expect: {recall_gratitude: {min: 0.5}, recall_ORG: {min: 0.5}}\n"
              "  - probe: slices\n    params: {metric: 'label:LCO'}\n"
              "  - probe: behaviour\n    params:\n      templates:\n"
              "        - {test: t, type: mft, template: 'hello {first_name}', contains: [PER, PRE]}\n"
              "        - {test: u, type: mft, template: 'in {city}', label: LOC, not_label: ORGS}\n")
    suite = suite_file(tmp_path, ml_dir, data, probes, data_keys=", label: labels")
    _, problems = problems_of(invoke("validate", str(suite)))
    assert len(problems) == 4, problems
    assert problems[0].startswith("probes[0].expect.recall_gratitude: 'gratitude' is not a class of")
    assert problems[1].startswith("probes[1].params.metric: 'LCO' is not a class of") and "did you mean 'LOC'?" in problems[1]
    assert problems[2].startswith("probes[2].params.templates[0].contains: 'PRE'") and "did you mean 'PER'?" in problems[2]
    assert problems[3].startswith("probes[2].params.templates[1].not_label: 'ORGS'")
    assert all("classes: PER, LOC, ORG" in p for p in problems)


def test_run_refuses_with_the_same_list_and_leaves_no_run_folder(tmp_path, tiny_clf_dir):
    data = tsv(tmp_path, [("good", "positive"), ("bad", "negativ"), ("ok", "neutral")])
    suite = suite_file(tmp_path, tiny_clf_dir, data, "  - probe: accuracy\n    expect: {accuracy_postive: {min: 0.5}}\n",
                       data_keys=", text: sentence, label: label, limt: 3")
    checked = problems_of(invoke("validate", str(suite)))
    assert len(checked[1]) == 4  # the key, the expectation's class, two rows
    assert problems_of(invoke("run", str(suite))) == checked
    assert not (tmp_path / "reports").exists()


def test_a_label_holding_another_separator_hints_at_label_sep(tmp_path, ml_dir):
    data = tsv(tmp_path, [("Anna in Paris", "PER,LOC"), ("IBM in Oslo", "LOC|ORG")])
    suite = suite_file(tmp_path, ml_dir, data, data_keys=", text: sentence, label: label")
    result = invoke("validate", str(suite))
    assert result.exit_code == 2
    assert "label 'LOC|ORG' on line 3 of" in result.stderr and "separated by '|'" in result.stderr
    assert "--set data.label_sep='|'" in result.stderr


def test_an_unknown_label_with_a_near_one_suggests_it_and_maps_to_it(tmp_path, ml_dir):
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "a", "labels": ["PER"]}\n{"text": "b", "labels": ["PRE"]}\n{"text": "c", "labels": ["XYZQ"]}\n')
    suite = suite_file(tmp_path, ml_dir, data, data_keys=", label: labels")
    _, problems = problems_of(invoke("validate", str(suite)))
    assert "label 'PRE' on line 2 of" in problems[0] and "did you mean PER?" in problems[0]
    assert "--label-map PRE=PER" in problems[0] and "PRE=NAME" not in problems[0]
    assert "label 'XYZQ' on line 3 of" in problems[1] and "--label-map XYZQ=NAME" in problems[1]


def test_a_conll_file_named_txt_is_read_as_conll(tmp_path, ner_dir):
    data = tmp_path / "train.txt"
    data.write_text(CONLL, encoding="utf-8")
    read = load_table(DataSpec(path=str(data)))
    assert [ex.words for ex in read.examples] == [("EU", "rejects", "German"), ("Peter", "Blackburn")]
    assert read.examples[1].label == ("B-PER", "I-PER")
    plain = tsv(tmp_path, [("good movie", "1"), ("bad film", "0")], "plain.txt")  # a table stays a table
    assert load_table(DataSpec(path=str(plain), text="sentence")).examples[0].text == "good movie"
    suite = suite_file(tmp_path, ner_dir, data)
    result = invoke("validate", str(suite))
    assert result.exit_code == 2 and "has no text column" not in result.stderr
    assert "tag 'B-MISC' on line 5 of" in result.stderr  # read as tags: the only problem is a type the model lacks


@pytest.mark.parametrize("task", ["multi-label", "classification"])
def test_a_token_tagged_file_given_to_a_sentence_model_says_so(tmp_path, ml_dir, tiny_clf_dir, task):
    data = tmp_path / "test.iob2"
    data.write_text(CONLL.replace("-DOCSTART- -X- -X- O\n\n", ""), encoding="utf-8")
    suite = suite_file(tmp_path, ml_dir if task == "multi-label" else tiny_clf_dir, data)
    result = invoke("validate", str(suite))
    assert result.exit_code == 2
    message = result.stderr
    assert "tags tokens" in message and f"is a {task} model, which labels whole sentences" in message
    assert "label 'O'" not in message and "nearest" not in message


def test_a_label_set_mixing_a_class_id_and_a_name_is_refused(tmp_path, ml_dir):
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "a", "labels": ["PER"]}\n{"text": "b", "labels": [1, "ORG"]}\n', encoding="utf-8")
    suite = suite_file(tmp_path, ml_dir, data, data_keys=", label: labels")
    result = invoke("validate", str(suite))
    assert result.exit_code == 2
    assert "label set [1, 'ORG'] on line 2 of" in result.stderr and "mixes class ids (1) and names (ORG)" in result.stderr


def test_bad_rows_found_during_a_run_are_listed_with_the_partial_report(tmp_path, ner_dir):
    data = tmp_path / "named.iob2"  # a named loader's data is read in the run, not before it
    data.write_text("Anna B-PERSON\nsings O\n\nOslo B-CITY\n", encoding="utf-8")
    suite = write_suite(tmp_path / "suite.yaml", (
        f"suite: tiny\nmodel: {{path: '{ner_dir}', device: cpu}}\ndata: {{loader: conll, path: '{data}'}}\n"
        f"report: {{dir: '{tmp_path / 'reports'}'}}\nprobes:\n  - probe: accuracy\n"))
    head, problems = problems_of(invoke("run", str(suite)))
    assert head.startswith("error: 2 problems (partial report in ") and str(tmp_path / "reports") in head
    assert [p.split(" of ")[0] for p in problems] == ["tag 'B-PERSON' on line 1", "tag 'B-CITY' on line 4"]


@pytest.mark.parametrize("name, body, expected", [
    ("d.jsonl", '{"text": "a", "label": "positive"}\n[1]\n{"text": "b", "label": "positive"}\n{"text": \n',
     ["line 2 of", "expected a JSON object", "line 4 of", "not valid JSON"]),
    # two rows with one problem are one item naming both lines
    ("d.iob2", "Anna B-PER\nsings\n\nOslo B-LOC\nis\n", ["lines 2 and 5 of", "is the tag missing?"]),
    ("d.jsonl", '{"tokens": ["a"], "tags": ["O", "O"]}\n{"tokens": "a b", "tags": ["O"]}\n',
     ["line 1 of", "one tag per word", "line 2 of", "'tokens' must be a list"]),
])
def test_the_readers_list_every_malformed_row(tmp_path, name, body, expected):
    from bertprobe.errors import DataError

    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    with pytest.raises(DataError) as caught:
        load_table(DataSpec(path=str(path)))
    problems = getattr(caught.value, "problems", None) or [str(caught.value)]
    assert len(problems) == (1 if name == "d.iob2" else 2) and all(e in " ".join(problems) for e in expected), problems


def test_an_expectation_names_a_class_exactly_as_the_metric_does(tmp_path, ml_dir):
    """recall_org would pass a case-blind check, then fail the run as 'missing' (the metric is recall_ORG):
    validate names the metric to write."""
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "Anna in Paris", "labels": ["PER", "LOC"]}\n', encoding="utf-8")
    suite = suite_file(tmp_path, ml_dir, data, "  - probe: accuracy\n    expect: {recall_org: {min: 0.5}, recall_PER: {min: 0.5}}\n",
                       data_keys=", label: labels")
    result = invoke("validate", str(suite))  # one problem: its one line
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr.strip().endswith("probes[0].expect.recall_org: the model's metric is named 'recall_ORG' (its "
                                          "class is 'ORG', written exactly in a metric's name); write expect.recall_ORG")


def test_an_internal_field_is_not_offered_as_a_key(tmp_path, tiny_clf_dir):
    data = tsv(tmp_path, [("a", "positive")])
    suite = suite_file(tmp_path, tiny_clf_dir, data, data_keys=", text: sentence, label: label, limt: 3")
    result = invoke("validate", str(suite))
    assert result.exit_code == 2 and "data.limt: unknown parameter (did you mean 'limit'?)" in result.stderr
    assert "named" not in result.stderr.split("allowed: ", 1)[1]  # DataSpec.named is bertprobe's, not a suite's
