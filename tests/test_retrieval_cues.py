"""spurious-cues on models that rank texts (its section, probes/spurious_cues/rankings.py): the partial queries and the
overlap split by hand, a lexical ranker whose low-overlap queries are surely served worse against an oracle that
finds every relevant passage from any query, a tiny reranker whose partial queries rerank the full query's first
stage, and a subset of the squad-retrieval fixture on MiniLM (the measured low/high-overlap gap)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import SHARED

from bertprobe.data.beir import read_beir
from bertprobe.data.dataset import DataSpec
from bertprobe.errors import ProbeError
from bertprobe.model.loading import load_target
from bertprobe.model.predictions import Predictions
from bertprobe.model.spec import ModelSpec
from bertprobe.probe import ProbeContext
from bertprobe.probes.spurious_cues.probe import CueParams, SpuriousCuesProbe
from bertprobe.probes.spurious_cues.rankings import (
    lexical_overlap,
    overlap_groups,
    partial_query,
    rerank_lists,
    stopwords_only,
)
from bertprobe.tasks.answer_text import content_words, words
from bertprobe.tasks.retrieval_metrics import per_query
from bertprobe.tasks.sentence_embedding import Ranked, judgements
from bertprobe.testing import WORDS, retrieval_texts, save_tiny_embedder, save_tiny_reranker, write_beir

SQUAD = SHARED / "data" / "squad-retrieval"
MINILM = SHARED / "models" / "minilm-l6-base"


# ---- partial queries and overlap by hand ---------------------------------------------------------------------


def test_partial_queries_keep_the_question_word_or_the_stop_words_as_written():
    query = "In what year did Nikola Tesla die?"
    assert partial_query(query, "question-word") == "what?"
    assert partial_query("How many patents did he hold?", "question-word") == "How many?"
    assert partial_query("Tesla's birthplace", "question-word") == ""  # no wh-word: nothing left
    assert stopwords_only(query) == "In what"  # year, did (not in the list), Nikola, Tesla, die: content words
    assert partial_query(query, "stopwords") == stopwords_only(query)
    assert not content_words(stopwords_only(query))
    with pytest.raises(ValueError, match="unknown partial query"):
        partial_query(query, "nouns")


def test_overlap_is_the_share_of_the_query_content_words_in_its_best_relevant_passage():
    assert lexical_overlap("Where was Tesla born?", ["Tesla was born in Smiljan."]) == 1.0
    assert lexical_overlap("Where was Tesla born?", ["Edison was born in Ohio.", "He died."]) == 0.5
    assert lexical_overlap("Where was Tesla born?", ["He died.", "Tesla lived."]) == 0.5  # the best passage
    assert math.isnan(lexical_overlap("What was it?", ["Anything."]))  # no content word
    assert math.isnan(lexical_overlap("Tesla?", []))


def test_overlap_groups_are_the_lowest_and_highest_shares_with_ties_ordered_by_the_seed():
    overlap = [0.5, 0.0, 1.0, float("nan"), 0.5, 0.5, 0.25, 1.0, 0.5]
    low, high = overlap_groups(overlap, 1 / 3, seed=0)
    assert len(low) == len(high) == round(8 / 3)
    assert 3 not in low + high and not set(low) & set(high)
    assert sorted(overlap[i] for i in low) == [0.0, 0.25, 0.5]  # one of the four 0.5s ...
    assert sorted(overlap[i] for i in high) == [0.5, 1.0, 1.0]  # ... and another
    ties = {tuple(overlap_groups([0.5] * 9, 1 / 3, seed=s)[0]) for s in range(6)}
    assert len(ties) > 1  # equal overlaps: the seed decides
    assert overlap_groups([0.5] * 9, 1 / 3, seed=4) == overlap_groups([0.5] * 9, 1 / 3, seed=4)
    assert overlap_groups([float("nan"), 0.3], 0.5, 0) == ([], [])


def test_params_refuse_a_share_over_half_and_unknown_partial_queries():
    with pytest.raises(ValueError, match="overlap_share"):
        CueParams(overlap_share=0.6)
    with pytest.raises(ValueError, match="partial_queries"):
        CueParams(partial_queries=("nouns",))


# ---- a lexical ranker and an oracle ---------------------------------------------------------------------------


def _overlap_data(folder: Path) -> Path:
    """12 queries sharing both content words with their passage, 12 sharing none of them (paraphrases whose words
    sit in a distractor instead), and filler documents."""
    docs, queries = [], []
    for i in range(12):
        docs.append((f"high-{i}", f"the alpha{i} sits beside the beta{i} ."))
        queries.append((f"qh-{i}", f"what is the alpha{i} of beta{i} ?", f"high-{i}"))
    for i in range(12):
        docs.append((f"decoy-{i}", f"a gamma{i} and a delta{i} were here ."))
    for i in range(12):
        docs.append((f"low-{i}", f"the epsilon{i} meets the zeta{i} ."))
        queries.append((f"ql-{i}", f"what is the gamma{i} of delta{i} ?", f"low-{i}"))
    return write_beir(folder, docs, queries)


def _ranked(data, score) -> Ranked:
    """Every document of ``data``'s corpus ranked for each query by ``score(query example, document index)``,
    best first (ties in corpus order)."""
    corpus = data.corpus
    rows = []
    for ex in data.examples:
        values = np.array([score(ex, j) for j in range(len(corpus))], dtype=np.float64)
        rows.append(np.argsort(-values, kind="stable"))
    indices = torch.tensor(np.array(rows), dtype=torch.long)
    return Ranked(indices, torch.zeros(indices.shape), corpus)


def lexical(target, data, batch_size=None, progress=None) -> Predictions:
    """A ranker that reads nothing but shared content words."""
    passages = [set(words(data.corpus.passage(j))) for j in range(len(data.corpus))]
    return Predictions(None, 0.0, answers=_ranked(data, lambda ex, j: len(content_words(ex.text) & passages[j])))


def oracle(target, data, batch_size=None, progress=None) -> Predictions:
    """A ranker that finds each query's relevant passage whatever the query says (by its id)."""
    return Predictions(None, 0.0, answers=_ranked(data, lambda ex, j: float(judgements(ex.label).get(
        data.corpus.ids[j], 0))))


