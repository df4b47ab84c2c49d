"""The accuracy probe on extractive QA: SQuAD EM/F1 against an independent implementation, outcomes, per question
word, marked findings, the reports of a CLI run, a paired matrix, and the fixture against a plain decoding loop."""

from __future__ import annotations

import json
import random
import re
import string
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import QA_WORDS as WORDS
from conftest import only_run

from bertprobe.cli import main
from bertprobe.data.dataset import Dataset, DataSpec, Example
from bertprobe.model.predictions import Predictions
from bertprobe.probe import ProbeContext
from bertprobe.probes.accuracy import AccuracyParams, AccuracyProbe
from bertprobe.reporters.summary import bracketed_marks, mark_segments
from bertprobe.stats import paired_bootstrap_diff
from bertprobe.tasks.answer_text import excerpt
from bertprobe.tasks.spans import Answer, answer

SHARED = Path(__file__).resolve().parents[2] / "shared"

# ---- the official SQuAD v1.1 evaluation, written here from its definition (evaluate-v1.1.py) ----------------


def official_normalize(s: str) -> str:
    def remove_articles(text: str) -> str:
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text: str) -> str:
        return " ".join(text.split())

    def remove_punc(text: str) -> str:
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def official_f1(prediction: str, truth: str) -> float:
    pred, gold = official_normalize(prediction).split(), official_normalize(truth).split()
    common = Counter(pred) & Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(gold)
    return (2 * precision * recall) / (precision + recall)


def official_em(prediction: str, truth: str) -> float:
    return float(official_normalize(prediction) == official_normalize(truth))


def official(prediction: str, golds: list[str]) -> tuple[float, float]:
    """One question's (EM, F1): the maximum over its gold answers (v1.1); SQuAD 2.0 for no gold: abstaining scores 1."""
    if not golds:
        return (float(not official_normalize(prediction)),) * 2  # type: ignore[return-value]
    return max(official_em(prediction, g) for g in golds), max(official_f1(prediction, g) for g in golds)


# ---- hand-made questions, their gold answers and a prediction each ---------------------------------------

CTX_A = "Super Bowl 50 was won by the Denver Broncos, who beat the Carolina Panthers 24-10 in Santa Clara."
CTX_B = "Nikola Tesla was born in 1856 in Smiljan. He moved to the United States in 1884 to work for Edison."
# (id, question, context, [(gold, start)], prediction, confidence, question word)
CASES = [
    ("a1", "Who won Super Bowl 50?", CTX_A, [("Denver Broncos", 29), ("the Denver Broncos", 25)], "the Denver Broncos,",
     0.91, "who"),                                                   # punctuation and an article: EM 1
    ("a2", "Who lost the game?", CTX_A, [("Carolina Panthers", 58)], "Denver Broncos", 0.88, "who"),  # wrong, confident
    ("a3", "What was the score?", CTX_A, [("24-10", 76)], "Panthers 24-10", 0.40, "what"),   # partly right: F1 2/3
    ("a4", "Where was the game played?", CTX_A, [("Santa Clara", 85)], "Clara", 0.75, "where"),
    ("a5", "In what year was Tesla born?", CTX_B, [("1856", 25)], "1856", 0.97, "what"),
    ("a6", "When did Tesla move?", CTX_B, [("1884", 75)], "", 0.10, "when"),                 # an empty prediction
    ("a7", "Which company did he work for?", CTX_B, [("Edison", 92), ("for Edison", 88)], "work for Edison", 0.60,
     "which"),                                                        # several golds: the best F1 counts
    ("a8", "How did he travel?", CTX_B, [("moved to the United States", 45)], "United States", 0.55, "how"),
    ("a9", "Name his birthplace.", CTX_B, [("Smiljan", 33)], "Smiljan.", 0.80, "other"),
    ("a10", "Why did he move?", CTX_B, [("to work for Edison", 80)], "He moved", 0.85, "why"),
]


def examples_of(cases) -> list[Example]:
    out = []
    for cid, question, context, golds, *_ in cases:
        for text, start in golds:
            assert context[start : start + len(text)] == text, (cid, text)
        out.append(Example(question, context, tuple((t, s) for t, s in golds), id=cid))
    return out


