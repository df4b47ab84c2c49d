"""``universal-trigger`` on bi-encoders: corpus poisoning (Zhong et al. 2023) and a query trigger (the ``retrieval``
section). Tiny random embedders and tiny BEIR folders for the mechanics; every success is recomputed here by exact
search (``tasks.embeddings.search``) over the corpus the probe measured. The fixture run (MiniLM on a subset of
squad-retrieval, about 70 s on one thread) is a ``reproduction`` test."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest
import torch

from bertprobe.data.beir import read_beir
from bertprobe.data.dataset import Dataset, Example
from bertprobe.errors import ProbeError, SuiteError
from bertprobe.model.loading import load_target
from bertprobe.params import parse_params
from bertprobe.plugins import builtin_section
from bertprobe.probe import ProbeContext
from bertprobe.probes.attacks.similarity_goal import centroid, similarity_to
from bertprobe.probes.universal_trigger import retrieval
from bertprobe.probes.universal_trigger.params import TriggerParams
from bertprobe.probes.universal_trigger.probe import UniversalTriggerProbe
from bertprobe.probes.universal_trigger.search import checked_vocabulary
from bertprobe.probes.universal_trigger.similarity_search import passage_search
from bertprobe.stats import wilson_interval
from bertprobe.suite.schema import ModelSpec
from bertprobe.tasks.embeddings import embed, search
from bertprobe.testing import retrieval_texts, save_tiny_embedder, save_tiny_reranker, tiny_target, write_beir

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
MINILM = SHARED / "models" / "minilm-l6-base"
SQUAD = SHARED / "data" / "squad-retrieval"


@pytest.fixture(scope="module")
def embedder(tmp_path_factory):
    torch.set_num_threads(1)
    return load_target(ModelSpec(path=str(save_tiny_embedder(tmp_path_factory.mktemp("embedder"))), device="cpu"))


@pytest.fixture(scope="module")
def beir(tmp_path_factory):
    docs, queries = retrieval_texts(20)
    return read_beir(write_beir(tmp_path_factory.mktemp("beir"), docs, queries))


def params(**kw) -> TriggerParams:
    base = {"retrieval": "both", "passage_length": 6, "passage_iterations": 12, "iterations": 2, "candidates": 8,
            "top_k": 3, "batch_size": 8, "findings": 4}
    return TriggerParams(**(base | kw))


def outcome(result, name):
    return next(o for o in result.outcomes if o.name == name)


def test_the_passage_search_raises_the_mean_similarity_over_its_random_start(embedder, beir):
    settings = embedder.task.embedding
    queries = embed(embedder, [ex.text for ex in beir.examples[:10]], settings, role="query")
    allowed = checked_vocabulary(embedder.tokenizer, params())
    ids, info = passage_search(embedder, settings, params(), queries, allowed, random.Random(0), lambda it, **_: it)
    assert info["similarity"] > info["similarity_start"] + 1e-3
    assert info["trace"] == sorted(info["trace"])  # a step is kept only when it gains
    # the objective is the mean cosine to the attack queries: recomputed from the passage as text
    text = embedder.tokenizer.decode(ids.tolist())
    vector = embed(embedder, [text], settings, role="passage")
    direct = torch.nn.functional.cosine_similarity(vector, queries).mean()
    assert float(direct) == pytest.approx(info["similarity"], abs=1e-4)
    assert float(similarity_to(vector, centroid(queries, "cosine"), "cosine")[0]) == pytest.approx(float(direct), abs=1e-5)


def test_success_is_exact_search_over_the_poisoned_corpus(embedder, beir):
    result = UniversalTriggerProbe().run(embedder, beir, params(), ProbeContext(seed=0))
    settings = embedder.task.embedding
    corpus = embed(embedder, [beir.corpus.passage(i) for i in range(len(beir.corpus))], settings, role="passage")
    passage = result.details["poison"]["passage"]
    docs = torch.cat([corpus, embed(embedder, [passage], settings, role="passage")])
    by_id = {ex.id: ex for ex in beir.examples}
    for name in ("poison_success", "poison_success_attack"):
        o = outcome(result, name)
        queries = embed(embedder, [by_id[i].text for i in o.ids], settings, role="query")
        found, _ = search(queries, docs, 3)
        hits = (found == len(corpus)).any(1)
        assert o.values == hits.float().tolist()
        metric = result.metrics[name]
        assert metric.value == pytest.approx(hits.float().mean().item())
        assert metric.ci == wilson_interval(int(hits.sum()), len(hits))
        assert metric.ci[0] <= metric.value <= metric.ci[1]
    held, attack = outcome(result, "poison_success").ids, outcome(result, "poison_success_attack").ids
    assert not set(held) & set(attack) and len(held) + len(attack) == len(beir.examples)
    assert result.value("examples_held_out") == len(held) == 10
    assert result.details["poison"]["passage_round_trips"]
    assert result.details["poison"]["similarity"] > result.details["poison"]["similarity_start"]
    assert result.findings[0].input == passage


def test_the_query_trigger_success_is_recomputed_from_its_text(embedder, beir):
    result = UniversalTriggerProbe().run(embedder, beir, params(retrieval="query-trigger", target_document="other-3"),
                                         ProbeContext(seed=0))
    assert "poison_success" not in result.metrics
    d = result.details["query_trigger"]
    assert d["target_document"] == "other-3"
    settings = embedder.task.embedding
    corpus = embed(embedder, [beir.corpus.passage(i) for i in range(len(beir.corpus))], settings, role="passage")
    by_id = {ex.id: ex for ex in beir.examples}
    o = outcome(result, "query_trigger_success")
    triggered = embed(embedder, [f"{d['trigger_text']} {by_id[i].text}" for i in o.ids], settings, role="query")
    found, _ = search(triggered, corpus, 3)
    hits = (found == beir.corpus.index["other-3"]).any(1)
    assert o.values == hits.float().tolist()
    metric = result.metrics["query_trigger_success"]
    assert metric.ci == wilson_interval(int(hits.sum()), len(hits)) and metric.ci[0] <= metric.value <= metric.ci[1]
    before = outcome(result, "query_trigger_success_before")
    assert before.ids == o.ids


def test_the_passage_transfers_to_a_second_corpus(embedder, beir, tmp_path):
    docs, queries = retrieval_texts(8, seed=5)
    other = write_beir(tmp_path / "other", [(f"x-{d}", t) for d, t in docs], [(f"y-{q}", t, f"x-{d}") for q, t, d in queries])
    result = UniversalTriggerProbe().run(embedder, beir, params(retrieval="poison", transfer_data=str(other)),
                                         ProbeContext(seed=0))
    settings = embedder.task.embedding
    data = read_beir(other)
    corpus = embed(embedder, [data.corpus.passage(i) for i in range(len(data.corpus))], settings, role="passage")
    docs_ = torch.cat([corpus, embed(embedder, [result.details["poison"]["passage"]], settings, role="passage")])
    found, _ = search(embed(embedder, [ex.text for ex in data.examples], settings, role="query"), docs_, 3)
    hits = (found == len(corpus)).any(1)
    assert result.value("poison_transfer_success") == pytest.approx(hits.float().mean().item())
    assert outcome(result, "poison_transfer_success").ids == [ex.id for ex in data.examples]
    assert result.details["poison"]["transfer"]["queries"] == 8
    assert "query_trigger_success" not in result.metrics


def test_the_section_is_found_for_bi_encoders_and_a_reranker_is_skipped(embedder, beir, tmp_path):
    assert builtin_section("universal-trigger", embedder.task) is retrieval
    assert {"sentence-embedding", "reranker"} <= UniversalTriggerProbe.tasks
    reranker = load_target(ModelSpec(path=str(save_tiny_reranker(tmp_path / "rr")), device="cpu"))
    result = UniversalTriggerProbe().run(reranker, beir, params(), ProbeContext(seed=0))
    assert result.status == "skipped" and "cross-encoder" in result.message and not result.metrics


def test_params_and_data_are_checked(embedder, beir, tmp_path):
    assert parse_params(TriggerParams, {"retrieval": "poison"}, "p").retrieval == "poison"
    with pytest.raises(SuiteError, match="retrieval, the attacks to run"):
        parse_params(TriggerParams, {}, "p")
    with pytest.raises(SuiteError, match="p.retrieval: expected 'both'"):
        parse_params(TriggerParams, {"retrieval": "all"}, "p")
    probe, ctx = UniversalTriggerProbe(), ProbeContext(seed=0)
    with pytest.raises(ProbeError, match="set retrieval: both, poison"):
        probe.run(embedder, beir, TriggerParams(target_label="positive"), ctx)
    with pytest.raises(ProbeError, match="leave target_label out"):
        probe.run(embedder, beir, params(target_label="positive"), ctx)
    with pytest.raises(ProbeError, match="need BEIR data"):
        probe.run(embedder, Dataset([Example("a cat", "a dog", 0.5)]), params(), ctx)
    with pytest.raises(ProbeError, match="'nope' is no document of the corpus"):
        probe.run(embedder, beir, params(retrieval="query-trigger", target_document="nope"), ctx)
    classifier = tiny_target(tmp_path / "clf")
    with pytest.raises(ProbeError, match="retrieval applies to bi-encoders"):
        probe.run(classifier, Dataset([Example("good", label=1)] * 8), params(target_label=1), ctx)


def _squad_subset(folder: Path, queries: int = 300, documents: int = 500, seed: int = 0) -> Path:
    """``queries`` questions of squad-retrieval drawn with ``seed``, their gold paragraphs and distractors up to
    ``documents``."""
    docs = [json.loads(line) for line in (SQUAD / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    queries_ = [json.loads(line) for line in (SQUAD / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    texts = {q["_id"]: q["text"] for q in queries_}
    qrels = [line.split("\t") for line in (SQUAD / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    rng = random.Random(seed)
    rng.shuffle(qrels)
    chosen = qrels[:queries]
    gold = {d for _, d, _ in chosen}
    others = [d for d in docs if d["_id"] not in gold]
    rng.shuffle(others)
    keep = [d for d in docs if d["_id"] in gold] + others[: max(0, documents - len(gold))]
    return write_beir(folder, [(d["_id"], f"{d['title'].replace('_', ' ')} {d['text']}".strip()) for d in keep],
                      [(q, texts[q], d) for q, d, _ in chosen])


@pytest.mark.reproduction
@pytest.mark.skipif(not (MINILM.is_dir() and SQUAD.is_dir()), reason="../shared MiniLM or squad-retrieval absent")
def test_minilm_is_poisoned_on_a_squad_subset(tmp_path):
    """all-MiniLM-L6-v2, 100 attack and 200 held-out questions, 500 paragraphs (233 of them gold), default search
    params: measured 0.12 [0.08, 0.17] held-out poisoning success and 0.97 query-trigger success (0.02 without it),
    about 70 s on one thread, most of it embedding the paragraphs."""
    torch.set_num_threads(1)
    target = load_target(ModelSpec(path=str(MINILM), device="cpu"))
    data = read_beir(_squad_subset(tmp_path / "squad"))
    start = time.perf_counter()
    result = UniversalTriggerProbe().run(target, data, TriggerParams(retrieval="both", search_fraction=1 / 3),
                                         ProbeContext(seed=0))
    seconds = time.perf_counter() - start
    assert result.value("examples_searched") == 100 and result.value("examples_held_out") == 200
    poison = result.details["poison"]
    assert poison["similarity"] > poison["similarity_start"] + 0.1
    # a 20-token passage among 500 paragraphs reaches the top 10 of unseen questions, far above the 2% a random
    # paragraph has
    lo, hi = result.metrics["poison_success"].ci
    assert lo > 0.02, (result.value("poison_success"), lo, hi)
    assert result.value("query_trigger_success") > result.value("query_trigger_success_before") + 0.3
    assert seconds < 240
