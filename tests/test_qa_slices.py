"""Slices of extractive QA: question features, F1 and EM per slice, and the probe asking its section."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_qa_calibration import reader, run_qa, tiny_squad  # noqa: F401  (reader: the module's tiny model fixture)

from bertprobe.data.dataset import Dataset, Example
from bertprobe.hookmarkers import hookimpl
from bertprobe.plugins import build_plugins
from bertprobe.probe import ProbeContext
from bertprobe.probes.slices import answers as Q
from bertprobe.probes.slices.probe import SlicesParams, SlicesProbe, welch_p
from bertprobe.probes.slices.units import SliceScore, SliceScores
from bertprobe.tasks import answer_text as T
from bertprobe.tasks.question_answering import QuestionAnswering


def test_the_stop_words_are_scikit_learns_english_list():
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    assert T.stop_words() == frozenset(ENGLISH_STOP_WORDS)


@pytest.mark.parametrize(("question", "context", "start", "answer", "share"), [
    # content words of the question: river, flows, paris (which, through are stop words); flows, paris in the sentence
    ("Which river flows through Paris?", "Paris is big. The Seine flows through Paris. It is long.", 14, "The Seine", 2 / 3),
    # every content word (year, treaty, signed) is in the answer's sentence, whatever their case
    ("In what year was the Treaty signed?", "It rained. The treaty was SIGNED in the year 1648! Peace came.", 45, "1648", 1.0),
    # the other sentence holds them; the answer's holds none
    ("Who founded the abbey?", "The abbey was founded by monks. Later, Cluny grew.", 39, "Cluny", 0.0),
    # a question of stop words only has no overlap to measure
    ("Who is it?", "It is me.", 6, "me", math.nan),
    # an answer across a sentence end takes both sentences
    ("Which dogs barked loudly?", "Two dogs slept. Cats barked loudly.", 9, "slept. Cats", 1.0),
])
def test_overlap_is_the_share_of_the_questions_content_words_in_the_answers_sentence(question, context, start, answer,
                                                                                     share):
    assert context[start : start + len(answer)] == answer
    got = T.overlap(question, T.answer_sentence(context, start, answer))
    assert (math.isnan(got) and math.isnan(share)) or got == pytest.approx(share)


def test_sentences_end_at_stops_and_line_breaks():
    text = "One two. Three? Four!\nFive"
    assert [text[a:b].strip() for a, b in T.sentences(text)] == ["One two.", "Three?", "Four!", "Five"]


def test_the_question_slices_bin_question_word_answer_length_context_length_and_overlap():
    def ex(i, question, context, answer, start=None):
        start = context.index(answer) if start is None else start
        return Example(text=question, text_pair=context, label=((answer, start),) if answer else (), id=f"q{i}")

    examples = [
        ex(0, "Who wrote Hamlet?", "Hamlet was written by Shakespeare.", "Shakespeare"),
        ex(1, "When did the war end?", "The war ended in 1945 after many long years.", "in 1945"),
        ex(2, "How many ships sailed west?", "Ships sailed west. Three of them were lost at sea today.",
           "Three of them were lost at"),
        ex(3, "What is it?", "It is a tree.", ""),
    ]
    masks = Q.question_slices(examples, windows=[1, 1, 2, 1])
    assert masks["question word: who"].tolist() == [True, False, False, False]
    assert masks["question word: how"].tolist() == [False, False, True, False]
    assert masks["answer length 1 word"].tolist() == [True, False, False, False]
    assert masks["answer length 2 words"].tolist() == [False, True, False, False]
    assert masks["answer length 6+ words"].tolist() == [False, False, True, False]
    assert masks["unanswerable"].tolist() == [False, False, False, True]
    assert masks["context in several windows"].tolist() == [False, False, True, False]
    # who wrote hamlet: wrote, hamlet -> hamlet only (written is no match): 1/2, medium; war, end -> war: 1/2;
    # ships, sailed, west -> none in "Three of them were lost at sea today.": low
    assert masks["question-sentence overlap medium"].tolist() == [True, True, False, False]
    assert masks["question-sentence overlap low"].tolist() == [False, False, True, False]
    assert "question-sentence overlap high" not in masks
    # context length quartiles cover every question once
    quartiles = [m for k, m in masks.items() if k.startswith("context length quartile")]
    assert np.sum(quartiles, axis=0).tolist() == [1, 1, 1, 1]


class ScoredSection:
    """A plugin's section of the slices probe for its own task: its units are scored with given values (what the
    probe reads through the section's ``units``)."""

    def __init__(self, scores: SliceScores):
        self.scores = scores

    def units(self, target, data, params, ctx):
        return self.scores


class FakeTask:
    name = "scored"


