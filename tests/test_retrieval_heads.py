"""head-pruning on a bi-encoder (its section, probes/head_pruning/rankings.py): the corpus subset the sweeps rank,
nDCG@10 under a head mask equal to the task's own search with the same mask on both sides, a layer's heads masked
changing it, the contrastive importance of a head that cannot matter, and the probe end to end on a tiny embedder;
and syntax-heads and attention-audit on a bi-encoder's treebank, equal to the same checkpoint read as an encoder."""

from __future__ import annotations

import pytest
import torch

from bertprobe.data.beir import read_beir
from bertprobe.errors import ProbeError
from bertprobe.model.interventions import head_intervention
from bertprobe.model.loading import load_target
from bertprobe.model.spec import ModelSpec
from bertprobe.probe import ProbeContext
from bertprobe.probes.head_pruning import rankings
from bertprobe.probes.head_pruning.evaluator import Evaluator
from bertprobe.probes.head_pruning.params import HeadParams
from bertprobe.probes.head_pruning.probe import HeadPruningProbe
from bertprobe.probes.head_pruning.sweep import sampled
from bertprobe.tasks.retrieval_metrics import per_query
from bertprobe.tasks.sentence_embedding import judgements
from bertprobe.testing import retrieval_texts, save_tiny_embedder, write_beir


@pytest.fixture(scope="module")
def embedder(tmp_path_factory):
    return load_target(ModelSpec(path=str(save_tiny_embedder(tmp_path_factory.mktemp("embedder"))), device="cpu"))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    docs, queries = retrieval_texts(24, seed=3)
    return read_beir(write_beir(tmp_path_factory.mktemp("beir") / "beir", docs, queries))


def task_ndcg(target, data, mask=None):
    """nDCG@10 per query from the task's own search (``predict_data``), with ``mask`` on every forward pass."""
    with head_intervention(target.model, target.attention_sites(), mask=None if mask is None else mask.unsqueeze(0)):
        ranked = target.task.predict_data(target, data)
    return per_query([ranked.ids(i) for i in range(len(data))], [judgements(ex.label) for ex in data.examples])["ndcg@10"]


def test_the_sample_keeps_every_relevant_document_and_the_distractors_asked(data):
    small = sampled(data, 10, seed=4, distractors=7)
    relevant = {d for ex in small.examples for d, g in ex.label if g >= 1}
    assert len(small) == 10 and relevant <= set(small.corpus.ids)
    assert len(small.corpus) == len(relevant) + 7
    assert list(small.corpus.ids) == [d for d in data.corpus.ids if d in set(small.corpus.ids)]  # corpus order
    again = sampled(small, 10, seed=4, distractors=7)
    assert again.corpus.ids == small.corpus.ids and [e.id for e in again.examples] == [e.id for e in small.examples]
    assert sampled(data, 10, seed=5, distractors=7).corpus.ids != small.corpus.ids
    assert sampled(data, None, seed=4, distractors=1000).corpus is data.corpus  # nothing to cut


def test_masked_ndcg_equals_the_task_search_with_the_mask_on_queries_and_passages(embedder, data):
    small = sampled(data, 16, seed=1, distractors=10)
    ev = Evaluator(embedder, small, batch_size=5, section=rankings)  # batches mix queries and passages
    assert ev.score.name == "ndcg@10" and len(ev.examples) == 16 and len(ev.labels) == 16 + len(small.corpus)
    assert ev.correct() == pytest.approx(task_ndcg(embedder, small), abs=1e-12)
    layers, heads = ev.shape
    for layer in range(layers):
        mask = torch.ones(layers, heads)
        mask[layer] = 0
        masked = ev.correct(mask=mask)
        assert masked == pytest.approx(task_ndcg(embedder, small, mask), abs=1e-12)
        assert masked.tolist() != ev.correct().tolist()  # a layer's heads removed move some query's nDCG
    stacked = ev.correct_many(masks=[torch.ones(layers, heads), torch.zeros(layers, heads)])
    assert stacked[0] == pytest.approx(ev.correct()) and stacked[1] == pytest.approx(ev.correct(mask=torch.zeros(layers, heads)))


