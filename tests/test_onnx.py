"""ONNX Runtime models and their int8 builds (issue #54): an .onnx file as a model, runtime: onnx builds, the
probes refused on them, and the int8 build judged against its model."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner
from conftest import SST2_DEV, SST2_MODEL, only_run, sentiment_tsv

from bertprobe.cli import main
from bertprobe.data.dataset import Example
from bertprobe.errors import TargetError
from bertprobe.model import ModelSpec, load_target
from bertprobe.testing import save_tiny_model

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from bertprobe.model.onnx import OnnxTarget, onnx_runtime  # noqa: E402
from bertprobe.model.variants import derive_variant  # noqa: E402

SENTENCES = ["the movie was good", "a very very boring and dull film , the worst", "fun", "the plot was a mess but the "
             "music was lovely and the actors were great", "i gave it away", "not bad"]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BERTPROBE_CACHE", str(tmp_path_factory.getbasetemp() / "onnx-cache"))


def _build(base: Any, **keys: Any) -> tuple[OnnxTarget, list[str]]:
    spec = ModelSpec(path=base.spec.path, device="cpu", runtime="onnx", **keys)
    target, notes = derive_variant(base, spec)
    assert isinstance(target, OnnxTarget)
    return target, notes


@pytest.mark.parametrize("task", ["classification", "multi-label", "multiple-choice"])
def test_fp32_build_logits_equal_pytorch(tmp_path: Path, task: str) -> None:
    labels = ("toxic", "rude", "ugly") if task == "multi-label" else ("negative", "positive")
    base = load_target(ModelSpec(path=str(save_tiny_model(tmp_path / task, task=task, labels=labels)), device="cpu"))
    if task == "multiple-choice":
        data = [Example(text=s, choices=("the dog", "a cat was fun", "i")) for s in SENTENCES]
    else:
        data = [Example(text=s, text_pair="one two three" if i % 2 else None) for i, s in enumerate(SENTENCES)][:4] \
            + [Example(text=s) for s in SENTENCES]
    from bertprobe.data.dataset import Dataset

    # verified on the suite's first rows too (three choices here, where its own samples have two)
    build, notes = derive_variant(base, ModelSpec(path=base.spec.path, device="cpu", runtime="onnx"), Dataset(data))
    want, got = base.logits(data, batch_size=3), build.logits(data, batch_size=3)  # padded batches of mixed lengths
    assert any(f"on {len(data) + 2} examples" in n for n in notes)
    assert got.shape == want.shape
    assert torch.allclose(got, want, atol=1e-4, rtol=0), float((got - want).abs().max())
    assert any("opset 17" in n for n in notes)
    assert build.predict(data) == base.predict(data)


def test_token_classification_build_word_logits_equal_pytorch(tmp_path: Path) -> None:
    from bertprobe.model.word_logits import word_logits

    tags = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")
    base = load_target(ModelSpec(path=str(save_tiny_model(tmp_path / "tagger", task="token-classification", labels=tags)),
                                 device="cpu", max_length=8))
    words = [s.split() for s in SENTENCES]  # the longest runs past max_length 8: windows, as in PyTorch
    build, _ = _build(base, max_length=8)
    want, got = word_logits(base, words, stride=2), word_logits(build, words, stride=2)
    assert want.windowed == got.windowed > 0
    for w, g in zip(want.logits, got.logits):
        assert torch.allclose(g, w, atol=1e-4, rtol=0)


def test_capabilities_are_predictions_only(tmp_path: Path, tiny_clf: Any) -> None:
    build, _ = _build(tiny_clf)
    assert {"predictions", "classifier"} <= build.capabilities and "classification" not in build.capabilities
    assert not {"gradients", "attentions", "heads"} & build.capabilities
    assert "input-gradients" in build.capabilities and build.gradient_model is tiny_clf.model  # the PyTorch twin's
    own = _own_onnx(Path(tiny_clf.spec.path), tmp_path / "own")
    loaded = load_target(ModelSpec(path=str(own), device="cpu"))
    assert isinstance(loaded, OnnxTarget) and loaded.gradient_model is None
    assert not {"gradients", "input-gradients", "attentions", "heads"} & loaded.capabilities
    with pytest.raises(TargetError, match="ONNX Runtime"):
        build.attention_sites()
    if "CUDAExecutionProvider" not in ort.get_available_providers():  # cuda asked for: the CPU, said so
        from bertprobe.model.onnx import OnnxModel

        on_cpu = OnnxModel(build.model.file, build.model.config, torch.device("cuda"))
        assert on_cpu.device.type == "cpu" and "onnxruntime-gpu" in on_cpu.note


def test_export_cached_by_weights(tiny_clf: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    from bertprobe.model.onnx import cache_dir

    first, _ = _build(tiny_clf)
    stamp = first.model.file.stat().st_mtime_ns
    second, _ = _build(tiny_clf)
    assert second.model.file == first.model.file and second.model.file.stat().st_mtime_ns == stamp
    assert first.model.file.parent.parent == cache_dir()
    import copy

    from bertprobe.model.onnx import weights_key

    changed = copy.deepcopy(tiny_clf.model)
    with torch.no_grad():
        changed.classifier.bias[0] += 1e-3
    assert weights_key(changed) != weights_key(tiny_clf.model) == weights_key(copy.deepcopy(tiny_clf.model))


def test_export_traces_eager_attention_and_leaves_the_models_own(tmp_path: Path) -> None:
    """The graph holds plain attention (Softmax, without SDPA's IsNaN guard on each layer), and the PyTorch model audited
    beside it keeps its own attention implementation afterwards."""
    import onnx

    base = load_target(ModelSpec(path=str(save_tiny_model(tmp_path / "m")), device="cpu", dtype="float32"))
    base.model.set_attn_implementation("sdpa")
    sdpa = tmp_path / "sdpa.onnx"  # the same model traced with its SDPA attention, as bertprobe did before
    from bertprobe.model.onnx import _export

    _export(base, base.model, base.encode([Example(text="a b c"), Example(text="a")], cache=False).rows, sdpa)
    build, _ = _build(base)
    assert base.model.config._attn_implementation == "sdpa"
    ops = {node.op_type for node in onnx.load(str(build.model.file)).graph.node}
    theirs = {node.op_type for node in onnx.load(str(sdpa)).graph.node}
    assert "Softmax" in ops and "IsNaN" not in ops, sorted(ops)
    assert "IsNaN" in theirs, sorted(theirs)  # the test tells the two traces apart
    data = [Example(text=s) for s in SENTENCES]
    assert torch.allclose(build.logits(data, batch_size=3), base.logits(data, batch_size=3), atol=1e-4, rtol=0)


def test_a_model_without_eager_attention_is_traced_as_it_is_and_cached_apart(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import contextlib

    from bertprobe.model.target import Target

    base = load_target(ModelSpec(path=str(save_tiny_model(tmp_path / "m")), device="cpu", dtype="float32"))
    base.model.set_attn_implementation("sdpa")
    eager, eager_notes = _build(base)

    @contextlib.contextmanager
    def refuse(self: Any) -> Any:
        raise ValueError("this model has no eager attention")
        yield  # pragma: no cover

    monkeypatch.setattr(Target, "eager_attention", refuse)
    plain, notes = _build(base)
    assert any("sdpa attention traced" in n for n in notes), notes
    assert any("eager attention traced" in n for n in eager_notes), eager_notes
    assert plain.model.file != eager.model.file  # cached by the attention traced, not the one wished for
    import onnx

    assert "IsNaN" in {node.op_type for node in onnx.load(str(plain.model.file)).graph.node}
    data = [Example(text=s) for s in SENTENCES]
    assert torch.allclose(plain.logits(data, batch_size=3), base.logits(data, batch_size=3), atol=1e-4, rtol=0)


def test_export_refused_past_tolerance(tiny_clf: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import bertprobe.model.onnx as onnx_module

    monkeypatch.setattr(onnx_module, "FP32_TOLERANCE", -1.0)  # any difference, even 0, is past it
    with pytest.raises(TargetError, match=r"differs from PyTorch by .*\(tolerance"):
        _build(tiny_clf)


def test_int8_build_quantizes_with_onnx_runtime(tiny_clf: Any) -> None:
    import onnx

    build, notes = _build(tiny_clf, quantize="int8-dynamic", per_channel=True)
    ops = {n.op_type for n in onnx.load(str(build.model.file)).graph.node}
    assert "DynamicQuantizeLinear" in ops and "MatMulInteger" in ops
    assert build.quantized and any("per_channel=True" in n for n in notes)
    data = [Example(text=s) for s in SENTENCES]
    assert torch.allclose(build.logits(data), tiny_clf.logits(data), atol=0.1)  # int8: close, not equal


def test_a_cached_int8_build_altered_or_replaced_is_rebuilt_and_the_audited_graph_is_named(tiny_clf: Any) -> None:
    """A cached int8 file is reused only when its manifest (the source's sha256, onnxruntime's version, its own
    sha256) holds and it is quantized: the fp32 export copied over it is rebuilt, not audited as int8."""
    import shutil

    from bertprobe.model.onnx import file_sha256, is_quantized

    first, _ = _build(tiny_clf, quantize="int8-dynamic")
    int8 = first.model.file
    fp32 = next(int8.parent.glob("model.onnx"))
    shutil.copyfile(fp32, int8)  # a stale or poisoned cache: the fp32 graph under the int8 name
    assert not is_quantized(int8)
    again, notes = _build(tiny_clf, quantize="int8-dynamic")
    assert again.model.file == int8 and is_quantized(int8)
    assert any(f"sha256 {file_sha256(int8)[:16]}" in n for n in notes)  # the graph audited, named in the notes


def _own_onnx(model_dir: Path, folder: Path) -> Path:
    """The user's own export: a plain torch.onnx.export call, beside the model's config and tokenizer."""
    import shutil

    import transformers

    folder.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (model_dir / name).is_file():
            shutil.copy(model_dir / name, folder / name)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    enc = tokenizer(["the movie was good and fun", "bad"], padding=True, return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    torch.onnx.export(model, tuple(enc[n] for n in names), str(folder / "model.onnx"), input_names=names,
                      output_names=["logits"], dynamic_axes={**{n: {0: "b", 1: "t"} for n in names}, "logits": {0: "b"}},
                      opset_version=17, dynamo=False)
    return folder / "model.onnx"


def test_own_onnx_file_audits_like_its_variant_export(tmp_path: Path, tiny_clf_dir: Path) -> None:
    own = _own_onnx(tiny_clf_dir, tmp_path / "exported")
    data = sentiment_tsv(tmp_path / "data.tsv", 60)
    suite = tmp_path / "s.yaml"
    suite.write_text(f"suite: own\nmodels:\n  - {{name: torch, path: '{tiny_clf_dir}', device: cpu}}\n"
                     f"  - {{name: file, path: '{own}', device: cpu}}\n  - {{name: folder, path: '{own.parent}', device: cpu}}\n"
                     f"  - {{name: build, path: '{tiny_clf_dir}', device: cpu, runtime: onnx}}\n"
                     f"data: {{path: '{data}'}}\ncompare: {{baseline: torch}}\nreport: {{dir: '{tmp_path / 'out'}', formats: [json]}}\n"
                     "probes:\n  - probe: accuracy\n  - probe: calibration\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code in (0, 1, 4), result.output
    _, report = only_run(tmp_path / "out", "own")
    values = {(r["model"], r["id"]): r["metrics"] for r in report["probes"]}
    for probe in ("accuracy", "calibration"):
        for name in ("accuracy", "ece", "brier"):
            if name in values[("build", probe)]:
                ref = values[("build", probe)][name]
                for model in ("file", "folder", "torch"):
                    assert values[(model, probe)][name] == pytest.approx(ref, abs=1e-6), (model, probe, name)
    # independent: the accuracy from ONNX Runtime's own session on the file, fed by the model's tokenizer
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(tiny_clf_dir)
    rows = [line.split("\t") for line in data.read_text().splitlines()[1:]]
    session = ort.InferenceSession(str(own), providers=["CPUExecutionProvider"])
    right = 0
    for text, label in rows:
        enc = tok(text, return_tensors="np")
        logits = session.run(None, {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids")})[0]
        right += int(logits.argmax(-1)[0] == int(label))
    assert values[("file", "accuracy")]["accuracy"] == pytest.approx(right / len(rows))
    models = {m["name"]: m for m in report["models"]}
    assert "gradients" not in models["file"]["capabilities"] and "predictions" in models["file"]["capabilities"]
    assert models["build"]["variant"] == {"runtime": "onnx"}
    agreement = {(a["model"], a["probe_id"]): a for a in report["agreement"]}  # fp32 graphs: every prediction kept
    assert set(agreement) == {(m, "accuracy") for m in ("file", "folder", "build")}
    assert all((a["paired"], a["agreed"], a["changed"], a["rate"]) == (60, 60, [], 1.0) for a in agreement.values())


def test_gradient_probe_refused_before_loading(tmp_path: Path, tiny_clf_dir: Path, sst_tsv: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BERTPROBE_CACHE", str(tmp_path / "cache"))
    broken = tmp_path / "served"  # an ONNX folder whose graph cannot load: a refusal must come first
    broken.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        if (tiny_clf_dir / name).is_file():
            (broken / name).write_bytes((tiny_clf_dir / name).read_bytes())
    (broken / "model.onnx").write_bytes(b"not a graph")
    build = f"{{path: '{tiny_clf_dir}', device: cpu, runtime: onnx}}"  # a build: its twin gives input gradients, no heads
    for model, probe, lacking in ((f"{{path: '{broken}', device: cpu}}", "universal-trigger", "input-gradients"),
                                  (build, "head-pruning", "heads")):
        suite = tmp_path / "s.yaml"
        suite.write_text(f"suite: t\nmodel: {model}\ndata: {{path: '{sst_tsv}'}}\n"
                         f"report: {{dir: '{tmp_path / 'out'}'}}\nprobes:\n  - probe: {probe}\n", encoding="utf-8")
        for command in ("run", "validate"):
            result = CliRunner().invoke(main, [command, str(suite)])
            assert result.exit_code == 2, result.output
            assert "cannot run on" in result.output and f"{lacking}:" in result.output
            assert "model:" in result.output  # the alternative
            assert ("transfer_model" in result.output) == (probe == "universal-trigger")
            assert "cannot load" not in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "cache").exists()  # nothing was exported


def test_forward_probes_run_and_trigger_transfers_to_a_build(tmp_path: Path, tiny_clf_dir: Path) -> None:
    """The trigger search runs on the PyTorch model (probe model: torch); its trigger is tested on the build."""
    data = sentiment_tsv(tmp_path / "data.tsv", 40)
    suite = tmp_path / "s.yaml"
    suite.write_text(f"suite: t\nmodels:\n  - {{name: torch, path: '{tiny_clf_dir}', device: cpu}}\n"
                     f"  - {{name: ort, path: '{tiny_clf_dir}', device: cpu, runtime: onnx}}\n"
                     f"data: {{path: '{data}'}}\nreport: {{dir: '{tmp_path / 'out'}', formats: [json]}}\nprobes:\n"
                     "  - probe: slices\n"
                     f"  - probe: universal-trigger\n    model: {{path: '{tiny_clf_dir}', device: cpu}}\n"
                     "    params: {length: 1, candidates: 5, iterations: 1, target_label: 1, transfer_model: ort}\n"
                     "  - probe: universal-trigger\n    id: trigger-on-build\n"
                     "    params: {length: 1, candidates: 5, iterations: 1, target_label: 1}\n",
                     encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code in (0, 1, 4), result.output
    _, report = only_run(tmp_path / "out", "t")
    statuses = {(r["model"], r["id"]): r["status"] for r in report["probes"]}
    assert statuses[("ort", "slices")] not in ("skipped", "error")
    trigger = next(r for r in report["probes"] if r["id"] == "universal-trigger")
    assert trigger["status"] != "error" and "transfer_accuracy_after" in trigger["metrics"]
    # on the build itself: gradients from its PyTorch twin, every candidate scored by ONNX Runtime
    on_build = next(r for r in report["probes"] if r["id"] == "trigger-on-build" and r["model"] == "ort")
    assert on_build["status"] not in ("error", "skipped") and on_build["metrics"]["forward_passes"] > 0


@pytest.mark.parametrize(("keys", "message"), [
    ("runtime: onx", "did you mean 'onnx'"),
    ("runtime: onnx, quantize: int8-weight-only", "int8-dynamic only"),
    ("per_channel: true", "settings of ONNX Runtime's int8 build"),
    ("runtime: onnx, dtype: bfloat16", "runs in float32"),
    ("runtime: onnx, reduce_rang: true", "did you mean 'reduce_range'"),
])
def test_validate_checks_the_new_keys(tmp_path: Path, tiny_clf_dir: Path, sst_tsv: Path, keys: str, message: str) -> None:
    suite = tmp_path / "s.yaml"
    suite.write_text(f"suite: t\nmodel: {{path: '{tiny_clf_dir}', device: cpu, {keys}}}\ndata: {{path: '{sst_tsv}'}}\n"
                     "probes:\n  - probe: accuracy\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", str(suite)])
    assert result.exit_code == 2 and message in result.output, result.output


def test_without_the_extra_one_line_with_the_install_command(tmp_path: Path, tiny_clf_dir: Path, sst_tsv: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime raises ImportError
    with pytest.raises(TargetError, match=r"pip install 'bertprobe\[onnx\]'"):
        onnx_runtime()
    suite = tmp_path / "s.yaml"
    suite.write_text(f"suite: t\nmodel: {{path: '{tiny_clf_dir}', device: cpu, runtime: onnx}}\ndata: {{path: '{sst_tsv}'}}\n"
                     f"report: {{dir: '{tmp_path / 'out'}'}}\nprobes:\n  - probe: accuracy\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code == 2 and "pip install 'bertprobe[onnx]'" in result.output, result.output
    assert "Traceback" not in result.output


@pytest.mark.skipif(not SST2_MODEL.is_dir(), reason="the SST-2 fixture (../shared) is absent")
def test_int8_build_against_fp32_on_sst2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BERTPROBE_CACHE", str(tmp_path / "cache"))  # this test's export alone
    suite = tmp_path / "s.yaml"
    common = f"path: '{SST2_MODEL}', device: cpu, max_length: 128, dtype: float32"
    suite.write_text(f"suite: int8\nmodels:\n  - {{name: fp32, {common}}}\n"
                     f"  - {{name: int8, {common}, runtime: onnx, quantize: int8-dynamic, batch_size: 1}}\n"
                     f"data: {{path: '{SST2_DEV}', limit: 200}}\ncompare: {{baseline: fp32, tolerance: {{accuracy: 0.02, default: 0.05}}}}\n"
                     f"report: {{dir: '{tmp_path / 'out'}', formats: [json]}}\nprobes:\n  - probe: accuracy\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code in (0, 1, 4), result.output
    run_dir, report = only_run(tmp_path / "out", "int8")
    assert {m["name"]: m for m in report["models"]}["int8"]["variant"] == {
        "quantize": "int8-dynamic", "runtime": "onnx", "dtype": "float32"}
    # independent count: PyTorch through transformers, and the int8 graph run directly by ONNX Runtime
    import transformers

    (int8_file,) = (tmp_path / "cache" / "onnx").glob("*/model.int8.onnx")
    tok = transformers.AutoTokenizer.from_pretrained(SST2_MODEL)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(SST2_MODEL, dtype=torch.float32).eval()
    session = ort.InferenceSession(str(int8_file), providers=["CPUExecutionProvider"])
    outcomes = [json.loads(line) for line in (run_dir / "outcomes.jsonl").read_text().splitlines()]
    ids = next(o["ids"] for o in outcomes if o["model"] == "fp32" and o["name"] == "correct")
    table = [line.split("\t") for line in SST2_DEV.read_text().splitlines()[1:]]
    rows = [table[int(i)] for i in ids]  # the run's seeded sample of 200 rows (ids: row numbers)
    assert len(rows) == 200
    preds: dict[str, list[int]] = {"fp32": [], "int8": []}
    for start in range(0, len(rows), 50):
        enc = tok([t for t, _ in rows[start:start + 50]], truncation=True, max_length=128, padding=True, return_tensors="pt")
        with torch.inference_mode():
            preds["fp32"] += model(**enc).logits.argmax(-1).tolist()
    # int8 one example at a time, as the suite runs it (batch_size: 1): dynamic quantization scales activations
    # per tensor, so an int8 prediction may depend on the batch it runs in
    for text, _ in rows:
        enc = tok(text, truncation=True, max_length=128, return_tensors="pt")
        feeds = {k: enc[k].numpy() for k in ("input_ids", "attention_mask", "token_type_ids")}
        preds["int8"].append(int(session.run(None, feeds)[0].argmax()))
    gold = [int(y) for _, y in rows]
    right = {n: [p == g for p, g in zip(preds[n], gold)] for n in preds}
    for name in preds:
        value = next(r for r in report["probes"] if r["model"] == name)["metrics"]["accuracy"]
        assert value == pytest.approx(sum(right[name]) / len(gold))
    lost = sum(a and not b for a, b in zip(right["fp32"], right["int8"]))
    won = sum(b and not a for a, b in zip(right["fp32"], right["int8"]))
    paired = next(d for d in report["paired"] if d["model"] == "int8" and d["metric"] == "accuracy")
    assert paired["test"] == f"McNemar exact, {lost} vs {won} discordant of 200 paired"
    names = model.config.id2label  # the changed predictions are named as the model names its classes
    changed = {i: (names[a], names[b]) for i, a, b in zip(ids, preds["fp32"], preds["int8"]) if a != b}
    (agreement,) = [a for a in report["agreement"] if a["model"] == "int8"]
    assert (agreement["baseline"], agreement["paired"]) == ("fp32", 200)
    assert agreement["agreed"] == 200 - len(changed) and agreement["rate"] == pytest.approx(1 - len(changed) / 200)
    assert {i: (a, b) for i, a, b in agreement["changed"]} == changed
    from bertprobe.results.report import RunReport

    assert RunReport.from_dict(report).agreement[0].changed == [tuple(c) for c in agreement["changed"]]
    assert CliRunner().invoke(main, ["report", str(run_dir), "--format", "markdown"]).exit_code == 0  # from events
    markdown = (run_dir / "report.md").read_text()
    assert "## Predictions changed against fp32" in markdown and f"{200 - len(changed)} of 200" in markdown
    assert all(f"{i}: {a!r} -> {b!r}" in markdown for i, (a, b) in list(changed.items())[:20])
    regressed = [d for d in report["paired"] if d["model"] == "int8" and d["regression"]]
    assert bool(regressed) == any(d["p_adjusted"] < 0.05 and d["past_tolerance"] for d in report["paired"]
                                  if d["model"] == "int8")
    decision = next(d for d in report["decisions"] if d["model"] == "int8")
    assert (decision["decision"] == "may replace") == (not regressed and not decision["reasons"])


def test_agreement_pairs_predictions_by_id() -> None:
    from bertprobe.results.outcomes import Agreement, Outcomes

    base = Outcomes.from_values("prediction", ["a", "b", "c", "d"], ["neg", "pos", "pos", "neu"], "label")
    cand = Outcomes.from_values("prediction", ["d", "c", "b", "e"], ["neu", "neg", "pos", "pos"], "label")
    a = Agreement.between("int8", "fp32", "accuracy", base, cand)
    assert (a.paired, a.agreed, a.changed) == (3, 2, [("c", "pos", "neg")]) and a.rate == pytest.approx(2 / 3)
    old = Outcomes.from_dict({"name": "prediction", "kind": "categorical", "ids": ["a", "b"], "values": [0, 1]})
    assert Agreement.between("int8", "fp32", "accuracy", old, old).agreed == 2  # a run from before: class codes


def test_question_answering_build_answers_as_pytorch(tmp_path: Path) -> None:
    """A reader runs through the same task layer (windows, decoding): the build's answers are PyTorch's."""
    from bertprobe.tasks.question_answering import QuestionAnswering, qa_settings
    from bertprobe.testing import WORDS

    base = load_target(ModelSpec(path=str(save_tiny_model(tmp_path / "qa", task="question-answering", words=WORDS, seed=3)),
                                 device="cpu"))
    context = " ".join(WORDS[i % 40] for i in range(90))  # longer than a 64-token window: several windows
    examples = [Example(text=q, text_pair=context, label=(("the movie", 0),), id=str(i))
                for i, q in enumerate(["what was good ?", "who gave it away ?", "the dog ?"])]
    build, _ = _build(base)
    task = QuestionAnswering(settings=qa_settings({"max_length": 64, "stride": 16}))
    want, got = task.answers(base, examples, batch_size=2), task.answers(build, examples, batch_size=2)
    assert min(a.windows for a in want) > 1 and any(a.text for a in want)
    assert [(a.text, a.start) for a in got] == [(a.text, a.start) for a in want]
    assert [a.score for a in got] == pytest.approx([a.score for a in want], abs=1e-4)


def test_a_readers_own_graph_with_other_output_names_answers_as_pytorch(tmp_path: Path) -> None:
    """A user's plain torch.onnx.export of a reader whose outputs are not named start_logits/end_logits: the two
    outputs are read as start and end, in order, and the answers are PyTorch's (it raised AttributeError)."""
    import shutil

    import transformers

    from bertprobe.testing import WORDS

    model_dir = save_tiny_model(tmp_path / "qa", task="question-answering", words=WORDS, seed=3)
    folder = tmp_path / "exported"
    folder.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (model_dir / name).is_file():
            shutil.copy(model_dir / name, folder / name)
    model = transformers.AutoModelForQuestionAnswering.from_pretrained(model_dir).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    enc = tokenizer(["what was good ?", "who ?"], ["the movie was good and fun", "the dog"], padding=True,
                    return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]

    class Plain(torch.nn.Module):  # the outputs as a tuple, named by the user
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, *args: torch.Tensor) -> Any:
            out = self.inner(**dict(zip(names, args)))
            return out.start_logits, out.end_logits

    torch.onnx.export(Plain().eval(), tuple(enc[n] for n in names), str(folder / "model.onnx"), input_names=names,
                      output_names=["out_s", "out_e"], opset_version=17, dynamo=False,
                      dynamic_axes={**{n: {0: "b", 1: "t"} for n in names}, "out_s": {0: "b", 1: "t"}, "out_e": {0: "b", 1: "t"}})
    base = load_target(ModelSpec(path=str(model_dir), device="cpu"))
    own = load_target(ModelSpec(path=str(folder / "model.onnx"), device="cpu"))
    examples = [Example(text=q, text_pair=" ".join(WORDS[i % 40] for i in range(30)), id=str(i))
                for i, q in enumerate(["what was good ?", "who gave it away ?"])]
    want, got = base.task.answers(base, examples), own.task.answers(own, examples)
    assert [(a.text, a.start) for a in got] == [(a.text, a.start) for a in want]
    assert [a.score for a in got] == pytest.approx([a.score for a in want], abs=1e-4)


