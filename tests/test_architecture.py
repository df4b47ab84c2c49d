"""The shape of the package: floors without circles or upward imports, a thin harness, the public API."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import sys
from pathlib import Path

import pytest

import bertprobe as bertprobe_package

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import architecture  # noqa: E402

GRAPH = architecture.build()


def _family(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "probes" else None


def test_every_module_is_on_a_floor():
    for module in GRAPH.modules:
        if module not in architecture.FACADES:
            architecture.floor_of(module)  # raises for a module no floor names


def test_no_import_circles():
    assert GRAPH.circles() == []


def test_no_import_runs_from_a_lower_floor_to_a_higher_one():
    assert GRAPH.upward() == []


def test_no_module_imports_another_modules_private_name():
    assert GRAPH.private == []


def test_only_the_cli_and_the_orchestrator_import_the_harness_and_nothing_inside_imports_the_facades():
    importers = {a for a, targets in GRAPH.arrows.items() if "bertprobe.harness" in targets}
    assert importers == {"bertprobe.cli", "bertprobe.orchestrate"}
    assert {a for a, targets in GRAPH.arrows.items() if "bertprobe.orchestrate" in targets} == {"bertprobe.cli"}
    for facade in architecture.FACADES:
        assert not [a for a, targets in GRAPH.arrows.items() if facade in targets and a not in architecture.FACADES]


def test_the_harness_is_thin():
    assert len(GRAPH.modules["bertprobe.harness"].read_text(encoding="utf-8").splitlines()) < 300


def test_probe_families_import_only_lower_floors_and_the_shared_attacks():
    for a, targets in GRAPH.arrows.items():
        family = _family(a)
        for b in targets:
            other = _family(b)
            if family and other and other != family:
                assert other == architecture.SHARED_PROBE_MACHINERY, f"{a} imports the probe family of {b}"


def test_no_top_level_module_serves_a_single_probe_family():
    top_level = [m for m in GRAPH.modules if m.count(".") == 1 and m not in architecture.FACADES]
    for module in top_level:
        importers = {a for a, targets in GRAPH.arrows.items() if module in targets}
        families = {_family(a) for a in importers}
        assert not (importers and len(families) == 1 and None not in families), \
            f"{module} serves only probes/{families.pop()}: move it into that family's folder"


def test_the_checker_finds_circles_upward_and_private_imports(tmp_path):
    """The rules above could fail: a planted circle, upward import and private import are all found."""
    pkg = tmp_path / "bertprobe"
    for folder in ("data", "model"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("from bertprobe.stats import _helper\n")
    (pkg / "stats.py").write_text("def f():\n    import bertprobe.errors\n")
    (pkg / "data" / "dataset.py").write_text("from bertprobe.model.spec import ModelSpec\n")
    (pkg / "model" / "spec.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bertprobe.cli import main\n")
    graph = architecture.build(tmp_path)
    assert graph.circles() == [["bertprobe.errors", "bertprobe.stats"]]
    assert graph.upward() == [("bertprobe.data.dataset", "bertprobe.model.spec")]  # TYPE_CHECKING is left out
    assert graph.private == [("bertprobe.errors", "bertprobe.stats", "_helper")]


def test_no_import_circles_even_counting_type_only_imports():
    """A type checker follows the imports under ``if TYPE_CHECKING:``; they too run one way (the session names
    what it asks of an executor in a Protocol of its own, and the executors import the session)."""
    assert architecture.build(type_only=True).circles() == []


def test_the_type_only_graph_sees_a_circle_through_type_checking(tmp_path):
    pkg = tmp_path / "bertprobe"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bertprobe.stats import f\n")
    (pkg / "stats.py").write_text("from bertprobe.errors import E\n")
    assert architecture.build(tmp_path).circles() == []
    assert architecture.build(tmp_path, type_only=True).circles() == [["bertprobe.errors", "bertprobe.stats"]]


def test_the_task_names_the_check_knows_are_the_registered_ones():
    from bertprobe.tasks import builtin_tasks

    assert architecture.task_names() == set(builtin_tasks().names())


def test_no_code_outside_the_tasks_compares_a_task_name():
    """What differs per task lives in the task (its methods, and what it declares: ``word_tags``, ``label_sets``,
    ``rows_per_choice``, ``headless``...); a probe or the model wing asks it, so adding a task touches only the
    probes that support it. 25 such comparisons on 2026-11-27, before the move."""
    assert architecture.task_name_comparisons() == []


def test_the_task_name_check_finds_comparisons_membership_tests_and_match_cases(tmp_path):
    (tmp_path / "bertprobe" / "tasks").mkdir(parents=True)
    (tmp_path / "bertprobe" / "tasks" / "mine.py").write_text(
        "class Mine:\n    name: ClassVar[str] = 'mine'\n\nclass Other:\n    name = 'other'\n"
        "def f(task):\n    return task.name == 'mine'\n")  # inside tasks/: allowed
    (tmp_path / "bertprobe" / "probes").mkdir()
    (tmp_path / "bertprobe" / "probes" / "p.py").write_text(
        "tasks = frozenset({'mine', 'other'})\n"                    # a declaration: allowed
        "def run(target, task, caps):\n"
        "    a = target.task.name == 'mine'\n"
        "    b = 'other' != task\n"
        "    c = task not in ('mine', 'x')\n"
        "    d = 'mine' in caps\n"
        "    e = task.name in frozenset({'other'})\n"
        "    f = task.name == 'minefield' or task.kind == 'x'\n"    # not a task's name: allowed
        "    match task.name:\n"
        "        case 'x' | 'other':\n"
        "            pass\n"
        "        case 'mine':\n"
        "            pass\n")
    assert architecture.task_names(tmp_path) == {"mine", "other"}
    found = architecture.task_name_comparisons(tmp_path)
    assert [(path, line) for path, line, _ in found] == [("bertprobe/probes/p.py", n) for n in (3, 4, 5, 6, 7, 10, 12)]


def test_no_probe_module_chooses_a_section_by_a_meaning_flag():
    """Where what a probe measures differs by kind of model, it asks the sections lookup (``ctx.section``), the one
    place that reads a task's meaning flags to pick a built-in section: no module under ``bertprobe/probes/`` reads
    one on a task. 12 such reads in probes on 2026-12-01, before the third pass (universal-trigger 4, behaviour 3,
    backdoor-scan 2, head-pruning 1, attacks/span_trigger 1, accuracy 1), and 5 in accuracy, calibration and
    slices before the second."""
    assert architecture.meaning_flag_reads() == []


def test_the_meaning_flag_check_finds_attribute_reads_and_getattr_on_tasks(tmp_path):
    (tmp_path / "bertprobe" / "probes" / "fam").mkdir(parents=True)
    (tmp_path / "bertprobe" / "probes" / "fam" / "p.py").write_text(
        "def run(target, task, case, other):\n"
        "    if target.task.word_tags:\n"
        "        pass\n"
        "    x = task.label_sets and 1\n"
        "    y = getattr(task, 'span_answers', False)\n"
        "    task.word_tags = True\n"                       # a write, no read: allowed
        "    z = other.task.own_predictions or task.tags\n"  # every flag; another name: allowed
        "    w = case.label_sets or getattr(case, 'word_tags')\n")  # a case's own attribute: allowed
    found = architecture.meaning_flag_reads(tmp_path)
    assert [(path, line) for path, line, _ in found] == [("bertprobe/probes/fam/p.py", n) for n in (2, 4, 5, 7)]
    assert architecture.meaning_flag_reads(tmp_path, ("bertprobe/probes/absent.py",)) == []


def test_task_has_no_method_named_after_a_probe():
    """A task says what a model's outputs mean; what a probe measures on it is the probe's section. 15 methods and
    attributes named after probes on the task classes on 2026-12-01 (``audit_accuracy``, ``slice_units``,
    ``sweep_rows``, ``probe_metrics``...), before the third pass."""
    assert architecture.task_methods_named_after_probes() == []


def test_the_probe_name_check_finds_methods_and_attributes(tmp_path):
    (tmp_path / "bertprobe" / "tasks").mkdir(parents=True)
    (tmp_path / "bertprobe" / "tasks" / "t.py").write_text(
        "class T:\n"
        "    probe_metrics = {}\n"
        "    name: str = 't'\n"
        "    def audit_accuracy(self): ...\n"
        "    def slice_units(self): ...\n"
        "    def sweeps(self): ...\n"
        "    def decode(self): ...\n"
        "    def answers(self): ...\n")
    found = architecture.task_methods_named_after_probes(tmp_path)
    assert [(line, name) for _, line, name in found] == [(2, "probe_metrics"), (4, "audit_accuracy"),
                                                          (5, "slice_units"), (6, "sweeps")]


def test_no_type_ignore_reaches_into_a_task_subclass():
    """A section serves one kind of task and says so (``typing.cast`` to its class): 4 ``# type: ignore[attr-defined]``
    on task attributes in probes on 2026-12-01 (``thresholds`` x3, ``entity_types``), 6 counting the task wing."""
    assert architecture.task_attribute_ignores() == []


def test_no_probe_package_hides_its_logic_behind_its_face(tmp_path):
    """A probe family's code lives in named modules (``probe.py`` and its sections); its ``__init__.py`` holds a
    docstring and re-exports. ``head_pruning/__init__.py`` held the whole probe (710 lines of logic) on 2026-12-01."""
    assert architecture.heavy_inits() == []
    (tmp_path / "bertprobe" / "probes" / "fam").mkdir(parents=True)
    (tmp_path / "bertprobe" / "probes" / "fam" / "__init__.py").write_text(
        '"""A family.\n\nIts docstring: no logic.\n"""\n# a comment\n\nfrom x import y\n' + "z = 1\n" * 40)
    assert architecture.heavy_inits(tmp_path) == [("bertprobe/probes/fam/__init__.py", 41)]
    assert architecture.heavy_inits(tmp_path, limit=41) == []


def test_no_probe_imports_a_tasks_metric_catalogue():
    """What a task's section measures in a probe's place, the task adds to the probe's catalogue
    (``Task.probe_metrics``, gathered by ``Probe.catalogue`` from the registered tasks): no probe imports a task
    module's metrics, directions or defaults to splice into its own. 12 such imports and splices on 2026-11-27,
    before the move (accuracy 6, calibration 3, spurious-cues 3)."""
    assert architecture.task_catalogue_imports() == []


def test_the_catalogue_check_finds_imported_catalogues_and_attributes_built_from_task_names(tmp_path):
    (tmp_path / "bertprobe" / "probes").mkdir(parents=True)
    (tmp_path / "bertprobe" / "probes" / "p.py").write_text(
        "from bertprobe.tasks.qa_accuracy import QA_METRICS, excerpt\n"     # a task's catalogue
        "from bertprobe.tasks.squad_metrics import QUESTION_WORDS\n"        # a helper: allowed
        "from bertprobe.tasks import qa_partial as qp\n"
        "import bertprobe.tasks.qa_adversarial as adv\n"
        "from bertprobe.tasks.qa_calibration import QA_DIRECTIONS as D\n"   # renamed, still a catalogue
        "class P:\n"
        "    metrics = {'a': 'x', **QA_METRICS}\n"
        "    metric_directions = {**adv.DIRECTIONS}\n"
        "    defaults = qp.QUESTION_MODES\n"                                # an attribute built from a task module
        "    key_metrics = ('a',)\n"
        "    tasks = frozenset({'question-answering'})\n"
        "    words = QUESTION_WORDS\n"
        "    def run(self):\n"
        "        return excerpt(QUESTION_WORDS)\n")
    found = architecture.task_catalogue_imports(tmp_path)
    assert [(path, line) for path, line, _ in found] == [("bertprobe/probes/p.py", n) for n in (1, 5, 7, 8, 9)]


@pytest.mark.parametrize("module, names", [
    ("bertprobe", ["Probe", "ProbeResult", "ProbeContext", "Sweep", "Finding", "Metric", "Outcomes", "RunReport",
                   "hookimpl", "BertprobeError", "DataError", "ProbeError", "SuiteError", "TargetError", "__version__",
                   "Target", "ModelSpec", "load_target"]),
    ("bertprobe.results.outcomes", ["Outcomes", "example_ids"]),
    ("bertprobe.probe", ["unit_seed", "Probe", "ProbeContext", "Sweep"]),
    ("bertprobe.model", ["head_intervention", "evaluate_units", "frozen_parameters"]),
    ("bertprobe.testing", ["tiny_target", "save_tiny_model", "sentiment_examples", "train_tiny_classifier"]),
    ("bertprobe.hookspecs", ["hookimpl", "bertprobe_register_probes", "bertprobe_session_finish"]),
    ("bertprobe.capabilities", ["unknown"]),
    ("bertprobe.data", ["Dataset", "Example", "DataSpec"]),
    ("bertprobe.model", ["Target", "ModelSpec", "load_target"]),
    ("bertprobe.errors", ["ProbeError"]),
    ("bertprobe.results", ["Finding", "Metric", "ProbeResult"]),
    ("bertprobe.executors", ["ExecutorSpec", "Executor"]),
])
def test_documented_imports_keep_working(module, names):
    """What the README and the two plugins under plugins/ import."""
    loaded = importlib.import_module(module)
    missing = [n for n in names if not hasattr(loaded, n)]
    assert not missing


def test_a_moved_name_is_the_same_object_as_in_its_new_home():
    import bertprobe
    from bertprobe.model import head_intervention
    from bertprobe.model.interventions import head_intervention as moved
    from bertprobe.model.target import Target

    assert head_intervention is moved and bertprobe.Target is Target


def test_the_contract_re_exports_what_moved_out_of_it_and_imports_no_model_machinery():
    """``Sweep`` lives in ``bertprobe.execution`` and ``Predictions`` in ``bertprobe.model.predictions``; both stay
    importable from ``bertprobe.probe``, whose import loads no model wing (``Predictions`` comes when asked for)."""
    import subprocess

    from bertprobe import execution, probe
    from bertprobe.model import predictions

    assert probe.Sweep is execution.Sweep and probe.Predictions is predictions.Predictions
    code = "import sys, bertprobe.probe; print('bertprobe.model' in sys.modules, 'torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(bertprobe_package.__file__).resolve().parent.parent)
    assert done.stdout.split() == ["False", "False"]


def test_the_model_wing_is_named_for_what_it_holds_and_the_old_path_warns():
    package = Path(bertprobe_package.__file__).parent
    assert not (package / "target").exists() and not (package / "interventions.py").exists()
    with pytest.warns(DeprecationWarning, match="bertprobe.model"):
        old = importlib.reload(importlib.import_module("bertprobe.target"))
    from bertprobe.model import Target

    assert old.Target is Target


def test_mermaid_diagram_names_every_wing():
    text = architecture.mermaid(GRAPH)
    for name, _ in architecture.FLOORS:
        assert f'    {name}["{name}' in text
    assert "    cli --> harness" in text and "    harness --> run" in text
    assert "    harness --> executors" not in text  # the harness gets its executor from the plugin registry


def test_the_architecture_page_shows_the_current_diagram_and_wings():
    page = (Path(__file__).resolve().parent.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert architecture.wings_table(GRAPH) in page, "docs/architecture.md is stale: run python tools/architecture.py --update-docs"
    assert "```mermaid\n" + architecture.mermaid(GRAPH) + "\n```" in page, \
        "docs/architecture.md is stale: run python tools/architecture.py --update-docs"


STATE_FIELDS = ("running", "units", "kept", "hashes")
MUTATORS = ("add", "discard", "remove", "setdefault", "pop", "popitem", "clear", "update", "append", "extend")


def _state_field(node: ast.AST) -> str | None:
    """``X.state.FIELD`` (or ``state.FIELD``): the field's name."""
    if isinstance(node, ast.Attribute) and node.attr in STATE_FIELDS:
        base = node.value
        if (isinstance(base, ast.Attribute) and base.attr == "state") or (isinstance(base, ast.Name) and base.id == "state"):
            return node.attr
    return None


