"""cloze: scoring against hand computations on rigged masked LMs, mask mapping, item loaders, aggregation."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import SHARED, only_run

from bertprobe.errors import DataError
from bertprobe.probe import ProbeContext
from bertprobe.probes.cloze.builtin import CATEGORIES, builtin_items
from bertprobe.probes.cloze.items import ClozeItem, load_ettinger, load_item_file
from bertprobe.probes.cloze.probe import ClozeParams, ClozeProbe, ItemOutcome, aggregate
from bertprobe.probes.cloze.scoring import ClozeScorer, candidate_ids, encode_many
from bertprobe.probes.cloze.sets import resolve_sets
from bertprobe.stats import wilson_interval
from bertprobe.testing import WORDS, tiny_target

VOCAB = list(WORDS) + ["tree", "fish", "centi", "##meters", "meters", "kind", "of", "opposite", "hot", "cold"]


def rig(target, choose):
    """Replace the MLM head's output: ``choose(input_ids) -> B x T x V logits``."""
    seen = {}
    target.model.register_forward_pre_hook(lambda m, a, kw: seen.update(ids=kw["input_ids"]), with_kwargs=True)
    target.model.get_output_embeddings().register_forward_hook(lambda m, i, o: choose(seen["ids"]).to(o.dtype))
    return target


@pytest.fixture
def bert_mlm(tmp_path):
    return tiny_target(tmp_path / "mlm", task="masked-lm", words=VOCAB)


def const_logits(target, prefs: dict[str, float]):
    tok = target.tokenizer
    bias = torch.zeros(target.model.config.vocab_size)
    for word, value in prefs.items():
        bias[tok.convert_tokens_to_ids(word)] = value
    return bias, lambda ids: bias.expand(ids.shape[0], ids.shape[1], -1).clone()


def test_single_and_multi_token_scores_match_hand_computation(bert_mlm):
    bias, fn = const_logits(bert_mlm, {"bird": 5.0, "tree": 3.0, "centi": 2.0, "##meters": 1.0})
    rig(bert_mlm, fn)
    logp = bias.log_softmax(-1)
    tok = bert_mlm.tokenizer
    item = ClozeItem("x", "t", "A robin is a {mask}.", ("bird",), ("tree", "centimeters"))
    assert candidate_ids(tok, item, "centimeters") == tok.convert_tokens_to_ids(["centi", "##meters"])
    (scores,) = ClozeScorer(bert_mlm).score([item])
    ids = {w: tok.convert_tokens_to_ids(w) for w in ("bird", "tree", "centi", "##meters")}
    assert scores.answers["bird"] == pytest.approx(float(logp[ids["bird"]]), abs=1e-5)
    assert scores.distractors["tree"] == pytest.approx(float(logp[ids["tree"]]), abs=1e-5)
    assert scores.distractors["centimeters"] == pytest.approx(float(logp[ids["centi"]] + logp[ids["##meters"]]), abs=1e-5)


def test_multi_token_spans_are_scored_left_to_right(bert_mlm):
    tok = bert_mlm.tokenizer
    mask, a, b = tok.mask_token_id, tok.convert_tokens_to_ids("centi"), tok.convert_tokens_to_ids("##meters")
    V = bert_mlm.model.config.vocab_size

    def fn(ids):  # after a [MASK] prefer 'centi', after anything else prefer '##meters'
        out = torch.zeros(ids.shape[0], ids.shape[1], V)
        prev_is_mask = torch.nn.functional.pad(ids[:, :-1] == mask, (1, 0))
        out[..., a] = prev_is_mask.float() * 4
        out[..., b] = (~prev_is_mask).float() * 4
        return out

    rig(bert_mlm, fn)
    item = ClozeItem("x", "t", "It is one hundred {mask}.", ("centimeters",))
    (scores,) = ClozeScorer(bert_mlm).score([item])
    hi = torch.tensor([4.0] + [0.0] * (V - 1)).log_softmax(-1)[0]  # log-prob of the preferred token
    lo = torch.tensor([4.0] + [0.0] * (V - 1)).log_softmax(-1)[1]
    # piece 0 follows 'hundred' (not a mask): lo for 'centi'; piece 1 follows the filled-in 'centi': hi for '##meters'
    # (a joint, all-masked scoring would see a [MASK] before piece 1 and give lo + lo)
    assert scores.answers["centimeters"] == pytest.approx(float(lo + hi), abs=1e-4)


