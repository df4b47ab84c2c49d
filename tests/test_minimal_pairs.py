"""blimp: PLLs against minicons, the scored-position last layer against the full pass, the probe's accuracies
against a plain computation on a hand-made BLiMP folder, sampling, bad input, other architectures, a real MLM."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import torch
from conftest import SHARED

from bertprobe.errors import DataError
from bertprobe.model.masked_scoring import MaskedScorer, masked_logits, scored_position_layer
from bertprobe.probe import ProbeContext
from bertprobe.probes.minimal_pairs.pairs import load_pairs, select_pairs
from bertprobe.probes.minimal_pairs.probe import BlimpParams, BlimpProbe
from bertprobe.testing import tiny_target

BLIMP = SHARED / "data" / "blimp"
MLM = SHARED / "models" / "minilm-l6-mlm"
HAND_SENTENCES = ["the dogs walked away .", "the dog walking away .", "she has given the apples away .",
                  "they gave she the apple .", "a robin was jumping !", "two cats are sleeping soundly ."]


def sample_sentences() -> list[str]:
    """Sentences of a seeded sample of BLiMP pairs (two per paradigm of five), or hand-written ones without ../shared."""
    if not BLIMP.is_dir():
        return HAND_SENTENCES
    files = sorted(BLIMP.glob("*.jsonl"))[::13][:5]
    pairs = [p for f in files for p in select_pairs(load_pairs(f), per_paradigm=2, seed=1)]
    return [t for p in pairs for t in (p.good, p.bad)]


def split_words(sentences: list[str], bpe: bool) -> list[str]:
    """A vocabulary where every word of five letters or more is two pieces (a WordPiece '##' continuation, or two
    BPE words), so PLL-word-l2r differs from the original PLL."""
    out: list[str] = []
    for word in sorted({w for s in sentences for w in re.findall(r"\w+|[^\w\s]", s.lower())}):
        out += [word[:3], word[3:] if bpe else "##" + word[3:]] if len(word) >= 5 else [word]
    return out


def minicons_plls(target, texts: list[str], metric: str) -> list[float]:
    scorer_module = pytest.importorskip("minicons.scorer")
    tok = target.tokenizer
    tok.batch_encode_plus = tok.__call__  # minicons calls it; transformers 5 removed it
    mlm = scorer_module.MaskedLMScorer(target.model, device="cpu", tokenizer=tok)
    return [float(v) for v in mlm.sequence_score(texts, reduction=lambda x: x.sum(0).item(), PLL_metric=metric)]


@pytest.mark.parametrize("arch", ["bert", "roberta"])
def test_plls_equal_minicons_for_both_metrics(tmp_path, arch):
    pytest.importorskip("minicons")
    texts = sample_sentences()
    target = tiny_target(tmp_path / arch, task="masked-lm", arch=arch, words=split_words(texts, arch == "roberta"),
                         initializer_range=0.5)
    engine = MaskedScorer(target, batch_tokens=512, max_rows=64)
    ours = {m: [s.total for s in engine.pll(texts, m)] for m in ("original", "within_word_l2r")}
    assert ours["original"] != pytest.approx(ours["within_word_l2r"], abs=1e-3)  # words were split: the metrics differ
    for metric, values in ours.items():
        theirs = minicons_plls(target, texts, metric)
        assert values == pytest.approx(theirs, abs=1e-4), metric


@pytest.mark.parametrize("arch", ["bert", "roberta", "electra"])
def test_the_last_layer_at_the_scored_positions_gives_the_full_passs_logits(tmp_path, arch):
    target = tiny_target(tmp_path / arch, task="masked-lm", arch=arch, initializer_range=0.5)
    model = target.model
    assert scored_position_layer(model) is not None
    tok = target.tokenizer
    texts = ["the dog is good .", "a cat", "they gave the apples away to the bird ."]  # unequal lengths: padding
    batch = tok(texts, padding=True, return_tensors="pt")
    positions = torch.tensor([2, 1, 5])
    ids = batch["input_ids"].clone()
    ids[torch.arange(3), positions] = tok.mask_token_id
    with torch.inference_mode():
        fast = masked_logits(model, ids, batch["attention_mask"], positions)
        full = model(input_ids=ids, attention_mask=batch["attention_mask"]).logits[torch.arange(3), positions]
    assert fast.shape == full.shape and torch.allclose(fast, full, atol=1e-5)
    handle = model.register_forward_hook(lambda *a: None)  # something watching the model: the whole pass runs
    assert scored_position_layer(model) is None
    handle.remove()


def plain_pll(target, text: str) -> float:
    """Salazar et al.'s PLL written out: one unbatched pass per token, the token masked, its log-probability."""
    tok = target.tokenizer
    ids = tok(text, return_tensors="pt")["input_ids"][0]
    added = [i in (0, len(ids) - 1) for i in range(len(ids))]  # [CLS] and [SEP]; an [UNK] is the text's own
    total = 0.0
    with torch.inference_mode():
        for i, t in enumerate(ids.tolist()):
            if added[i]:
                continue
            masked = ids.clone()
            masked[i] = tok.mask_token_id
            total += float(target.model(input_ids=masked[None]).logits[0, i].log_softmax(-1)[t])
    return total


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def pair_row(good: str, bad: str, uid: str, i: int, field: str, term: str) -> dict:
    return {"sentence_good": good, "sentence_bad": bad, "field": field, "linguistics_term": term, "UID": uid,
            "simple_LM_method": True, "pairID": str(i)}