@pytest.fixture(scope="module")
def embedder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("embedder")
    return load_target(ModelSpec(path=str(save_tiny_embedder(folder, words=list(WORDS) + ["what", "how"])),
                                 device="cpu"))


def test_a_lexical_ranker_serves_low_overlap_queries_surely_worse(embedder, tmp_path):
    data = read_beir(_overlap_data(tmp_path / "beir"))
    result = SpuriousCuesProbe().run(embedder, data, CueParams(overlap_share=0.5, bootstrap=500),
                                     ProbeContext(seed=3, predictions=lexical))
    m = result.metrics
    assert m["ndcg_high_overlap"].value == 1.0  # both content words only in the relevant passage
    # a low query's relevant passage shares nothing: after its decoy it ties at 0 with the 34 others and keeps its
    # corpus place, 25 + i: out of the top 10
    assert m["ndcg_low_overlap"].value == 0.0
    assert m["ndcg_overlap_gap"].value == 1.0
    assert m["ndcg_overlap_gap"].ci[0] > 0 and result.details["overlap_reliance"] is True
    assert result.details["overlap"]["low_range"] == [0.0, 0.0] and result.details["overlap"]["high_range"] == [1.0, 1.0]
    assert result.details["key_finding"].startswith("relies on lexical overlap")
    # the partial queries hold no content word: every document scores 0 and keeps its corpus place, so the high
    # queries' passages (the first twelve documents) rank i + 1, the low ones' out of the top 10
    by_hand = np.mean([1 / math.log2(i + 2) for i in range(10)] + [0.0] * 14)
    assert m["ndcg_question_word"].value == pytest.approx(by_hand)
    assert m["ndcg_stopwords"].value == pytest.approx(by_hand)
    assert m["ndcg_share_stopwords"].value == pytest.approx(m["ndcg_stopwords"].value / m["ndcg_full"].value)
    outcomes = {o.name: o for o in result.outcomes}
    assert set(outcomes) >= {"ndcg_full", "ndcg_low_overlap", "ndcg_high_overlap", "ndcg_question_word",
                             "ndcg_stopwords"}
    assert len(outcomes["ndcg_full"].ids) == 24


def test_an_oracle_shows_no_overlap_gap_but_finds_every_passage_from_a_partial_query(embedder, tmp_path):
    data = read_beir(_overlap_data(tmp_path / "beir"))
    result = SpuriousCuesProbe().run(embedder, data, CueParams(overlap_share=0.5, bootstrap=200),
                                     ProbeContext(seed=3, predictions=oracle))
    m = result.metrics
    assert m["ndcg_overlap_gap"].value == 0.0 and result.details["overlap_reliance"] is False
    assert m["ndcg_question_word"].value == 1.0 and m["ndcg_share_question_word"].value == 1.0
    assert m["ndcg_share_stopwords"].value == 1.0
    assert any(f.extra.get("kind") == "partial-query" for f in result.findings)


def test_similarity_pairs_are_refused_with_what_to_give(embedder, tmp_path):
    from bertprobe.data.dataset import Dataset, Example

    pairs = Dataset([Example(text="a dog", text_pair="a cat", label=0.5, id="p1")], name="sts")
    with pytest.raises(ProbeError, match="BEIR folder"):
        SpuriousCuesProbe().run(embedder, pairs, CueParams(), ProbeContext())


# ---- a tiny embedder and a tiny reranker, end to end ----------------------------------------------------------