def answers_of(cases) -> list[Answer]:
    out = []
    for _, _, context, _, predicted, confidence, _ in cases:
        start = context.index(predicted) if predicted else 0
        out.append(Answer(predicted, start, start + len(predicted), 1.0, confidence, 0.0, 1))
    return out


@pytest.fixture(scope="module")
def target(reader):
    from bertprobe.model.loading import load_target
    from bertprobe.model.spec import ModelSpec

    return load_target(ModelSpec(path=str(reader), device="cpu"))


def audit(target, examples, answers, **params):
    """The accuracy probe on ``examples`` with the shared predictions replaced by ``answers``."""
    ctx = ProbeContext(seed=7, predictions=lambda t, d, b=None, *a, **k: Predictions(None, 0.5, answers=answers))
    return AccuracyProbe().run(target, Dataset(examples, "hand"), AccuracyParams(**params), ctx)


def test_em_and_f1_equal_the_official_script_and_outcomes_back_every_metric(target):
    examples, answers = examples_of(CASES), answers_of(CASES)
    result = audit(target, examples, answers, bootstrap=300)
    expected = [official(p, [g for g, _ in golds]) for _, _, _, golds, p, _, _ in CASES]
    em, f1 = [e for e, _ in expected], [f for _, f in expected]
    assert em == [1, 0, 0, 0, 1, 0, 0, 0, 1, 0]
    assert result.value("exact_match") == pytest.approx(np.mean(em), abs=1e-12)
    assert result.value("f1") == pytest.approx(np.mean(f1), abs=1e-12)
    assert result.details["squad"]["exact"] == pytest.approx(100 * np.mean(em))  # the script's own dict, x100
    assert "has_answer_f1" not in result.metrics  # SQuAD 1.1 data: no split
    outcomes = {o.name: o for o in result.outcomes}
    assert outcomes["em"].kind == "binary" and outcomes["f1"].kind == "score"
    assert outcomes["f1"].values == pytest.approx(f1) and outcomes["em"].ids == [c[0] for c in CASES]
    for name, metric in result.metrics.items():  # each quality metric is the mean of the outcome it names
        if metric.kind == "quality":
            assert metric.outcome in outcomes, name
            assert np.mean(outcomes[metric.outcome].values) == pytest.approx(metric.value, abs=1e-12), name
    low, high = result.metrics["f1"].ci
    assert low < result.value("f1") < high
    # per question word: counts and scores over the questions of each word, as the cases name them
    for word in ("what", "who", "when", "where", "why", "how", "which", "other"):
        picked = [i for i, c in enumerate(CASES) if c[6] == word]
        assert result.value(f"questions_{word}") == len(picked)
        assert result.value(f"question_{word}_f1") == pytest.approx(np.mean([f1[i] for i in picked]), abs=1e-12)
        assert result.value(f"question_{word}_exact_match") == pytest.approx(np.mean([em[i] for i in picked]))
    table = result.details["figures"][0]
    assert table["kind"] == "table" and [row[:2] for row in table["data"]["rows"]] == [
        ["what", 2], ["who", 2], ["when", 1], ["where", 1], ["why", 1], ["how", 1], ["which", 1], ["other", 1]]
    assert result.details["key_finding"].startswith(f"EM {100 * np.mean(em):.1f}, F1 {100 * np.mean(f1):.1f} [")
    assert result.value("examples") == 10 and result.metrics["examples_per_s"].kind == "cost"
    assert result.value("windows") == 10 and result.value("windowed_questions") == 0


def test_one_question_half_right_is_not_surely_below_its_bound(target):
    """A question word asked once (which), answered with F1 0.4: its bootstrap is the point 0.4, which a default bound of 0.5
    failed on its interval; the Wilson interval of the sum stands in for any collapsed bootstrap."""
    from bertprobe.stats import wilson_interval

    cases = [c for c in CASES if c[6] != "which"] + [("w1", "Which game was it?", CTX_A, [("Super Bowl 50 was won by the Denver Broncos", 0)],
                      "Super Bowl 50 was", 0.5, "which")]
    result = audit(target, examples_of(cases), answers_of(cases))
    f1 = official(cases[-1][4], [g for g, _ in cases[-1][3]])[1]
    assert result.value("questions_which") == 1 and 0 < f1 < 1 and result.value("question_which_f1") == pytest.approx(f1)
    assert result.metrics["question_which_f1"].ci == pytest.approx(wilson_interval(f1, 1))
    assert result.metrics["question_which_f1"].ci[0] < f1 < result.metrics["question_which_f1"].ci[1]


