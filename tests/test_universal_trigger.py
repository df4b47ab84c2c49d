"""universal-trigger: splicing, gradients, batched scoring and a real search on trained tiny models."""

from __future__ import annotations

import random

import pytest
import torch

from bertprobe.data import Dataset, Example
from bertprobe.errors import SuiteError
from bertprobe.model import ModelSpec, load_target
from bertprobe.params import parse_params
from bertprobe.probe import ProbeContext
from bertprobe.probes.universal_trigger.probe import TriggerParams, UniversalTriggerProbe
from bertprobe.probes.universal_trigger.search import TriggerSearch, allowed_for, spliced_rows
from bertprobe.testing import NEGATIVE_WORDS, sentiment_examples, tiny_target


@pytest.fixture(scope="module", params=["bert", "roberta"])
def trained(request, trained_model):
    path = trained_model(request.param, arch=request.param)
    return load_target(ModelSpec(path=str(path), device="cpu"))


def sentiment_data(n: int = 120, seed: int = 5) -> Dataset:
    return Dataset([Example(t, label=y) for t, y in sentiment_examples(n, seed)], name="synthetic")


def _ids(tok, words):
    return tok.convert_tokens_to_ids(words)


@pytest.mark.parametrize("position", ["prepend", "append"])
def test_splicing_matches_tokenising_the_trigger_text(tmp_path, position):
    target = tiny_target(tmp_path / "m")
    tok = target.tokenizer
    examples = [Example("the movie was good"), Example("bad")]
    params = TriggerParams(target_label=0, position=position)
    rows = spliced_rows(target, examples, params)
    trigger = torch.tensor(_ids(tok, ["awful", "mess", "dull"]))
    batch = rows.build((0, 1), trigger.unsqueeze(0))
    for i, ex in enumerate(examples):
        text = f"awful mess dull {ex.text}" if position == "prepend" else f"{ex.text} awful mess dull"
        expected = tok(text)["input_ids"]
        got = batch["input_ids"][i][batch["attention_mask"][i].bool()].tolist()
        assert got == expected


def test_splicing_into_the_second_segment_keeps_its_token_type(tmp_path):
    target = tiny_target(tmp_path / "m")
    tok = target.tokenizer
    rows = spliced_rows(target, [Example("a dog", "the cat")], TriggerParams(target_label=0, segment="second", length=2))
    batch = rows.build((0,), torch.tensor([_ids(tok, ["bad", "mess"])]))
    expected = tok("a dog", "bad mess the cat")
    assert batch["input_ids"][0].tolist() == expected["input_ids"]
    assert batch["token_type_ids"][0].tolist() == expected["token_type_ids"]


def test_roberta_splicing_uses_the_bpe_special_layout(tmp_path):
    target = tiny_target(tmp_path / "r", arch="roberta")
    tok = target.tokenizer
    rows = spliced_rows(target, [Example("the movie")], TriggerParams(target_label=0, length=1))
    ids = rows.build((0,), torch.tensor([[tok.convert_tokens_to_ids("Ġbad")]]))["input_ids"][0].tolist()
    plain = tok("the movie")["input_ids"]
    assert ids == [plain[0], tok.convert_tokens_to_ids("Ġbad")] + plain[1:]


def test_vocabulary_filter(tmp_path):
    target = tiny_target(tmp_path / "m", words=["good", "##ing", "3", ",", "bad", "movie"])
    tok = target.tokenizer
    allowed = allowed_for(tok, TriggerParams(target_label=0, blacklist=("BAD",)))
    ok = {tok.convert_ids_to_tokens(i) for i in allowed.nonzero().squeeze(1).tolist()}
    assert ok == {"good", "movie"}
    with_sub = allowed_for(tok, TriggerParams(target_label=0, allow_subwords=True, alphabetic_only=False))
    ok = {tok.convert_ids_to_tokens(i) for i in with_sub.nonzero().squeeze(1).tolist()}
    assert ok == {"good", "##ing", "3", ",", "bad", "movie"}


