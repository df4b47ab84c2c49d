"""cloze / Ettinger 2020: the probe's figures against a plain re-implementation of her scripts
(aetting/lm-diagnostics: proc_datasets.py, access_model.py, prediction_accuracy_tests.py,
sensitivity_tests.py), BPE vocabularies, the NaN rule, bad files, and the built-in arithmetic items."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import SHARED

from bertprobe.errors import DataError
from bertprobe.probe import ProbeContext
from bertprobe.probes.cloze.builtin import FREQUENCY, builtin_items
from bertprobe.probes.cloze.ettinger import ettinger_sets, load_set
from bertprobe.probes.cloze.probe import ClozeParams, ClozeProbe
from bertprobe.testing import tiny_target

ETTINGER = SHARED / "data" / "cloze" / "ettinger2020"
MLM = SHARED / "models" / "minilm-l6-mlm"


# ---- her protocol, written out plainly from her scripts (no bertprobe code) ---------------------
def her_rows(directory: Path) -> dict[str, list[dict]]:
    """Her dataset_ref rows per set: sent (context), tgt, item, cond, exp, constraint/licensing."""
    out: dict[str, list[dict]] = {}
    for path in sorted(directory.glob("*.tsv")):
        if "explanations" in path.name:
            continue
        lines = [ln.strip().split("\t") for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        header, body = lines[0], lines[1:]
        rows: list[dict] = []
        for fields in body:
            f = dict(zip(header, [x.strip() for x in fields]))
            if path.name.startswith("CPRAG"):
                context = " ".join([f["context_s1"], f["context_s2"]])
                for tgt, cond in ((f["expected"], "exp"), (f["within_category"], "wc"), (f["between_category"], "bc")):
                    rows.append(dict(sent=context, tgt=tgt, item=f["item"], cond=cond, exp=[f["expected"]],
                                     constraint=f["constraint"]))
            elif path.name.startswith("ROLE"):
                num, cond = f["item"].split("-")
                rows.append(dict(sent=f["context"], tgt=f["target"].strip().split()[0], item=num, cond=cond,
                                 exp=f["expected"].split("|"), maxcloze=float(fields[3]), tgtcloze=float(fields[5])))
            else:
                aff, neg = f["context_aff"], f["context_neg"]
                if "SIMP" in path.name:
                    aff, neg = re.sub(r" \(.+\)", "", aff), re.sub(r" \(.+\)", "", neg)
                for sent, tgt, cond in ((aff, f["target_aff"], "TA"), (neg, f["target_aff"], "FN"),
                                        (aff, f["target_neg"], "FA"), (neg, f["target_neg"], "TN")):
                    if "SIMP" in path.name:
                        sent = " ".join([sent, "an" if re.match("[aeiou]", tgt) else "a"])
                    rows.append(dict(sent=sent, tgt=tgt, item=f["item"], cond=cond, licensing=f.get("licensing"),
                                     exp=[f["target_aff"]] if cond in ("TA", "FA") else [f["target_neg"]]))
        out[path.stem] = rows
    return out


def her_model_outputs(target, rows: list[dict], k: int = 5) -> tuple[list[list[str]], list[float]]:
    """Per row: the top-k tokens and the target's probability (NaN when the target is no vocabulary token),
    one unbatched full forward pass per row, as access_model.get_predictions / get_probabilities."""
    tok, model = target.tokenizer, target.model
    vocab = tok.get_vocab()
    preds, probs = [], []
    cache: dict[str, torch.Tensor] = {}  # her script reruns a repeated context; the output is the same
    for r in rows:
        if r["sent"] not in cache:
            text = " ".join([tok.cls_token, *r["sent"].split(), tok.mask_token, ".", tok.sep_token])
            tokens = tok.tokenize(text)
            mi = tokens.index(tok.mask_token)
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([tok.convert_tokens_to_ids(tokens)])).logits
            cache[r["sent"]] = torch.softmax(logits[0, mi], 0)
        soft = cache[r["sent"]]
        top = torch.argsort(soft, descending=True)[:k]
        preds.append(tok.convert_ids_to_tokens(top.tolist()))
        probs.append(soft[vocab[r["tgt"]]].item() if r["tgt"] in vocab else math.nan)
    return preds, probs


def her_accuracy(name: str, rows: list[dict], preds: list[list[str]], k: int) -> list[int]:
    scores, used = [], []
    for r, pred in zip(rows, preds):
        pred = pred[:k]
        if name.startswith("ROLE"):
            scores.append(int(any(c.strip() in [e.split()[0] for e in r["exp"]] for c in pred)))
            continue
        if r["sent"] in used:
            continue
        used.append(r["sent"])
        score = int(any(c.strip() in r["exp"] for c in pred))
        if name.startswith("CPRAG") or r["cond"] == "TA":
            scores.append(score)
    return scores


def her_quartiles(rows: list[dict], preds: list[list[str]], k: int) -> dict[str, list[int]]:
    """test_role_acc's accuracy by cloze quartile (numpy's percentile bounds over every row's maxcloze)."""
    clozelist = [r["maxcloze"] for r in rows]
    q1, q2, q3 = (np.percentile(clozelist, q) for q in (25, 50, 75))
    out: dict[str, list[int]] = {"q1": [], "q2": [], "q3": [], "q4": []}
    for r, pred in zip(rows, preds):
        score = int(any(c.strip() in [e.split()[0] for e in r["exp"]] for c in pred[:k]))
        if r["maxcloze"] <= q1:
            out["q1"].append(score)
        elif r["maxcloze"] <= q2:
            out["q2"].append(score)
        elif r["maxcloze"] <= q3:
            out["q3"].append(score)
        else:
            out["q4"].append(score)
    return {q: scores for q, scores in out.items() if scores}  # her get_acc prints 0 for an empty one; ours omits it


