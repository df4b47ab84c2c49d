"""Reduced precision with its near ties re-checked: the band logic on made-up scores, the engine's bfloat16
autocast against the model's own precision, and what ``auto`` picks."""

from __future__ import annotations

import pytest
import torch

from bertprobe.errors import ProbeError
from bertprobe.model import masked_scoring
from bertprobe.model.masked_scoring import GoldLogprobs, MaskedScorer, head_transform_linears, resolve_precision
from bertprobe.model.near_ties import calibration_sample, settle
from bertprobe.testing import tiny_target


def made_up(margins_fast: list[float], errors: dict[int, float]) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """Fast scores with the given margins, and exact ones whose margin differs by ``errors[i]`` (default 0.05)."""
    fast = [(-10.0 + m, -10.0) for m in margins_fast]
    exact = [(g - errors.get(i, 0.05), b) for i, (g, b) in enumerate(fast)]
    return fast, exact


def test_the_band_widens_until_every_pair_inside_it_was_rescored():
    margins = [2.0, -1.5, 0.08, 0.5, -0.45, 3.0, -2.5, 0.9, -0.7, 1.2]
    # pair 2 is a near tie that bfloat16 got wrong by 0.3: the calibration pairs (0, 1) show only 0.05
    fast, exact = made_up(margins, {2: 0.3})
    asked: list[list[int]] = []

    def rescore(indices: list[int]) -> dict[int, tuple[float, float]]:
        asked.append(list(indices))
        return {i: exact[i] for i in indices}

    settled = settle(fast, rescore, [0, 1])
    assert asked[0] == [0, 1] and asked[1] == [2]  # band 0.1 first: only pair 2 lies inside it
    assert settled.max_error == pytest.approx(0.3) and settled.band == pytest.approx(0.6)
    rescored = {i for round_ in asked for i in round_}
    assert rescored == {0, 1, 2, 3, 4}  # 0.5 and -0.45 fall inside the widened band; 0.7 and beyond do not
    assert settled.rescored == 5 and settled.calibration == 2 and settled.rounds == 3
    assert settled.flips == 1  # pair 2: bfloat16 said good > bad, the exact margin is -0.22
    assert [s[0] > s[1] for s in settled.scores] == [e[0] > e[1] for e in exact]
    assert settled.scores[7] == fast[7]  # outside the band the fast scores stand


def test_a_bfloat16_tie_is_rescored_even_when_no_error_was_seen():
    fast, exact = made_up([1.0, 0.0, -1.0], {0: 0.0, 1: -0.2, 2: 0.0})
    settled = settle(fast, lambda idx: {i: exact[i] for i in idx}, [0])
    assert settled.rescored == 2 and settled.scores[1] == exact[1]  # the tie (margin 0 <= band 0) was re-scored


def test_the_calibration_sample_is_seeded_and_capped():
    assert calibration_sample(1000, 5, 13) == calibration_sample(1000, 5, 13) != calibration_sample(1000, 5, 14)
    assert calibration_sample(3, 200, 13) == [0, 1, 2]


def test_bfloat16_plls_are_close_to_the_models_own_but_not_equal(tmp_path):
    target = tiny_target(tmp_path / "m", task="masked-lm", initializer_range=0.5)
    texts = ["the dog is good .", "they gave the apple away .", "she was very funny ."]
    exact = [s.total for s in MaskedScorer(target).pll(texts)]
    reduced = MaskedScorer(target, precision="bfloat16")
    assert reduced.precision == "bfloat16"
    fast = [s.total for s in reduced.pll(texts)]
    gaps = [abs(a - b) for a, b in zip(fast, exact)]
    assert max(gaps) > 0  # autocast was on: bfloat16 products round differently
    assert all(g < 0.05 * abs(e) for g, e in zip(gaps, exact))  # weights of 0.5: chaotic, up to 0.6 nats apart
    assert next(target.model.parameters()).dtype == torch.float32  # the model itself is left as it was


def test_auto_picks_bfloat16_only_where_the_device_computes_it_natively(tmp_path, monkeypatch):
    target = tiny_target(tmp_path / "m", task="masked-lm")
    monkeypatch.setattr(masked_scoring, "native_bfloat16", lambda device: False)
    assert resolve_precision("auto", target) == "model"
    assert resolve_precision("bfloat16", target) == "bfloat16"  # asked for by name: emulated, but honoured
    monkeypatch.setattr(masked_scoring, "native_bfloat16", lambda device: True)
    assert resolve_precision("auto", target) == "bfloat16"
    target.model.to(torch.bfloat16)
    assert resolve_precision("auto", target) == "model"  # already reduced: nothing to gain, nothing to re-check
    with pytest.raises(ProbeError, match="unknown precision 'half'"):
        resolve_precision("half", target)


