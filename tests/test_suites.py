"""The shipped suites are templates for their task: flags alone (--model, --data) point them at any model and
file, --only picks entries by id, and every suite under suites/ runs on a tiny model with its own label names."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import only_run, write_suite

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
    ran = invoke("run", str(suite), *flags, "--allow-skips", "--threads", "1")
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
    from bertprobe.data.classes import glue_note

    note = glue_note(["LABEL_0", "LABEL_1"])
    assert "positive reads LABEL_1 and negative reads LABEL_0 by the GLUE convention" in note
    assert "--label-map positive=LABEL_0,negative=LABEL_1" in note
    assert glue_note(["NEG", "POS"]) is None and glue_note(["LABEL_0", "LABEL_1", "LABEL_2"]) is None
    assert glue_note(["LABEL_0", "LABEL_1"], {"positive": "LABEL_1", "negative": "LABEL_0"}) is None  # the map says


# ---- every shipped suite runs on a tiny model of its task, with that model's own label names -----------------
SUITES = REPO / "suites"
CONLLU = "".join(
    f"# sent_id = s{i}\n1\tthe\tthe\tDET\t_\t_\t2\tdet\t_\t_\n2\t{noun}\t{noun}\tNOUN\t_\t_\t3\tnsubj\t_\t_\n"
    f"3\twas\tbe\tAUX\t_\t_\t4\tcop\t_\t_\n4\t{adj}\t{adj}\tADJ\t_\t_\t0\troot\t_\t_\n5\t.\t.\tPUNCT\t_\t_\t4\tpunct\t_\t_\n\n"
    for i, (noun, adj) in enumerate([("movie", "good"), ("film", "bad"), ("plot", "dull"), ("story", "fun")] * 3))
ARCT_HEADER = "#id\twarrant0\twarrant1\tcorrectLabelW0orW1\treason\tclaim\tdebateTitle\tdebateInfo\n"


def _sentences(path: Path, header: str, row) -> Path:
    from bertprobe.testing import sentiment_examples

    path.write_text(header + "".join(row(t, y) for t, y in sentiment_examples(48, seed=5)), encoding="utf-8")
    return path


def _classifier(tmp: Path, labels: tuple[str, ...]) -> tuple[Path, Path]:
    from bertprobe.testing import save_tiny_model

    return (save_tiny_model(tmp / "model", labels=labels),
            _sentences(tmp / "reviews.tsv", "sentence\tlabel\n", lambda t, y: f"{t}\t{y}\n"))


def _tagger(tmp: Path) -> tuple[Path, Path]:
    import json

    from bertprobe.testing import save_tiny_model

    names = ("cheerful", "gloomy", "plot-talk")  # made-up label names of a tagger of its own
    def row(text: str, y: int) -> str:
        labels = [names[y]] + (["plot-talk"] if "plot" in text else [])
        return json.dumps({"text": text, "labels": labels}) + "\n"
    return save_tiny_model(tmp / "model", task="multi-label", labels=names), _sentences(tmp / "test.jsonl", "", row)


def _ner(tmp: Path) -> tuple[Path, Path]:
    from bertprobe.testing import save_tiny_model

    tags = ("O", "B-PERSON", "I-PERSON", "B-ORGANIZATION", "I-ORGANIZATION", "B-GPE", "I-GPE")  # not CoNLL's
    sentences = [[("she", "B-PERSON"), ("was", "O"), ("in", "O"), ("the", "B-GPE"), ("film", "I-GPE")],
                 [("the", "B-ORGANIZATION"), ("director", "I-ORGANIZATION"), ("was", "O"), ("good", "O")],
                 [("he", "B-PERSON"), ("is", "O"), ("a", "O"), ("very", "O"), ("fun", "O"), ("actor", "O")]] * 4
    text = "\n\n".join("\n".join(f"{w}\t{t}" for w, t in s) for s in sentences) + "\n"
    (tmp / "test.iob2").write_text(text, encoding="utf-8")
    return save_tiny_model(tmp / "model", task="token-classification", labels=tags), tmp / "test.iob2"


def _mlm(tmp: Path) -> tuple[Path, None]:
    from bertprobe.testing import save_tiny_model

    return save_tiny_model(tmp / "model", task="masked-lm", labels=()), None


def tiny_mlm_data(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two Ettinger NEG-SIMP items, a three-pair BLiMP paradigm and two CrowS-Pairs rows in the tiny vocabulary,
    named by the variables the masked-LM suites read."""
    import json

    ettinger = tmp / "ettinger"
    ettinger.mkdir()
    (ettinger / "NEG-136-SIMP.tsv").write_text(
        "item\tcontext_aff\tcontext_neg\ttarget_aff\ttarget_neg\n0\tA robin is (a|an)\tA robin is not (a|an)\tbird\tdog\n"
        "1\tA cat is (a|an)\tA cat is not (a|an)\tdog\tbird\n", encoding="utf-8")
    monkeypatch.setenv("BERTPROBE_ETTINGER", str(ettinger))
    blimp = tmp / "blimp"
    blimp.mkdir()
    rows = [{"sentence_good": "the dog is good .", "sentence_bad": "the dog are good .", "field": "morphology",
             "linguistics_term": "subject_verb_agreement", "UID": "sva", "pairID": str(i)} for i in range(3)]
    (blimp / "sva.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    monkeypatch.setenv("BERTPROBE_BLIMP", str(blimp))
    crows = tmp / "crows.csv"
    crows.write_text(",sent_more,sent_less,stereo_antistereo,bias_type,annotations,anon_writer,anon_annotators\n"
                     "0,she was a bad actor .,he was a bad actor .,stereo,gender,[],a,[]\n"
                     "1,the cat was fun .,the dog was fun .,antistereo,age,[],b,[]\n", encoding="utf-8")
    monkeypatch.setenv("BERTPROBE_CROWS", str(crows))


def _encoder(tmp: Path) -> tuple[Path, Path]:
    from bertprobe.testing import save_tiny_model

    (tmp / "dev.conllu").write_text(CONLLU, encoding="utf-8")
    return save_tiny_model(tmp / "model", task="encoder", labels=()), tmp / "dev.conllu"


def _arct(tmp: Path) -> tuple[Path, Path]:
    from bertprobe.testing import save_tiny_model

    rows = [("the film is good", "the film is not good", i % 2, "it was fun", "movies are great") for i in range(12)]
    (tmp / "test.txt").write_text(ARCT_HEADER + "".join(
        f"id{i}\t{w0}\t{w1}\t{y}\t{r}\t{c}\tTitle\tInfo\n" for i, (w0, w1, y, r, c) in enumerate(rows)), encoding="utf-8")
    return save_tiny_model(tmp / "model", task="multiple-choice", labels=("first", "second")), tmp / "test.txt"


def _reader(tmp: Path) -> tuple[Path, Path]:
    import json

    from bertprobe.testing import save_tiny_model

    words = tuple(["the", "a", "is", "was", "of", "in", "to", "dog", "cat", "bird", "red", "green", "blue", "house", "tree", "river", "who", "what", "where", "when", "which", "why", "how", "?", "."])
    contexts = ["the dog is in the house .", "the red bird was in the tree .", "the cat is blue .",
                "the dog was in the river ."]
    qas = [(c, q, a) for c in contexts for q, a in (("where is the dog ?", "house"), ("what is red ?", "bird"),
                                                  ("who was in the tree ?", "bird")) if a in c]
    rows = [{"context": c, "qas": [{"id": f"q{i}", "question": q, "answers": [{"text": a, "answer_start": c.index(a)}]}]}
            for i, (c, q, a) in enumerate(qas * 4)]
    (tmp / "questions.json").write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": rows}]}),
                                        encoding="utf-8")
    return save_tiny_model(tmp / "model", task="question-answering", words=words, seed=3), tmp / "questions.json"