def her_sensitivity(name: str, rows: list[dict], probs: list[float]) -> dict[str, list[int]]:
    thresh = 0.01
    items: dict[str, dict[str, tuple[float, dict]]] = {}
    for r, p in zip(rows, probs):
        items.setdefault(r["item"], {})[r["cond"]] = (p, r)
    out: dict[str, list[int]] = {}

    def add(key: str, score: int) -> None:
        out.setdefault(key, []).append(score)

    for conds in items.values():
        if name.startswith("CPRAG"):
            e, w, b = conds["exp"][0], conds["wc"][0], conds["bc"][0]
            cons = conds["exp"][1]["constraint"].lower()
            top = int(e > w and e > b)
            thr = int(top and abs(e - w) > thresh and abs(e - b) > thresh)
            for key, score in (("sensitivity", top), (f"sensitivity_{cons}", top), ("sensitivity_gap", thr),
                               (f"sensitivity_gap_{cons}", thr)):
                add(key, score)
        elif name.startswith("ROLE"):
            a, b = conds["a"][0], conds["b"][0]
            add("sensitivity", int(a > b))
            add("sensitivity_gap", int(a > b and abs(a - b) > thresh))
        else:
            lic = conds["TA"][1].get("licensing")
            for true, false, pol in (("TA", "FA", "aff"), ("TN", "FN", "neg")):
                t, f = conds[true][0], conds[false][0]
                score = int(t > f)
                add("sensitivity", score)
                add(pol, score)
                add("sensitivity_gap", int(t > f and abs(t - f) > thresh))
                add(f"{pol}_gap", int(t > f and abs(t - f) > thresh))
                if lic in ("Y", "N"):
                    natural = "natural" if lic == "Y" else "less_natural"
                    add(natural, score)
                    add(f"{natural}_{pol}", score)
    return out


PREFIX = {"CPRAG": "ettinger_cprag", "ROLE": "ettinger_role", "NEG-136-SIMP": "ettinger_neg_simp",
          "NEG-136-NAT": "ettinger_neg_nat"}


def her_figures(target, directory: Path) -> dict[str, float]:
    """Every figure her scripts print, under the probe's metric names."""
    out: dict[str, float] = {}
    for name, rows in her_rows(directory).items():
        prefix = next(v for k, v in PREFIX.items() if name.startswith(k))
        preds, probs = her_model_outputs(target, rows)
        for k in (1, 5):
            scores = her_accuracy(name, rows, preds, k)
            out[f"{prefix}_top{k}"] = sum(scores) / len(scores)
            if name.startswith("ROLE"):
                for q, scores in her_quartiles(rows, preds, k).items():
                    out[f"{prefix}_top{k}_cloze_{q}"] = sum(scores) / len(scores)
        for key, scores in her_sensitivity(name, rows, probs).items():
            out[f"{prefix}_{key}"] = sum(scores) / len(scores)
        if name.startswith("ROLE"):
            pairs = {}
            for r, p in zip(rows, probs):
                pairs.setdefault(r["item"], {})[r["cond"]] = p
            diffs = [c["a"] - c["b"] for c in pairs.values() if not (math.isnan(c["a"]) or math.isnan(c["b"]))]
            out[f"{prefix}_prob_diff"] = sum(diffs) / len(diffs)
    return out


