"""Builds of a sentence-embedding model: its ONNX Runtime export (fp32, int8-dynamic), a bf16 copy, the graph of
sentence-transformers' ONNX backend layout (``onnx/model.onnx``), and a matrix that pairs each build with the
PyTorch model query by query: paired nDCG differences through the gate, and the share of the top 10 both retrieve."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from bertprobe.hookmarkers import hookimpl
from bertprobe.probe import Probe
from bertprobe.results import ProbeResult
from bertprobe.results.outcomes import Agreement, Outcomes, ranking_ids, ranking_label, top_overlap
from bertprobe.testing import retrieval_texts, save_tiny_embedder, write_beir

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BERTPROBE_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_embedder(tmp_path_factory.mktemp("emb") / "model", seed=4)


def _texts() -> list[str]:
    documents, queries = retrieval_texts(12)
    return [t for _, t in documents] + [t for _, t, _ in queries]


def _spec(path: Path | str, **fields: Any) -> Any:
    from bertprobe.model import ModelSpec

    return ModelSpec(path=str(path), device="cpu", dtype=fields.pop("dtype", "float32"), **fields)


def _load(path: Path | str, **fields: Any) -> Any:
    from bertprobe.model import load_target

    return load_target(_spec(path, **fields))


def _build(base: Any, path: Path, **fields: Any) -> tuple[Any, list[str]]:
    from bertprobe.model.variants import derive_variant

    return derive_variant(base, _spec(path, runtime="onnx", **fields))


def _embed(target: Any) -> torch.Tensor:
    from bertprobe.tasks.embeddings import embed

    return embed(target, _texts(), target.task.embedding)


def test_the_fp32_export_embeds_as_torch_does(embedder: Path) -> None:
    """The export returns the encoder's last hidden states (a bare encoder has no logits), is checked on them, and
    pools to torch's embeddings within 1e-5."""
    from bertprobe.model.onnx import OnnxTarget

    base = _load(embedder)
    build, notes = _build(base, embedder)
    assert isinstance(build, OnnxTarget) and build.task.name == "sentence-embedding" and not build.quantized
    assert [o.name for o in build.model.session.get_outputs()] == ["last_hidden_state"]
    assert "largest |hidden-state difference| against PyTorch" in notes[0]
    want, got = _embed(base), _embed(build)
    assert got.shape == want.shape == (len(_texts()), 32)
    assert float((got - want).abs().max()) < 1e-5
    assert torch.allclose(got.norm(dim=1), torch.ones(len(got)), atol=1e-5)  # the layout's Normalize, kept


def _top10(target: Any, queries: list[str], documents: list[str]) -> list[list[str]]:
    from bertprobe.tasks.embeddings import embed, search

    settings = target.task.embedding
    q = embed(target, queries, settings, role="query")
    d = embed(target, documents, settings, role="passage")
    indices, _ = search(q, d, 10, settings.similarity)
    return [[f"d{j}" for j in row] for row in indices.tolist()]


def test_the_int8_builds_top10_overlap_with_fp32_is_the_share_of_shared_documents(embedder: Path,
                                                                                     tmp_path: Path) -> None:
    base = _load(embedder)
    fp32, _ = _build(base, embedder)
    int8, notes = _build(base, embedder, quantize="int8-dynamic")
    assert int8.quantized and any("int8-dynamic" in n for n in notes)
    assert not torch.allclose(_embed(int8), _embed(fp32))  # the build's embeddings are its own
    documents, asked = retrieval_texts(40, seed=3)
    queries, docs = [t for _, t, _ in asked], [t for _, t in documents]
    other = _load(save_tiny_embedder(tmp_path / "other", seed=5))  # another model: lists that surely differ
    lists = {"fp32": _top10(fp32, queries, docs), "int8": _top10(int8, queries, docs),
             "other": _top10(other, queries, docs)}
    ids = [f"q{i}" for i in range(len(queries))]
    vectors = {name: Outcomes.from_values("prediction", ids, [ranking_label(r) for r in rows], "label")
               for name, rows in lists.items()}
    for name in ("int8", "other"):
        agreement = Agreement.between(name, "fp32", "ranking", vectors["fp32"], vectors[name])
        direct = [len(set(a) & set(b)) / 10 for a, b in zip(lists["fp32"], lists[name])]
        assert agreement.overlap is not None and 0.0 <= agreement.overlap <= 1.0
        assert agreement.overlap == pytest.approx(float(np.mean(direct)), abs=1e-12)
        assert agreement.overlap_depth == 10 and agreement.paired == len(queries)
        assert agreement.agreed == sum(a == b for a, b in zip(lists["fp32"], lists[name]))  # identical, in order
        low, high = agreement.overlap_ci  # type: ignore[misc]
        assert low <= agreement.overlap <= high and 0.0 <= low and high <= 1.0
    assert agreement.overlap < 0.9 and agreement.agreed < len(queries)  # the other model's: far from the same
    other = Agreement.between("fp32", "fp32", "ranking", vectors["fp32"], vectors["fp32"])
    assert (other.overlap, other.rate) == (1.0, 1.0)


