"""A probe's metric catalogue: its own entries and what each registered section adds (``bertprobe.sections``: a
section's ``catalogue``)."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner

from bertprobe.errors import PluginError, SuiteError
from bertprobe.hookmarkers import hookimpl
from bertprobe.plugins import build_plugins
from bertprobe.probe import Probe
from bertprobe.probes.accuracy import AccuracyProbe, classes
from bertprobe.probes.calibration.probe import CalibrationProbe
from bertprobe.probes.spurious_cues.probe import SpuriousCuesProbe
from bertprobe.results import Catalogue, DefaultExpectation, ProbeResult
from bertprobe.plugins import builtin_sections
from bertprobe.suite import parse_suite
from bertprobe.suite.validate import validate_probes
from bertprobe.tasks import QuestionAnswering, SingleLabelClassification

AGREEMENT = DefaultExpectation("stance_agreement", min=0.6, why="a test bound")


@dataclass(frozen=True)
class Stance(SingleLabelClassification):
    """A plugin's task: stance detection (its outputs mean what a single-label classifier's do)."""

    name: ClassVar[str] = "stance"
    description: ClassVar[str] = "stance detection"


class StanceAccuracy:
    """The plugin's section of the accuracy probe for its task: the probe's own class audit, then how often
    annotators' stance agrees with the model."""

    catalogue = Catalogue(
        {"stance_agreement": "stance: share of examples where the model agrees with the annotators",
         "accuracy": AccuracyProbe.metrics["accuracy"]},  # the probe's own entry again, the same: no conflict
        {"stance_agreement": True, "accuracy": True}, (AGREEMENT,))

    def audit(self, result: ProbeResult, target: Any, data: Any, params: Any, ctx: Any) -> None:
        classes.audit(result, target, data, params, ctx)
        result.add_metric("stance_agreement", result.value("accuracy"), True, "agreement with the annotators")


STANCE_ACCURACY = StanceAccuracy()


class StancePlugin:
    @hookimpl
    def bertprobe_register_tasks(self, registry):
        registry.add(Stance)

    @hookimpl
    def bertprobe_register_sections(self, registry):
        registry.add("accuracy", STANCE_ACCURACY, task="stance")


def _reader_section(probe: str) -> Any:
    """The built-in section of ``probe`` for a reader."""
    from bertprobe.tasks import QuestionAnswering

    return builtin_sections().find(probe, QuestionAnswering)


def _suite(expect):
    doc = {"suite": "s", "model": {"path": "m"}, "data": {"path": "d.tsv"},
           "probes": [{"probe": "accuracy", "expect": expect}]}
    return parse_suite(doc, env={})


def test_a_plugin_section_adds_a_metric_to_the_accuracy_catalogue_and_validate_accepts_it():
    plugins = build_plugins(extra=[StancePlugin()], entry_points=False)
    probes = plugins.probes
    suite = _suite({"stance_agreement": {"min": 0.7}})
    validate_probes(suite, probes, sections=plugins.sections)  # known through the registered section: no error
    with pytest.raises(SuiteError, match=r"expect.stance_agreement: probe 'accuracy' has no such metric"):
        validate_probes(suite, probes)  # the built-in sections alone do not know it
    with pytest.raises(SuiteError, match=r"has no such metric \(did you mean 'stance_agreement'\?\); metrics: .*, stance_agreement"):
        validate_probes(_suite({"stance_agreemnt": {"min": 0.7}}), probes, sections=plugins.sections)


