"""Multi-label classifiers: audited with a sigmoid per label, every number checked against scikit-learn."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from conftest import only_run

from bertprobe.cli import main
from bertprobe.testing import WORDS, save_tiny_model

sklearn_metrics = pytest.importorskip("sklearn.metrics")

LABELS = ("toxic", "insult", "threat")


@pytest.fixture(scope="module")
def tagger_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A seeded tiny multi-label tagger whose logits lie far from the 0.5 threshold (scaled classifier)."""
    from safetensors.torch import load_file, save_file

    path = save_tiny_model(tmp_path_factory.mktemp("tagger"), task="multi-label", labels=LABELS, seed=3)
    weights = load_file(str(path / "model.safetensors"))
    weights = {k: (v * 40 if k.startswith("classifier.") else v) for k, v in weights.items()}
    save_file(weights, str(path / "model.safetensors"), metadata={"format": "pt"})
    return path


def label_rows(n: int = 60, seed: int = 5) -> list[tuple[str, list[str]]]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        text = " ".join(rng.choice(WORDS[:40], size=int(rng.integers(3, 9))))
        labels = [name for name in LABELS if rng.random() < 0.4]
        rows.append((f"{text} {i}", labels))
    return rows


def write_formats(folder: Path, rows: list[tuple[str, list[str]]]) -> dict[str, tuple[Path, str]]:
    """The same label sets as a JSONL list, a delimited CSV column and 0/1 columns; data keys for each."""
    jsonl = folder / "sets.jsonl"
    jsonl.write_text("".join(json.dumps({"text": t, "labels": labels}) + "\n" for t, labels in rows), encoding="utf-8")
    csv = folder / "sets.csv"
    csv.write_text("text,labels\n" + "".join(f"{t},\"{'|'.join(labels)}\"\n" for t, labels in rows), encoding="utf-8")
    wide = folder / "wide.csv"
    wide.write_text("text," + ",".join(LABELS) + "\n"
                    + "".join(f"{t}," + ",".join(str(int(n in labels)) for n in LABELS) + "\n" for t, labels in rows),
                    encoding="utf-8")
    return {"jsonl": (jsonl, "label: labels"), "delimited": (csv, "label: labels, label_sep: '|'"), "columns": (wide, "")}


def run_suite(tmp_path: Path, model: Path, data: Path, data_keys: str, probes: str, name: str = "ml",
              model_keys: str = "", args: tuple[str, ...] = ()) -> tuple[int, str, dict | None]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    suite = tmp_path / f"{name}.yaml"
    extra = f", {data_keys}" if data_keys else ""
    suite.write_text(f"suite: {name}\nmodel: {{path: '{model}', device: cpu{model_keys}}}\n"
                     f"data: {{path: '{data}'{extra}}}\nreport: {{dir: '{tmp_path / 'out'}'}}\nprobes:\n{probes}",
                     encoding="utf-8")
    result = CliRunner().invoke(main, ["run", str(suite), *args])
    if result.exit_code not in (0, 1):
        return result.exit_code, result.output, None
    return result.exit_code, result.output, only_run(tmp_path / "out", name)[1]


def direct_probabilities(model: Path, texts: list[str]) -> np.ndarray:
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(model)
    net = transformers.AutoModelForSequenceClassification.from_pretrained(model).eval()
    with torch.no_grad():
        return np.concatenate([torch.sigmoid(net(**tok([t], return_tensors="pt")).logits).numpy() for t in texts])