def _writes_to_run_state(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        for target in targets:
            inner = target.value if isinstance(target, ast.Subscript) else target
            if _state_field(inner) or (isinstance(target, ast.Attribute) and target.attr == "state"
                                       and not (isinstance(target.value, ast.Name) and target.value.id == "self")):
                found.append(f"line {node.lineno}: {ast.unparse(target)}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            if _state_field(node.func.value):
                found.append(f"line {node.lineno}: {ast.unparse(node.func)}")
    return found


def test_the_run_state_has_one_writer():
    """Only ``RunState.apply`` (in run/state.py) changes what is running, which units finished, what is
    kept and which weights were loaded; everything else reads the state, or emits an event."""
    package = Path(bertprobe_package.__file__).parent
    writes = {}
    for path in package.rglob("*.py"):
        if path.relative_to(package).as_posix() == "run/state.py":
            continue
        found = _writes_to_run_state(ast.parse(path.read_text(encoding="utf-8")))
        if found:
            writes[path.relative_to(package).as_posix()] = found
    assert writes == {}
    bad = ast.parse("session.state.running['m'] = 'p'\nsession.state.units.setdefault(k, {})\njob.state = s\n")
    assert len(_writes_to_run_state(bad)) == 3  # the check sees each kind of write


def test_the_session_is_small_and_holds_no_state_of_its_own():
    from bertprobe.executors.worker import WorkerSession
    from bertprobe.run.session import Session

    assert len(dataclasses.fields(Session)) <= 10
    assert [f.name for f in dataclasses.fields(WorkerSession)] == [f.name for f in dataclasses.fields(Session)]


def test_one_class_per_concept_name():
    package = Path(bertprobe_package.__file__).parent
    where: dict[str, list[str]] = {}
    for path in package.rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(path.relative_to(package).as_posix())
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}
    assert {"Verdict", "Session", "RunState", "RunCaches"} <= set(where)


def test_each_built_in_probe_lives_in_a_module_named_after_it():
    from bertprobe.plugins import build_plugins

    plugins = build_plugins(entry_points=False)
    for name in plugins.probes.names():
        module = plugins.probes.get(name).__module__
        if not module.startswith("bertprobe.probes."):
            continue
        parts = module.split(".")[2:]
        named = parts[0] if parts[-1] == "probe" else parts[-1]
        if named in PROBE_FAMILIES:  # a family package's probe.py holds the probes of one kind, each named here
            assert name in PROBE_FAMILIES[named], f"probe {name} lives in family {named}, which does not name it"
            continue
        assert named == name.replace("-", "_"), f"probe {name} lives in {module}"


# probe family packages whose name is the method, not the probe: minimal pairs scored by a masked LM (BLiMP; a
# later minimal-pair benchmark joins it), so a probe's name is not its package's
PROBE_FAMILIES = {"minimal_pairs": {"blimp"}}


PUBLIC_MODULES = {"bertprobe", "bertprobe.data", "bertprobe.model", "bertprobe.results", "bertprobe.errors", "bertprobe.tasks",
                  "bertprobe.stats"}


def test_the_plugins_under_plugins_import_only_the_public_api():
    """Third-party plugins are written against the package's faces, so the wings can move behind them: the public
    modules, and a probe family's package (``bertprobe.probes.accuracy``: what a plugin's section of that probe
    reuses), never the modules behind it."""
    root = Path(__file__).resolve().parent.parent / "plugins"
    used = {}
    for path in root.rglob("*.py"):
        if "tests" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "bertprobe":
                used[node.module] = path.relative_to(root).as_posix()
    faces = {m for m in used if m.count(".") == 2 and m.startswith("bertprobe.probes.")}
    assert used and set(used) <= PUBLIC_MODULES | faces, used
    assert faces, "the example plugin extends a built-in probe through its face"
