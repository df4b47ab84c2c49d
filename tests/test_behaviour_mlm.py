"""The behaviour probe's masked-LM substitution test (params.mlm): what the fill-in proposer keeps and never
proposes, the INV cases and their findings, the refusal of a model that is no masked LM, and the shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import SHARED

from bertprobe.data import Dataset, Example
from bertprobe.errors import ProbeError
from bertprobe.model import ModelSpec, load_target
from bertprobe.model.fill_in import Slot, propose_substitutions
from bertprobe.probe import ProbeContext
from bertprobe.probes.behaviour.mlm_cases import TEST
from bertprobe.probes.behaviour.probe import BehaviourParams, BehaviourProbe
from bertprobe.testing import WORDS, save_tiny_model, tiny_target

VOCAB = (*WORDS, "##ish", "scene", "cast", "stupendous")
MODELS = SHARED / "models"


def rig(target, prefs: dict[str, float]):
    """The MLM head's logits fixed to ``prefs`` (token -> logit, every other token 0) at every position."""
    tok = target.tokenizer
    bias = torch.zeros(target.model.config.vocab_size)
    for token, value in prefs.items():
        bias[tok.convert_tokens_to_ids(token)] = value
    target.model.get_output_embeddings().register_forward_hook(
        lambda m, i, o: bias.to(o.dtype).expand(o.shape[0], o.shape[1], -1).clone())
    return bias.softmax(-1)


@pytest.fixture(scope="module")
def mlm_dir(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("mlm"), task="masked-lm", words=VOCAB, initializer_range=0.5)


def _ctx(mlm=None):
    """A context whose load_target hands out ``mlm`` (rigged) for its own path and loads anything else."""
    def load(spec):
        if mlm is not None and Path(spec.path) == Path(mlm.spec.path):
            return mlm
        return load_target(ModelSpec(path=spec.path, device="cpu"))
    return ProbeContext(seed=1, load_target=load)


def _data(texts):
    return Dataset([Example(t, label=i % 2, id=f"s{i}") for i, t in enumerate(texts)])


def test_the_proposer_keeps_whole_words_above_the_threshold_and_nothing_else(mlm_dir):
    mlm = load_target(ModelSpec(path=str(mlm_dir), device="cpu"))
    probs = rig(mlm, {"film": 6.0, "scene": 5.5, "movie": 7.0, "the": 6.5, "good": 6.2, "##ish": 6.8, "[SEP]": 6.9,
                      ",": 6.1, "cast": 5.0, "stupendous": 1.0})
    sentence = "Movie was fine"
    (props,) = propose_substitutions(mlm, [sentence], [Slot(0, 0, 5)], top_k=12, min_prob=0.02, blocked={"good"})
    ids = mlm.tokenizer.convert_tokens_to_ids
    assert float(probs[ids("stupendous")]) < 0.02 < float(probs[ids("cast")])
    # the original ("movie"), a stop word ("the"), a blocked word ("good"), a piece ("##ish"), a special token, a
    # punctuation mark and a below-threshold word are never proposed; the kept words keep the original's case
    assert [p.substitute for p in props] == ["Film", "Scene", "Cast"]
    assert props[0].text == "Film was fine" and props[0].original == "Movie"
    assert props[0].probability == pytest.approx(float(probs[ids("film")]), abs=1e-5)


def test_a_word_of_several_pieces_is_masked_as_one_mask_token(mlm_dir):
    mlm = load_target(ModelSpec(path=str(mlm_dir), device="cpu"))
    rig(mlm, {"film": 5.0})
    seen = []
    mlm.model.register_forward_pre_hook(lambda m, a, kw: seen.append(kw["input_ids"].clone()), with_kwargs=True)
    tok = mlm.tokenizer
    assert len(tok("goodish", add_special_tokens=False)["input_ids"]) == 2
    (props,) = propose_substitutions(mlm, ["a goodish film"], [Slot(0, 2, 9)], top_k=3, min_prob=0.05)
    (ids,) = [row for batch in seen for row in batch.tolist()]
    assert tok.convert_ids_to_tokens(ids) == ["[CLS]", "a", "[MASK]", "film", "[SEP]"]
    assert [p.text for p in props] == ["a film film"]


