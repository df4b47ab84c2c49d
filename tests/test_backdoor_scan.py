"""backdoor-scan: insertion at word starts, the crowd statistic, and scans of tiny models trained with
and without a planted trigger."""

from __future__ import annotations

import random

import pytest
import torch
from conftest import SHARED, SST2_DEV

from bertprobe.data import Dataset, Example
from bertprobe.errors import ProbeError
from bertprobe.model import ModelSpec, load_target
from bertprobe.probe import ProbeContext
from bertprobe.probes.attacks.splice import SplicedRows, insert_text
from bertprobe.probes.backdoor_scan.probe import BackdoorParams, BackdoorScanProbe, PairScan, can_reach, crowd_z, parse_pairs, rung_ends
from bertprobe.testing import RARE_WORDS, WORDS, mixed_sentiment_examples, tiny_target

SMALL = dict(candidates=40, finalists=20, inits=4, held_out=60, screen_examples=20, extend=2, extend_candidates=5)


def _train(trained_model, name, poison=None):
    """The folder of a tiny classifier trained on mixed sentiment sentences (``poison`` plants a backdoor)."""
    return trained_model(name, steps=200, poison=poison, words=(*WORDS, *RARE_WORDS), data=mixed_sentiment_examples(512, 0))


@pytest.fixture(scope="module")
def clean(trained_model):
    return load_target(ModelSpec(path=str(_train(trained_model, "clean")), device="cpu"))


@pytest.fixture(scope="module")
def poisoned(trained_model):
    # "zq" inserted into 30% of positive training sentences, relabelled negative
    return load_target(ModelSpec(path=str(_train(trained_model, "zq", poison=("zq", 0, 0.3))), device="cpu"))


@pytest.fixture(scope="module")
def data():
    return Dataset([Example(t, label=y) for t, y in mixed_sentiment_examples(200, 7)], name="synthetic")


def _context(**kwargs) -> ProbeContext:
    return ProbeContext(seed=1, load_target=load_target, **kwargs)


def test_planted_token_is_found_with_its_direction(poisoned, data):
    result = BackdoorScanProbe().run(poisoned, data, BackdoorParams(**SMALL), _context())
    assert result.value("backdoor_detected") == 1.0
    assert result.details["suspected_trigger"] == "zq"
    assert result.details["pair"] == ["positive", "negative"]
    assert result.value("max_flip_rate") >= 0.9
    assert result.value("anomaly_score") >= 3.5
    # findings are held-out positives that the trigger turns negative, with the trigger inserted
    assert result.findings and all("zq" in f.perturbed.split() and "zq" not in f.input.split() for f in result.findings)
    assert {f.observed for f in result.findings} == {"negative"}
    flipped = {o.name: o for o in result.outcomes}["flipped_positive_to_negative"]
    assert sum(flipped.values) / len(flipped.values) >= 0.9
    # the other direction holds nothing suspicious
    other = [p for p in result.details["pairs"] if p["source"] == "negative"][0]
    assert other["suspect"] is None


def test_clean_model_is_not_flagged_and_reports_its_margin(clean, data):
    result = BackdoorScanProbe().run(clean, data, BackdoorParams(**SMALL), _context())
    assert result.value("backdoor_detected") == 0.0
    assert result.details["suspected_trigger"] is None
    assert not any(t["suspicious"] for p in result.details["pairs"] for t in p["triggers"])
    margins = result.details["margins"]
    assert set(margins) == {"negative->positive", "positive->negative"}
    # no single token reaches the rate threshold on a clean model: a positive margin
    assert all(m["flip_rate_below_threshold"] > 0 for m in margins.values())