def test_every_metric_equals_scikit_learn_on_the_same_probabilities():
    from bertprobe.tasks.labelset_metrics import label_set_metrics

    rng = np.random.default_rng(0)
    gold = (rng.random((200, 5)) < 0.3).astype(int)
    gold[:7] = 0  # empty label sets are legal
    probs = np.clip(gold * 0.35 + rng.random((200, 5)) * 0.65, 0, 1).round(2)  # rounded: ties to average
    pred = (probs >= 0.5).astype(int)
    got = label_set_metrics(probs, pred, gold)
    for average in ("micro", "macro", "weighted"):
        assert got[f"{average}_f1"] == pytest.approx(sklearn_metrics.f1_score(gold, pred, average=average, zero_division=0), abs=1e-9)
    assert got["subset_accuracy"] == pytest.approx(sklearn_metrics.accuracy_score(gold, pred), abs=1e-9)
    assert got["hamming_loss"] == pytest.approx(sklearn_metrics.hamming_loss(gold, pred), abs=1e-9)
    p, r, f, s = sklearn_metrics.precision_recall_fscore_support(gold, pred, zero_division=0)
    np.testing.assert_allclose(got["precision"], p, atol=1e-9)
    np.testing.assert_allclose(got["recall"], r, atol=1e-9)
    np.testing.assert_allclose(got["f1"], f, atol=1e-9)
    np.testing.assert_array_equal(got["support"], s)
    for c in range(5):
        assert got["roc_auc"][c] == pytest.approx(sklearn_metrics.roc_auc_score(gold[:, c], probs[:, c]), abs=1e-9)
        assert got["average_precision"][c] == pytest.approx(
            sklearn_metrics.average_precision_score(gold[:, c], probs[:, c]), abs=1e-9)
    constant = label_set_metrics(probs[:, :1], pred[:, :1], np.zeros((200, 1), dtype=int))
    assert constant["roc_auc"] == [None] and constant["average_precision"] == [None]  # undefined, not a number


def test_a_multi_label_model_is_audited_with_a_sigmoid_and_its_numbers_match_scikit_learn(tmp_path, tagger_dir):
    rows = label_rows()
    data, keys = write_formats(tmp_path, rows)["jsonl"]
    code, output, report = run_suite(tmp_path, tagger_dir, data, keys,
                                     "  - probe: accuracy\n    params: {bootstrap: 200}\n  - probe: calibration\n"
                                     "    params: {bootstrap: 50}\n  - probe: slices\n")
    assert report is not None, output
    assert report["models"][0]["task"] == "multi-label"
    accuracy, calibration, slices = report["probes"]
    metrics = dict(accuracy["metrics"])
    probs = direct_probabilities(tagger_dir, [t for t, _ in rows])
    assert np.abs(probs - 0.5).min() > 1e-3  # the fixture's premise: no decision rests on float noise
    gold = np.array([[int(n in labels) for n in LABELS] for _, labels in rows])
    pred = (probs >= 0.5).astype(int)
    assert metrics["micro_f1"] == pytest.approx(sklearn_metrics.f1_score(gold, pred, average="micro", zero_division=0), abs=1e-9)
    assert metrics["macro_f1"] == pytest.approx(sklearn_metrics.f1_score(gold, pred, average="macro", zero_division=0), abs=1e-9)
    assert metrics["subset_accuracy"] == pytest.approx(sklearn_metrics.accuracy_score(gold, pred), abs=1e-9)
    assert metrics["hamming_loss"] == pytest.approx(sklearn_metrics.hamming_loss(gold, pred), abs=1e-9)
    for c, name in enumerate(LABELS):
        assert metrics[f"roc_auc_{name}"] == pytest.approx(sklearn_metrics.roc_auc_score(gold[:, c], probs[:, c]), abs=1e-6)
        assert metrics[f"support_{name}"] == gold[:, c].sum()
    assert accuracy["metric_info"]["micro_f1"]["ci"][0] <= metrics["micro_f1"] <= accuracy["metric_info"]["micro_f1"]["ci"][1]
    # recall's outcome covers the label's gold texts only, so a paired gate compares two builds on them
    (run_dir,) = (tmp_path / "out").glob("ml-*")
    outcomes = {r["name"]: r for r in map(json.loads, (run_dir / "outcomes.jsonl").read_text().splitlines())
                if r["id"] == "accuracy"}
    threat = outcomes["recall_threat"]
    assert len(threat["ids"]) == gold[:, 2].sum() and np.mean(threat["values"]) == pytest.approx(metrics["recall_threat"])
    assert accuracy["metric_info"]["recall_threat"]["outcome"] == "recall_threat"
    assert "accuracy" not in metrics  # never a softmax top-1 accuracy
    # calibration: each label's probability is a binary forecast, pooled over every (example, label) pair
    cal = dict(calibration["metrics"])
    assert cal["brier"] == pytest.approx(float(((probs - gold) ** 2).mean()), abs=1e-6)
    assert cal["nll"] == pytest.approx(sklearn_metrics.log_loss(gold.ravel(), probs.ravel()), abs=1e-5)
    assert set(f"ece_{n}" for n in LABELS) <= set(cal) and cal["temperature"] > 1  # far-spread logits: over-confident
    # slices: the outcome is exact match by default
    exact = (pred == gold).all(axis=1).mean()
    assert slices["metrics"]["accuracy"] == pytest.approx(exact, abs=1e-9)
    assert any(s["name"] == "gold has insult" for s in slices["details"]["slices"])


