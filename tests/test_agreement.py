"""A matrix's agreement between a model and its builds, for every task: a reader's answers, a tagger's entities,
a label set, each compared as the text a reader checks, with every changed example listed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import only_run
from test_ner import TAGS, sentences, write_forms
from test_qa_accuracy import squad_json

from bertprobe.cli import main
from bertprobe.data.dataset import Example
from bertprobe.results.outcomes import Agreement, Outcomes
from bertprobe.probes.accuracy.labelsets import label_set
from bertprobe.testing import WORDS, save_tiny_model


def test_a_label_set_past_52_labels_is_told_apart() -> None:
    """Label sets were bit codes summed in floats: past 2**53 two sets differing in label 0 had one code."""
    names = [f"l{c}" for c in range(60)]
    a, b = np.zeros(60, dtype=int), np.zeros(60, dtype=int)
    a[[0, 59]], b[59] = 1, 1
    codes = [float((row * (2.0 ** np.arange(60))).sum()) for row in (a, b)]
    assert codes[0] == codes[1]  # the old encoding's collision, the reason for the names
    assert (label_set(names, a), label_set(names, b), label_set(names, a * 0)) == ("{l0, l59}", "{l59}", "{}")
    base = Outcomes.from_values("prediction", ["x"], [label_set(names, a)], "label")
    cand = Outcomes.from_values("prediction", ["x"], [label_set(names, b)], "label")
    assert Agreement.between("b", "a", "accuracy", base, cand).changed == [("x", "{l0, l59}", "{l59}")]


def _matrix(tmp_path: Path, model: Path, data: Path, extra: str = "") -> tuple[Path, dict[str, Any]]:
    """fp32 against its ONNX Runtime int8 build (one example a batch: dynamic quantization scales per batch)."""
    common = f"path: '{model}', device: cpu, dtype: float32, batch_size: 1{extra}"
    suite = tmp_path / "s.yaml"
    suite.write_text(f"suite: agree\nmodels:\n  - {{name: fp32, {common}}}\n"
                     f"  - {{name: int8, {common}, runtime: onnx, quantize: int8-dynamic}}\n"
                     f"data: {{path: '{data}'}}\ncompare: {{baseline: fp32}}\n"
                     f"report: {{dir: '{tmp_path / 'out'}', formats: [json, markdown]}}\n"
                     "probes:\n  - probe: accuracy\n    params: {bootstrap: 0}\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code in (0, 1, 4), result.output
    return only_run(tmp_path / "out", "agree")


def _targets(model: Path) -> tuple[Any, Any]:
    from bertprobe.model import ModelSpec, load_target
    from bertprobe.model.variants import derive_variant

    base = load_target(ModelSpec(path=str(model), device="cpu", dtype="float32"))
    build, _ = derive_variant(base, ModelSpec(path=str(model), device="cpu", dtype="float32", runtime="onnx",
                                              quantize="int8-dynamic"))
    return base, build


def _check(report: dict[str, Any], run_dir: Path, ids: list[str], want: dict[str, list[str]]) -> None:
    """The run's agreement equals the count over the predictions computed here, and report.md lists them."""
    changed = [(i, a, b) for i, a, b in zip(ids, want["fp32"], want["int8"]) if a != b]
    assert changed  # the random model's int8 build changes some: the listing is exercised (3 answers, 1 sentence)
    (agreement,) = report["agreement"]
    assert (agreement["model"], agreement["baseline"], agreement["paired"]) == ("int8", "fp32", len(ids))
    assert agreement["agreed"] == len(ids) - len(changed)
    assert [tuple(c) for c in agreement["changed"]] == changed
    markdown = (run_dir / "report.md").read_text()
    assert f"{len(ids) - len(changed)} of {len(ids)}" in markdown
    for i, a, b in changed[:20]:
        assert f"{i}: {a[:59]!r}"[:40] in markdown  # quoted (clipped past 60 characters)


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    monkeypatch.setenv("BERTPROBE_CACHE", str(tmp_path / "cache"))


def test_a_readers_int8_build_agrees_answer_by_answer(tmp_path: Path) -> None:
    from bertprobe.tasks.answer_text import NO_ANSWER

    model = save_tiny_model(tmp_path / "qa", task="question-answering", words=WORDS, seed=3)
    data = squad_json(tmp_path / "dev.json", n_paragraphs=6, per=5)
    run_dir, report = _matrix(tmp_path, model, data)
    rows = [(qa, p["context"]) for a in json.loads(data.read_text())["data"] for p in a["paragraphs"] for qa in p["qas"]]
    examples = [Example(text=qa["question"], text_pair=ctx, id=qa["id"]) for qa, ctx in rows]
    want = {name: [a.text or NO_ANSWER for a in t.task.answers(t, examples, batch_size=1)]
            for name, t in zip(("fp32", "int8"), _targets(model))}
    assert len(set(want["fp32"])) > 3  # the answers differ between questions: agreement is no constant
    _check(report, run_dir, [qa["id"] for qa, _ in rows], want)


def test_a_taggers_int8_build_agrees_sentence_by_sentence(tmp_path: Path) -> None:
    from bertprobe.data.dataset import Dataset
    from bertprobe.model.predictions import predict_directly
    from bertprobe.tasks.entities import spans
    from bertprobe.probes.accuracy.entities import entity_list

    model = save_tiny_model(tmp_path / "ner", task="token-classification", labels=TAGS, seed=2)
    rows = sentences(40)
    data = write_forms(tmp_path / "data", rows)["jsonl"]
    run_dir, report = _matrix(tmp_path, model, data)
    examples = [Example(text=" ".join(ws), words=tuple(ws), label=tuple(ts), id=str(i)) for i, (ws, ts) in enumerate(rows)]
    want = {}
    for name, t in zip(("fp32", "int8"), _targets(model)):
        logits = predict_directly(t, Dataset(examples=examples), batch_size=1).logits
        want[name] = [entity_list(ws, spans(t.task.tags(lg[: len(ws)].argmax(-1)))) for lg, (ws, _) in zip(logits, rows)]
    assert any(w != "(no entities)" for w in want["fp32"])
    outcomes = [json.loads(line) for line in (run_dir / "outcomes.jsonl").read_text().splitlines()]
    ids = next(o["ids"] for o in outcomes if o["model"] == "fp32" and o["name"] == "prediction")
    assert sorted(ids, key=int) == [str(i) for i in range(len(rows))]
    order = [int(i) for i in ids]
    _check(report, run_dir, ids, {n: [w[i] for i in order] for n, w in want.items()})


def test_two_long_predictions_that_part_late_are_shown_where_they_part() -> None:
    from bertprobe.reporters.summary import agreement_rows

    same = "0:[PER Maria Lopez] 4:[LOC Lima] 9:[ORG United Nations Development Programme] 15:[LOC Geneva]"
    agreement = Agreement("int8", "fp32", "accuracy", 2, 1, [("s1", same + " 20:[PER John]", same)])
    (row,) = agreement_rows([agreement])
    shown = row[-1]
    assert shown.startswith("s1: '…") and "20:[PER John" in shown and "15:[LOC Geneva" in shown.split(" -> ")[1]
    assert row[2:4] == ["50.00%", "1 of 2"]
