from __future__ import annotations

import json
import os
import textwrap

import pytest

from bertprobe.errors import PluginError
from bertprobe.plugins import DEFAULT_PLUGINS, build_plugins


def test_builtins_register_through_hooks_and_managers_are_fresh():
    a = build_plugins(entry_points=False)
    b = build_plugins(entry_points=False)
    assert a.manager is not b.manager
    assert "accuracy" in a.probes and a.probes.origin("accuracy") == "bertprobe.probes.accuracy.probe"
    assert set(a.reporters.names()) == {"json", "markdown", "html", "junit"}
    assert {row["name"] for row in a.describe()} == set(DEFAULT_PLUGINS)


def test_disable_env_blocks_plugins_by_name():
    plugins = build_plugins(entry_points=False, env={"BERTPROBE_DISABLE_PLUGINS": "bertprobe.probes.accuracy.probe, "})
    assert "accuracy" not in plugins.probes
    assert "json" in plugins.reporters
    with pytest.raises(PluginError, match="names 'bertprobe.probes.acuracy', which is no plugin .did you mean"):
        build_plugins(entry_points=False, env={"BERTPROBE_DISABLE_PLUGINS": "bertprobe.probes.acuracy"})


def test_unknown_hook_implementation_fails_loudly():
    class Typo:
        from bertprobe import hookimpl

        @hookimpl
        def bertprobe_register_probe(self, registry):  # missing 's'
            pass

    with pytest.raises(PluginError, match="bertprobe_register_probe"):
        build_plugins(extra=[Typo()], entry_points=False)


def test_probe_name_collision_names_both_plugins():
    from bertprobe import hookimpl
    from bertprobe.probes.accuracy import AccuracyProbe

    class Dup:
        @hookimpl
        def bertprobe_register_probes(self, registry):
            registry.add(AccuracyProbe)

    with pytest.raises(PluginError, match="registered twice"):
        build_plugins(extra=[Dup()], entry_points=False)


