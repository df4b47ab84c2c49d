"""serving-skew: a candidate compared with its reference example by example, and the diagnosis replayed on the
reference. No server: each candidate is a local Target that serves the checkpoint the way a faulty stack would
(cut at 8 tokens, lower-cased inputs, other weights)."""

from __future__ import annotations

import random
from dataclasses import dataclass, fields, replace
from pathlib import Path

import pytest
from conftest import SST2_DEV, SST2_MODEL

from bertprobe.data.dataset import Dataset, Example
from bertprobe.model import ModelSpec, load_target
from bertprobe.model.target import Encoded, Target
from bertprobe.probe import ProbeContext
from bertprobe.probes.serving_skew.probe import NO_REFERENCE, ServingSkewParams, ServingSkewProbe
from bertprobe.testing import WORDS, save_tiny_model, tiny_config

FILLER = ("the", "movie", "was", "very", "good", "bad", "and", "it", "a", "story", "plot", "fun", "dull", "actors")


def sentences(n: int, seed: int = 0, shortest: int = 2, longest: int = 14, capitals: bool = False) -> Dataset:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = [rng.choice(FILLER) for _ in range(rng.randint(shortest, longest))]
        if capitals and i % 2 == 0:
            words = [w.capitalize() if j % 2 == 0 else w for j, w in enumerate(words)]
        out.append(Example(" ".join(words), label=rng.randint(0, 1), id=f"s{i}"))
    return Dataset(out, name="sentences")


def ctx_for(reference: ModelSpec | None = None) -> ProbeContext:
    """A context whose ``resolve_model`` gives ``reference`` (the candidate's own max_length is not inherited)."""
    if reference is None:
        return ProbeContext(seed=3)
    return ProbeContext(seed=3, resolve_model=lambda name, like=None: reference)


def run(candidate: Target, reference: ModelSpec | None, data: Dataset, **params):
    reference_name = reference.path if reference is not None else "auto"
    return ServingSkewProbe().run(candidate, data, ServingSkewParams(reference=reference_name, **params),
                                  ctx_for(reference))


@pytest.fixture(scope="module")
def clf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("skew"), initializer_range=0.3)


def test_the_reference_itself_agrees_everywhere_and_passes(clf):
    data = sentences(40)
    candidate = load_target(ModelSpec(path=str(clf), device="cpu", name="served"))  # the same weights, loaded again
    result = run(candidate, ModelSpec(path=str(clf), device="cpu"), data)
    assert result.value("agreement") == 1.0 and result.value("max_score_difference") == 0.0
    assert result.value("differing") == 0 and result.value("mcnemar_p") == 1.0
    assert result.details["diagnosis"]["cause"] == "none" and result.findings[0].title == "diagnosis"
    assert len(result.findings) == 1  # the diagnosis alone: no example differs
    from bertprobe.results import policy

    policy.judge(result, [], frozenset(), ServingSkewProbe.defaults, ServingSkewProbe.key_metrics)
    assert result.status == "passed"


def test_a_candidate_cut_at_8_tokens_is_diagnosed_as_truncation_at_8_naming_the_long_examples(clf):
    data = sentences(60, seed=1)
    candidate = load_target(ModelSpec(path=str(clf), device="cpu", max_length=8))
    reference = ModelSpec(path=str(clf), device="cpu")
    result = run(candidate, reference, data, findings=100)
    found = result.details["diagnosis"]
    assert found["cause"] == "truncation" and found["length"] == 8, found
    assert found["statement"].startswith("the endpoint truncates inputs at 8 tokens (")
    lengths = {f.extra["id"]: f.extra["tokens"] for f in result.findings[1:]}
    assert lengths and all(n > 8 for n in lengths.values())  # every named example is longer than the cut
    ref = load_target(reference)
    long_ids = {ex.id for ex, n in zip(data.examples, ref.encode(data.examples).lengths) if n > 8}
    assert set(lengths) <= long_ids and found["evidence"]["longer"] == len(long_ids)
    assert found["evidence"]["reproduced"] == found["evidence"]["replayed"]
    assert result.value("differing") == len(lengths) and result.value("agreement") < 1.0 or \
        result.value("max_score_difference") > 1e-4
    from bertprobe.results import policy

    policy.judge(result, [], frozenset(), ServingSkewProbe.defaults, ServingSkewProbe.key_metrics)
    assert result.status == "failed"  # the suite's gate says do not ship


