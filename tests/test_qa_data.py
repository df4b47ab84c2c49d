"""Extractive QA data from file to checked examples: every form gives the same report, every malformed input its
one-line error (exit 2, before any weights load, every bad row listed and grouped), each JSON file parsed once,
and the task's settings reach it from a suite and from the command line."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner
from conftest import QA_WORDS as WORDS
from conftest import save_tiny_reader

import bertprobe.plugins
from bertprobe.data.dataset import DataSpec
from bertprobe.data.prepare import subsample
from bertprobe.data.squad_loader import SquadLoader
from bertprobe.data.tables import load_table
from bertprobe.errors import DataError
from bertprobe.hookspecs import hookimpl
from bertprobe.probe import Probe
from bertprobe.results.outcomes import Outcomes
from bertprobe.results.report import ProbeResult
from bertprobe.tasks import squad_metrics

POOL = [w for w in WORDS if w not in "?.,"]


class QaScore(Probe):
    """A test probe for readers: SQuAD EM/F1 from the run's shared answers, outcomes per question id."""

    name: ClassVar[str] = "qa-score"
    tasks: ClassVar[frozenset[str]] = frozenset({"question-answering"})
    requires: ClassVar[frozenset[str]] = frozenset({"data:labels"})
    metrics: ClassVar[tuple[str, ...]] = ("exact", "f1")

    def run(self, target: Any, data: Any, params: Any, ctx: Any) -> ProbeResult:
        answers = ctx.predictions(target, data).answers
        task = target.task
        summary = task.metrics_of(answers, data.examples)
        outcomes = task.outcomes(answers, data.examples)
        ids = [ex.id for ex in data.examples]
        result = ProbeResult(probe=self.name)
        result.add_metric("exact", summary["exact"])
        result.add_metric("f1", summary["f1"])
        result.outcomes.append(Outcomes("em", ids, [o["em"] for o in outcomes]))
        result.outcomes.append(Outcomes("f1", ids, [o["f1"] for o in outcomes], "score"))
        result.details["answers"] = {ex.id: a.text for ex, a in zip(data.examples, answers)}
        result.details["settings"] = dict(task.settings)
        result.details["windows"] = {ex.id: a.windows for ex, a in zip(data.examples, answers)}
        return result


class Plugin:
    @hookimpl
    def bertprobe_register_probes(self, registry: Any) -> None:
        registry.add(QaScore)


@pytest.fixture(autouse=True)
def with_qa_probe(monkeypatch):
    real = bertprobe.plugins.build_plugins
    monkeypatch.setattr(bertprobe.plugins, "build_plugins", lambda **kw: real(extra=[Plugin()], **kw))


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    from bertprobe.testing import save_tiny_model

    root = tmp_path_factory.mktemp("models")
    return {"qa": save_tiny_reader(root / "tiny-qa"),
            "cls": save_tiny_model(root / "tiny-cls", words=WORDS),
            "tagger": save_tiny_model(root / "tiny-tagger", task="multi-label", labels=("toxic", "insult"), words=WORDS),
            "ner": save_tiny_model(root / "tiny-ner", task="token-classification", labels=("O", "B-PER", "I-PER"),
                                   words=WORDS)}


def invoke(*args: str):
    from bertprobe.cli import main

    return CliRunner().invoke(main, list(args))


def suite_file(tmp: Path, model: Path, data: Path | str, extra: str = "", model_extra: str = "",
               name: str = "qa") -> Path:
    suite = tmp / f"{name}.yaml"
    suite.write_text(f"suite: {name}\nmodel: {{path: '{model}', device: cpu{model_extra}}}\n"
                     f"data: {{path: '{data}'{extra}}}\nreport: {{dir: '{tmp / 'reports'}', formats: [json]}}\n"
                     "probes:\n  - probe: qa-score\n    expect: {f1: {min: 0}}\n", encoding="utf-8")
    return suite


def errors_of(result) -> list[str]:
    """The error lines a command printed: one for a single problem, else each numbered problem."""
    lines = result.stderr.splitlines()
    assert "Traceback" not in result.output, result.output
    if len(lines) > 1 and lines[0].startswith("error: ") and lines[0].endswith("problems:"):
        return [line.split(". ", 1)[1] for line in lines[1:] if line.startswith("  ")]
    return [line[len("error: "):] for line in lines if line.startswith("error: ")]


def refused(tmp: Path, suite: Path, *flags: str) -> list[str]:
    """validate's and run's errors for ``suite``: the same, exit 2 both, and no run folder."""
    checked = invoke("validate", str(suite), *flags)
    ran = invoke("run", str(suite), *flags)
    assert checked.exit_code == 2 and ran.exit_code == 2, (checked.output, ran.output)
    assert errors_of(checked) == errors_of(ran)
    assert not list((tmp / "reports").glob("*-[0-9]*")), "run made a folder before refusing"
    return errors_of(checked)