# ---- fixtures ---------------------------------------------------------------------------------
def set_words(directory: Path) -> list[str]:
    """The words of the sets' targets, expected words and contexts (lowercased, as the tiny tokenizer reads)."""
    words = []
    for rows in her_rows(directory).values():
        for r in rows:
            words += [r["tgt"], *(e.split()[0] for e in r["exp"])]
            words += re.findall(r"[a-z]+", r["sent"].lower())
    return list(dict.fromkeys(words)) + ["a", "an", "."]


def boosted(target, directory: Path, seed: int = 0):
    """Raise the output bias of a random half of the expected words so that top-k hits happen on a random model."""
    gen = torch.Generator().manual_seed(seed)
    vocab = target.tokenizer.get_vocab()
    words = {e.split()[0] for rows in her_rows(directory).values() for r in rows for e in r["exp"]}
    ids = [vocab[w] for w in sorted(words) if w in vocab]
    pick = [i for i, keep in zip(ids, torch.rand(len(ids), generator=gen) < 0.5) if keep]
    with torch.no_grad():
        target.model.get_output_embeddings().bias[pick] += 4.0
    return target


SMALL = {
    "CPRAG-102.tsv": [
        "item\tcontext_s1\tcontext_s2\texpected\twithin_category\tbetween_category\tconstraint",
        "0\tThe cat sat.\tShe was really good at\tchess\tmonopoly\tfootball\tH",
        "1\tHe ran fast.\tHe liked to play\tfootball\tbaseball\tzebra\tL",  # zebra: not in the vocabulary
        "2\tThe dog barked.\tThey went to see a\tgame\tmatch\thot-dog\tH",  # hot-dog: 3 tokens
    ],
    "ROLE-88.tsv": [
        "item\tcontext\texpected\texp_cloze\ttarget\ttgt_cloze\ttgt_cloze(strict)",
        "1-a\tthe cop saw which thief the dog had \tbitten|chased\t0.5\tbitten\t0.5\t0.5",
        "1-b\tthe cop saw which dog the thief had \tseen|met up\t0.4\tbitten\t0\t0",
        "2-a\tthe man knew which game the boy had \tplayed\t0.5\tplayed with\t0.5\t0.5",
        "2-b\tthe man knew which boy the game had \tbored\t0.3\tplayed\t0\t0",
    ],
    "NEG-136-SIMP.tsv": [
        "item\tcontext_aff\tcontext_neg\ttarget_aff\ttarget_neg",
        "0\tA robin is (a|an)\tA robin is not (a|an)\tbird\tinsect",
        "1\tAn ant is (a|an)\tAn ant is not (a|an)\tinsect\ttree",
    ],
    "NEG-136-NAT.tsv": [
        "item\tcontext_aff\tcontext_neg\ttarget_aff\ttarget_neg\tlicensing",
        "0\tTraveling there is very\tTraveling there isn't very\tsafe\tdangerous\tY",
        "1\tThe food is very\tThe food isn't very\tgood\tbad\tN",
        "2\tThe film is very\tThe film isn't very\tgood\tbad\tY",
    ],
}


@pytest.fixture
def small_sets(tmp_path) -> Path:
    folder = tmp_path / "ett"
    folder.mkdir()
    for name, lines in SMALL.items():
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def run_probe(target, folder: Path, **params):
    return ClozeProbe().run(target, None, ClozeParams(sets=(f"ettinger:{folder}",), **params), ProbeContext())


def assert_her_figures(result, target, folder: Path) -> None:
    expected = her_figures(target, folder)
    got = {k: result.value(k) for k in expected}
    assert got == pytest.approx(expected, abs=1e-6)
    ours = {k for k in result.metrics if k.startswith("ettinger_") and not k.startswith("ettinger_rows")}
    assert ours == set(expected)  # no figure of hers missing, none extra


