from __future__ import annotations

import pytest

from bertprobe.errors import SuiteError
from bertprobe.plugins import build_plugins
from bertprobe.suite import interpolate, load_suite, parse_suite
from bertprobe.suite.validate import validate_probes


def test_interpolation_defaults_and_types():
    env = {"SET": "x", "EMPTY": ""}
    assert interpolate("${SET:-d}", env) == "x"
    assert interpolate("${MISSING:-d}", env) == "d"
    assert interpolate("${EMPTY:-d}", env) == "d"  # ':-' also replaces empty
    assert interpolate("${EMPTY-d}", env) == ""  # '-' replaces only unset
    assert interpolate("${N:-500}", env) == 500  # a whole-scalar expression is re-typed
    assert interpolate("pre-${SET}-post", env) == "pre-x-post"
    assert interpolate({"a": ["${SET}"]}, env) == {"a": ["x"]}


def test_interpolation_unset_without_default_names_the_variable():
    with pytest.raises(SuiteError, match="MISSING is not set"):
        interpolate({"model": {"path": "${MISSING}"}}, {})


def _suite(**over):
    doc = {"suite": "s", "model": {"path": "m"}, "data": {"path": "d.tsv"}, "probes": [{"probe": "accuracy"}]}
    doc.update(over)
    return doc


def test_unknown_top_key_has_path_and_suggestion():
    with pytest.raises(SuiteError, match=r"^probs: unknown key \(did you mean 'probes'\?\)"):
        parse_suite(_suite(probs=[]), env={})


def test_unknown_nested_keys_have_their_yaml_path():
    with pytest.raises(SuiteError, match=r"model.devce: unknown parameter \(did you mean 'device'\?\)"):
        parse_suite(_suite(model={"path": "m", "devce": "cpu"}), env={})
    with pytest.raises(SuiteError, match=r"probes\[0\].expct: unknown key \(did you mean 'expect'\?\)"):
        parse_suite(_suite(probes=[{"probe": "accuracy", "expct": {}}]), env={})
    with pytest.raises(SuiteError, match=r"probes\[0\].expect.accuracy.mn: unknown key \(did you mean 'min'\?\)"):
        parse_suite(_suite(probes=[{"probe": "accuracy", "expect": {"accuracy": {"mn": 1}}}]), env={})


def test_bad_types_are_rejected():
    with pytest.raises(SuiteError, match=r"data.limit: expected int"):
        parse_suite(_suite(data={"path": "d", "limit": "many"}), env={})
    with pytest.raises(SuiteError, match=r"model.dtype: 'float64' is not one of"):
        parse_suite(_suite(model={"path": "m", "dtype": "float64"}), env={})
    with pytest.raises(SuiteError, match=r"expect.accuracy.min: expected a number"):
        parse_suite(_suite(probes=[{"probe": "accuracy", "expect": {"accuracy": {"min": "high"}}}]), env={})


def test_probe_override_inherits_device_and_ids_must_be_unique():
    suite = parse_suite(
        _suite(model={"path": "m", "device": "cpu"}, probes=[{"probe": "accuracy", "model": {"path": "mlm"}}, {"probe": "accuracy", "id": "again"}]),
        env={},
    )
    assert suite.probes[0].model.path == "mlm" and suite.probes[0].model.device == "cpu"
    assert suite.probes[1].model is None
    with pytest.raises(SuiteError, match="used twice"):
        parse_suite(_suite(probes=[{"probe": "accuracy"}, {"probe": "accuracy"}]), env={})


def test_validate_unknown_probe_params_and_metrics():
    plugins = build_plugins(entry_points=False)
    with pytest.raises(SuiteError, match=r"probes\[0\].probe: unknown probe 'acuracy' \(did you mean 'accuracy'\?\)"):
        validate_probes(parse_suite(_suite(probes=[{"probe": "acuracy"}]), env={}), plugins.probes)
    with pytest.raises(SuiteError, match=r"probes\[0\].params.bootstrp: unknown parameter \(did you mean 'bootstrap'\?\)"):
        validate_probes(parse_suite(_suite(probes=[{"probe": "accuracy", "params": {"bootstrp": 1}}]), env={}), plugins.probes)
    with pytest.raises(SuiteError, match=r"confidence must lie"):
        validate_probes(parse_suite(_suite(probes=[{"probe": "accuracy", "params": {"confidence": 2}}]), env={}), plugins.probes)
    with pytest.raises(SuiteError, match=r"has no such metric \(did you mean 'accuracy'\?\)"):
        validate_probes(parse_suite(_suite(probes=[{"probe": "accuracy", "expect": {"acuracy": {"min": 1}}}]), env={}), plugins.probes)
    ok = parse_suite(_suite(probes=[{"probe": "accuracy", "expect": {"accuracy_positive": {"min": 0.5}}, "params": {"bootstrap": 10}}]), env={})
    params = validate_probes(ok, plugins.probes)
    assert params["accuracy"].bootstrap == 10


def test_yaml_syntax_error_reports_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("suite: x\nmodel: {path: m\nprobes: []\n")
    with pytest.raises(SuiteError, match=r"YAML syntax error at line 3"):
        load_suite(bad)