# ---- 30 questions in every form --------------------------------------------------------------------------


def questions(n: int = 30, seed: int = 5) -> list[dict[str, Any]]:
    """``n`` questions over ``n // 3`` contexts of the tiny vocabulary; an answer is a span of its context, some
    occurring twice (their tables name the start), some a question has two gold answers for (JSON forms)."""
    rng = random.Random(seed)
    out = []
    for p in range(n // 3):
        words = [rng.choice(POOL) for _ in range(rng.randint(12, 40))] + ["."]
        context = " ".join(words)
        for q in range(3):
            i = rng.randrange(len(words) - 4)
            text = " ".join(words[i : i + rng.randint(1, 3)])
            starts = [k for k in range(len(context)) if context.startswith(text, k)]
            start = len(" ".join(words[:i])) + (1 if i else 0)
            assert start in starts
            out.append({"id": f"q{3 * p + q:02d}", "title": f"t{p // 3}", "context": context,
                        "question": " ".join(rng.choice(POOL) for _ in range(5)) + " ?",
                        "answer": text, "answer_start": start, "ambiguous": len(starts) > 1})
    return out


def write_forms(tmp: Path, rows: list[dict[str, Any]]) -> dict[str, Path]:
    """The same questions as SQuAD JSON v1.1 and v2.0, JSONL, CSV, TSV, a save_to_disk folder, parquet and arrow."""
    import datasets

    def squad(version: str) -> dict[str, Any]:
        articles: dict[str, dict[str, Any]] = {}
        for row in rows:
            article = articles.setdefault(row["title"], {"title": row["title"], "paragraphs": []})
            if not article["paragraphs"] or article["paragraphs"][-1]["context"] != row["context"]:
                article["paragraphs"].append({"context": row["context"], "qas": []})
            qa = {"id": row["id"], "question": row["question"],
                  "answers": [{"text": row["answer"], "answer_start": row["answer_start"]}]}
            if version == "v2.0":
                qa |= {"is_impossible": False, "plausible_answers": [{"text": "ignored", "answer_start": 0}]}
            article["paragraphs"][-1]["qas"].append(qa)
        return {"version": version, "data": list(articles.values())}

    squad_rows = [{"id": r["id"], "title": r["title"], "context": r["context"], "question": r["question"],
                   "answers": {"text": [r["answer"]], "answer_start": [r["answer_start"]]}} for r in rows]
    (tmp / "v1.json").write_text(json.dumps(squad("1.1"), indent=2), encoding="utf-8")
    (tmp / "v2.json").write_text(json.dumps(squad("v2.0")), encoding="utf-8")
    (tmp / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in squad_rows), encoding="utf-8")
    for name, sep in (("rows.csv", ","), ("rows.tsv", "\t")):
        lines = [sep.join(["id", "title", "question", "context", "answer", "answer_start"])]
        for r in rows:  # the start only where the answer occurs twice in its context
            lines.append(sep.join([r["id"], r["title"], r["question"], r["context"], r["answer"],
                                   str(r["answer_start"]) if r["ambiguous"] else ""]))
        (tmp / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    table = datasets.Dataset.from_list(squad_rows)
    table.save_to_disk(str(tmp / "saved"))
    table.to_parquet(str(tmp / "rows.parquet"))
    (arrow,) = (tmp / "saved").glob("*.arrow")
    (tmp / "rows.arrow").write_bytes(arrow.read_bytes())
    names = ("v1.json", "v2.json", "rows.jsonl", "rows.csv", "rows.tsv", "saved", "rows.parquet", "rows.arrow")
    return {name: tmp / name for name in names}


def test_every_form_reads_the_same_questions(tmp_path):
    rows = questions()
    assert sum(r["ambiguous"] for r in rows) >= 3  # the tables need answer_start for these, and give it
    forms = write_forms(tmp_path, rows)
    read = {name: load_table(DataSpec(path=str(path))).examples for name, path in forms.items()}
    expected = [(r["id"], r["question"].strip(), r["context"], ((r["answer"], r["answer_start"]),)) for r in rows]
    for name, examples in read.items():
        assert [(ex.id, ex.text, ex.text_pair, ex.label) for ex in examples] == expected, name
        assert [ex.meta["title"] for ex in examples] == [r["title"] for r in rows], name
        assert SquadLoader().load(DataSpec(path=str(forms[name]), loader="squad")).examples == examples


def test_every_form_gives_the_same_report_through_run(tmp_path, models):
    rows = questions()
    forms = write_forms(tmp_path, rows)
    reports = {}
    for name, path in forms.items():
        suite = suite_file(tmp_path, models["qa"], path, model_extra=", options: {max_length: 48, stride: 16}",
                           name=f"qa-{name.replace('.', '-')}")
        result = invoke("run", str(suite), "-q")
        assert result.exit_code == 0, (name, result.output)
        (run_dir,) = (tmp_path / "reports").glob(f"{suite.stem}-[0-9]*")
        report = json.loads((run_dir / "report.json").read_text())
        [entry] = report["probes"]
        metrics = dict(entry["metrics"])
        outcomes = {r["name"]: dict(zip(r["ids"], r["values"])) for r in map(json.loads, (run_dir / "outcomes.jsonl")
                                                                               .read_text().splitlines())}
        reports[name] = (metrics, outcomes, entry["details"]["answers"])
        assert entry["details"]["settings"]["max_length"] == 48 and entry["details"]["settings"]["stride"] == 16
    reference = reports["v1.json"]
    for name, got in reports.items():
        assert got == reference, name
    metrics, outcomes, answers = reference
    assert list(outcomes["f1"]) == [r["id"] for r in rows] and all(answers.values())  # a span for every question
    # EM and F1 recomputed here from the answers and the gold (official v1.1 definitions, squad_metrics tested apart)
    scores = [squad_metrics.score(answers[r["id"]], [r["answer"]]) for r in rows]
    assert [outcomes["em"][r["id"]] for r in rows] == [em for em, _ in scores]
    assert metrics["f1"] == pytest.approx(100 * sum(f1 for _, f1 in scores) / len(rows))


def test_a_jsonl_row_may_list_its_answers_as_squad_json_does(tmp_path):
    row = {"id": "a", "question": "what did the dog see ?", "context": "the dog saw a red bird .",
           "answers": [{"text": "a red bird", "answer_start": 12}, {"text": "bird", "answer_start": 18}]}
    path = write(tmp_path / "list.jsonl", json.dumps(row) + "\n")
    [ex] = load_table(DataSpec(path=str(path))).examples
    assert ex.label == (("a red bird", 12), ("bird", 18)) and ex.where == f"line 1 of {path}"


def test_squad_v2_unanswerable_questions_agree_across_forms(tmp_path):
    context = "the dog saw a red bird in the tree ."
    v2 = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": [
        {"id": "a", "question": "what did the dog see ?", "answers": [{"text": "a red bird", "answer_start": 12}],
         "is_impossible": False},
        {"id": "b", "question": "who ran ?", "answers": [], "is_impossible": True,
         "plausible_answers": [{"text": "the dog", "answer_start": 0}]}]}]}]}
    (tmp_path / "v2.json").write_text(json.dumps(v2), encoding="utf-8")
    (tmp_path / "v2.jsonl").write_text(
        json.dumps({"id": "a", "question": "what did the dog see ?", "context": context,
                    "answers": {"text": ["a red bird"], "answer_start": [12]}}) + "\n"
        + json.dumps({"id": "b", "question": "who ran ?", "context": context, "answers": {"text": [], "answer_start": []}})
        + "\n", encoding="utf-8")
    (tmp_path / "v2.csv").write_text(f"id,question,context,answer\na,what did the dog see ?,{context},a red bird\n"
                                     f"b,who ran ?,{context},\n", encoding="utf-8")
    read = [load_table(DataSpec(path=str(tmp_path / n))).examples for n in ("v2.json", "v2.jsonl", "v2.csv")]
    assert [[(ex.id, ex.label, ex.meta["is_impossible"]) for ex in examples] for examples in read] == \
        [[("a", (("a red bird", 12),), False), ("b", (), True)]] * 3