SENTENCES = [("the dog is good .", "the dog are good ."), ("they gave the apple away .", "they gave the apple apple ."),
             ("she was very funny .", "she were very funny ."), ("a cat has two dogs .", "a cat have two dogs ."),
             ("we have a bird .", "we has a bird ."), ("it is not bad .", "it not is bad ."),
             ("the film was good .", "the film was good ."),  # identical: counted apart
             ("i can give it away .", "i can gave it away ."), ("two cats were dull .", "two cats was dull .")]


@pytest.fixture
def hand_blimp(tmp_path) -> Path:
    folder = tmp_path / "blimp"
    folder.mkdir()
    specs = [("agreement_1", "morphology", "subject_verb_agreement"), ("principle_x", "syntax_semantics", "binding"),
             ("principle_y", "syntax/semantics", "binding"), ("animate_z", "syntax", "s-selection")]
    for (uid, field, term), (start, stop) in zip(specs, [(0, 3), (3, 5), (5, 7), (7, 9)]):
        rows = [pair_row(g, b, uid, i, field, term) for i, (g, b) in enumerate(SENTENCES[start:stop])]
        write_jsonl(folder / f"{uid}.jsonl", rows)
    return folder


def test_the_probes_accuracies_equal_a_plain_computation(tmp_path, hand_blimp):
    target = tiny_target(tmp_path / "m", task="masked-lm", initializer_range=0.5)
    result = BlimpProbe().run(target, None, BlimpParams(data=str(hand_blimp), batch_tokens=64, max_rows=8,
                                                        chunk_pairs=2), ProbeContext())
    rows = [json.loads(line) for f in sorted(hand_blimp.glob("*.jsonl")) for line in f.read_text().splitlines()]
    identical = [r for r in rows if r["sentence_good"] == r["sentence_bad"]]
    rows = [r for r in rows if r["sentence_good"] != r["sentence_bad"]]
    right = {f"{r['UID']}/{r['pairID']}": plain_pll(target, r["sentence_good"]) > plain_pll(target, r["sentence_bad"])
             for r in rows}

    def accuracy(key) -> dict[str, float]:
        groups: dict[str, list[bool]] = {}
        for r in rows:
            groups.setdefault(key(r), []).append(right[f"{r['UID']}/{r['pairID']}"])
        return {k: sum(v) / len(v) for k, v in groups.items()}

    paradigms = accuracy(lambda r: r["UID"])
    terms = accuracy(lambda r: {"s-selection": "argument_structure"}.get(r["linguistics_term"], r["linguistics_term"]))
    fields = accuracy(lambda r: r["field"].replace("/", "_"))
    assert set(fields) == {"morphology", "syntax_semantics", "syntax"}  # the two spellings are one field
    assert "argument_structure" in terms and "s-selection" not in terms
    for prefix, table in (("accuracy_", paradigms), ("term_accuracy_", terms), ("field_accuracy_", fields)):
        for name, value in table.items():
            assert result.value(prefix + name) == pytest.approx(value), prefix + name
            lo, hi = result.metrics[prefix + name].ci
            assert lo <= value <= hi
    assert result.value("accuracy") == pytest.approx(sum(paradigms.values()) / len(paradigms))
    assert result.value("pair_accuracy") == pytest.approx(sum(right.values()) / len(right))
    assert result.value("identical_pairs") == len(identical) == 1 and result.value("pairs") == len(rows)
    assert result.details["identical_pairs"] == ["principle_y/1"]
    outcome = next(o for o in result.outcomes if o.name == "pair_accuracy")
    assert sorted(outcome.ids) == sorted(right)
    assert result.findings and all(f.expected == "PLL(good) > PLL(bad)" for f in result.findings)
    assert [f["title"] for f in result.details["figures"]] == ["BLiMP accuracy per field", "BLiMP accuracy per term"]