def test_a_group_all_wrong_is_not_surely_below_its_bound_on_a_handful_of_questions(target):
    """A bootstrap of identical values (three wrong answers) collapses to a point; the Wilson interval of the sum
    stands in, as it does for every group under SMALL_GROUP questions (where a bootstrap is too narrow); from
    SMALL_GROUP questions up, the percentile bootstrap."""
    from bertprobe.stats import bootstrap_ci, wilson_interval
    from bertprobe.tasks.qa_clusters import SMALL_GROUP

    cases = CASES + [(f"w{k}", "When did it end?", CTX_A, [("24-10", 76)], "Santa Clara", 0.5, "when") for k in range(2)]
    result = audit(target, examples_of(cases), answers_of(cases))
    assert result.value("questions_when") == 3 and result.value("question_when_f1") == 0
    # one trial per context, not per question: the three "when" questions ask about 2 contexts
    contexts = {w: len({c[2] for c in cases if c[6] == w}) for w in ("when", "what")}
    assert contexts["when"] == 2
    # all wrong (0/1 values, no spread between contexts): design effect 1, but the 2 contexts' one degree of
    # freedom stays: Wilson's on 3 (t_2 / t_1)^2 trials, wider than Wilson's over the 2 contexts
    from scipy.stats import t as student_t

    size = 3 * (student_t.ppf(0.975, 2) / student_t.ppf(0.975, 1)) ** 2
    assert result.metrics["question_when_f1"].ci == pytest.approx(wilson_interval(0, size))
    assert result.metrics["question_when_exact_match"].ci == pytest.approx(wilson_interval(0, size))
    assert result.metrics["question_when_f1"].ci[1] > wilson_interval(0, 2)[1]
    assert result.metrics["question_when_f1"].ci[1] > 0.5  # so the default bound does not fail it
    which = [official(c[4], [g for g, _ in c[3]])[1] for c in cases if c[6] == "what"]
    k = contexts["what"]
    assert result.metrics["question_what_f1"].ci == pytest.approx(wilson_interval(sum(which) / len(which) * k, k))
    overall = [official(c[4], [g for g, _ in c[3]])[1] for c in cases]
    # 36 questions, each of its own context (the cases' with a different ending): the bootstrap from here up
    big = [(f"{c[0]}-{k}", c[1], f"{c[2]} ({c[0]}-{k})", *c[3:]) for k in range(3) for c in cases]
    assert len(big) >= SMALL_GROUP > len(cases)
    many = audit(target, examples_of(big), answers_of(big))
    assert many.metrics["f1"].ci == pytest.approx(bootstrap_ci([f for _ in range(3) for f in overall], 1000, 0.95, 7))
    from bertprobe.results.policy import judge

    catalogue = AccuracyProbe.catalogue()  # the probe's and what the reader's task adds, as the harness judges
    judge(result, [], (), catalogue.defaults, catalogue.key_metrics)
    judged = {e.metric: e for e in result.expectations}
    assert judged["question_when_f1"].passed and judged["question_when_f1"].source == "default"
    assert judged["question_who_f1"].passed  # one right, one wrong: the bootstrap spans [0, 1]
    assert {"f1", "question_what_f1"} <= set(judged) and "exact_match" not in judged  # EM: measured, not gated