def test_own_onnx_file_quantized_by_onnx_runtime(tmp_path: Path, tiny_clf_dir: Path) -> None:
    import onnx

    own = _own_onnx(tiny_clf_dir, tmp_path / "exported")
    stored = load_target(ModelSpec(path=str(own), device="cpu"))
    spec = ModelSpec(path=str(own), device="cpu", quantize="int8-dynamic", reduce_range=True)
    build, notes = derive_variant(stored, spec)
    assert isinstance(build, OnnxTarget) and build.quantized and build.gradient_model is None
    assert build.model.file != own and "MatMulInteger" in {n.op_type for n in onnx.load(str(build.model.file)).graph.node}
    assert any("reduce_range=True" in n for n in notes) and not any("exported" in n for n in notes)
    data = [Example(text=s) for s in SENTENCES]
    assert torch.allclose(build.logits(data), stored.logits(data), atol=0.1)


def _fixture_examples(task: str, n: int = 12) -> list[Example]:
    """The first ``n`` examples of each fixture's own data, read here without bertprobe's loaders."""
    data = SST2_DEV.parent.parent
    if task == "sst2":
        return [Example(text=line.split("\t")[0], id=str(i))
                for i, line in enumerate(SST2_DEV.read_text().splitlines()[1 : n + 1])]
    if task == "arct":
        rows = [r.split("\t") for r in (data / "arct" / "original" / "test-full.txt").read_text().splitlines()[1 : n + 1]]
        return [Example(text=f"{r[5]} {r[4]}", choices=(r[1], r[2]), id=r[0]) for r in rows]
    if task == "uner":
        sentences = (data / "uner" / "en_ewt-ud-test.iob2").read_text().split("\n\n")[:n]
        words = [tuple(line.split("\t")[1] for line in s.splitlines() if line and not line.startswith("#")) for s in sentences]
        return [Example(text=" ".join(w), words=w, id=str(i)) for i, w in enumerate(words)]
    squad = json.loads((data / "squad" / "test-split.json").read_text())["data"][0]["paragraphs"][:3]
    return [Example(text=qa["question"], text_pair=p["context"], id=qa["id"]) for p in squad for qa in p["qas"]][:n]