def test_per_paradigm_sampling_is_seeded_and_per_paradigm(tmp_path):
    folder = tmp_path / "b"
    folder.mkdir()
    for uid in ("p_one", "p_two"):
        write_jsonl(folder / f"{uid}.jsonl", [pair_row(f"s {i} .", f"t {i} .", uid, i, "syntax", "ellipsis")
                                              for i in range(50)])
    pairs = load_pairs(folder)
    a = select_pairs(pairs, (), 5, seed=3)
    assert [p.id for p in a] == [p.id for p in select_pairs(pairs, (), 5, seed=3)]
    assert [p.id for p in a] != [p.id for p in select_pairs(pairs, (), 5, seed=4)]
    assert sum(p.uid == "p_one" for p in a) == 5 and sum(p.uid == "p_two" for p in a) == 5
    alone = select_pairs(pairs, ("p_two",), 5, seed=3)  # a paradigm's sample does not depend on the others
    assert [p.id for p in alone] == [p.id for p in a if p.uid == "p_two"]
    assert len(select_pairs(pairs, (), 0)) == 100


def one_line_error(excinfo) -> str:
    message = str(excinfo.value)
    assert "\n" not in message
    return message


def test_bad_lines_are_reported_together_with_file_and_line(tmp_path):
    folder = tmp_path / "b"
    folder.mkdir()
    good = pair_row("a b .", "b a .", "p", 0, "syntax", "ellipsis")
    (folder / "p.jsonl").write_text("\n".join([json.dumps(good), "{not json", json.dumps({"sentence_good": "x"}),
                                               json.dumps(["a", "b"])]) + "\n")
    with pytest.raises(DataError) as excinfo:
        load_pairs(folder)
    message = one_line_error(excinfo)
    assert "line 2 of p.jsonl is not JSON" in message
    assert "line 3 of p.jsonl has no sentence_bad" in message
    assert "line 4 of p.jsonl is a JSON list" in message


def test_an_empty_folder_and_an_unknown_paradigm_are_one_line_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no BLiMP \\*.jsonl files in") as excinfo:
        load_pairs(tmp_path / "empty")
    one_line_error(excinfo)
    folder = tmp_path / "b"
    folder.mkdir()
    write_jsonl(folder / "adjunct_island.jsonl", [pair_row("a b .", "b a .", "adjunct_island", 0, "syntax", "island_effects")])
    wanted = "unknown BLiMP paradigm 'adjunct_islnd' \\(did you mean 'adjunct_island'\\?\\)"
    with pytest.raises(DataError, match=wanted) as excinfo:
        select_pairs(load_pairs(folder), ("adjunct_islnd",))
    one_line_error(excinfo)


def test_a_sentence_longer_than_the_models_positions_is_a_data_error(tmp_path):
    folder = tmp_path / "b"
    folder.mkdir()
    long = " ".join(["the dog"] * 80) + " ."  # 161 tokens and the special ones; the tiny model has 128 positions
    write_jsonl(folder / "p.jsonl", [pair_row("the dog .", "dog the .", "p", 0, "syntax", "ellipsis"),
                                     pair_row(long, "the dog .", "p", 1, "syntax", "ellipsis")])
    target = tiny_target(tmp_path / "m", task="masked-lm")
    with pytest.raises(DataError, match="line 2 of p.jsonl: sentence_good is 163 tokens, longer than the model's 128 "
                                        "positions") as excinfo:
        BlimpProbe().run(target, None, BlimpParams(data=str(folder)), ProbeContext())
    one_line_error(excinfo)