def _robust_reader(tmp: Path) -> tuple[Path, Path]:
    """A tiny reader and questions the robustness probes can use: why questions (the trigger), questions on
    names, places and years (the distractor's rules)."""
    import json

    model, _ = _reader(tmp)
    people = [("Anna", "Paris", "1990", "she loved art"), ("Peter", "Berlin", "1985", "he found work"),
              ("Maria", "London", "2001", "she studied law"), ("John", "Boston", "1977", "he married there")]
    paragraphs, k = [], 0
    for name, city, year, why in people:
        context = f"{name} moved to {city} in {year} because {why}. The city was large and old."
        qas = []
        for question, answer in ((f"Why did {name} move to {city}?", f"because {why}"),
                                 (f"Who moved to {city} in {year}?", name), (f"Where did {name} move in {year}?", city),
                                 (f"When did {name} move to {city}?", year)):
            for _ in range(2):
                qas.append({"id": f"r{k}", "question": question,
                            "answers": [{"text": answer, "answer_start": context.index(answer)}]})
                k += 1
        paragraphs.append({"context": context, "qas": qas})
    (tmp / "robust.json").write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}),
                                     encoding="utf-8")
    return model, tmp / "robust.json"


def _embedder(tmp: Path) -> tuple[Path, Path]:
    """A tiny bi-encoder in sentence-transformers' layout and a BEIR folder of its words."""
    from bertprobe.testing import retrieval_texts, save_tiny_embedder, write_beir

    documents, queries = retrieval_texts(queries=16)
    return save_tiny_embedder(tmp / "model"), write_beir(tmp / "beir", documents, queries)


