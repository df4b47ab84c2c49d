"""Token classification (NER): the task, column files, windows, and strict entity scores checked against seqeval."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner
from conftest import SHARED, only_run

from bertprobe.cli import main
from bertprobe.testing import WORDS, save_tiny_model

TAGS = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")


@pytest.fixture(scope="module")
def tagger_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("ner"), task="token-classification", labels=TAGS, seed=2)


def sentences(n: int = 30, seed: int = 3) -> list[tuple[list[str], list[str]]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS[:40]) for _ in range(rng.randint(3, 9))]
        tags = ["O"] * len(words)
        start = rng.randrange(len(words))
        kind = rng.choice(["PER", "LOC"])
        tags[start] = f"B-{kind}"
        if start + 1 < len(words) and rng.random() < 0.5:
            tags[start + 1] = f"I-{kind}"
        out.append((words, tags))
    return out


def write_forms(folder: Path, rows: list[tuple[list[str], list[str]]]) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    uner = folder / "uner.iob2"  # index, word, tag, two more columns; comments with sent_id
    uner.write_text("".join(f"# sent_id = s{i}\n" + "".join(f"{k + 1}\t{w}\t{t}\t-\t-\n" for k, (w, t) in enumerate(zip(ws, ts)))
                            + "\n" for i, (ws, ts) in enumerate(rows)), encoding="utf-8")
    conll = folder / "c03.conll"  # CoNLL-2003: word, POS, chunk, tag; a -DOCSTART- line
    conll.write_text("-DOCSTART- -X- -X- O\n\n" + "".join("".join(f"{w} NN I-NP {t}\n" for w, t in zip(ws, ts)) + "\n"
                                                          for ws, ts in rows), encoding="utf-8")
    jsonl = folder / "rows.jsonl"
    jsonl.write_text("".join(json.dumps({"tokens": ws, "tags": ts}) + "\n" for ws, ts in rows), encoding="utf-8")
    return {"uner": uner, "conll": conll, "jsonl": jsonl}


def run(tmp_path: Path, model: Path, data: Path, probes: str = "  - probe: accuracy\n    params: {bootstrap: 50}\n",
        model_keys: str = "") -> tuple[int, str, dict | None]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    suite = tmp_path / "ner.yaml"
    suite.write_text(f"suite: ner\nmodel: {{path: '{model}', device: cpu{model_keys}}}\ndata: {{path: '{data}'}}\n"
                     f"report: {{dir: '{tmp_path / 'out'}', formats: [json]}}\nprobes:\n{probes}", encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(suite)])
    if result.exit_code not in (0, 1):
        return result.exit_code, result.output, None
    return result.exit_code, result.output, only_run(tmp_path / "out", "ner")[1]


def test_entity_scores_equal_seqeval_strict_iob2():
    seqeval = pytest.importorskip("seqeval.metrics.v1")
    from seqeval.scheme import IOB2

    from bertprobe.tasks.entities import entity_scores, sentence_counts

    rng = random.Random(0)
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
    golds = [[rng.choice(tags) for _ in range(rng.randint(1, 12))] for _ in range(400)]
    preds = [[rng.choice(tags) for _ in g] for g in golds]  # orphan I- tags included: strict drops them
    got = entity_scores([sentence_counts(g, p) for g, p in zip(golds, preds)])
    p, r, f, s = seqeval.precision_recall_fscore_support(golds, preds, average="micro", mode="strict", scheme=IOB2)
    assert (got["precision"], got["recall"], got["f1"]) == pytest.approx((p, r, f), abs=1e-9)
    p, r, f, s = seqeval.precision_recall_fscore_support(golds, preds, average=None, mode="strict", scheme=IOB2)
    for i, kind in enumerate(["LOC", "ORG", "PER"]):
        row = got["per_type"][kind]
        assert (row["precision"], row["recall"], row["f1"], row["support"]) == pytest.approx((p[i], r[i], f[i], s[i]), abs=1e-9)


def test_schemes_convert_through_spans():
    from bertprobe.tasks.entities import convert, detect_scheme, spans

    bioes = ["B-PER", "I-PER", "E-PER", "S-LOC", "O", "B-ORG", "E-ORG"]
    iob2 = convert(bioes, "BIOES", "IOB2")
    assert iob2 == ["B-PER", "I-PER", "I-PER", "B-LOC", "O", "B-ORG", "I-ORG"]
    assert convert(iob2, "IOB2", "BIOES") == bioes and detect_scheme(bioes) == "BIOES"
    iob1 = ["I-PER", "I-PER", "B-PER", "O", "I-LOC"]  # B- only between two adjacent entities of one type
    assert detect_scheme(iob1) == "IOB1" and spans(iob1, "IOB1") == [(0, 2, "PER"), (2, 3, "PER"), (4, 5, "LOC")]
    assert convert(iob1, "IOB1", "IOB2") == ["B-PER", "I-PER", "B-PER", "O", "B-LOC"]
    assert spans(["O", "I-PER", "I-PER"], "IOB2") == []  # strict IOB2: an orphan I- starts nothing


def test_the_four_data_forms_give_identical_reports(tmp_path, tagger_dir, monkeypatch):
    """UNER's .iob2, CoNLL-2003's .conll, JSONL and a hub dataset (tokens and a ClassLabel sequence of tags,
    whose names come from the feature; served here without the network) give the same report."""
    import datasets

    from bertprobe.data import tables

    rows = sentences()
    forms: dict[str, Any] = dict(write_forms(tmp_path / "data", rows))
    names = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]  # another order than the model's: mapped by name
    hub = datasets.Dataset.from_dict(
        {"tokens": [w for w, _ in rows], "ner_tags": [[names.index(t) for t in ts] for _, ts in rows]},
        features=datasets.Features({"tokens": datasets.Sequence(datasets.Value("string")),
                                    "ner_tags": datasets.Sequence(datasets.ClassLabel(names=names))}))
    monkeypatch.setattr(tables, "_read_hub", lambda spec: hub)
    forms["hub"] = "someone/ner-sentences"
    seen = []
    for name, path in forms.items():
        code, output, report = run(tmp_path / name, tagger_dir, path)
        assert report is not None, output
        assert report["models"][0]["task"] == "token-classification"
        seen.append({k: v for k, v in report["probes"][0]["metrics"].items()})
    assert seen[0] == seen[1] == seen[2] == seen[3] and seen[0]["examples"] == 30


def test_the_fixtures_numbers_equal_seqeval_on_a_tiny_model(tmp_path, tagger_dir):
    """Entity P/R/F1 of the probe equal seqeval's strict IOB2 on the model's own per-word predictions."""
    seqeval = pytest.importorskip("seqeval.metrics.v1")
    import transformers
    from seqeval.scheme import IOB2

    rows = sentences(40, seed=9)
    code, output, report = run(tmp_path, tagger_dir, write_forms(tmp_path / "d", rows)["uner"])
    assert report is not None, output
    tok = transformers.AutoTokenizer.from_pretrained(tagger_dir)
    net = transformers.AutoModelForTokenClassification.from_pretrained(tagger_dir).eval()
    preds = []
    for words, _ in rows:  # first sub-token of each word, one sentence at a time
        enc = tok(words, is_split_into_words=True, return_tensors="pt")
        with torch.no_grad():
            logits = net(**enc).logits[0]
        first = {}
        for pos, w in enumerate(enc.word_ids()):
            if w is not None and w not in first:
                first[w] = pos
        preds.append([TAGS[int(logits[first[w]].argmax())] for w in range(len(words))])
    golds = [tags for _, tags in rows]
    p, r, f, _ = seqeval.precision_recall_fscore_support(golds, preds, average="micro", mode="strict", scheme=IOB2)
    metrics = report["probes"][0]["metrics"]
    assert (metrics["entity_precision"], metrics["entity_recall"], metrics["entity_f1"]) == pytest.approx((p, r, f), abs=1e-9)


def test_a_long_sentence_is_predicted_in_windows_and_every_word_gets_its_own(tagger_dir):
    from bertprobe.model.loading import load_target
    from bertprobe.model.spec import ModelSpec
    from bertprobe.model.word_logits import _plan, word_logits

    long = [random.Random(1).choice(WORDS[:40]) for _ in range(40)]
    short = long[:6]
    narrow = load_target(ModelSpec(path=str(tagger_dir), device="cpu", max_length=16))
    wide = load_target(ModelSpec(path=str(tagger_dir), device="cpu", max_length=128))
    got = word_logits(narrow, [long, short], stride=4)
    assert got.windowed == 1 and got.logits[0].shape[0] == 40 and got.words_without_tokens == 0
    torch.testing.assert_close(got.logits[1], word_logits(wide, [short]).logits[0], atol=1e-5, rtol=1e-5)  # one window
    # each word's logits are those of the window holding its first sub-token most centrally, run alone
    tok = narrow.tokenizer
    enc = tok(long, is_split_into_words=True, add_special_tokens=False)
    ids, word_ids = enc["input_ids"], enc.word_ids()
    plan = _plan(len(ids), 14, 4)
    assert len(plan) > 1 and plan[0][0] == 0 and plan[-1][1] == len(ids)
    for w in (0, 17, 39):
        f = word_ids.index(w)
        k = max((k for k, (a, b) in enumerate(plan) if a <= f < b), key=lambda k: min(f - plan[k][0], plan[k][1] - 1 - f))
        a, b = plan[k]
        window = torch.tensor([[tok.cls_token_id, *ids[a:b], tok.sep_token_id]])
        with torch.no_grad():
            alone = narrow.model(input_ids=window, attention_mask=torch.ones_like(window)).logits[0, 1 + f - a]
        torch.testing.assert_close(got.logits[0][w], alone, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("body, suffix, expected", [
    ("1\tAnna\tB-PERSON\t-\t-\n2\tsings\tO\t-\t-\n", ".iob2",
     ["'B-PERSON'", "line 1 of", "did you mean B-PER?", "--label-map B-PERSON=B-PER"]),
    ("1\tAnna\tB-PER\t-\t-\n2\tsings\n", ".iob2", ["line 2 of", "column"]),
])
def test_a_bad_tag_or_line_is_one_line_naming_file_and_line_before_any_model_loads(tmp_path, tagger_dir, body, suffix,
                                                                                   expected):
    data = tmp_path / f"bad{suffix}"
    data.write_text(body, encoding="utf-8")
    code, output, _ = run(tmp_path, tagger_dir, data)
    line = output.strip().splitlines()[-1]
    assert code == 2 and all(e in line for e in expected), output
    assert not (tmp_path / "out").exists()


def test_probes_that_do_not_read_tags_are_refused_before_loading(tmp_path, tagger_dir):
    path = write_forms(tmp_path / "d", sentences(6))["uner"]
    code, output, _ = run(tmp_path, tagger_dir, path, "  - probe: accuracy\n  - probe: backdoor-scan\n")
    assert code == 2 and "does not support token-classification" in output
    assert "probes that support token-classification: accuracy, attention-audit, behaviour, calibration, head-pruning, slices, syntax-heads" in output


@pytest.mark.reproduction
@pytest.mark.skipif(not (SHARED / "models" / "minilm-l6-uner").is_dir(), reason="../shared UNER fixture not present")
def test_the_ner_suite_reproduces_the_fixtures_test_f1_and_seqeval(tmp_path, monkeypatch):
    """suites/ner.yaml on UNER English-EWT test: entity F1 0.723 (PER 0.848, LOC 0.726, ORG 0.515), as the
    fixture's README reports, equal to seqeval's strict IOB2 on the same predictions; ORG recall below 0.5 fails
    the default per-type gate, so the decision is do not ship."""
    monkeypatch.setenv("BERTPROBE_NER_MODEL", str(SHARED / "models" / "minilm-l6-uner"))
    monkeypatch.setenv("BERTPROBE_NER_DATA", str(SHARED / "data" / "uner" / "en_ewt-ud-test.iob2"))
    monkeypatch.setenv("BERTPROBE_DEVICE", "cpu")
    suite = Path(__file__).resolve().parents[1] / "suites" / "ner.yaml"
    result = CliRunner().invoke(main, ["run", str(suite), "--out", str(tmp_path), "--set", "report.formats=[json]",
                                       "--set", "probes.behaviour.params.max_examples=150"])
    assert result.exit_code == 1, result.output
    _, report = only_run(tmp_path, "ner")
    metrics = report["probes"][0]["metrics"]
    assert metrics["entity_f1"] == pytest.approx(0.723, abs=5e-4) and metrics["examples"] == 2077
    assert metrics["f1_PER"] == pytest.approx(0.848, abs=5e-4) and metrics["f1_ORG"] == pytest.approx(0.515, abs=5e-4)
    assert "recall_ORG" in result.output and "do not ship" in result.output
    by_probe = {p["probe"]: p for p in report["probes"]}
    behaviour, trigger = by_probe["behaviour"]["metrics"], by_probe["universal-trigger"]["metrics"]
    # the fixture is uncased: case edits cannot change a prediction; typos and swaps do
    assert behaviour["failure_rate.test.lowercase"] == 0 and behaviour["failure_rate.test.uppercase"] == 0
    assert behaviour["failure_rate.test.typo"] > 0.1 and behaviour["failure_rate.test.swap_organisation"] > 0.5
    recall = by_probe["behaviour"]["details"]["fairness"]["person_origin"]["recall"]
    assert len(recall) == 5 and behaviour["fairness_gap.person_origin"] > 0.1  # the gap gates by default
    assert trigger["accuracy_after"] < trigger["accuracy_before"] - 0.05  # the phrase suppresses organisations


@pytest.mark.reproduction
@pytest.mark.skipif(not (SHARED / "models" / "minilm-l6-uner").is_dir(), reason="../shared UNER fixture not present")
def test_int8_against_fp32_pairs_entity_f1_and_behaviour_failure_rates(tmp_path, monkeypatch):
    """suites/ner-int8.yaml on 80 UNER test sentences: the int8 build's entity F1 and behaviour failure rates are
    paired with fp32's sentence by sentence; the paired difference of entity F1 equals the difference of the
    two F1 values, and its interval covers it."""
    monkeypatch.setenv("BERTPROBE_NER_MODEL", str(SHARED / "models" / "minilm-l6-uner"))
    monkeypatch.setenv("BERTPROBE_NER_DATA", str(SHARED / "data" / "uner" / "en_ewt-ud-test.iob2"))
    monkeypatch.setenv("BERTPROBE_NER_LIMIT", "80")  # int8-dynamic is slow on AVX2-only CPUs: keep the check small
    monkeypatch.setenv("BERTPROBE_NER_BEHAVIOUR_EXAMPLES", "20")
    suite = Path(__file__).resolve().parents[1] / "suites" / "ner-int8.yaml"
    result = CliRunner().invoke(main, ["run", str(suite), "--out", str(tmp_path), "--set", "report.formats=[json,markdown]"])
    assert result.exit_code in (0, 1, 4), result.output  # 4: int8 may replace fp32, sharing fp32's misses
    run_dir, report = only_run(tmp_path, "ner-int8")
    paired = {(d["probe_id"], d["metric"]): d for d in report["paired"] if d["model"] == "int8"}
    f1 = paired[("accuracy", "entity_f1")]
    values = {p["model"]: p["metrics"]["entity_f1"] for p in report["probes"] if p["probe"] == "accuracy"}
    assert f1["delta"] == pytest.approx(values["int8"] - values["fp32"], abs=1e-9) and f1["paired"] == 80
    assert f1["ci"][0] <= f1["delta"] <= f1["ci"][1]
    assert any(probe == "behaviour" and metric.startswith("failure_rate.test.") for probe, metric in paired)
    assert "## Paired differences against fp32" in (run_dir / "report.md").read_text()


def test_calibration_and_slices_read_entities(tmp_path, tagger_dir):
    import numpy as np

    from bertprobe.probes.calibration.metrics import ece_parts
    from bertprobe.tasks.entities import spans

    rows = sentences(40, seed=5)
    path = write_forms(tmp_path / "d", rows)["uner"]
    code, output, report = run(tmp_path, tagger_dir, path, "  - probe: accuracy\n    params: {bootstrap: 20}\n"
                               "  - probe: calibration\n    params: {bootstrap: 0}\n  - probe: slices\n    params: {min_size: 2}\n")
    assert report is not None, output
    accuracy, calibration, slices = report["probes"]
    assert "error" not in (calibration["status"], slices["status"]), (calibration["message"], slices["message"])
    # entity-level ECE recomputed from an independent forward pass (first sub-token per word)
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(tagger_dir)
    net = transformers.AutoModelForTokenClassification.from_pretrained(tagger_dir).eval()
    conf, right, exact = [], [], []
    for words, tags in rows:
        enc = tok(words, is_split_into_words=True, return_tensors="pt")
        with torch.no_grad():
            probs = net(**enc).logits[0].softmax(-1)
        first = [enc.word_ids().index(w) for w in range(len(words))]
        p = probs[first]
        pred = [TAGS[int(i)] for i in p.argmax(-1)]
        truth = set(spans(tags))
        for a, b, kind in spans(pred):
            conf.append(float(p[a:b].max(-1).values.mean()))
            right.append(float((a, b, kind) in truth))
        exact.append(float(set(spans(pred)) == truth))
    if conf:
        expected = ece_parts(np.array(conf), np.array(right), 15)["ece"]
        assert calibration["metrics"]["ece"] == pytest.approx(expected, abs=1e-6)
    assert slices["metrics"]["accuracy"] == pytest.approx(np.mean(exact), abs=1e-9)
    assert accuracy["metrics"]["sentence_exact_match"] == pytest.approx(np.mean(exact), abs=1e-9)
    names = {s["name"] for s in slices["details"]["slices"]}
    assert {"gold has PER", "gold has LOC"} <= names and all("entity_f1" in s for s in slices["details"]["slices"])


def test_head_pruning_on_a_ner_model_reads_entities(tmp_path, tagger_dir):
    seqeval = pytest.importorskip("seqeval.metrics.v1")
    from seqeval.scheme import IOB2

    from bertprobe.data import DataSpec
    from bertprobe.data.conll import read_conll
    from bertprobe.model.interventions import head_intervention
    from bertprobe.model.loading import load_target
    from bertprobe.model.spec import ModelSpec
    from bertprobe.probe import ProbeContext
    from bertprobe.probes.head_pruning.params import HeadParams
    from bertprobe.probes.head_pruning.probe import HeadPruningProbe

    rows = sentences(20, seed=11)
    target = load_target(ModelSpec(path=str(tagger_dir), device="cpu"))
    data = target.task.read_labels(read_conll(write_forms(tmp_path, rows)["uner"]), DataSpec(), "ner")
    result = HeadPruningProbe().run(target, data, HeadParams(bootstrap=20, step=0.5, layers=False), ProbeContext(seed=1))
    assert result.details["metric"] == "entity_f1"

    def f1(mask=None) -> float:  # seqeval on the first sub-token of each word, with the heads masked
        preds = []
        for words, _ in rows:
            enc = target.tokenizer(words, is_split_into_words=True, return_tensors="pt")
            with torch.no_grad(), head_intervention(target.model, target.attention_sites(), mask=mask):
                logits = target.model(**enc).logits[0]
            first = [enc.word_ids().index(w) for w in range(len(words))]
            preds.append([TAGS[int(i)] for i in logits[first].argmax(-1)])
        return seqeval.precision_recall_fscore_support([t for _, t in rows], preds, average="micro", mode="strict",
                                                       scheme=IOB2)[2]

    assert result.value("baseline") == pytest.approx(f1(), abs=1e-9)
    row = result.details["ablation"][1]
    mask = torch.ones(len(target.attention_sites()), target.attention_sites()[0].num_heads)
    mask[row["layer"], row["head"]] = 0
    assert row["delta"] == pytest.approx(f1(mask) - f1(), abs=1e-9)


def test_strict_bioes_spans_equal_seqeval_and_an_unended_entity_is_none():
    scheme = pytest.importorskip("seqeval.scheme")

    from bertprobe.tasks.entities import spans

    assert spans(["B-PER", "I-PER", "S-LOC"], "BIOES") == [(2, 3, "LOC")]  # B- never ended by E-: dropped
    assert spans(["B-PER", "O", "B-LOC", "E-LOC"], "BIOES") == [(2, 4, "LOC")]
    rng = random.Random(0)
    tags = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "E-LOC", "S-LOC", "I-LOC"]
    for _ in range(2000):
        seq = [rng.choice(tags) for _ in range(rng.randint(1, 10))]
        expected = {(e.start, e.end, e.tag) for e in scheme.Entities([seq], scheme.IOBES).entities[0]}
        assert set(spans(seq, "BIOES")) == expected, seq


def test_entity_suppression_goal_reads_words_where_the_tagger_does(tmp_path, tagger_dir):
    """The trigger search's readout (first sub-token of each word in the spliced encoding, shifted by the
    trigger) gives the same tags as the word-level prediction path; the loss is CE toward O at the entities'
    words; the probe's recall before the trigger equals the strict recall computed from those predictions."""
    import torch.nn.functional as F

    from bertprobe.model.loading import load_target
    from bertprobe.model.spec import ModelSpec
    from bertprobe.probes.attacks.entity_goal import EntityGoal, word_firsts

    target = load_target(ModelSpec(path=str(tagger_dir), device="cpu"))
    words = ["the", "brilliant", "movie", "unwatchable", "actor", "."]
    enc = target.tokenizer(words, is_split_into_words=True)
    expected = [enc.word_ids().index(w) for w in range(len(words))]
    assert list(word_firsts(target.tokenizer, " ".join(words), words, 64)) == expected
    assert word_firsts(target.tokenizer, " ".join(words), words, 4)[-1] == -1  # cut by truncation
    tags = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")
    goal = EntityGoal("PER", 0, tags, "IOB2", (tuple(expected),), (((1, 3, "PER"),),), 2)
    logits = torch.randn(1, len(enc["input_ids"]) + 2, len(tags))
    positions = [expected[1] + 2, expected[2] + 2]
    manual = F.cross_entropy(logits[0, positions], torch.zeros(2, dtype=torch.long)).item()
    assert goal.objective(logits, (0,)).item() == pytest.approx(manual, rel=1e-6)
    # the same logits flattened as the scorer passes them: [triggers * rows, seq * tags]
    assert goal.objective(logits.reshape(1, -1), (0,)).item() == pytest.approx(manual, rel=1e-6)
    logits[0, positions[0], 1], logits[0, positions[1], 2] = 50.0, 50.0  # B-PER I-PER: found
    assert goal.found(logits[0], 0, 2) == [True] and not goal.hit(logits, (0,)).item()
    logits[0, positions[1], 0] = 100.0  # the second word read as O: the exact span is lost
    assert goal.found(logits[0], 0, 2) == [False] and goal.hit(logits, (0,)).item()

    rows = sentences(60, seed=8)
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"id": f"s{i}", "tokens": w, "tags": t}) + "\n" for i, (w, t) in enumerate(rows)),
                    encoding="utf-8")
    probes = ("  - probe: universal-trigger\n    params: {target_label: PER, length: 2, candidates: 3, iterations: 1,"
              " search_fraction: 0.5}\n")
    code, output, report = run(tmp_path / "r", tagger_dir, path, probes)
    assert report is not None, output
    metrics = report["probes"][0]["metrics"]
    assert report["probes"][0]["details"]["target_label"] == "PER"
    (run_dir,) = (tmp_path / "r" / "out").glob("ner-*")
    outcomes = {r["name"]: r for r in map(json.loads, (run_dir / "outcomes.jsonl").read_text().splitlines())}
    assert len(outcomes["correct_before"]["values"]) == metrics["entities_held_out"] > 0
    assert sum(outcomes["correct_after"]["values"]) / metrics["entities_held_out"] == pytest.approx(metrics["accuracy_after"])
    # the held-out recall before the trigger, from the word-level prediction path on the same sentences
    from bertprobe.data.dataset import Dataset, Example
    from bertprobe.model.predictions import predict_directly
    from bertprobe.tasks.entities import spans

    held = list(dict.fromkeys(i.split(":")[0] for i in outcomes["correct_before"]["ids"]))
    chosen = [rows[int(i[1:])] for i in held]
    examples = [Example(" ".join(w), words=tuple(w)) for w, _ in chosen]
    logits = predict_directly(target, Dataset(examples)).logits
    found = gold = 0
    for (w, t), lg in zip(chosen, logits):
        g = {s for s in spans(t) if s[2] == "PER"}
        p = set(spans([tags[k] for k in lg[: len(t)].argmax(-1).tolist()]))
        found, gold = found + len(g & p), gold + len(g)
    assert gold == metrics["entities_held_out"] and found / gold == pytest.approx(metrics["accuracy_before"])