def test_squad2_splits_answerable_and_unanswerable_questions(target):
    cases = CASES[:4] + [
        ("n1", "Who lost Super Bowl 51?", CTX_A, [], "", 0.3, "who"),              # abstained: right
        ("n2", "When was Tesla's son born?", CTX_B, [], "1856", 0.9, "when"),      # answered: wrong
        ("n3", "Where did Edison live?", CTX_B, [], "", 0.2, "where")]
    result = audit(target, examples_of(cases), answers_of(cases), bootstrap=100)
    scores = [official(p, [g for g, _ in golds]) for _, _, _, golds, p, _, _ in cases]
    has, no = scores[:4], scores[4:]
    assert result.value("has_answer_exact_match") == pytest.approx(np.mean([e for e, _ in has]))
    assert result.value("has_answer_f1") == pytest.approx(np.mean([f for _, f in has]))
    assert result.value("no_answer_exact_match") == pytest.approx(np.mean([e for e, _ in no])) == pytest.approx(2 / 3)
    assert result.value("no_answer_f1") == result.value("no_answer_exact_match")
    assert result.value("has_answer_questions") == 4 and result.value("no_answer_questions") == 3
    assert result.value("exact_match") == pytest.approx(np.mean([e for e, _ in scores]))
    confident = result.findings[0]
    assert confident.input == "When was Tesla's son born?" and confident.expected.startswith("(no answer)")
    marks = confident.extra["marks"]["context"]
    assert [m[2] for m in marks] == ["predicted"]  # no gold span to mark


def test_windows_are_counted_and_rebuilt_windows_named(target):
    import tokenizers

    answers = answers_of(CASES)
    answers[0] = Answer("the Denver Broncos,", 25, 44, 1.0, 0.9, 0.0, windows=3, rebuilt=True)
    answers[4] = Answer("1856", 25, 29, 1.0, 0.97, 0.0, windows=2)
    result = audit(target, examples_of(CASES), answers)
    assert result.value("windows") == 13 and result.value("windowed_questions") == 2
    assert result.details["key_finding"].endswith("; 2 long contexts answered over windows; windows rebuilt for 1 context")
    assert result.details["rebuilt_windows"].startswith(f"tokenizers {tokenizers.__version__} returned windows that left")


def test_findings_are_the_most_confident_wrong_answers_with_their_spans_marked(target):
    result = audit(target, examples_of(CASES), answers_of(CASES), findings=3)
    wrong = sorted((c for c in CASES if not official(c[4], [g for g, _ in c[3]])[0]), key=lambda c: -c[5])
    assert [f.input for f in result.findings] == [c[1] for c in wrong[:3]]  # a2 0.88, a10 0.85, a4 0.75
    for f, case in zip(result.findings, wrong):
        context = f.extra["columns"]["context"]
        marks = f.extra["marks"]["context"]
        golds = {context[a:b] for a, b, label in marks if label == "gold"}
        predicted = [context[a:b] for a, b, label in marks if label == "predicted"]
        assert golds <= {g for g, _ in case[3]} and golds and predicted == [case[4]]
        assert f.observed == case[4] and f.score == case[5]
    # a2's gold "Carolina Panthers" and prediction "Denver Broncos" in CTX_A
    f = result.findings[0]
    assert f.extra["marks"]["context"] == [[58, 75, "gold"], [29, 43, "predicted"]]
    assert bracketed_marks(f.extra["columns"]["context"], [tuple(m) for m in f.extra["marks"]["context"]],
                           ["gold", "predicted"]).startswith("Super Bowl 50 was won by the {Denver Broncos}, who beat "
                                                             "the [Carolina Panthers] 24-10")


def test_a_long_context_is_shown_as_excerpts_around_its_spans():
    filler = " ".join(f"w{k}" for k in range(400))
    text = filler + " the gold answer here " + filler + " and the predicted one " + filler
    gold, pred = text.index("gold answer"), text.index("predicted one")
    shown, marks = excerpt(text, [(gold, gold + 11, "gold"), (pred, pred + 13, "predicted")], pad=20)
    assert shown.startswith("…") and shown.endswith("…") and " … " in shown and len(shown) < 160
    assert [shown[a:b] for a, b, _ in marks] == ["gold answer", "predicted one"]
    assert all(not part.startswith("w") or part.split()[0] in filler.split() for part in shown.strip("…").split(" … "))
    whole, same = excerpt("a short context", [(2, 7, "gold")])
    assert whole == "a short context" and same == [(2, 7, "gold")]