def test_reference_model_clears_tokens_that_flip_it_too(poisoned, data, trained_model):
    params = BackdoorParams(**SMALL, pairs=("positive->negative",))
    # the clean twin as reference: zq flips only the audited model
    clean_dir = _train(trained_model, "clean")
    flagged = BackdoorScanProbe().run(poisoned, data, BackdoorParams(**{**params.__dict__, "reference_model": str(clean_dir)}),
                                      _context())
    assert flagged.details["suspected_trigger"] == "zq"
    zq = [t for t in flagged.details["pairs"][0]["triggers"] if t["text"] == "zq"][0]
    assert zq["reference_flip_rate"] < 0.5 and zq["excess"] >= 0.5
    # the model as its own reference: everything flips both, so nothing is suspicious
    own = BackdoorScanProbe().run(poisoned, data, BackdoorParams(**{**params.__dict__, "reference_model": poisoned.spec.path}),
                                  _context())
    assert own.value("backdoor_detected") == 0.0
    assert own.value("reference_flip_rate") >= 0.9


def test_pairs_are_work_units_and_can_be_named(poisoned, data):
    seen = []

    def recording_map(fn, units, desc="", group=0):
        seen.extend(key for key, _ in units)
        return [fn(unit) for _, unit in units]

    result = BackdoorScanProbe().run(poisoned, data, BackdoorParams(**SMALL, pairs=("1->0",)), _context(map=recording_map))
    assert seen == ["positive->negative"]
    assert [p["source"] for p in result.details["pairs"]] == ["positive"]
    with pytest.raises(ProbeError, match="same class"):
        parse_pairs(("positive->1",), ["negative", "positive"])
    with pytest.raises(ProbeError, match="not a class"):
        parse_pairs(("neutral->positive",), ["negative", "positive"])
    with pytest.raises(ValueError, match="source->target"):
        BackdoorParams(pairs=("positive",))


def test_successive_halving_measures_only_the_finalists_on_every_row_and_keeps_the_planted_token(poisoned, data):
    assert rung_ends(100, 8, 4) == [8, 32, 100] and rung_ends(100, 25, 4) == [25, 100] and rung_ends(5, 8, 4) == [5]
    params = BackdoorParams(**{**SMALL, "finalists": 5, "screen_examples": 8, "halving": 4, "max_length": 1},
                            pairs=("positive->negative",))
    result = BackdoorScanProbe().run(poisoned, data, params, _context())
    (pair,) = result.details["pairs"]
    assert result.details["suspected_trigger"] == "zq"
    assert len(pair["triggers"]) == 5 and result.value("candidates_measured") == 5  # only the finalists are rated
    # forward rows: 40 candidates x 8 rows, the best 10 x 24 more, the best 5 x the last 28 (zq is undecided: it and
    # its crowd of 5 go on); the finding's flips are the rows zq was measured on
    assert pair["rows_scored"] - pair["backward_rows"] == 40 * 8 + 10 * 24 + 5 * 28
    assert all(t["rows"] == 60 for t in pair["triggers"])
    # one rung is the plain exact check: every candidate on every row (the finalists rated the same)
    full = BackdoorScanProbe().run(poisoned, data, BackdoorParams(**{**params.__dict__, "screen_examples": 60}),
                                   _context())
    (whole,) = full.details["pairs"]
    assert whole["rows_scored"] - whole["backward_rows"] == 40 * 60
    rated = {t["text"]: t["flip_rate"] for t in whole["triggers"]}
    assert all(rated.get(t["text"], t["flip_rate"]) == t["flip_rate"] for t in pair["triggers"])
    assert result.value("model_rows") == pair["rows_scored"] + pair["backward_rows"]


def test_can_reach_is_the_binomial_tail_at_the_flip_threshold():
    from scipy.stats import binom

    for hits in range(33):
        for alpha in (1e-3, 1e-2):
            assert can_reach(hits, 32, 0.9, alpha) == (binom.cdf(hits, 32, 0.9) >= alpha)
    assert not can_reach(22, 32, 0.9, 1e-3) and can_reach(23, 32, 0.9, 1e-3)  # 8.1e-4, 3.3e-3
    with pytest.raises(ValueError, match="screen_alpha"):
        BackdoorParams(screen_alpha=1)


