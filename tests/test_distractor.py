"""The distractor probe (Jia & Liang 2017, AddOneSent-style): the rules over each question form, the checks
on every sentence (no gold answer in it; gold spans still pointing at their text), the probe's numbers against
an independent computation on a tiny reader, a CLI run, and the fixture reader's F1 drop."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import only_run
from test_qa_accuracy import target  # noqa: F401 (a fixture; reader: conftest)

from bertprobe.cli import main
from bertprobe.data.dataset import Dataset, Example
from bertprobe.probe import ProbeContext
from bertprobe.probes.distractor.probe import DistractorParams, DistractorProbe
from bertprobe.probes.distractor.rules import Distractor, build, insert, moved_golds, package_lexicon, shift
from bertprobe.stats import paired_bootstrap_diff
from bertprobe.tasks.spans import Answer
from bertprobe.tasks.squad_metrics import normalize_answer, score

SHARED = Path(__file__).resolve().parents[2] / "shared"
LEX = package_lexicon()
NAME = r"[A-Z][\w.&'-]*(?: [A-Z][\w.&'-]*)*"

# (question, gold, the sentence's shape: a regex; the fake answer is group "fake")
FORMS = [
    ("Who won Super Bowl 50?", "Denver Broncos", rf"^(?P<fake>{NAME}) won {NAME} \d+\.$"),
    ("Who was the first president of the United States?", "George Washington",
     rf"^The last president of the {NAME} was (?P<fake>{NAME})\.$"),
    ("When was the treaty signed by France?", "1921", rf"^The treaty was signed by {NAME} in (?P<fake>\d{{4}})\.$"),
    ("When did Tesla move to New York?", "1884", rf"^{NAME} did move to {NAME} in (?P<fake>\d{{4}})\.$"),
    ("Where was Tesla born in 1856?", "Smiljan", rf"^{NAME} was born in \d{{4}} in (?P<fake>{NAME})\.$"),
    ("What is the capital of France?", "Paris", rf"^The capital of {NAME} is (?P<fake>{NAME})\.$"),
    ("In what year was the University of Chicago founded?", "1890",
     rf"^The {NAME}(?: of {NAME})? was founded in (?P<fake>\d{{4}})\.$"),
    ("Which team won Super Bowl 50?", "Denver Broncos", rf"^(?P<fake>{NAME}) won {NAME} \d+\.$"),
    ("How many people lived in Paris in 2010?", "2 million",
     rf"^(?P<fake>\d+ million) people lived in {NAME} in \d{{4}}\.$"),
    ("How many teams did the NFL have in 1990?", "28", rf"^The {NAME} did have in \d{{4}} (?P<fake>\d+) teams\.$"),
    ("How much did the Louvre pay in 1911?", "$40", rf"^The {NAME} did pay in \d{{4}} (?P<fake>\$\d+)\.$"),
]


@pytest.mark.parametrize("question,gold,shape", FORMS)
def test_each_question_form_becomes_a_declarative_sentence_with_a_fake_answer(question, gold, shape):
    for seed in range(5):
        got = build(question, [gold], LEX, random.Random(seed))
        assert isinstance(got, Distractor), (question, got)
        m = re.match(shape, got.sentence)
        assert m, (question, got.sentence)
        assert m.group("fake") == got.fake and score(got.fake, [gold])[0] == 0.0
        if not re.search(r"\d", gold):  # another answer: no shared token (a number: no shared number)
            assert score(got.fake, [gold])[1] == 0.0
        else:
            assert not set(re.findall(r"\d+", gold)) & set(re.findall(r"\d+", got.fake))
        assert got.changed  # something of the question's was changed
        for word in got.changed:  # ... and no longer stands in the sentence
            assert not re.search(rf"\b{re.escape(word)}\b", got.sentence), (word, got.sentence)


@pytest.mark.parametrize("question,gold,reason", [
    ("Why did Tesla leave Edison?", "money", "question word: why"),
    ("How did Tesla die in 1943?", "heart failure", "question word: how"),
    ("Is Paris in France?", "yes", "question word: other"),
    ("What did Tesla invent in 1887?", "induction motor", "no fake answer of the gold's type"),
    ("What was the name of the river?", "Thames", "nothing to change (no name, place, number, date or antonym)"),
    ("What is the capital of France?", "capital", "no fake answer of the gold's type"),
    ("What is the capital of France?", "Capital", "the distractor would hold the gold answer"),
])
def test_questions_the_rules_cannot_convert_are_counted_with_their_reason(question, gold, reason):
    assert build(question, [gold], LEX, random.Random(0)) == reason


QUESTIONS = [(q, g) for q, g, _ in FORMS] + [
    ("Who founded Microsoft in 1975?", "Bill Gates"), ("When did World War II end?", "1945"),
    ("Where is the Eiffel Tower?", "Paris"), ("What year did the first Super Bowl take place?", "1967"),
    ("Who was the 44th president?", "Barack Obama"), ("How many people live in Lagos?", "21 million"),
    ("When was Smith born?", "March 3, 1990"), ("Which country won the 2018 World Cup?", "France"),
]


@pytest.mark.parametrize("position", ["end", "start"])
def test_the_sentence_never_holds_the_gold_answer_and_the_gold_span_still_points_at_its_text(position):
    covered = 0
    for k, (question, gold) in enumerate(QUESTIONS):
        context = f"Some text comes first. {question[:-1]} The answer is {gold}, as all agree."
        label = ((gold, context.index(gold)),)
        for seed in range(10):
            got = build(question, [gold], LEX, random.Random(seed * 100 + k))
            if not isinstance(got, Distractor):
                continue
            covered += 1
            assert f" {normalize_answer(gold)} " not in f" {normalize_answer(got.sentence)} ", got.sentence
            new, start, end = insert(context, got.sentence, position)
            assert new[start:end] == got.sentence
            for text, at in moved_golds(label, shift(position, got.sentence)):
                assert new[at : at + len(text)] == text
            assert (start == 0) == (position == "start") and new.count(got.sentence) >= 1
    assert covered >= 10 * (len(QUESTIONS) - 1)


# ---- the probe on a tiny reader ----------------------------------------------------------------------------

ROWS = [
    ("q1", "Who won Super Bowl 50?", "The Denver Broncos won Super Bowl 50 in 2016 .", "Denver Broncos"),
    ("q2", "When was the treaty signed by France?", "The treaty was signed by France in 1921 after the war .", "1921"),
    ("q3", "Where was Tesla born in 1856?", "Tesla was born in 1856 in Smiljan , a village .", "Smiljan"),
    ("q4", "How many teams did the NFL have in 1990?", "In 1990 the NFL had 28 teams in all .", "28"),
    ("q5", "Why did the dog run?", "The dog ran because the cat was in the house .", "the cat was in the house"),
    ("q6", "What is the capital of France?", "Paris is the capital of France and its largest city .", "Paris"),
]


def rows_examples() -> list[Example]:
    return [Example(q, c, ((g, c.index(g)),), id=i) for i, q, c, g in ROWS]


def test_the_probe_scores_original_and_adversarial_answers_as_an_independent_computation(target):  # noqa: F811
    examples = rows_examples()
    params = DistractorParams(bootstrap=200, findings=3, position="start")
    result = DistractorProbe().run(target, Dataset(examples, "rows"), params, ProbeContext(seed=5))
    task = target.task
    original = task.answers(target, examples)
    made = [(ex, build(ex.text, [ex.label[0][0]], LEX, random.Random(f"5:{ex.id}"))) for ex in examples]
    made = [(ex, d) for ex, d in made if isinstance(d, Distractor)]
    assert [ex.id for ex, _ in made] == ["q1", "q2", "q3", "q4", "q6"]  # q5 (why) is counted, not guessed
    changed = [Example(ex.text, f"{d.sentence} {ex.text_pair}", ((ex.label[0][0], ex.label[0][1] + len(d.sentence) + 1),),
                       id=ex.id) for ex, d in made]
    after = task.answers(target, changed)
    f1_before = [score(original[int(ex.id[1:]) - 1].text, [ex.label[0][0]])[1] for ex, _ in made]
    f1_after = [score(a.text, [ex.label[0][0]])[1] for a, (ex, _) in zip(after, made)]
    moved = [float(bool(a.text) and a.start < len(d.sentence)) for a, (_, d) in zip(after, made)]
    m = result.metrics
    assert m["original_f1"].value == pytest.approx(np.mean(f1_before))
    assert m["adversarial_f1"].value == pytest.approx(np.mean(f1_after))
    assert m["f1_drop"].value == pytest.approx(np.mean(f1_before) - np.mean(f1_after))
    assert m["f1_drop"].ci == pytest.approx(paired_bootstrap_diff(f1_after, f1_before, 200, 0.95, 5))
    assert m["moved_to_distractor"].value == pytest.approx(np.mean(moved))
    assert m["coverage"].value == pytest.approx(5 / 6) and m["uncovered"].value == 1
    assert result.details["uncovered"] == {"question word: why": 1}
    assert m["questions_who"].value == 1 and "question_when_f1_drop" in m
    assert "control_f1" not in m  # control: false by default
    for f in result.findings:
        context = f.extra["columns"]["context"]
        marked = {label: context[s:e] for s, e, label in f.extra["marks"]["context"]}
        assert marked["distractor"] == f.extra["distractor"] and marked["gold"] == f.expected


def squad_file(path: Path) -> Path:
    paragraphs = [{"context": c, "qas": [{"id": i, "question": q, "answers": [{"text": g, "answer_start": c.index(g)}]}]}
                  for i, q, c, g in ROWS]
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "T", "paragraphs": paragraphs}]}), "utf-8")
    return path


def test_a_cli_run_reports_the_drop_coverage_and_marked_findings(tmp_path, reader):  # noqa: F811
    data = squad_file(tmp_path / "dev.json")
    suite = tmp_path / "d.yaml"
    suite.write_text(f"suite: d\nmodel: {{path: '{reader}', device: cpu}}\ndata: {{path: '{data}'}}\n"
                     f"report: {{dir: '{tmp_path / 'out'}', formats: [json, markdown]}}\n"
                     "probes:\n  - probe: distractor\n    params: {bootstrap: 100}\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code in (0, 1), result.output
    run_dir, report = only_run(tmp_path / "out", "d")
    [probe] = report["probes"]
    assert probe["metrics"]["covered"] == 5 and probe["metrics"]["coverage"] == pytest.approx(5 / 6)
    assert {e["metric"] for e in probe["expectations"]} == {"f1_drop"}  # the default gate
    assert "rules cover 83% of 6 answerable questions" in result.output
    md = (run_dir / "report.md").read_text()
    assert "F1 without and with the distractor, per question word" in md


@pytest.mark.skipif(not (SHARED / "models" / "minilm-l6-squad").is_dir(), reason="needs ../shared (the fixture reader)")
def test_on_the_fixture_the_distractor_lowers_f1_significantly():
    from bertprobe.data.squad import read_squad_json
    from bertprobe.model.loading import load_target
    from bertprobe.model.spec import ModelSpec

    path = SHARED / "data" / "squad" / "test-split.json"
    examples = read_squad_json(path, json.loads(path.read_text("utf-8"))).examples[::18][:100]  # spread over articles
    assert len(examples) == 100
    target_ = load_target(ModelSpec(path=str(SHARED / "models" / "minilm-l6-squad"), device="cpu"))
    result = DistractorProbe().run(target_, Dataset(examples, "fixture"), DistractorParams(bootstrap=1000, control=True),
                                   ProbeContext(seed=0))
    drop = result.metrics["f1_drop"]
    print("fixture:", result.details["key_finding"], drop.ci, result.details["uncovered"],
          result.metrics["control_f1_drop"].ci, result.metrics["mimicry_f1_drop"].ci)
    assert drop.ci[0] > 0  # significantly lower F1 with the distractor (paired bootstrap interval)
    assert result.metrics["covered"].value >= len(examples) / 3  # a third of them or more (50 of 150 before)


def test_the_control_inserts_another_questions_sentence_and_splits_the_drop(target):  # noqa: F811
    examples = rows_examples()
    params = DistractorParams(bootstrap=100, control=True)
    result = DistractorProbe().run(target, Dataset(examples, "rows"), params, ProbeContext(seed=5))
    made = [(ex, build(ex.text, [ex.label[0][0]], LEX, random.Random(f"5:{ex.id}"))) for ex in examples]
    made = [(ex, d) for ex, d in made if isinstance(d, Distractor)]
    n = len(made)
    control = [Example(ex.text, f"{ex.text_pair} {made[(k + n // 2) % n][1].sentence}", ex.label, id=ex.id)
               for k, (ex, _) in enumerate(made)]  # half the list away (no sentence here holds another's gold)
    f1_control = [score(a.text, [ex.label[0][0]])[1] for a, ex in zip(target.task.answers(target, control), control)]
    m = result.metrics
    assert m["control_f1"].value == pytest.approx(np.mean(f1_control))
    assert m["control_f1_drop"].value == pytest.approx(m["original_f1"].value - np.mean(f1_control))
    assert m["mimicry_f1_drop"].value == pytest.approx(np.mean(f1_control) - m["adversarial_f1"].value)
    assert m["control_f1_drop"].value + m["mimicry_f1_drop"].value == pytest.approx(m["f1_drop"].value)


# ---- intervals over contexts -------------------------------------------------------------------------------

TEAMS = ["Denver Broncos", "Carolina Panthers", "Green Bay Packers", "New England Patriots"]
COUNTRIES = ["France", "Spain", "Italy", "Germany"]


def shared_contexts(n: int) -> list[Example]:
    """``n`` contexts of two questions the rules convert (who won, when was it signed), and in every fourth a why
    question they do not: several questions per context, as in SQuAD."""
    out = []
    for k in range(n):
        team, country, year = TEAMS[k % 4], COUNTRIES[(k // 4) % 4], 1900 + k
        context = (f"The {team} won Super Bowl {k + 10} in {2000 + k} . The treaty was signed by {country} in {year} "
                   "after the war .")
        qas = [(f"Who won Super Bowl {k + 10}?", team), (f"When was the treaty signed by {country}?", str(year))]
        if k % 4 == 0:
            qas.append(("Why was the treaty signed?", "after the war"))
        out += [Example(q, context, ((g, context.index(g)),), id=f"c{k}q{j}") for j, (q, g) in enumerate(qas)]
    return out


def cluster_bootstrap(values: list[float], groups: list[str], resamples: int, seed: int) -> tuple[float, float]:
    """A percentile cluster bootstrap written out: contexts drawn with replacement (as many as there are, in the
    order they first appear), each bringing all its questions."""
    order = list(dict.fromkeys(groups))
    sums = np.array([sum(v for v, g in zip(values, groups) if g == c) for c in order])
    sizes = np.array([sum(g == c for g in groups) for c in order], dtype=float)
    idx = np.random.default_rng(seed).integers(0, len(order), size=(resamples, len(order)))
    means = sums[idx].sum(axis=1) / sizes[idx].sum(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


class Scripted:
    """A reader whose answers are fixed per context, so a context's questions succeed or fail together (perfectly
    correlated): on the plain context right where k % 3 != 0 (else 'war', a wrong word); with a sentence inserted
    before it, fooled into that sentence's first word where k is even, else as on the plain context."""

    def __init__(self, task, examples: list[Example]) -> None:
        self.task, self.plain = task, {ex.id: ex.text_pair for ex in examples}

    def answers(self, reader, examples, batch_size=None, progress=None) -> list[Answer]:
        out = []
        for ex in examples:
            k, context = int(ex.id[1:].split("q")[0]), ex.text_pair
            if context != self.plain[ex.id] and k % 2 == 0:
                text, start = context.split()[0], 0
            elif k % 3 != 0:
                text, start = ex.label[0]
            else:
                text, start = "war", context.rindex("war")
            out.append(Answer(text, start, start + len(text), 1.0, 0.5, 0.0, 1))
        return out

    def outcomes(self, answers, examples):
        return self.task.outcomes(answers, examples)