def test_context_independent_model_is_negation_insensitive_and_sensitive_one_is_not(tmp_path):
    items = [
        ClozeItem("p-aff", "neg", "A robin is a {mask}.", ("bird",), ("tree",), pair="p"),
        ClozeItem("p-neg", "neg", "A robin is not a {mask}.", ("tree",), ("bird",), pair="p", negated=True),
    ]
    path = tmp_path / "items.jsonl"
    path.write_text("\n".join(json.dumps({"id": i.id, "category": i.category, "text": i.text, "answers": list(i.answers),
                                          "distractors": list(i.distractors), "pair": i.pair, "negated": i.negated}) for i in items))
    blind = tiny_target(tmp_path / "a", task="masked-lm", words=VOCAB)
    rig(blind, const_logits(blind, {"bird": 5.0})[1])
    r = ClozeProbe().run(blind, None, ClozeParams(sets=(str(path),)), ProbeContext())
    assert r.value("negation_sensitivity") == 0.0 and r.value("pair_accuracy") == 0.5 and r.value("top1_accuracy") == 0.5
    # shares of items (or pairs) carry Wilson intervals, and outcomes that a comparison pairs item by item
    assert r.metrics["top1_accuracy"].ci == pytest.approx(wilson_interval(1, 2))
    assert r.metrics["negation_sensitivity"].ci == pytest.approx(wilson_interval(0, 1))
    assert r.metrics["top1_accuracy_neg"].ci == pytest.approx(wilson_interval(1, 2)) and r.metrics["mrr"].ci is None
    outcomes = {o.name: o for o in r.outcomes}
    assert outcomes["top1_accuracy"].as_map() == {"p-aff": 1.0, "p-neg": 0.0}
    assert outcomes["negation_sensitivity"].as_map() == {"p": 0.0}
    aware = tiny_target(tmp_path / "b", task="masked-lm", words=VOCAB)
    tok = aware.tokenizer
    not_id, bird, tree = (tok.convert_tokens_to_ids(w) for w in ("not", "bird", "tree"))

    def fn(ids):
        out = torch.zeros(ids.shape[0], ids.shape[1], aware.model.config.vocab_size)
        negated = (ids == not_id).any(1)
        out[..., bird] = (~negated).float().view(-1, 1) * 5
        out[..., tree] = negated.float().view(-1, 1) * 5
        return out

    rig(aware, fn)
    r = ClozeProbe().run(aware, None, ClozeParams(sets=(str(path),)), ProbeContext())
    assert r.value("negation_sensitivity") == 1.0 and r.value("pair_accuracy") == 1.0
    assert r.value("top1_accuracy_neg") == 1.0 and r.value("mrr") == 1.0
    assert r.details["key_finding"] == ("top-1 accuracy 1.00; pair accuracy 1.00; negation sensitivity 1.00; "
                                        "weakest category: neg 1.00 (2 items); 2 items in all")
    assert "top5_accuracy" not in r.metrics  # among 2 candidates every answer is in the top 5