def test_a_roberta_mlm_proposes_whole_words_with_the_space_marker_handled(tmp_path):
    mlm = tiny_target(tmp_path / "rob", task="masked-lm", arch="roberta", words=VOCAB, initializer_range=0.5)
    rig(mlm, {"Ġfilm": 6.0, "film": 6.5, "scene": 6.4, "Ġmovie": 7.0, "Ġscene": 5.0})
    (mid, start) = propose_substitutions(mlm, ["the movie was fine", "movie was fine"],
                                         [Slot(0, 4, 9), Slot(1, 0, 5)], top_k=6, min_prob=0.01)
    # after a space only 'Ġ' tokens start a word: "film" and "scene" without it are pieces there
    assert [p.substitute for p in mid] == ["film", "scene"]
    assert mid[0].text == "the film was fine"
    # at the start of the text a word has no 'Ġ': the unmarked tokens are the words
    assert [p.substitute for p in start] == ["film", "scene"]


def test_the_probe_builds_inv_cases_that_never_touch_label_or_stop_words(mlm_dir, tiny_clf):
    mlm = load_target(ModelSpec(path=str(mlm_dir), device="cpu"))
    rig(mlm, {"film": 6.0, "story": 5.8, "bad": 7.0, "not": 7.0, "very": 6.5})
    params = BehaviourParams(mlm=str(mlm_dir), perturbations=(), bootstrap=0, mlm_min_prob=0.05, mlm_words=4)
    result = BehaviourProbe().run(tiny_clf, _data(["the movie was good", "it was a boring plot", "very good"]),
                                  params, _ctx(mlm))
    edits = result.details["mlm_substitution"]["edits"]
    # "good" and "boring" (sentiment lexicons), "the", "was", "it", "very" (stop words): never masked; "bad"
    # (label-bearing), "not" (negation), "very" (stop word) never proposed; "very good" has nothing left to mask
    assert {e["word"] for e in edits} == {"movie", "plot"}
    assert {e["substitute"] for e in edits} == {"film", "story"}
    assert {e["case"] for e in edits} == {"s0", "s1"}
    assert "failure_rate.test.inv_mlm_substitution_bae_style" in result.metrics
    assert any(r["perturbation"] == TEST and r["applied"] == 2 for r in result.details["perturbations"])


def test_an_mlm_that_proposes_nothing_says_so_when_no_case_is_left(mlm_dir, tiny_clf):
    """Where the masked LM is the only source of cases and keeps no fill-in, the error says that, not only
    "give cases"."""
    mlm = load_target(ModelSpec(path=str(mlm_dir), device="cpu"))
    rig(mlm, {"film": 6.0})
    params = BehaviourParams(mlm=str(mlm_dir), perturbations=(), bootstrap=0, mlm_min_prob=0.9)
    with pytest.raises(ProbeError, match=r"proposed no substitute of p >= 0\.9 .*or lower mlm_min_prob$"):
        BehaviourProbe().run(tiny_clf, _data(["the movie was good", "it was a boring plot"]), params, _ctx(mlm))