# ---- (a) equal to her scripts ------------------------------------------------------------------
def test_small_sets_equal_her_scripts(tmp_path, small_sets):
    words = [w for w in set_words(small_sets) if w not in ("zebra", "hot-dog")] + ["hot", "-", "dog", "isn", "'", "t"]
    target = boosted(tiny_target(tmp_path / "m", task="masked-lm", words=words, initializer_range=0.5), small_sets)
    result = run_probe(target, small_sets, batch_size=2)  # several batches, mixed lengths
    assert_her_figures(result, target, small_sets)
    assert sum(result.value(f"ettinger_{s}_top5") for s in ("cprag", "role", "neg_simp", "neg_nat")) > 0  # hits happen
    # NEG-SIMP: each row's own article ("a bird", "an insect"), so one item's TA and FA contexts differ
    simp = {(r.item, r.cond): r.context for r in load_set(small_sets / "NEG-136-SIMP.tsv").rows}
    assert simp[("0", "TA")] == "A robin is a" and simp[("0", "FA")] == "A robin is an"
    table = result.details["ettinger"]["CPRAG-102"]
    assert table["contexts"] == 3 and table["rows"] == 9 and table["forward_passes"] == 2


@pytest.mark.skipif(not ETTINGER.is_dir(), reason="../shared Ettinger data not present")
def test_shared_sets_equal_her_scripts(tmp_path):
    words = set_words(ETTINGER)
    target = boosted(tiny_target(tmp_path / "m", task="masked-lm", words=words, initializer_range=0.5), ETTINGER)
    result = run_probe(target, ETTINGER)
    assert_her_figures(result, target, ETTINGER)
    assert result.value("ettinger_rows") == 102 + 88 + 72 + 64
    assert all(0 < result.value(f"ettinger_{s}_sensitivity") < 1 for s in ("cprag", "role", "neg_simp", "neg_nat"))
    assert sum(result.value(f"ettinger_{s}_top5") for s in ("cprag", "role", "neg_simp", "neg_nat")) > 0  # hits happen
    assert result.details["key_finding"].startswith("Ettinger 2020: CPRAG top-5 ")
    assert " | bertprobe's ranking: top-1 accuracy " in result.details["key_finding"]  # whose figure is whose
    assert result.metrics["ettinger_cprag_sensitivity"].ci is not None  # a share with its Wilson interval
    # one row per distinct context: 34 CPRAG contexts read once each, not 102 times
    assert result.details["ettinger"]["CPRAG-102"]["contexts"] == 34
    # her AVG CLOZE DIFF (the humans' side of prob_diff), written out from sensitivity_tests.py
    pairs: dict[str, dict[str, float]] = {}
    for r in her_rows(ETTINGER)["ROLE-88"]:
        pairs.setdefault(r["item"], {})[r["cond"]] = r["tgtcloze"]
    human = result.details["ettinger"]["ROLE-88"]["figures"]["human_cloze_diff"]
    assert human["n"] == 44 and human["value"] == pytest.approx(np.average([c["a"] - c["b"] for c in pairs.values()]))
    figures = result.details["ettinger"]["ROLE-88"]["figures"]
    quartiles = [k for k in figures if k.startswith("top5_cloze_q")]
    assert len(quartiles) >= 3 and sum(figures[k]["n"] for k in quartiles) == 88  # every row in one quartile


# ---- (b) byte-level BPE -----------------------------------------------------------------------
def test_roberta_reads_the_word_start_tokens(tmp_path, small_sets):
    words = [w for w in set_words(small_sets) if w not in ("zebra", "hot-dog")]
    target = tiny_target(tmp_path / "r", task="masked-lm", arch="roberta", words=words, initializer_range=0.5,
                         max_position_embeddings=600)
    result = run_probe(target, small_sets)
    tok = target.tokenizer
    from bertprobe.probes.cloze.ettinger import read_set

    eset = load_set(small_sets / "CPRAG-102.tsv")
    reading = read_set(target, eset)
    row = next(i for i, r in enumerate(eset.rows) if r.item == "0" and r.cond == "exp")
    words = tok(eset.rows[row].context, add_special_tokens=False)["input_ids"]
    ids = [tok.bos_token_id, *words, tok.mask_token_id, *tok(" .", add_special_tokens=False)["input_ids"], tok.eos_token_id]
    assert tok.convert_ids_to_tokens(ids)[-4:] == ["Ġat", "<mask>", "Ġ.", "</s>"]  # her framing, the model's own mask
    with torch.no_grad():
        at = ids.index(tok.mask_token_id)
        soft = target.model(input_ids=torch.tensor([ids])).logits[0, at].softmax(-1)
    assert reading["probs"][row] == pytest.approx(float(soft[tok.convert_tokens_to_ids("Ġchess")]), rel=1e-4)
    top = reading["top"][eset.rows[row].context]
    assert [w for w, _ in top] == [t[1:] if t.startswith("Ġ") else t
                                   for t in tok.convert_ids_to_tokens(soft.topk(5).indices.tolist())]
    assert result.value("ettinger_rows") == 9 + 4 + 8 + 12


