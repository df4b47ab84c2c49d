"""Behaviour tests of a NER model: word maps that carry entities through every edit, entity swaps, the
JSONL cases and templates with entity slots, verdicts, and recall of persons by surname origin."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from bertprobe.errors import DataError, ProbeError
from bertprobe.probes.behaviour.entities import _decoder, origin_recall
from bertprobe.probes.behaviour.entities_cases import (
    EntityCase,
    entity_case_from_mapping,
    expand_entity_template,
    judge_entities,
)
from bertprobe.probes.behaviour.entities_edits import EntityWords, Tagged, entity_catalogue, follow, model_types
from bertprobe.probes.behaviour.lexicon import builtin_lexicons, edits, keyboard, origins
from bertprobe.tasks.entities import marked

TYPES = {"person": "PER", "place": "LOC", "organisation": "ORG"}
# hand-written sentences: a multi-word entity, entities at both ends, a split contraction, an unsplit one,
# punctuation inside and at the end, a word the tokenizer splits into sub-words (Kindall@ENRON)
SENTENCES = [
    Tagged(("Maria", "Lopez", "moved", "to", "Buenos", "Aires", "in", "May", "."), ((0, 2, "PER"), (4, 6, "LOC"))),
    Tagged(("I", "do", "n't", "work", "for", "Deutsche", "Bank", "anymore", "!"), ((5, 7, "ORG"),)),
    Tagged(("Ed", "isn't", "at", "the", "U.N.", ",", "ask", "Kevin", "Kindall@ENRON"), ((0, 1, "PER"), (4, 5, "ORG"),
                                                                                          (7, 9, "PER"))),
    Tagged(("what", "is", "this", "Miramar", "?", "?"), ((3, 4, "LOC"),)),
    Tagged(("Lima", "is", "not", "in", "Chile"), ((0, 1, "LOC"), (4, 5, "LOC"))),
]


def words_for() -> EntityWords:
    return EntityWords(lexicons=builtin_lexicons(), edits=edits(), keys=keyboard(), types=TYPES, origins=origins(),
                       variants=3)


@pytest.mark.parametrize("name", [n for n, p in entity_catalogue().items() if not p.family])
def test_every_edit_carries_the_gold_entities_to_the_same_words(name):
    """After an edit that keeps the entities, each gold span covers the same words (up to the edit's case)."""
    pert = entity_catalogue()[name]
    applied = 0
    for n, sent in enumerate(SENTENCES):
        words = words_for()
        words.variants = pert.variants
        for edited in pert.edit(sent, random.Random(f"{name}{n}"), words):
            applied += 1
            assert len(edited.wmap) == len(sent.words)
            assert len(edited.gold) == len(sent.gold)
            for (a, b, kind), (c, d, kind2) in zip(sorted(sent.gold), sorted(edited.gold)):
                assert kind == kind2
                assert [w.lower() for w in edited.words[c:d]] == [w.lower() for w in sent.words[a:b]], (name, edited.words)
            untouched = [i for i in range(len(edited.words)) if i not in edited.changed]
            assert all(edited.words[i] in sent.words for i in untouched)
    assert applied, f"{name} applied to none of the hand-written sentences"


def test_word_maps_of_splits_drops_and_insertions():
    cat, words = entity_catalogue(), words_for()
    expanded = cat["expand_contractions"].edit(SENTENCES[2], random.Random(0), words)[0]
    assert expanded.words[:4] == ("Ed", "is", "not", "at") and expanded.wmap[1] == (1, 3)
    assert marked(expanded.words, expanded.gold) == "[PER Ed] is not at the [ORG U.N.] , ask [PER Kevin Kindall@ENRON]"
    assert cat["expand_contractions"].edit(SENTENCES[1], random.Random(0), words)[0].words[1:3] == ("do", "not")
    assert cat["contract"].edit(expanded, random.Random(0), words)[0].words[1:3] == ("is", "n't")
    stripped = cat["strip_punctuation"].edit(SENTENCES[3], random.Random(0), words)[0]
    assert stripped.words == ("what", "is", "this", "Miramar") and stripped.wmap[4:] == ((4, 4), (4, 4))
    before = cat["add_context_before"].edit(SENTENCES[0], random.Random(1), words)[0]
    shift = len(before.words) - len(SENTENCES[0].words)
    assert shift > 0 and before.gold == ((shift, shift + 2, "PER"), (shift + 4, shift + 6, "LOC"))
    # a span whose words are all dropped is gone; a span partly dropped keeps its surviving words
    assert follow([(0, 2, "PER"), (3, 4, "LOC")], ((0, 1), (1, 1), (1, 2), (2, 2))) == ((0, 1, "PER"),)


@pytest.mark.parametrize("name,family", [("swap_person", "PER"), ("swap_place", "LOC"), ("swap_organisation", "ORG")])
def test_entity_swaps_move_the_expected_tags_with_the_new_span(name, family):
    lexicons = builtin_lexicons()
    pool = {"PER": lexicons["first_name"] + lexicons["last_name"], "LOC": lexicons["city"] + lexicons["country"],
            "ORG": lexicons["organisation"]}[family]
    sent = next(s for s in SENTENCES if any(k == family for _, _, k in s.gold))
    edits_ = entity_catalogue()[name].edit(sent, random.Random(5), words_for())
    assert len(edits_) >= 2
    for edited in edits_:
        new = [s for s in edited.gold if s[2] == family]
        old = [s for s in sent.gold if s[2] == family]
        assert len(new) == len(old)
        for a, b, _ in new:
            phrase = " ".join(edited.words[a:b])
            assert phrase in pool or all(w in pool for w in edited.words[a:b]), phrase
        kept = [s for s in sent.gold if s[2] != family]  # the other entities keep their words
        assert [edited.words[a:b] for a, b, k in edited.gold if k != family] == [sent.words[a:b] for a, b, _ in kept]


def test_the_origin_test_holds_the_same_sentence_for_five_groups_and_changes_only_surnames():
    sent = SENTENCES[0]
    words = words_for()
    words.variants = 2
    texts = entity_catalogue()["person_origin"].edit(sent, random.Random(3), words)
    groups = [t.group for t in texts]
    assert len(set(groups)) == 5 and len(texts) == 10 and len(origins()) >= 5
    for t in texts:
        assert t.words[0] == "Maria" and t.words[1] in origins()[t.group]  # first name kept, surname of the group
        assert t.words[2:] == sent.words[2:] and t.gold == sent.gold


def test_the_jsonl_cases_read_mft_inv_and_maps_and_name_a_bad_line(tmp_path):
    from bertprobe.probes.behaviour.cases import read_cases

    decode = _decoder(["LOC", "ORG", "PER"])
    lines = [
        {"test": "names", "type": "mft", "tokens": ["Ask", "Maria", "Lopez", "."], "tags": ["O", "B-PER", "I-PER", "O"]},
        {"test": "lower", "type": "inv", "tokens": [["Ask", "Maria", "."], ["ask", "maria", "."]],
         "tags": [["O", "B-PER", "O"], ["O", "B-PER", "O"]]},
        {"test": "split", "type": "inv", "tokens": [["Ed", "isn't", "here"], ["Ed", "is", "not", "here"]],
         "maps": [[[0, 1], [1, 3], [3, 4]]]},
        {"test": "bioes", "type": "mft", "tokens": ["Maria", "Lopez"], "tags": ["B-PER", "E-PER"]},
    ]
    path = tmp_path / "ner.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    cases = read_cases(path, lambda raw, where, source: entity_case_from_mapping(raw, where, decode, source))
    assert cases[0].sentences[0].gold == ((1, 3, "PER"),) and cases[3].sentences[0].gold == ((0, 2, "PER"),)
    assert cases[2].sentences[1].wmap == ((0, 1), (1, 3), (3, 4)) and not cases[2].has_gold
    bad = [
        ({"test": "t", "type": "mft", "tokens": ["Ask", "Maria"], "tags": ["O", "B-PERSON"]}, "'PERSON' (in B-PERSON) is not the model's (LOC, ORG, PER) (did you mean 'PER'?)"),
        ({"test": "t", "type": "inv", "tokens": [["a", "b"], ["a"]]}, "give 'maps'"),
        ({"test": "t", "type": "inv", "tokens": [["a", "b"], ["a"]], "maps": [[[0, 1], [1, 3]]]}, "not a [start, end) within the 1 new words"),
        ({"test": "t", "type": "dir", "tokens": ["a"]}, "a dir case does not apply to a token-classification model"),
        ({"test": "t", "type": "mft", "tokens": ["a", "b"], "tags": ["O"]}, "text 1 has 2 words"),
        ({"test": "t", "type": "mft", "text": "a b"}, "unknown key 'text'"),
    ]
    for raw, message in bad:
        path.write_text(json.dumps(lines[0]) + "\n" + json.dumps(raw) + "\n", encoding="utf-8")
        with pytest.raises(DataError) as err:
            read_cases(path, lambda raw, where, source: entity_case_from_mapping(raw, where, decode, source))
        assert f"{path} line 2" in str(err.value) and message in str(err.value)


def test_a_template_computes_its_expected_entities_from_the_filled_slots():
    lexicons = {**builtin_lexicons(), "city": ["Mexico City", "Lima"], "company": ["Deutsche Bank"]}
    cases = expand_entity_template({"test": "moves", "template": "{first_name} {last_name} moved to {city} to work for {company}.",
                                    "max_cases": 6}, lexicons, TYPES, 13, 100, "templates[0]")
    assert len(cases) == 6
    for case in cases:
        sent = case.sentences[0]
        assert sent.words[-1] == "." and sent.words[2:4] == ("moved", "to")
        kinds = [k for _, _, k in sent.gold]
        assert kinds == ["PER", "LOC", "ORG"]  # first and last name: one person
        (a, b, _), (c, d, _), (e, f, _) = sent.gold
        assert b - a == 2 and " ".join(sent.words[c:d]) in ("Mexico City", "Lima") and sent.words[e:f] == ("Deutsche", "Bank")
    mapped = expand_entity_template({"test": "own", "template": "Call {first_name} at {thing}", "entities": {"thing": "ORG"}},
                                    {**lexicons, "thing": ["Acme"]}, TYPES, 1, 3, "templates[1]")
    assert mapped[0].sentences[0].gold[-1] == (3, 4, "ORG")
    with pytest.raises(ProbeError, match="a person, a type the model does not have"):
        expand_entity_template({"template": "{first_name} left"}, lexicons, {"place": "LOC"}, 1, 3, "templates[2]")
    with pytest.raises(ProbeError, match="no entity slot"):
        expand_entity_template({"template": "{pos_adj} day"}, lexicons, TYPES, 1, 3, "templates[3]")


def test_verdicts_compare_predictions_with_gold_or_with_the_originals_carried_through_the_map():
    sent = SENTENCES[2]
    edited = entity_catalogue()["expand_contractions"].edit(sent, random.Random(0), words_for())[0]
    case = EntityCase("split", "inv", (sent, edited))
    original_pred = ((0, 1, "PER"), (7, 8, "PER"))  # the model misses Kindall@ENRON and the U.N. on both: invariant
    same = judge_entities(case, [original_pred, ((0, 1, "PER"), (8, 9, "PER"))])
    assert same.passed
    moved = judge_entities(case, [original_pred, ((0, 1, "PER"), (8, 10, "PER"))])
    assert not moved.passed and moved.worst == 1 and moved.expected == ((0, 1, "PER"), (8, 9, "PER"))
    mft = EntityCase("names", "mft", (SENTENCES[0],))
    assert judge_entities(mft, [SENTENCES[0].gold]).passed
    assert not judge_entities(mft, [((0, 1, "PER"), (4, 6, "LOC"))]).passed  # a boundary error fails strictly


def test_recall_by_origin_gap_and_its_interval_from_known_predictions():
    groups = list(origins())
    rng = random.Random(0)
    cases, predicted = [], {}
    for n in range(80):
        original = Tagged(("Meet", "Ana", f"Name{n}", "."), ((1, 3, "PER"),))
        texts = []
        for g, group in enumerate(groups):
            t = Tagged(("Meet", "Ana", f"{group}{n}", "."), ((1, 3, "PER"),), group=group)
            texts.append(t)
            hit = rng.random() < (0.5 if g == 4 else 0.9)  # the fifth group is found half as often
            predicted[t.words] = ((1, 3, "PER"),) if hit else ()
        predicted[original.words] = ((1, 3, "PER"),)
        cases.append(EntityCase("person_origin", "inv", (original, *texts)))
    gaps = origin_recall(cases, predicted, "PER", 500, 0)
    truth = {g: np.mean([bool(predicted[c.sentences[1 + i].words]) for c in cases]) for i, g in enumerate(groups)}
    assert gaps["recall"] == {g: pytest.approx(v, abs=1e-4) for g, v in truth.items()}
    assert gaps["lower"] == groups[4] and gaps["gap"] == pytest.approx(max(truth.values()) - truth[groups[4]], abs=1e-4)
    lo, hi = gaps["interval"]
    assert lo < gaps["gap"] < hi and lo > 0.1  # clearly unfair: the whole interval lies above 0.1


def test_model_types_find_the_models_names_for_each_family():
    assert model_types(["PERSON", "GPE", "ORG", "MISC"]) == {"person": "PERSON", "place": "GPE", "organisation": "ORG"}
    assert model_types(["LOC"]) == {"place": "LOC"}


def test_the_probe_runs_every_ner_test_on_a_tagger_through_the_suite(tmp_path):
    """End to end on a tiny tagger: perturbations of the data, a template and a JSONL file in one run; each test
    has a failure rate, outcomes per case, the origin test a recall per group and a gated gap."""
    from test_ner import run, sentences, write_forms

    from bertprobe.testing import save_tiny_model

    model = save_tiny_model(tmp_path / "m", task="token-classification", labels=("O", "B-PER", "I-PER", "B-LOC", "I-LOC"), seed=2)
    rows = sentences(40)
    data = write_forms(tmp_path / "d", rows)["uner"]
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"test": "own", "type": "mft", "tokens": ["Ask", "Ana"], "tags": ["O", "B-PER"]}) + "\n",
                     encoding="utf-8")
    probes = ("  - probe: behaviour\n    params:\n      bootstrap: 100\n      cases: " + str(cases) + "\n"
              "      templates: [{test: moves, template: '{first_name} went to {city}', max_cases: 5}]\n")
    code, output, report = run(tmp_path / "r", model, data, probes)
    assert report is not None, output
    probe = report["probes"][0]
    metrics, tests = probe["metrics"], {t["test"]: t for t in probe["details"]["tests"]}
    assert {"typo", "uppercase", "swap_person", "swap_place", "person_origin", "moves", "own"} <= set(tests)
    assert "swap_organisation" in [r["perturbation"] for r in probe["details"]["perturbations"] if "skipped" in r]
    assert tests["moves"]["cases"] == 5 and tests["own"]["cases"] == 1
    (run_dir,) = (tmp_path / "r" / "out").glob("ner-*")
    outcomes = {r["name"]: r for r in map(json.loads, (run_dir / "outcomes.jsonl").read_text().splitlines())}
    for name, row in tests.items():
        outcome = outcomes[f"failed.{name}"]
        assert sum(outcome["values"]) == row["failed"] and len(outcome["values"]) == row["cases"]
    fairness = probe["details"]["fairness"]["person_origin"]
    assert len(fairness["recall"]) == 5 and set(fairness["entities"].values()) == {fairness["entities"]["Hispanic"]}
    assert metrics["fairness_gap.person_origin"] == pytest.approx(fairness["gap"])
    assert metrics["max_fairness_gap"] == pytest.approx(fairness["gap"])
    assert (code == 1) == (fairness["interval"][0] > 0.1 or any(
        metrics[k] > 0.35 for k in metrics if k.startswith("failure_rate.capability.")))