def test_the_catalogue_is_the_probes_own_then_each_registered_sections():
    tasks = build_plugins(extra=[StancePlugin()], entry_points=False).sections
    catalogue = AccuracyProbe.catalogue(tasks)
    names = list(catalogue.metrics)
    own = len(AccuracyProbe.metrics)
    assert names[:own] == list(AccuracyProbe.metrics)  # the probe's own first, then the sections' (registry order)
    builtin = [s.catalogue for s in builtin_sections().of("accuracy")]  # label sets, entities, answers
    assert set(names[own:]) == {m for c in [*builtin, StanceAccuracy.catalogue] for m in c.metrics} - {"accuracy"}
    # the probe's own entry declared again as it is: kept once (registration refuses another meaning or direction)
    assert catalogue.metrics["accuracy"] == AccuracyProbe.metrics["accuracy"] and catalogue.directions["accuracy"] is True
    assert catalogue.defaults[: len(AccuracyProbe.defaults)] == AccuracyProbe.defaults
    assert sorted(d.metric for d in catalogue.defaults[len(AccuracyProbe.defaults):]) == \
        ["entity_f1", "f1", "no_answer_exact_match", "question_*_f1", "recall_*", "stance_agreement"]
    assert AGREEMENT in catalogue.defaults
    # key metrics: the probe's, then the sections' (the plugin's default pattern: it declares no key metrics)
    keys = catalogue.key_metrics
    assert keys[: len(AccuracyProbe.key_metrics)] == AccuracyProbe.key_metrics
    assert set(keys[len(AccuracyProbe.key_metrics):]) == {"micro_f1", "macro_f1", "subset_accuracy", "recall_*",
                                                          "entity_f1", "exact_match", "f1", "question_*_f1",
                                                          "has_answer_f1", "no_answer_exact_match", "stance_agreement",
                                                          "ndcg@10", "mrr@10", "recall@10", "spearman"}
    assert ("stance_agreement", "higher is better", StanceAccuracy.catalogue.metrics["stance_agreement"]) \
        in AccuracyProbe.metric_rows(tasks)
    assert AccuracyProbe.catalogue(tasks) is catalogue  # merged once per probe and sections


def test_the_readers_metrics_come_from_the_probes_sections_for_readers():
    """The accuracy, calibration and spurious-cues probes declare no QA metric; their sections for readers do, and
    the built-in catalogue has them all."""
    for probe, added in ((AccuracyProbe, ("exact_match", "f1", "question_*_f1", "adversarial_f1")),
                         (CalibrationProbe, ("aurc_em", "f1_at_coverage_*")),
                         (SpuriousCuesProbe, ("f1_question_empty", "first_sentence_excess"))):
        own = _reader_section(probe.name).catalogue
        assert not set(added) & set(probe.metrics) and set(added) <= set(own.metrics)
        catalogue = probe.catalogue()
        assert set(added) <= set(catalogue.metrics) and all(probe.knows_metric(m) for m in added)
        assert {p: catalogue.directions[p] for p in own.directions} == dict(own.directions)
    assert SpuriousCuesProbe.key_metric_patterns()[-5:] == ("f1_question_*", "f1_drop_sentence_moved", "first_sentence_excess",
                                                             "ndcg_overlap_gap", "ndcg_share_*")  # then the retrievers
    assert [d.metric for d in AccuracyProbe.catalogue().defaults][-3:] == ["f1", "question_*_f1", "no_answer_exact_match"]


def test_an_unknown_metric_error_lists_the_readers_metrics():
    with pytest.raises(SuiteError, match=r"has no such metric \(did you mean 'exact_match'\?\); metrics: accuracy, .*"
                                         r"exact_match, f1, .*adversarial_f1"):
        validate_probes(_suite({"exact_mach": {"min": 0.5}}), build_plugins(entry_points=False).probes)