# ---- malformed inputs: one line each, exit 2, before any weights load ---------------------------------------

CONTEXT = "Super Bowl 50 was won by the Denver Broncos, who beat the Carolina Panthers."


def squad_file(tmp: Path, qas: list[dict[str, Any]], context: str = CONTEXT, name: str = "dev.json") -> Path:
    path = tmp / name
    path.write_text(json.dumps({"data": [{"title": "SB50", "paragraphs": [{"context": context, "qas": qas}]}]}),
                    encoding="utf-8")
    return path


def qa(qid: str, text: str = "Denver Broncos", start: int = 29, question: str = "Who won?") -> dict[str, Any]:
    return {"id": qid, "question": question, "answers": [{"text": text, "answer_start": start}]}


CASES = {
    "shifted answer_start": (
        lambda t: squad_file(t, [qa("56be4db0acb8001400a502ec", start=21)]),
        "question 56be4db0acb8001400a502ec of {path}: answer 'Denver Broncos' starts at 29 in its context, not 21; "
        "fix its answer_start"),
    "answer_start in bytes": (
        lambda t: squad_file(t, [qa("q1", "Denver", 6)], context="Café Denver won."),
        "question q1 of {path}: answer 'Denver' starts at 5 in its context, not 6; fix its answer_start "
        "(answer_start counts UTF-8 bytes: count characters)"),
    "answer absent": (
        lambda t: squad_file(t, [qa("q1", "Seattle Seahawks", 29)]),
        "question q1 of {path}: answer 'Seattle Seahawks' does not occur in its context (answer_start 29); "
        "fix the answer's text"),
    "answer in another case": (
        lambda t: squad_file(t, [qa("q1", "denver broncos", 29)]),
        "question q1 of {path}: answer 'denver broncos' does not occur in its context (answer_start 29; it occurs "
        "at 29 as 'Denver Broncos'); fix the answer's text"),
    "ambiguous csv answer": (
        lambda t: write(t / "dev.csv", "id,question,context,answer\nq1,Who saw?,the dog saw the dog,dog\n"),
        "line 2 of {path}: answer 'dog' occurs 2 times in its context (at 4, 16); add an answer_start column "
        "giving the right one's offset"),
    "absent csv answer": (
        lambda t: write(t / "dev.csv", "id,question,context,answer\nq1,Who saw?,the dog saw a cat,cow\n"),
        "line 2 of {path}: answer 'cow' does not occur in its context; fix the answer (it must be a span of the "
        "context, character for character)"),
    "empty context": (
        lambda t: write(t / "dev.jsonl", json.dumps({"id": "q1", "question": "Who?", "context": " ",
                                                     "answers": {"text": [], "answer_start": []}}) + "\n"),
        "line 1 of {path}: the context is empty; give the passage the question is asked of"),
    "empty question": (
        lambda t: write(t / "dev.tsv", "id\tquestion\tcontext\tanswer\nq1\t\tthe dog saw a cat\tdog\n"),
        "line 2 of {path}: the question is empty; give its text, or remove the question"),
    "duplicate ids in squad json": (
        lambda t: squad_file(t, [qa("q1"), qa("q1", "Carolina Panthers", 58)]),
        "question q1 of {path}: the id is given to 2 questions; ids key per-question outcomes: make each unique"),
    "duplicate ids in a table": (
        lambda t: write(t / "dev.csv", "id,question,context,answer\nq1,Who?,the dog saw a cat,dog\n"
                                       "q1,What?,the dog saw a cat,cat\n"),
        "line 3 of {path}: id 'q1' is also the id of line 2; ids key per-question outcomes: make each unique"),
    "mismatched answers lists": (
        lambda t: write(t / "dev.jsonl", json.dumps({"id": "q1", "question": "Who?", "context": "a dog",
                                                     "answers": {"text": ["dog"], "answer_start": []}}) + "\n"),
        "line 1 of {path}: answers has 1 text(s) but 0 answer_start(s); give one answer_start per text"),
    "unmarked unanswerable": (
        lambda t: squad_file(t, [{"id": "q1", "question": "Who?", "answers": []}]),
        "question q1 of {path}: no answer, and the question is not marked is_impossible (SQuAD 2.0); give its "
        "answers or set is_impossible: true"),
    "is_impossible as a string": (
        lambda t: squad_file(t, [{**qa("q1"), "is_impossible": "false"}]),
        "question q1 of {path}: is_impossible must be true or false (a JSON boolean), not 'false'"),
    "bad json line": (
        lambda t: write(t / "dev.jsonl", '{"id": "q1", "question": "Who?", "context": "a dog",\n'),
        "line 1 of '{path}': not valid JSON (Expecting property name enclosed in double quotes at column 53); a "
        ".jsonl file holds one JSON object per line"),
}


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("case", list(CASES))
def test_each_malformed_input_gets_its_one_line_error_from_validate_and_run(tmp_path, models, case):
    make, expected = CASES[case]
    path = make(tmp_path)
    assert refused(tmp_path, suite_file(tmp_path, models["qa"], path)) == [expected.format(path=path)]