class FakeTarget:
    task = FakeTask()


def scored_context(scores: SliceScores, seed: int) -> ProbeContext:
    """A context whose lookup finds the section a plugin registered for the task ``scored`` (as a run's does)."""

    class ScoredPlugin:
        @hookimpl
        def bertprobe_register_sections(self, registry):
            registry.add("slices", ScoredSection(scores), task="scored")

    sections = build_plugins(extra=[ScoredPlugin()], entry_points=False).sections
    return ProbeContext(seed=seed, section=sections.find)


def test_slice_f1_is_the_mean_of_per_question_f1_over_the_slice_and_a_weak_slice_is_flagged():
    rng = np.random.default_rng(0)
    n = 200
    weak = np.arange(n) < 50
    f1 = np.where(weak, rng.uniform(0.0, 0.5, n), rng.uniform(0.5, 1.0, n))
    em = (f1 > 0.8).astype(float)
    half = np.arange(n) % 2 == 0
    scores = SliceScores(
        scores=(SliceScore("f1", "f1", "score", f1, "F1"), SliceScore("exact_match", "em", "binary", em, "EM")),
        masks={"weak": weak, "even": half}, expected=["gold"] * n, observed=["answer"] * n, unit="questions")
    data = Dataset([Example(text=f"question {i}?", text_pair="context", label=(("context", 0),), id=f"q{i}")
                    for i in range(n)])
    result = SlicesProbe().run(FakeTarget(), data, SlicesParams(findings=3), scored_context(scores, seed=1))
    rows = {r["name"]: r for r in result.details["slices"]}
    for name, mask in (("weak", weak), ("even", half)):
        assert rows[name]["f1"] == pytest.approx(float(f1[mask].mean()), abs=1e-6)
        assert rows[name]["exact_match"] == pytest.approx(float(em[mask].mean()), abs=1e-6)
        assert rows[name]["f1_gap"] == pytest.approx(float(f1.mean() - f1[mask].mean()), abs=1e-6)
        assert rows[name]["drop"] == pytest.approx(float(f1[~mask].mean() - f1[mask].mean()), abs=1e-6)
        low, high = rows[name]["f1_interval"]
        assert low < rows[name]["f1"] < high
        assert rows[name]["p"] == pytest.approx(welch_p(f1[mask], f1[~mask]), abs=1e-6)
    assert rows["weak"]["flagged"] and not rows["even"]["flagged"]
    assert result.value("f1") == pytest.approx(f1.mean()) and result.value("exact_match") == pytest.approx(em.mean())
    assert result.value("slices_flagged") == 1 and result.value("worst_slice_f1") == pytest.approx(f1[weak].mean())
    # findings: the flagged slice's lowest-F1 questions first
    lowest = np.argsort(np.where(weak, f1, np.inf))[:3]
    assert [f.extra["id"] for f in result.findings] == [f"q{i}" for i in lowest]
    assert {o.name for o in result.outcomes} == {"f1", "em", "f1 on 'weak'"}
    # the flagged slice's own F1s, which a matrix pairs with the baseline's on the same questions
    sub = next(o for o in result.outcomes if o.subset_of)
    assert (sub.subset_of, sub.counted_in, sub.kind) == ("f1", "slices_flagged", "score")
    assert sub.ids == [f"q{i}" for i in np.flatnonzero(weak)] and sub.values == pytest.approx(f1[weak].tolist())
    assert rows["weak"]["outcome"] == "f1 on 'weak'"


