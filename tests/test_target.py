from __future__ import annotations

import json
import shutil

import pytest
import torch

from bertprobe.data import Example
from bertprobe.errors import TargetError
from bertprobe.model import ModelSpec, load_target, resolve_device, resolve_dtype
from bertprobe.testing import save_tiny_model, tiny_target


def test_auto_dtype_is_float32_on_cpu_even_for_fp16_checkpoint(tmp_path):
    path = save_tiny_model(tmp_path / "half", dtype=torch.float16)
    assert json.loads((path / "config.json").read_text())["dtype"] == "float16"
    target = load_target(ModelSpec(path=str(path), device="cpu"))
    assert target.dtype == torch.float32
    assert next(target.model.parameters()).dtype == torch.float32
    assert resolve_dtype("auto", torch.device("cuda"), "float16") == torch.float16
    assert resolve_dtype("bfloat16", torch.device("cpu"), None) == torch.bfloat16


def test_device_resolution():
    assert resolve_device("auto").type in {"cpu", "cuda", "mps"}
    assert resolve_device("CPU") == torch.device("cpu")
    with pytest.raises(TargetError, match="unknown device 'tpu'"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(TargetError, match="CUDA is not available"):
            resolve_device("cuda:1")


def test_task_and_labels_detected(tmp_path, tiny_clf):
    assert tiny_clf.task.name == "classification" and tiny_clf.label_names == ["negative", "positive"]
    mc = tiny_target(tmp_path / "mc", task="multiple-choice")
    mlm = tiny_target(tmp_path / "mlm", task="masked-lm")
    assert mc.task.name == "multiple-choice" and "predictions" in mc.capabilities
    assert mlm.task.name == "masked-lm" and "mlm" in mlm.capabilities and "predictions" not in mlm.capabilities


def test_capabilities_name_abilities_and_the_model_record_keeps_the_task_name(tmp_path, tiny_clf):
    """A target's capabilities are names of ``bertprobe.capabilities`` only, never its task's name; the report's
    model record lists the task's name beside them, as it always has (report.json unchanged)."""
    from bertprobe.capabilities import TARGET
    from bertprobe.model.modelinfo import describe_model

    mlm = tiny_target(tmp_path / "mlm", task="masked-lm")
    for target in (tiny_clf, mlm):
        assert target.capabilities <= set(TARGET) and target.task.name not in target.capabilities
        assert describe_model(target, None).capabilities == sorted({target.task.name, *target.capabilities})
    assert describe_model(tiny_clf, None).capabilities == [
        "attentions", "classification", "classifier", "gradients", "heads", "input-gradients", "mask-token",
        "predictions", "probabilities", "uniform-heads"]  # as tests/data/recorded_report.json holds them, and what
    # calibration now requires (a bi-encoder's similarities are no probabilities)


def test_the_target_holds_its_task_once_and_a_hand_built_one_binds_the_named_task(tiny_clf):
    """``target.task`` is the bound task (there is no second field with its name); a loader that builds a Target
    with a task's name gets the built-in task of that name, bound to the model; ``outputs`` is a deprecated alias."""
    from dataclasses import fields

    from bertprobe.model.target import Target
    from bertprobe.tasks import SingleLabelClassification

    assert [f.name for f in fields(Target) if "task" in f.name] == ["task"]
    by_hand = Target(spec=tiny_clf.spec, model=tiny_clf.model, tokenizer=tiny_clf.tokenizer, task="classification",
                     device=tiny_clf.device, dtype=tiny_clf.dtype)
    assert isinstance(by_hand.task, SingleLabelClassification) and by_hand.task.label_names == ("negative", "positive")
    with pytest.warns(DeprecationWarning, match="Target.task"):
        assert tiny_clf.outputs is tiny_clf.task


def test_missing_path_and_hub_offline_errors(tmp_path):
    with pytest.raises(TargetError, match="does not exist"):
        load_target(ModelSpec(path=str(tmp_path / "nope")))
    with pytest.raises(TargetError, match="Hub is unreachable.*--model PATH"):
        load_target(ModelSpec(path="someone/not-cached-model"))


def test_pickle_only_checkpoint_is_refused(tmp_path, tiny_clf_dir):
    path = tmp_path / "pickled"
    shutil.copytree(tiny_clf_dir, path)
    (path / "model.safetensors").unlink()
    (path / "pytorch_model.bin").write_bytes(b"not loaded")
    with pytest.raises(TargetError, match="only pickle weights.*allow_pickle: true"):
        load_target(ModelSpec(path=str(path)))


def test_batched_prediction_matches_one_by_one_in_input_order(tiny_clf):
    texts = ["the movie was good", "bad", "a very very long boring dull story with awful acting", "fun", "the end"]
    examples = [Example(t) for t in texts]
    batched = tiny_clf.logits(examples, batch_size=2)
    single = torch.cat([tiny_clf.logits([ex], batch_size=1) for ex in examples])
    torch.testing.assert_close(batched, single, atol=1e-5, rtol=1e-4)
    # length sorting really reorders: the long example is not in the first batch
    order = [idx for idx, _ in tiny_clf.batches(tiny_clf.encode(examples), 2)]
    assert order[0] != [0, 1]


def test_pairs_and_truncation(tmp_path):
    target = load_target(ModelSpec(path=str(save_tiny_model(tmp_path / "m")), max_length=6, device="cpu"))
    enc = target.encode([Example("the movie was good and fun", "bad")])
    assert enc.lengths == [6]
    assert 1 in enc.rows[0]["token_type_ids"]


def test_multiple_choice_scores_each_choice(tmp_path):
    mc = tiny_target(tmp_path / "mc", task="multiple-choice")
    examples = [Example("the film", choices=("was good", "was bad", "was fun")), Example("a dog", choices=("is one", "two", "three"))]
    logits = mc.logits(examples, batch_size=1)
    assert logits.shape == (2, 3)
    torch.testing.assert_close(mc.logits(examples, batch_size=2), logits, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("arch", ["roberta", "distilbert"])
def test_other_families_load_and_predict(tmp_path, arch):
    target = tiny_target(tmp_path / arch, arch=arch)
    assert target.logits([Example("the movie"), Example("bad film")]).shape == (2, 2)


def test_hub_check_fails_fast_and_respects_offline_and_proxy(monkeypatch):
    from bertprobe import hub

    hub.hub_reachable.cache_clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub.offline_mode() and not hub.hub_reachable()
    hub.hub_reachable.cache_clear()
    for var in hub.OFFLINE_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    assert hub.hub_reachable()  # behind a proxy the direct test is skipped
    hub.hub_reachable.cache_clear()
    monkeypatch.delenv("HTTPS_PROXY")
    monkeypatch.setenv("HF_ENDPOINT", "https://127.0.0.1:1")  # nothing listens there
    assert not hub.hub_reachable(timeout=1)
    hub.hub_reachable.cache_clear()


def test_token_budget_batches_respect_the_budget_and_give_the_same_logits(tmp_path):
    from dataclasses import replace

    from bertprobe.data import Example
    from bertprobe.testing import sentiment_examples, tiny_target

    target = tiny_target(tmp_path / "m")
    examples = [Example(t) for t, _ in sentiment_examples(50, 3)]
    fixed = target.logits(examples)
    budgeted = replace(target, spec=replace(target.spec, token_budget=64))
    assert budgeted.token_budget == 64 and target.token_budget is None  # CPU default: fixed batch size
    encoded = budgeted.encode(examples)
    plans = budgeted.plan_batches(encoded, sorted(range(50), key=encoded.lengths.__getitem__))
    assert sorted(i for p in plans for i in p) == list(range(50))
    assert all(len(p) * max(encoded.lengths[i] for i in p) <= 64 for p in plans)
    assert len({len(p) for p in plans}) > 1  # short rows share bigger batches
    torch.testing.assert_close(budgeted.logits(examples), fixed, atol=1e-5, rtol=1e-5)
    assert len(budgeted.plan_batches(encoded, list(range(50)), batch_size=7)) == 8  # an explicit size wins


def test_collate_pads_with_torch_as_before(tmp_path):
    from bertprobe.data import Example
    from bertprobe.testing import tiny_target

    target = tiny_target(tmp_path / "m")
    enc = target.encode([Example("the movie"), Example("a very boring dull story")])
    batch = target.collate(enc.rows, pad_to=12)
    assert batch["input_ids"].shape == (2, 12) and batch["attention_mask"][0].sum() == len(enc.rows[0]["input_ids"])
    assert (batch["input_ids"][0, len(enc.rows[0]["input_ids"]):] == (target.tokenizer.pad_token_id or 0)).all()


def test_batched_tokenising_equals_one_example_at_a_time(tmp_path):
    from bertprobe.data import Example
    from bertprobe.testing import tiny_target

    clf = tiny_target(tmp_path / "clf")
    long = " ".join(["good"] * 400)  # cut at max_length
    singles = [Example("the movie"), Example(long), Example("")]
    paired = [Example("a premise", text_pair="a hypothesis"), Example(long, text_pair="short")]
    mixed = [Example("alone"), Example("with", text_pair="a pair")]
    for examples in (singles, paired, mixed):
        enc = clf.encode(examples, cache=False)
        assert enc.rows == [clf._encode_one(ex.text, ex.text_pair) for ex in examples]
        assert enc.lengths == [len(r["input_ids"]) for r in enc.rows]
    assert max(clf.encode([Example(long)]).lengths) == clf.max_length
    mc = tiny_target(tmp_path / "mc", task="multiple-choice")
    examples = [Example("q one", choices=["a", "b c"]), Example("q two", choices=["d e f", "g"])]
    enc = mc.encode(examples, cache=False)
    assert enc.rows == [[mc._encode_one(ex.text, c) for c in ex.choices] for ex in examples]
    batch = mc.collate(enc.rows)
    assert batch["input_ids"].shape == (2, 2, max(enc.lengths))
    assert batch["attention_mask"][0, 0].sum() == len(enc.rows[0][0]["input_ids"])  # padding masked out
    assert mc.encode([], cache=False).rows == []


def test_throughput_excludes_the_warm_up_pass_and_reports_its_spread():
    import time as _time

    import torch

    from bertprobe.data.dataset import Dataset, Example
    from bertprobe.model.target import Encoded
    from bertprobe.model.timing import measure_throughput
    from bertprobe.model.predictions import predict_directly

    class FirstPassSlow:  # a compiled model: the first pass pays minutes, later passes are warm
        calls = 0

        def encode(self, examples):
            return Encoded([{"input_ids": [1, 2]} for _ in examples], [2 + i % 5 for i in range(len(examples))])

        def plan_batches(self, encoded, order, batch_size=None):
            return [order[start : start + 32] for start in range(0, len(order), 32)]

        def logits(self, encoded, batch_size=None, progress=None):
            self.calls += 1
            _time.sleep(0.4 if self.calls == 1 else 0.002)
            return torch.zeros(len(encoded), 2)

    data = Dataset([Example(text=f"t{i}", label=0) for i in range(200)], name="mem")
    model = FirstPassSlow()
    predicted = predict_directly(model, data)  # type: ignore[arg-type]
    speed = measure_throughput(model, model.encode(data.examples))  # type: ignore[arg-type]
    assert speed is not None and speed.repeats == 3 and speed.examples == 64
    assert speed.slowest <= speed.median <= speed.fastest
    assert speed.median > 10 * (200 / predicted.seconds)  # the first pass's rate is not the model's speed


def test_dynamic_int8_on_a_cpu_without_avx512_is_flagged(monkeypatch):
    import torch

    from bertprobe.model.variants import slow_int8_note

    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    assert "no AVX-512" in slow_int8_note("int8-dynamic", "cpu")
    assert slow_int8_note("int8-weight-only", "cpu") == "" and slow_int8_note("int8-dynamic", "cuda") == ""
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    assert slow_int8_note("int8-dynamic", "cpu") == ""


def test_half_precision_on_a_cpu_without_native_instructions_is_flagged(monkeypatch, suite_factory, tmp_path):
    import torch
    from click.testing import CliRunner
    from conftest import only_run

    from bertprobe.cli import main
    from bertprobe.model.variants import slow_half_note

    for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported", "_is_amx_fp16_supported"):
        monkeypatch.setattr(torch.cpu, name, lambda: False, raising=False)
    assert "no native bfloat16" in slow_half_note(torch.bfloat16, "cpu")
    assert "no native float16" in slow_half_note(torch.float16, "cpu")
    assert slow_half_note(torch.float32, "cpu") == "" and slow_half_note(torch.bfloat16, "cuda") == ""
    # the run says it on the terminal and in the model's record, once per stored model
    result = CliRunner().invoke(main, ["run", str(suite_factory()), "--dtype", "bfloat16"])
    assert result.exit_code == 0, result.output
    assert result.output.count("warning: this CPU has no native bfloat16") == 1
    _, report = only_run(tmp_path / "reports", "tiny")
    assert any("no native bfloat16" in note for note in report["models"][0]["notes"])
    # bfloat16 with AVX-512 BF16 (or AMX), float16 with AMX-FP16: native, no note
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_fp16_supported", lambda: True, raising=False)
    assert slow_half_note(torch.bfloat16, "cpu") == "" and slow_half_note(torch.float16, "cpu") == ""


def test_cuda_forwards_leave_cudnn_attention_out_and_restore_the_choice(monkeypatch):
    """On a CUDA device a probe's attention runs without cuDNN's kernel (a plan per batch shape), the other
    backends kept, and PyTorch's choice comes back on leaving, after an error too; a CPU keeps PyTorch's
    choice, and BERTPROBE_CUDNN_ATTENTION=1 gives it back on CUDA."""
    from torch.backends import cuda

    from bertprobe.model.kernels import CUDNN_ATTENTION_ENV, attention_kernels

    monkeypatch.delenv(CUDNN_ATTENTION_ENV, raising=False)
    assert cuda.cudnn_sdp_enabled()
    with attention_kernels("cuda:0"):
        assert not cuda.cudnn_sdp_enabled()
        assert cuda.flash_sdp_enabled() and cuda.mem_efficient_sdp_enabled() and cuda.math_sdp_enabled()
    assert cuda.cudnn_sdp_enabled()
    with pytest.raises(RuntimeError), attention_kernels(torch.device("cuda")):
        raise RuntimeError("a probe failed")
    assert cuda.cudnn_sdp_enabled()
    with attention_kernels("cpu"):
        assert cuda.cudnn_sdp_enabled()
    monkeypatch.setenv(CUDNN_ATTENTION_ENV, "1")
    with attention_kernels("cuda"):
        assert cuda.cudnn_sdp_enabled()


def test_every_probe_runs_inside_the_attention_switch_for_its_models_device(suite_factory, monkeypatch):
    """The switch wraps each probe's run (run.turn): each probe enters it once, with its model's device."""
    import contextlib

    from click.testing import CliRunner

    import bertprobe.run.turn as turn
    from bertprobe.cli import main

    entered: list[str] = []

    @contextlib.contextmanager
    def recording(device):
        entered.append(str(device))
        yield

    monkeypatch.setattr(turn, "attention_kernels", recording)
    suite = suite_factory("  - probe: accuracy\n  - probe: calibration\n")
    result = CliRunner().invoke(main, ["run", str(suite), "--allow-skips"])
    assert result.exit_code in (0, 1), result.output
    assert entered == ["cpu", "cpu"]