# ---- (c) NaN targets are misses, listed with the reason ----------------------------------------
def test_targets_that_are_not_one_token_are_misses_and_listed(tmp_path, small_sets):
    words = [w for w in set_words(small_sets) if w not in ("zebra", "hot-dog")] + ["hot", "-", "dog"]
    target = tiny_target(tmp_path / "m", task="masked-lm", words=words, initializer_range=0.5)
    with torch.no_grad():  # the expected word wins every context: only the missing targets can make a miss
        target.model.get_output_embeddings().bias[target.tokenizer.convert_tokens_to_ids(["chess", "game"])] += 50
    result = run_probe(target, small_sets)
    table = result.details["ettinger"]["CPRAG-102"]
    reasons = {x["word"]: x["reason"] for x in table["not_one_token"]}
    assert reasons == {"zebra": "'zebra' is not in this vocabulary",
                       "hot-dog": "'hot-dog' is 3 tokens in this vocabulary (hot - dog)"}
    outcomes = {o.name: o.as_map() for o in result.outcomes}["ettinger_cprag_sensitivity"]
    assert outcomes == {"CPRAG-102:0": 1.0, "CPRAG-102:1": 0.0, "CPRAG-102:2": 0.0}  # P(exp) > NaN is False
    assert result.value("ettinger_rows_not_one_token") == 2
    assert "2 of 33 rows' targets not one token (misses)" in result.details["key_finding"]


# ---- (d) bad files -------------------------------------------------------------------------------
def test_missing_column_and_unknown_set_name_the_file_and_line(tmp_path, small_sets):
    bad = small_sets / "CPRAG-102.tsv"
    bad.write_text("\n".join(line.rsplit("\t", 1)[0] for line in SMALL["CPRAG-102.tsv"]) + "\n")
    with pytest.raises(DataError, match=r"CPRAG-102.tsv:1: missing column 'constraint'; the header line") as err:
        ettinger_sets([f"ettinger:{small_sets}"])
    assert "\n" not in str(err.value)
    bad.write_text("\n".join(SMALL["CPRAG-102.tsv"][:2] + ["1\ta\tb\tc\td\te\tX"]) + "\n")
    with pytest.raises(DataError, match=r"CPRAG-102.tsv:3: constraint 'X' is not H or L"):
        ettinger_sets([f"ettinger:{bad}"])
    other = small_sets / "FOO-1.tsv"
    other.write_text("item\tx\n")
    with pytest.raises(DataError, match=r"FOO-1.tsv:1: 'FOO-1.tsv' is not one of Ettinger's sets; name it CPRAG-102"):
        ettinger_sets([f"ettinger:{other}"])
    role = small_sets / "ROLE-88.tsv"
    role.write_text("\n".join(SMALL["ROLE-88.tsv"][:2]) + "\n")
    with pytest.raises(DataError, match=r"ROLE-88.tsv:2: item '1-a' has no '1-b' row"):
        ettinger_sets([f"ettinger:{role}"])


def test_a_role_cloze_that_is_no_probability_names_its_line(tmp_path, small_sets):
    role = small_sets / "ROLE-88.tsv"
    role.write_text(role.read_text().replace("\t0.4\t", "\thigh\t"))
    with pytest.raises(DataError, match=r"ROLE-88.tsv:3: exp_cloze 'high' is not a cloze probability; write a number"):
        ettinger_sets([f"ettinger:{role}"])