@pytest.mark.parametrize("arch", ["deberta-v2", "albert", "distilbert"])
def test_the_whole_pass_path_gives_a_plain_plls_figures(tmp_path, arch):
    """Families whose last layer runs whole (the pre-hook on the vocabulary head only): PLLs equal one unbatched
    pass per token, in packed batches of unequal lengths."""
    target = tiny_target(tmp_path / arch, task="masked-lm", arch=arch, initializer_range=0.5)
    assert scored_position_layer(target.model) is None
    texts = ["the dog is good .", "a cat", "they gave the apples away to the bird ."]
    ours = [s.total for s in MaskedScorer(target, batch_tokens=64).pll(texts)]
    assert ours == pytest.approx([plain_pll(target, t) for t in texts], abs=1e-4)


def test_an_unknown_word_is_scored_and_left_padding_is_cut_on_every_tokenizer_path(tmp_path):
    """[UNK] is a token of the text: scored like any other, by the fast backend and by a slow tokenizer alike;
    a backend left padding (a call with padding= sets it) is cut off, whichever side it pads."""
    from bertprobe.model.masked_scoring import encode_texts

    target = tiny_target(tmp_path / "bert", task="masked-lm", initializer_range=0.5)
    tok = target.tokenizer
    text = "the zebra is good ."  # 'zebra' is not in the tiny vocabulary
    fast = encode_texts(tok, [text])[0]
    assert tok.unk_token_id in fast.ids and fast.special == tuple(i in (0, len(fast.ids) - 1) for i in range(len(fast.ids)))

    class Slow:  # the same vocabulary through transformers' Python-side calls only
        is_fast = False
        unk_token_id = tok.unk_token_id

        def __call__(self, text, add_special_tokens=True):
            return tok(text, add_special_tokens=add_special_tokens)

    slow = encode_texts(Slow(), [text])[0]
    assert (slow.ids, slow.special) == (fast.ids, fast.special)
    tok.padding_side = "left"
    tok(["a", "the dog is good"], padding=True)  # leaves left padding on in the backend
    assert encode_texts(tok, [text])[0].ids == fast.ids


@pytest.mark.parametrize("arch", ["electra", "deberta-v2"])
def test_electra_and_deberta_mlms_run_the_probe(tmp_path, hand_blimp, arch):
    target = tiny_target(tmp_path / arch, task="masked-lm", arch=arch, initializer_range=0.5)
    result = BlimpProbe().run(target, None, BlimpParams(data=str(hand_blimp), metric="within_word_l2r"), ProbeContext())
    assert result.value("pairs") == 8 and 0 <= result.value("accuracy") <= 1
    assert (scored_position_layer(target.model) is not None) == (arch == "electra")  # DeBERTa's layer runs whole


@pytest.mark.skipif(not (MLM.is_dir() and BLIMP.is_dir()), reason="needs ../shared/models/minilm-l6-mlm and BLiMP")
def test_a_real_mlm_prefers_the_good_sentences():
    from bertprobe.model import ModelSpec, load_target

    target = load_target(ModelSpec(path=str(MLM), device="cpu"))
    params = BlimpParams(data=str(BLIMP), per_paradigm=4)
    result = BlimpProbe().run(target, None, params, ProbeContext(seed=0))
    assert result.value("pairs") + result.value("identical_pairs") == 67 * 4 and result.value("accuracy") > 0.6  # BERT-base scores about 0.84 by PLL
    assert set(result.details["fields"]) == {"morphology", "semantics", "syntax", "syntax_semantics"}
    assert len(result.details["terms"]) == 12
    if importlib.util.find_spec("minicons") is not None:  # the real model's PLLs are minicons' too
        texts = sample_sentences()[:10]
        ours = [s.total for s in MaskedScorer(target).pll(texts, "within_word_l2r")]
        assert ours == pytest.approx(minicons_plls(target, texts, "within_word_l2r"), abs=1e-4)