def test_a_word_of_your_items_split_into_many_pieces_is_a_warning_and_still_scored(tmp_path):
    """'blorptastically' (blor ##pta ##stic ##ally: 4 pieces) is scored by its span's PLL, and said: a typo scores
    silently otherwise; 'centimeters' (2 pieces) is not named."""
    path = tmp_path / "mine.yaml"
    path.write_text("- {id: a, text: 'A robin is a {mask}.', answers: [bird], distractors: [blorptastically]}\n"
                    "- {id: b, text: 'It is a {mask}.', answers: [centimeters], distractors: [fish]}\n")
    target = tiny_target(tmp_path / "m", task="masked-lm", words=[*VOCAB, "blor", "##pta", "##stic", "##ally"])
    r = ClozeProbe().run(target, None, ClozeParams(sets=(str(path),)), ProbeContext())
    assert r.value("items") == 2 and r.details["long_words"] == {"a": {"blorptastically": 4}}
    (warning,) = r.details["warnings"]
    assert warning.startswith("1 of your items hold a word of 4 or more word pieces in this vocabulary "
                              "(a: 'blorptastically' 4 pieces)")
    builtin = ClozeProbe().run(target, None, ClozeParams(sets=("builtin:units",)), ProbeContext())
    assert "warnings" not in builtin.details  # built-in items are ours to keep in the vocabulary


def test_role_reversals_are_not_counted_as_negation_and_top5_needs_more_than_five_candidates(tmp_path):
    """A role-reversal pair (contrast: roles) has its own reversal_sensitivity, never negation_sensitivity's; top-5
    accuracy counts only items ranked over the vocabulary or over more than 5 candidates."""
    rows = [
        {"id": "n-aff", "category": "neg", "text": "A robin is a {mask}.", "answers": ["bird"], "distractors": ["tree"],
         "pair": "n"},
        {"id": "n-neg", "category": "neg", "text": "A robin is not a {mask}.", "answers": ["tree"],
         "distractors": ["bird"], "pair": "n", "negated": True},
        {"id": "r-a", "category": "roles", "text": "The fish ate the {mask}.", "answers": ["tree"],
         "distractors": ["fish"], "pair": "r", "contrast": "roles"},
        {"id": "r-b", "category": "roles", "text": "The tree was eaten by the {mask}.", "answers": ["fish"],
         "distractors": ["tree"], "pair": "r", "negated": True, "contrast": "roles"},
        {"id": "wide", "category": "wide", "text": "It is a {mask}.", "answers": ["fish"],
         "distractors": ["tree", "bird", "not", "robin", "a"]},
        {"id": "open", "category": "open", "text": "It is a {mask}.", "answers": ["bird"]},
    ]
    path = tmp_path / "items.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    target = tiny_target(tmp_path / "a", task="masked-lm", words=VOCAB)
    tok = target.tokenizer
    not_id, was, bird, tree, fish = (tok.convert_tokens_to_ids(w) for w in ("not", "was", "bird", "tree", "fish"))

    def fn(ids):  # "not" flips bird/tree, "was" (the passive) changes nothing: fish, then tree, then bird
        out = torch.zeros(ids.shape[0], ids.shape[1], target.model.config.vocab_size)
        negated = (ids == not_id).any(1).float().view(-1, 1)
        out[..., bird] = 5 * (1 - negated) + 1
        out[..., tree] = 5 * negated + 2
        out[..., fish] = 3
        return out

    rig(target, fn)
    r = ClozeProbe().run(target, None, ClozeParams(sets=(str(path),)), ProbeContext())
    assert r.value("negation_sensitivity") == 1.0 and r.value("reversal_sensitivity") == 0.0
    outcomes = {o.name: o for o in r.outcomes}
    assert outcomes["negation_sensitivity"].as_map() == {"n": 1.0} and outcomes["reversal_sensitivity"].as_map() == {"r": 0.0}
    # only "wide" (6 candidates; fish ranks 2nd, after bird) and "open" (the vocabulary; bird first) count for top-5
    assert outcomes["top5_accuracy"].as_map() == {"wide": 1.0, "open": 1.0}
    assert r.value("top1_accuracy_wide") == 0.0 and "top5_accuracy_neg" not in r.metrics
    assert "reversal sensitivity 0.00" in r.details["key_finding"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**rows[2], "contrast": "voice"}))
    with pytest.raises(DataError, match="contrast must be one of negation, roles, not 'voice'"):
        ClozeProbe().run(target, None, ClozeParams(sets=(str(bad),)), ProbeContext())