def test_ranking_labels_round_trip_and_only_rankings_get_an_overlap() -> None:
    label = ranking_label([f"doc {i}" for i in range(12)])  # ids with spaces; only the top 10 kept
    assert ranking_ids(label) == [f"doc {i}" for i in range(10)]
    assert [ranking_ids(x) for x in ("positive", "[PER Maria]", "[1, 2]", '["a"')] == [None] * 4
    assert top_overlap(["a", "b", "c"], ["c", "a", "x"]) == pytest.approx(2 / 3)
    classes = Agreement.between("b", "a", "accuracy", Outcomes.from_values("prediction", ["1"], ["pos"], "label"),
                                Outcomes.from_values("prediction", ["1"], ["neg"], "label"))
    assert classes.overlap is None
    from bertprobe.reporters.summary import agreement_rows

    changed = [("q1", ranking_label(["a", "b", "c"]), ranking_label(["a", "c", "b"]))]
    ranked = Agreement("int8", "fp32", "ranking", 4, 1, changed, 0.925, (0.85, 1.0), 10)
    row = agreement_rows([ranked])[0]
    assert row[2] == "25.00%; top-10 overlap 0.925 [0.850, 1.000]"
    assert row[-1] == "q1: '[a, b, c]' -> '[a, c, b]'"  # ids in brackets, not JSON
    assert Agreement.from_dict(json.loads(json.dumps(ranked.__dict__))) == ranked


def test_a_bf16_copy_embeds_close_to_fp32(embedder: Path) -> None:
    base, half = _load(embedder), _load(embedder, dtype="bfloat16")
    assert next(half.model.parameters()).dtype == torch.bfloat16 and half.task.name == "sentence-embedding"
    want, got = _embed(base), _embed(half)
    assert got.dtype == torch.float32
    cosine = torch.nn.functional.cosine_similarity(want, got, dim=1)
    assert float(cosine.min()) > 0.99 and float((got - want).abs().max()) > 0  # bf16's rounding, small


def test_sentence_transformers_onnx_layout_reads_the_folder_above(embedder: Path, tmp_path: Path) -> None:
    """sentence-transformers' ONNX backend keeps ``onnx/model.onnx`` beside modules.json, the pooling and the
    tokenizer: the graph, its folder, and a root without PyTorch weights all load with that layout."""
    base = _load(embedder)
    build, _ = _build(base, embedder)
    root = tmp_path / "st"
    shutil.copytree(embedder, root)
    (root / "onnx").mkdir()
    shutil.copy(build.model.file, root / "onnx" / "model.onnx")
    want = _embed(base)
    for path in (root / "onnx" / "model.onnx", root / "onnx"):
        target = _load(path)
        assert type(target).__name__ == "OnnxTarget" and target.task.name == "sentence-embedding"
        assert target.task.settings["normalize"] and target.task.settings["max_length"] == 64  # the layout's
        assert str(root) in target.notes[-1]
        assert float((_embed(target) - want).abs().max()) < 1e-5
    assert type(_load(root)).__name__ == "Target"  # the root holds PyTorch weights: the PyTorch model
    for weights in root.glob("*.safetensors"):
        weights.unlink()
    assert type(_load(root)).__name__ == "OnnxTarget"  # none: its onnx/model.onnx


# ---- a matrix: the builds paired with the PyTorch model, query by query ---------------------------------------
@dataclass(frozen=True)
class _NoParams:
    pass