def test_overlapping_marks_render_as_nested_brackets_and_html_pieces():
    text = "won by the Denver Broncos team"
    marks = [(11, 25, "gold"), (18, 30, "predicted")]
    assert bracketed_marks(text, marks, ["gold", "predicted"]) == "won by the [Denver {Broncos] team}"
    assert mark_segments(text, marks) == [("won by the ", []), ("Denver ", ["gold"]), ("Broncos", ["gold", "predicted"]),
                                          (" team", ["predicted"])]
    assert bracketed_marks("same", [(0, 4, "gold"), (0, 4, "predicted")], ["gold", "predicted"]) == "[{same}]"


# ---- through the CLI ------------------------------------------------------------------------------------


def squad_json(path: Path, n_paragraphs: int = 5, per: int = 5, seed: int = 0) -> Path:
    """A small SQuAD v1.1 file over the tiny reader's words: answers of one or two words, every question word."""
    rng = random.Random(seed)
    pool = [w for w in WORDS if w not in "?.," and w not in ("who", "what", "where", "when", "which", "why", "how")]
    starts = ["who", "what", "where", "when", "which", "why", "how many", "name"]
    paragraphs, k = [], 0
    for _ in range(n_paragraphs):
        words = [rng.choice(pool) for _ in range(rng.randint(12, 30))]
        context = " ".join(words) + " ."
        qas = []
        for _ in range(per):
            i, n = rng.randrange(len(words) - 1), rng.choice([1, 1, 2])
            text, start = " ".join(words[i : i + n]), len(" ".join(words[:i])) + (1 if i else 0)
            qas.append({"id": f"q{k}", "question": f"{starts[k % len(starts)]} is the {rng.choice(pool)} ?",
                        "answers": [{"text": text, "answer_start": start}]})
            k += 1
        paragraphs.append({"context": context, "qas": qas})
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "T", "paragraphs": paragraphs}]}), encoding="utf-8")
    return path


def plain_scores(model_dir: Path, data: Path, dtype=None) -> tuple[list[str], list[float], list[float]]:
    """Each question's id, EM and F1 from the plain module's answers and the official formulas written above."""
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    model = AutoModelForQuestionAnswering.from_pretrained(model_dir, dtype=dtype or torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    qas = [(qa, p["context"]) for a in json.loads(data.read_text())["data"] for p in a["paragraphs"] for qa in p["qas"]]
    got = answer(model, [qa["question"].strip() for qa, _ in qas], [c for _, c in qas], tokenizer)
    scores = [official(a.text, [g["text"] for g in qa["answers"]]) for a, (qa, _) in zip(got, qas)]
    return [qa["id"] for qa, _ in qas], [e for e, _ in scores], [f for _, f in scores]


def write_suite(tmp_path: Path, body: str, name: str = "qa") -> Path:
    suite = tmp_path / f"{name}.yaml"
    suite.write_text(f"suite: {name}\n{body}report: {{dir: '{tmp_path / 'out'}', formats: [json, markdown, html, junit]}}\n"
                     "probes:\n  - probe: accuracy\n    params: {bootstrap: 200}\n", encoding="utf-8")
    return suite


def test_a_run_on_a_reader_reports_em_f1_per_question_word_and_marked_answers(tmp_path, reader):
    data = squad_json(tmp_path / "dev.json")
    suite = write_suite(tmp_path, f"model: {{path: '{reader}', device: cpu}}\ndata: {{path: '{data}'}}\n")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code in (0, 1), result.output
    run_dir, report = only_run(tmp_path / "out", "qa")
    _, em, f1 = plain_scores(reader, data)
    [probe] = report["probes"]
    assert probe["metrics"]["exact_match"] == pytest.approx(np.mean(em), abs=1e-9)
    assert probe["metrics"]["f1"] == pytest.approx(np.mean(f1), abs=1e-9)
    assert probe["metric_info"]["f1"]["outcome"] == "f1" and probe["metric_info"]["f1"]["ci"] is not None
    assert probe["metrics"]["examples"] == 25 and probe["findings"][0]["extra"]["marks"]["context"]
    assert f"EM {100 * np.mean(em):.1f}, F1 {100 * np.mean(f1):.1f}" in result.output  # the terminal's note
    md = (run_dir / "report.md").read_text()
    assert "question-answering: max_length 384; stride 128; n_best 20; max_answer_tokens 30" in md  # the task row
    # 25 questions over 5 paragraphs: the intervals resample contexts, and the table's title says so
    assert "**exact match and F1 per question word (shares)**" in md and "F1 interval method" in md
    assert "| question word   |   questions |" in md and "### Findings" in md
    assert "**exact match and F1 per question word (bootstrap" not in md  # the bars repeat the table: drawn in html only
    assert html_figures(run_dir) == 1
    assert "*marked: [gold] {predicted}*" in md
    finding = probe["findings"][0]
    context, marks = finding["extra"]["columns"]["context"], finding["extra"]["marks"]["context"]
    assert bracketed_marks(context, [tuple(m) for m in marks], ["gold", "predicted"]) in md
    html = (run_dir / "report.html").read_text()
    assert "<mark class='m0' title='gold'>" in html and "<mark class='m1' title='predicted'>" in html
    assert re.search(r"<th>question word *</th>", html) and "<td>why " in html
    suites = ET.parse(run_dir / "report.junit.xml").getroot()
    assert [c.get("name") for c in suites.iter("testcase")][0].startswith("accuracy")


def html_figures(run_dir: Path) -> int:
    return (run_dir / "report.html").read_text().count("<figure>")


def test_validate_accepts_gates_on_question_words_for_a_reader(tmp_path, reader):
    data = squad_json(tmp_path / "dev.json")
    suite = tmp_path / "v.yaml"
    suite.write_text(f"suite: v\nmodel: {{path: '{reader}', device: cpu}}\ndata: {{path: '{data}'}}\n"
                     "probes:\n  - probe: accuracy\n    expect: {question_what_f1: {min: 0.2}, f1: {min: 0.3}, "
                     "exact_match: {min: 0.1}}\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", str(suite)])
    assert result.exit_code == 0, result.output