def test_vocabulary_ranking_without_distractors(bert_mlm):
    rig(bert_mlm, const_logits(bert_mlm, {"bird": 5.0, "tree": 4.0, "fish": 3.0})[1])
    items = [ClozeItem("a", "c", "A robin is a {mask}.", ("bird",)), ClozeItem("b", "c", "A pine is a {mask}.", ("fish",))]
    path_items = ClozeScorer(bert_mlm).score(items)
    from bertprobe.probes.cloze.probe import evaluate

    special = set(bert_mlm.tokenizer.all_special_ids)
    first, second = (evaluate(s, bert_mlm.tokenizer, 5, special) for s in path_items)
    assert (first.rank, first.predicted) == (1, "bird")
    assert second.rank == 3 and [w for w, _ in second.top[:3]] == ["bird", "tree", "fish"]
    assert sum(p for _, p in second.top) < 1


def test_mask_mapping_for_wordpiece_and_bpe(tmp_path):
    for arch, mask, bird in (("bert", "[MASK]", "bird"), ("roberta", "<mask>", "Ġbird")):
        target = tiny_target(tmp_path / arch, task="masked-lm", arch=arch)
        tok = target.tokenizer
        assert tok.mask_token == mask
        item = ClozeItem("x", "t", "A robin is a {mask}.", ("bird",))
        assert tok.convert_ids_to_tokens(candidate_ids(tok, item, "bird")) == [bird]
        scorer = ClozeScorer(target)
        ((pre, suf),) = scorer._parts_many([item])
        head, tail = scorer._specials()
        row = head + pre + [tok.mask_token_id] + suf + tail
        at = row.index(tok.mask_token_id)
        assert row.count(tok.mask_token_id) == 1 and tok.convert_ids_to_tokens(row[0]) == tok.cls_token
        assert tok.convert_ids_to_tokens(row[-1]) == tok.sep_token
        assert tok.decode(row[len(head) : at]).strip() == ("a robin is a" if arch == "bert" else "A robin is a")
        assert tok.decode(row[at + 1 : -1]).strip() == "."


def test_unknown_words_are_skipped(bert_mlm):
    items = [ClozeItem("ok", "c", "A robin is a {mask}.", ("bird",)), ClozeItem("unk", "c", "It is {mask}.", ("zebra",))]
    scorer = ClozeScorer(bert_mlm)
    assert scorer.unknown_items(items) == {"unk"}


def test_batched_and_one_by_one_scoring_agree(tmp_path):
    target = tiny_target(tmp_path / "r", task="masked-lm", arch="roberta")
    items = builtin_items(0, 3)
    bars = []

    def progress(iterable, total, desc):
        bars.append((total, desc))
        return iterable

    scorer = ClozeScorer(target, batch_size=16, progress=progress)
    joint = scorer.score(items)
    passes = scorer.passes
    assert len(bars) == 1 and bars[0][0] == passes > 1 and bars[0][1].startswith("cloze (")
    single = scorer.score(items, joint_batching=False)
    assert scorer.passes - passes > passes
    for a, b in zip(joint, single):
        for w in a.answers:
            assert a.answers[w] == pytest.approx(b.answers[w], abs=1e-4)


