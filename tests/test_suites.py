"""The shipped suites are templates for their task: flags alone (--model, --data) point them at any model and
file, --only picks entries by id, and every suite under suites/ runs on a tiny model with its own label names."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import write_suite

from bertprobe.cli import main
from bertprobe.data.classes import ClassMatch
from bertprobe.errors import SuiteError
from bertprobe.suite.load import load_suite
from bertprobe.suite.overrides import SuiteOverrides, apply_overrides

REPO = Path(__file__).resolve().parents[1]


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), env=env)


# ---- --data and --model lift the suite's required ${VAR} --------------------------------------------------
def required_vars_suite(tmp_path: Path) -> Path:
    return write_suite(tmp_path / "req.yaml", (
        "suite: req\n"
        "model: {path: '${REQ_MODEL}', device: cpu}\n"
        "data: {path: '${REQ_DATA}'}\n"
        f"report: {{dir: '{tmp_path / 'reports'}'}}\n"
        "probes:\n  - probe: accuracy\n"
        "  - probe: accuracy\n    id: few\n    data: {path: '${REQ_DATA}', limit: 3}\n"))


def test_data_and_model_flags_lift_the_suites_required_variables(tmp_path, tiny_clf_dir, sst_tsv, monkeypatch):
    monkeypatch.delenv("REQ_MODEL", raising=False)
    monkeypatch.delenv("REQ_DATA", raising=False)
    suite = required_vars_suite(tmp_path)
    flags = ("--model", str(tiny_clf_dir), "--data", str(sst_tsv))
    checked = invoke("validate", str(suite), *flags)
    assert checked.exit_code == 0, checked.output
    ran = invoke("run", str(suite), *flags, "--allow-skips")
    assert ran.exit_code == 0, ran.output
    loaded = apply_overrides(load_suite(suite, given=("model", "data")), SuiteOverrides(models=(str(tiny_clf_dir),),
                                                                                      data=str(sst_tsv)))
    assert loaded.model.path == str(tiny_clf_dir) and loaded.data.path == str(sst_tsv)
    assert loaded.probes[1].data.path == str(sst_tsv) and loaded.probes[1].data.limit == 3  # same source: it follows


def test_a_required_variable_no_flag_replaces_is_still_an_error_naming_the_flag(tmp_path, sst_tsv, monkeypatch):
    monkeypatch.delenv("REQ_MODEL", raising=False)
    monkeypatch.delenv("REQ_DATA", raising=False)
    suite = required_vars_suite(tmp_path)
    result = invoke("validate", str(suite), "--data", str(sst_tsv))
    assert result.exit_code == 2
    assert "REQ_MODEL is not set; set it, pass --model PATH, or write ${REQ_MODEL:-default}" in result.output
    with pytest.raises(SuiteError, match="REQ_DATA is not set"):
        load_suite(suite, given=("model",))


# ---- --only selects by id ------------------------------------------------------------------------------
def test_only_selects_entries_by_id_and_a_probe_name_only_where_no_entry_has_it_as_id(tmp_path, tiny_clf_dir, sst_tsv):
    suite = write_suite(tmp_path / "s.yaml", (
        f"suite: s\nmodel: {{path: '{tiny_clf_dir}'}}\ndata: {{path: '{sst_tsv}'}}\nprobes:\n"
        "  - probe: accuracy\n  - probe: slices\n  - probe: slices\n    id: slices-neg\n    params: {metric: 'label:0'}\n"
        "  - probe: cloze\n    id: cloze-a\n  - probe: cloze\n    id: cloze-b\n"))

    def ids(only: str) -> list[str]:
        return [p.id for p in apply_overrides(load_suite(suite), SuiteOverrides(only=(only,))).probes]

    assert ids("accuracy,slices") == ["accuracy", "slices"]  # never slices-neg
    assert ids("slices-neg") == ["slices-neg"]
    assert ids("cloze") == ["cloze-a", "cloze-b"]  # no entry has the id 'cloze': every cloze entry
    with pytest.raises(SuiteError, match="did you mean 'slices-neg'"):
        ids("slices-ng")


# ---- class names by role: one rule for data labels, class params and templates ------------------------------
@pytest.mark.parametrize("names, index, how", [
    (["NEGATIVE", "POSITIVE"], 1, "name"), (["neg", "pos"], 1, "alias"), (["POS", "NEG"], 0, "alias"),
    (["bad", "good"], 1, "alias"), (["LABEL_0", "LABEL_1"], 1, "glue"), (["0", "1"], 1, "glue"),
])
def test_a_role_reads_the_models_own_names_and_unnamed_classes_by_the_glue_convention(names, index, how):
    from bertprobe.data.classes import find_class

    assert find_class("positive", names) == ClassMatch(index, how)
    assert find_class("Positive", names).index == index  # case does not matter
    assert find_class("negative", names).index == 1 - index


def test_the_label_map_comes_first_and_an_unreadable_name_is_none():
    from bertprobe.data.classes import find_class

    assert find_class("positive", ["LABEL_0", "LABEL_1"], {"positive": "LABEL_0"}) == ClassMatch(0, "map")
    assert find_class("positive", ["happy", "sad"], {"Positive": "happy"}) == ClassMatch(0, "map")
    assert find_class("positive", ["happy", "sad"]) is None  # no rule reads it: the caller names --label-map
    assert find_class("positive", ["LABEL_0", "LABEL_1", "LABEL_2"]) is None  # GLUE's convention is for two classes
    assert find_class("positive", ["pos", "positive"]) == ClassMatch(1, "name")  # an exact name wins over an alias
    assert find_class(1, ["a", "b"]) == ClassMatch(1, "index") and find_class(2, ["a", "b"]) is None


def test_the_glue_note_names_the_reading_and_the_map_that_undoes_it():
    from bertprobe.data.classes import glue_note, role_words

    roles = role_words([{"target_label": "positive", "templates": [{"label": "negative"}, {"pairs": ["positive->neg"]}]}])
    assert roles == {"positive", "negative"}
    note = glue_note(["LABEL_0", "LABEL_1"], {}, roles)
    assert "read negative as LABEL_0, positive as LABEL_1 by the GLUE convention" in note
    assert "--label-map negative=LABEL_1,positive=LABEL_0" in note
    assert glue_note(["NEG", "POS"], {}, roles) is None and glue_note(["LABEL_0", "LABEL_1"], {}, set()) is None
    assert glue_note(["LABEL_0", "LABEL_1"], {"positive": "LABEL_1", "negative": "LABEL_0"}, roles) is None