def test_an_mlm_that_proposes_nothing_beside_other_cases_is_a_warning_beside_the_decision(mlm_dir, tiny_clf):
    """The other cases run; the test the suite asked for, left without a case, is a warning (what the report shows
    beside the decision), not a line of details alone."""
    mlm = load_target(ModelSpec(path=str(mlm_dir), device="cpu"))
    rig(mlm, {"film": 6.0})
    params = BehaviourParams(mlm=str(mlm_dir), perturbations=("typo",), bootstrap=0, mlm_min_prob=0.9)
    result = BehaviourProbe().run(tiny_clf, _data(["the movie was good", "it was a boring plot"]), params, _ctx(mlm))
    (warning,) = result.details["warnings"]
    assert warning.startswith(f"{TEST} made no case: the masked LM proposed no substitute of p >= 0.9 for the ")
    assert warning.endswith("; lower mlm_min_prob or name another masked LM")
    kept = BehaviourProbe().run(tiny_clf, _data(["the movie was good"]),
                                BehaviourParams(mlm=str(mlm_dir), perturbations=("typo",), bootstrap=0,
                                                mlm_min_prob=0.05), _ctx(mlm))
    assert "warnings" not in kept.details and kept.details["mlm_substitution"]["total"] >= 1


def test_a_classifier_that_flips_on_a_substitute_fails_the_test_and_the_finding_lists_the_edit(mlm_dir, tmp_path):
    mlm = load_target(ModelSpec(path=str(mlm_dir), device="cpu"))
    rig(mlm, {"film": 6.0, "story": 5.0})
    clf = tiny_target(tmp_path / "clf", words=VOCAB)
    flip = clf.tokenizer.convert_tokens_to_ids("film")

    def flips(module, args, kwargs, out):
        hit = (kwargs["input_ids"] == flip).any(1)
        out.logits = torch.where(hit[:, None], torch.tensor([4.0, -4.0]), torch.tensor([-4.0, 4.0]))
        return out

    clf.model.register_forward_hook(flips, with_kwargs=True)
    params = BehaviourParams(mlm=str(mlm_dir), perturbations=(), bootstrap=0, mlm_min_prob=0.05)
    result = BehaviourProbe().run(clf, _data(["the movie was good", "a scene"]), params, _ctx(mlm))
    assert result.metrics["failure_rate.test.inv_mlm_substitution_bae_style"].value == 1.0
    finding = next(f for f in result.findings if f.extra["test"] == TEST and f.input == "the movie was good")
    assert finding.perturbed == "the film was good"
    assert finding.observed.startswith("'movie' -> 'film' (p_mlm=")
    assert "positive -> negative" in finding.observed
    assert {"word": "movie", "substitute": "film", "before": "positive", "after": "negative"}.items() <= \
        finding.extra["edits"][0].items()
    assert result.details["mlm_substitution"]["flipped"] == 2


def test_a_model_that_is_no_masked_lm_or_the_classifier_itself_is_refused(tiny_clf, tiny_clf_dir, tmp_path):
    other = save_tiny_model(tmp_path / "other-clf")
    data = _data(["the movie was good"])
    for path, words in ((other, "a classification model"), (tiny_clf_dir, "names the model under test")):
        with pytest.raises(ProbeError) as info:
            BehaviourProbe().run(tiny_clf, data, BehaviourParams(mlm=str(path), perturbations=()), _ctx())
        message = str(info.value)
        assert "\n" not in message and f"'{path}'" in message and words in message and "drop mlm" in message


def test_validate_refuses_a_classifier_as_mlm_before_any_weights_load(suite_factory, tmp_path):
    from click.testing import CliRunner

    from bertprobe.cli import main

    other = save_tiny_model(tmp_path / "other-clf")
    suite = suite_factory(f"  - probe: behaviour\n    params: {{mlm: '{other}', perturbations: []}}\n")
    result = CliRunner().invoke(main, ["validate", str(suite)])
    assert result.exit_code == 2, result.output
    (line,) = [x for x in result.stderr.splitlines() if "params.mlm" in x]
    assert f"'{other}' is not a masked LM" in line and "BertForSequenceClassification" in line and "drop mlm" in line