def test_clustered_questions_widen_the_slice_intervals_and_test_the_gap_by_contexts():
    """Questions of one context share their F1 (one paragraph read well or badly): a slice whose contexts happen to
    be the weak ones looks surely weak question by question, but it holds only 6 contexts. Resampling contexts
    (the slice's and the rest's together) widens its interval and makes its test honest; the numbers equal a
    cluster bootstrap written out here."""
    from scipy.stats import t as student_t

    rng = np.random.default_rng(4)
    contexts, per = 40, 5
    level = rng.uniform(0.2, 1.0, contexts)
    level[:6] = rng.uniform(0.3, 0.8, 6)  # the slice's contexts read worse, by chance of 6 draws
    f1 = np.repeat(level, per) + rng.normal(0, 0.01, contexts * per)
    groups = [f"c{k}" for k in np.repeat(np.arange(contexts), per)]
    inside = np.arange(contexts * per) < 6 * per
    n = len(f1)

    def run(keys):
        scores = SliceScores(scores=(SliceScore("f1", "f1", "score", f1, "F1"),), masks={"few contexts": inside},
                             expected=["gold"] * n, observed=["answer"] * n, unit="questions", groups=keys)
        data = Dataset([Example(text=f"q {i}?", text_pair=groups[i], label=(("x", 0),), id=f"q{i}") for i in range(n)])
        result = SlicesProbe().run(FakeTarget(), data, SlicesParams(min_size=5), scored_context(scores, seed=3))
        return {r["name"]: r for r in result.details["slices"]}["few contexts"], result

    plain, _ = run(None)
    row, result = run(groups)
    assert row["f1"] == plain["f1"] == pytest.approx(float(f1[inside].mean()))
    width = row["f1_interval"][1] - row["f1_interval"][0]
    assert width > 1.8 * (plain["f1_interval"][1] - plain["f1_interval"][0])
    assert row["p"] > 10 * plain["p"]
    # written out: draw 40 contexts with replacement, 1000 times, the gap of the rest's mean over the slice's
    draw = np.random.default_rng(3).integers(0, contexts, size=(1000, contexts))
    sums = np.array([[f1[k * per:(k + 1) * per].sum() * (k < 6), f1[k * per:(k + 1) * per].sum() * (k >= 6)]
                     for k in range(contexts)])
    counts = np.array([[per * (k < 6), per * (k >= 6)] for k in range(contexts)], dtype=float)
    s, c = sums[draw].sum(axis=1), counts[draw].sum(axis=1)
    ok = (c > 0).all(axis=1)
    gaps = s[ok, 1] / c[ok, 1] - s[ok, 0] / c[ok, 0]
    t = abs(f1[~inside].mean() - f1[inside].mean()) / gaps.std(ddof=1)
    # referred to Student's t with 6 - 1 degrees of freedom: the slice holds 6 contexts (the rest 34)
    assert row["p"] == pytest.approx(2 * student_t.sf(t, 5), abs=1e-6)  # details round to 6 places
    # on 6 contexts the interval is Wilson's with 6 trials, the slice's mean F1 its rate
    from bertprobe.stats import wilson_interval

    want = wilson_interval(float(f1[inside].mean()) * 6, 6)
    assert row["f1_interval"] == pytest.approx([round(x, 4) for x in want], abs=1e-9)
    assert "cluster bootstrap" in result.details["figures"][0]["title"]


def test_welch_p_matches_the_z_test_written_out():
    a, b = np.array([0.1, 0.4, 0.3, 0.2]), np.array([0.9, 0.7, 0.8, 0.6, 1.0])
    se = math.sqrt(a.var(ddof=1) / 4 + b.var(ddof=1) / 5)
    z = abs(a.mean() - b.mean()) / se
    assert welch_p(a, b) == pytest.approx(math.erfc(z / math.sqrt(2)))
    assert welch_p(np.ones(5), np.ones(5)) == 1.0 and welch_p(np.ones(1), np.zeros(4)) == 1.0


def test_a_run_on_a_tiny_reader_reports_slices_per_question(tmp_path, reader):  # noqa: F811
    data = tiny_squad(tmp_path / "dev.json")
    code, output, report = run_qa(tmp_path, reader, data, "  - probe: slices\n    params: {min_size: 3, "
                                  "slices: {asks_who: '^who'}, slice_by: [title]}\n")
    assert code in (0, 1) and "Traceback" not in output, output
    (probe,) = report["probes"]
    names = {r["name"] for r in probe["details"]["slices"]}
    assert {"question word: who", "answer length 1 word", "asks_who (regex)"} <= names
    assert any(n.startswith("question-sentence overlap") for n in names)
    assert any(n.startswith("context length quartile") for n in names)
    assert {"f1", "exact_match", "slices_flagged", "slices_tested"} <= set(probe["metrics"])
    assert probe["details"]["unit"] == "questions"
    assert any(e["metric"] == "slices_flagged" and e["max"] == 0 for e in probe["expectations"])


def test_a_class_metric_on_a_reader_is_refused_in_one_line():
    from bertprobe.errors import ProbeError

    scores = SliceScores(scores=(SliceScore("f1", "f1", "score", np.ones(3), "F1"),), masks={}, expected=[""] * 3,
                         observed=[""] * 3, unit="questions")
    data = Dataset([Example(text="q?", text_pair="c", label=(("c", 0),), id=f"q{i}") for i in range(3)])
    with pytest.raises(ProbeError, match="metric 'recall' applies to classes"):
        SlicesProbe().run(FakeTarget(), data, SlicesParams(metric="recall"), scored_context(scores, seed=1))


def test_the_readers_section_answers_the_probe_the_probe_never_names_the_task():
    assert "question-answering" in SlicesProbe.tasks
    context = ProbeContext(seed=0)  # outside a run: the built-in sections
    assert context.section("slices", QuestionAnswering) is Q
    assert context.section("slices", QuestionAnswering()) is Q
