"""The shipped suites are templates for their task: flags alone (--model, --data) point them at any model and
file, --only picks entries by id, and every suite under suites/ runs on a tiny model with its own label names."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import write_suite

from bertprobe.cli import main
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