def test_a_run_judges_a_result_by_the_defaults_its_tasks_section_adds():
    from bertprobe.run.turn import judge

    plugins = build_plugins(extra=[StancePlugin()], entry_points=False)
    spec = _suite({}).probes[0]
    result = ProbeResult("accuracy", id="accuracy")
    result.add_metric("stance_agreement", 0.5, True)
    stance = plugins.tasks.get("stance")
    judge(result, spec, AccuracyProbe, stance, plugins.sections)  # the probe's own entries and the task's section's
    assert [(e.metric, e.min, e.source) for e in result.expectations] == [("stance_agreement", 0.6, "default")]
    assert result.status == "failed"
    for task in (None, SingleLabelClassification, QuestionAnswering):  # another task's model: not its bound
        alone = ProbeResult("accuracy", id="accuracy")
        alone.add_metric("stance_agreement", 0.5, True)
        judge(alone, spec, AccuracyProbe, task, plugins.sections)
        assert alone.expectations == [] and alone.status == "measured" and "not_gated" not in alone.details


def test_describe_shows_what_a_plugin_section_adds(monkeypatch):
    import bertprobe.plugins
    from bertprobe.cli import main

    real = bertprobe.plugins.build_plugins
    monkeypatch.setattr(bertprobe.plugins, "build_plugins", lambda **kw: real(extra=[StancePlugin()], **kw))
    out = CliRunner().invoke(main, ["describe", "accuracy"]).output
    assert "stance_agreement" in out and "exact_match" in out


def test_a_section_whose_catalogue_is_no_catalogue_is_refused_at_registration():
    with pytest.raises(PluginError, match=r"^the section of probe 'accuracy' for task 'stance2' from plugin .*: its "
                                          r"catalogue must be a bertprobe.results.Catalogue .*, not dict$"):
        build_plugins(extra=[_section_plugin({"accuracy": {"stance_agreement": "a bare dict"}})], entry_points=False)


def test_a_task_still_holding_a_probes_section_is_refused_with_the_way_to_move_it():
    """``probe_metrics``, ``audit_accuracy`` and ``audit_calibration`` are gone from ``Task``: a plugin task defining
    one would be silently ignored, so registration refuses it and names the section hook."""
    for retired, probe in (("probe_metrics", "each probe it names"), ("audit_accuracy", "probe 'accuracy'"),
                           ("audit_calibration", "probe 'calibration'")):
        @dataclass(frozen=True)
        class Old(SingleLabelClassification):
            name: ClassVar[str] = "old"

        setattr(Old, retired, lambda self, *a: True)

        class OldPlugin:
            @hookimpl
            def bertprobe_register_tasks(self, registry):
                registry.add(Old)

        with pytest.raises(PluginError, match=rf"^task 'old' from plugin .* defines {retired}, which bertprobe no longer "
                                              rf"calls: register a section of {probe} for the task instead"):
            build_plugins(extra=[OldPlugin()], entry_points=False)


def test_no_probe_declares_a_sections_metrics_as_its_own():
    """Label sets', entities' and readers' metrics come from the probes' sections (their ``catalogue``); the probes'
    own entries are their classifier audit's."""
    from bertprobe.probes.calibration import answers, entities, labelsets
    from bertprobe.probes.slices.probe import SlicesProbe

    prefixes = ("multi-label", "token classification", "extractive QA", "question answering")
    for probe in (AccuracyProbe, CalibrationProbe, SlicesProbe, SpuriousCuesProbe):
        assert not [m for m, meaning in probe.metrics.items() if meaning.startswith(prefixes) and m != "label:*"], probe.name
    rows = {metric: direction for metric, direction, _ in CalibrationProbe.metric_rows()}
    assert rows["ece_macro"] == rows["ece_token"] == "lower is better" and rows["entities"] == "no direction"
    assert {"ece_*", "temperature_*"} <= set(labelsets.catalogue.metrics)
    assert {"ece_token", "entities"} <= set(entities.catalogue.metrics)
    assert list(CalibrationProbe.catalogue().metrics)[len(CalibrationProbe.metrics):] == [
        *labelsets.catalogue.metrics, *entities.catalogue.metrics,
        *answers.catalogue.metrics]  # the sections in registration order


# ---- catalogues are checked where they are declared and registered -------------------------------------------