def test_the_three_label_set_forms_give_identical_reports(tmp_path, tagger_dir):
    forms = write_formats(tmp_path, label_rows(30))
    seen = []
    for name, (data, keys) in forms.items():
        code, output, report = run_suite(tmp_path / name, tagger_dir, data, keys,
                                         "  - probe: accuracy\n    params: {bootstrap: 0, single_check: 0}\n", name="forms")
        assert report is not None, output
        seen.append({k: v for k, v in report["probes"][0]["metrics"].items() if k != "examples_per_s"})
    assert seen[0] == seen[1] == seen[2]


@pytest.mark.parametrize("body, keys, expected", [
    ('{"text": "a b", "labels": ["toxic"]}\n{"text": "c d", "labels": ["toxik"]}\n', "label: labels",
     ["'toxik'", "line 2 of", "did you mean toxic?", "--label-map toxik=toxic"]),
    ("text,toxic,insult,threat\na b,1,0,0\nc d,0,2,0\n", "", ["line 3 of", "'insult' holds 2", "0 or 1"]),
    ('{"text": "a b", "labels": ["toxic"]}\n{"text": "c d", "labels": "insult"}\n', "label: labels",
     ["line 2 of", "line 1 of", "one form"]),
])
def test_a_malformed_label_set_is_one_line_naming_file_and_line_before_any_model_loads(tmp_path, tagger_dir, body, keys,
                                                                                      expected):
    data = tmp_path / ("bad.jsonl" if body.startswith("{") else "bad.csv")
    data.write_text(body, encoding="utf-8")
    code, output, _ = run_suite(tmp_path, tagger_dir, data, keys, "  - probe: accuracy\n")
    assert code == 2, output
    line = output.strip().splitlines()[-1]
    assert all(e in line for e in expected), line
    assert "Traceback" not in output and not (tmp_path / "out").exists()  # refused before the run folder


def test_a_probe_that_does_not_support_multi_label_is_refused_before_loading(tmp_path, tagger_dir):
    data, keys = write_formats(tmp_path, label_rows(10))["jsonl"]
    code, output, _ = run_suite(tmp_path, tagger_dir, data, keys,
                                "  - probe: accuracy\n  - probe: spurious-cues\n")
    assert code == 2, output
    assert "does not support multi-label" in output and "probes that support multi-label: accuracy, attention-audit, backdoor-scan, behaviour, calibration, head-pruning, serving-skew, slices, syntax-heads, universal-trigger;" in output
    assert not (tmp_path / "out").exists()


def _registered_probes() -> list[str]:
    from bertprobe.plugins import build_plugins

    return build_plugins(entry_points=False).probes.names()


@pytest.mark.parametrize("name", _registered_probes())
def test_every_registered_probe_supports_multi_label_or_is_refused_or_skipped(name):
    from bertprobe.plugins import build_plugins
    from bertprobe.tasks import MultiLabelClassification

    cls = build_plugins(entry_points=False).probes.get(name)
    supports, refused = "multi-label" in cls.tasks, cls.refuses_task(MultiLabelClassification)
    # the rest need what no multi-label model has (cloze: a masked-LM head) and are skipped, saying so
    offered = MultiLabelClassification.capabilities | {"attentions", "heads", "gradients", "input-gradients", "mask-token"}
    skipped = bool(cls.missing_requirements(offered))
    assert supports + refused + (skipped and not supports) == 1, (supports, refused, skipped)
    expected_support = {"accuracy", "calibration", "slices", "behaviour", "head-pruning", "universal-trigger",
                        "backdoor-scan", "attention-audit", "syntax-heads", "serving-skew"}
    assert supports == (name in expected_support) and refused == (name in ("spurious-cues", "distractor"))