def test_a_different_random_model_is_called_another_model(clf, tmp_path):
    other = save_tiny_model(tmp_path / "other", seed=7, initializer_range=0.3)
    data = sentences(40, seed=2)
    result = run(load_target(ModelSpec(path=str(other), device="cpu")), ModelSpec(path=str(clf), device="cpu"), data)
    found = result.details["diagnosis"]
    assert found["cause"] == "another model", found
    assert "the endpoint may serve another model or version" in found["statement"]
    assert any(t.startswith("truncation at") for t in found["tried"])  # replayed, and refuted


@dataclass
class LowerCasing(Target):
    """A candidate whose serving stack lower-cases every input before its (cased) tokenizer."""

    def encode(self, examples, cache: bool = True) -> Encoded:
        low = [replace(ex, text=ex.text.lower(), text_pair=ex.text_pair.lower() if ex.text_pair else None)
               for ex in examples]
        return super().encode(low, cache=False)


def save_cased_model(folder: Path) -> Path:
    import torch
    from transformers import BertForSequenceClassification, BertTokenizer

    words = list(dict.fromkeys([*WORDS, *(w.capitalize() for w in FILLER)]))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    tokenizer = BertTokenizer(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=False)
    config = tiny_config("bert", len(tokenizer), id2label={0: "negative", 1: "positive"},
                         label2id={"negative": 0, "positive": 1}, initializer_range=0.3)
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_a_candidate_that_lower_cases_is_diagnosed_as_lower_casing(tmp_path):
    folder = save_cased_model(tmp_path / "cased")
    spec = ModelSpec(path=str(folder), device="cpu")
    loaded = load_target(spec)
    tokenizer = loaded.tokenizer
    assert tokenizer("The Movie")["input_ids"] != tokenizer("the movie")["input_ids"]  # cased indeed
    candidate = LowerCasing(**{f.name: getattr(loaded, f.name) for f in fields(Target)})
    candidate.spec = replace(spec, name="served")
    data = sentences(40, seed=4, capitals=True)
    result = run(candidate, spec, data)
    found = result.details["diagnosis"]
    assert found["cause"] == "lower-casing", found
    assert found["statement"].startswith("the endpoint lower-cases its inputs (")
    named = [f.extra["id"] for f in result.findings[1:]]
    capitalised = {ex.id for ex in data.examples if ex.text != ex.text.lower()}
    assert named and set(named) <= capitalised


def test_no_reference_skips_with_the_reason_and_so_does_the_model_under_test_itself(clf):
    spec = ModelSpec(path=str(clf), device="cpu")
    result = run(load_target(spec), None, sentences(5))
    assert result.status == "skipped" and result.message == NO_REFERENCE
    itself = run(load_target(spec), spec, sentences(5))
    assert itself.status == "skipped" and "is the model under test" in itself.message


def test_a_reference_with_other_classes_is_refused(clf, tmp_path):
    from bertprobe.errors import ProbeError

    other = save_tiny_model(tmp_path / "three", labels=("a", "b", "c"))
    with pytest.raises(ProbeError, match="the reference's classes"):
        run(load_target(ModelSpec(path=str(clf), device="cpu")), ModelSpec(path=str(other), device="cpu"), sentences(5))


def test_the_reference_s_classes_are_matched_to_the_candidate_s_by_name(clf, tmp_path):
    swapped = save_tiny_model(tmp_path / "swapped", labels=("positive", "negative"), initializer_range=0.3)
    # the same weights with the head's rows swapped: the same model, its classes in the other order
    import torch
    from safetensors.torch import load_file, save_file

    weights = load_file(str(clf / "model.safetensors"))
    weights["classifier.weight"] = weights["classifier.weight"].flip(0).contiguous()
    weights["classifier.bias"] = weights["classifier.bias"].flip(0).contiguous()
    save_file(weights, str(swapped / "model.safetensors"), metadata={"format": "pt"})
    result = run(load_target(ModelSpec(path=str(clf), device="cpu")), ModelSpec(path=str(swapped), device="cpu"),
                 sentences(20))
    assert torch.is_tensor(torch.zeros(1)) and result.value("agreement") == 1.0
    assert result.value("max_score_difference") < 1e-5