def test_yaml_never_constructs_python_objects(tmp_path):
    evil = tmp_path / "evil.yaml"
    evil.write_text("suite: !!python/object/apply:os.system ['echo hi']\n")
    with pytest.raises(SuiteError, match="not a readable YAML file|YAML syntax error"):
        load_suite(evil)


def test_missing_and_empty_suite_files(tmp_path):
    with pytest.raises(SuiteError, match="not found"):
        load_suite(tmp_path / "nope.yaml")
    (tmp_path / "empty.yaml").write_text("")
    with pytest.raises(SuiteError, match="empty"):
        load_suite(tmp_path / "empty.yaml")


def test_shipped_suites_validate(monkeypatch):
    """Every shipped suite's probe names, params and expectations (its files are read by validate only where they
    exist: ../shared may be absent here, and the probes' own file checks have tests of their own)."""
    from conftest import REPO

    plugins = build_plugins()
    for name in plugins.probes.names():
        monkeypatch.setattr(plugins.probes.get(name), "input_problems", classmethod(lambda cls, params: []))
    for path in sorted((REPO / "suites").glob("*.yaml")):
        suite = load_suite(path, env={})
        validate_probes(suite, plugins.probes, plugins.reporters)


def test_relative_paths_resolve_against_the_suite_folder(tmp_path, monkeypatch):
    from bertprobe.plugins import build_plugins
    from bertprobe.suite import load_suite
    from bertprobe.suite.validate import validate_probes

    folder = tmp_path / "suites"
    folder.mkdir()
    (tmp_path / "model").mkdir()
    (folder / "dev.tsv").write_text("sentence\tlabel\nx\t1\n")
    (tmp_path / "ett").mkdir()  # validate reads the cloze probe's item files: found beside the suite's folder
    (tmp_path / "ett" / "NEG-136-SIMP.tsv").write_text("item\tcontext_aff\tcontext_neg\ttarget_aff\ttarget_neg\n"
                                                      "0\tA robin is a\tA robin is not a\tbird\ttree\n")
    monkeypatch.setenv("FROM_ENV", "relative/to/cwd")
    monkeypatch.delenv("UNSET_VAR", raising=False)
    (folder / "s.yaml").write_text(
        "model: {path: '${UNSET_VAR:-../model}'}\n"
        "data: {path: dev.tsv}\n"
        "report: {dir: out}\n"
        "probes:\n"
        "  - probe: accuracy\n    model: {path: org/hub-model}\n"
        "  - probe: accuracy\n    id: env\n    data: {path: '${FROM_ENV}'}\n"
        "  - probe: spurious-cues\n    params: {statistics_path: '../a.txt,../b.txt', adversarial_path: '${FROM_ENV}'}\n"
        "  - probe: cloze\n    params: {sets: ['builtin', 'ettinger:../ett']}\n"
    )
    monkeypatch.chdir(tmp_path / "model")  # anywhere else: the result must not depend on it
    suite = load_suite(folder / "s.yaml")
    assert suite.model.path == str(tmp_path / "model")
    assert suite.data.path == str(folder / "dev.tsv")
    assert suite.report_dir == str(folder / "out")
    assert suite.probes[0].model.path == "org/hub-model"  # a hub id is left alone
    assert suite.probes[1].data.path == "relative/to/cwd"  # an environment variable's value: as typed
    params = validate_probes(suite, build_plugins(entry_points=False).probes)
    assert params["spurious-cues"].statistics_path == f"{tmp_path / 'a.txt'},{tmp_path / 'b.txt'}"
    assert params["spurious-cues"].adversarial_path == "relative/to/cwd"
    assert params["cloze"].sets == ("builtin", f"ettinger:{tmp_path / 'ett'}")


def test_data_flags_follow_a_probe_reading_the_suites_own_data():
    """--data and the column flags replace the suite's data in a probe whose data: names the same source (ner.yaml's
    attention-audit reads fewer sentences of it); a probe reading other data keeps its own."""
    from bertprobe.suite.overrides import SuiteOverrides, apply_overrides

    doc = _suite(data={"path": "org/hub-data", "split": "test"}, probes=[
        {"probe": "accuracy"},
        {"probe": "attention-audit", "data": {"path": "org/hub-data", "split": "test", "limit": 300}},
        {"probe": "accuracy", "id": "other", "data": {"path": "other.tsv"}},
    ])
    suite = apply_overrides(parse_suite(doc, env={}), SuiteOverrides(
        data="mine.jsonl", text="body", label_map="pos=positive"))
    assert suite.data.path == "mine.jsonl" and suite.data.text == "body"
    same, other = suite.probes[1].data, suite.probes[2].data
    assert (same.path, same.limit, same.text, same.label_map) == ("mine.jsonl", 300, "body", {"pos": "positive"})
    assert (other.path, other.text, other.label_map) == ("other.tsv", None, {})
    untouched = apply_overrides(parse_suite(doc, env={}), SuiteOverrides())
    assert untouched.probes[1].data.path == "org/hub-data"