def test_many_bad_rows_are_all_listed_and_grouped_by_problem(tmp_path, models):
    lines = ["id,question,context,answer"]
    lines += [f"e{i},,the dog saw a cat,dog" for i in range(25)]  # 25 empty questions: one line naming them
    lines += ["s1,Who?,the dog saw the dog,dog", "s2,Who?,a cat,cow", "e3,What?,a red bird,bird"]
    csv = write(tmp_path / "many.csv", "\n".join(lines) + "\n")
    assert refused(tmp_path, suite_file(tmp_path, models["qa"], csv)) == [
        f"lines 2, 3, 4 and 22 more of {csv}: the question is empty; give its text, or remove the question",
        f"line 27 of {csv}: answer 'dog' occurs 2 times in its context (at 4, 16); add an answer_start column giving "
        "the right one's offset",
        f"line 28 of {csv}: answer 'cow' does not occur in its context; fix the answer (it must be a span of the "
        "context, character for character)",
        f"line 29 of {csv}: id 'e3' is also the id of line 5; ids key per-question outcomes: make each unique"]

    qas = [qa(f"z{i}") for i in range(5)] + [qa("w1", start=20), qa("w2", "Carolina Panthers", 3)]
    empty = squad_file(tmp_path, qas, context="")  # every question of an empty paragraph: one line
    assert refused(tmp_path, suite_file(tmp_path, models["qa"], empty)) == [
        f"questions z0, z1, z2 and 4 more of {empty}: the context is empty; give the passage the question is asked of"]
    shifted = squad_file(tmp_path, qas, name="shifted.json")
    assert refused(tmp_path, suite_file(tmp_path, models["qa"], shifted)) == [
        f"question w1 of {shifted}: answer 'Denver Broncos' starts at 29 in its context, not 20; fix its answer_start",
        f"question w2 of {shifted}: answer 'Carolina Panthers' starts at 58 in its context, not 3; fix its answer_start"]