def test_plugin_discovered_through_entry_point(tmp_path, monkeypatch):
    """A distribution on sys.path with a 'bertprobe' entry point is loaded and its probe registered."""
    pkg = tmp_path / "bp_fake_plugin.py"
    pkg.write_text(textwrap.dedent('''
        from bertprobe import Probe, ProbeResult, hookimpl

        class Echo(Probe):
            name = "echo"
            description = "test probe"
            needs_data = False
            def run(self, target, data, params, ctx):
                return ProbeResult(probe="echo")

        @hookimpl
        def bertprobe_register_probes(registry):
            registry.add(Echo)
    '''))
    dist = tmp_path / "bp_fake_plugin-1.2.3.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: bp-fake-plugin\nVersion: 1.2.3\n")
    (dist / "entry_points.txt").write_text("[bertprobe]\nfake = bp_fake_plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins = build_plugins()
    assert "echo" in plugins.probes and plugins.probes.origin("echo") == "fake"
    row = next(r for r in plugins.describe() if r["name"] == "fake")
    assert row["version"] == "1.2.3" and "bp-fake-plugin" in row["source"]
    blocked = build_plugins(env={"BERTPROBE_DISABLE_PLUGINS": "fake"})
    assert "echo" not in blocked.probes


def test_example_plugin_is_installed_in_ci():
    try:
        import bertprobe_example  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("plugins/bertprobe-example is not installed")
    plugins = build_plugins()
    assert plugins.probes.origin("typo-consistency") == "example"


def test_typo_helper_is_seeded():
    pytest.importorskip("bertprobe_example")
    import random

    from bertprobe_example.probe import add_typos

    a = add_typos("the movie was wonderful", 1, random.Random(1))
    assert a == add_typos("the movie was wonderful", 1, random.Random(1))
    assert a != "the movie was wonderful" and sorted(a) == sorted("the movie was wonderful")


def test_a_probe_requiring_an_unknown_capability_is_refused_at_registration():
    from bertprobe import Probe, ProbeResult, hookimpl

    class Typo(Probe):
        name = "typo-req"
        requires = frozenset({"atentions", "data:layer:head"})

        def run(self, target, data, params, ctx):
            return ProbeResult(probe=self.name)

    class Plugin:
        @hookimpl
        def bertprobe_register_probes(self, registry):
            registry.add(Typo)

    with pytest.raises(PluginError, match=r"requires unknown capabilities: 'atentions' \(did you mean 'attentions'\?\)"):
        build_plugins(extra=[Plugin()], entry_points=False)
    # every built-in probe's requirements are known names
    from bertprobe.capabilities import unknown

    plugins = build_plugins(entry_points=False)
    assert all(not unknown(plugins.probes.get(n).requires) for n in plugins.probes.names())


@pytest.mark.parametrize("task", ["question-answering", "stance"])
def test_a_probe_requiring_a_task_is_told_to_list_it_in_tasks(task):
    """Capabilities name abilities: a task's name (a built-in task's or a plugin's own) in ``requires`` is refused at
    registration, in one line that says to list the task in ``tasks`` instead."""
    from bertprobe import Probe, ProbeResult, hookimpl
    from bertprobe.tasks import SingleLabelClassification

    class Stance(SingleLabelClassification):
        name = "stance"

    class ByTask(Probe):
        name = "by-task"
        requires = frozenset({task, "predictions"})

        def run(self, target, data, params, ctx):
            return ProbeResult(probe=self.name)

    class Plugin:
        @hookimpl
        def bertprobe_register_tasks(self, registry):
            registry.add(Stance)

        @hookimpl
        def bertprobe_register_probes(self, registry):
            registry.add(ByTask)

    with pytest.raises(PluginError) as raised:
        build_plugins(extra=[Plugin()], entry_points=False)
    message = str(raised.value)
    assert "\n" not in message
    assert f"requires '{task}', a task and no capability" in message
    assert f"list the task in the probe's tasks instead: tasks = frozenset({{'{task}'}})" in message


def test_reports_are_written_by_a_builtin_plugin_before_other_plugins_finish(suite_factory, tmp_path):
    """Report writing is the hookimpls of ``bertprobe.run.reports``: they run first, so another plugin's
    ``bertprobe_session_finish`` already finds report.json, and a partial report exists after each probe."""
    from bertprobe import hookimpl
    from bertprobe.harness import run_suite
    from bertprobe.suite import load_suite

    seen: dict[str, object] = {}

    class Watcher:
        @hookimpl
        def bertprobe_probe_result(self, session, result):
            seen["partial"] = (session.run_dir / "report.json").is_file()

        @hookimpl
        def bertprobe_session_finish(self, session, report):
            on_disk = json.loads((session.run_dir / "report.json").read_text())
            seen["final_status"] = on_disk["status"]

    plugins = build_plugins(extra=[Watcher()], entry_points=False)
    run_suite(load_suite(suite_factory()), plugins)
    assert seen == {"partial": True, "final_status": "completed"}


def test_blocking_the_report_plugin_leaves_only_the_event_log(suite_factory):
    from bertprobe.harness import run_suite
    from bertprobe.suite import load_suite

    plugins = build_plugins(entry_points=False, env={"BERTPROBE_DISABLE_PLUGINS": "bertprobe.run.reports"})
    session = run_suite(load_suite(suite_factory()), plugins)
    assert session.report.status == "completed"
    assert sorted(p.name for p in session.run_dir.iterdir()) == ["events.jsonl", "outcomes.jsonl"]
    assert not (session.run_dir.parent / "index.html").exists()


def test_the_example_plugin_extends_the_accuracy_probe_for_its_own_task_through_the_section_hook(tmp_path):
    """``bertprobe_example.ordinal``: a task and a section of the built-in accuracy probe, registered through the
    hooks alone; a run on an ``ordinal`` model writes the probe's own per-class metrics and the section's, the
    section's equal to the distances computed here from the run's own outcomes, and its default bound gates them."""
    ordinal = pytest.importorskip("bertprobe_example.ordinal")
    from bertprobe_example.ordinal import Ordinal, OrdinalAccuracy

    from bertprobe import ModelSpec
    from bertprobe.data import Example
    from bertprobe.harness import run_suite
    from bertprobe.model.loading import load_target
    from bertprobe.suite import load_suite
    from bertprobe.testing import save_tiny_model

    stars = ("one", "two", "three", "four")
    model = save_tiny_model(tmp_path / "stars", labels=stars, seed=4)
    rows = [(f"the movie was {w} {v}", stars[i % 4]) for i, (w, v) in
            enumerate((w, v) for w in ("good", "bad", "dull", "fun", "great") for v in ("a", "the", "this", "it"))]
    (tmp_path / "d.tsv").write_text("sentence\tlabel\n" + "".join(f"{t}\t{g}\n" for t, g in rows))
    suite = tmp_path / "s.yaml"
    suite.write_text(f"suite: stars\nmodel: {{path: '{model}', device: cpu, task: ordinal}}\n"
                     f"data: {{path: '{tmp_path / 'd.tsv'}', text: sentence, label: label}}\n"
                     f"report: {{dir: '{tmp_path / 'reports'}'}}\nprobes:\n  - probe: accuracy\n"
                     "    params: {single_check: 0}\n")
    plugins = build_plugins(extra=[ordinal])  # a plugin object, as an entry point would register it
    assert plugins.tasks.get("ordinal") is Ordinal
    assert isinstance(plugins.sections.find("accuracy", Ordinal), OrdinalAccuracy)
    assert plugins.sections.find("accuracy", plugins.tasks.get("classification")) is None  # others keep theirs
    (result,) = run_suite(load_suite(suite), plugins).report.probes
    target = load_target(ModelSpec(path=str(model), device="cpu"))
    predicted = target.predict([Example(text, label=None, id=str(i)) for i, (text, _) in enumerate(rows)])
    distance = [abs(p - stars.index(g)) for p, (_, g) in zip(predicted, rows)]
    assert result.value("mean_absolute_error") == pytest.approx(sum(distance) / len(rows))
    assert result.value("within_one") == pytest.approx(sum(d <= 1 for d in distance) / len(rows))
    assert {"accuracy", "accuracy_one", "examples"} <= set(result.metrics)  # the probe's own audit ran first
    gated = {e.metric: e for e in result.expectations}
    assert gated["within_one"].min == 0.9 and gated["within_one"].source == "default"