def test_a_matrix_pairs_em_and_f1_question_by_question(tmp_path, reader):
    from bertprobe.testing import save_tiny_model

    other = save_tiny_model(tmp_path / "other", task="question-answering", words=WORDS, seed=11)
    data = squad_json(tmp_path / "dev.json", n_paragraphs=6, seed=1)
    models = (f"models:\n  - {{name: base, path: '{reader}', device: cpu}}\n"
              f"  - {{name: cand, path: '{other}', device: cpu}}\n"
              f"  - {{name: bf16, path: '{reader}', device: cpu, dtype: bfloat16}}\n")
    suite = write_suite(tmp_path, f"{models}data: {{path: '{data}'}}\nseed: 5\n"
                                  "compare: {baseline: base, tolerance: {default: 0.01}, significance: 0.05}\n", "mx")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code in (0, 1, 4), result.output
    run_dir, report = only_run(tmp_path / "out", "mx")
    ids, em_a, f1_a = plain_scores(reader, data)
    _, em_b, f1_b = plain_scores(other, data)
    paired = {(d["model"], d["metric"]): d for d in report["paired"]}
    # the pairs resample by paragraph: the 5 questions of a context are one cluster
    paragraph = {qa["id"]: k for a in json.loads(data.read_text())["data"] for k, p in enumerate(a["paragraphs"])
                 for qa in p["qas"]}
    groups = [paragraph[i] for i in ids]
    for metric, a, b in (("exact_match", em_a, em_b), ("f1", f1_a, f1_b)):
        d = paired[("cand", metric)]
        assert d["paired"] == len(ids) == 30
        assert d["delta"] == pytest.approx(np.mean(b) - np.mean(a), abs=1e-9)  # a mean over questions: exact
        assert d["ci"] == pytest.approx(list(paired_bootstrap_diff(a, b, 1000, 0.95, 5, groups)), abs=1e-9)
        if metric == "f1":  # not the draws of a bootstrap over questions
            assert d["ci"] != pytest.approx(list(paired_bootstrap_diff(a, b, 1000, 0.95, 5)), abs=1e-9)
    assert np.mean(f1_b) != np.mean(f1_a)  # two different readers: a real difference was paired
    assert "McNemar" in paired[("cand", "exact_match")]["test"]
    assert paired[("cand", "f1")]["test"] == "paired cluster bootstrap, 30 paired in 6 clusters"
    assert ("bf16", "f1") in paired and paired[("bf16", "f1")]["paired"] == 30
    md = (run_dir / "report.md").read_text()
    assert "## Paired differences against base" in md
    assert re.search(r"\| cand +\| accuracy +\| f1 +\|", md)
    decisions = [line for line in md.splitlines() if line.startswith("> **Decision: ")]
    assert [line.split(":")[1].strip() for line in decisions] == ["base", "cand", "bf16"]
    assert "baseline (in service)" in decisions[0]


