"""spurious-cues and the arct loader: hand-computed statistics, rule-following fake models, real data."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import SHARED, only_run

from bertprobe.data import Dataset, DataSpec, Example
from bertprobe.data.arct import ArctLoader, load_arct_file
from bertprobe.errors import DataError
from bertprobe.probe import ProbeContext
from bertprobe.probes.spurious_cues.probe import CueParams, SpuriousCuesProbe
from bertprobe.probes.spurious_cues.stats import choice_cues, choice_grams, label_cues, top_cues, words
from bertprobe.results.report import Expectation
from bertprobe.stats import wilson_interval
from bertprobe.tasks.base import Task

HEADER = "#id\twarrant0\twarrant1\tcorrectLabelW0orW1\treason\tclaim\tdebateTitle\tdebateInfo\n"


def write_arct(path: Path, rows: list[tuple[str, str, int, str, str]]) -> Path:
    lines = [f"id{i}\t{w0}\t{w1}\t{y}\t{r}\t{c}\tTitle\tInfo" for i, (w0, w1, y, r, c) in enumerate(rows)]
    path.write_text(HEADER + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_words_and_contractions():
    assert words("They DON'T care; it isn’t so, cannot be!") == ["they", "do", "not", "care", "it", "is", "not", "so", "can", "not", "be"]
    assert words("They don't", normalize_contractions=False) == ["they", "don", "t"]


def test_choice_cue_statistics_by_hand():
    choices = [("it is not good", "it is good"), ("bad", "not bad"), ("x not", "y not"), ("a", "b")]
    labels = [0, 0, 1, 1]
    cues = {c.cue: c for c in choice_cues(choices, labels, sizes=(1,))}
    # 'not' is in one warrant only for points 0 and 1 (alpha 2) and in the correct one for point 0 only
    assert (cues["not"].applicability, cues["not"].hits) == (2, 1)
    assert cues["not"].productivity == 0.5 and cues["not"].coverage == 0.5
    assert "it" not in cues  # in both warrants: never applicable
    smoothed = {c.cue: c for c in choice_cues(choices, labels, sizes=(1,), smoothing=1)}
    assert smoothed["not"].productivity == pytest.approx((1 + 1) / (2 + 2))
    bigrams = {c.cue for c in choice_cues(choices, labels, sizes=(2,))}
    assert "not good" in bigrams and "not" not in bigrams
    sets, applicable = choice_grams(("It isn't red", "it is red", "it is blue"), (1,))
    assert sets[0] == {"it", "is", "not", "red"} and applicable == {"not", "red", "blue"}
    assert choice_grams((), (1,)) == ([], set())


def test_label_cue_statistics_and_ranking():
    texts = ["good film", "good fun", "good but bad", "bad film", "the end", "the bad"]
    labels = [1, 1, 1, 0, 0, 0]
    cues = {c.cue: c for c in label_cues(texts, labels, 2, sizes=(1,))}
    assert (cues["good"].applicability, cues["good"].productivity, cues["good"].label) == (3, 1.0, 1)
    assert (cues["bad"].applicability, cues["bad"].productivity, cues["bad"].label) == (3, pytest.approx(2 / 3), 0)
    ranked = top_cues(list(cues.values()), 0.5, 3, min_applicability=2)
    # excess score: good (1-.5)*3/6 = .25 > the (1-.5)*2/6 = .167 > bad (2/3-.5)*3/6 = .083
    assert [c.cue for c in ranked] == ["good", "the", "bad"]
    assert [c.cue for c in top_cues(list(cues.values()), 0.5, 2, min_applicability=2, rank="product")] == ["good", "bad"]
    assert [c.cue for c in top_cues(list(cues.values()), 0.5, 5, min_applicability=3, label=0)] == ["bad"]


def test_arct_loader_reads_bare_quotes_and_adversarial_quoting(tmp_path):
    original = write_arct(tmp_path / "test-full.txt", [('he said "no', "she agreed", 1, "r0", "c0"), ("a", "b", 0, "r1", "c1")])
    data = load_arct_file(original)
    assert data.examples[0].choices == ('he said "no', "she agreed") and data.examples[0].text == "c0 r0"
    assert data.examples[0].meta["claim"] == "c0" and data.examples[0].label == 1
    adv = tmp_path / "test-adv.csv"
    adv.write_text(
        "#id\twarrant0\twarrant1\treason\tclaim\tdebateTitle\tdebateInfo\tcorrectLabelW0orW1\tadversarial\n"
        'id0\t"he said ""no"\tshe agreed\tr0\tc0\tT\tI\t1\tFalse\n'
        "id0-adversarial\the said \"\"no\tshe agreed\tr0\tnot c0\tT\tI\t0\tTrue\n",
        encoding="utf-8",
    )
    both = load_arct_file(adv)
    assert [ex.label for ex in both.examples] == [1, 0]
    assert both.examples[0].choices == ('he said "no', "she agreed")
    assert [ex.meta["flagged"] for ex in both.examples] == [False, True]
    assert len(load_arct_file(adv, "flagged")) == 1
    loader = ArctLoader()
    assert len(loader.load(DataSpec(path=f"{original},{adv}"))) == 4
    with pytest.raises(DataError, match="not an ARCT file"):
        (tmp_path / "x.txt").write_text("a\tb\n1\t2\n")
        load_arct_file(tmp_path / "x.txt")
    with pytest.raises(DataError, match="unknown option"):
        loader.load(DataSpec(path=str(original), options={"row": "all"}))


@dataclass
class RuleTarget:
    """A 'model' that follows one rule, so every probe number can be derived by hand."""

    rule: str
    label_names: list[str]
    tokenizer: object = None
    task: Task = Task()  # a class task, no section of the probe: its cue statistics

    def predict(self, examples, batch_size=None):
        if self.rule == "not":  # pick the choice with 'not' in it, else the first
            return [next((j for j, c in enumerate(ex.choices) if "not" in words(c)), 0) for ex in examples]
        return [int("good" in words(ex.text)) for ex in examples]  # positive iff 'good'


class _Tok:
    mask_token = "[MASK]"


def test_cue_following_choice_model_is_exposed(tmp_path):
    rows = [("it is not fair", "it is fair", 0, f"reason {i}", f"claim {i}") for i in range(6)]
    rows += [("it works", "it does not work", 1, f"reason {i}", f"claim {i}") for i in range(6, 10)]
    rows += [("it is fine", "it is not fine", 0, f"reason {i}", f"claim {i}") for i in range(10, 12)]
    path = write_arct(tmp_path / "t.txt", rows)
    adv = tmp_path / "adv.txt"  # negated claims, labels swapped: the cue now points the wrong way
    write_arct(adv, [(w0, w1, 1 - y, r, f"not {c}") for w0, w1, y, r, c in rows])
    data = ArctLoader().load(DataSpec(path=str(path)))
    target = RuleTarget("not", [], _Tok())
    ctx = ProbeContext(load_data=lambda spec: ArctLoader().load(spec))
    params = CueParams(min_applicability=2, ngrams=(1,), adversarial_path=str(adv))
    result = SpuriousCuesProbe().run(target, data, params, ctx)
    assert result.details["top_cue"] == "not"
    assert result.value("cue_productivity_top") == pytest.approx(10 / 12) and result.value("cue_coverage_top") == 1.0
    assert result.value("accuracy_full") == pytest.approx(10 / 12)
    # the rule ignores claim and reason: every partial input scores the same as the full one
    for name in ("accuracy_warrant_only", "accuracy_reason_warrant", "accuracy_claim_warrant"):
        assert result.value(name) == result.value("accuracy_full")
    assert result.value("accuracy_adversarial") == pytest.approx(2 / 12)
    # inserting 'not' into the wrong warrant of a correctly answered point: the rule then picks warrant 0
    assert result.details["cue_flip_examples"] == 10
    assert result.value("cue_flip_rate") == pytest.approx(4 / 10)
    # every share carries its Wilson interval and per-example outcomes, so gates judge it on its interval and
    # a comparison of two models pairs the same examples (McNemar) instead of comparing two means
    assert result.metrics["accuracy_adversarial"].ci == pytest.approx(wilson_interval(2, 12))
    assert result.metrics["cue_flip_rate"].ci == pytest.approx(wilson_interval(4, 10))
    outcomes = {o.name: o for o in result.outcomes}
    for name in ("accuracy_full", "accuracy_warrant_only", "accuracy_reason_warrant", "accuracy_claim_warrant",
                 "accuracy_adversarial", "cue_flip_rate"):
        assert result.metrics[name].outcome == name and result.metrics[name].ci is not None
        assert sum(outcomes[name].values) / len(outcomes[name].values) == pytest.approx(result.value(name))
    assert outcomes["accuracy_full"].ids == [ex.id for ex in data.examples]
    assert len(outcomes["accuracy_adversarial"].ids) == 12 and len(outcomes["cue_flip_rate"].ids) == 10
    low, high = wilson_interval(2, 12)
    assert result.details["key_finding"] == (f"top cue 'not' (productivity 0.83, coverage 1.00); adversarial 0.17 "
                                             f"[{low:.2f}, {high:.2f}]; warrants only 0.83 [0.55, 0.95]; "
                                             "flipped by an inserted cue 0.40 [0.17, 0.69]")
    warrant_only = Expectation("accuracy_warrant_only", max=0.75, interval=True)
    assert warrant_only.check(result.value("accuracy_warrant_only"), result.metrics["accuracy_warrant_only"].ci)
    assert not Expectation("accuracy_warrant_only", max=0.75).check(result.value("accuracy_warrant_only"))


def test_cue_following_classifier_is_exposed():
    texts = [("a good film", 1), ("good fun", 1), ("so good", 1), ("the good one", 1),
             ("a bad film", 0), ("bad fun", 0), ("so bad", 0), ("the bad one", 0)]
    data = Dataset([Example(t, label=y) for t, y in texts], name="toy")
    target = RuleTarget("good", ["negative", "positive"], _Tok())
    result = SpuriousCuesProbe().run(target, data, CueParams(min_applicability=2, ngrams=(1,), top=2), ProbeContext())
    assert {c["cue"] for c in result.details["top_cues"]} == {"good", "bad"}
    assert result.value("accuracy_full") == 1.0
    assert result.value("accuracy_cues_only") == 1.0  # the cue words alone suffice
    assert result.value("accuracy_cues_masked") == 0.5  # without 'good' every positive turns negative
    # 'good' inserted into the 4 negatives flips them all; 'bad' inserted into positives flips none
    assert result.value("cue_flip_rate") == 0.5
    assert result.details["cue_flip_prefixes"] == {"negative": "bad", "positive": "good"}


def test_multiple_choice_tiny_model_through_the_suite(tmp_path):
    from click.testing import CliRunner

    from bertprobe.cli import main
    from bertprobe.testing import save_tiny_model

    model = save_tiny_model(tmp_path / "mc", task="multiple-choice", labels=("0", "1"))
    rows = [("the film is good", "the film is not good", i % 2, "it was fun", "movies are great") for i in range(10)]
    data = write_arct(tmp_path / "arct.txt", rows)
    suite = tmp_path / "arct.yaml"
    suite.write_text(
        f"suite: arct-tiny\nmodel: {{path: '{model}', device: cpu}}\ndata: {{loader: arct, path: '{data}'}}\n"
        f"report: {{dir: '{tmp_path / 'out'}'}}\nprobes:\n  - probe: accuracy\n    expect: {{'*': off}}\n"
        "  - probe: spurious-cues\n    params: {min_applicability: 1, ngrams: [1]}\n"
    )
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code == 5, result.output  # accuracy's defaults off, spurious-cues has none: nothing checked
    _, report = only_run(tmp_path / "out", "arct-tiny")
    acc, cues = report["probes"]
    assert set(acc["metrics"]) >= {"accuracy", "accuracy_0", "accuracy_1"}
    assert cues["metrics"]["accuracy_full"] == pytest.approx(acc["metrics"]["accuracy"], abs=1e-6)
    assert cues["details"]["top_cue"] == "not"


ARCT = SHARED / "data" / "arct" / "original"


@pytest.mark.skipif(not ARCT.is_dir(), reason="../shared ARCT data not present")
def test_not_cue_on_real_arct_meets_the_bar():
    data = ArctLoader().load(DataSpec(path=",".join(str(ARCT / f"{s}-full.txt") for s in ("train", "dev", "test"))))
    assert len(data) == 1970
    labels = [ex.label for ex in data.examples]
    norm = {c.cue: c for c in choice_cues([ex.choices for ex in data.examples], labels)}["not"]
    lit = {c.cue: c for c in choice_cues([ex.choices for ex in data.examples], labels, normalize_contractions=False)}["not"]
    assert (round(norm.productivity, 3), round(norm.coverage, 3)) == (0.666, 0.617)
    assert (round(lit.productivity, 3), round(lit.coverage, 3)) == (0.659, 0.352)


def test_cue_flip_matches_whole_words_only():
    rows = [Example("c r", choices=("nothing is fair", "not fair"), label=1, meta={"claim": "c", "reason": "r"})]
    target = RuleTarget("not", [], _Tok())
    result = SpuriousCuesProbe().run(target, Dataset(rows, name="t"), CueParams(min_applicability=1, ngrams=(1,)), ProbeContext())
    # 'nothing' does not contain the cue word 'not', so the wrong warrant is eligible for the insertion
    assert result.details["cue_flip_examples"] == 1 and result.value("cue_flip_rate") == 1.0


def test_a_reader_finds_the_probes_section_and_a_task_still_defining_audit_cues_is_refused():
    """A reader's partial inputs are the probe's section (probes/spurious_cues/answers.py, for span_answers), no
    Task method: a plugin task still defining ``audit_cues`` is refused when it registers, naming the section hook."""
    from typing import ClassVar

    from bertprobe.errors import PluginError
    from bertprobe.hookmarkers import hookimpl
    from bertprobe.plugins import build_plugins
    from bertprobe.probes.spurious_cues import answers
    from bertprobe.tasks import QuestionAnswering, SingleLabelClassification

    context = ProbeContext()
    assert context.section("spurious-cues", QuestionAnswering()) is answers
    assert context.section("spurious-cues", Task()) is None

    @dataclass(frozen=True)
    class OldReader(SingleLabelClassification):
        name: ClassVar[str] = "old-cues"

        def audit_cues(self, result, target, data, params, ctx):
            return True

    class OldPlugin:
        @hookimpl
        def bertprobe_register_tasks(self, registry):
            registry.add(OldReader)

    with pytest.raises(PluginError, match=r"^task 'old-cues' from plugin '.*' defines audit_cues, which bertprobe no "
                                          r"longer calls: register a section of probe 'spurious-cues' for the task "
                                          r"instead \(registry.add\(PROBE, SECTION, task='old-cues'\) in a "
                                          r"bertprobe_register_sections hook"):
        build_plugins(extra=[OldPlugin()], entry_points=False)