def test_identical_rows_run_once_and_only_single_mask_rows_keep_the_vocabulary(bert_mlm):
    rows_seen = []
    bert_mlm.model.register_forward_pre_hook(lambda m, a, kw: rows_seen.append(kw["input_ids"].shape[0]), with_kwargs=True)
    tok = bert_mlm.tokenizer
    # two 2-piece candidates: their first-piece rows (both positions masked) are the same input
    item = ClozeItem("x", "t", "It is one hundred {mask}.", ("centimeters",), ("kindmeters",))
    assert len(candidate_ids(tok, item, "kindmeters")) == 2 and candidate_ids(tok, item, "kindmeters")[1] == candidate_ids(tok, item, "centimeters")[1]
    scorer = ClozeScorer(bert_mlm)
    (scores,) = scorer.score([item])
    assert scorer.passes == 1 and rows_seen == [1 + 3]  # single-mask row, shared first piece, two second pieces
    assert scores.vocab_logprobs.shape == (bert_mlm.model.config.vocab_size,)
    alone = {w: ClozeScorer(bert_mlm).score([ClozeItem("y", "t", item.text, (w,))])[0].answers[w] for w in ("centimeters", "kindmeters")}
    twins = ClozeScorer(bert_mlm).score([ClozeItem("a", "t", item.text, ("centimeters",)), ClozeItem("b", "t", item.text, ("kindmeters",))])
    assert torch.equal(twins[0].vocab_logprobs, twins[1].vocab_logprobs)  # one shared row fills both items
    assert torch.allclose(twins[0].vocab_logprobs, scores.vocab_logprobs, atol=1e-5)
    assert scores.answers["centimeters"] == pytest.approx(alone["centimeters"], abs=1e-5)
    assert scores.distractors["kindmeters"] == pytest.approx(alone["kindmeters"], abs=1e-5)
    assert alone["centimeters"] != pytest.approx(alone["kindmeters"], abs=1e-3)