# suite -> (its tiny model and data, the --set and environment that keep it to a few seconds)
SHIPPED = {
    "sst2": (lambda t: _classifier(t, ("NEG", "POS")), ("probes.universal-trigger.params.candidates=4",
                                                        "probes.universal-trigger.params.iterations=1"), {}),
    "behaviour": (lambda t: _classifier(t, ("bad", "good")), ("probes.behaviour.params.max_cases=2",
                                                              "probes.behaviour.params.max_examples=6"), {}),
    "backdoor": (lambda t: _classifier(t, ("ham", "spam")), ("probes.backdoor-scan.params.candidates=4",
                                                             "probes.backdoor-scan.params.max_length=1"), {}),
    "compression": (lambda t: _classifier(t, ("sports", "politics")), (
        "probes.universal-trigger.params.candidates=4", "probes.universal-trigger.params.iterations=1"), {}),
    "internals": (lambda t: _classifier(t, ("LABEL_0", "LABEL_1")), ("probes.head-pruning.params.step=0.5",
                                                                      "probes.attention-audit.params.similarity_examples=4"), {}),
    "multilabel": (_tagger, ("probes.behaviour.params.max_cases=2", "probes.behaviour.params.max_examples=6"), {}),
    "ner": (_ner, ("probes.behaviour.params.max_examples=4", "probes.universal-trigger.params.candidates=4",
                   "probes.universal-trigger.params.iterations=1", "probes.universal-trigger.params.max_examples=8",
                   "probes.attention-audit.params.similarity_examples=4"), {}),
    "ner-int8": (_ner, ("probes.behaviour.params.max_examples=4",), {"BERTPROBE_NER_BEHAVIOUR_EXAMPLES": "4"}),
    "bf16": (_tagger, (), {}),
    "deploy-onnx": (lambda t: _classifier(t, ("NEG", "POS")), ("probes.behaviour.params.max_examples=6",), {}),
    "cloze": (_mlm, (), {}),
    "blimp": (_mlm, (), {"BERTPROBE_BLIMP_PAIRS": "2"}),
    "mlm": (_mlm, ("probes.crows-pairs.params.limit=2",), {}),
    "syntax": (_encoder, ("probes.syntax-heads.params.min_count=1",), {}),
    "arct": (_arct, (), {}),
    "squad": (_reader, ("probes.attention-audit.params.similarity_examples=4",), {}),
    "retrieval": (_embedder, ("probes.behaviour.params.max_examples=8",), {}),
    "retrieval-robustness": (_embedder, ("probes.universal-trigger.params.candidates=2",
                                         "probes.universal-trigger.params.iterations=1",
                                         "probes.universal-trigger.params.passage_iterations=2",
                                         "probes.universal-trigger.params.passage_length=4"), {}),
    "squad-robustness": (_robust_reader, ("probes.universal-trigger.params.candidates=2",
                                   "probes.universal-trigger.params.iterations=1",
                                   "probes.behaviour.params.max_cases=2", "probes.behaviour.params.max_examples=4"), {}),
}