def sst2(tmp: Path) -> Path:
    return write(tmp / "sst2.tsv", "sentence\tlabel\na good film\t1\na dull film\t0\nfun\t1\nthe worst\t0\n")


def conll(tmp: Path) -> Path:
    return write(tmp / "ner.iob2", "Tesla\tB-PER\nwon\tO\n\nEdison\tB-PER\nlost\tO\n\nhe\tO\n")


def test_a_file_of_another_tasks_shape_is_one_line_naming_what_the_model_needs(tmp_path, models):
    needs = ("tiny-qa is a question-answering model, which needs a question and its context; give SQuAD JSON, JSONL "
             "rows with question, context and answers, or a CSV/TSV with question, context and answer columns")
    data = sst2(tmp_path)
    assert refused(tmp_path, suite_file(tmp_path, models["qa"], data)) == [f"lines 2, 3, 4 and 1 more of {data}: {needs}"]
    data = conll(tmp_path)
    assert refused(tmp_path, suite_file(tmp_path, models["qa"], data)) == [f"lines 1, 4 and 7 of {data}: {needs}"]

    squad = squad_file(tmp_path, [qa("q1"), qa("q2", "Carolina Panthers", 58)])
    for model, task, wants, probe in (
            (models["cls"], "classification", "a text and one class per example (csv/tsv/jsonl)", "accuracy"),
            (models["tagger"], "multi-label", "a text and a label set per example (csv/tsv/jsonl)", "accuracy"),
            (models["ner"], "token-classification", "one tag per word (a CoNLL column file such as .iob2, or JSONL "
                                                    "with tokens and tags lists)", "accuracy")):
        suite = write(tmp_path / "other.yaml", f"suite: other\nmodel: {{path: '{model}', device: cpu}}\n"
                                              f"data: {{path: '{squad}'}}\nreport: {{dir: '{tmp_path / 'reports'}'}}\n"
                                              f"probes:\n  - probe: {probe}\n")
        assert refused(tmp_path, suite) == [
            f"'dev' holds extractive QA questions (a question, its context and answers: question q1 of {squad} ...), "
            f"but {model.name} is a {task} model, which needs {wants}; give it such a file, or audit a "
            "question-answering model with this one"]


def test_loader_squad_refuses_a_table_of_another_shape_before_weights_load(tmp_path, models):
    data = sst2(tmp_path)
    suite = suite_file(tmp_path, models["qa"], data, extra=", loader: squad")
    assert refused(tmp_path, suite) == [
        f"'{data}' is not question-answering data (it has no question and context columns); give SQuAD JSON, or rows "
        "with question, context and answers"]


# ---- settings and --limit ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("how", "expected"), [
    (("--set", "model.options.n_best=0"), "model.options.n_best: must be a positive whole number, not 0"),
    (("--set", "model.options.stride=400"),
     "model.options.stride: 400 must be less than max_length 384 (consecutive windows share stride sub-tokens)"),
    (("--set", "model.options.question_first=maybe"), "model.options.question_first: must be true or false, not 'maybe'"),
    (("--set", "model.options.null_threshold=high"),
     "model.options.null_threshold: must be a number (a logit difference, 0 by default), not 'high'"),
    (("--set", "model.options.strid=64"), "model.options.strid: not a setting of question-answering models (did you "
     "mean 'stride'?); its settings: abstain, max_answer_tokens, max_length, n_best, null_threshold, question_first, stride"),
    (("--set", "data.options.stride=64"), "data.options.stride: a setting of the question-answering task, not of its "
     "data; set model.options.stride (or --set model.options.stride=VALUE)"),
])
def test_a_bad_setting_is_one_line_exit_2_from_validate(tmp_path, models, how, expected):
    data = write_forms(tmp_path, questions(6))["rows.jsonl"]
    suite = suite_file(tmp_path, models["qa"], data)
    result = invoke("validate", str(suite), *how)
    assert result.exit_code == 2 and len(errors_of(result)) == 1, result.output
    assert errors_of(result)[0].endswith(expected), result.output


