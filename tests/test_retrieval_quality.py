"""Retrieval and similarity quality: the accuracy probe's and the slices probe's sections for models that rank texts
(bi-encoders, rerankers), held against pytrec_eval, scipy and sentence-transformers' own evaluator."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from conftest import SHARED, only_run

from bertprobe.cli import main
from bertprobe.data.beir import read_beir
from bertprobe.data.dataset import Dataset, Example
from bertprobe.errors import ProbeError
from bertprobe.model.loading import load_target
from bertprobe.model.predictions import Predictions, predict_directly
from bertprobe.model.spec import ModelSpec
from bertprobe.probe import ProbeContext
from bertprobe.probes.accuracy import AccuracyParams, AccuracyProbe
from bertprobe.probes.accuracy import rankings as R
from bertprobe.probes.slices import rankings as S
from bertprobe.probes.slices.probe import SlicesParams, SlicesProbe
from bertprobe.tasks.sentence_embedding import Ranked
from bertprobe.testing import retrieval_texts, save_tiny_embedder, save_tiny_reranker, write_beir

pytrec_eval = pytest.importorskip("pytrec_eval")
torch.set_num_threads(1)

MEASURES = {"ndcg_cut.10", "recall.1,10,100", "map"}
OURS = {"ndcg@10": "ndcg_cut_10", "recall@1": "recall_1", "recall@10": "recall_10", "recall@100": "recall_100",
        "map": "map", "mrr@10": "recip_rank"}


def graded_beir(folder: Path, queries: int = 40) -> Path:
    """``retrieval_texts`` in BEIR's layout, with graded judgements added: every third query has a second relevant
    document (grade 2) and a judged non-relevant one (grade 0)."""
    documents, asked = retrieval_texts(queries)
    write_beir(folder, documents, asked)
    with open(folder / "qrels" / "test.tsv", "a", encoding="utf-8") as f:
        for i, (query, _, _) in enumerate(asked):
            if i % 3 == 0:
                f.write(f"{query}\tother-{i}\t2\n{query}\tdoc-{(i + 1) % queries}\t0\n")
    return folder


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("retrieval")
    embedder = save_tiny_embedder(root / "embedder")
    beir = graded_beir(root / "beir")
    return root, embedder, beir


def trec(ranked: Ranked, data: Dataset) -> dict[str, dict[str, float]]:
    """pytrec_eval's per-query measures of the ranked lists: the whole list for nDCG, recall and MAP, the list cut
    at 10 for the reciprocal rank (MRR@10)."""
    qrels = {ex.id: {d: int(g) for d, g in ex.label} for ex in data.examples}
    run, cut = {}, {}
    for i, ex in enumerate(data.examples):
        docs, scores = ranked.ids(i), ranked.scores[i].tolist()[: len(ranked.ids(i))]
        run[ex.id] = {d: float(s) for d, s in zip(docs, scores)}
        cut[ex.id] = {d: float(s) for d, s in zip(docs[:10], scores[:10])}
    out = pytrec_eval.RelevanceEvaluator(qrels, MEASURES).evaluate(run)
    for q, row in pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut).items():
        out[q]["recip_rank"] = row["recip_rank"]
    return out


def assert_equal_to_trec(result, ranked: Ranked, data: Dataset, names=OURS) -> None:
    want = trec(ranked, data)
    ids = [ex.id for ex in data.examples]
    outcomes = {o.name: o for o in result.outcomes}
    for ours, theirs in names.items():
        per_query = [want[q][theirs] for q in ids]
        assert result.metrics[ours].value == pytest.approx(float(np.mean(per_query)), abs=1e-6), ours
        assert outcomes[ours].ids == ids and outcomes[ours].kind == "score"
        assert np.allclose(outcomes[ours].values, per_query, atol=1e-6), ours
        assert result.metrics[ours].outcome == ours


def test_the_metrics_equal_pytrec_evals_with_outcomes_per_query_and_intervals_around_the_mean(built):
    _, embedder, beir = built
    target = load_target(ModelSpec(path=str(embedder), device="cpu"))
    data = read_beir(beir)
    result = AccuracyProbe().run(target, data, AccuracyParams(bootstrap=200), ProbeContext(seed=3))
    ranked = predict_directly(target, data).answers
    assert_equal_to_trec(result, ranked, data)
    assert 0 < result.value("ndcg@10") < 1  # a random model: neither perfect nor hopeless, so the check has teeth
    for name in [*OURS, "hit@10"]:
        m = result.metrics[name]
        assert m.ci is not None and m.ci[0] <= m.value <= m.ci[1], name
    assert m.ci[0] < m.ci[1]
    hits = {o.name: o for o in result.outcomes}["hit@10"]
    judged = {ex.id: {d for d, g in ex.label if g >= 1} for ex in data.examples}
    assert hits.kind == "binary" and hits.as_map() == {
        ex.id: float(bool(judged[ex.id] & set(ranked.ids(i)[:10]))) for i, ex in enumerate(data.examples)}
    assert {o.name: o for o in result.outcomes}["prediction"].as_map() == {
        ex.id: json.dumps(ranked.ids(i)[:10]) for i, ex in enumerate(data.examples)}
    assert result.value("queries") == 40 and result.value("documents") == 80
    assert result.metrics["examples_per_s"].kind == "cost" and result.value("examples_per_s") > 0
    # the worst queries first: the gold's rank, the passage ranked first instead
    assert len(result.findings) == 10
    first = result.findings[0]
    i = [ex.id for ex in data.examples].index(first.extra["id"])
    assert first.input == data.examples[i].text and first.observed.startswith(ranked.ids(i)[0] + ": ")
    gold_rank = next(k + 1 for k, d in enumerate(ranked.ids(i)) if d in judged[first.extra["id"]])
    assert first.extra["gold_rank"] == gold_rank and f"rank {gold_rank}" in first.title
    scores = [f.score for f in result.findings]
    assert scores == sorted(scores) and scores[0] == pytest.approx(min(o for o in {
        o.name: o for o in result.outcomes}["ndcg@10"].values))
    assert "nDCG@10" in result.details["key_finding"]


def test_without_bootstrap_the_intervals_are_left_out(built):
    _, embedder, beir = built
    target = load_target(ModelSpec(path=str(embedder), device="cpu"))
    result = AccuracyProbe().run(target, read_beir(beir), AccuracyParams(bootstrap=0, findings=0), ProbeContext(seed=0))
    assert result.metrics["ndcg@10"].ci is None and not result.findings


def test_a_reranker_reorders_its_first_stage_and_is_scored_as_trec_eval_scores_it(built):
    root, embedder, beir = built
    reranker = save_tiny_reranker(root / "reranker", seed=1)
    data = read_beir(beir)
    first = load_target(ModelSpec(path=str(embedder), device="cpu", options={"depth": 20}))
    stage = predict_directly(first, data).answers
    run_file = root / "first.run"
    run_file.write_text("".join(f"{ex.id} Q0 {d} {k + 1} {s:.6f} tiny\n" for i, ex in enumerate(data.examples)
                                for k, (d, s) in enumerate(zip(stage.ids(i), stage.scores[i].tolist()))))
    for source in (embedder, run_file):
        target = load_target(ModelSpec(path=str(reranker), device="cpu",
                                       options={"first_stage": str(source), "depth": 20}))
        assert target.task.name == "reranker"
        reranked = predict_directly(target, data).answers
        for i in range(len(data.examples)):
            assert sorted(reranked.ids(i)) == sorted(stage.ids(i)) and len(reranked.ids(i)) == 20
        assert any(reranked.ids(i) != stage.ids(i) for i in range(len(data.examples)))  # it did reorder
        result = AccuracyProbe().run(target, data, AccuracyParams(bootstrap=50), ProbeContext(seed=0))
        assert_equal_to_trec(result, reranked, data)
        assert result.details["task"]["name"] == "reranker"


def sts_pairs(n: int = 60) -> Dataset:
    """Pairs of ``retrieval_texts`` sentences with gold scores in steps of 0.5 (many ties, as STS-B has)."""
    documents, _ = retrieval_texts(n)
    texts = [t for _, t in documents]
    rng = np.random.default_rng(0)
    return Dataset([Example(text=texts[i], text_pair=texts[(i * 7 + 3) % len(texts)],
                            label=float(rng.integers(0, 11)) / 2, id=f"p{i}") for i in range(n)])


def test_similarity_pairs_get_spearman_and_pearson_equal_to_scipys(built):
    from scipy.stats import pearsonr, spearmanr

    _, embedder, _ = built
    target = load_target(ModelSpec(path=str(embedder), device="cpu"))
    data = sts_pairs()
    result = AccuracyProbe().run(target, data, AccuracyParams(bootstrap=300), ProbeContext(seed=0))
    scores = predict_directly(target, data).answers.scores.numpy().astype(np.float64)
    gold = [ex.label for ex in data.examples]
    assert result.value("spearman") == pytest.approx(spearmanr(scores, gold).statistic, abs=1e-9)
    assert result.value("pearson") == pytest.approx(pearsonr(scores, gold).statistic, abs=1e-9)
    for name in ("spearman", "pearson"):
        lo, hi = result.metrics[name].ci
        assert lo < result.value(name) < hi and -1 <= lo and hi <= 1
    assert result.value("pairs") == 60 and "ndcg@10" not in result.metrics
    assert len(result.findings) == 10 and result.findings[0].perturbed is not None


def test_the_bootstraps_ranks_are_scipys_with_ties():
    from scipy.stats import rankdata

    values = np.array([[3.0, 1.0, 3.0, 2.0, 1.0, 3.0], [0.5, 0.5, 0.5, 0.5, 0.1, 0.9]])
    assert np.array_equal(R.ranks(values), rankdata(values, axis=1))


# ---- the slices probe's section -----------------------------------------------------------------------------------

SLICE_QUERIES = [  # (query, gold passage): lengths, question words and overlaps chosen
    ("who wrote the dull script", "the script was written by a dull director"),  # who, 5 words, overlap high
    ("what is a robin", "the robin is a bird"),  # what, 4 words, overlap 1/1 high
    ("when did the cat sleep on the warm mat all afternoon long", "a dog ran"),  # when, 12 words, overlap low (0)
    ("apple", "an apple fell"),  # other, 1 word, high
    ("how good was the ending of the story", "the ending was weak"),  # how, 8 words, good/ending/story: 1/3 medium
    ("the", "the end"),  # other, no content word: in no overlap slice
]


def slice_data(folder: Path) -> Dataset:
    docs = [(f"d{i}", p) for i, (_, p) in enumerate(SLICE_QUERIES)]
    return read_beir(write_beir(folder, docs, [(f"q{i}", q, f"d{i}") for i, (q, _) in enumerate(SLICE_QUERIES)]))


def test_the_query_slices_bin_length_question_word_and_overlap_with_the_gold_passage(tmp_path):
    masks = {k: np.flatnonzero(v).tolist() for k, v in S.query_slices(slice_data(tmp_path)).items()}
    assert masks == {
        "query length 1-3 words": [3, 5], "query length 4-6 words": [0, 1], "query length 7-10 words": [4],
        "query length 11-15 words": [2],
        "question word: what": [1], "question word: who": [0], "question word: when": [2], "question word: how": [4],
        "question word: other": [3, 5],
        "query-passage overlap low": [2], "query-passage overlap medium": [4], "query-passage overlap high": [0, 1, 3]}
    assert S.query_overlap("good ending story", ["the ending was weak", "a good story"]) == pytest.approx(2 / 3)
    assert math.isnan(S.query_overlap("the of", ["the end"]))


def test_a_weak_slice_of_queries_is_flagged_and_its_ndcg_is_the_mean_over_its_queries(tmp_path):
    # 60 queries: the 'who' ones find their gold at rank 7, the others at rank 1 (a made ranking, read from ctx)
    n = 60
    docs = [(f"d{i}", f"passage {i} about topic {i}") for i in range(n)]
    words = ["who", "what", "when"]
    queries = [(f"q{i}", f"{words[i % 3]} is topic {i}", f"d{i}") for i in range(n)]
    data = read_beir(write_beir(tmp_path / "b", docs, queries))
    order = []
    for i in range(n):
        others = [j for j in range(n) if j != i][:9]
        order.append(others[:6] + [i] + others[6:] if i % 3 == 0 else [i] + others)
    ranked = Ranked(torch.tensor(order), torch.linspace(1, 0, 10).repeat(n, 1), data.corpus)

    def predictions(target, data, batch_size=None):
        return Predictions(None, 1.0, answers=ranked)

    class Target:
        from bertprobe.tasks.sentence_embedding import SentenceEmbedding

        task = SentenceEmbedding()

    result = SlicesProbe().run(Target(), data, SlicesParams(min_size=10), ProbeContext(seed=0, predictions=predictions))
    rows = {r["name"]: r for r in result.details["slices"]}
    who = rows["question word: who"]
    assert who["flagged"] and who["size"] == 20
    assert who["ndcg@10"] == pytest.approx(1 / math.log2(8))  # gold at rank 7
    assert who["rest_ndcg@10"] == pytest.approx(1.0) and who["hit@10"] == 1.0
    assert not rows["question word: what"]["flagged"]
    assert result.value("slices_flagged") == 1 and result.value("ndcg@10") == pytest.approx((40 + 20 / math.log2(8)) / 60)
    assert result.value("worst_slice_ndcg@10") == pytest.approx(1 / math.log2(8))
    (finding, *_) = result.findings
    assert finding.extra["slice"] == "question word: who" and "gold at rank 7" in finding.observed
    assert result.details["unit"] == "queries"


def test_slices_refuse_similarity_pairs_in_one_line(built):
    _, embedder, _ = built
    target = load_target(ModelSpec(path=str(embedder), device="cpu"))
    with pytest.raises(ProbeError, match="need BEIR data"):
        SlicesProbe().run(target, sts_pairs(8), SlicesParams(), ProbeContext(seed=0))


def test_both_probes_list_the_ranking_tasks_and_find_their_sections():
    from bertprobe.tasks.reranker import Reranker
    from bertprobe.tasks.sentence_embedding import SentenceEmbedding

    context = ProbeContext(seed=0)
    for task in (SentenceEmbedding, Reranker):
        assert task.name in AccuracyProbe.tasks and task.name in SlicesProbe.tasks
        assert context.section("accuracy", task) is R and context.section("slices", task) is S
    assert {"ndcg@10", "mrr@10", "recall@100", "map", "hit@10", "spearman"} <= set(AccuracyProbe.catalogue().metrics)
    assert AccuracyProbe.catalogue().direction("ndcg@10") is True


# ---- a suite run through the CLI ------------------------------------------------------------------------------------

def test_a_suite_runs_accuracy_and_slices_on_a_bi_encoder_with_expectations_on_ndcg(tmp_path, built):
    _, embedder, beir = built
    suite = tmp_path / "retrieval.yaml"
    suite.write_text(
        f"suite: retrieval\nmodel: {{path: '{embedder}', device: cpu}}\ndata: {{path: '{beir}'}}\n"
        f"report: {{dir: '{tmp_path / 'reports'}', formats: [json, markdown]}}\nprobes:\n"
        "  - probe: accuracy\n    params: {bootstrap: 100}\n    expect: {ndcg@10: {min: 0.01}, recall@100: {min: 0.5}}\n"
        "  - probe: slices\n    params: {min_size: 5}\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    run_dir, report = only_run(tmp_path / "reports", "retrieval")
    accuracy, slices = report["probes"]
    assert accuracy["status"] == "passed" and slices["status"] in ("passed", "failed")
    assert {"ndcg@10", "mrr@10", "recall@1", "recall@10", "recall@100", "map", "hit@10", "queries"} <= set(
        accuracy["metrics"])
    judged = {e["metric"]: e for e in accuracy["expectations"]}
    assert judged["ndcg@10"]["passed"] and judged["recall@100"]["passed"]
    assert "ndcg@10" in slices["metrics"] and slices["details"]["unit"] == "queries"
    vectors = [json.loads(line) for line in (run_dir / "outcomes.jsonl").read_text().splitlines()]
    ndcg = next(v for v in vectors if v["name"] == "ndcg@10" and v.get("probe", "accuracy").startswith("accuracy"))
    assert len(ndcg["ids"]) == 40
    assert "ndcg@10" in (run_dir / "report.md").read_text()


# ---- the fixture: all-MiniLM-L6-v2 on a SQuAD retrieval subset -------------------------------------------------------

BASE = SHARED / "models" / "minilm-l6-base"
SQUAD_RETRIEVAL = SHARED / "data" / "squad-retrieval"


def squad_subset(folder: Path, queries: int = 60, distractors: int = 100) -> Path:
    """``queries`` queries spread over the fixture, their gold documents and ``distractors`` other documents, in
    BEIR's layout (the rows copied verbatim)."""
    source = SQUAD_RETRIEVAL
    qrels = [line.split("\t") for line in (source / "qrels" / "test.tsv").read_text().splitlines()[1:] if line]
    every = list(dict.fromkeys(q for q, _, _ in qrels))
    asked = every[:: max(1, len(every) // queries)][:queries]  # spread over the paragraphs
    gold = {d for q, d, _ in qrels if q in asked}
    corpus = [json.loads(line) for line in (source / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line]
    others = [r for r in corpus if r["_id"] not in gold][:: max(1, len(corpus) // distractors)][:distractors]
    kept = [r for r in corpus if r["_id"] in gold] + others
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
    wanted = set(asked)
    lines = (source / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    (folder / "queries.jsonl").write_text("".join(line + "\n" for line in lines if line and json.loads(line)["_id"]
                                                  in wanted), encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        "\t".join(row) + "\n" for row in qrels if row[0] in wanted), encoding="utf-8")
    return folder


@pytest.mark.skipif(not (BASE.is_dir() and SQUAD_RETRIEVAL.is_dir()), reason="../shared retrieval fixture not present")
def test_minilm_on_a_squad_subset_agrees_with_pytrec_eval_and_sentence_transformers(tmp_path):
    st = pytest.importorskip("sentence_transformers")
    try:
        from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator
    except ImportError:  # before sentence-transformers 6
        from sentence_transformers.evaluation import InformationRetrievalEvaluator
    from bertprobe.tasks.embeddings import embed

    data = read_beir(squad_subset(tmp_path / "squad", queries=40, distractors=60))
    target = load_target(ModelSpec(path=str(BASE), device="cpu"))
    assert target.task.name == "sentence-embedding"
    once = predict_directly(target, data)  # one pass, read by the probe and checked here
    result = AccuracyProbe().run(target, data, AccuracyParams(bootstrap=100),
                                 ProbeContext(seed=0, predictions=lambda *args, **kwargs: once))
    ranked = once.answers
    assert_equal_to_trec(result, ranked, data, {k: OURS[k] for k in ("ndcg@10", "mrr@10", "recall@10")})
    assert 0.8 < result.value("ndcg@10") < 1.0  # an easy subset: about 100 documents, 40 queries

    corpus = data.corpus
    passages = [corpus.passage(i) for i in range(len(corpus))]
    questions = [ex.text for ex in data.examples]
    model = st.SentenceTransformer(str(BASE), device="cpu", model_kwargs={"dtype": torch.float32})
    settings = target.task.embedding
    for texts, role in ((questions, "query"), (passages[:20], "passage")):
        ours = embed(target, texts, settings, role=role)
        theirs = model.encode(texts, convert_to_tensor=True)
        assert torch.allclose(ours, theirs, atol=1e-5), (ours - theirs).abs().max()

    evaluator = InformationRetrievalEvaluator(
        queries={ex.id: ex.text for ex in data.examples}, corpus=dict(zip(corpus.ids, passages)),
        relevant_docs={ex.id: {d for d, g in ex.label if g >= 1} for ex in data.examples}, write_csv=False,
        score_functions={"cosine": __import__("sentence_transformers").util.cos_sim}, main_score_function="cosine")
    scores = evaluator(model)
    assert result.value("ndcg@10") == pytest.approx(scores["cosine_ndcg@10"], abs=1e-6)