def test_validate_refuses_mlm_on_a_tagger_before_any_weights_load(mlm_dir, tmp_path):
    """The substitution test edits a classifier's sentences: on a NER tagger, validate refuses it in one line (exit
    2), with the words the probe says when it starts."""
    from click.testing import CliRunner

    from bertprobe.cli import main

    tagger = save_tiny_model(tmp_path / "tagger", task="token-classification", labels=("O", "B-PER", "I-PER"))
    data = tmp_path / "ner.iob2"
    data.write_text("Anna\tB-PER\nsang\tO\n\n", encoding="utf-8")
    suite = tmp_path / "s.yaml"
    suite.write_text(f"suite: s\nmodel: {{path: '{tagger}', device: cpu}}\ndata: {{path: '{data}'}}\n"
                     f"probes:\n  - probe: behaviour\n    params: {{mlm: '{mlm_dir}'}}\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", str(suite)])
    assert result.exit_code == 2, result.output
    (line,) = [x for x in result.stderr.splitlines() if "params.mlm" in x]
    assert ("the masked-LM substitution test runs on classifiers, not on token-classification models such as "
            "tagger; drop mlm for this model") in line


@pytest.mark.parametrize("bad", [{"mlm_min_prob": 0.0}, {"mlm_min_prob": 1.0}, {"mlm_top_k": 0}, {"mlm_edits": 0},
                                 {"mlm_words": 0}, {"mlm_cases": 0}, {"mlm": " "}])
def test_bad_mlm_params_are_refused(bad):
    with pytest.raises(ValueError):
        BehaviourParams(**bad)


@pytest.mark.skipif(not (MODELS / "minilm-l6-mlm").is_dir(), reason="no English masked-LM fixture (minilm-l6-mlm) yet")
def test_the_sst2_classifier_under_the_shared_mlm():
    clf = load_target(ModelSpec(path=str(MODELS / "minilm-l6-sst2"), device="cpu"))
    texts = ["the acting was superb and the story kept me hooked", "a tedious film with a script that goes nowhere",
             "the cast is charming but the plot is thin", "an hour of dull dialogue"]
    params = BehaviourParams(mlm=str(MODELS / "minilm-l6-mlm"), perturbations=(), bootstrap=0, mlm_min_prob=0.05)
    result = BehaviourProbe().run(clf, _data(texts), params, _ctx())
    block = result.details["mlm_substitution"]
    assert block["total"] > 0
    for edit in block["edits"]:
        assert edit["substitute"].isalpha() and edit["substitute"].lower() != edit["word"].lower()
        assert edit["p_mlm"] >= 0.05


def test_a_run_over_two_models_loads_the_mlm_once_and_reports_the_test(mlm_dir, tiny_clf_dir, sst_tsv, tmp_path):
    import json

    from click.testing import CliRunner
    from conftest import only_run

    from bertprobe.cli import main

    second = save_tiny_model(tmp_path / "second", seed=5)
    suite = tmp_path / "mx.yaml"
    suite.write_text(
        f"suite: mx\nmodels:\n  - {{name: one, path: '{tiny_clf_dir}', device: cpu}}\n"
        f"  - {{name: two, path: '{second}', device: cpu}}\n"
        f"data: {{path: '{sst_tsv}', text: sentence, label: label}}\nseed: 3\n"
        f"report: {{dir: '{tmp_path / 'reports'}', formats: [json]}}\nprobes:\n"
        f"  - probe: behaviour\n    params: {{mlm: '{mlm_dir}', perturbations: [], mlm_min_prob: 0.01}}\n"
        "    expect: {cases: {min: 1}, failure_rate.capability.*: off}\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code == 0, result.output
    run_dir, report = only_run(tmp_path / "reports", "mx")
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    loaded = [e["info"]["path"] for e in events if e["event"] == "model_loaded"]
    assert loaded.count(str(mlm_dir)) == 1, loaded
    tests = [t["test"] for r in report["probes"] for t in r["details"]["tests"]]
    assert tests.count(TEST) == 2
    # the MLM is the probe's tool, not an audited model: recorded with its weights, never judged
    assert [m["name"] for m in report["models"]].count("one") == 1 and len(report["models"]) == 3
    assert "decision: mlm0" not in result.output and "no decision" not in result.output, result.output