def test_bfloat16_runs_a_copy_with_bfloat16_linears_made_once_unless_the_model_is_hooked(tmp_path):
    target = tiny_target(tmp_path / "m", task="masked-lm")
    scorer = MaskedScorer(target, precision="bfloat16")
    reduced = scorer.model
    assert reduced is not target.model and reduced is scorer.model  # one copy, reused
    head = {id(m) for m in head_transform_linears(reduced)}
    linears = [m for m in reduced.modules() if isinstance(m, torch.nn.Linear) and id(m) not in head]
    assert linears and all(m.weight.dtype == torch.bfloat16 for m in linears)
    assert head and all(m.weight.dtype == torch.float32 for m in head_transform_linears(reduced))
    assert all(m.weight.dtype == torch.float32 for m in target.model.modules() if isinstance(m, torch.nn.Linear))
    assert MaskedScorer(target).model is target.model
    handle = target.model.bert.encoder.layer[0].register_forward_hook(lambda *a: None)
    try:  # an intervention's hook would not follow a copy: the model itself runs, under autocast
        assert MaskedScorer(target, precision="bfloat16").model is target.model
    finally:
        handle.remove()


def test_bfloat16_by_name_on_a_model_not_in_float32_is_refused_in_one_line(tmp_path):
    target = tiny_target(tmp_path / "m", task="masked-lm")
    target.model.to(torch.float16)
    with pytest.raises(ProbeError, match=r"near ties in the model's own precision, which is float16 here") as caught:
        resolve_precision("bfloat16", target)
    assert "\n" not in str(caught.value)


def test_a_gpu_computes_bfloat16_natively_from_ampere_on_not_by_emulation(monkeypatch):
    from types import SimpleNamespace

    asked: list = []

    def properties(device):
        asked.append(device)
        return SimpleNamespace(major={0: 7, 1: 8}[device.index])

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", properties)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)  # counts emulation: not asked
    assert masked_scoring.native_bfloat16("cuda:0") is False  # a V100 / T4 (7.x) emulates it
    assert masked_scoring.native_bfloat16("cuda:1") is True
    assert [d.index for d in asked] == [0, 1]  # the target's own device, not the current one


def test_bfloat16_is_dropped_where_its_float32_share_would_cost_more_than_it_saves():
    """201 pairs against a 200-pair calibration sample once ran bfloat16 and re-scored nearly all of them."""
    from bertprobe.model.near_ties import PAYING, plan

    assert plan("bfloat16", 201, 200)[0] == "model" and "under 3 x the 200" in plan("bfloat16", 201, 200)[1]
    assert plan("bfloat16", PAYING * 200 - 1, 200)[0] == "model"
    assert plan("bfloat16", PAYING * 200, 200) == ("bfloat16", None)
    assert plan("model", 10_000, 200) == ("model", None)


@pytest.mark.parametrize(("arch", "name"), [("bert", "cls.predictions.transform.dense"), ("roberta", "lm_head.dense"),
                                            ("electra", "generator_predictions.dense"), ("distilbert", "vocab_transform")])
def test_the_heads_transform_computes_in_float32_in_the_bfloat16_copy(tmp_path, arch, name):
    """Rounding the transform's output to bfloat16 was half of a pair's bfloat16 error on a MiniLM-L6; it runs at
    the scored positions only, so the copy keeps it in float32, and it computes as the model's own does."""
    target = tiny_target(tmp_path / "m", task="masked-lm", arch=arch)
    reduced = MaskedScorer(target, precision="bfloat16").model
    names = {n for n, m in reduced.named_modules() if any(m is h for h in head_transform_linears(reduced))}
    assert names == {name}
    kept, own = reduced.get_submodule(name), target.model.get_submodule(name)
    x = torch.randn(3, own.in_features)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        got, rounded = kept(x), own(x)
    assert got.dtype == torch.float32 and torch.equal(got, own(x))  # the float32 arithmetic, autocast or not
    assert rounded.dtype == torch.bfloat16  # what an ordinary layer would have given under autocast
    assert reduced.get_output_embeddings().weight.dtype == torch.bfloat16  # the vocabulary projection stays reduced


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gold_log_probabilities_read_in_chunks_equal_a_whole_log_softmax(dtype):
    torch.manual_seed(0)
    read = GoldLogprobs(rows=32)
    for count, width in [(70, 501), (5, 501), (64, 77)]:  # a partial last chunk; fewer rows than a chunk; new width
        logits = (torch.randn(count, width) * 8).to(dtype)
        gold = torch.randint(0, width, (count,))
        whole = logits.float().log_softmax(-1)[torch.arange(count), gold]
        got = read(logits, gold)
        assert got.dtype == torch.float32 and got.shape == (count,)
        assert torch.equal(got, whole)