@pytest.mark.skipif(not SST2_MODEL.is_dir(), reason="the fixtures (../shared) are absent")
@pytest.mark.parametrize("name", ["sst2", "arct", "uner", "squad"])
def test_fp32_build_equals_pytorch_on_every_tasks_fixture(name: str) -> None:
    """ONNX fp32 against PyTorch fp32 on each task's fixture and its own data, to 1e-4: a classifier's and a
    multiple-choice model's logits, a tagger's per-word logits, a reader's answers and their scores."""
    from bertprobe.data.dataset import Dataset
    from bertprobe.model.word_logits import word_logits
    from bertprobe.model.predictions import predict_directly

    path = SST2_MODEL.parent / f"minilm-l6-{name}"
    base = load_target(ModelSpec(path=str(path), device="cpu", dtype="float32"))
    examples = _fixture_examples(name)
    build, notes = derive_variant(base, ModelSpec(path=str(path), device="cpu", dtype="float32", runtime="onnx"))
    assert isinstance(build, OnnxTarget) and any("largest |logit difference|" in n for n in notes)
    if name == "squad":
        want, got = base.task.answers(base, examples), build.task.answers(build, examples)
        assert [(a.text, a.start, a.end) for a in got] == [(a.text, a.start, a.end) for a in want]
        assert [a.score for a in got] == pytest.approx([a.score for a in want], abs=1e-4)
    elif name == "uner":
        words = [list(ex.words or ()) for ex in examples]
        for w, g in zip(word_logits(base, words).logits, word_logits(build, words).logits):
            assert torch.allclose(g, w, atol=1e-4, rtol=0)
    else:
        data = Dataset(examples=examples)
        want, got = predict_directly(base, data).logits, predict_directly(build, data).logits
        assert want.shape == got.shape == (len(examples), 2) and torch.allclose(got, want, atol=1e-4, rtol=0)