def _search(target, params, examples):
    rows = spliced_rows(target, examples, params)
    return TriggerSearch(target, rows, params, goal=1, targeted=False)


def test_gradient_equals_autograd_on_input_embeddings(trained):
    params = TriggerParams(target_label=1)
    examples = [Example(t) for t, _ in sentiment_examples(6, 1)]
    search = _search(trained, params, examples)
    trigger = torch.tensor(trained.tokenizer("the the the", add_special_tokens=False)["input_ids"])
    rows = tuple(range(6))
    grad = search.gradient(trigger, rows)
    batch = search.rows.build(rows, trigger.unsqueeze(0))
    embeds = trained.model.get_input_embeddings()(batch["input_ids"]).detach().requires_grad_(True)
    inputs = {k: v for k, v in batch.items() if k != "input_ids"}
    loss = search.objective(trained.model(inputs_embeds=embeds, **inputs).logits).mean()
    loss.backward()
    slots = search.rows.template(rows)[3]
    expected = embeds.grad.gather(1, slots.unsqueeze(-1).expand(-1, -1, embeds.shape[-1])).mean(0)
    torch.testing.assert_close(grad, expected)


def test_batched_scoring_equals_one_forward_per_candidate(trained):
    examples = [Example(t) for t, _ in sentiment_examples(8, 2)]
    vocab = allowed_for(trained.tokenizer, TriggerParams(target_label=1)).nonzero().squeeze(1)
    gen = torch.Generator().manual_seed(0)
    cands = vocab[torch.randint(len(vocab), (7, 3), generator=gen)]
    batched = _search(trained, TriggerParams(target_label=1), examples)
    single = _search(trained, TriggerParams(target_label=1, scoring="per-candidate"), examples)
    rows = tuple(range(8))
    torch.testing.assert_close(batched.score(cands, rows), single.score(cands, rows), atol=1e-4, rtol=1e-4)
    assert batched.forward_passes == 1 and single.forward_passes == 7


def test_search_finds_a_trigger_that_flips_held_out_examples(trained):
    # 20 candidates per position: with 10, one thread's numerics on a CPU without AVX2 trained a model whose
    # first-order HotFlip ranking left the search at 'the the wonderful' (held-out accuracy 1.0); with 20,
    # 1 and 2 threads at the default and AVX2 levels all find a trigger taking it to 0.0
    params = parse_params(TriggerParams, {"target_label": "positive", "candidates": 20, "iterations": 4, "batch_size": 16}, "p")
    result = UniversalTriggerProbe().run(trained, sentiment_data(), params, ProbeContext(seed=0))
    before, after = result.value("accuracy_before"), result.value("accuracy_after")
    assert before > 0.9
    assert after < before - 0.5, result.details["trigger_text"]
    assert result.value("success_rate") >= (before - after) / before - 1e-9
    low, high = result.metrics["success_rate"].ci  # the default gate's metric carries its Wilson interval
    assert low <= result.value("success_rate") <= high and high - low > 0.05
    assert result.value("examples_searched") + result.value("examples_held_out") == 60
    # the model learned that negative words decide; the trigger should use at least one of them
    tokens = [t.lstrip("Ġ") for t in result.details["trigger_tokens"]]
    assert set(tokens) & set(NEGATIVE_WORDS), tokens
    losses = result.details["history"][0]["iterations"]
    assert all(h["loss_after"] <= h["loss_before"] for h in losses)
    assert result.findings and result.findings[0].expected == "positive"
    assert result.findings[0].score >= result.findings[-1].score


def test_blacklisting_the_cue_words_weakens_the_attack(trained):
    base = {"target_label": "positive", "candidates": 10, "iterations": 3, "batch_size": 16}
    free = UniversalTriggerProbe().run(trained, sentiment_data(), parse_params(TriggerParams, base, "p"), ProbeContext(seed=0))
    banned = parse_params(TriggerParams, {**base, "blacklist": list(NEGATIVE_WORDS)}, "p")
    limited = UniversalTriggerProbe().run(trained, sentiment_data(), banned, ProbeContext(seed=0))
    assert not set(t.lstrip("Ġ") for t in limited.details["trigger_tokens"]) & set(NEGATIVE_WORDS)
    assert limited.value("accuracy_after") >= free.value("accuracy_after")