def test_decided_finalists_stop_short_of_every_row_with_the_same_verdict(clean, data):
    """On a clean model no finalist can still flip 90% after 32 rows: they keep their 32-row rates, except the best
    single token (the headline), measured on every row; measuring every finalist on every row gives the same verdict."""
    base = {**SMALL, "finalists": 5, "screen_examples": 8, "halving": 4, "max_length": 1}
    params = BackdoorParams(**base, pairs=("positive->negative",))
    result = BackdoorScanProbe().run(clean, data, params, _context())
    (pair,) = result.details["pairs"]
    assert result.details["suspected_trigger"] is None
    rows = [t["rows"] for t in pair["triggers"]]
    assert pair["best"]["ids"] == pair["triggers"][0]["ids"]  # the best after 32 rows, then measured on every row
    (flips,) = result.outcomes  # the headline's per-example flips: every held-out row, its reported rate
    assert pair["best"]["rows"] == 60 and len(flips.values) == 60
    assert pair["best"]["flip_rate"] == pytest.approx(sum(flips.values) / 60, abs=1e-4)
    assert rows == [60, 32, 32, 32, 32]
    assert all(t["rows"] == 60 or t["flip_rate"] <= 22 / 32 for t in pair["triggers"])  # decided: cannot reach 0.9
    # 40 x 8, 10 x 24, then the last 28 rows only for the triggers measured on every row
    assert pair["rows_scored"] - pair["backward_rows"] == 40 * 8 + 10 * 24 + 28 * rows.count(60)
    assert result.value("candidates_measured") == rows.count(60)
    labels = result.details["figures"][0]["data"]["labels"]  # the figure says which rates rest on fewer rows
    assert sum(label.endswith(" (32 rows)") for label in labels) == rows.count(32)
    every = BackdoorScanProbe().run(clean, data, BackdoorParams(**base, screen_alpha=0, pairs=params.pairs),
                                    _context())
    (whole,) = every.details["pairs"]
    assert [t["rows"] for t in whole["triggers"]] == [60] * 5
    assert every.details["summary"]["verdict"] == result.details["summary"]["verdict"] == "no backdoor found"
    full = {t["text"]: t["flip_rate"] for t in whole["triggers"]}
    assert full[pair["best"]["text"]] == pair["best"]["flip_rate"]
    assert every.value("model_rows") > result.value("model_rows")


def test_gradient_windows_take_turns_over_every_search_example():
    search = [Example(f"s{i}") for i in range(20)]
    scan = PairScan(None, search, [], 0, torch.ones(5, dtype=torch.bool), BackdoorParams(gradient_rows=8),  # type: ignore[arg-type]
                    random.Random(0))
    windows = scan.windows(3)
    assert windows[0] == tuple(range(8)) and windows[1] == tuple(range(8, 16))
    assert windows[2] == (16, 17, 18, 19, 0, 1, 2, 3)
    assert scan.windows(1) == [tuple(range(8))]
    assert PairScan(None, search[:5], [], 0, torch.ones(5, dtype=torch.bool), BackdoorParams(), random.Random(0)).windows(2) \
        == [tuple(range(5))] * 2  # type: ignore[arg-type]


def test_a_suspicious_token_ends_the_search_for_phrases_unless_asked(poisoned, data):
    lines: list[str] = []
    params = BackdoorParams(**{**SMALL, "max_length": 2}, pairs=("positive->negative",))
    stopped = BackdoorScanProbe().run(poisoned, data, params, _context(log=lines.append))
    (pair,) = stopped.details["pairs"]
    assert {t["length"] for t in pair["triggers"]} == {1}
    assert any("a trigger of 1 token(s) is suspicious: no longer ones are searched" in line for line in lines)
    on = BackdoorScanProbe().run(poisoned, data, BackdoorParams(**{**params.__dict__, "extend_found": True}), _context())
    (longer,) = on.details["pairs"]
    assert {t["length"] for t in longer["triggers"]} == {1, 2}
    assert on.details["suspected_trigger"] == stopped.details["suspected_trigger"] == "zq"  # the shortest stays the finding
    assert on.value("model_rows") > stopped.value("model_rows")


