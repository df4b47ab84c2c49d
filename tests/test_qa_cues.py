"""spurious-cues on extractive QA readers (its section, probes/spurious_cues/answers.py): the answer's sentence moved
with its gold spans, the question-word reduction, the position histogram by hand, a CLI run on a tiny reader checked
against a plain decoding of hand-built partial inputs, and the fixture."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import QA_WORDS as WORDS
from conftest import only_run
from test_qa_accuracy import official

from bertprobe.cli import main
from bertprobe.data.dataset import DataSpec
from bertprobe.probes.spurious_cues.probe import CueParams, SpuriousCuesProbe
from bertprobe.stats import paired_bootstrap_diff
from bertprobe.probes.spurious_cues.answers import (
    in_first_sentence,
    move_answer_sentence,
    position_bins,
    reduce_question,
    relative_position,
)

SHARED = Path(__file__).resolve().parents[2] / "shared"


# ---- the answer's sentence moved to the end ---------------------------------------------------------------


def moved(context: str, *golds: tuple[str, int]):
    for text, start in golds:
        assert context[start : start + len(text)] == text
    return move_answer_sentence(context, tuple(golds))


def test_an_answer_at_the_start_of_the_context_moves_with_its_sentence():
    context = "Paris is the capital. It lies in France. The Seine flows there."
    new, gold = moved(context, ("Paris", 0), ("Paris is the capital", 0))
    assert new == "It lies in France. The Seine flows there. Paris is the capital."
    assert gold == (("Paris", 42), ("Paris is the capital", 42))
    assert all(new[s : s + len(t)] == t for t, s in gold)


def test_an_answer_next_to_punctuation_keeps_its_text_and_the_sentences_keep_their_spacing():
    context = 'He said "Go." Then he left for Rome, Italy.  The end came (in 1901).'
    new, gold = moved(context, ("Italy", context.index("Italy")))
    assert new == 'He said "Go." The end came (in 1901).  Then he left for Rome, Italy.'  # its own two spaces
    [(text, start)] = gold
    assert new[start : start + len(text)] == "Italy" and new[start + len(text)] == "."
    new, gold = moved(context, ("Go.", context.index("Go.")))  # the answer holds the full stop
    assert new == 'Then he left for Rome, Italy.  The end came (in 1901). He said "Go."'
    assert [new[s : s + len(t)] for t, s in gold] == ["Go."]


def test_golds_outside_the_moved_sentence_shift_and_one_across_its_boundary_is_dropped():
    context = "Alpha one. Beta two. Gamma three."
    new, gold = moved(context, ("Beta", 11), ("Gamma", 21), ("Alpha", 0), ("two. Gamma", 16))
    assert new == "Alpha one. Gamma three. Beta two."
    assert gold == (("Beta", 24), ("Gamma", 11), ("Alpha", 0))
    assert all(new[s : s + len(t)] == t for t, s in gold)


def test_nothing_moves_when_the_answer_ends_the_context_spans_sentences_or_there_is_none():
    context = "One fact here. The answer is last."
    assert moved(context, ("last.", context.index("last."))) is None  # already in the last sentence
    assert moved(context, ("here. The", context.index("here."))) is None  # across two sentences
    assert moved("A single sentence.", ("single", 2)) is None
    assert move_answer_sentence(context, ()) is None  # unanswerable


def test_a_line_break_separates_the_moved_sentence_as_it_did():
    context = "Title line\nThe body says yes. Closing words"
    new, gold = moved(context, ("Title", 0))
    assert new == "The body says yes. Closing words\nTitle line"
    assert [new[s : s + len(t)] for t, s in gold] == ["Title"]


# ---- the question reduced to its question word ----------------------------------------------------------


@pytest.mark.parametrize("question, reduced", [
    ("When did the war end?", "When?"),
    ("How many dogs are there?", "How many?"),
    ("how did it work", "how?"),
    ("In what year was it built?", "what?"),
    ("Whose book was it?", "Whose?"),
    ("The treaty of which country?", "which?"),
    ("Name the river that flows through Paris.", ""),
    ("Somewhere over the rainbow?", ""),  # "somewhere" holds "where" but is no question word
])
def test_the_question_word_reduction(question, reduced):
    assert reduce_question(question, "question-word") == reduced
    assert reduce_question(question, "empty") == ""


def test_an_unknown_question_mode_is_refused_in_one_line():
    with pytest.raises(ValueError, match="question_removed: 'none' unknown; use any of empty, question-word"):
        CueParams(question_removed=("none",))
    with pytest.raises(ValueError, match="position_bins"):
        CueParams(position_bins=1)


# ---- the position histogram ---------------------------------------------------------------------------


def test_position_bins_by_hand():
    assert position_bins([0.0, 0.05, 0.1, 0.55, 0.999, 1.0], 10).tolist() == [2, 1, 0, 0, 0, 1, 0, 0, 0, 2]
    assert position_bins([0.2, 0.25, 0.5, 0.75], 4).tolist() == [1, 1, 1, 1]
    assert relative_position(25, "x" * 100) == 0.25 and relative_position(0, "") == 0.0
    context = "First one here. Second one."
    assert in_first_sentence(0, context) and in_first_sentence(15, context)  # the space after the stop is its own
    assert not in_first_sentence(16, context)


# ---- a CLI run on a tiny reader ------------------------------------------------------------------------

POOL = [w for w in WORDS if w not in "?.," and w not in ("who", "what", "where", "when", "which", "why", "how", "many")]
STARTS = ["who", "what", "where", "when", "which", "why", "how many", "name"]


def make_cases(n: int, seed: int = 0) -> list[dict]:
    """Contexts of 2-4 sentences of the tiny reader's words, each "w w w ."; one question per context with the
    answer in a random sentence, the moved context and gold built here by listing the sentences."""
    rng = random.Random(seed)
    cases = []
    for k in range(n):
        sents = [[rng.choice(POOL) for _ in range(rng.randint(4, 8))] for _ in range(rng.randint(2, 4))]
        which, at, length = rng.randrange(len(sents)), 0, rng.choice([1, 1, 2])
        at = rng.randrange(len(sents[which]) - length + 1)
        texts = [" ".join(s) + " ." for s in sents]
        answer = " ".join(sents[which][at : at + length])
        offset = len(" ".join(sents[which][:at])) + (1 if at else 0)
        start = sum(len(t) + 1 for t in texts[:which]) + offset
        context = " ".join(texts)
        order = [t for j, t in enumerate(texts) if j != which] + [texts[which]]
        moved_context = " ".join(order)
        moved_start = sum(len(t) + 1 for t in order[:-1]) + offset
        assert context[start : start + len(answer)] == answer == moved_context[moved_start : moved_start + len(answer)]
        question = f"{STARTS[k % len(STARTS)]} is the {rng.choice(POOL)} ?"
        cases.append({"id": f"q{k}", "question": question, "context": context, "answer": answer, "start": start,
                      "moved": moved_context if which < len(sents) - 1 else None, "moved_start": moved_start,
                      "word": {"how many": "how many?", "name": ""}.get(STARTS[k % len(STARTS)],
                                                                         f"{STARTS[k % len(STARTS)]}?")})
    return cases


def squad_file(path: Path, cases: list[dict]) -> Path:
    paragraphs = [{"context": c["context"], "qas": [{"id": c["id"], "question": c["question"],
                                                     "answers": [{"text": c["answer"], "answer_start": c["start"]}]}]}
                  for c in cases]
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "T", "paragraphs": paragraphs}]}), encoding="utf-8")
    return path


def plain(model_dir: Path, questions: list[str], contexts: list[str]):
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    from bertprobe.tasks.spans import answer

    model = AutoModelForQuestionAnswering.from_pretrained(model_dir, dtype=torch.float32).eval()
    return answer(model, questions, contexts, AutoTokenizer.from_pretrained(model_dir))


def test_a_run_on_a_tiny_reader_equals_a_plain_decoding_of_the_partial_inputs(tmp_path, reader):
    cases = make_cases(24)
    data = squad_file(tmp_path / "dev.json", cases)
    suite = tmp_path / "cues.yaml"
    suite.write_text(f"suite: cues\nmodel: {{path: '{reader}', device: cpu}}\ndata: {{path: '{data}'}}\nseed: 3\n"
                     f"report: {{dir: '{tmp_path / 'out'}', formats: [json, markdown, html]}}\n"
                     "probes:\n  - probe: spurious-cues\n    params: {bootstrap: 300, position_bins: 5}\n"
                     "    expect: {f1_question_empty: {max: 0.95}, f1_drop_sentence_moved: {max: 0.9}}\n",
                     encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code in (0, 1), result.output
    run_dir, report = only_run(tmp_path / "out", "cues")
    [probe] = report["probes"]
    m = probe["metrics"]
    golds = [[c["answer"]] for c in cases]

    def f1_of(questions, contexts, gold):
        got = plain(reader, questions, contexts)
        return got, [official(a.text, g)[1] for a, g in zip(got, gold)]

    full, f1_full = f1_of([c["question"] for c in cases], [c["context"] for c in cases], golds)
    _, f1_empty = f1_of([""] * len(cases), [c["context"] for c in cases], golds)
    _, f1_word = f1_of([c["word"] for c in cases], [c["context"] for c in cases], golds)
    rows = [k for k, c in enumerate(cases) if c["moved"]]
    _, f1_moved = f1_of([cases[k]["question"] for k in rows], [cases[k]["moved"] for k in rows],
                        [golds[k] for k in rows])
    assert m["f1_full"] == pytest.approx(np.mean(f1_full), abs=1e-9)
    assert m["f1_question_empty"] == pytest.approx(np.mean(f1_empty), abs=1e-9)
    assert m["f1_question_word"] == pytest.approx(np.mean(f1_word), abs=1e-9)
    assert m["f1_drop_question_empty"] == pytest.approx(np.mean(f1_full) - np.mean(f1_empty), abs=1e-9)
    assert probe["metric_info"]["f1_drop_question_empty"]["ci"] == pytest.approx(
        list(paired_bootstrap_diff(f1_empty, f1_full, 300, 0.95, 3)), abs=1e-9)
    assert m["questions_moved"] == len(rows) and m["questions_not_moved"] == len(cases) - len(rows) and rows
    assert m["f1_sentence_moved"] == pytest.approx(np.mean(f1_moved), abs=1e-9)
    assert m["f1_full_moved_questions"] == pytest.approx(np.mean([f1_full[k] for k in rows]), abs=1e-9)
    # positions: every answer is non-empty here; relative start, by hand, in 5 bins
    starts = [a.start for a in full]
    assert all(a.text for a in full)
    gold_pos = [c["start"] / len(c["context"]) for c in cases]
    pred_pos = [s / len(c["context"]) for s, c in zip(starts, cases)]
    hist = lambda ps: np.bincount([min(int(p * 5), 4) for p in ps], minlength=5) / len(ps)  # noqa: E731
    assert m["position_distance"] == pytest.approx(0.5 * np.abs(hist(gold_pos) - hist(pred_pos)).sum(), abs=1e-9)
    first_end = [c["context"].index(" . ") + 3 for c in cases]
    assert m["first_sentence_gold"] == pytest.approx(np.mean([c["start"] < e for c, e in zip(cases, first_end)]))
    assert m["first_sentence_predicted"] == pytest.approx(np.mean([s < e for s, e in zip(starts, first_end)]))
    assert m["first_sentence_excess"] == pytest.approx(m["first_sentence_predicted"] - m["first_sentence_gold"])
    outcomes = {o["name"]: o for o in map(json.loads, (run_dir / "outcomes.jsonl").read_text().splitlines())}
    assert outcomes["f1_question_empty"]["values"] == pytest.approx(f1_empty, abs=1e-12)
    assert outcomes["f1_sentence_moved"]["ids"] == [cases[k]["id"] for k in rows]
    finding = probe["details"]["key_finding"]
    empty = plain(reader, [""] * len(cases), [c["context"] for c in cases])
    found = np.mean([official(a.text, g)[0] for a, g in zip(empty, golds)])
    assert m["exact_match_question_empty"] == pytest.approx(found)
    assert finding.startswith(f"without the question, the reader still finds {100 * found:.0f}% of the answers exactly")
    assert "with the answer's sentence moved to the end" in finding and "of the gold" in finding
    md = (run_dir / "report.md").read_text()
    assert "where answers lie in the context: predicted against gold" in md
    assert "Kaushik" in (run_dir / "report.html").read_text()  # the papers head the section


def test_intervals_resample_contexts_where_two_questions_share_one(tmp_path, reader):
    """32 contexts of two questions each: F1 and the paired drops are resampled by context (the cluster bootstrap
    over the outcomes the probe records), and the descriptions say so."""
    from bertprobe.data.tables import load_table
    from bertprobe.model.loading import load_target
    from bertprobe.model.spec import ModelSpec
    from bertprobe.probe import ProbeContext
    from bertprobe.stats import bootstrap_ci, clustered_wilson

    cases = make_cases(32, seed=4)
    twice = [dict(c, id=f"{c['id']}-{k}", question=q) for c in cases
             for k, q in enumerate((c["question"], c["question"].replace(" is the ", " was the ")))]
    path = squad_file(tmp_path / "pairs.json", twice)
    target = load_target(ModelSpec(path=str(reader), device="cpu"))
    spec = DataSpec(path=str(path))
    data = target.task.read_labels(load_table(spec), spec, "pairs")
    result = SpuriousCuesProbe().run(target, data, CueParams(bootstrap=300), ProbeContext(seed=3))
    context = {c["id"]: c["context"] for c in twice}
    outcomes = {o.name: o for o in result.outcomes}
    for name in ("f1_full", "f1_question_empty", "f1_drop_question_empty", "f1_drop_sentence_moved"):
        values, ids = outcomes[name].values, outcomes[name].ids
        groups = [context[i] for i in ids]
        assert len(set(groups)) < len(groups)
        if len(set(groups)) >= 30:
            expected = bootstrap_ci(values, 300, 0.95, 3, groups)
            assert result.metrics[name].ci == pytest.approx(expected, abs=1e-12), name
        assert "context" in result.metrics[name].description, name
    assert "cluster bootstrap interval over contexts" in result.metrics["f1_full"].description
    # the first-sentence shares: over the contexts too, Wilson's on the effective sample size (Korn & Graubard)
    for name in ("first_sentence_predicted", "first_sentence_gold"):
        values, groups = outcomes[name].values, [context[i] for i in outcomes[name].ids]
        assert len(set(groups)) >= 30 and 0 < sum(values) < len(values), name
        assert result.metrics[name].ci == pytest.approx(clustered_wilson(values, groups), abs=1e-12), name
        assert "Wilson interval over contexts: on the effective number" in result.metrics[name].description, name
    # every per-question outcome names its context, so two readers are paired and resampled by context
    for o in result.outcomes:
        assert o.groups == [hashlib.sha256(context[i].encode("utf-8")).hexdigest()[:16] for i in o.ids], o.name


def test_on_squad2_data_the_moved_answers_abstain_as_the_full_ones_do(reader):
    """With an unanswerable question in the data the null threshold applies to the moved questions too: at a
    threshold of -1000 every answer abstains, so the moved F1 is 0 where a SQuAD 1.1 decoding would answer."""
    from bertprobe.data.dataset import Dataset, Example
    from bertprobe.model.loading import load_target
    from bertprobe.model.spec import ModelSpec
    from bertprobe.probe import ProbeContext

    cases = [c for c in make_cases(12, seed=4) if c["moved"]]
    examples = [Example(c["question"], c["context"], ((c["answer"], c["start"]),), id=c["id"]) for c in cases]
    target = load_target(ModelSpec(path=str(reader), device="cpu", options={"null_threshold": -1000.0}))
    params = CueParams(bootstrap=0, question_removed=())
    plain_v1 = SpuriousCuesProbe().run(target, Dataset(examples, "v1"), params, ProbeContext(seed=0))
    with_none = examples + [Example("who is the dog ?", cases[0]["context"], (), id="none")]
    v2 = SpuriousCuesProbe().run(target, Dataset(with_none, "v2"), params, ProbeContext(seed=0))
    assert v2.value("questions_moved") == len(cases) and v2.value("questions_not_moved") == 1
    assert plain_v1.value("f1_sentence_moved") > 0  # SQuAD 1.1: never abstains
    assert v2.value("f1_full") == 1 / len(with_none)  # only the unanswerable question is right
    assert v2.value("f1_sentence_moved") == 0.0 and v2.value("f1_full_moved_questions") == 0.0


def test_validate_admits_the_probe_on_a_reader_and_refuses_an_unknown_mode_in_one_line(tmp_path, reader):
    data = squad_file(tmp_path / "dev.json", make_cases(3))
    for params, code in (("{question_removed: [question-word]}", 0), ("{question_removed: [nothing]}", 2)):
        suite = tmp_path / "v.yaml"
        suite.write_text(f"suite: v\nmodel: {{path: '{reader}', device: cpu}}\ndata: {{path: '{data}'}}\n"
                         f"probes:\n  - probe: spurious-cues\n    params: {params}\n"
                         "    expect: {f1_question_word: {max: 0.3}, first_sentence_excess: {max: 0.1}}\n",
                         encoding="utf-8")
        result = CliRunner().invoke(main, ["validate", str(suite)])
        assert result.exit_code == code, result.output
    assert "question_removed: 'nothing' unknown; use any of empty, question-word" in result.output
    assert "Traceback" not in result.output


# ---- the fixture ----------------------------------------------------------------------------------------

FIXTURE = SHARED / "models" / "minilm-l6-squad"
SPLIT = SHARED / "data" / "squad" / "test-split.json"


@pytest.mark.skipif(not (FIXTURE.exists() and SPLIT.exists()), reason="../shared fixtures absent")
def test_on_the_fixture_the_reader_needs_its_question_and_is_measured_with_its_answer_moved(tmp_path):
    """60 held-out questions (every 18th of the split): prints the question-removed and moved-sentence F1."""
    from bertprobe.data.tables import load_table
    from bertprobe.model.loading import load_target
    from bertprobe.model.spec import ModelSpec
    from bertprobe.probe import ProbeContext

    target = load_target(ModelSpec(path=str(FIXTURE), device="cpu", dtype="float32"))
    spec = DataSpec(path=str(SPLIT))
    data = target.task.read_labels(load_table(spec), spec, "fixture")
    data = type(data)(data.examples[::18][:60], "held-out 60")
    result = SpuriousCuesProbe().run(target, data, CueParams(bootstrap=1000), ProbeContext(seed=0))
    m = {k: v.value for k, v in result.metrics.items()}
    print("\n" + result.details["key_finding"])
    print({k: (round(v.value, 4), v.ci and tuple(round(x, 4) for x in v.ci)) for k, v in result.metrics.items()})
    assert len(data) == 60 and m["questions_moved"] > 20
    assert result.metrics["f1_drop_question_empty"].ci[0] > 0  # the reader reads its question: F1 surely falls
    assert m["f1_question_empty"] < m["f1_full"] and m["f1_question_word"] < m["f1_full"]
    assert 0 <= m["f1_sentence_moved"] <= 1 and 0 <= m["position_distance"] <= 1