def test_max_length_beyond_the_models_positions_is_refused_before_weights_load(tmp_path, models):
    import json as _json

    positions = _json.loads((models["qa"] / "config.json").read_text())["max_position_embeddings"]
    data = write_forms(tmp_path, questions(6))["rows.jsonl"]
    suite = suite_file(tmp_path, models["qa"], data)
    result = invoke("validate", str(suite), "--set", f"model.options.max_length={positions + 1}",
                    "--set", "model.options.stride=16")
    assert result.exit_code == 2 and len(errors_of(result)) == 1, result.output
    assert errors_of(result)[0].endswith(f"model.options.max_length {positions + 1} is more than the model's {positions} "
                                         f"positions (max_position_embeddings); set model.options.max_length to at most "
                                         f"{positions}"), result.output


def test_settings_reach_the_task_from_a_suite_and_from_the_command_line(tmp_path, models):
    data = write_forms(tmp_path, questions(6))["rows.jsonl"]
    suite = suite_file(tmp_path, models["qa"], data,
                       model_extra=", options: {max_length: 40, stride: 8, n_best: 5, question_first: false}")
    result = invoke("run", str(suite), "-q", "--set", "model.options.max_answer_tokens=4",
                    "--set", "model.options.null_threshold=1.5")
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "reports").glob("qa-[0-9]*")
    [entry] = json.loads((run_dir / "report.json").read_text())["probes"]
    assert entry["details"]["settings"] == {"max_length": 40, "stride": 8, "n_best": 5, "max_answer_tokens": 4,
                                            "null_threshold": 1.5, "question_first": False, "abstain": "auto"}


@pytest.mark.parametrize("how", ["suite", "set"])
def test_model_max_length_and_stride_are_the_readers_windows(tmp_path, models, how):
    """``model: {max_length, stride}`` (or --set model.max_length=...) sets the windows a reader reads, as
    model.options does: each question is read in as many windows as the tokenizer's own overflow gives at that
    length and stride (before, the model-level keys were ignored for a reader: 384/128, one window each)."""
    from transformers import AutoTokenizer

    rows = questions(12)
    data = write_forms(tmp_path, rows)["rows.jsonl"]
    if how == "suite":
        suite = suite_file(tmp_path, models["qa"], data, model_extra=", max_length: 24, stride: 8")
        result = invoke("run", str(suite), "-q")
    else:
        suite = suite_file(tmp_path, models["qa"], data)
        result = invoke("run", str(suite), "-q", "--set", "model.max_length=24", "--set", "model.stride=8")
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "reports").glob("qa-[0-9]*")
    [entry] = json.loads((run_dir / "report.json").read_text())["probes"]
    assert entry["details"]["settings"]["max_length"] == 24 and entry["details"]["settings"]["stride"] == 8
    tokenizer = AutoTokenizer.from_pretrained(models["qa"])
    enc = tokenizer([r["question"] for r in rows], [r["context"] for r in rows], truncation="only_second",
                    max_length=24, stride=8, return_overflowing_tokens=True)
    expected = {rows[i]["id"]: n for i, n in sorted(Counter(enc["overflow_to_sample_mapping"]).items())}
    assert entry["details"]["windows"] == expected
    assert max(len(ids) for ids in enc["input_ids"]) == 24 and max(expected.values()) >= 3


@pytest.mark.parametrize(("how", "expected"), [
    ((", max_length: 48, options: {max_length: 64}", ()),
     "model.max_length 48 and model.options.max_length 64 differ: a reader reads one max_length for its windows; "
     "give it once (model.max_length, or model.options.max_length)"),
    (("", ("--set", "model.stride=16", "--set", "model.options.stride=32")),
     "model.stride 16 and model.options.stride 32 differ: a reader reads one stride for its windows; give it once "
     "(model.stride, or model.options.stride)"),
    ((", max_length: 513, stride: 16", ()),
     "model.max_length 513 is more than the model's 512 positions (max_position_embeddings); set model.max_length to "
     "at most 512"),
    ((", max_length: 64, stride: 64", ()),
     "model.stride: 64 must be less than max_length 64 (consecutive windows share stride sub-tokens)"),
    (("", ("--set", "model.max_length=1")),  # named as the problem, not the default stride the user never wrote
     "model.max_length: 1 is too small for a reader's windows (each holds the question, the special tokens and part "
     "of the context; the default is 384)"),
])
def test_model_level_windows_that_conflict_or_overflow_are_one_line_before_weights_load(tmp_path, models, how,
                                                                                         expected):
    extra, flags = how
    data = write_forms(tmp_path, questions(6))["rows.jsonl"]
    suite = suite_file(tmp_path, models["qa"], data, model_extra=extra)
    [line] = refused(tmp_path, suite, *flags)
    assert line.endswith(f": tiny-qa: {expected}"), line