def test_without_problem_type_the_model_is_single_label_unless_the_suite_says_multi_label(tmp_path, tagger_dir):
    import shutil

    plain = tmp_path / "plain"
    shutil.copytree(tagger_dir, plain)
    config = json.loads((plain / "config.json").read_text())
    config.pop("problem_type")
    (plain / "config.json").write_text(json.dumps(config))
    data, keys = write_formats(tmp_path, label_rows(10))["jsonl"]
    code, output, _ = run_suite(tmp_path / "a", plain, data, keys, "  - probe: accuracy\n")
    assert code == 2 and "single-label" in output  # a label set for a softmax model is refused, never argmaxed
    code, output, report = run_suite(tmp_path / "b", plain, data, keys, "  - probe: accuracy\n", model_keys=", task: multi-label")
    assert report is not None and "micro_f1" in report["probes"][0]["metrics"], output
    code, output, report = run_suite(tmp_path / "c", plain, data, keys, "  - probe: accuracy\n",
                                     args=("--set", "model.task=multi-label"))
    assert report is not None and report["models"][0]["task"] == "multi-label", output


def test_thresholds_per_label_change_the_decisions_and_are_recorded(tmp_path, tagger_dir):
    rows = label_rows(30)
    data, keys = write_formats(tmp_path, rows)["jsonl"]
    _, output, report = run_suite(tmp_path, tagger_dir, data, keys, "  - probe: accuracy\n    params: {bootstrap: 0}\n",
                                  model_keys=", thresholds: {toxic: 0.999}")
    assert report is not None, output
    probs = direct_probabilities(tagger_dir, [t for t, _ in rows])
    predicted_toxic = report["probes"][0]["metrics"]["label_cardinality_predicted"]
    expected = ((probs[:, 0] >= 0.999).sum() + (probs[:, 1:] >= 0.5).sum()) / len(rows)
    assert predicted_toxic == pytest.approx(expected, abs=1e-9)
    assert report["probes"][0]["details"]["task"]["thresholds"] == {"toxic": 0.999}
    assert report["models"][0]["task_settings"] == {"threshold": 0.5, "thresholds": {"toxic": 0.999}}


def test_slices_on_one_label_read_that_labels_decisions(tmp_path, tagger_dir):
    rows = label_rows(40)
    data, keys = write_formats(tmp_path, rows)["jsonl"]
    _, output, report = run_suite(tmp_path, tagger_dir, data, keys, "  - probe: slices\n    params: {metric: 'label:insult'}\n")
    assert report is not None, output
    probs = direct_probabilities(tagger_dir, [t for t, _ in rows])
    gold = np.array([int("insult" in labels) for _, labels in rows])
    assert report["probes"][0]["metrics"]["label:insult"] == pytest.approx(((probs[:, 1] >= 0.5) == gold).mean())