SUITE_NAMES: dict[str, str] = {}  # file stem -> the suite: name inside, where they differ


# suites that audit a served model: they run in the endpoint tests (tests/servers.py starts a real server); here
# validate checks them on a tiny model served on loopback (validate asks the endpoint its readiness and metadata)
SERVED = {"serving": lambda t: _classifier(t, ("NEG", "POS"))}


def test_every_shipped_suite_is_listed_here():
    assert {p.stem for p in SUITES.glob("*.yaml")} == set(SHIPPED) | set(SERVED)


@pytest.mark.parametrize("name", sorted(SERVED))
def test_a_shipped_suite_of_a_served_model_validates_on_a_tiny_model_of_its_task(name, tmp_path, monkeypatch):
    model, data = SERVED[name](tmp_path)
    monkeypatch.setenv("BERTPROBE_MODEL", str(model))  # the checkpoint and the endpoint's twin
    monkeypatch.setenv("BERTPROBE_DEVICE", "cpu")
    from tiny_endpoint import TinyEndpoint

    with TinyEndpoint(model, name="sst2") as server:
        monkeypatch.setenv("BERTPROBE_ENDPOINT", server.url)
        checked = invoke("validate", str(SUITES / f"{name}.yaml"), "--data", str(data))
        assert checked.exit_code == 0, checked.output
        assert not server.inputs  # readiness and metadata only: no input was sent
    down = invoke("validate", str(SUITES / f"{name}.yaml"), "--data", str(data))  # the server stopped
    assert down.exit_code == 2 and f"endpoint {server.url}" in down.output and "start the server" in down.output


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_a_shipped_suite_runs_on_a_tiny_model_of_its_task_with_its_own_label_names(name, tmp_path, monkeypatch):
    if name == "deploy-onnx":
        pytest.importorskip("onnxruntime")  # the [onnx] extra
        monkeypatch.setenv("BERTPROBE_CACHE", str(tmp_path / "cache"))
    build, sets, env = SHIPPED[name]
    model, data = build(tmp_path)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    if name == "syntax":
        monkeypatch.setenv("BERTPROBE_UD_TEST", str(data))
    if name == "arct":  # the cue statistics and the adversarial set: the same tiny file
        monkeypatch.setenv("BERTPROBE_ARCT_STATS", str(data))
        monkeypatch.setenv("BERTPROBE_ARCT_ADV", str(data))
    if name in ("cloze", "blimp", "mlm"):
        tiny_mlm_data(tmp_path, monkeypatch)
    suite = str(SUITES / f"{name}.yaml")
    flags = ["--model", str(model), "--device", "cpu", *(("--data", str(data)) if data else ())]
    flags += [f"--set={s}" for s in sets] + ["--set=report.formats=[json]"]
    run_flags = ["--threads", "1", "--limit", "48" if name == "backdoor" else "12", "--out", str(tmp_path / "out")]
    checked = invoke("validate", suite, *flags)
    assert checked.exit_code == 0, checked.output
    ran = invoke("run", suite, *flags, *run_flags)  # one thread: a tiny model on a busy machine
    assert ran.exit_code in (0, 1, 4, 5), ran.output  # a decision: not bad input (2), not an internal error (3)
    assert "Traceback" not in ran.output and "decision:" in ran.output, ran.output
    _, report = only_run(tmp_path / "out", SUITE_NAMES.get(name, name))
    assert [(p["id"], p["status"]) for p in report["probes"] if p["status"] in ("error", "skipped")] == [], ran.output


