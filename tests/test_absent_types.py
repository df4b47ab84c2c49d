"""Findings only about what the data holds: an entity type (NER) or a label (multi-label) that neither the gold
nor the predictions hold gets no per-type row, is never the "weakest", fails no default gate, and the report
says it was absent."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from bertprobe.data import Dataset, Example
from bertprobe.model.predictions import Predictions
from bertprobe.probe import ProbeContext
from bertprobe.probes.accuracy import AccuracyParams, AccuracyProbe, entities, labelsets
from bertprobe.results import ProbeResult
from bertprobe.run.turn import judge
from bertprobe.suite.schema import ProbeSpec
from bertprobe.tasks.labelset_metrics import f1_scores
from bertprobe.tasks.multilabel import MultiLabelClassification
from bertprobe.tasks.token_classification import TokenClassification

TAGS = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG")


def _ner(predict_org: bool) -> ProbeResult:
    """20 sentences with a PER and a LOC each, none with an ORG; every fourth LOC is missed; with ``predict_org``
    the model tags one word ORG where the gold says O (a spurious ORG: present, a finding)."""
    task = TokenClassification(label_names=TAGS, settings={"scheme": "IOB2"})
    examples, logits = [], torch.zeros(20, 5, len(TAGS))
    for i in range(20):
        gold = [1, 2, 0, 3, 0]  # B-PER I-PER O B-LOC O
        pred = list(gold)
        if i % 4 == 0:
            pred[3] = 0
        if predict_org and i == 5:
            pred[4] = 5
        examples.append(Example(f"w{i} a b c d", label=tuple(gold), id=str(i), words=(f"w{i}", "a", "b", "c", "d")))
        logits[i, torch.arange(5), torch.tensor(pred)] = 5.0
    target = SimpleNamespace(task=task, max_length=128, label_names=list(TAGS))
    ctx = ProbeContext(seed=0, predictions=lambda t, d, batch_size=None: Predictions(logits, 0.0))
    result = ProbeResult(probe="accuracy")
    entities.audit(result, target, Dataset(examples, name="d"), AccuracyParams(bootstrap=50), ctx)  # type: ignore[arg-type]
    return result


def test_an_entity_type_absent_from_gold_and_predictions_gets_no_row_and_no_finding():
    result = _ner(predict_org=False)
    assert not [m for m in result.metrics if m.endswith("_ORG")]
    assert {"f1_PER", "f1_LOC", "recall_LOC", "support_LOC"} <= set(result.metrics)
    finding = result.details["key_finding"]
    assert "weakest type LOC F1 0.857" in finding and "ORG F1" not in finding
    assert finding.endswith("; absent from the data and never predicted: ORG")
    assert result.details["absent"] == ["ORG"]
    assert result.details["figures"][0]["data"]["labels"] == ["LOC", "PER"]
    result.status = "measured"
    judge(result, ProbeSpec("accuracy", "accuracy"), AccuracyProbe, TokenClassification)  # as the harness does
    assert result.status == "passed" and not any("ORG" in e.metric for e in result.expectations)


def test_a_type_predicted_but_never_gold_is_present_and_can_be_the_weakest():
    result = _ner(predict_org=True)
    assert result.value("f1_ORG") == 0.0 and result.value("support_ORG") == 0.0
    assert "weakest type ORG F1 0.000" in result.details["key_finding"]
    assert "absent" not in result.details["key_finding"] and result.details["absent"] == []


def test_a_label_absent_from_gold_and_predictions_gets_no_row_and_no_finding():
    names = ("PER", "LOC", "ORG")
    task = MultiLabelClassification(label_names=names, settings={"threshold": 0.5, "thresholds": {}})
    examples, logits = [], torch.full((30, 3), -6.0)
    for i in range(30):
        gold = [0] + ([1] if i % 2 else [])  # PER always, LOC on odd examples, never ORG
        examples.append(Example(f"text {i}", label=tuple(gold), id=str(i)))
        for c in gold:
            logits[i, c] = 6.0
        if i % 6 == 1:
            logits[i, 1] = -6.0  # a LOC missed
    target = SimpleNamespace(task=task, label_names=list(names))
    result = ProbeResult(probe="accuracy")
    data = Dataset(examples, name="d")
    ctx = ProbeContext(seed=0, predictions=lambda t, d, batch_size=None: Predictions(logits, 0.0))
    labelsets.audit(result, target, data, AccuracyParams(bootstrap=50), ctx)  # type: ignore[arg-type]
    assert not [m for m in result.metrics if m.endswith("_ORG")]
    assert "weakest label LOC F1 0.8" in result.details["key_finding"]
    assert result.details["key_finding"].endswith("; absent from the data and never predicted: ORG")
    assert result.details["figures"][0]["data"]["labels"] == ["PER", "LOC"]
    assert result.value("macro_f1") == f1_scores(task.predict(logits).numpy(), task.gold(data).numpy())["macro_f1"]
    result.status = "measured"
    judge(result, ProbeSpec("accuracy", "accuracy"), AccuracyProbe, task)  # as the harness does
    assert result.status == "passed"


def test_the_task_scores_name_the_absent_types_and_labels():
    from bertprobe.tasks.entities import entity_scores, sentence_counts

    counts = [sentence_counts(["B-PER", "O"], ["B-PER", "B-LOC"])]
    assert entity_scores(counts, ["LOC", "ORG", "PER"])["absent"] == ["ORG"]
    pred, gold = np.array([[1, 0, 0], [0, 1, 0]]), np.array([[1, 0, 0], [0, 0, 0]])
    assert f1_scores(pred, gold)["absent"] == [2]
