"""Jia & Liang's adversarial SQuAD files (AddSent, AddOneSent): variants recognised by their ids, declared or
detected, and scored as the authors scored them (per original, the lowest F1 over it and its variants)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import only_run
from test_qa_accuracy import audit, plain_scores, target, write_suite  # noqa: F401 (fixtures; reader: conftest)

from bertprobe.cli import main
from bertprobe.data.dataset import Dataset, DataSpec, Example
from bertprobe.errors import DataError
from bertprobe.stats import paired_bootstrap_diff
from bertprobe.tasks import qa_adversarial
from bertprobe.tasks.spans import Answer

CTX1 = "Peyton Manning became the first quarterback to lead two teams to the Super Bowl. He is 39 years old."
ADD1 = " Quarterback Jeff Dean had jersey number 37 in Champ Bowl XXXIV."
ADD1B = " Jeff Dean was the first quarterback to lead two teams to the Champ Bowl."
CTX2 = "The Broncos won Super Bowl 50 in Santa Clara."
ADD2 = " The Champ Bowl 40 was played in Chicago."
Q1 = "Who was the first quarterback to lead two teams to the Super Bowl?"
Q2 = "Where was Super Bowl 50 played?"
# (id, question, context, gold, prediction): two originals and three variants, each prediction's F1 known by hand
CASES = [
    ("o1", Q1, CTX1, "Peyton Manning", "Peyton Manning"),                   # F1 1, EM 1
    ("o1-high-conf", Q1, CTX1 + ADD1, "Peyton Manning", "Jeff Dean"),       # F1 0 (the distractor's answer)
    ("o1-high-conf-turk0", Q1, CTX1 + ADD1B, "Peyton Manning", "Peyton"),   # F1 2/3 (P 1, R 1/2), EM 0
    ("o2", Q2, CTX2, "Santa Clara", "in Santa Clara"),                      # F1 0.8 (P 2/3, R 1), EM 0
    ("o2-high-conf-turk0", Q2, CTX2 + ADD2, "Santa Clara", "Santa Clara"),  # F1 1, EM 1
]
F1 = {"o1": 1.0, "o1-high-conf": 0.0, "o1-high-conf-turk0": 2 / 3, "o2": 0.8, "o2-high-conf-turk0": 1.0}
EM = {"o1": 1.0, "o1-high-conf": 0.0, "o1-high-conf-turk0": 0.0, "o2": 0.0, "o2-high-conf-turk0": 1.0}


def examples() -> list[Example]:
    return [Example(q, c, ((g, c.index(g)),), id=i) for i, q, c, g, _ in CASES]


def answers() -> list[Answer]:
    return [Answer(p, c.index(p), c.index(p) + len(p), 1.0, 0.5, 0.0, 1) for _, _, c, _, p in CASES]


def read(target, exs, options=None) -> Dataset:  # noqa: F811
    return target.task.read_labels(Dataset(exs, "hand.json"), DataSpec(path="hand.json", options=options or {}), "m")


@pytest.mark.parametrize("options", [{}, {"adversarial": "jia-liang"}])
def test_two_originals_and_three_variants_give_the_adversarial_score_computed_by_hand(target, options):  # noqa: F811
    data = read(target, examples(), options)
    result = audit(target, data.examples, answers(), bootstrap=300)
    m = result.metrics
    # by hand: o1 min(1, 0, 2/3) = 0, o2 min(0.8, 1) = 0.8 -> 0.4; EM o1 min(1, 0, 0) = 0, o2 min(0, 1) = 0 -> 0
    assert m["adversarial_f1"].value == pytest.approx(0.4)
    assert m["adversarial_exact_match"].value == pytest.approx(0.0)
    assert m["original_f1"].value == pytest.approx(0.9) and m["original_exact_match"].value == pytest.approx(0.5)
    assert m["variant_f1"].value == pytest.approx((0 + 2 / 3 + 1) / 3)
    assert m["variant_exact_match"].value == pytest.approx(1 / 3)
    assert m["adversarial_delta_f1"].value == pytest.approx(0.4 - 0.9)
    assert m["adversarial_delta_f1"].ci == pytest.approx(paired_bootstrap_diff([1.0, 0.8], [0.0, 0.8], 300, 0.95, 7))
    assert m["adversarial_originals"].value == 2 and m["adversarial_variants"].value == 3
    assert m["f1"].value == pytest.approx(np.mean(list(F1.values())))  # the plain score still covers every question
    outcomes = {o.name: o.as_map() for o in result.outcomes}
    assert outcomes["f1_adversarial"] == pytest.approx({"o1": 0.0, "o2": 0.8})
    assert outcomes["f1_original"] == pytest.approx({"o1": 1.0, "o2": 0.8})  # paired with the above by original id
    assert "adversarial F1 40.0 against 90.0 on the originals (2 originals, 3 adversarial questions" in \
        result.details["key_finding"]
    declared = bool(options)
    assert result.details["adversarial"]["layout"].startswith("jia-liang (declared)" if declared else "jia-liang (detected")
    [table] = [f for f in result.details["figures"] if f["title"].startswith("adversarial questions")]
    assert [r[0] for r in table["data"]["rows"]] == ["originals", "adversarial questions alone",
                                                     "adversarial score (lowest per original)"]
    assert [v for r in table["data"]["rows"] for v in r[1:3]] == pytest.approx([0.5, 0.9, 1 / 3, 5 / 9, 0.0, 0.4])


def test_findings_mark_the_distractor_the_gold_and_the_prediction(target):  # noqa: F811
    data = read(target, examples())
    result = audit(target, data.examples, answers(), bootstrap=0, findings=5)
    found = [f for f in result.findings if f.extra.get("kind") == "adversarial"]
    assert [f.extra["id"] for f in found] == ["o1-high-conf", "o1-high-conf-turk0"]  # F1 cost 1, then 1/3
    first = found[0]
    assert first.score == pytest.approx(1.0) and first.extra["distractor"] == ADD1.strip()
    assert first.extra["answer_original"] == "Peyton Manning" and first.observed == "Jeff Dean"
    context = first.extra["columns"]["context"]
    marked = {label: context[s:e] for s, e, label in first.extra["marks"]["context"]}
    assert marked == {"gold": "Peyton Manning", "predicted": "Jeff Dean", "distractor": ADD1.strip()}


def test_ids_with_dashes_whose_prefix_is_no_question_stay_plain_questions(target):  # noqa: F811
    exs = [Example(Q2, CTX2, (("Santa Clara", 33),), id=i) for i in ("a-1", "b-2")]
    data = read(target, exs)
    assert not any(qa_adversarial.ORIGINAL in ex.meta for ex in data.examples)
    assert qa_adversarial.originals_of(["x", "x-a", "x-a-b", "y-a"], "auto") == [None, "x", "x", None]
    assert qa_adversarial.originals_of(["x", "x-a", "y-a"], "jia-liang") == [None, "x", "y"]
    with pytest.raises(DataError, match="jia-liang, but no question id of hand.json is an original's id plus"):
        read(target, [Example(Q2, CTX2, (("Santa Clara", 33),), id="q1")], {"adversarial": "jia-liang"})
    with pytest.raises(DataError, match="data.options.adversarial: 'addsent' is no layout"):
        read(target, examples(), {"adversarial": "addsent"})
    plain = read(target, examples(), {"adversarial": "none"})
    result = audit(target, plain.examples, answers(), bootstrap=0)
    assert "adversarial_f1" not in result.metrics


def test_the_distractor_is_the_text_the_variant_adds():
    assert qa_adversarial.distractor_span("A b. C d.", "A b. X y. C d.") == (5, 9)
    assert qa_adversarial.distractor_span("A b.", "Z z. A b.") == (0, 4)
    assert qa_adversarial.distractor_span("A b.", "A b.") is None


def jia_liang_json(path: Path) -> Path:
    """A SQuAD file in Jia & Liang's layout over the tiny reader's words: originals and suffixed variants."""
    base = "the dog is in the house . the cat is in the tree ."
    rows = [("q1", "who is in the house ?", base, "dog"), ("q2", "where is the cat ?", base, "tree")]
    paragraphs = []
    for qid, question, context, gold in rows:
        paragraphs.append({"context": context, "qas": [
            {"id": qid, "question": question, "answers": [{"text": gold, "answer_start": context.index(gold)}]}]})
        for k, extra in enumerate([" the bird is in the river .", " a red apple is in the green tree ."]):
            ctx = context + extra
            paragraphs.append({"context": ctx, "qas": [{"id": f"{qid}-high-conf-turk{k}", "question": question,
                                                        "answers": [{"text": gold, "answer_start": ctx.index(gold)}]}]})
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "T", "paragraphs": paragraphs}]}), "utf-8")
    return path


def test_a_run_on_a_jia_liang_file_scores_the_lowest_f1_per_original(tmp_path, reader):  # noqa: F811
    data = jia_liang_json(tmp_path / "addsent.json")
    suite = write_suite(tmp_path, f"model: {{path: '{reader}', device: cpu}}\ndata: {{path: '{data}'}}\n")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code in (0, 1), result.output
    _, report = only_run(tmp_path / "out", "qa")
    ids, _, f1 = plain_scores(reader, data)
    by_id = dict(zip(ids, f1))
    lowest = [min(v for k, v in by_id.items() if k.split("-")[0] == root) for root in ("q1", "q2")]
    [probe] = report["probes"]
    assert probe["metrics"]["adversarial_f1"] == pytest.approx(np.mean(lowest), abs=1e-9)
    assert probe["metrics"]["original_f1"] == pytest.approx((by_id["q1"] + by_id["q2"]) / 2, abs=1e-9)
    assert probe["metrics"]["adversarial_variants"] == 4


def test_a_bad_adversarial_option_is_one_line_and_exit_2(tmp_path, reader):  # noqa: F811
    data = jia_liang_json(tmp_path / "addsent.json")
    suite = write_suite(tmp_path, f"model: {{path: '{reader}', device: cpu}}\n"
                                  f"data: {{path: '{data}', options: {{adversarial: addsent}}}}\n")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "data.options.adversarial: 'addsent' is no layout" in result.output


def test_the_adversarial_outcomes_name_their_originals_contexts(target):  # noqa: F811
    """Two originals of one paragraph (and one of another): the lowest-F1 outcomes per original carry the original's
    context key, so a paired gate or compare resamples the paragraph's originals together; a variant's context
    (its original's plus a sentence) is its original's cluster."""
    import hashlib

    q3 = "How old is Peyton Manning?"
    rows = [*CASES, ("o3", q3, CTX1, "39", "39"), ("o3-high-conf", q3, CTX1 + ADD1, "39", "37")]
    exs = [Example(q, c, ((g, c.index(g)),), id=i) for i, q, c, g, _ in rows]
    predicted = [Answer(p, c.index(p), c.index(p) + len(p), 1.0, 0.5, 0.0, 1) for _, _, c, _, p in rows]
    result = audit(target, read(target, exs).examples, predicted, bootstrap=100)
    key = {ctx: hashlib.sha256(ctx.encode("utf-8")).hexdigest()[:16] for ctx in (CTX1, CTX2)}
    outcomes = {o.name: o for o in result.outcomes}
    for name in ("f1_adversarial", "em_adversarial"):
        assert outcomes[name].ids == ["o1", "o2", "o3"]
        assert outcomes[name].groups == [key[CTX1], key[CTX2], key[CTX1]], name
    assert outcomes["f1_adversarial"].values == pytest.approx([0.0, 0.8, 0.0])