def test_the_same_window_in_both_places_is_one_setting():
    from types import SimpleNamespace

    from bertprobe.model.spec import ModelSpec
    from bertprobe.tasks import resolve_task, task_options

    config = SimpleNamespace(architectures=["BertForQuestionAnswering"], max_position_embeddings=512)
    spec = ModelSpec(path="m", max_length=256, stride=64, options={"max_length": 256, "n_best": 5})
    settings = resolve_task(config, "auto", None, task_options(spec)).settings
    assert (settings["max_length"], settings["stride"], settings["n_best"]) == (256, 64, 5)
    # a window of 128 or less without a stride (a classifier's suite's max_length: 128) shares half of itself
    alone = resolve_task(config, "auto", None, task_options(ModelSpec(path="m", max_length=128))).settings
    assert (alone["max_length"], alone["stride"]) == (128, 64)
    # and any window without a stride overlaps by min(128, half): 150 by 75 (the stride of 128 left a 5-sub-token
    # question no room), 384 by 128 as before
    for window, stride in ((150, 75), (256, 128), (384, 128)):
        fitted = resolve_task(config, "auto", None, task_options(ModelSpec(path="m", max_length=window))).settings
        assert (fitted["max_length"], fitted["stride"]) == (window, stride)
    classifier = SimpleNamespace(architectures=["BertForSequenceClassification"], num_labels=2)
    assert resolve_task(classifier, "auto", None, task_options(spec.with_overrides(options={}))).name == "classification"


@pytest.mark.parametrize("sample", ["random", "first"])
def test_limit_takes_a_seeded_sample_of_questions_or_the_first(tmp_path, models, sample):
    rows = questions(30)
    data = write_forms(tmp_path, rows)["v1.json"]
    suite = suite_file(tmp_path, models["qa"], data, extra=f", sample: {sample}")
    result = invoke("run", str(suite), "-q", "--limit", "7", "--seed", "11")
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "reports").glob("qa-[0-9]*")
    [record, *_] = map(json.loads, (run_dir / "outcomes.jsonl").read_text().splitlines())
    whole = load_table(DataSpec(path=str(data)))
    assert record["ids"] == [ex.id for ex in subsample(whole, 7, sample, 11).examples]
    if sample == "first":
        assert record["ids"] == [r["id"] for r in rows[:7]]
    else:
        assert record["ids"] == [rows[i]["id"] for i in sorted(random.Random(11).sample(range(30), 7))]


# ---- each JSON file parsed once ---------------------------------------------------------------------------


def test_each_json_file_is_parsed_once(tmp_path, monkeypatch):
    import datasets

    forms = write_forms(tmp_path, questions(12))
    calls = []
    real = json.JSONDecoder.raw_decode

    def counted(self, s, idx=0):
        value, end = real(self, s, idx)
        calls.append(end - idx)  # the characters this call parsed
        return value, end

    monkeypatch.setattr(json.JSONDecoder, "raw_decode", counted)
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: pytest.fail("a JSON file went to a second parser"))
    for name, values in (("v1.json", 1), ("v2.json", 1), ("rows.jsonl", 12)):
        for load in (lambda p: load_table(DataSpec(path=str(p))), lambda p: SquadLoader().load(DataSpec(path=str(p), loader="squad"))):
            calls.clear()
            assert len(load(forms[name])) == 12
            assert len(calls) == values, name  # one parse per JSON value: the document, or each line
            text = forms[name].read_text(encoding="utf-8")  # every character parsed once, none twice
            assert sum(calls) == (len(text.strip()) if values == 1 else sum(len(line) for line in text.splitlines()))


def test_a_json_file_of_other_rows_is_read_from_the_same_parse(tmp_path, monkeypatch):
    """A classifier's JSON Lines and JSON array files go through the one parse too (no datasets json builder)."""
    import datasets

    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: pytest.fail("a JSON file went to a second parser"))
    lines = write(tmp_path / "rows.jsonl", '{"text": "good", "label": 1}\n\n{"text": "bad", "label": 0, "extra": "x"}\n')
    array = write(tmp_path / "rows.json", '[{"text": "good", "label": 1}, {"text": "bad", "label": 0, "extra": "x"}]')
    for path, where in ((lines, ["line 1 of", "line 3 of"]), (array, ["", ""])):
        data = load_table(DataSpec(path=str(path)))
        assert [(ex.text, ex.label, ex.meta) for ex in data.examples] == [("good", 1, {"extra": None}),
                                                                          ("bad", 0, {"extra": "x"})]
        assert [ex.where.startswith(w) for ex, w in zip(data.examples, where)] == [True, True]
    columns = write(tmp_path / "columns.json", '{"text": ["good", "bad"], "label": [1, 0]}')
    pandas = write(tmp_path / "pandas.json", '{"text": {"0": "good", "1": "bad"}, "label": {"0": 1, "1": 0}}')
    strings = write(tmp_path / "strings.json", '["good", "bad"]')
    for path in (columns, pandas):  # the column-oriented objects the datasets json builder read through pandas
        assert [(ex.text, ex.label) for ex in load_table(DataSpec(path=str(path))).examples] == [("good", 1), ("bad", 0)]
    assert [(ex.text, ex.label) for ex in load_table(DataSpec(path=str(strings))).examples] == [("good", None),
                                                                                                  ("bad", None)]
    bad = write(tmp_path / "bad.jsonl", '{"text": "good"}\n[1, 2]\n{"text": \n')
    with pytest.raises(DataError) as info:
        load_table(DataSpec(path=str(bad)))
    assert info.value.problems == [  # type: ignore[attr-defined]
        f"line 2 of '{bad}': expected a JSON object such as {{\"text\": ..., \"label\": ...}}, got list",
        f"line 3 of '{bad}': not valid JSON (Expecting value at column 10); a .jsonl file holds one JSON object per line"]