def test_behaviour_cases_on_label_sets(tmp_path, tagger_dir):
    from bertprobe.probes.behaviour.cases import read_cases
    from bertprobe.probes.behaviour.scoring import judge_case

    cases_file = tmp_path / "cases.jsonl"
    cases_file.write_text("\n".join(json.dumps(c) for c in [
        {"test": "exact", "type": "mft", "text": "a", "labels": ["toxic", "threat"]},
        {"test": "has", "type": "mft", "text": "a", "contains": ["toxic"], "not_contains": ["insult"]},
        {"test": "none", "type": "mft", "text": "a", "labels": []},
        {"test": "inv", "type": "inv", "texts": ["a", "b"], "tolerance": 0.05},
        {"test": "dir", "type": "dir", "texts": ["a", "b"], "expect": {"class": "insult", "direction": "not_down"}},
    ]) + "\n")
    cases = read_cases(cases_file)
    names, thresholds = list(LABELS), np.array([0.5, 0.5, 0.5])
    table = {"a": np.array([0.9, 0.2, 0.7]), "b": np.array([0.8, 0.1, 0.4])}  # b drops threat: the set changes
    verdicts = [judge_case(c, table.__getitem__, names, thresholds).passed for c in cases]
    assert verdicts == [True, True, False, False, False]
    table["b"] = np.array([0.88, 0.24, 0.66])  # same set, insult up
    assert [judge_case(c, table.__getitem__, names, thresholds).passed for c in cases[3:]] == [True, True]
    # through the probe: a label set on a single-label model is refused, and a dir case without a label on a tagger
    from bertprobe.errors import DataError
    from bertprobe.probes.behaviour.scoring import check_labels

    with pytest.raises(DataError, match="multi-label model"):
        check_labels(cases[0], ["negative", "positive"])
    no_label = read_cases_text(tmp_path, {"test": "d", "type": "dir", "texts": ["a", "b"], "expect": {"direction": "not_up"}})
    with pytest.raises(DataError, match="names its label"):
        check_labels(no_label, names, multi_label=True)
    data, keys = write_formats(tmp_path, label_rows(12))["jsonl"]
    _, output, report = run_suite(tmp_path, tagger_dir, data, keys,
                                  f"  - probe: behaviour\n    params: {{cases: '{cases_file}', perturbations: [typo, religion]}}\n")
    assert report is not None, output
    assert report["probes"][0]["status"] != "error", report["probes"][0]["message"]
    tests = {t["test"] for t in report["probes"][0]["details"]["tests"]}
    assert {"exact", "has", "none", "inv", "dir"} <= tests and any("typo" in t for t in tests)


def read_cases_text(folder: Path, case: dict):
    from bertprobe.probes.behaviour.cases import read_cases

    path = folder / "one.jsonl"
    path.write_text(json.dumps(case) + "\n")
    return read_cases(path)[0]


