"""The task layer: detection, registration through the hook, and probe/task pairings checked before loading."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import ClassVar

import pytest
import torch
from click.testing import CliRunner

from bertprobe.cli import main
from bertprobe.errors import TargetError
from bertprobe.hookmarkers import hookimpl
from bertprobe.plugins import build_plugins
from bertprobe.tasks import MultiLabelClassification, SingleLabelClassification, Task, resolve_task, task_class


def config(**fields):
    fields.setdefault("architectures", ["BertForSequenceClassification"])
    fields.setdefault("id2label", {"0": "neg", "1": "pos"})
    return SimpleNamespace(**fields)


@pytest.mark.parametrize("fields, expected", [
    ({}, "classification"),
    ({"problem_type": "single_label_classification"}, "classification"),
    ({"problem_type": "multi_label_classification"}, "multi-label"),
    ({"architectures": ["RobertaForMultipleChoice"]}, "multiple-choice"),
    ({"architectures": ["BertForMaskedLM"]}, "masked-lm"),
    ({"architectures": ["BertForPreTraining"]}, "masked-lm"),
    ({"architectures": ["BertModel"]}, "encoder"),
])
def test_the_task_is_detected_from_architecture_and_problem_type(fields, expected):
    assert task_class(config(**fields)).name == expected


def test_a_config_that_says_multi_label_is_never_read_with_a_softmax():
    with pytest.raises(TargetError, match="never audited with a softmax"):
        task_class(config(problem_type="multi_label_classification"), "classification")
    assert task_class(config(), "multi-label") is MultiLabelClassification  # the suite may say so


def test_a_regression_head_or_an_unknown_architecture_is_a_clear_error():
    with pytest.raises(TargetError, match="regression head"):
        task_class(config(num_labels=1, id2label={"0": "score"}))
    with pytest.raises(TargetError, match="cannot tell the task"):
        task_class(config(architectures=["SomethingElse"]))


def test_single_label_semantics_are_softmax_argmax_and_cross_entropy():
    task = resolve_task(config())
    logits = torch.tensor([[2.0, -1.0], [0.0, 3.0]])
    gold = torch.tensor([0, 0])
    torch.testing.assert_close(task.probs(logits), logits.softmax(-1))
    assert task.predict(logits).tolist() == [0, 1] and task.correct(task.predict(logits), gold).tolist() == [True, False]
    torch.testing.assert_close(task.loss(logits, gold), torch.nn.functional.cross_entropy(logits, gold, reduction="none"))
    assert task.label_names == ("neg", "pos")


def test_multi_label_semantics_are_sigmoid_thresholds_and_binary_cross_entropy():
    task = resolve_task(config(problem_type="multi_label_classification", id2label={"0": "a", "1": "b", "2": "c"}),
                        options={"threshold": 0.5, "thresholds": {"B": 0.9}})
    logits = torch.tensor([[3.0, 1.0, -4.0], [-3.0, 3.0, 0.5]])  # sigmoid(1) = 0.73 < 0.9 for b
    gold = torch.tensor([[1, 0, 0], [0, 1, 1]])
    assert task.predict(logits).tolist() == [[1, 0, 0], [0, 1, 1]]
    assert task.correct(task.predict(logits), gold).tolist() == [True, True]
    expected = torch.nn.functional.binary_cross_entropy_with_logits(logits, gold.float(), reduction="none").mean(-1)
    torch.testing.assert_close(task.loss(logits, gold), expected)
    conf, hit = task.confidence(task.probs(logits), gold)
    assert conf.shape == (6,) and hit.tolist() == [True, False, False, False, True, True]
    assert task.describe_labels([1, 0, 1]) == "{a, c}" and task.settings["thresholds"] == {"b": 0.9}
    with pytest.raises(Exception, match="nearest: b"):
        resolve_task(config(problem_type="multi_label_classification", id2label={"0": "a", "1": "b"}),
                     options={"thresholds": {"bb": 0.3}})


@dataclass(frozen=True)
class Stance(SingleLabelClassification):
    """A plugin's task: a stance classifier, told apart by a problem_type of its own."""

    name: ClassVar[str] = "stance"
    description: ClassVar[str] = "stance detection"
    priority: ClassVar[int] = 20

    @classmethod
    def detect(cls, config) -> bool:
        return getattr(config, "problem_type", None) == "stance"


class StancePlugin:
    @hookimpl
    def bertprobe_register_tasks(self, registry):
        registry.add(Stance)


def test_a_plugin_adds_a_task_through_the_same_hook_as_the_built_ins():
    plugins = build_plugins(extra=[StancePlugin()], entry_points=False)
    assert {"classification", "multi-label", "stance"} <= set(plugins.tasks.names())
    assert plugins.tasks.origin("classification") == "bertprobe.tasks.builtin"
    assert task_class(config(problem_type="stance"), tasks=plugins.tasks) is Stance
    # no built-in probe declares it: a probe that would read its outputs is refused, never guessed at
    assert plugins.probes.get("accuracy").refuses_task(Stance)
    assert not issubclass(Stance, MultiLabelClassification) and issubclass(Stance, Task)