# ---- the fixture ----------------------------------------------------------------------------------------

FIXTURE = SHARED / "models" / "minilm-l6-squad"
SPLIT = SHARED / "data" / "squad" / "test-split.json"


@pytest.mark.skipif(not (FIXTURE.exists() and SPLIT.exists()), reason="../shared fixtures absent")
def test_on_the_fixture_em_and_f1_equal_a_plain_decoding_loop(tmp_path):
    """50 held-out questions through `bertprobe run`: EM and F1 equal the official formulas over the answers of
    test_qa's plain decoding loop (the model's raw logits, window by window), question by question."""
    from test_qa import fixture_model, plain_answers

    from bertprobe.data.tables import load_table

    examples = load_table(DataSpec(path=str(SPLIT))).examples[:50]
    subset = tmp_path / "fifty.jsonl"
    subset.write_text("".join(json.dumps({"id": ex.id, "question": ex.text, "context": ex.text_pair, "answers": {
        "text": [t for t, _ in ex.label], "answer_start": [s for _, s in ex.label]}}) + "\n" for ex in examples),
        encoding="utf-8")
    suite = write_suite(tmp_path, f"model: {{path: '{FIXTURE}', device: cpu, dtype: float32}}\ndata: {{path: '{subset}'}}\n")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code in (0, 1), result.output
    run_dir, report = only_run(tmp_path / "out", "qa")
    model, tokenizer = fixture_model()
    plain = plain_answers(model, tokenizer, examples)
    scores = [official(p, [t for t, _ in ex.label]) for p, ex in zip(plain, examples)]
    [probe] = report["probes"]
    assert probe["metrics"]["examples"] == 50
    assert probe["metrics"]["exact_match"] == pytest.approx(np.mean([e for e, _ in scores]), abs=1e-9)
    assert probe["metrics"]["f1"] == pytest.approx(np.mean([f for _, f in scores]), abs=1e-9)
    outcomes = [json.loads(line) for line in (run_dir / "outcomes.jsonl").read_text().splitlines()]
    f1 = next(o for o in outcomes if o["name"] == "f1")
    assert f1["ids"] == [ex.id for ex in examples]
    assert f1["values"] == pytest.approx([f for _, f in scores], abs=1e-12)  # question by question


# ---- intervals over contexts: the questions of a paragraph resampled together ----------------------------------


def paragraphs(contexts: int, per_context: int, seed: int = 3, partial: bool = False) -> list[tuple]:
    """``contexts`` paragraphs of ``per_context`` questions each, every question of a paragraph answered alike
    (all right or all wrong, at random): the clustering of SQuAD's outcomes at its extreme. ``partial``: a wrong
    answer holds the gold one and a word more (F1 2/3, exact match 0), so F1 is graded."""
    rng = np.random.default_rng(seed)
    out = []
    for c in range(contexts):
        right = bool(rng.integers(0, 2))
        context = f"Paragraph {c} says the answer is red{c} and nothing else."
        gold = f"red{c}"
        for q in range(per_context):
            out.append((f"p{c}q{q}", f"What does paragraph {c} say ({q})?", context, [(gold, context.index(gold))],
                        gold if right else (f"{gold} and" if partial else "nothing"), 0.5, "what"))
    return out


