"""A probe's metric catalogue: its own entries and what each registered task adds (``Task.probe_metrics``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest
from click.testing import CliRunner

from bertprobe.errors import SuiteError
from bertprobe.hookmarkers import hookimpl
from bertprobe.plugins import build_plugins
from bertprobe.probes.accuracy import AccuracyProbe
from bertprobe.probes.calibration import CalibrationProbe
from bertprobe.probes.spurious_cues.probe import SpuriousCuesProbe
from bertprobe.results import Catalogue, DefaultExpectation, ProbeResult
from bertprobe.suite import parse_suite
from bertprobe.suite.validate import validate_probes
from bertprobe.tasks import QuestionAnswering, SingleLabelClassification

AGREEMENT = DefaultExpectation("stance_agreement", min=0.6, why="a test bound")


@dataclass(frozen=True)
class Stance(SingleLabelClassification):
    """A plugin's task whose accuracy section also measures how often annotators' stance agrees with the model."""

    name: ClassVar[str] = "stance"
    description: ClassVar[str] = "stance detection"
    probe_metrics: ClassVar = {"accuracy": Catalogue(
        {"stance_agreement": "stance: share of examples where the model agrees with the annotators",
         "accuracy": "a task may not redefine the probe's own metric"},
        {"stance_agreement": True, "accuracy": False}, (AGREEMENT,))}


class StancePlugin:
    @hookimpl
    def bertprobe_register_tasks(self, registry):
        registry.add(Stance)


def _suite(expect):
    doc = {"suite": "s", "model": {"path": "m"}, "data": {"path": "d.tsv"},
           "probes": [{"probe": "accuracy", "expect": expect}]}
    return parse_suite(doc, env={})


def test_a_plugin_task_adds_a_metric_to_the_accuracy_catalogue_and_validate_accepts_it():
    plugins = build_plugins(extra=[StancePlugin()], entry_points=False)
    probes = plugins.probes
    suite = _suite({"stance_agreement": {"min": 0.7}})
    validate_probes(suite, probes, tasks=plugins.tasks)  # known through the registered task: no error
    with pytest.raises(SuiteError, match=r"expect.stance_agreement: probe 'accuracy' has no such metric"):
        validate_probes(suite, probes)  # the built-in tasks alone do not know it
    with pytest.raises(SuiteError, match=r"has no such metric \(did you mean 'stance_agreement'\?\); metrics: .*, stance_agreement, "):
        validate_probes(_suite({"stance_agreemnt": {"min": 0.7}}), probes, tasks=plugins.tasks)


def test_the_catalogue_is_the_probes_own_then_each_registered_tasks():
    tasks = build_plugins(extra=[StancePlugin()], entry_points=False).tasks
    catalogue = AccuracyProbe.catalogue(tasks)
    names = list(catalogue.metrics)
    own = len(AccuracyProbe.metrics)
    assert names[:own] == list(AccuracyProbe.metrics)  # the probe's own first, then the tasks' (registry order)
    assert set(names[own:]) == set(Stance.probe_metrics["accuracy"].metrics) - {"accuracy"} \
        | set(QuestionAnswering.probe_metrics["accuracy"].metrics)
    # a task never redefines the probe's own entry: first declaration wins
    assert catalogue.metrics["accuracy"] == AccuracyProbe.metrics["accuracy"] and catalogue.directions["accuracy"] is True
    assert catalogue.defaults[: len(AccuracyProbe.defaults)] == AccuracyProbe.defaults
    assert sorted(d.metric for d in catalogue.defaults[len(AccuracyProbe.defaults):]) == \
        ["f1", "no_answer_exact_match", "question_*_f1", "stance_agreement"]
    assert AGREEMENT in catalogue.defaults
    # key metrics: the probe's, then the reader's and the plugin's default pattern (it declares no key metrics)
    keys = catalogue.key_metrics
    assert keys[: len(AccuracyProbe.key_metrics)] == AccuracyProbe.key_metrics
    assert set(keys[len(AccuracyProbe.key_metrics):]) == {"exact_match", "f1", "question_*_f1", "has_answer_f1",
                                                          "no_answer_exact_match", "stance_agreement"}
    assert ("stance_agreement", "higher is better", Stance.probe_metrics["accuracy"].metrics["stance_agreement"]) \
        in AccuracyProbe.metric_rows(tasks)
    assert AccuracyProbe.catalogue(tasks) is catalogue  # merged once per probe and tasks


def test_the_readers_metrics_come_from_its_task_not_the_probes():
    """The accuracy, calibration and spurious-cues probes declare no QA metric; the built-in catalogue has them all."""
    for probe, added in ((AccuracyProbe, ("exact_match", "f1", "question_*_f1", "adversarial_f1")),
                         (CalibrationProbe, ("aurc_em", "f1_at_coverage_*")),
                         (SpuriousCuesProbe, ("f1_question_empty", "first_sentence_excess"))):
        own = QuestionAnswering.probe_metrics[probe.name]
        assert not set(added) & set(probe.metrics) and set(added) <= set(own.metrics)
        catalogue = probe.catalogue()
        assert set(added) <= set(catalogue.metrics) and all(probe.knows_metric(m) for m in added)
        assert {p: catalogue.directions[p] for p in own.directions} == dict(own.directions)
    assert SpuriousCuesProbe.key_metric_patterns()[-3:] == ("f1_question_*", "f1_drop_sentence_moved", "first_sentence_excess")
    assert [d.metric for d in AccuracyProbe.catalogue().defaults][-3:] == ["f1", "question_*_f1", "no_answer_exact_match"]


def test_an_unknown_metric_error_lists_the_readers_metrics():
    with pytest.raises(SuiteError, match=r"has no such metric \(did you mean 'exact_match'\?\); metrics: accuracy, .*"
                                         r"exact_match, f1, .*adversarial_f1"):
        validate_probes(_suite({"exact_mach": {"min": 0.5}}), build_plugins(entry_points=False).probes)


def test_a_run_judges_a_result_by_the_defaults_its_task_adds():
    from bertprobe.run.turn import judge

    plugins = build_plugins(extra=[StancePlugin()], entry_points=False)
    spec = _suite({}).probes[0]
    result = ProbeResult("accuracy", id="accuracy")
    result.add_metric("stance_agreement", 0.5, True)
    judge(result, spec, AccuracyProbe, plugins.tasks)
    assert [(e.metric, e.min, e.source) for e in result.expectations] == [("stance_agreement", 0.6, "default")]
    assert result.status == "failed"
    alone = ProbeResult("accuracy", id="accuracy")
    alone.add_metric("stance_agreement", 0.5, True)
    judge(alone, spec, AccuracyProbe)  # the built-in tasks: no bound on it, nor a key metric
    assert alone.expectations == [] and alone.status == "measured" and "not_gated" not in alone.details


def test_describe_shows_what_a_plugin_task_adds(monkeypatch):
    import bertprobe.plugins
    from bertprobe.cli import main

    real = bertprobe.plugins.build_plugins
    monkeypatch.setattr(bertprobe.plugins, "build_plugins", lambda **kw: real(extra=[StancePlugin()], **kw))
    out = CliRunner().invoke(main, ["describe", "accuracy"]).output
    assert "stance_agreement" in out and "exact_match" in out


def test_a_task_whose_probe_metrics_are_no_catalogues_is_refused_at_registration():
    @dataclass(frozen=True)
    class Loose(SingleLabelClassification):
        name: ClassVar[str] = "loose"
        probe_metrics: ClassVar = {"accuracy": {"stance_agreement": "a bare dict"}}

    class LoosePlugin:
        @hookimpl
        def bertprobe_register_tasks(self, registry):
            registry.add(Loose)

    with pytest.raises(Exception, match=r"task 'loose' from plugin .*probe_metrics must map probe names to "
                                        r"bertprobe.results.Catalogue"):
        build_plugins(extra=[LoosePlugin()], entry_points=False)


def test_calibration_slices_and_cues_declare_no_tasks_metrics_of_their_own():
    """Label sets', entities' and readers' calibration metrics come from their tasks (``probe_metrics``); the probes'
    own entries are their classifier audit's. (The accuracy probe still writes its label-set and entity entries.)"""
    from bertprobe.probes.slices import SlicesProbe
    from bertprobe.tasks import MultiLabelClassification, TokenClassification

    prefixes = ("multi-label", "token classification", "extractive QA", "question answering")
    for probe in (CalibrationProbe, SlicesProbe, SpuriousCuesProbe):
        assert not [m for m, meaning in probe.metrics.items() if meaning.startswith(prefixes) and m != "label:*"], probe.name
    rows = {metric: direction for metric, direction, _ in CalibrationProbe.metric_rows()}
    assert rows["ece_macro"] == rows["ece_token"] == "lower is better" and rows["entities"] == "no direction"
    assert {"ece_*", "temperature_*"} <= set(MultiLabelClassification.probe_metrics["calibration"].metrics)
    assert {"ece_token", "entities"} <= set(TokenClassification.probe_metrics["calibration"].metrics)
    assert list(CalibrationProbe.catalogue().metrics)[len(CalibrationProbe.metrics):] == [
        *MultiLabelClassification.probe_metrics["calibration"].metrics, *TokenClassification.probe_metrics["calibration"].metrics,
        *QuestionAnswering.probe_metrics["calibration"].metrics]  # the built-in tasks in registration order