def test_two_sets_of_one_kind_and_a_file_that_is_not_utf8_are_one_line_errors(tmp_path, small_sets):
    """Her figures are named by the set's kind: a second CPRAG file is refused, not written over the first's; a
    Latin-1 export is named with its line, never a traceback."""
    second = tmp_path / "more"
    second.mkdir()
    (second / "CPRAG-mine.tsv").write_text((small_sets / "CPRAG-102.tsv").read_text())
    with pytest.raises(DataError, match=r"CPRAG-mine.tsv' and '.*CPRAG-102.tsv' are both Ettinger cprag sets") as err:
        ettinger_sets([f"ettinger:{small_sets}", f"ettinger:{second}"])
    assert "\n" not in str(err.value)
    latin = small_sets / "CPRAG-102.tsv"
    latin.write_bytes(latin.read_bytes() + "9\tCaf\u00e9 ol\u00e9.\tShe ordered\tcoffee\ttea\tbeer\tH\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"CPRAG-102.tsv' line \d+: not UTF-8 text"):
        ettinger_sets([f"ettinger:{small_sets}"])


def test_a_bad_ettinger_file_stops_the_run_with_exit_2(tmp_path, small_sets):
    from click.testing import CliRunner

    from bertprobe.cli import main
    from bertprobe.testing import save_tiny_model

    (small_sets / "NEG-136-NAT.tsv").write_text("item\tcontext_aff\tcontext_neg\ttarget_aff\ttarget_neg\n0\ta\tb\tc\td\n")
    mlm = save_tiny_model(tmp_path / "mlm", task="masked-lm")
    suite = tmp_path / "s.yaml"
    suite.write_text(f"suite: ett\nmodel: {{path: '{mlm}', device: cpu}}\nreport: {{dir: '{tmp_path / 'out'}'}}\n"
                     f"probes:\n  - probe: cloze\n    params: {{sets: ['ettinger:{small_sets}']}}\n")
    result = CliRunner().invoke(main, ["run", str(suite)])
    assert result.exit_code == 2, result.output
    assert "NEG-136-NAT.tsv:1: missing column 'licensing'" in result.output


# ---- (e) the arithmetic items ----------------------------------------------------------------------
def test_quantifier_items_are_seeded_valid_and_olmpics_style():
    items = builtin_items(0, 20, ("quantifiers",))
    assert len(items) == 20 and len({it.id for it in items}) == 20
    assert [it.text for it in builtin_items(0, 20, ("quantifiers",))] == [it.text for it in items]
    assert [it.text for it in builtin_items(1, 20, ("quantifiers",))] != [it.text for it in items]
    for it in items:
        assert it.text.count("{mask}") == 1 and it.answers[0] in ("always", "never")
        assert set(it.distractors) == set(FREQUENCY) - set(it.answers)
    every = builtin_items(0, 100, ("quantifiers",))
    chicken = next(it for it in every if it.text == "A chicken {mask} has horns.")
    assert chicken.answers == ("never",) and chicken.distractors == ("always", "sometimes", "often")


def test_counting_failures_show_the_sentence_and_top_predictions(tmp_path):
    from bertprobe.probes.cloze.builtin import NUMBERS, THINGS

    words = ["if", "i", "have", "and", "give", "away", "will", "left", ",", ".", *NUMBERS, *THINGS]
    target = tiny_target(tmp_path / "m", task="masked-lm", words=words, initializer_range=0.5)
    result = ClozeProbe().run(target, None, ClozeParams(sets=("builtin:counting",), findings=0), ProbeContext())
    failures = [i for i in result.details["items"] if i["rank"] != 1]
    assert failures and len(result.findings) == len(failures)  # every counting failure, whatever ``findings``
    f = result.findings[0]
    assert f.input.startswith("If I have ") and "[MASK]" in f.input
    assert re.fullmatch(r"candidates: \w+ [\d.e-]+, \w+ [\d.e-]+; top predictions: (\S+ [\d.e-]+(, )?){5}", f.observed)


# ---- (f) a real masked LM ---------------------------------------------------------------------------
@pytest.mark.skipif(not (MLM.is_dir() and ETTINGER.is_dir()), reason="no English masked LM fixture (minilm-l6-mlm)")
def test_minilm_mlm_on_ettinger_sets():
    from bertprobe.model.loading import load_target
    from bertprobe.model.spec import ModelSpec

    target = load_target(ModelSpec(path=str(MLM), device="cpu"))
    result = run_probe(target, ETTINGER)
    assert result.value("ettinger_rows") == 326
    assert_her_figures(result, target, ETTINGER)  # every figure as her scripts compute it, on the real MLM
    listed = sum(x["rows"] for t in result.details["ettinger"].values() for x in t["not_one_token"])
    assert listed == result.value("ettinger_rows_not_one_token")
