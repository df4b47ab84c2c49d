"""The behaviour probe: CheckList's MFT, INV and DIR semantics on edges, the JSONL format, templates,
perturbations, fairness gaps, one prediction per distinct text, and per-test outcomes."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from bertprobe.data import Dataset, Example
from bertprobe.errors import DataError, ProbeError
from bertprobe.probe import ProbeContext
from bertprobe.probes.behaviour.cases import read_cases
from bertprobe.probes.behaviour.lexicon import builtin_lexicons
from bertprobe.probes.behaviour.perturb import Words, catalogue
from bertprobe.probes.behaviour.probe import BehaviourParams, BehaviourProbe
from bertprobe.probes.behaviour.templates import expand_template, fillings
from bertprobe.stats import wilson_interval


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _probs(target, texts: list[str]) -> np.ndarray:
    return target.predict_proba([Example(t) for t in texts]).numpy().astype(np.float64)


TEXTS = ["the movie was good", "the movie was bad", "a dull plot", "great fun", "the acting was awful", "it is a film"]


def _run(target, tmp_path, rows, **params):
    path = _jsonl(tmp_path / "cases.jsonl", rows)
    return BehaviourProbe().run(target, None, BehaviourParams(cases=str(path), perturbations=(), bootstrap=0, **params),
                                ProbeContext(seed=1))


def test_each_type_and_edge_matches_a_direct_computation(tiny_clf, tmp_path):
    p = _probs(tiny_clf, TEXTS)
    pred = p.argmax(1)
    a, b = 0, 1  # original "good" and an edit "bad"
    delta_pos = p[b][1] - p[a][1]
    moved = abs(p[b][pred[a]] - p[a][pred[a]])
    rows = [
        # mft with label: passes iff the predicted class is the label
        {"test": "m1", "type": "mft", "text": TEXTS[0], "label": int(pred[0])},
        {"test": "m1", "type": "mft", "text": TEXTS[1], "label": "negative"},
        # mft with not_label, and several texts that must all pass
        {"test": "m2", "type": "mft", "texts": TEXTS[:3], "not_label": "positive"},
        {"test": "m2", "type": "mft", "texts": [TEXTS[3]], "not_label": 0},
        # inv: tolerance exactly met passes even when the class changes; just under it does not
        {"test": "i1", "type": "inv", "texts": [TEXTS[a], TEXTS[b]], "tolerance": float(moved)},
        {"test": "i2", "type": "inv", "texts": [TEXTS[a], TEXTS[b]], "tolerance": float(np.nextafter(moved, 0))},
        # dir: class null is the original's predicted class; tolerance exactly met passes
        {"test": "d1", "type": "dir", "texts": [TEXTS[a], TEXTS[b]],
         "expect": {"class": None, "direction": "not_down", "tolerance": float(moved)}},
        {"test": "d2", "type": "dir", "texts": [TEXTS[a], TEXTS[b], TEXTS[2]],
         "expect": {"class": "positive", "direction": "not_up"}},
    ]
    result = _run(tiny_clf, tmp_path, rows)
    expect = {
        "m1": [pred[0] == pred[0], pred[1] == 0],
        "m2": [all(pred[i] != 1 for i in range(3)), pred[3] != 0],
        "i1": [True],
        "i2": [pred[b] == pred[a]],
        "d1": [True],
        "d2": [delta_pos <= 0 and p[2][1] - p[a][1] <= 0],
    }
    for test, passed in expect.items():
        failed = sum(not x for x in passed)
        assert result.metrics[f"failure_rate.test.{test}"].value == pytest.approx(failed / len(passed)), test
        assert result.metrics[f"failure_rate.test.{test}"].ci == pytest.approx(wilson_interval(failed, len(passed)))
    rows_by_test = {t["test"]: t for t in result.details["tests"]}
    assert rows_by_test["m1"]["cases"] == 2 and rows_by_test["i2"]["type"] == "inv"
    assert result.metrics["predicted_texts"].value == len(TEXTS[:4])  # each distinct text once


def test_dir_not_down_fails_when_the_class_drops_beyond_the_tolerance(tiny_clf, tmp_path):
    p = _probs(tiny_clf, TEXTS[:2])
    drop_class = int(np.argmax(p[0] - p[1]))  # the class whose probability falls most from text 0 to text 1
    drop = p[0][drop_class] - p[1][drop_class]
    assert drop > 0
    rows = [{"test": "strict", "type": "dir", "texts": TEXTS[:2],
             "expect": {"class": drop_class, "direction": "not_down", "tolerance": float(drop) / 2}},
            {"test": "loose", "type": "dir", "texts": TEXTS[:2],
             "expect": {"class": drop_class, "direction": "not_down", "tolerance": float(drop)}}]
    result = _run(tiny_clf, tmp_path, rows)
    assert result.metrics["failure_rate.test.strict"].value == 1.0
    assert result.metrics["failure_rate.test.loose"].value == 0.0
    finding = result.findings[0]
    assert finding.title == "strict (dir)" and finding.perturbed == TEXTS[1] and finding.score == pytest.approx(-drop)


@pytest.mark.parametrize("line, message", [
    ('{"test": "t", "type": "mft", "text": "x"}', "line 2: an mft case needs exactly one of 'label' and 'not_label'"),
    ('{"test": "t", "type": "inv", "texts": ["x"]}', "line 2: key 'texts' of an inv case needs the original"),
    ('{"test": "t", "type": "dir", "texts": ["x", "y"], "expect": {"direction": "up"}}', "line 2: key 'expect.direction'"),
    ('{"test": "t", "type": "mft", "text": "x", "lable": 1}', "line 2: unknown key 'lable' .did you mean 'label'"),
    ('{"test": "t", "type": "inv", "texts": ["x", "y"], "tolerance": -1}', "line 2: key 'tolerance': expected a number"),
    ('{"test": "t", "type": "mft", "text": "x", "label": 1', "line 2: not JSON"),
    ('{"test": "t", "type": "maybe", "text": "x"}', "line 2: key 'type' must be one of mft, inv, dir"),
])
def test_a_bad_line_names_the_file_the_line_and_the_key(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"test": "ok", "type": "mft", "text": "fine", "label": 0}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=f"bad.jsonl {message}"):
        read_cases(path)


def test_a_label_the_model_lacks_is_bad_input_before_any_prediction(tiny_clf, tmp_path):
    with pytest.raises(DataError, match="'neutral' is not a class of the model; classes: negative, positive; map it with --label-map neutral=CLASS"):
        _run(tiny_clf, tmp_path, [{"test": "t", "type": "mft", "text": "x", "label": "neutral"}])


def test_templates_are_seeded_fill_every_slot_and_vary_covers_every_group():
    lexicons = builtin_lexicons()
    spec = {"test": "t", "type": "mft", "template": "{first_name} and {first_name2} found a {pos_adj} {noun}.",
            "label": "positive", "max_cases": 12}
    one = expand_template(spec, lexicons, 7, 50, "templates[0]")
    assert one == expand_template(spec, lexicons, 7, 50, "templates[0]") != expand_template(spec, lexicons, 8, 50, "x")
    assert len(one) == 12 and len({c.texts for c in one}) == 12
    for case in one:
        text = case.texts[0]
        assert "{" not in text and text[0].isupper()
        first, second = text.split(" and ")[0], text.split(" and ")[1].split(" found")[0]
        assert first != second  # two slots of one lexicon get different words
        assert " a a" not in text.lower() and not any(f" a {v}" in text for v in "aeiouAEIOU")  # "an excellent"
    varied = expand_template({"test": "r", "type": "inv", "template": "{religion} people saw the {noun}.",
                              "vary": "religion", "max_cases": 3}, lexicons, 1, 50, "t")
    assert all(c.groups == tuple(lexicons["religion"]) and len(c.texts) == len(lexicons["religion"]) for c in varied)
    with pytest.raises(ProbeError, match="no lexicon 'colour'"):
        expand_template({"test": "x", "type": "mft", "template": "{colour}", "label": 0}, lexicons, 1, 5, "templates[3]")


def test_fillings_are_distinct_give_two_slots_of_a_lexicon_two_words_and_stop_when_the_lexicon_is_spent():
    """The slot filling the classifier's, the reader's (and its origin groups') templates share."""
    import random

    lexicons = {"name": ["ann", "bob", "cat"], "colour": ["red", "blue"]}
    slots = [("colour", "colour"), ("name", "name"), ("name", "name2")]
    drawn = list(fillings(slots, lexicons, random.Random(1), 4))
    assert len(drawn) == 4 and len({tuple(d.values()) for d in drawn}) == 4
    assert all(d["name"] != d["name2"] for d in drawn)
    assert len(list(fillings([("colour", "colour")], lexicons, random.Random(1), 10))) == 2  # two words, two fillings
    assert list(fillings([], lexicons, random.Random(1), 10)) == [{}]  # no slot: the text once
    assert list(fillings(slots, lexicons, random.Random(1), 4)) == drawn  # seeded


APPLIES = {
    "typo": ("a lovely film", "!!"), "typos_2": ("a lovely film", "!!"),
    "uppercase": ("a lovely film", "123 !"), "lowercase": ("A Lovely film", "a lovely film"),
    "strip_punctuation": ("a lovely film .", "a lovely film"), "add_punctuation": ("a lovely film", None),
    "expand_contractions": ("it is n't good, isn't it", "it is not good"), "contract": ("it is not good", "it isn't good"),
    "add_url": ("a lovely film", None), "add_handle": ("a lovely film", None),
    "first_names": ("Mary liked it", "nobody liked it"), "full_names": ("John Smith liked it", "John liked it"),
    "cities": ("seen in London", "seen at home"), "countries": ("made in France", "made at home"),
    "numbers": ("it runs 120 minutes", "it runs long"), "nationality": ("a French director", "a good director"),
    "religion": ("Muslim viewers", "viewers"), "race": ("Black actors", "actors"),
    "sexual_orientation": ("a gay couple", "a couple"), "gender_identity": ("a transgender lead", "a lead"),
    "gender": ("he loved his father", "they loved it"), "add_positive": ("it was ok", None),
    "add_negative": ("it was ok", None), "intensify": ("a good film", "it isn't good"),
    "reduce": ("a bad film", "a film"), "negate": ("the film was good", "the film was not good"),
}


@pytest.mark.parametrize("name", sorted(catalogue()))
def test_each_perturbation_applies_where_it_must_and_not_where_it_cannot(name):
    pert = catalogue()[name]
    words = Words()
    words.variants = pert.variants
    applies, does_not = APPLIES[name]
    edited = pert.edit(applies, random.Random(0), words)
    assert edited and all(e.text != applies for e in edited), name
    assert edited == pert.edit(applies, random.Random(0), words)  # seeded: the same edits twice
    if does_not is not None:
        assert pert.edit(does_not, random.Random(0), words) == []
    if pert.fairness:  # an identity swap names the groups, the original's included
        assert all(e.group and e.source_group and e.group != e.source_group for e in edited)


def test_the_probe_runs_the_section_its_models_task_finds(tiny_clf):
    """Built-in tasks find their sections in the order labelsets, entities, answers; a classifier finds none (the
    probe's own code, classes.py); whatever section the lookup gives fills the probe's result."""
    from bertprobe.probes.behaviour import answers, entities, labelsets
    from bertprobe.plugins import builtin_sections
    from bertprobe.tasks import builtin_tasks

    names = ("classification", "multi-label", "token-classification", "question-answering")
    assert [builtin_sections().find("behaviour", builtin_tasks().get(n)) for n in names] == [None, labelsets, entities,
                                                                                           answers]
    from bertprobe.probes.behaviour import retrieval

    assert [e.section for e in builtin_sections() if e.probe == "behaviour"] == [labelsets, entities, answers,
                                                                                 retrieval]
    seen = []

    class Own:
        def audit(self, result, target, data, params, ctx) -> None:
            seen.append((target, data, params))
            result.add_metric("failure_rate", 0.25, False, "own")

    params = BehaviourParams()
    result = BehaviourProbe().run(tiny_clf, None, params, ProbeContext(section=lambda probe, task: Own()))
    assert seen == [(tiny_clf, None, params)] and result.probe == "behaviour"
    assert result.metrics["failure_rate"].value == 0.25


def test_perturbations_of_the_data_report_where_they_applied_and_skip_with_a_reason(tiny_clf):
    data = Dataset([Example("the movie was good .", label=1, id="a"), Example("Muslim viewers hated it", label=0, id="b")])
    params = BehaviourParams(perturbations=("typo", "religion", "cities", {"name": "add_positive", "class": "upbeat"}),
                             bootstrap=50)
    result = BehaviourProbe().run(tiny_clf, data, params, ProbeContext(seed=2))
    rows = {r["perturbation"]: r for r in result.details["perturbations"]}
    assert rows["typo"]["applied"] == 2 and rows["religion"]["applied"] == 1
    assert rows["cities"]["applied"] == 0 and "applies to none of the 2 examples" in rows["cities"]["skipped"]
    assert "the model has no class 'upbeat'" in result.details["unresolved"][0]
    assert "failure_rate.test.cities" not in result.metrics and "failure_rate.test.add_positive" not in result.metrics
    # the religion case covers every group, so its fairness entry compares all of them on one sentence
    fairness = result.details["fairness"]["religion"]
    assert set(fairness["groups"]) == set(builtin_lexicons()["religion"]) and fairness["cases"] == 1
    again = BehaviourProbe().run(tiny_clf, data, params, ProbeContext(seed=2))
    assert again.details["tests"] == result.details["tests"]


def test_fairness_gap_is_the_largest_group_difference_with_a_paired_interval():
    from bertprobe.probes.behaviour.cases import Case
    from bertprobe.probes.behaviour.classes import fairness_gaps

    cases = [Case(test="g", type="inv", texts=(f"A {i}", f"B {i}"), groups=("A", "B"), id=str(i)) for i in range(4)]
    probs = {f"A {i}": np.array([0.2, 0.8]) for i in range(4)}
    probs.update({f"B {i}": np.array([0.2 + 0.1 * i, 0.8 - 0.1 * i]) for i in range(4)})
    gaps = fairness_gaps(cases, probs, ["negative", "positive"], 200, 0)
    assert gaps["gap"] == pytest.approx(0.15) and gaps["higher"] in ("A", "B") and gaps["cases"] == 4
    assert gaps["groups"]["B"]["negative"] == pytest.approx(0.35)
    lo, hi = gaps["interval"]
    assert 0 <= lo <= 0.15 <= hi <= 0.3


def test_outcomes_pair_cases_per_test_and_the_rate_is_their_mean(tiny_clf, tmp_path):
    rows = [{"test": "m", "type": "mft", "text": t, "label": "positive", "id": f"c{i}"} for i, t in enumerate(TEXTS)]
    result = _run(tiny_clf, tmp_path, rows)
    (vector,) = [o for o in result.outcomes if o.name == "failed.m"]
    assert vector.ids == [f"c{i}" for i in range(len(TEXTS))] and vector.kind == "binary"
    assert result.metrics["failure_rate.test.m"].value == pytest.approx(np.mean(vector.values))
    assert result.metrics["failure_rate.test.m"].outcome == "failed.m"


def test_the_suite_runs_the_probe_without_data_and_gates_on_its_metrics(tmp_path, tiny_clf_dir):
    from click.testing import CliRunner

    from bertprobe.cli import main

    cases = _jsonl(tmp_path / "c.jsonl", [{"test": "m", "capability": "vocabulary", "type": "mft", "text": t,
                                            "not_label": 1} for t in TEXTS[:3]])
    suite = tmp_path / "s.yaml"
    suite.write_text(f"suite: b\nmodel: {{path: '{tiny_clf_dir}', device: cpu}}\nreport: {{dir: '{tmp_path / 'r'}'}}\n"
                     f"probes:\n  - probe: behaviour\n    params: {{cases: '{cases.name}', bootstrap: 0}}\n"
                     "    expect: {'failure_rate.capability.vocabulary': {max: 1.0}}\n")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code == 0, result.output
    report = json.loads(next((tmp_path / "r").glob("b-*/report.json")).read_text())
    assert report["probes"][0]["status"] == "passed" and report["probes"][0]["metrics"]["cases"] == 3


def test_the_terminal_note_names_the_worst_test_beside_failed_expectations():
    from bertprobe.reporters.summary import note
    from bertprobe.results import Expectation, ProbeResult

    result = ProbeResult(probe="behaviour", status="passed", details={"key_finding": "worst test: negation (60/60 failed)"})
    assert note(result) == "worst test: negation (60/60 failed)"
    result.status = "failed"
    result.add_metric("failure_rate", 0.6, False)
    result.expectations = [Expectation("failure_rate", max=0.5)]
    result.expectations[0].check(0.6)
    assert note(result) == "failure_rate 0.6 (expected <= 0.5); worst test: negation (60/60 failed)"
    # a plugin's probe that passes without a key finding still says something: its first metric
    bare = ProbeResult(probe="plugin", status="passed")
    bare.add_metric("seconds", 3.0, False, kind="cost")
    bare.add_metric("consistency", 0.97, True)
    assert note(bare) == "consistency 0.97"


def test_text_pairs_a_perturbation_edits_the_field_it_names_and_jsonl_takes_pairs(tiny_clf, tmp_path):
    data = Dataset([Example("the movie was good", text_pair="a lovely film", label=1, id="p0")])
    params = BehaviourParams(perturbations=({"name": "uppercase", "field": "text_pair"},), bootstrap=0)
    result = BehaviourProbe().run(tiny_clf, data, params, ProbeContext(seed=0))
    assert result.details["perturbations"][0]["applied"] == 1
    finding_or_none = [f for f in result.findings if f.title.startswith("uppercase")]
    cases_file = _jsonl(tmp_path / "pairs.jsonl", [{"test": "pair", "type": "inv",
                                                    "texts": [["the movie was good", "a lovely film"],
                                                              ["the movie was good", "A LOVELY FILM"]]}])
    (case,) = read_cases(cases_file)
    assert case.texts[1] == ("the movie was good", "A LOVELY FILM")
    p = tiny_clf.predict_proba([Example("the movie was good", text_pair=t) for t in ("a lovely film", "A LOVELY FILM")])
    flipped = int(p[0].argmax()) != int(p[1].argmax())
    pairs = BehaviourProbe().run(tiny_clf, None, BehaviourParams(cases=str(cases_file), perturbations=(), bootstrap=0),
                                 ProbeContext(seed=0))
    assert pairs.metrics["failure_rate.test.pair"].value == float(flipped)
    assert result.metrics["failure_rate.test.uppercase"].value == float(flipped) == float(bool(finding_or_none))


def test_a_slot_followed_by_s_takes_the_words_plural():
    from bertprobe.probes.behaviour.templates import fill

    text = "I don't think, given my history with {noun}s, that this {noun2} is good."
    assert fill(text, {"noun": "story", "noun2": "film"}) == "I don't think, given my history with stories, that this film is good."
    assert fill("{noun}s and {noun2}s", {"noun": "actress", "noun2": "day"}) == "Actresses and days"
    assert fill("{noun}s", {"noun": "film"}) == "Films" and fill("{noun} is", {"noun": "story"}) == "Story is"