@pytest.mark.skipif(not (SST2_MODEL.is_dir() and SST2_DEV.is_file()), reason="../shared SST-2 fixture model/data not present")
def test_the_sst2_fixture_cut_at_32_tokens_is_diagnosed_as_truncation_at_32():
    import csv

    with SST2_DEV.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    reference = ModelSpec(path=str(SST2_MODEL), device="cpu")
    ref = load_target(reference)
    data = Dataset([Example(r["sentence"].strip(), label=int(r["label"]), id=f"dev{i}") for i, r in enumerate(rows)])
    lengths = ref.encode(data.examples).lengths
    # every long sentence and as many short ones: the replays stay a few hundred forward passes
    long_ = [ex for ex, n in zip(data.examples, lengths) if n > 32][:60]
    short = [ex for ex, n in zip(data.examples, lengths) if n <= 32][:60]
    data = Dataset(long_ + short, name="sst2-dev")
    candidate = load_target(replace(reference, max_length=32))
    result = run(candidate, reference, data, findings=5)
    found = result.details["diagnosis"]
    assert found["cause"] == "truncation" and found["length"] == 32, found
    assert "truncates inputs at 32 tokens" in found["statement"]
    assert all(f.extra["tokens"] > 32 for f in result.findings[1:]) and len(result.findings) == 6
    assert result.value("agreement") < 1.0 or result.value("differing_share") > 0.01


@pytest.mark.parametrize("truncate", [None, 8])
def test_the_serving_suite_against_a_loopback_endpoint_says_do_not_ship_when_it_truncates(truncate, tmp_path, clf,
                                                                                        monkeypatch):
    pytest.importorskip("httpx")
    import json

    from click.testing import CliRunner
    from conftest import REPO, sentiment_tsv
    from tiny_endpoint import TinyEndpoint

    from bertprobe.cli import main

    data = sentiment_tsv(tmp_path / "d.tsv", 40)
    with TinyEndpoint(clf, truncate=truncate) as server:
        for key, value in (("BERTPROBE_MODEL", str(clf)), ("BERTPROBE_ENDPOINT", server.url),
                           ("BERTPROBE_SERVED_NAME", "tiny"), ("BERTPROBE_DEVICE", "cpu")):
            monkeypatch.setenv(key, value)
        ran = CliRunner().invoke(main, ["run", str(REPO / "suites" / "serving.yaml"), "--data", str(data), "--threads",
                                        "1", "--out", str(tmp_path / "out"), "--set", "report.formats=[json]",
                                        "--set", "probes.behaviour.params.max_examples=6"])
    assert "Traceback" not in ran.output, ran.output
    (run_dir,) = (tmp_path / "out").glob("serving-*")
    report = json.loads((run_dir / "report.json").read_text())
    skew = next(p for p in report["probes"] if p["id"] == "serving-skew" and p["model"] == "endpoint")
    on_checkpoint = next(p for p in report["probes"] if p["id"] == "serving-skew" and p["model"] == "checkpoint")
    assert on_checkpoint["status"] == "skipped" and on_checkpoint["message"] == NO_REFERENCE
    if truncate is None:
        assert skew["status"] == "passed" and skew["metrics"]["agreement"] == 1.0, skew
        assert skew["details"]["diagnosis"]["cause"] == "none"
        assert ran.exit_code in (0, 4), ran.output
    else:
        assert ran.exit_code == 1 and "do not ship" in ran.output, ran.output
        assert skew["status"] == "failed" and skew["details"]["diagnosis"]["cause"] == "truncation", skew
        assert skew["details"]["diagnosis"]["length"] == 8
        assert all(f["extra"]["tokens"] > 8 for f in skew["findings"][1:]) and len(skew["findings"]) > 1