def test_other_ranking_metrics_and_refusals(embedder, data):
    small = sampled(data, 8, 0, 5)
    ev = Evaluator(embedder, small, None, metric="mrr@10", section=rankings)
    ranked = embedder.task.predict_data(embedder, small)
    mrr = per_query([ranked.ids(i) for i in range(8)], [judgements(ex.label) for ex in small.examples])["mrr@10"]
    assert ev.score.name == "mrr@10" and ev.correct() == pytest.approx(mrr, abs=1e-12)
    with pytest.raises(ProbeError, match="ndcg@10"):
        Evaluator(embedder, data, None, metric="accuracy", section=rankings)
    from bertprobe.data.dataset import Dataset, Example

    pairs = Dataset([Example(text="a", text_pair="b", label=0.5, id="p")], name="sts")
    with pytest.raises(ProbeError, match="BEIR folder"):
        Evaluator(embedder, pairs, None, section=rankings)


def test_a_head_whose_values_are_zero_has_no_contrastive_importance(tmp_path, data):
    target = load_target(ModelSpec(path=str(save_tiny_embedder(tmp_path / "e", seed=2)), device="cpu"))
    attention = target.model.encoder.layer[1].attention.self
    size = attention.attention_head_size
    with torch.no_grad():  # head 2 of layer 1 reads nothing: its context slice is zero whatever its mask
        attention.value.weight[2 * size:3 * size] = 0
        attention.value.bias[2 * size:3 * size] = 0
    ev = Evaluator(target, sampled(data, 24, 0, 10), None, section=rankings)
    importance = ev.importance()
    assert importance.shape == (2, 4)
    assert importance[1, 2] == 0
    assert bool((importance.flatten()[torch.arange(8) != 6] > 0).all())
    again = ev.importance(torch.ones(2, 4))
    assert torch.allclose(importance, again)


def test_the_probe_sweeps_a_tiny_embedder_on_a_sample(embedder, data):
    params = HeadParams(retrieval_queries=12, distractors=8, bootstrap=200, step=0.25)
    result = HeadPruningProbe().run(embedder, data, params, ProbeContext(seed=2))
    small = sampled(data, 12, 2, 8)
    assert result.value("baseline") == pytest.approx(float(task_ndcg(embedder, small).mean()))
    assert result.details["metric"] == "ndcg@10"
    assert any("corpus subset of" in w for w in result.details["warnings"])
    layers = result.details["layer_ablation"]
    assert len(layers) == 2 and any(row["drop"] != 0 for row in layers)
    assert len(result.details["ablation"]) == 8
    outcome = {o.name: o for o in result.outcomes}["ndcg@10"]
    assert outcome.kind == "score" and len(outcome.ids) == 12
    assert result.details["pruning_curve"][0]["fraction"] == 0.0
    assert "sentence-embedding" in HeadPruningProbe.tasks


# ---- attention probes on a bi-encoder ---------------------------------------------------------------------------


def test_syntax_and_attention_probes_read_a_bi_encoder_on_a_treebank_as_its_encoder(tmp_path, treebank):
    from bertprobe.data.dataset import DataSpec
    from bertprobe.data.treebank import read_conllu
    from bertprobe.probes.attention_audit import AttentionAuditProbe, AttentionParams
    from bertprobe.probes.syntax_heads.probe import SyntaxHeadsProbe, SyntaxParams
    from bertprobe.testing import WORDS

    words = (*WORDS, "gave", "bone", "cat", "cats", "can", "have", "two", "to", ".", "puppies")
    folder = save_tiny_embedder(tmp_path / "e", words=words)
    bi = load_target(ModelSpec(path=str(folder), device="cpu"))
    encoder = load_target(ModelSpec(path=str(folder), device="cpu", task="encoder"))
    assert bi.task.name == "sentence-embedding" and encoder.task.name == "encoder"
    trees = read_conllu(treebank)
    assert bi.task.read_labels(trees, DataSpec(path=str(treebank)), "e") is trees  # a treebank passes unchanged
    assert {"sentence-embedding", "reranker"} <= SyntaxHeadsProbe.tasks & AttentionAuditProbe.tasks
    params = SyntaxParams(min_count=1, parser_epochs=2, major=("det",), eval_data=str(treebank))

    def values(result):  # timings aside
        return {k: m.value for k, m in result.metrics.items() if not k.endswith("seconds")}

    a, b = (SyntaxHeadsProbe().run(t, trees, params, ProbeContext(seed=0)) for t in (bi, encoder))
    assert a.details["relations"] and values(a) == values(b) and "accuracy_det" in values(a)
    a, b = (AttentionAuditProbe().run(t, trees, AttentionParams(clusters=2), ProbeContext()) for t in (bi, encoder))
    assert "cls_attention" in values(a) and values(a) == pytest.approx(values(b))
