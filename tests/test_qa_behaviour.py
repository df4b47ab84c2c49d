"""The behaviour probe on extractive readers: character maps that carry the gold answer through every edit,
MFT templates filled consistently, JSONL cases, verdicts and fairness gaps against independent computations,
a CLI run on a tiny random reader, and the fixture on a small sample."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import only_run, save_tiny_reader

from bertprobe.cli import main
from bertprobe.errors import DataError, ProbeError
from bertprobe.probes.behaviour.answers import judge, origin_gaps
from bertprobe.probes.behaviour.answers_cases import (
    BUILTIN_TEMPLATES,
    expand_qa_template,
    qa_case_from_mapping,
)
from bertprobe.probes.behaviour.answers_edits import Item, apply, edited, move_span, qa_catalogue
from bertprobe.probes.behaviour.lexicon import builtin_lexicons, origins, qa_lexicons
from bertprobe.probes.behaviour.perturb import Words
from bertprobe.probes.behaviour.rates import slug
from bertprobe.tasks.spans import Answer

SHARED = Path(__file__).resolve().parents[2] / "shared"
FIXTURE = SHARED / "models" / "minilm-l6-squad"
SPLIT = SHARED / "data" / "squad" / "test-split.json"


def words() -> Words:
    return Words(lexicons={**builtin_lexicons(), **qa_lexicons()})


def item(question: str, context: str, *answers: str) -> Item:
    return Item(question, context, tuple((a, context.index(a)) for a in answers))


# answers at the start and at the end of the context, next to punctuation, repeated, inside a name swap
ITEMS = [
    item("Where does Anna live?", "Paris is where Anna lives, isn't it? She is not from London.", "Paris"),
    item("Who is not from London?", "She is not from London, said Anna. Anna lives in Paris, but Maria doesn't.",
         "Maria"),
    item("Where does Anna live?", "Anna lives, they say, in Paris.", "Paris."),
    item("Who lives in Paris?", "In 1990, people said it: Anna Smith lives in Paris, France; Maria is not there!",
         "Anna Smith", "Paris, France"),
    item("When?", "It isn't known, but it is said (by Maria) that it was 1990", "1990"),
    item("Who?", "\"Maria,\" he said, \"is not here.\"", "Maria"),
]


@pytest.mark.parametrize("name", list(qa_catalogue()))
def test_every_perturbation_keeps_the_gold_answer_at_its_new_offsets(name):
    pert, w = qa_catalogue()[name], words()
    applied = 0
    for seed in range(12):
        for it in ITEMS:
            w.variants = 3
            for new in pert.edit(it, random.Random(seed), w):
                applied += 1
                assert new.edits is not None and apply(it.context, new.edits) == new.context
                assert len(new.answers) == len(it.answers)
                for (old, _), (text, start) in zip(it.answers, new.answers):
                    assert new.context[start:start + len(text)] == text  # the text at its new offsets
                    if name.startswith("swap_"):  # the swapped term is swapped in the answer, the rest kept
                        swapped = new.changed[0]
                        restored = re.sub(re.escape(swapped), "X", text, flags=re.IGNORECASE)
                        assert re.sub(r"\b[A-Z][a-z]+\b", "X", restored) == re.sub(r"\b[A-Z][a-z]+\b", "X", old)
                    else:
                        assert text == old  # typos, contractions, punctuation, sentences stay outside the answer
    assert applied, f"{name} applied to none of the hand-made items"


def test_swaps_reach_the_question_and_the_answer_consistently():
    it = item("Where does Anna live?", "Anna lives in Paris. Anna likes it.", "Anna")
    [new] = qa_catalogue()["swap_names"].edit(it, random.Random(0), Words(lexicons={**words().lexicons}, variants=1))
    name = new.changed[0]
    assert new.question == f"Where does {name} live?" and new.context == f"{name} lives in Paris. {name} likes it."
    assert new.answers == ((name, 0),)


def test_a_question_tag_is_not_expanded():
    it = item("Who?", "Anna isn't here, isn't she? Maria isn't.", "Maria")
    [new] = qa_catalogue()["expand_contractions"].edit(it, random.Random(0), words())
    assert new.context == "Anna is not here, isn't she? Maria is not." and new.answers == (("Maria", 29),)


def test_the_character_map_moves_spans_by_hand():
    text = "ab cd ef"
    reps = [(0, 0, "XX "), (3, 5, "CDE"), (8, 8, " Z")]  # an insertion at the start, a replacement, one at the end
    assert apply(text, reps) == "XX ab CDE ef Z"
    assert move_span(0, 2, reps) == (3, 5)  # "ab": after the inserted prefix
    assert move_span(3, 5, reps) == (6, 9)  # the replaced word: stretched to its replacement
    assert move_span(6, 8, reps) == (10, 12)  # "ef" at the end: the appended text stays out
    assert move_span(0, 8, reps) == (3, 12)
    assert move_span(4, 8, reps) == (6, 12)  # a start inside a replacement goes to its start
    it = Item("q", text, (("ef", 6),))
    assert edited(it, reps).answers == (("ef", 10),)


@pytest.mark.parametrize("spec", BUILTIN_TEMPLATES, ids=[s["test"] for s in BUILTIN_TEMPLATES])
def test_builtin_templates_fill_context_question_and_answer_with_the_same_words(spec):
    lex = {**builtin_lexicons(), **qa_lexicons()}
    cases = expand_qa_template(spec, lex, origins(), seed=3, default_max=20, where="t")
    plain = [c for c in cases if not c.groups]
    assert len(plain) == 20 and len({c.items[0].context + c.items[0].question for c in plain}) == 20
    for case in cases:
        for it in case.items:
            [(answer, start)] = it.answers
            assert it.context[start:start + len(answer)] == answer
            q = it.question
            if spec["test"].startswith("comparison"):  # "A is COMP than B. Who is COMP?": A, the subject
                assert it.context.startswith(answer + " is ") and q.split(" is ")[1].rstrip("?") in it.context
            elif spec["test"].startswith("taxonomy"):  # the asked attribute of the thing
                kind, thing = q.split()[1], q.split()[-1].rstrip("?")
                assert answer in qa_lexicons()[kind] and f"{answer} " in it.context and f" {thing} " in it.context
            elif spec["test"] == "coreference: he and she":  # she is the female name, the question names her job
                she_job = it.context.split("she is a")[-1].strip(" .").split()[-1] if "she is a" in it.context else \
                    it.context.split("she is an")[-1].strip(" .").split()[-1]
                assert q.endswith(f"{she_job}?") and it.context.split(" and ")[1].startswith(answer)
            else:  # the former: the first name, whose job the question names
                assert it.context.startswith(answer) and q.split()[-1].rstrip("?") in it.context.split("latter")[0]
    fair = [c for c in cases if c.groups]
    assert bool(fair) == bool(spec.get("origins"))
    for case in fair:  # the same sentence for every group, surnames of that group
        skeletons = set()
        for it, group in zip(case.items, case.groups):
            surnames = [s for s in origins()[group] if f" {s}" in it.context]
            assert surnames and it.answers[0][0].split()[-1] in origins()[group]
            skeletons.add(re.sub("|".join(rf"\b{s}\b" for s in surnames), "S", it.context))
        assert len(skeletons) == 1 and list(case.groups) == list(origins())


def test_a_template_whose_answer_is_not_in_its_context_is_refused():
    spec = {"test": "bad", "context": "{first_name} is here.", "question": "Who?", "answer": "{last_name}"}
    with pytest.raises(ProbeError, match="is not in the context"):
        expand_qa_template(spec, builtin_lexicons(), {}, 0, 3, "templates[0]")


def test_jsonl_cases_one_per_kind_and_bad_lines():
    mft = qa_case_from_mapping({"test": "comparison", "capability": "vocabulary", "type": "mft",
                                "context": "Anna is taller than Maria.", "question": "Who is taller?",
                                "answers": ["anna"]}, "l1")
    assert mft.items[0].answers == (("Anna", 0),)
    inv = qa_case_from_mapping({"test": "typo", "type": "inv", "items": [
        {"context": "Anna lives in Paris.", "question": "Where does Anna live?", "answers": [["Paris", 14]]},
        {"context": "Anna livse in Paris.", "question": "Where does Anna live?"}]}, "l2")
    assert inv.items[0].answers == (("Paris", 14),) and inv.items[1].edits is None
    with pytest.raises(DataError, match="l3: the answer 'Rome' is not in the context"):
        qa_case_from_mapping({"test": "x", "type": "mft", "context": "Anna.", "question": "Q?", "answers": ["Rome"]}, "l3")
    with pytest.raises(DataError, match="not at character 3"):
        qa_case_from_mapping({"test": "x", "type": "inv", "items": [
            {"context": "Anna.", "question": "Q?", "answers": [["Anna", 3]]}, {"context": "A.", "question": "Q?"}]}, "l4")
    with pytest.raises(DataError, match="must be mft or inv"):
        qa_case_from_mapping({"test": "x", "type": "dir", "context": "A", "question": "Q"}, "l5")


def _answer(context: str, text: str) -> Answer:
    start = context.index(text) if text else 0
    return Answer(text, start, start + len(text), 1.0, 0.9, 0.0, 1)


def test_verdicts_mft_by_metric_and_bar_and_inv_through_the_map():
    it = item("Who is taller?", "Anna Smith is taller than Maria.", "Anna Smith")
    case = qa_case_from_mapping({"test": "c", "type": "mft", "context": it.context, "question": it.question,
                                 "answers": ["Anna Smith"]}, "x")
    answers = {(it.question, it.context): _answer(it.context, "Anna")}  # F1 2/3, EM 0
    assert judge(case, answers, "f1", 0.6)[0] and not judge(case, answers, "f1", 0.7)[0]
    assert not judge(case, answers, "em", 0.5)[0] and judge(case, answers, "f1", 0.6)[2] == [pytest.approx(2 / 3)]
    # a name swap: the original answer "Anna Smith" is expected as the swapped name, not as itself
    new = edited(it, [(0, 4, "Ruth")], [(0, 0, "")])
    assert new.answers == (("Ruth Smith", 0),)
    from bertprobe.probes.behaviour.answers_cases import QACase
    inv = QACase("swap", "inv", (it, new))
    same = {(it.question, it.context): _answer(it.context, "Anna Smith"),
            (new.question, new.context): _answer(new.context, "Ruth Smith")}
    assert judge(inv, same, "f1", 0.8)[0]
    kept = {**same, (new.question, new.context): _answer(new.context, "Maria")}
    assert judge(inv, kept, "f1", 0.8)[:2] == (False, 1)
    punct = {**same, (new.question, new.context): _answer(new.context, "Ruth Smith is")}
    assert not judge(inv, punct, "f1", 0.8)[0]  # normalised text differs: a changed answer


def test_origin_gaps_match_a_hand_computation():
    from bertprobe.probes.behaviour.answers_cases import QACase
    cases, answers = [], {}
    rng = random.Random(0)
    table = np.zeros((6, 2))
    for i in range(6):
        items = []
        for j, group in enumerate(("A", "B")):
            it = item("Who?", f"Name{i}{group} Sur is here.", f"Name{i}{group} Sur")
            right = rng.random() < (0.9 if group == "A" else 0.4)
            answers[(it.question, it.context)] = _answer(it.context, f"Name{i}{group} Sur" if right else "here")
            table[i, j] = 1.0 if right else 0.0
            items.append(it)
        cases.append(QACase("t (name origin)", "mft", tuple(items), "fairness", str(i), groups=("A", "B")))
    gaps = origin_gaps(cases, answers, 200, 0)
    assert gaps["f1"] == {"A": round(table[:, 0].mean(), 4), "B": round(table[:, 1].mean(), 4)}
    assert gaps["gap"] == pytest.approx(abs(table[:, 0].mean() - table[:, 1].mean()), abs=1e-4)
    assert gaps["interval"][0] <= gaps["gap"] <= gaps["interval"][1]


# ---- through the CLI ------------------------------------------------------------------------------------

WORDS = tuple("the a is was of in to it who what where which does lives live taller than anna maria paris london "
              "red blue box ? . , isn't not".split())


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    return save_tiny_reader(tmp_path_factory.mktemp("reader"), WORDS)


def squad_file(path: Path) -> Path:
    contexts = ["Anna lives in Paris, isn't it?", "Maria is not in London. Anna lives in Paris.",
                "The red box is in Paris, said Maria.", "Paris is where Maria lives."]
    qas = [("Where does Anna live?", "Paris"), ("Who is not in London?", "Maria"), ("What is in Paris?", "red box"),
           ("Who lives in Paris?", "Maria")]
    paragraphs = [{"context": c, "qas": [{"id": f"q{i}", "question": q, "answers": [{"text": a, "answer_start": c.index(a)}]}]}
                  for i, (c, (q, a)) in enumerate(zip(contexts, qas))]
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "T", "paragraphs": paragraphs}]}), encoding="utf-8")
    return path


def run_suite(tmp_path: Path, model: Path, data: Path, params: str) -> tuple[dict, str, Path]:
    suite = tmp_path / "qa.yaml"
    suite.write_text(f"suite: qa\nmodel: {{path: '{model}', device: cpu, dtype: float32}}\ndata: {{path: '{data}'}}\n"
                     f"report: {{dir: '{tmp_path / 'out'}', formats: [json, markdown]}}\n"
                     f"probes:\n  - probe: behaviour\n    params: {params}\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code in (0, 1), result.output
    run_dir, report = only_run(tmp_path / "out", "qa")
    [probe] = report["probes"]
    return probe, result.output, run_dir


def test_a_cli_run_on_a_tiny_reader_reports_rates_outcomes_fairness_and_marked_findings(tmp_path, reader):
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"test": "mine", "capability": "vocabulary", "type": "mft", "id": "m1",
                                 "context": "Anna is taller than Maria.", "question": "Who is taller?",
                                 "answers": ["Anna"]}) + "\n", encoding="utf-8")
    probe, output, run_dir = run_suite(tmp_path, reader, squad_file(tmp_path / "dev.json"),
                              f"{{cases: '{cases}', max_cases: 4, bootstrap: 50, findings: 2}}")
    m = probe["metrics"]
    tests = {t["test"]: t for t in probe["details"]["tests"]}
    assert {"mine", "comparison", "taxonomy: colour", "coreference: he and she", "comparison (name origin)",
            "irrelevant_after", "typo", "swap_places"} <= set(tests)
    for row in tests.values():  # every rate is failed/cases
        assert m[f"failure_rate.test.{slug(row['test'])}"] == pytest.approx(row["failed"] / row["cases"])
        assert probe["metric_info"][f"failure_rate.test.{slug(row['test'])}"]["outcome"] == f"failed.{slug(row['test'])}"
    outcomes = {o["name"]: o for o in map(json.loads, (run_dir / "outcomes.jsonl").read_text().splitlines())}
    for row in tests.values():  # an outcome per case: 1 = failed, its mean the rate
        values = outcomes[f"failed.{slug(row['test'])}"]["values"]
        assert len(values) == row["cases"] and sum(values) == row["failed"]
    assert m["cases"] == sum(t["cases"] for t in tests.values())
    assert m["failure_rate"] == pytest.approx(m["failed_cases"] / m["cases"])
    assert "fairness_gap.comparison_name_origin" in m and "max_fairness_gap" in m
    assert set(probe["details"]["fairness"]["comparison (name origin)"]["f1"]) == set(origins())
    assert tests["irrelevant_after"]["cases"] == 4 and tests["mine"]["cases"] == 1
    findings = probe["findings"]
    assert findings and all(f["extra"]["marks"]["context"] for f in findings if f["extra"].get("kind") == "answer")
    for f in findings:  # a fairness finding names the group whose item failed
        if f["extra"].get("group"):
            assert f["title"] == f"{f['extra']['test']} (mft, {f['extra']['group']})" and f["extra"]["group"] in origins()
    inv = [f for f in findings if f["title"].endswith("(inv)")]
    assert not inv or "original context" in inv[0]["extra"]["columns"]
    assert "worst test" in output or "no case failed" in output


def test_the_probe_runs_on_readers_and_still_refuses_multiple_choice_before_loading():
    from bertprobe.probes.behaviour.probe import BehaviourProbe
    from bertprobe.tasks.multiple_choice import MultipleChoice
    from bertprobe.tasks.question_answering import QuestionAnswering

    assert QuestionAnswering.span_answers and not MultipleChoice.span_answers
    assert not BehaviourProbe.refuses_task(QuestionAnswering) and BehaviourProbe.refuses_task(MultipleChoice)


def test_a_bad_perturbation_name_on_a_reader_is_one_line_naming_the_known_ones(tmp_path, reader):
    suite = tmp_path / "qa.yaml"
    data = squad_file(tmp_path / "dev.json")
    suite.write_text(f"suite: qa\nmodel: {{path: '{reader}', device: cpu}}\ndata: {{path: '{data}'}}\n"
                     f"report: {{dir: '{tmp_path / 'out'}'}}\nprobes:\n  - probe: behaviour\n"
                     "    params: {perturbations: [tyop]}\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code in (1, 2) and "Traceback" not in result.output
    assert "no perturbation 'tyop' (did you mean 'typo'?); known: typo, typos_2, question_typo" in result.output


@pytest.mark.skipif(not (FIXTURE.is_dir() and SPLIT.is_file()), reason="needs ../shared (the QA fixture)")
def test_the_fixture_on_a_small_sample(tmp_path):
    """The fixture reader over 12 held-out questions and 6 cases per template: the failure rates are reported
    (printed for the docs); the gold F1 of the originals lies where the reader's held-out F1 would put it."""
    probe, _, _ = run_suite(tmp_path, FIXTURE, SPLIT, "{max_cases: 6, max_examples: 12, bootstrap: 100}")
    rates = {t["test"]: (t["failed"], t["cases"]) for t in probe["details"]["tests"]}
    print(json.dumps({"rates": rates, "failure_rate": probe["metrics"]["failure_rate"],
                      "max_fairness_gap": probe["metrics"].get("max_fairness_gap")}))
    assert rates["taxonomy: colour"][1] == 6 and probe["metrics"]["cases"] > 60
    assert 0.0 <= probe["metrics"]["failure_rate"] <= 1.0