def test_bad_blimp_lines_exit_2_through_the_cli_one_line_each(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from bertprobe.cli import main
    from bertprobe.testing import save_tiny_model

    model = save_tiny_model(tmp_path / "m", task="masked-lm")
    folder = tmp_path / "b"
    folder.mkdir()
    (folder / "p.jsonl").write_text('{"sentence_good": "a"}\n{oops\n')
    monkeypatch.setenv("BERTPROBE_BLIMP", str(folder))
    suite = Path(__file__).resolve().parent.parent / "suites" / "blimp.yaml"
    result = CliRunner().invoke(main, ["run", str(suite), "--model", str(model), "--device", "cpu", "--only", "blimp-pll",
                                       "--out", str(tmp_path / "out"), "--set=report.formats=[json]"])
    assert result.exit_code == 2, result.output
    assert "1. probes[0].params: line 1 of p.jsonl has no sentence_bad" in result.output
    assert "2. probes[0].params: line 2 of p.jsonl is not JSON" in result.output
    assert not (tmp_path / "out").exists()  # found by the preflight, before the model loads


def test_blimp_in_bfloat16_gives_the_full_precision_outcomes(tmp_path, hand_blimp):
    """bfloat16 with its near ties re-scored: every pair's outcome is the full-precision run's, the pairs outside
    the band keep bfloat16's PLLs, and the report says what the re-check took."""
    data = BLIMP if BLIMP.is_dir() else hand_blimp
    texts = sample_sentences()
    target = tiny_target(tmp_path / "m", task="masked-lm", words=split_words(texts, False), initializer_range=0.5)
    # one masked copy per pass: every PLL is then the same whichever pairs share a batch (the re-check packs its
    # pairs otherwise than the full run), so the comparison holds on any CPU's kernels, not only this one's
    common = dict(data=str(data), per_paradigm=3 if data == BLIMP else 0, batch_tokens=1, max_rows=1)
    exact = BlimpProbe().run(target, None, BlimpParams(**common), ProbeContext())
    fast = BlimpProbe().run(target, None, BlimpParams(**common, precision="bfloat16", calibration_pairs=4),
                            ProbeContext())
    assert exact.details["precision"] == "model" and fast.details["precision"] == "bfloat16"
    outcome = {r.details["precision"]: next(o for o in r.outcomes if o.name == "pair_accuracy") for r in (exact, fast)}
    assert dict(zip(outcome["bfloat16"].ids, outcome["bfloat16"].values)) == dict(zip(outcome["model"].ids,
                                                                                       outcome["model"].values))
    assert fast.value("accuracy") == exact.value("accuracy")
    recheck = fast.details["recheck"]
    assert recheck["calibration_pairs"] == 4 <= recheck["rescored_pairs"] <= exact.value("pairs")
    assert recheck["band"] == pytest.approx(2 * recheck["max_error"]) and recheck["max_error"] > 0
    assert fast.value("rescored_pairs") == recheck["rescored_pairs"]
    assert fast.details["summary"]["precision"].startswith(f"bfloat16, {recheck['rescored_pairs']}/")
    assert "precision" not in exact.details["summary"] and "bfloat16" not in exact.details["key_finding"]
    assert fast.details["key_finding"].endswith(f"(bfloat16; {recheck['rescored_pairs']} near ties re-scored in float32)")
    assert "recheck" not in exact.details and "rescored_pairs" not in exact.metrics
    if data == BLIMP:  # 201 pairs: about half lie inside the band of this peaked tiny model
        assert recheck["rescored_pairs"] < exact.value("pairs")
    # every pair bfloat16 alone gets the other way was re-scored and counted as flipped back
    pairs = [p for p in select_pairs(load_pairs(data), per_paradigm=common["per_paradigm"], seed=0) if not p.identical]
    texts = [t for p in pairs for t in (p.good, p.bad)]
    raw = [s.total for s in MaskedScorer(target, 1, 1, precision="bfloat16").pll(texts)]
    full = [s.total for s in MaskedScorer(target, 1, 1).pll(texts)]
    differ = sum((raw[2 * i] > raw[2 * i + 1]) != (full[2 * i] > full[2 * i + 1]) for i in range(len(pairs)))
    assert recheck["flips"] == differ


def test_the_bfloat16_chunks_and_rescored_pairs_are_sweeps_a_worker_can_rebuild(tmp_path, hand_blimp):
    """What an executor ships: the sweep with its precision (resolved on the coordinator), not the model; a grouped
    call of one-pair units (the re-scored near ties) gives each pair what the chunk gave it."""
    import pickle

    from bertprobe.execution import map_in_process
    from bertprobe.probes.minimal_pairs.scoring import PairChunks

    calls = []

    def recording(fn, units, **kw):
        values = map_in_process(fn, units, **kw)
        calls.append((fn, list(units), values, kw.get("group", 0)))
        return values

    target = tiny_target(tmp_path / "m", task="masked-lm", initializer_range=0.5)
    BlimpProbe().run(target, None, BlimpParams(data=str(hand_blimp), precision="bfloat16", calibration_pairs=2,
                                               chunk_pairs=3), ProbeContext(map=recording))
    (fast, chunks, fast_values, _), *rescores = calls
    assert isinstance(fast, PairChunks) and fast.precision == "bfloat16"
    assert all(key.startswith("bfloat16-pairs") for key, _ in chunks)
    assert rescores and all(fn.precision == "model" and group == 3 for fn, _, _, group in rescores)
    shipped = pickle.loads(pickle.dumps(fast))
    assert "_bound" not in shipped.__dict__ and shipped.precision == "bfloat16"
    assert shipped.bind(target, None)(chunks[0][1])["good"] == pytest.approx(fast_values[0]["good"], abs=1e-6)
    exact, units, values, _ = rescores[0]
    assert all(key.startswith("exact-") and len(unit) == 1 for key, unit in units)
    one_by_one = [pickle.loads(pickle.dumps(exact)).bind(target, None)(unit)["good"][0] for _, unit in units]
    assert [v["good"][0] for v in values] == pytest.approx(one_by_one, abs=1e-5)  # grouped: packed across pairs


def test_bfloat16_on_no_more_pairs_than_the_calibration_sample_scores_them_once_in_full_precision(tmp_path, hand_blimp):
    target = tiny_target(tmp_path / "m", task="masked-lm", initializer_range=0.5)
    result = BlimpProbe().run(target, None, BlimpParams(data=str(hand_blimp), precision="bfloat16"), ProbeContext())
    exact = BlimpProbe().run(target, None, BlimpParams(data=str(hand_blimp)), ProbeContext())
    assert result.details["precision"] == "model" and "recheck" not in result.details
    assert result.details["summary"]["precision"].startswith("model's own: 8 pairs, under 3 x the 200")
    assert result.value("forward_passes") == exact.value("forward_passes")  # one pass over the pairs, not two


def test_pairs_with_words_the_tokenizer_maps_to_its_unknown_token_are_counted_and_named(tmp_path, hand_blimp):
    """A PLL over [UNK] reads the unknown token, not the word: the count and a warning naming the words say so,
    instead of an accuracy that looks like any other."""
    words = sorted({w for pair in SENTENCES for s in pair for w in s.split()})
    full = tiny_target(tmp_path / "full", task="masked-lm", words=words)
    clean = BlimpProbe().run(full, None, BlimpParams(data=str(hand_blimp)), ProbeContext())
    assert clean.value("unknown_token_pairs") == 0 and not clean.details.get("warnings")
    lacking = tiny_target(tmp_path / "lacking", task="masked-lm", words=[w for w in words if w not in ("funny", "bird")])
    result = BlimpProbe().run(lacking, None, BlimpParams(data=str(hand_blimp)), ProbeContext())
    assert result.value("unknown_token_pairs") == 2
    assert sorted(result.details["unknown_token_pairs"]) == ["agreement_1/2", "principle_x/1"]
    (warning,) = result.details["warnings"]
    assert warning.startswith("2 pairs hold text the tokenizer maps to its unknown token ('funny', 'bird')")