def _section_plugin(catalogues: dict, name: str = "stance2") -> Any:
    """A plugin registering a classification task named ``name`` and, for each probe of ``catalogues``, a section of
    that probe for the task: the accuracy probe's class audit, with the catalogue given."""

    @dataclass(frozen=True)
    class Declared(SingleLabelClassification):
        description: ClassVar[str] = "a plugin's task"

    Declared.name = name  # type: ignore[misc]

    class Plugin:
        task = Declared
        sections = {probe: SimpleNamespace(catalogue=c, audit=classes.audit) for probe, c in catalogues.items()}

        @hookimpl
        def bertprobe_register_tasks(self, registry):
            registry.add(Declared)

        @hookimpl
        def bertprobe_register_sections(self, registry):
            for probe, section in self.sections.items():
                registry.add(probe, section, task=name)

    return Plugin()


def test_a_catalogue_of_metric_names_reads_as_probe_metrics_do():
    catalogue = Catalogue(("stance_agreement", "stance_*"), {"stance_*": True}, [AGREEMENT], ["stance_agreement"])
    assert dict(catalogue.metrics) == {"stance_agreement": "", "stance_*": ""}
    assert catalogue.defaults == (AGREEMENT,) and catalogue.key_metrics == ("stance_agreement",)
    tasks = build_plugins(extra=[_section_plugin({"accuracy": catalogue})], entry_points=False).sections
    merged = AccuracyProbe.catalogue(tasks)  # was an AttributeError on the tuple
    assert {"stance_agreement", "stance_*"} <= set(merged.metrics) and AccuracyProbe.knows_metric("stance_agreement", tasks)
    assert ("stance_agreement", "higher is better", "") in AccuracyProbe.metric_rows(tasks)


@pytest.mark.parametrize(("fields", "message"), [
    ({"metrics": {"stance_agreement": 0.6}}, r"Catalogue metrics must map metric names to their meanings \(or be a tuple of names\), not \{'stance_agreement': 0.6\}"),
    ({"metrics": "stance_agreement"}, r"Catalogue metrics must map"),
    ({"metrics": ("stance_agreement", 3)}, r"Catalogue metrics must map"),
    ({"directions": {"stance_agreement": "higher"}}, r"Catalogue directions must map metric patterns to True \(higher is better\), False"),
    ({"directions": ("stance_agreement",)}, r"Catalogue directions must map"),
    ({"defaults": ({"metric": "f1", "min": 0.5},)}, r"Catalogue defaults must be a tuple of bertprobe.results.DefaultExpectation"),
    ({"defaults": AGREEMENT}, r"Catalogue defaults must be a tuple"),
    ({"key_metrics": "stance_agreement"}, r"Catalogue key_metrics must be a tuple of metric patterns, not 'stance_agreement'"),
    ({"key_metrics": (AGREEMENT,)}, r"Catalogue key_metrics must be a tuple"),
])
def test_a_malformed_catalogue_is_refused_in_one_line(fields, message):
    with pytest.raises(PluginError, match=message) as caught:
        Catalogue(**fields)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("catalogue", "message"), [
    (Catalogue({"acuracy_stance": "x"}), None),  # the probe exists: no error (a metric name is free)
    (Catalogue({"accuracy": "another meaning"}),
     r"its catalogue declares metric 'accuracy' again with another meaning \('share of"),
    (Catalogue({"stance_agreement": "s"}, {"accuracy_*": False}),
     r"declares 'accuracy_\*' lower is better, where it is higher is better; declare each metric once"),
    (Catalogue({"examples_per_s": "s"}, {"examples_per_s": False}),
     r"'examples_per_s' lower is better, where it is higher is better"),
    (Catalogue(defaults=(DefaultExpectation("accuracy_*", min=0.7),)),
     r"declares default 'accuracy_\*' >= 0.7, where it is .*0.5"),
    (Catalogue({"f1_stance": "s"}, {"f1_stance": False}), None),  # a built-in section's f1_* is no probe's own: free
    (Catalogue({"accuracy": ""}, {"accuracy": True}, (DefaultExpectation("accuracy_*", min=0.5, interval=True, why="again"),)),
     None),  # the same entries again (a name without a meaning, another why): fine
])
def test_a_section_that_redefines_a_metric_is_refused_at_registration(catalogue, message):
    plugin = _section_plugin({"accuracy": catalogue})
    if message is None:
        build_plugins(extra=[plugin], entry_points=False)
        return
    with pytest.raises(PluginError, match=r"^the section of probe 'accuracy' for task 'stance2' from plugin '.*': .*"
                                          + message) as caught:
        build_plugins(extra=[plugin], entry_points=False)
    assert "\n" not in str(caught.value)