def test_targeted_flip_and_transfer_to_itself(trained):
    """Transferring to the same model re-tokenises the trigger text: it must reproduce accuracy_after."""
    params = TriggerParams(target_label="positive", to_label="negative", candidates=10, iterations=3, batch_size=16,
                           transfer_model=trained.spec.path)
    ctx = ProbeContext(seed=1, load_target=lambda spec: trained)
    result = UniversalTriggerProbe().run(trained, sentiment_data(), params, ctx)
    assert result.details["to_label"] == "negative"
    assert result.value("accuracy_after") < result.value("accuracy_before") - 0.5
    assert result.value("transfer_accuracy_before") == result.value("accuracy_before")
    if trained.model.config.model_type == "bert":  # WordPiece round-trips ids -> text -> ids
        assert result.value("transfer_accuracy_after") == pytest.approx(result.value("accuracy_after"), abs=0.05)
    else:  # byte-level BPE does not: a sentence-initial 'Ġbad' re-tokenises as 'bad'
        assert 0 <= result.value("transfer_accuracy_after") <= 1


def test_params_are_validated():
    with pytest.raises(SuiteError, match="target_label is required"):
        parse_params(TriggerParams, {}, "p")
    with pytest.raises(SuiteError, match="p.position: 'middle' is not one of"):
        parse_params(TriggerParams, {"target_label": 1, "position": "middle"}, "p")


def test_unknown_class_is_a_probe_error(trained):
    from bertprobe.errors import ProbeError

    with pytest.raises(ProbeError, match="'neutral' is not a class"):
        UniversalTriggerProbe().run(trained, sentiment_data(), TriggerParams(target_label="neutral"), ProbeContext())


def test_search_is_reproducible(trained):
    params = TriggerParams(target_label="positive", candidates=5, iterations=2, batch_size=16)
    a = UniversalTriggerProbe().run(trained, sentiment_data(), params, ProbeContext(seed=4))
    b = UniversalTriggerProbe().run(trained, sentiment_data(), params, ProbeContext(seed=4))
    assert a.details["trigger_ids"] == b.details["trigger_ids"]
    random.seed(0)


def test_each_kind_of_model_finds_its_section_of_the_trigger_probes():
    """The lookup picks universal-trigger's and backdoor-scan's sections by the task's kind (registered labelsets,
    entities, answers, retrieval in that order); a classifier finds none and runs the probes' own code."""
    from bertprobe.plugins import builtin_sections
    from bertprobe.probes.backdoor_scan import labelsets as scan_labelsets
    from bertprobe.probes.universal_trigger import answers, entities, labelsets, retrieval
    from bertprobe.tasks.classification import SingleLabelClassification
    from bertprobe.tasks.multilabel import MultiLabelClassification
    from bertprobe.tasks.question_answering import QuestionAnswering
    from bertprobe.tasks.reranker import Reranker
    from bertprobe.tasks.sentence_embedding import SentenceEmbedding
    from bertprobe.tasks.token_classification import TokenClassification

    sections = builtin_sections()
    assert sections.of("universal-trigger") == [labelsets, entities, answers, retrieval]
    assert sections.of("backdoor-scan") == [scan_labelsets]
    find = ProbeContext().section
    assert [find("universal-trigger", t) for t in (SingleLabelClassification, MultiLabelClassification,
                                                    TokenClassification, QuestionAnswering, SentenceEmbedding,
                                                    Reranker)] \
        == [None, labelsets, entities, answers, retrieval, retrieval]
    assert [find("backdoor-scan", t) for t in (SingleLabelClassification, MultiLabelClassification)] \
        == [None, scan_labelsets]