def test_slow_tokenizer_path_tokenizes_like_the_fast_backend(bert_mlm):
    tok = bert_mlm.tokenizer

    class Slow:  # a tokenizer without a Rust backend: only __call__
        is_fast = False

        def __call__(self, texts, add_special_tokens):
            return tok(texts, add_special_tokens=add_special_tokens)

    texts = ["a robin is a", " centimeters", "", " centimeters", "It is."]
    fast = encode_many(tok, texts)
    assert encode_many(Slow(), texts) == fast
    assert fast == [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    assert fast[1] == tok.convert_tokens_to_ids(["centi", "##meters"]) and fast[2] == []


def test_builtin_sets_are_large_seeded_and_valid():
    items = builtin_items(0)
    assert len(CATEGORIES) >= 10
    for cat in CATEGORIES:
        assert sum(it.category == cat for it in items) >= 20, cat
    assert [it.text for it in builtin_items(0)] == [it.text for it in items]
    assert [it.text for it in builtin_items(1)] != [it.text for it in items]
    assert len({it.id for it in items}) == len(items)
    negation = [it for it in items if it.category == "negation"]
    assert sum(it.negated for it in negation) == len(negation) // 2
    from bertprobe.probes.cloze.builtin import NUMBERS

    for it in (i for i in items if i.category == "counting"):
        words = it.text.replace(",", "").split()
        have, give = NUMBERS.index(words[3]), NUMBERS.index(words[8])
        assert it.answers == (NUMBERS[have - give],) and it.distractors == (NUMBERS[have],)


def test_item_files_and_errors(tmp_path):
    y = tmp_path / "mine.yaml"
    y.write_text("- {id: a, text: 'Two plus two is {mask}.', answers: [four], distractors: [five]}\n"
                 "- {id: b, text: 'The sky is {mask}.', answer: blue, category: colours}\n")
    items = load_item_file(y)
    assert [(i.id, i.category, i.answers) for i in items] == [("a", "mine", ("four",)), ("b", "colours", ("blue",))]
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {id: a, text: 'no blank', answers: [x]}\n")
    with pytest.raises(DataError, match=r"bad.yaml: item 1: cloze item 'a': text must contain \{mask\} exactly once"):
        load_item_file(bad)
    bad.write_text("- {id: a, text: '{mask}', answers: [x]}\n- just a string\n")
    with pytest.raises(DataError, match="bad.yaml: item 2: an item must be a mapping"):
        load_item_file(bad)
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_text('{"id": "a", "text": "{mask}", "answers": ["x"]}\n\n{"id": "b", "text": "{mask}", "answers": []}\n')
    with pytest.raises(DataError, match="bad.jsonl:3: cloze item 'b': needs at least one non-empty answer"):
        load_item_file(jsonl)
    bad.write_text("- {id: a, text: '{mask}', answers: [x], colour: red}\n")
    with pytest.raises(DataError, match="unknown field 'colour'"):
        load_item_file(bad)
    with pytest.raises(DataError, match="appears twice"):
        resolve_sets((str(y), str(y)), 0, 20)
    with pytest.raises(DataError, match="did you mean 'counting'"):
        resolve_sets(("builtin:countng",), 0, 20)


ETTINGER = SHARED / "data" / "cloze" / "ettinger2020"


@pytest.mark.skipif(not ETTINGER.is_dir(), reason="../shared Ettinger data not present")
def test_ettinger_loaders():
    simp = load_ettinger(ETTINGER / "NEG-136-SIMP.tsv")
    assert len(simp) == 36 and simp[0].text == "A trout is a {mask}." and simp[1].text == "A trout is not a {mask}."
    assert (simp[0].answers, simp[1].answers, simp[1].negated) == (("fish",), ("tool",), True)
    ant = next(i for i in simp if i.text.startswith("An ant") and not i.negated)
    assert ant.text == "An ant is an {mask}." and ant.answers == ("insect",)
    assert len(load_ettinger(ETTINGER / "NEG-136-NAT.tsv")) == 32
    cprag = load_ettinger(ETTINGER / "CPRAG-102.tsv")
    assert len(cprag) == 34 and cprag[0].answers == ("chess",) and cprag[0].distractors == ("monopoly", "football")
    role = {i.id: i for i in load_ettinger(ETTINGER / "ROLE-88.tsv")}
    assert len(role) == 88
    assert role["role-61-a"].answers == ("interviewed",) and role["role-61-b"].distractors == ("interviewed",)
    assert set(role["role-61-b"].answers) == {"avoided", "hated", "read", "met"}
    assert len(resolve_sets((f"ettinger:{ETTINGER}",), 0, 20)) == 36 + 32 + 34 + 88


def test_aggregate_by_hand():
    def out(pair, negated, rank, pred, pair_ok):
        return ItemOutcome(ClozeItem(f"{pair}{negated}", "c", "{mask}", ("x",), pair=pair, negated=negated), rank, pred, pair_ok, [])

    values = aggregate([out("p", False, 1, "bird", True), out("p", True, 2, "bird", False), out("q", False, 5, "a", None)])
    assert values == pytest.approx({"top1_accuracy": 1 / 3, "top5_accuracy": 1.0, "mrr": (1 + 0.5 + 0.2) / 3,
                                    "pair_accuracy": 0.5, "negation_sensitivity": 0.0})


def test_probe_override_gives_the_classifier_suite_an_mlm(tmp_path, tiny_clf_dir, sst_tsv):
    from click.testing import CliRunner

    from bertprobe.cli import main
    from bertprobe.testing import save_tiny_model

    mlm = save_tiny_model(tmp_path / "mlm", task="masked-lm", arch="roberta")
    suite = tmp_path / "s.yaml"
    suite.write_text(
        f"suite: mixed\nmodel: {{path: '{tiny_clf_dir}', device: cpu}}\ndata: {{path: '{sst_tsv}'}}\n"
        f"report: {{dir: '{tmp_path / 'out'}'}}\nprobes:\n"
        "  - probe: cloze\n    id: on-classifier\n    params: {sets: ['builtin:counting']}\n"
        f"  - probe: cloze\n    id: on-mlm\n    model: {{path: '{mlm}'}}\n    params: {{sets: ['builtin:counting']}}\n"
    )
    result = CliRunner().invoke(main, ["run", str(suite), "--allow-skips"])
    assert result.exit_code == 0, result.output
    _, report = only_run(tmp_path / "out", "mixed")
    skipped, ran = report["probes"]
    assert skipped["status"] == "skipped" and "mlm" in skipped["message"]
    assert ran["status"] == "measured" and ran["metrics"]["items"] == 20 and ran["model"] == "mlm"
    assert "top1_accuracy_counting" in ran["metrics"]


@pytest.mark.parametrize("arch", ["bert", "roberta", "distilbert", "albert"])
def test_projection_only_at_scored_positions_equals_full_logits(tmp_path, arch):
    target = tiny_target(tmp_path / arch, task="masked-lm", arch=arch, initializer_range=0.5)
    from bertprobe.model.masked_scoring import masked_logits

    enc = target.tokenizer(["the movie was good", "a bad film , very bad"], padding=True, return_tensors="pt")
    pos = torch.tensor([2, 4])
    with torch.no_grad():
        full = target.model(**{k: v for k, v in enc.items() if k in ("input_ids", "attention_mask")}).logits
        fast = masked_logits(target.model, enc["input_ids"], enc["attention_mask"], pos)
    torch.testing.assert_close(fast, full[torch.arange(2), pos], atol=1e-5, rtol=1e-4)


def test_cloze_chunks_are_a_sweep_a_worker_can_rebuild(bert_mlm, tmp_path):
    """The chunks of items go through a ``ClozeChunks`` sweep: pickled (model left behind) and rebuilt on
    another copy of the model, it scores a chunk the same; the probe counts the passes its chunks took."""
    import pickle

    from bertprobe.execution import Sweep, map_in_process

    calls = []

    def recording(fn, units, **kw):
        values = map_in_process(fn, units, **kw)
        calls.append((fn, units, values))
        return values

    params = ClozeParams(sets=("builtin",), per_category=3)
    result = ClozeProbe().run(bert_mlm, None, params, ProbeContext(map=recording))
    (sweep, units, values), = calls
    assert isinstance(sweep, Sweep) and all(isinstance(u, tuple) for _, u in units)
    assert result.details["forward_passes"] == sum(v["passes"] for v in values) > 0
    assert len(result.details["items"]) == sum(len(v["rows"]) for v in values)
    shipped = pickle.loads(pickle.dumps(sweep))
    assert "_bound" not in shipped.__dict__
    other = tiny_target(tmp_path / "mlm", task="masked-lm", words=VOCAB)  # the same weights, loaded again
    assert shipped.bind(other, None)(units[0][1]) == values[0]
    from bertprobe.probes.cloze.probe import chunk_rows

    assert chunk_rows(values[0]["rows"]) == chunk_rows(values[0])  # a run recorded before: bare lists of rows


def test_your_own_items_with_words_the_vocabulary_lacks_are_refused_all_at_once(bert_mlm, tmp_path):
    """A word of a user's item file that is the unknown token (a typo, or the wrong model) is refused with every
    such item named; skip_unknown skips and lists them, as the built-in items are skipped where a vocabulary
    lacks a word."""
    from bertprobe.errors import DataError

    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"id": "ok", "text": "A robin is a {mask}.", "answers": ["bird"]},
        {"id": "typo", "text": "It is a {mask}.", "answers": ["brid"], "distractors": ["dog"]},
        {"id": "zoo", "text": "It is a {mask}.", "answers": ["zebra"], "distractors": ["okapi"]}]) + "\n")
    with pytest.raises(DataError) as err:
        ClozeProbe().run(bert_mlm, None, ClozeParams(sets=(str(path),)), ProbeContext())
    message = str(err.value)
    assert "\n" not in message and message.startswith("cloze items: 2 problems")
    assert "item 'typo': 'brid' is the unknown token '[UNK]'" in message
    assert "item 'zoo': 'zebra', 'okapi' are the unknown token" in message and "skip_unknown: true" in message
    result = ClozeProbe().run(bert_mlm, None, ClozeParams(sets=(str(path),), skip_unknown=True), ProbeContext())
    assert result.details["items_skipped_unknown_words"] == ["typo", "zoo"] and result.value("items") == 1