def test_a_task_offers_abilities_and_a_probe_refuses_a_task_through_its_tasks_only():
    """Capabilities name abilities (``bertprobe.capabilities.TARGET``), never a task: a task's own name is no
    capability, and ``refuses_task`` decides by the probe's ``tasks`` and its requirements."""
    from bertprobe.capabilities import TARGET
    from bertprobe.probes.accuracy import AccuracyProbe

    tasks = build_plugins(entry_points=False).tasks
    names = set(tasks.names())
    assert names.isdisjoint(TARGET)
    for name in names:
        assert tasks.get(name).capabilities <= set(TARGET) - names, name
    assert AccuracyProbe.refuses_task(tasks.get("question-answering")) is False  # listed in its tasks
    assert AccuracyProbe.refuses_task(tasks.get("encoder")) is False  # not listed, and lacks predictions: skipped


def test_a_task_that_is_not_a_task_class_is_refused_at_registration():
    class Bad:
        @hookimpl
        def bertprobe_register_tasks(self, registry):
            registry.add(object(), name="bad")

    with pytest.raises(Exception, match="not a bertprobe.tasks.Task subclass"):
        build_plugins(extra=[Bad()], entry_points=False)


def test_list_and_describe_show_the_tasks():
    listed = CliRunner().invoke(main, ["list"])
    assert "multi-label" in listed.output and "Tasks" in listed.output
    described = CliRunner().invoke(main, ["describe", "spurious-cues"])
    assert ("tasks: classification, multiple-choice, question-answering, reranker, sentence-embedding (a model of "
            "another task is refused before it loads)") in described.output


def test_each_tasks_standard_metrics_match_scikit_learn():
    metrics = pytest.importorskip("sklearn.metrics")
    single = resolve_task(config(id2label={"0": "a", "1": "b", "2": "c"}))
    logits = torch.tensor([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0], [2.0, 0.0, 0.0]])
    gold = torch.tensor([0, 2, 2, 1])
    got = single.metrics(single.probs(logits), single.predict(logits), gold)
    assert got["accuracy"] == pytest.approx(metrics.accuracy_score(gold, single.predict(logits)))
    recall = metrics.recall_score(gold, single.predict(logits), average=None)
    assert [got["accuracy_a"], got["accuracy_b"], got["accuracy_c"]] == pytest.approx(list(recall))
    multi = resolve_task(config(problem_type="multi_label_classification", id2label={"0": "a", "1": "b"}))
    ml_logits, ml_gold = torch.tensor([[3.0, -3.0], [3.0, 3.0], [-3.0, 1.0]]), torch.tensor([[1, 0], [1, 0], [0, 1]])
    got = multi.metrics(multi.probs(ml_logits), multi.predict(ml_logits), ml_gold)
    assert got["micro_f1"] == pytest.approx(metrics.f1_score(ml_gold, multi.predict(ml_logits), average="micro"))


def _sections_setup(task: Task, logits: torch.Tensor, examples: list) -> tuple:
    from bertprobe.data import Dataset
    from bertprobe.model.predictions import Predictions
    from bertprobe.probe import ProbeContext

    target = SimpleNamespace(task=task, max_length=128, label_names=list(task.label_names), encode=lambda examples: examples)
    ctx = ProbeContext(seed=3, predictions=lambda t, d, batch_size=None: Predictions(logits, 2.0))
    return target, Dataset(examples, name="d"), ctx