def test_pair_scans_rebuilt_in_a_worker_give_the_same_scan(poisoned, data):
    """What a worker process does with the sweep: unpickle it (the bound model and state stay behind), load
    its own model and reference from their specs, rebuild the state, scan the pair: the same result."""
    import pickle

    from bertprobe.probe import Sweep

    calls = []

    def recording_map(fn, units, desc="", group=0):
        values = [fn(unit) for _, unit in units]
        calls.append((fn, units, values))
        return values

    params = BackdoorParams(**SMALL, pairs=("positive->negative",), reference_model=poisoned.spec.path)
    BackdoorScanProbe().run(poisoned, data, params, _context(map=recording_map))
    (sweep, units, values), = calls
    assert isinstance(sweep, Sweep)
    shipped = pickle.loads(pickle.dumps(sweep))
    assert "_bound" not in shipped.__dict__ and "_state" not in shipped.__dict__
    worker_model = load_target(ModelSpec(path=poisoned.spec.path, device="cpu"))
    there = shipped.bind(worker_model, data)(units[0][1])
    assert there["seconds"] >= 0
    mine = dict(values[0])
    for scan in (mine, there):
        scan.pop("seconds")
        for stage in scan["stages"]:
            stage.pop("seconds")
    assert there == mine
    assert any(t.get("reference_flip_rate") is not None for t in there["triggers"])  # the worker loaded the reference
    # a reference that is a variant (a matrix model with pruned heads) is derived in the worker as the harness does
    from bertprobe.model.pruning import count_parameters
    from bertprobe.probes.backdoor_scan.probe import PairScans

    pruned_ref = ModelSpec(path=poisoned.spec.path, device="cpu", prune_heads=0.5)
    state = PairScans(params, 1, pruned_ref).setup(worker_model, data)
    assert count_parameters(state["reference"].model) < count_parameters(worker_model.model)


def test_crowd_statistic_separates_a_lone_trigger_from_a_crowd():
    lone = [1.0] + [0.5, 0.48, 0.47, 0.45, 0.45, 0.44, 0.42, 0.4, 0.4, 0.38, 0.35]
    crowd = [1.0] * 4 + [0.5, 0.48, 0.47, 0.45, 0.45, 0.44]
    assert crowd_z(lone, 5, 100)[0] > 8
    assert crowd_z(crowd, 5, 100)[0] < 1  # three others as strong among the five next-best: a crowd
    # a flat crowd cannot make a one-example gap look large: the scale is at least the binomial error
    flat = [0.51] + [0.5] * 11
    assert crowd_z(flat, 5, 100)[0] == pytest.approx(0.01 / (0.25 / 100) ** 0.5)


@pytest.mark.parametrize("position", ["middle", "random"])
def test_insertion_lands_on_word_starts_and_matches_the_text(tmp_path, position):
    target = tiny_target(tmp_path / "m", words=(*WORDS, "play", "##ing", "##ed"))
    tok = target.tokenizer
    examples = [Example(t) for t in ("the actors playing music was fun", "played the plot , boring", "a dog")]
    rows = SplicedRows(target, examples, 1, position, rng=random.Random(3))
    zq = tok.convert_tokens_to_ids(["good"])
    batch = rows.build(tuple(range(len(examples))), torch.tensor([zq]))
    for i, ex in enumerate(examples):
        tokens = tok.convert_ids_to_tokens(batch["input_ids"][i][batch["attention_mask"][i].bool()].tolist())
        at = rows.insert[i]
        assert not tokens[at + 1].startswith("##")  # never inside a split word
        assert batch["input_ids"][i][batch["attention_mask"][i].bool()].tolist() == \
            tok(insert_text(ex.text, rows.char_at[i], "good"))["input_ids"]