def test_unnamed_classes_are_read_by_the_glue_convention_and_the_run_says_so(tmp_path):
    model, data = _classifier(tmp_path, ("LABEL_0", "LABEL_1"))
    flags = ["--model", str(model), "--data", str(data), "--device", "cpu", "--only", "universal-trigger",
             "--set=probes.universal-trigger.params.candidates=2", "--set=probes.universal-trigger.params.iterations=1",
             "--set=report.formats=[json]", "--limit", "12", "--threads", "1", "--out", str(tmp_path / "out")]
    ran = invoke("run", str(SUITES / "sst2.yaml"), *flags)
    assert ran.exit_code in (0, 1), ran.output
    assert "positive reads LABEL_1 and negative reads LABEL_0 by the GLUE convention" in ran.output  # said in the run...
    _, report = only_run(tmp_path / "out", "sst2")
    assert any("GLUE convention" in note for note in report["models"][0]["notes"])  # ... and in the report
    assert report["probes"][0]["details"]["target_label"] == "LABEL_1"
    flags[flags.index("--out") + 1] = str(tmp_path / "mapped")
    mapped = invoke("run", str(SUITES / "sst2.yaml"), *flags, "--label-map", "positive=LABEL_0,negative=LABEL_1")
    assert "GLUE" not in mapped.output, mapped.output  # the map says otherwise: no convention, no note
    _, report = only_run(tmp_path / "mapped", "sst2")
    assert report["probes"][0]["details"]["target_label"] == "LABEL_0"


def test_a_role_no_rule_reads_is_refused_by_validate_naming_the_label_map(tmp_path):
    model, data = _classifier(tmp_path, ("happy", "sad"))
    result = invoke("validate", str(SUITES / "sst2.yaml"), "--model", str(model), "--data", str(data))
    assert result.exit_code == 2 and "'positive' is not a class of" in result.output
    assert "--label-map positive=CLASS" in result.output
    mapped = invoke("validate", str(SUITES / "sst2.yaml"), "--model", str(model), "--data", str(data),
                    "--label-map", "positive=happy")
    assert mapped.exit_code == 0, mapped.output


def test_slices_read_a_label_by_role_and_through_the_map_as_the_other_probes_do():
    import numpy as np

    from bertprobe.probes.slices.probe import SlicesParams, SlicesProbe

    gold, pred = np.array([0, 1, 1, 0]), np.array([0, 1, 0, 0])
    _, base = SlicesProbe._outcome(SlicesParams(metric="recall", positive="positive"), gold, pred, ["NEG", "POS"])
    assert base.tolist() == [False, True, True, False]  # 'positive' reads POS
    _, base = SlicesProbe._outcome(SlicesParams(metric="recall", positive="happy"), gold, pred, ["sad", "glad"],
                                   {"happy": "sad"})
    assert base.tolist() == [True, False, False, True]


# ---- a suite of another task: the mismatch first, not a setting the model does not read ------------------------
@pytest.mark.parametrize("name", ["squad", "squad-robustness"])
@pytest.mark.parametrize("kind", ["classifier", "ner"])
def test_a_reader_suite_given_another_tasks_model_names_the_mismatch_and_the_fix(name, kind, tmp_path):
    """suites/squad*.yaml set a reader's window and decoding settings under model.options; a classifier or NER model
    given them is refused, from validate as from run, in one line that names the task mismatch and the fix (a reader,
    or a suite of the model's task), exit 2 and no run folder, whether --data is a reader's file or the model's."""
    model, own = _classifier(tmp_path, ("NEG", "POS")) if kind == "classifier" else _ner(tmp_path)
    (tmp_path / "reader").mkdir()
    _, questions = _reader(tmp_path / "reader")
    task = {"classifier": "classification", "ner": "token-classification"}[kind]
    keys = "n_best, max_answer_tokens, question_first" + (
        ", null_threshold, abstain" if name == "squad" else "")
    expected = (f": model: a {task} model, but the suite is for question-answering models (model.options: {keys}, "
                f"their settings); pass --model a question-answering model, or use a suite written for {task} models")
    for data in (questions, own):
        flags = ["--model", str(model), "--data", str(data), "--device", "cpu"]
        for command in ("validate", "run"):
            extra = ["--out", str(tmp_path / "out")] if command == "run" else []
            result = invoke(command, str(SUITES / f"{name}.yaml"), *flags, *extra)
            lines = result.output.splitlines()
            assert result.exit_code == 2 and len(lines) == 1, result.output
            assert lines[0].startswith(f"error: {SUITES / name}.yaml: ") and lines[0].endswith(expected), result.output
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