def test_a_saved_dataset_dict_reads_its_split_and_names_the_others(tmp_path):
    import datasets

    rows = [{"id": "a", "question": "who saw ?", "context": "the dog saw a cat .",
             "answers": {"text": ["the dog"], "answer_start": [0]}}]
    datasets.DatasetDict({"train": datasets.Dataset.from_list([dict(rows[0], id="t")]),
                          "validation": datasets.Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "dd"))
    assert [ex.id for ex in load_table(DataSpec(path=str(tmp_path / "dd"))).examples] == ["a"]  # data.split's default
    assert [ex.id for ex in load_table(DataSpec(path=str(tmp_path / "dd"), split="train")).examples] == ["t"]
    with pytest.raises(DataError, match=r"holds the splits train, validation, not 'test'; set data.split"):
        load_table(DataSpec(path=str(tmp_path / "dd"), split="test"))
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(DataError, match=r"^cannot read '.*bad.parquet': "):
        load_table(DataSpec(path=str(tmp_path / "bad.parquet")))


@pytest.mark.parametrize(("options", "expected"), [
    ("{windowz: 64}", "model.options.windowz: not a setting of classification models; it takes none"),
    # a reader's setting: the suite was written for readers, and the error says so (not "it takes none")
    ("{stride: 64}", "a classification model, but the suite is for question-answering models (model.options: stride, "
                     "their settings); pass --model a question-answering model, or use a suite written for "
                     "classification models"),
])
def test_a_task_without_settings_refuses_model_options(tmp_path, models, options, expected):
    suite = write(tmp_path / "cls.yaml", f"suite: cls\nmodel: {{path: '{models['cls']}', device: cpu, options: "
                                         f"{options}}}\ndata: {{path: '{sst2(tmp_path)}'}}\n"
                                         f"report: {{dir: '{tmp_path / 'reports'}'}}\nprobes:\n  - probe: accuracy\n")
    assert refused(tmp_path, suite)[0].endswith(f"tiny-cls: {expected}")


def test_a_json_file_with_more_after_its_document_names_the_line(tmp_path):
    path = write(tmp_path / "two.json", '{\n  "text": "a"\n}\n{"text": "b"}\n')
    with pytest.raises(DataError) as info:
        load_table(DataSpec(path=str(path)))
    assert str(info.value) == (f"'{path}' line 4: not valid JSON (more data after the document ending on line 3); a "
                               ".json file holds one JSON document, a .jsonl file one JSON object per line")


def test_a_saved_dataset_serves_other_tasks_as_a_hub_table_does(tmp_path):
    """The saved forms are the data layer's, not QA's alone: a classifier's rows with ClassLabel names."""
    import datasets

    features = datasets.Features({"sentence": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=["negative", "positive"])})
    table = datasets.Dataset.from_dict({"sentence": ["a good film", "a dull film"], "label": [1, 0]}, features=features)
    table.save_to_disk(str(tmp_path / "sst2"))
    table.to_parquet(str(tmp_path / "sst2.parquet"))
    for path in (tmp_path / "sst2", tmp_path / "sst2.parquet"):
        data = load_table(DataSpec(path=str(path)))
        assert [(ex.text, ex.label, ex.where) for ex in data.examples] == [("a good film", 1, f"row 1 of {path}"),
                                                                           ("a dull film", 0, f"row 2 of {path}")]
        assert data.label_names == ["negative", "positive"]


def test_a_stride_that_leaves_a_question_no_room_is_named_as_the_cause() -> None:
    from bertprobe.errors import DataError
    from bertprobe.tasks.spans import encode_windows
    from bertprobe.testing import WORDS, bert_tokenizer

    tokenizer = bert_tokenizer(WORDS)
    question = " ".join(WORDS[:6])  # 6 sub-tokens; 3 specials; windows of 40 leave 31 for the context
    with pytest.raises(DataError) as caught:
        encode_windows(tokenizer, [question], [" ".join(WORDS[:50])], max_length=40, stride=31, names=["q1"])
    assert "lower the stride (model.stride) below 31" in str(caught.value) and "\n" not in str(caught.value)
    assert len(encode_windows(tokenizer, [question], [" ".join(WORDS[:50])], max_length=40, stride=30)) == 1