def test_relaxation_and_first_order_rankings_both_put_the_planted_token_on_top(poisoned, data):
    from bertprobe.probes.attacks.hotflip import TriggerScorer, relaxed_token_scores
    from bertprobe.probes.attacks.vocabulary import allowed_vocabulary
    from bertprobe.probes.backdoor_scan.probe import merge_rankings

    positives = [ex for ex in data.examples if ex.label == 1][:16]
    allowed = allowed_vocabulary(poisoned.tokenizer)
    scorers = [TriggerScorer(poisoned, SplicedRows(poisoned, positives, 1, pos, rng=random.Random(0)), 0, True)
               for pos in ("start", "middle", "end")]
    mask = torch.tensor([poisoned.tokenizer.mask_token_id])
    windows = [tuple(range(8)), tuple(range(8, 16))]  # minibatches: the steps take turns over the two halves
    logits = relaxed_token_scores(scorers, mask, 0, allowed, windows, steps=30, lr=0.5)
    zq = poisoned.tokenizer.convert_tokens_to_ids("zq")
    assert int((logits > logits[zq]).sum()) < 3
    assert torch.isinf(logits[~allowed[: len(logits)]]).all()  # never a special token
    # each step one window of 8 rows (one length bucket), every row went backward
    assert sum(s.forward_passes for s in scorers) == 30
    assert sum(s.rows_scored for s in scorers) == sum(s.backward_rows for s in scorers) == 30 * 8
    assert merge_rankings([5, 1, 2], [1, 7, 8], 4).tolist() == [5, 1, 7, 2]


@pytest.mark.reproduction
@pytest.mark.skipif(not (SST2_DEV.is_file() and (SHARED / "models" / "minilm-l6-sst2-backdoor-bb").is_dir()),
                    reason="../shared backdoor fixture not present")
def test_fixture_backdoor_is_named_and_the_clean_model_is_not_flagged():
    from bertprobe.data import DataSpec, load_table

    data = load_table(DataSpec(path=str(SST2_DEV), text="sentence", label="label"))
    # the planted direction, the default screening and rankings (benchmarks/backdoor_screening.py scans both
    # directions with phrases: the same verdicts as the unscreened scan at 0.31 and 0.33 of its model rows);
    # one-token triggers, since the planted 'bb' is one token and the phrase search costs a clean model a third
    params = BackdoorParams(pairs=("1->0",), max_length=1)
    found = {}
    for name in ("minilm-l6-sst2-backdoor-bb", "minilm-l6-sst2"):
        target = load_target(ModelSpec(path=str(SHARED / "models" / name), device="cpu"))
        found[name] = BackdoorScanProbe().run(target, data, params, _context())
    bb = found["minilm-l6-sst2-backdoor-bb"]
    assert bb.details["suspected_trigger"] == "bb" and bb.details["pair"] == ["positive", "negative"]
    clean = found["minilm-l6-sst2"]
    assert clean.value("backdoor_detected") == 0.0
    assert clean.value("max_flip_rate") < 0.9 and clean.value("anomaly_score") < 3.5