class RankingOutcomes(Probe):
    """A stand-in for the accuracy probe's ranking section: per-query ndcg@10 (score), hit@10 (binary) and the
    top 10 as the ``prediction`` (``ranking_label``)."""

    name = "ranking-outcomes"
    description = "per-query retrieval outcomes (tests)"
    tasks = frozenset({"sentence-embedding"})
    Params = _NoParams

    def run(self, target: Any, data: Any, params: Any, ctx: Any) -> ProbeResult:
        from bertprobe.tasks.retrieval_metrics import per_query
        from bertprobe.tasks.sentence_embedding import judgements

        ranked = target.task.predict_data(target, data)
        lists = [ranked.ids(i) for i in range(len(data.examples))]
        values = per_query(lists, [judgements(ex.label) for ex in data.examples])
        hit = [float(r > 0) for r in values["recall@10"]]  # some relevant document in the top 10
        ids = [ex.id for ex in data.examples]
        result = ProbeResult(probe=self.name)
        result.outcomes += [Outcomes.from_values("ndcg@10", ids, values["ndcg@10"], "score"),
                            Outcomes.from_values("hit@10", ids, hit, "binary"),
                            Outcomes.from_values("prediction", ids, [ranking_label(r) for r in lists], "label")]
        result.add_metric("ndcg@10", float(values["ndcg@10"].mean()), True, "nDCG@10", outcome="ndcg@10")
        result.add_metric("hit@10", float(np.mean(hit)), True, "a relevant document in the top 10", outcome="hit@10")
        return result


class _Plugin:
    @hookimpl
    def bertprobe_register_probes(self, registry: Any) -> None:
        registry.add(RankingOutcomes)


def test_a_matrix_pairs_each_build_with_torch_query_by_query(embedder: Path, tmp_path: Path) -> None:
    from bertprobe.harness import run_suite
    from bertprobe.plugins import build_plugins
    from bertprobe.results.outcomes import read_outcomes
    from bertprobe.suite import load_suite

    documents, asked = retrieval_texts(30, seed=1)
    data = write_beir(tmp_path / "beir", documents, asked)
    common = f"path: '{embedder}', device: cpu, dtype: float32"
    suite = tmp_path / "s.yaml"
    suite.write_text(f"suite: builds\nmodels:\n  - {{name: torch, {common}}}\n  - {{name: onnx, {common}, runtime: onnx}}\n"
                     f"  - {{name: int8, {common}, runtime: onnx, quantize: int8-dynamic}}\n"
                     f"data: {{path: '{data}'}}\ncompare: {{baseline: torch, significance: 0.05}}\n"
                     f"report: {{dir: '{tmp_path / 'out'}', formats: [json, markdown]}}\n"
                     "probes:\n  - probe: ranking-outcomes\n    expect: {ndcg@10: {min: 0.0}}\n", encoding="utf-8")
    session = run_suite(load_suite(suite), build_plugins(extra=[_Plugin()], entry_points=False))
    report = json.loads((session.run_dir / "report.json").read_text())
    deltas = {(d["model"], d["metric"]): d for d in report["paired"] + report.get("regressions", [])}
    for model in ("onnx", "int8"):
        ndcg = deltas[(model, "ndcg@10")]
        assert ndcg["paired"] == len(asked) and ndcg["ci"] is not None and "paired bootstrap" in ndcg["test"]
        assert "McNemar" in deltas[(model, "hit@10")]["test"]
    assert deltas[("onnx", "ndcg@10")]["delta"] == pytest.approx(0.0, abs=1e-9)
    decisions = {v["model"]: v["decision"] for v in report["decisions"]}
    assert decisions["torch"] == "baseline" and decisions["onnx"] == "may replace"
    outcomes = read_outcomes(session.run_dir)
    agreements = {a["model"]: a for a in report["agreement"]}
    assert agreements["onnx"]["overlap"] == 1.0 and agreements["onnx"]["agreed"] == len(asked)
    base = [ranking_ids(v) for v in outcomes[("torch", "ranking-outcomes")]["prediction"].values]
    cand = outcomes[("int8", "ranking-outcomes")]["prediction"].as_map()
    direct = [top_overlap(b, ranking_ids(cand[i])) for i, b in  # type: ignore[arg-type]
              zip(outcomes[("torch", "ranking-outcomes")]["prediction"].ids, base)]
    assert agreements["int8"]["overlap"] == pytest.approx(float(np.mean(direct)), abs=1e-12)
    assert "top-10 overlap" in (session.run_dir / "report.md").read_text()