def test_the_tiny_embedder_partial_queries_are_searched_as_the_task_searches_them(embedder, tmp_path):
    docs, queries = retrieval_texts(12, seed=2)
    data = read_beir(write_beir(tmp_path / "beir", docs, queries))
    result = SpuriousCuesProbe().run(embedder, data, CueParams(bootstrap=100), ProbeContext(seed=0))
    partial = replace(data, examples=[replace(ex, text=stopwords_only(ex.text)) for ex in data.examples])
    ranked = embedder.task.predict_data(embedder, partial)
    by_hand = per_query([ranked.ids(i) for i in range(12)], [judgements(ex.label) for ex in data.examples])["ndcg@10"]
    assert result.value("ndcg_stopwords") == pytest.approx(float(by_hand.mean()))
    assert {o.name: o for o in result.outcomes}["ndcg_stopwords"].values == pytest.approx(by_hand.tolist())


def test_a_reranker_reorders_the_full_query_first_stage_for_its_partial_queries(tmp_path):
    words_ = list(WORDS) + ["what", "how"]
    first = save_tiny_embedder(tmp_path / "first", words=words_)
    folder = save_tiny_reranker(tmp_path / "reranker", words=words_)
    target = load_target(ModelSpec(path=str(folder), device="cpu", options={"first_stage": str(first), "depth": 8}))
    assert target.task.name == "reranker"
    docs, queries = retrieval_texts(10, seed=1)
    spec = DataSpec(path=str(tmp_path / "beir"))
    data = target.task.read_labels(read_beir(write_beir(tmp_path / "beir", docs, queries)), spec, "reranker")
    ranked = target.task.predict_data(target, data)
    full = [ex.text for ex in data.examples]
    assert rerank_lists(target, full, ranked) == [ranked.ids(i) for i in range(10)]  # the task's own order
    partial = rerank_lists(target, [stopwords_only(q) for q in full], ranked)
    assert all(sorted(p) == sorted(ranked.ids(i)) and len(p) == 8 for i, p in enumerate(partial))  # same candidates
    result = SpuriousCuesProbe().run(target, data, CueParams(bootstrap=100), ProbeContext(seed=0))
    by_hand = per_query(partial, [judgements(ex.label) for ex in data.examples])["ndcg@10"]
    assert result.value("ndcg_stopwords") == pytest.approx(float(by_hand.mean()))
    assert result.details["task"]["name"] == "reranker"


# ---- the fixture: MiniLM on a subset of squad-retrieval ----------------------------------------------------------


@pytest.mark.skipif(not (SQUAD.is_dir() and MINILM.is_dir()), reason="../shared squad-retrieval or MiniLM absent")
def test_minilm_on_a_squad_subset_reports_the_overlap_gap_and_finds_little_from_partial_queries(tmp_path):
    """On the whole fixture (2,777 queries, 2,067 documents) MiniLM-L6 scores nDCG@10 0.730 [0.706, 0.750] on the
    low-overlap tercile and 0.793 [0.773, 0.813] on the high one: gap +0.063 [0.033, 0.094], flagged; from the
    question word alone 0.005, from the stop words alone 0.027 (0.6% and 3.5% of the full queries' 0.775). Here a
    subset (the relevant passages of 48 queries and 32 distractors) keeps the test to seconds; its groups of 16 are
    too small for the gap to clear 0."""
    full = read_beir(SQUAD)
    rng = np.random.default_rng(0)
    picked = sorted(rng.choice(len(full), size=48, replace=False).tolist())
    examples = [full.examples[i] for i in picked]
    relevant = {d for ex in examples for d, g in ex.label if g >= 1}
    others = [i for i, d in enumerate(full.corpus.ids) if d not in relevant]
    keep = sorted({full.corpus.index[d] for d in relevant} | set(rng.choice(others, size=32, replace=False).tolist()))
    corpus = full.corpus
    docs = [(corpus.ids[i], corpus.passage(i)) for i in keep]
    queries = [(ex.id, ex.text, next(d for d, g in ex.label if g >= 1)) for ex in examples]
    data = read_beir(write_beir(tmp_path / "squad", docs, queries))
    target = load_target(ModelSpec(path=str(MINILM), device="cpu"))
    assert target.task.name == "sentence-embedding"
    result = SpuriousCuesProbe().run(target, data, CueParams(bootstrap=500), ProbeContext(seed=13))
    m = result.metrics
    low, high, gap = m["ndcg_low_overlap"], m["ndcg_high_overlap"], m["ndcg_overlap_gap"]
    print(f"\nsquad subset: nDCG@10 low {low.value:.3f} {low.ci}, high {high.value:.3f} {high.ci}, "
          f"gap {gap.value:+.3f} {gap.ci}; full {m['ndcg_full'].value:.3f}")
    assert result.details["overlap"]["queries_per_group"] == 16
    assert result.details["overlap"]["low_range"][1] <= result.details["overlap"]["high_range"][0]
    assert gap.value == pytest.approx(high.value - low.value)
    assert gap.ci[0] <= gap.value <= gap.ci[1]
    assert m["ndcg_full"].value > 0.8  # some 80 documents: easier than the full corpus's 0.775
    assert m["ndcg_share_question_word"].value < 0.2 and m["ndcg_share_stopwords"].value < 0.3