@pytest.mark.parametrize("metric", ["auto", "subset_accuracy"])
def test_head_pruning_on_a_multi_label_model_uses_binary_cross_entropy_and_its_metric(tmp_path, tagger_dir, metric):
    from bertprobe.model.interventions import head_intervention
    from bertprobe.model.loading import load_target
    from bertprobe.model.spec import ModelSpec
    from bertprobe.probe import ProbeContext
    from bertprobe.probes.head_pruning.params import HeadParams
    from bertprobe.probes.head_pruning.probe import HeadPruningProbe

    target = load_target(ModelSpec(path=str(tagger_dir), device="cpu"))
    rows = label_rows(24)
    from bertprobe.data import Dataset, DataSpec, Example

    raw = Dataset([Example(t, label=labels, id=str(i)) for i, (t, labels) in enumerate(rows)], name="rows")
    data = target.task.read_labels(raw, DataSpec(), "tagger")
    params = HeadParams(metric=metric, bootstrap=50, step=0.5, layers=False)
    result = HeadPruningProbe().run(target, data, params, ProbeContext(seed=1))
    gold = target.task.gold(data).numpy()
    enc = target.tokenizer([t for t, _ in rows], padding=True, return_tensors="pt")

    def scored(mask=None):
        with torch.no_grad(), head_intervention(target.model, target.attention_sites(), mask=mask):
            pred = (torch.sigmoid(target.model(**enc).logits) >= 0.5).numpy().astype(int)
        if metric == "subset_accuracy":
            return float((pred == gold).all(axis=1).mean())
        return float(sklearn_metrics.f1_score(gold, pred, average="micro", zero_division=0))

    assert result.details["metric"] == ("micro_f1" if metric == "auto" else "subset_accuracy")
    assert result.value("baseline") == pytest.approx(scored(), abs=1e-9)
    row = result.details["ablation"][0]  # layer 0 head 0 removed by masking
    mask = torch.ones(len(target.attention_sites()), target.attention_sites()[0].num_heads)
    mask[row["layer"], row["head"]] = 0
    assert row["delta"] == pytest.approx(scored(mask) - scored(), abs=1e-9)
    assert row["ci"][0] <= row["delta"] <= row["ci"][1] or row["ci"][0] == row["ci"][1]
    # importance: Michel's mean over examples of |d loss / d head mask|, the loss being the binary cross-entropy
    per_example = []
    for i, (text, _) in enumerate(rows):
        xi = torch.ones(mask.shape, requires_grad=True)
        one = target.tokenizer([text], return_tensors="pt")
        with head_intervention(target.model, target.attention_sites(), mask=xi.unsqueeze(0)):
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                target.model(**one).logits[0], torch.tensor(gold[i]).float()).sum()
        per_example.append(torch.autograd.grad(loss, xi)[0].abs())
    expected = torch.stack(per_example).mean(0).numpy()
    np.testing.assert_allclose(np.asarray(result.details["importance"]), expected, rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_a_trigger_turns_a_label_off_or_on_with_binary_cross_entropy(tmp_path, tagger_dir, direction):
    from bertprobe.model.loading import load_target
    from bertprobe.model.spec import ModelSpec
    from bertprobe.probes.attacks.goals import LabelStateGoal
    from bertprobe.probes.universal_trigger.probe import TriggerParams, prepare_search

    target = load_target(ModelSpec(path=str(tagger_dir), device="cpu"))
    from bertprobe.data import Dataset, DataSpec, Example

    rows = label_rows(40)
    data = target.task.read_labels(Dataset([Example(t, label=labels, id=str(i)) for i, (t, labels) in enumerate(rows)],
                                              name="rows"), DataSpec(), "tagger")
    params = TriggerParams(target_label="insult", direction=direction, length=2, iterations=2, candidates=5)
    state = prepare_search(target, data, params, seed=0)
    attack = state.search.attack
    assert isinstance(attack, LabelStateGoal) and attack.label == 1 and attack.add == (direction == "add")
    assert all((1 in ex.label) == (direction == "remove") for ex in state.examples)  # texts with / without insult
    logits = torch.tensor([[0.0, 2.0, 0.0], [0.0, -3.0, 0.0]])
    goal = torch.full((2,), float(direction == "add"))
    torch.testing.assert_close(attack.objective(logits),
                               torch.nn.functional.binary_cross_entropy_with_logits(logits[:, 1], goal, reduction="none"))
    assert attack.hit(logits).tolist() == ([True, False] if direction == "add" else [False, True])
    # through a run: accuracy_before/after are the shares of attacked held-out texts whose insult state is right
    data_file, keys = write_formats(tmp_path, rows)["jsonl"]
    _, output, report = run_suite(tmp_path, tagger_dir, data_file, keys,
                                  "  - probe: universal-trigger\n    params: {target_label: insult, direction: "
                                  f"{direction}, length: 2, iterations: 2, candidates: 5, seed: 7}}\n")
    assert report is not None and report["probes"][0]["status"] != "error", output
    result = report["probes"][0]
    assert result["details"]["direction"] == direction
    state = prepare_search(target, data, TriggerParams(target_label="insult", direction=direction, seed=7), seed=7)
    held = [state.examples[i].text for i in state.held_idx]
    p_insult = direct_probabilities(tagger_dir, held)[:, 1]
    right = (p_insult >= 0.5) == (direction == "remove")
    assert result["metrics"]["examples_held_out"] == len(held)
    assert result["metrics"]["accuracy_before"] == pytest.approx(right.mean(), abs=1e-9)


GO_EMOTIONS = ("admiration", "amusement", "anger", "annoyance", "approval", "caring", "confusion", "curiosity", "desire",
               "disappointment", "disapproval", "disgust", "embarrassment", "excitement", "fear", "gratitude", "grief",
               "joy", "love", "nervousness", "optimism", "pride", "realization", "relief", "remorse", "sadness",
               "surprise", "neutral")


def test_the_goemotions_example_runs_on_a_tagger_with_its_labels(tmp_path, monkeypatch):
    from bertprobe.testing import sentiment_examples

    model = save_tiny_model(tmp_path / "tagger", task="multi-label", labels=GO_EMOTIONS, seed=1)
    rng = np.random.default_rng(2)
    rows = [{"text": text, "labels": [GO_EMOTIONS[int(k)] for k in rng.choice(28, size=int(rng.integers(0, 3)), replace=False)]}
            for text, _ in sentiment_examples(60, seed=4)]
    data = tmp_path / "go.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    monkeypatch.setenv("BERTPROBE_ML_MODEL", str(model))
    monkeypatch.setenv("BERTPROBE_ML_DATA", str(data))
    monkeypatch.setenv("BERTPROBE_DEVICE", "cpu")
    suite = Path(__file__).resolve().parents[1] / "examples" / "goemotions.yaml"
    result = CliRunner().invoke(main, ["run", str(suite), "--out", str(tmp_path / "out"),
                                       "--set", "probes.accuracy.params.bootstrap=50",
                                       "--set", "probes.calibration.params.bootstrap=20",
                                       "--set", "probes.behaviour.params.max_cases=4",
                                       "--set", "probes.behaviour.params.max_examples=20"])
    assert result.exit_code in (0, 1), result.output  # a random tagger may fail its bars; it must not break
    _, report = only_run(tmp_path / "out", "goemotions")
    status = {p["id"]: p["status"] for p in report["probes"]}
    assert "error" not in status.values(), result.output
    assert report["models"][0]["task"] == "multi-label" and "micro_f1" in report["probes"][0]["metrics"]
    assert "decision" in result.output


def test_slices_recall_and_precision_of_one_label():
    from bertprobe.probes.slices.probe import SlicesParams, SlicesProbe

    gold = np.array([[1, 0], [1, 1], [0, 1], [0, 0]])
    pred = np.array([[1, 0], [0, 1], [1, 1], [0, 0]])
    right, base = SlicesProbe._outcome(SlicesParams(metric="recall", positive="a"), gold, pred, ["a", "b"])
    assert base.tolist() == [True, True, False, False] and right[base].mean() == 0.5  # recall of a
    right, base = SlicesProbe._outcome(SlicesParams(metric="precision", positive="A"), gold, pred, ["a", "b"])
    assert base.tolist() == [True, False, True, False] and right[base].mean() == 0.5  # precision of a
    right, base = SlicesProbe._outcome(SlicesParams(), gold, pred, ["a", "b"])
    assert right.tolist() == [1, 0, 0, 1] and base.all()  # exact match
    from bertprobe.errors import ProbeError

    with pytest.raises(ProbeError, match="set positive"):
        SlicesProbe._outcome(SlicesParams(metric="recall"), gold, pred, ["a", "b"])


def test_a_hub_model_whose_task_is_known_only_once_loaded_is_refused_then(tmp_path, tagger_dir, monkeypatch):
    import bertprobe.suite.validate as validate

    monkeypatch.setattr(validate, "_config", lambda spec: None)  # as for a hub id: no config.json before loading
    data, keys = write_formats(tmp_path, label_rows(10))["jsonl"]
    code, output, _ = run_suite(tmp_path, tagger_dir, data, keys, "  - probe: accuracy\n  - probe: spurious-cues\n")
    assert code == 2 and "does not support multi-label" in output.strip().splitlines()[-1], output
    (run_dir,) = (tmp_path / "out").glob("ml-*")  # the accuracy result computed before stays on disk
    assert "accuracy" in (run_dir / "events.jsonl").read_text()


@pytest.mark.parametrize("metric", ["auto", "subset_accuracy"])
def test_a_sequential_sweeps_margin_on_label_sets_is_the_decision_closest_to_its_threshold(tagger_dir, metric):
    """Subset accuracy changes when any label's decision flips: its margin is the smallest distance of a label's
    logit from its threshold's. micro-F1 is not a mean of per-example 0/1 outcomes, so it has none."""
    from bertprobe.data import Dataset, DataSpec, Example
    from bertprobe.model.loading import load_target
    from bertprobe.model.spec import ModelSpec
    from bertprobe.probes.head_pruning.sweep import HeadSweep

    target = load_target(ModelSpec(path=str(tagger_dir), device="cpu"))
    rows = label_rows(20)
    raw = Dataset([Example(t, label=labels, id=str(i)) for i, (t, labels) in enumerate(rows)], name="rows")
    ev = HeadSweep(metric=metric).evaluator(target, target.task.read_labels(raw, DataSpec(), "tagger"))
    ev.correct()
    if metric == "auto":
        assert ev.margins is None
        return
    enc = target.tokenizer([t for t, _ in rows], padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = target.model(**enc).logits.numpy()
    assert ev.margins == pytest.approx(np.abs(logits).min(axis=1), abs=1e-5)  # thresholds 0.5: logit 0