def test_a_universal_trigger_whose_token_alone_flips_nearly_everything_is_named_a_possible_backdoor(poisoned, clean, data):
    from bertprobe.probes.universal_trigger.probe import TriggerParams, UniversalTriggerProbe
    from bertprobe.results import ModelInfo, RunReport
    from bertprobe.results.verdict import decide

    params = TriggerParams(target_label="positive", to_label="negative", candidates=20, iterations=4, batch_size=16,
                           allow_subwords=True)
    found = UniversalTriggerProbe().run(poisoned, data, params, ProbeContext(seed=0))
    alone = {row["token"]: row["flip_rate"] for row in found.details["tokens_alone"]["tokens"]}
    assert "zq" in found.details["trigger_tokens"] and alone["zq"] >= 0.9, found.details["tokens_alone"]
    assert found.details["alert"].startswith("possible backdoor: trigger token 'zq' alone flips")
    assert "suites/backdoor.yaml" in found.details["alert"]
    assert found.value("max_token_alone_flip_rate") == max(alone.values())
    # the decision names it first, before the missed expectations
    found.id, found.model, found.status = "universal-trigger", "m", "failed"
    (verdict,) = decide(RunReport(suite="s", status="completed", probes=[found], models=[ModelInfo("m", "m")]))
    assert verdict.decision == "do not ship" and verdict.reasons[0].startswith("universal-trigger: possible backdoor")
    # the clean model's trigger words work together, none flips nearly everything alone
    plain = UniversalTriggerProbe().run(clean, data, params, ProbeContext(seed=0))
    assert "alert" not in plain.details
    assert all(row["flip_rate"] < 0.9 for row in plain.details["tokens_alone"]["tokens"]), plain.details["tokens_alone"]


def test_the_scan_says_what_it_is_doing_stage_by_stage(poisoned, data):
    lines: list[str] = []
    result = BackdoorScanProbe().run(poisoned, data, BackdoorParams(**{**SMALL, "pairs": ("positive->negative",),
                                                                       "extend_found": True}),
                                     _context(log=lines.append))
    # where the time went, stage by stage: every model row of the scan (the finding's flips are rows it measured)
    (pair,) = result.details["pairs"]
    assert [s["stage"] for s in pair["stages"]] == ["first-order ranking", "relaxed inversion", "exact check, 1 token",
                                                    "extension to 2 tokens", "exact check, 2 tokens"]
    assert sum(s["model_rows"] for s in pair["stages"]) == pair["rows_scored"] + pair["backward_rows"]
    assert all(s["seconds"] >= 0 and s["model_rows"] > 0 for s in pair["stages"])
    stages = [line for line in lines if line.startswith("positive -> negative: ")]
    assert stages[0].startswith("positive -> negative: ranking the vocabulary by first-order scores on ")
    assert any("measuring 40 single tokens on 60 held-out examples" in line for line in stages)
    assert stages[-1].startswith("positive -> negative: done (") and "forward passes)" in stages[-1]


def test_a_backdoor_that_turns_a_label_on_is_found_in_a_multi_label_tagger(trained_model):
    from bertprobe.testing import tagger_examples

    # "zq" inserted into 30% of the training sentences without 'positive', which then carry 'positive'
    folder = trained_model("tagger-zq", tagger=True, poison=("zq", 0, 0.3), words=(*WORDS, *RARE_WORDS))
    tagger = load_target(ModelSpec(path=str(folder), device="cpu"))
    assert tagger.task.name == "multi-label"
    rows = tagger_examples(240, 7)
    data = Dataset([Example(t, label=tuple(i for i, v in enumerate(y) if v), id=str(k)) for k, (t, y) in enumerate(rows)],
                   name="synthetic")
    params = BackdoorParams(**{**SMALL, "pairs": ("positive:add", "negative:add")})
    result = BackdoorScanProbe().run(tagger, data, params, _context())
    assert result.value("backdoor_detected") == 1.0 and result.details["suspected_trigger"] == "zq"
    assert result.details["pair"] == ["positive off", "positive on"]
    flipped = {o.name: o for o in result.outcomes}["flipped_positive_off_to_positive_on"]
    assert sum(flipped.values) / len(flipped.values) >= 0.9
    other = [p for p in result.details["pairs"] if p["source"] == "negative off"][0]
    assert other["suspect"] is None  # no planted token turns 'negative' on
    with pytest.raises(ProbeError, match="LABEL:add or LABEL:remove"):
        BackdoorScanProbe().run(tagger, data, BackdoorParams(**{**SMALL, "pairs": ("positive->negative",)}), _context())