def test_intervals_resample_contexts_where_questions_share_one(target):  # noqa: F811
    """36 contexts of two or three questions, answered alike within a context: each mean's interval is
    stats.mean_interval over the contexts, the paired drop's a cluster bootstrap written out here, the moved
    share's and coverage's Wilson's on the effective sample size (stats.clustered_wilson), wider than over
    questions; a question word asked once per context keeps the bootstrap over questions, and the per-word table
    names each row's method; the descriptions name what was computed; outcomes carry the context keys."""
    import hashlib
    from types import SimpleNamespace

    from bertprobe.model.predictions import Predictions
    from bertprobe.stats import clustered_wilson, mean_interval, wilson_interval

    examples = shared_contexts(36)
    reader_ = SimpleNamespace(task=Scripted(target.task, examples))
    ctx = ProbeContext(seed=5, predictions=lambda t, d, b=None, *a, **k: Predictions(
        None, 0.5, answers=reader_.task.answers(t, d.examples)))
    result = DistractorProbe().run(reader_, Dataset(examples, "shared"), DistractorParams(bootstrap=200, position="start"),
                                   ctx)
    made = [(ex, build(ex.text, [ex.label[0][0]], LEX, random.Random(f"5:{ex.id}"))) for ex in examples]
    made = [(ex, d) for ex, d in made if isinstance(d, Distractor)]
    assert len(made) == 72 and all(not ex.text.startswith("Why") for ex, _ in made)
    ks = [int(ex.id[1:].split("q")[0]) for ex, _ in made]
    f1_before = [float(k % 3 != 0) for k in ks]
    f1_after = [0.0 if k % 2 == 0 else float(k % 3 != 0) for k in ks]
    moved = [float(k % 2 == 0) for k in ks]
    groups = [ex.text_pair for ex, _ in made]
    m = result.metrics
    assert m["original_f1"].value == pytest.approx(np.mean(f1_before))
    assert m["adversarial_f1"].value == pytest.approx(np.mean(f1_after))
    assert m["moved_to_distractor"].value == pytest.approx(np.mean(moved))
    assert m["original_f1"].ci == pytest.approx(mean_interval(f1_before, 200, 0.95, 5, groups), abs=1e-12)
    assert m["adversarial_f1"].ci == pytest.approx(mean_interval(f1_after, 200, 0.95, 5, groups), abs=1e-12)
    diff = [b - a for b, a in zip(f1_before, f1_after)]
    drop = m["f1_drop"].ci
    assert drop == pytest.approx(cluster_bootstrap(diff, groups, 200, 5), abs=1e-12)
    per_question = paired_bootstrap_diff(f1_after, f1_before, 200, 0.95, 5)
    assert drop[1] - drop[0] > 1.2 * (per_question[1] - per_question[0])  # each context counted once, not twice
    assert m["moved_to_distractor"].ci == pytest.approx(clustered_wilson(moved, groups), abs=1e-12)
    assert "Wilson interval over contexts: on the effective number" in m["moved_to_distractor"].description
    flat = wilson_interval(sum(moved), len(moved))
    assert m["moved_to_distractor"].ci[1] - m["moved_to_distractor"].ci[0] > 1.2 * (flat[1] - flat[0])
    every = [ex.text_pair for ex in examples]  # coverage: 72 of 81 answerable questions, over 36 contexts
    hits = [float(not ex.text.startswith("Why")) for ex in examples]
    assert m["coverage"].value == pytest.approx(72 / 81)
    assert m["coverage"].ci == pytest.approx(clustered_wilson(hits, every), abs=1e-12)
    assert "cluster bootstrap" not in m["coverage"].description
    # one 'who' question per context: the paired bootstrap over questions, Wilson's over them for the share
    who = [i for i, (ex, _) in enumerate(made) if ex.text.startswith("Who")]
    assert m["question_who_f1_drop"].ci == pytest.approx(
        paired_bootstrap_diff([f1_after[i] for i in who], [f1_before[i] for i in who], 200, 0.95, 5), abs=1e-12)
    assert m["question_who_moved_to_distractor"].ci == wilson_interval(round(sum(moved[i] for i in who)), len(who))
    assert "over contexts" in m["f1_drop"].description and "over questions" in m["question_who_f1_drop"].description
    assert "Wilson interval over questions" in m["question_who_moved_to_distractor"].description
    [table] = [f for f in result.details["figures"] if f["title"].startswith("F1 without and with the distractor")]
    method = {row[0]: row[table["data"]["columns"].index("drop interval method")] for row in table["data"]["rows"]}
    # one 'who' and one 'when' question per context: each row over questions, though the overall drop is over contexts
    assert method == {"who": "paired bootstrap interval over questions", "when": "paired bootstrap interval over questions"}
    assert "contexts" not in table["title"]
    keys = [hashlib.sha256(g.encode("utf-8")).hexdigest()[:16] for g in groups]
    outcomes = {o.name: o for o in result.outcomes}
    for name in ("f1_original", "f1_adversarial", "em_original", "em_adversarial", "moved_to_distractor"):
        assert outcomes[name].ids == [ex.id for ex, _ in made] and outcomes[name].groups == keys, name


def test_with_one_question_per_context_the_intervals_are_over_questions(target):  # noqa: F811
    """No two questions share a context: no cluster keys, the shares' intervals Wilson's over the questions."""
    from bertprobe.stats import wilson_interval

    result = DistractorProbe().run(target, Dataset(rows_examples(), "rows"), DistractorParams(bootstrap=200),
                                   ProbeContext(seed=5))
    m = result.metrics
    assert all(o.groups is None for o in result.outcomes)
    assert m["moved_to_distractor"].ci == wilson_interval(round(5 * m["moved_to_distractor"].value), 5)
    assert m["coverage"].ci == wilson_interval(5, 6)
    assert "Wilson interval over questions" in m["moved_to_distractor"].description