def test_entities_and_label_sets_are_audited_by_their_tasks_and_the_probes_add_only_the_timing(monkeypatch):
    """The accuracy and calibration probes' sections for entities and label sets are found through the sections
    lookup (``bertprobe.sections``): the probes' results equal those sections' (no flag of the probe chooses
    them); after a label-set section the accuracy probe times the encoded batches, after an entity
    section (words in windows) it does not."""
    from bertprobe.data import Example
    from bertprobe.probes.accuracy import AccuracyParams, AccuracyProbe
    from bertprobe.probes.accuracy import entities as accuracy_entities
    from bertprobe.probes.accuracy import labelsets as accuracy_labelsets
    from bertprobe.probes.calibration.entities import entity_calibration
    from bertprobe.probes.calibration.labelsets import label_set_calibration
    from bertprobe.probes.calibration.probe import CalibrationParams, CalibrationProbe
    from bertprobe.results import ProbeResult
    from bertprobe.tasks import QuestionAnswering, TokenClassification

    monkeypatch.setattr("bertprobe.probes.accuracy.classes.measure_throughput", lambda *a, **k: None)  # the fallback: N / seconds
    generator = torch.Generator().manual_seed(0)
    tags = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")
    ner = TokenClassification(label_names=tags, settings={"scheme": "IOB2"})
    gold = [[1, 2, 0, 3], [0, 3, 4, 0], [1, 0, 0, 0], [0, 0, 3, 0]] * 3
    examples = [Example(" ".join(f"w{i}{j}" for j in range(4)), label=tuple(g), id=str(i),
                        words=tuple(f"w{i}{j}" for j in range(4))) for i, g in enumerate(gold)]
    ml = MultiLabelClassification(label_names=("a", "b", "c"), settings={"threshold": 0.5, "thresholds": {}})
    sets = [tuple(c for c in range(3) if (i >> c) & 1) for i in range(12)]
    ml_examples = [Example(f"text {i}", label=s, id=str(i)) for i, s in enumerate(sets)]
    cases = [(ner, torch.randn(12, 4, len(tags), generator=generator) * 3, examples, accuracy_entities, entity_calibration),
             (ml, torch.randn(12, 3, generator=generator) * 3, ml_examples, accuracy_labelsets, label_set_calibration)]
    for task, logits, rows, accuracy, calibration in cases:
        target, data, ctx = _sections_setup(task, logits, rows)
        acc_params, cal_params = AccuracyParams(bootstrap=30), CalibrationParams(bootstrap=20, bins=5)
        probe = AccuracyProbe().run(target, data, acc_params, ctx)  # type: ignore[arg-type]
        direct = ProbeResult(probe="accuracy")
        accuracy.audit(direct, target, data, acc_params, ctx)
        if task.throughput_from_encode:  # timed last, after the task's section (here the fallback: 12 examples / 2 s)
            assert list(probe.metrics)[-1] == "examples_per_s" and probe.value("examples_per_s") == 12 / 2.0
        assert {k: m for k, m in probe.metrics.items() if k != "examples_per_s"} == direct.metrics
        assert ("examples_per_s" in probe.metrics) == task.throughput_from_encode
        assert probe.details == direct.details and len(probe.findings) == len(direct.findings)
        cal = CalibrationProbe().run(target, data, cal_params, ctx)  # type: ignore[arg-type]
        direct = ProbeResult(probe="calibration")
        calibration(direct, target, data, logits, cal_params, ctx.seed)
        assert cal.metrics == direct.metrics and cal.details == direct.details and "ece" in cal.metrics
    assert (ner.throughput_from_encode, ml.throughput_from_encode) == (False, True)
    assert SingleLabelClassification().throughput_from_encode
    assert not QuestionAnswering().throughput_from_encode  # its answers are its own predictions


def test_the_slices_of_sentences_are_the_token_classification_tasks_units():
    """Slices on a NER model: sentences exact or not, an "all lower case" slice and each slice's entity F1 come from
    the probe's section for taggers (probes/slices/entities.py, found by the lookup); a slice's entity F1 equals the
    strict micro F1 of its sentences (tasks.entities)."""
    from bertprobe.data import Example
    from bertprobe.probes.slices import entities
    from bertprobe.probes.slices.probe import SlicesParams, SlicesProbe
    from bertprobe.tasks import TokenClassification
    from bertprobe.tasks.entities import entity_scores, sentence_counts

    tags = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")
    ner = TokenClassification(label_names=tags, settings={"scheme": "IOB2"})
    logits = torch.randn(24, 4, len(tags), generator=torch.Generator().manual_seed(1)) * 3
    gold = [[1, 2, 0, 3], [0, 3, 4, 0], [1, 0, 0, 0], [0, 0, 3, 0]] * 6
    examples = [Example(" ".join(f"W{i}{j}" if i % 3 else f"w{i}{j}" for j in range(4)), label=tuple(g), id=str(i),
                        words=tuple(f"w{i}{j}" for j in range(4))) for i, g in enumerate(gold)]
    target, data, ctx = _sections_setup(ner, logits, examples)
    target.encode = lambda rows: SimpleNamespace(lengths=[6] * len(rows))
    assert ctx.section("slices", Task()) is None  # a class task: the probe's own slices
    assert ctx.section("slices", ner) is entities
    result = SlicesProbe().run(target, data, SlicesParams(min_size=2), ctx)  # type: ignore[arg-type]
    rows = {r["name"]: r for r in result.details["slices"]}
    lower = [i for i, ex in enumerate(examples) if ex.text == ex.text.lower()]
    assert rows["all lower case"]["size"] == len(lower) == 8
    preds = [ner.tags(logits[i].argmax(-1)) for i in range(24)]
    counts = [sentence_counts(ner.tags(list(g)), p) for g, p in zip(gold, preds)]
    assert rows["all lower case"]["entity_f1"] == pytest.approx(entity_scores([counts[i] for i in lower])["f1"], abs=1e-6)
    exact = [float(c.tp == c.gold == c.pred) for c in counts]
    assert result.value("accuracy") == pytest.approx(sum(exact) / 24)
    assert all("entity_f1" in r and len(r["entity_f1_interval"]) == 2 for r in rows.values())