def test_two_sections_may_declare_a_metric_differently_and_each_keeps_its_own():
    """Sections differ among themselves freely (a run judges a model by its own task's section): registration
    accepts both, and each section's catalogue keeps its own direction; the union lists the first."""
    up = _section_plugin({"accuracy": Catalogue({"stance_agreement": "s"}, {"stance_agreement": True})}, "stance1")
    down = _section_plugin({"accuracy": Catalogue({"stance_agreement": "s"}, {"stance_*": False})}, "stance2")
    plugins = build_plugins(extra=[up, down], entry_points=False)
    one, two = (plugins.sections.find("accuracy", plugins.tasks.get(n)) for n in ("stance1", "stance2"))
    assert AccuracyProbe.catalogue((one,)).direction("stance_agreement") is True
    assert AccuracyProbe.catalogue((two,)).direction("stance_agreement") is False


def test_a_section_of_a_probe_not_installed_here_is_accepted():
    """An optional probe a task package also serves (no near miss among the probes): skipped, not refused."""
    plugins = build_plugins(extra=[_section_plugin({"coreference-audit": Catalogue({"x": "y"})})], entry_points=False)
    assert "coreference-audit" not in plugins.probes
    assert plugins.sections.find("coreference-audit", plugins.tasks.get("stance2")) is not None


def test_a_section_naming_no_probe_is_refused_with_a_suggestion():
    with pytest.raises(PluginError, match=r"^the section of probe 'acuracy' for task 'stance2' from plugin '.*': "
                                          r"'acuracy' is no probe \(did you mean 'accuracy'\?\); probes: .*accuracy, "):
        build_plugins(extra=[_section_plugin({"acuracy": Catalogue({"stance_agreement": "s"})})], entry_points=False)


def test_a_blocked_builtin_probe_leaves_the_sections_naming_it_registered():
    """A plugin's section of spurious-cues; with that probe's plugin blocked, nothing is wrong (and its own built-in
    sections are not registered); a near miss is still refused."""
    env = {"BERTPROBE_DISABLE_PLUGINS": "bertprobe.probes.spurious_cues.probe"}
    plugins = build_plugins(extra=[_section_plugin({"spurious-cues": Catalogue()})], env=env, entry_points=False)
    assert "spurious-cues" not in plugins.probes and not [e for e in plugins.sections if e.plugin.startswith("bertprobe.")
                                                          and e.probe == "spurious-cues"]
    with pytest.raises(PluginError, match=r"'spurious-cue' is no probe \(did you mean 'spurious-cues'\?\)"):
        build_plugins(extra=[_section_plugin({"spurious-cue": Catalogue()})], env=env, entry_points=False)