def test_a_readers_failure_rates_resample_the_cases_of_one_context_together(reader):
    """36 contexts of two questions, two INV perturbations each: a test's failure rate, the capability's and the
    overall one take Wilson's interval on the cases' effective sample size over the contexts
    (stats.clustered_wilson with each case's context, as stats.mean_interval does for 0/1 values), not Wilson's
    over the 72 cases, the descriptions say so, and each outcome carries its context's key."""
    import hashlib

    from bertprobe.data.dataset import Dataset, Example
    from bertprobe.model.loading import load_target
    from bertprobe.model.spec import ModelSpec
    from bertprobe.probe import ProbeContext
    from bertprobe.probes.behaviour.probe import BehaviourParams, BehaviourProbe
    from bertprobe.stats import clustered_wilson, mean_interval, wilson_interval

    rng = random.Random(2)
    pool = [w for w in WORDS if w.isalpha()]
    examples = []
    for k in range(36):
        context = "anna lives in paris . " + " ".join(rng.choice(pool) for _ in range(rng.randint(6, 12))) + " ."
        for j, (question, gold) in enumerate((("where does anna live ?", "paris"), ("who lives in paris ?", "anna"))):
            examples.append(Example(question, context, ((gold, context.index(gold)),), id=f"c{k}q{j}"))
    target = load_target(ModelSpec(path=str(reader), device="cpu"))
    params = BehaviourParams(perturbations=("irrelevant_after", "irrelevant_before"), builtin_templates=False,
                             origins=False, bootstrap=200)
    result = BehaviourProbe().run(target, Dataset(examples), params, ProbeContext(seed=6))
    context = {ex.id: ex.text_pair for ex in examples}
    failed, groups = [], []
    for test in ("irrelevant_after", "irrelevant_before"):
        o = next(o for o in result.outcomes if o.name == f"failed.{test}")
        within = [context[i] for i in o.ids]
        assert len(o.ids) == 72 and len(set(within)) == 36
        metric = result.metrics[f"failure_rate.test.{test}"]
        assert metric.ci == pytest.approx(clustered_wilson(o.values, within), abs=1e-12)
        assert metric.ci == pytest.approx(mean_interval(o.values, 200, 0.95, 6, within), abs=1e-12)
        assert "Wilson interval over contexts: on the effective number of cases" in metric.description
        if 0 < sum(o.values) < 72:
            assert metric.ci != pytest.approx(wilson_interval(sum(o.values), 72), abs=1e-6)
        assert "over contexts" in metric.description
        assert o.groups == [hashlib.sha256(g.encode("utf-8")).hexdigest()[:16] for g in within]
        failed, groups = failed + o.values, groups + within
    for name in ("failure_rate.capability.robustness", "failure_rate"):
        assert result.metrics[name].value == pytest.approx(np.mean(failed))
        assert result.metrics[name].ci == pytest.approx(clustered_wilson(failed, groups), abs=1e-12)