def test_optimum_folders_quantized_graph_alone_or_beside_model_onnx(tmp_path: Path, tiny_clf_dir: Path) -> None:
    """Optimum's quantizer writes model_quantized.onnx: alone in its folder it is the graph audited; beside
    model.onnx, model.onnx is audited and a note names the other; two graphs and no model.onnx are refused in one
    line that names them."""
    import shutil

    from bertprobe.model.onnx import is_quantized
    from bertprobe.model.onnx import quantize_cached as quantize

    own = _own_onnx(tiny_clf_dir, tmp_path / "exported")
    shutil.copy(quantize(own, False, False), own.parent / "model_quantized.onnx")
    both = load_target(ModelSpec(path=str(own.parent), device="cpu"))
    assert both.model.file == own and not both.quantized
    assert any("also holds model_quantized.onnx" in n for n in both.notes), both.notes
    own.rename(own.parent / "model_fp32.onnx")
    with pytest.raises(TargetError, match=r"holds 2 ONNX graphs \(model_fp32.onnx, model_quantized.onnx\)"):
        load_target(ModelSpec(path=str(own.parent), device="cpu"))
    suite = tmp_path / "several.yaml"  # validate names them too, before anything loads
    suite.write_text(f"suite: s\nmodel: {{path: '{own.parent}', device: cpu}}\ndata: {{path: '{sentiment_tsv(tmp_path / 'd.tsv', 8)}'}}\n"
                     "probes:\n  - probe: accuracy\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", str(suite)])
    assert result.exit_code == 2 and "holds 2 ONNX graphs (model_fp32.onnx, model_quantized.onnx)" in result.output
    assert "Traceback" not in result.output
    (own.parent / "pytorch_model.bin").write_bytes(b"")  # PyTorch weights beside them: the PyTorch model's folder
    from bertprobe.model.onnx import onnx_file

    assert onnx_file(str(own.parent)) is None and onnx_file(str(own.parent / "model_quantized.onnx")) is not None
    (own.parent / "pytorch_model.bin").unlink()
    (own.parent / "model_fp32.onnx").unlink()
    alone = load_target(ModelSpec(path=str(own.parent), device="cpu"))
    assert alone.model.file.name == "model_quantized.onnx" and alone.quantized and is_quantized(alone.model.file)
    data = [Example(text=s) for s in SENTENCES]
    session = ort.InferenceSession(str(alone.model.file), providers=["CPUExecutionProvider"])
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(tiny_clf_dir)
    for ex, got in zip(data, alone.logits(data, batch_size=1)):  # one row per batch: int8 scales per batch
        enc = tok(ex.text, return_tensors="np")
        want = session.run(None, {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids")})[0][0]
        assert torch.allclose(got, torch.from_numpy(want), atol=1e-5)