@pytest.mark.parametrize("make", [
    lambda: _section_plugin({"acuracy": Catalogue({"stance_agreement": "s"})}),
    lambda: _section_plugin({"accuracy": Catalogue({"accuracy": "s"}, {"accuracy": False})}),
    lambda: _LazyPlugin(),
])
def test_the_cli_turns_a_bad_section_catalogue_into_exit_2(monkeypatch, make):
    import bertprobe.plugins
    from bertprobe.cli import main

    real = bertprobe.plugins.build_plugins
    monkeypatch.setattr(bertprobe.plugins, "build_plugins", lambda **kw: real(extra=[make()], **kw))
    result = CliRunner().invoke(main, ["describe", "accuracy"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and (result.exception is None or isinstance(result.exception, SystemExit))
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and ("task 'stance2'" in lines[0] or lines[0].startswith("error: Catalogue directions must"))


class _LazyPlugin:
    """A plugin whose section's catalogue is built when it registers: malformed (a direction that is a word)."""

    @hookimpl
    def bertprobe_register_sections(self, registry):
        registry.add("accuracy", SimpleNamespace(catalogue=Catalogue({"stance_agreement": "s"}, {"stance_agreement": "up"})),
                     task="stance2")


def test_a_plugin_sections_default_gates_its_own_tasks_models_only(suite_factory, monkeypatch):
    """A section's default on a pattern a classifier's result also has (``*accuracy``: its overall accuracy) gates
    the task's model, never a classifier's: a run judges by the probe's own entries and its model's task's section."""
    from bertprobe.harness import run_suite
    from bertprobe.suite import load_suite

    impossible = DefaultExpectation("*accuracy", min=1.01, why="a test bound no model meets")
    plugin = _section_plugin({"accuracy": Catalogue({"stance_agreement": "s"}, defaults=(impossible,))})
    probes = "  - probe: accuracy\n    params: {single_check: 0}\n"
    monkeypatch.setattr(AccuracyProbe, "tasks", AccuracyProbe.tasks | {"stance2"})  # as a probe listing it would
    judged = {}
    for task in ("auto", "stance2"):  # auto: the tiny classifier is read as a classification model
        suite = suite_factory(probes)
        if task != "auto":
            suite.write_text(suite.read_text().replace("device: cpu}", "device: cpu, task: stance2}"))
        session = run_suite(load_suite(suite), build_plugins(extra=[plugin], entry_points=False))
        (result,) = session.report.probes
        assert result.value("accuracy") is not None  # what the pattern matches, on both models
        judged[task] = (result.status, {e.metric for e in result.expectations if e.min == 1.01})
    assert judged["auto"][1] == set()  # the classifier: not gated by the plugin task's bound
    assert judged["stance2"] == ("failed", {"accuracy"})


class _Bare(Probe):
    """A plugin's probe that declares no metrics of its own."""

    name = "bare"
    description = "a probe without a catalogue of its own"

    def run(self, target, data, params, ctx):  # pragma: no cover - never run here
        return ProbeResult(self.name)


class _BarePlugin:
    def __init__(self, adds: bool) -> None:
        self.adds = adds

    @hookimpl
    def bertprobe_register_probes(self, registry):
        registry.add(_Bare)

    @hookimpl
    def bertprobe_register_sections(self, registry):
        if self.adds:
            registry.add("bare", SimpleNamespace(catalogue=Catalogue({"bare_score": "what a section measures in its place"},
                                                                     {"bare_score": False})), task="classification")


@pytest.mark.parametrize("adds", [True, False])
def test_describe_shows_the_merged_catalogue_of_a_probe_without_metrics_of_its_own(monkeypatch, adds):
    import bertprobe.plugins
    from bertprobe.cli import main

    real = bertprobe.plugins.build_plugins
    monkeypatch.setattr(bertprobe.plugins, "build_plugins", lambda **kw: real(extra=[_BarePlugin(adds)], **kw))
    result = CliRunner().invoke(main, ["describe", "bare"])
    assert result.exit_code == 0, result.output
    metrics = result.output.split("\nMetrics", 1)[1]
    if adds:  # what its section adds, and that expect: still takes any name
        assert "bare_score" in metrics and "lower is better" in metrics and "(any)" not in metrics
        assert "declares none of its own, so expect: may name any" in metrics
    else:
        assert metrics.strip().endswith("(any)")
