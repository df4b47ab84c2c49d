"""Retrieval's foundations: BEIR data checked on load, the sentence-embedding and reranker tasks detected from
sentence-transformers' layouts, embeddings equal to sentence-transformers', exact search, and per-query metrics equal
to trec_eval's (pytrec_eval)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from bertprobe.data.beir import read_beir
from bertprobe.data.dataset import DataSpec
from bertprobe.errors import DataError, TargetError
from bertprobe.model.loading import load_target
from bertprobe.model.spec import ModelSpec
from bertprobe.tasks.embeddings import embed, ranks, search
from bertprobe.tasks.retrieval_metrics import pearson, per_query, spearman
from bertprobe.tasks.sentence_embedding import judgements
from bertprobe.testing import retrieval_texts, save_tiny_embedder, save_tiny_model, save_tiny_reranker, write_beir

SHARED = Path(__file__).resolve().parents[2] / "shared"
RETRIEVAL = SHARED / "data" / "squad-retrieval"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    docs, queries = retrieval_texts()
    return write_beir(tmp_path_factory.mktemp("beir"), docs, queries)


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_embedder(tmp_path_factory.mktemp("emb"), prompts={"query": "query: ", "passage": "passage: "})


def _copy(folder: Path, to: Path) -> Path:
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        (to / name).parent.mkdir(parents=True, exist_ok=True)
        (to / name).write_text((folder / name).read_text())
    return to


# ---- data --------------------------------------------------------------------------------------
def test_a_beir_folder_reads_queries_with_judgements_and_the_corpus(folder: Path) -> None:
    data = read_beir(folder)
    assert len(data) == 12 and len(data.corpus) == 24
    assert data.examples[0].label == (("doc-0", 1),) and data.examples[0].id == "q-0"
    assert data.corpus.index["other-0"] == 12 and "data:corpus" in data.features


def test_every_problem_of_a_beir_folder_is_named_at_once_with_file_line_and_id(folder: Path, tmp_path: Path) -> None:
    broken = _copy(folder, tmp_path)
    qrels = (broken / "qrels" / "test.tsv").read_text().splitlines()
    qrels[3] = qrels[3].replace("doc-2", "doc-missing")
    qrels += ["q-99\tdoc-1\t1", "q-1\tdoc-1\thigh"]
    (broken / "qrels" / "test.tsv").write_text("\n".join(qrels) + "\n")
    corpus = (broken / "corpus.jsonl").read_text().splitlines()
    corpus[5] = json.dumps({"_id": "doc-5", "text": "  "})
    (broken / "corpus.jsonl").write_text("\n".join(corpus) + "\n")
    with pytest.raises(DataError) as error:
        read_beir(broken)
    message = str(error.value)
    assert "line 4 of qrels/test.tsv: corpus-id 'doc-missing' names no document" in message
    assert "line 14 of qrels/test.tsv: query-id 'q-99' names no query" in message
    assert "line 15 of qrels/test.tsv: score 'high' is no whole number" in message
    assert "line 6 of corpus.jsonl: document 'doc-5' has an empty text" in message
    assert "line 7 of qrels/test.tsv: corpus-id 'doc-5' names a document that could not be read" in message


def test_a_query_without_qrels_is_refused_unless_dropped(folder: Path, tmp_path: Path) -> None:
    broken = _copy(folder, tmp_path)
    with open(broken / "queries.jsonl", "a") as f:
        f.write(json.dumps({"_id": "q-lonely", "text": "was the cat fun ?"}) + "\n")
    with pytest.raises(DataError, match="query 'q-lonely' has no qrels .*unjudged: drop"):
        read_beir(broken)
    assert len(read_beir(broken, DataSpec(path=str(broken), options={"unjudged": "drop"}))) == 12


def test_the_suite_default_split_falls_back_to_the_split_present_and_a_named_one_must_exist(folder: Path) -> None:
    assert len(read_beir(folder, DataSpec(path=str(folder)))) == 12  # validation -> test
    with pytest.raises(DataError, match="splits in .*: test"):
        read_beir(folder, DataSpec(path=str(folder), split="dev"))


@pytest.mark.skipif(not RETRIEVAL.is_dir(), reason="../shared squad-retrieval not present")
def test_the_fixture_reads_as_its_readme_counts() -> None:
    data = read_beir(RETRIEVAL)
    assert (len(data), len(data.corpus)) == (2777, 2067)
    assert all(len(ex.label) == 1 for ex in data.examples)


# ---- tasks -------------------------------------------------------------------------------------
def test_sentence_transformers_layout_is_detected_and_options_override_it(embedder: Path) -> None:
    target = load_target(ModelSpec(path=str(embedder), device="cpu"))
    assert target.task.name == "sentence-embedding"
    assert target.task.settings["normalize"] is True and target.task.settings["max_length"] == 64
    assert target.task.settings["query_prompt"] == "query: "
    other = load_target(ModelSpec(path=str(embedder), device="cpu", options={"pooling": "cls", "normalize": False}))
    assert other.task.settings["pooling"] == "cls" and other.task.settings["normalize"] is False
    with pytest.raises(DataError, match="model.options.pooling: 'median'"):
        load_target(ModelSpec(path=str(embedder), device="cpu", options={"pooling": "median"}))


def test_a_bare_encoder_without_the_layout_stays_an_encoder_unless_named(tmp_path: Path) -> None:
    path = save_tiny_model(tmp_path / "enc", task="encoder")
    assert load_target(ModelSpec(path=str(path), device="cpu")).task.name == "encoder"
    named = load_target(ModelSpec(path=str(path), device="cpu", task="sentence-embedding"))
    assert named.task.name == "sentence-embedding" and named.task.settings["pooling"] == "mean"


def test_a_cross_encoder_layout_is_a_reranker_and_one_output_without_it_is_refused_with_the_way_out(tmp_path: Path) -> None:
    path = save_tiny_reranker(tmp_path / "rr")
    assert load_target(ModelSpec(path=str(path), device="cpu")).task.name == "reranker"
    plain = save_tiny_model(tmp_path / "one", labels=("score",))
    with pytest.raises(TargetError, match="set task: reranker"):
        load_target(ModelSpec(path=str(plain), device="cpu"))
    assert load_target(ModelSpec(path=str(plain), device="cpu", task="reranker")).task.name == "reranker"


def test_embeddings_equal_sentence_transformers_encode_with_its_prompts(embedder: Path) -> None:
    st = pytest.importorskip("sentence_transformers")
    texts = [q for _, q, _ in retrieval_texts()[1]] + ["the dog", "a very very long scene " * 20]
    target = load_target(ModelSpec(path=str(embedder), device="cpu"))
    model = st.SentenceTransformer(str(embedder), device="cpu")
    for role, prompt in (("query", "query"), ("passage", "passage")):
        ours = embed(target, texts, target.task.embedding, role=role)
        theirs = model.encode(texts, prompt_name=prompt, convert_to_tensor=True)
        assert torch.allclose(ours, theirs, atol=1e-5)


def test_reranker_scores_equal_the_cross_encoder_logits(tmp_path: Path) -> None:
    st = pytest.importorskip("sentence_transformers")
    from bertprobe.tasks.reranker import pair_scores

    path = save_tiny_reranker(tmp_path / "rr")
    target = load_target(ModelSpec(path=str(path), device="cpu"))
    docs, queries = retrieval_texts()
    pairs = [(q, d) for (_, q, _), (_, d) in zip(queries, docs)]
    theirs = st.CrossEncoder(str(path), device="cpu").predict(pairs, activation_fn=torch.nn.Identity())
    assert torch.allclose(pair_scores(target, pairs), torch.tensor(theirs), atol=1e-5)


def test_exact_search_and_ranks_agree_with_brute_force() -> None:
    generator = torch.Generator().manual_seed(0)
    queries, docs = torch.randn(50, 8, generator=generator), torch.randn(300, 8, generator=generator)
    indices, values = search(queries, docs, 10, chunk=7)
    full = torch.nn.functional.normalize(queries, dim=1) @ torch.nn.functional.normalize(docs, dim=1).T
    assert torch.equal(indices, full.topk(10, dim=1).indices)
    assert torch.allclose(values, full.topk(10, dim=1).values)
    gold = [int(indices[i, 3]) for i in range(50)]
    assert ranks(queries, docs, gold, chunk=9).tolist() == [4] * 50


def test_per_query_metrics_equal_pytrec_eval_on_graded_runs() -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = random.Random(3)
    qrels, run, rankings, judged = {}, {}, [], []
    for q in range(40):
        docs = [f"d{i}" for i in range(150)]
        grades = {d: rng.choice([0, 1, 2, 3]) for d in rng.sample(docs, rng.randint(1, 8))}
        if not any(grades.values()):
            grades[docs[0]] = 1
        ranked = rng.sample(docs, 100)
        qrels[f"q{q}"], judged = grades, judged + [grades]
        run[f"q{q}"] = {d: 100.0 - i for i, d in enumerate(ranked)}
        rankings.append(ranked)
    ours = per_query(rankings, judged)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.1,10,100", "map"})
    theirs = evaluator.evaluate(run)
    cut = {q: {d: s for d, s in docs.items() if s > 90.0} for q, docs in run.items()}
    mrr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)
    for i in range(40):
        q = f"q{i}"
        assert ours["ndcg@10"][i] == pytest.approx(theirs[q]["ndcg_cut_10"], abs=1e-9)
        assert ours["map"][i] == pytest.approx(theirs[q]["map"], abs=1e-9)
        for k in (1, 10, 100):
            assert ours[f"recall@{k}"][i] == pytest.approx(theirs[q][f"recall_{k}"], abs=1e-9)
        assert ours["mrr@10"][i] == pytest.approx(mrr[q]["recip_rank"], abs=1e-9)


def test_correlations_equal_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(1)
    a = [rng.random() for _ in range(200)] + [0.5] * 10
    b = [x + rng.gauss(0, 0.3) for x in a[:200]] + [rng.choice([1.0, 2.0]) for _ in range(10)]
    assert spearman(a, b) == pytest.approx(stats.spearmanr(a, b).statistic, abs=1e-12)
    assert pearson(a, b) == pytest.approx(stats.pearsonr(a, b).statistic, abs=1e-12)


def test_a_reranker_reorders_its_first_stage_from_a_bi_encoder_or_a_run_file(folder: Path, embedder: Path,
                                                                              tmp_path: Path) -> None:
    data = read_beir(folder)
    encoder = load_target(ModelSpec(path=str(embedder), device="cpu", options={"depth": 5}))
    first = encoder.task.predict_data(encoder, data)
    reranker_dir = save_tiny_reranker(tmp_path / "rr")
    target = load_target(ModelSpec(path=str(reranker_dir), device="cpu",
                                   options={"first_stage": str(embedder), "depth": 5}))
    ranked = target.task.predict_data(target, data)
    for i in range(len(data)):
        assert sorted(ranked.ids(i)) == sorted(first.ids(i))  # the same documents, reordered
        assert ranked.scores[i].tolist() == sorted(ranked.scores[i].tolist(), reverse=True)
    run = tmp_path / "run.trec"
    run.write_text("".join(f"{ex.id} Q0 {d} {r + 1} {10 - r} bi\n" for i, ex in enumerate(data.examples)
                           for r, d in enumerate(first.ids(i))))
    from_file = load_target(ModelSpec(path=str(reranker_dir), device="cpu", options={"first_stage": str(run)}))
    again = from_file.task.predict_data(from_file, data)
    assert [again.ids(i) for i in range(len(data))] == [ranked.ids(i) for i in range(len(data))]
    judged = [judgements(ex.label) for ex in data.examples]
    assert per_query([again.ids(i) for i in range(len(data))], judged)["ndcg@10"].shape == (12,)


def test_validate_names_a_broken_qrel_by_file_line_and_id_and_exits_2(folder: Path, embedder: Path,
                                                                      tmp_path: Path) -> None:
    from click.testing import CliRunner

    from bertprobe.cli import main

    broken = _copy(folder, tmp_path / "broken")
    qrels = broken / "qrels" / "test.tsv"
    qrels.write_text(qrels.read_text().replace("q-3\tdoc-3", "q-3\tdoc-gone"))
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"suite: s\nmodel: {{path: '{embedder}', device: cpu}}\ndata: {{path: '{broken}'}}\n"
                     "probes:\n  - probe: accuracy\n")
    result = CliRunner().invoke(main, ["validate", str(suite)])
    assert result.exit_code == 2, result.output
    assert "line 5 of qrels/test.tsv: corpus-id 'doc-gone' names no document of corpus.jsonl" in result.output
    assert "Traceback" not in result.output