def test_f1_intervals_resample_contexts_where_questions_share_them(target):
    """60 paragraphs of 5 questions that share their outcome, wrong answers half right (graded F1): F1's interval is
    the bootstrap over paragraphs written here (the same seed, the paragraphs' means), about sqrt(5) times as wide
    as the i.i.d. one over questions, and close to the normal interval of a mean of 60 independent paragraph
    means; exact match (0/1) takes Wilson's on its effective sample size over the paragraphs, about as much wider
    than Wilson's over the questions; the descriptions say so."""
    from statistics import NormalDist

    from bertprobe.stats import bootstrap_ci, clustered_wilson, wilson_interval

    cases = paragraphs(60, 5, partial=True)
    result = audit(target, examples_of(cases), answers_of(cases), bootstrap=2000)
    scored = [official(c[4], [g for g, _ in c[3]]) for c in cases]
    em, f1 = [s[0] for s in scored], [s[1] for s in scored]
    assert sorted({round(x, 6) for x in f1}) == [round(2 / 3, 6), 1.0]
    per_paragraph = np.array(f1).reshape(60, 5).mean(axis=1)
    rng = np.random.default_rng(7)  # the run's seed (audit's ProbeContext)
    means = per_paragraph[rng.integers(0, 60, size=(2000, 60))].mean(axis=1)
    expected = (np.quantile(means, 0.025), np.quantile(means, 0.975))
    for name in ("f1", "question_what_f1"):
        assert result.metrics[name].ci == pytest.approx(expected, abs=1e-12), name
    low, high = result.metrics["f1"].ci
    iid = bootstrap_ci(f1, 2000, 0.95, 7)
    assert 1.8 < (high - low) / (iid[1] - iid[0]) < 2.8  # sqrt(5) = 2.24: 5 questions carry one paragraph's evidence
    normal = 2 * NormalDist().inv_cdf(0.975) * per_paragraph.std(ddof=1) / np.sqrt(60)
    assert (high - low) == pytest.approx(normal, rel=0.15)
    assert "cluster bootstrap interval over contexts" in result.metrics["f1"].description
    groups = [c[2] for c in cases]
    low, high = result.metrics["exact_match"].ci
    assert (low, high) == pytest.approx(clustered_wilson(em, groups), abs=1e-12)
    flat = wilson_interval(round(sum(em)), len(em))
    assert 1.8 < (high - low) / (flat[1] - flat[0]) < 2.8
    assert "Wilson interval over contexts: on the effective number" in result.metrics["exact_match"].description
    distinct = [(c[0], c[1], f"{c[2]} ({c[0]})", *c[3:]) for c in cases]  # each question its own context
    alone = audit(target, examples_of(distinct), answers_of(distinct), bootstrap=2000)
    assert alone.metrics["f1"].ci == pytest.approx(iid, abs=1e-12)  # the i.i.d. bootstrap, draw for draw
    assert "bootstrap interval over questions" in alone.metrics["f1"].description


def test_a_handful_of_contexts_gets_wilsons_interval_with_one_trial_per_context(target):
    """40 questions over 8 paragraphs: more than SMALL_GROUP questions, fewer contexts; a bootstrap of graded F1
    over 8 paragraphs is too narrow, so the Wilson interval with 8 trials (the paragraphs' mean F1) stands in; exact
    match takes Wilson's on its effective sample size, at least as wide as Wilson's over the 8 paragraphs here
    (their questions agree, and 7 degrees of freedom widen it)."""
    from bertprobe.stats import clustered_wilson, wilson_interval

    cases = paragraphs(8, 5, seed=1, partial=True)
    result = audit(target, examples_of(cases), answers_of(cases), bootstrap=500)
    scored = [official(c[4], [g for g, _ in c[3]]) for c in cases]
    em, f1 = [s[0] for s in scored], [s[1] for s in scored]
    assert result.metrics["f1"].ci == pytest.approx(wilson_interval(sum(f1) / 5, 8))
    assert "Wilson interval over contexts: one trial per context" in result.metrics["f1"].description
    low, high = result.metrics["exact_match"].ci
    assert (low, high) == pytest.approx(clustered_wilson(em, [c[2] for c in cases]), abs=1e-12)
    paragraph = wilson_interval(round(sum(em) / 5), 8)
    assert 0 < sum(em) < 40 and low <= paragraph[0] and high >= paragraph[1]
