"""The import graph of the bertprobe package, read with Python's ``ast`` (nothing is imported).

    python tools/architecture.py            # figures: modules, arrows, circles, upward and private imports
    python tools/architecture.py --mermaid  # the wings and the arrows between them, as a Mermaid diagram
    python tools/architecture.py --update-docs  # rewrite the diagram and the figures in docs/architecture.md

``tests/test_architecture.py`` asserts the rules on the same graph, and ``docs/architecture.md`` shows
the diagram. Imports under ``if TYPE_CHECKING:`` are left out (they never run), except in the graph built
with ``type_only=True``, which must have no circles either. ``task_name_comparisons`` finds code outside
``bertprobe/tasks/`` that compares a value with a task's name (a probe asks its task, it never names one);
``meaning_flag_reads`` finds probe modules that read a task's meaning flags (``word_tags``, ``span_answers``...)
instead of asking the sections lookup (``bertprobe.sections``); ``task_methods_named_after_probes`` finds ``Task``
methods that are a probe's section; ``task_attribute_ignores`` finds ``# type: ignore[attr-defined]`` reaching into
a task subclass; ``heavy_inits`` finds probe packages with logic behind their face; ``task_catalogue_imports``
finds the probes that import a task module's metric catalogue (``QA_METRICS``...) instead of letting the section
declare it (its ``catalogue``).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "bertprobe"

# Floors from the bottom up. A module imports from its own floor or lower ones, never from a higher one.
# A name ending in "." takes a whole subpackage.
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("version", "errors", "registry", "capabilities", "params", "progress", "stats", "hub",
                    "hookmarkers", "hookspecs", "environment", "variables")),
    ("results", ("results.",)),
    ("data", ("data.",)),
    ("tasks", ("tasks.",)),
    ("model", ("model.",)),
    ("contract", ("probe", "execution", "sections", "plugins", "catalog", "testing")),
    ("probes", ("probes.",)),
    ("reporters", ("reporters.",)),
    ("suite", ("suite.",)),
    ("run", ("run.",)),
    ("executors", ("executors.",)),
    ("harness", ("harness", "orchestrate")),
    ("cli", ("cli", "__main__")),
)
# The public face: the package itself and names kept where the README once documented them. They
# import from any floor and nothing inside the package imports them.
# target and outcomes: the deprecated names of the model wing and of the results wing's outcomes, re-exported
FACADES = (PACKAGE, f"{PACKAGE}.target", f"{PACKAGE}.outcomes")
SHARED_PROBE_MACHINERY = "attacks"  # probes/attacks: what several probe families share


@dataclass
class Graph:
    modules: dict[str, Path]
    arrows: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    private: list[tuple[str, str, str]] = field(default_factory=list)  # (importer, module, name)

    def circles(self) -> list[list[str]]:
        """Strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        found: list[list[str]] = []
        counter = 0
        for root in sorted(self.modules):
            if root in index:
                continue
            work = [(root, iter(sorted(self.arrows.get(root, ()))))]
            index[root] = low[root] = counter
            counter += 1
            stack.append(root)
            on_stack.add(root)
            while work:
                node, children = work[-1]
                child = next(children, None)
                if child is not None:
                    if child not in index:
                        index[child] = low[child] = counter
                        counter += 1
                        stack.append(child)
                        on_stack.add(child)
                        work.append((child, iter(sorted(self.arrows.get(child, ())))))
                    elif child in on_stack:
                        low[node] = min(low[node], index[child])
                    continue
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
        return found

    def upward(self) -> list[tuple[str, str]]:
        """Imports from a lower floor to a higher one."""
        return [(a, b) for a in sorted(self.arrows) for b in sorted(self.arrows[a])
                if a not in FACADES and b not in FACADES and floor_of(a) < floor_of(b)]

    def arrow_count(self) -> int:
        return sum(len(targets) for targets in self.arrows.values())


def floor_of(module: str) -> int:
    """The floor index of a module (ValueError for one that no floor names)."""
    rest = module[len(PACKAGE) + 1:]
    for i, (_, members) in enumerate(FLOORS):
        for member in members:
            if rest == member.rstrip(".") or (member.endswith(".") and rest.startswith(member)):
                return i
    raise ValueError(f"{module} is on no floor of tools/architecture.py")


def wing_of(module: str) -> str:
    """The floor's name, or the module's own name for a facade."""
    return module if module in FACADES else FLOORS[floor_of(module)][0]


def _module_names(root: Path) -> dict[str, Path]:
    names = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skipped


def build(root: Path = ROOT, type_only: bool = False) -> Graph:
    """Every import between the package's modules (top-level and inside functions); with ``type_only``, the
    imports under ``if TYPE_CHECKING:`` too (what a type checker follows)."""
    graph = Graph(_module_names(root))

    def owner(name: str) -> str | None:
        while name and name not in graph.modules:
            name = name.rpartition(".")[0]
        return name or None

    for module, path in graph.modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = set() if type_only else _type_checking_nodes(tree)
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            targets: list[tuple[str, str | None]] = []
            if isinstance(node, ast.Import):
                targets = [(alias.name, None) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = module.split(".") if is_package else module.split(".")[:-1]
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.append((full if full in graph.modules else base, alias.name))
            for target, name in targets:
                if not (target == PACKAGE or target.startswith(PACKAGE + ".")):
                    continue
                found = owner(target)
                if found and found != module:
                    graph.arrows[module].add(found)
                if name and name.startswith("_") and not name.startswith("__") and found != module:
                    graph.private.append((module, target, name))
    return graph


def task_names(root: Path = ROOT) -> set[str]:
    """The names the tasks under ``bertprobe/tasks/`` register: each class's ``name = "..."``."""
    names = set()
    for path in sorted((root / PACKAGE / "tasks").rglob("*.py")):
        for cls in [n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.ClassDef)]:
            for stmt in cls.body:
                target = stmt.target if isinstance(stmt, ast.AnnAssign) else (
                    stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None)
                value = getattr(stmt, "value", None)
                if isinstance(target, ast.Name) and target.id == "name" and isinstance(value, ast.Constant) \
                        and isinstance(value.value, str):
                    names.add(value.value)
    return names


def _named(node: ast.AST, names: set[str]) -> list[str]:
    """The task names written as string constants anywhere inside ``node``."""
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and n.value in names]


def _comparisons(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """(line, code) of each comparison with a task's name: ``==``/``!=``/``is`` against one, ``in``/``not in``
    with one on either side (``task in ("a", "b")``, ``"a" in caps``), and ``match`` cases on one."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, operands, operands[1:]):
                if isinstance(op, (ast.In, ast.NotIn)):
                    hit = _named(left, names) or _named(right, names)
                else:
                    hit = [x.value for x in (left, right) if isinstance(x, ast.Constant) and x.value in names]
                if hit:
                    found.append((node.lineno, ast.unparse(node)))
                    break
        elif isinstance(node, ast.match_case):
            values = [n.value for n in ast.walk(node.pattern) if isinstance(n, ast.MatchValue)]
            if any(_named(v, names) for v in values):
                found.append((node.pattern.lineno, f"case {ast.unparse(node.pattern)}"))
    return found


def task_name_comparisons(root: Path = ROOT, names: set[str] | None = None) -> list[tuple[str, int, str]]:
    """(path, line, code) of every comparison with a registered task's name outside ``bertprobe/tasks/``: what
    differs per task belongs to the task (its methods and the capabilities it declares), so adding a task
    touches only the probes that support it. A probe's ``tasks = frozenset({...})`` declares, it compares nothing."""
    names = task_names(root) if names is None else names
    found = []
    for path in sorted((root / PACKAGE).rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith(f"{PACKAGE}/tasks/"):
            continue
        found += [(relative, line, code) for line, code in _comparisons(ast.parse(path.read_text(encoding="utf-8")), names)]
    return found


# What a task declares so that the model wing can choose without naming it (``Task``'s meaning flags). A probe reads
# none of them: where what it measures differs by kind of model it asks the sections lookup (``bertprobe.sections``,
# the one place that reads them to pick a built-in section), so a new task's section is a module of the probe's
# own package, never a branch in the probe.
MEANING_FLAGS = ("word_tags", "label_sets", "span_answers", "rows_per_choice", "headless", "own_predictions",
                 "listed_probes_only", "unnamed_classes_are_indices")
PROBES_DIR = f"{PACKAGE}/probes"


def _is_task(node: ast.AST) -> bool:
    """Whether ``node`` reads as a task (``task``, ``target.task``, ``other.task``...): a flag read on anything else
    (a CheckList case's own ``label_sets``) is that object's own attribute."""
    text = ast.unparse(node)
    return text == "task" or text.endswith(".task") or text.endswith("_task")


def _flag_reads(tree: ast.AST, flags: tuple[str, ...]) -> list[tuple[int, str]]:
    """(line, code) of each read of a meaning flag on a task: ``target.task.word_tags``, ``task.label_sets``, or
    ``getattr(task, "word_tags")``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in flags and isinstance(node.ctx, ast.Load) \
                and _is_task(node.value):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") \
                and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value in flags \
                and _is_task(node.args[0]):
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def _probe_modules(root: Path) -> list[str]:
    return [p.relative_to(root).as_posix() for p in sorted((root / PROBES_DIR).rglob("*.py"))]


def meaning_flag_reads(root: Path = ROOT, paths: tuple[str, ...] | None = None,
                       flags: tuple[str, ...] = MEANING_FLAGS) -> list[tuple[str, int, str]]:
    """(path, line, code) of every meaning-flag read on a task in ``paths`` (None: every module under
    ``bertprobe/probes/``): a probe asks ``ctx.section(name, task)`` for its section instead of choosing one by a
    flag."""
    found = []
    for relative in _probe_modules(root) if paths is None else paths:
        path = root / relative
        if path.exists():
            found += [(relative, line, code) for line, code in _flag_reads(ast.parse(path.read_text(encoding="utf-8")), flags)]
    return found


# A word of a probe's name, or of what a probe does, in the name of a ``Task`` method or attribute: what one probe
# runs for one task is that probe's section, never a method of the task (``audit_accuracy`` was one).
PROBE_WORDS = ("audit", "probe", "accuracy", "calibration", "slice", "cue", "sweep", "prune", "pruning", "trigger",
               "backdoor", "behaviour", "cloze", "distractor", "syntax", "attention")


def task_methods_named_after_probes(root: Path = ROOT, words: tuple[str, ...] = PROBE_WORDS) -> list[tuple[str, int, str]]:
    """(path, line, name) of each method or class attribute of a class under ``bertprobe/tasks/`` whose name holds a
    probe's word (``PROBE_WORDS``): a task says what outputs mean, never what a probe measures."""
    found = []
    for path in sorted((root / PACKAGE / "tasks").rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        for cls in [n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.ClassDef)]:
            for stmt in cls.body:
                names = [stmt.name] if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) else \
                    [t.id for t in (stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)])
                     if isinstance(t, ast.Name)] if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else []
                found += [(relative, stmt.lineno, name) for name in names
                          if any(word in name.lower().split("_") or name.lower().startswith(word) for word in words)]
    return found


IGNORED_TASK_ATTRIBUTE = re.compile(r"\btask\b.*# type: ignore\[attr-defined\]")


def task_attribute_ignores(root: Path = ROOT) -> list[tuple[str, int, str]]:
    """(path, line, code) of each ``# type: ignore[attr-defined]`` on a line that reads a task: a section serves one
    kind of task and says so (``typing.cast`` to its class), instead of reaching into a subclass past the checker."""
    found = []
    for path in sorted((root / PACKAGE).rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if IGNORED_TASK_ATTRIBUTE.search(line):
                found.append((relative, n, line.strip()))
    return found


INIT_LOGIC_LINES = 40  # a package's face: its docstring and re-exports; more lines of logic belong in a module


def logic_lines(path: Path) -> int:
    """Lines of code in ``path`` outside its module docstring, blank lines and comments aside."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    if tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(getattr(tree.body[0], "value", None), ast.Constant):
        skip = set(range(tree.body[0].lineno, (tree.body[0].end_lineno or tree.body[0].lineno) + 1))
    lines = path.read_text(encoding="utf-8").splitlines()
    return sum(1 for n, line in enumerate(lines, 1) if n not in skip and line.strip() and not line.strip().startswith("#"))


def heavy_inits(root: Path = ROOT, limit: int = INIT_LOGIC_LINES) -> list[tuple[str, int]]:
    """(path, lines) of each ``__init__.py`` under ``bertprobe/probes/`` with more than ``limit`` lines of logic:
    a probe family's code lives in its named modules (``probe.py``, its sections), never behind the package face."""
    return [(p.relative_to(root).as_posix(), n) for p in sorted((root / PROBES_DIR).rglob("__init__.py"))
            if (n := logic_lines(p)) > limit]


# What a probe's catalogue is made of (``Probe.catalogue``): the probe's own class attributes, and what a task adds
# through ``Task.probe_metrics``; a probe never splices a task module's metrics, directions or defaults into them.
CATALOGUE_ATTRIBUTES = ("metrics", "metric_directions", "defaults", "key_metrics")
CATALOGUE_NAME = re.compile(r"(?:^|_)(?:METRICS|DIRECTIONS|DEFAULTS|CATALOGUES?)$")


def _task_imports(tree: ast.AST) -> dict[str, str]:
    """Local name -> the name it was imported as, for each import from ``bertprobe.tasks`` (a module or a name)."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[:2] == [PACKAGE, "tasks"]:
            found.update({alias.asname or alias.name: alias.name for alias in node.names})
        elif isinstance(node, ast.Import):
            found.update({alias.asname: alias.name for alias in node.names
                          if alias.asname and alias.name.split(".")[:2] == [PACKAGE, "tasks"]})
    return found


def _catalogue_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, code) of each import of a task's catalogue (a name such as ``QA_METRICS``, ``DIRECTIONS``,
    ``QA_DEFAULTS``) and of each probe catalogue attribute (``metrics = {...}``) built from a task module's names."""
    imported = _task_imports(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(CATALOGUE_NAME.search(imported.get(a.asname or a.name, ""))
                                                    for a in node.names):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.ClassDef):
            for stmt in node.body:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
                value = getattr(stmt, "value", None)
                if value is None or not any(isinstance(t, ast.Name) and t.id in CATALOGUE_ATTRIBUTES for t in targets):
                    continue
                if any(isinstance(n, ast.Name) and n.id in imported for n in ast.walk(value)):
                    code = ast.unparse(stmt)
                    found.append((stmt.lineno, code if len(code) <= 100 else code[:97] + "..."))
    return sorted(found)


def task_catalogue_imports(root: Path = ROOT) -> list[tuple[str, int, str]]:
    """(path, line, code) of every probe module that imports a task's metric catalogue or builds its own catalogue
    from a task module's names: a task adds what its section measures through ``Task.probe_metrics``, and the
    probe's ``catalogue()`` gathers it from the registered tasks, so the probe names no task."""
    found = []
    for path in sorted((root / PACKAGE / "probes").rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        found += [(relative, line, code) for line, code in _catalogue_imports(ast.parse(path.read_text(encoding="utf-8")))]
    return found


def mermaid(graph: Graph) -> str:
    """The wings as boxes, bottom floor last, and one arrow per pair of wings that import each other."""
    pairs: set[tuple[str, str]] = set()
    for a, targets in graph.arrows.items():
        for b in targets:
            wa, wb = wing_of(a), wing_of(b)
            if wa != wb and a not in FACADES:
                pairs.add((wa, wb))
    lines = ["flowchart TD"]
    for name, members in reversed(FLOORS):
        inside = sorted(m[len(PACKAGE) + 1:] for m in graph.modules if m not in FACADES and wing_of(m) == name)
        label = f"{name}<br/><small>{', '.join(inside)}</small>" if len(inside) <= 16 else f"{name}<br/><small>{len(inside)} modules</small>"
        lines.append(f'    {name}["{label}"]')
    for a, b in sorted(pairs, key=lambda p: (-[f for f, _ in FLOORS].index(p[0]), p[1])):
        lines.append(f"    {a} --> {b}")
    return "\n".join(lines)


def figures(graph: Graph, root: Path | None = ROOT) -> str:
    """The figures the closing notes and docs quote (of the checkout at ``root``: type-only circles, task names)."""
    harness = graph.modules.get(f"{PACKAGE}.harness")
    lines = [f"modules: {len(graph.modules)}", f"import arrows: {graph.arrow_count()}",
             f"import circles: {len(graph.circles())}" + "".join(f"\n  {' <-> '.join(c)}" for c in graph.circles())]
    try:
        upward = graph.upward()
        lines.append(f"upward imports: {len(upward)}" + "".join(f"\n  {a} -> {b}" for a, b in upward))
    except ValueError as exc:
        lines.append(f"upward imports: not judged ({exc})")
    lines.append(f"private imports: {len(graph.private)}" + "".join(f"\n  {a}: {n} from {b}" for a, b, n in graph.private))
    typed = build(root, type_only=True).circles() if root is not None else []
    lines.append(f"import circles counting type-only imports: {len(typed)}" + "".join(f"\n  {' <-> '.join(c)}" for c in typed))
    compared = task_name_comparisons(root) if root is not None else []
    lines.append(f"task-name comparisons outside tasks/: {len(compared)}"
                 + "".join(f"\n  {p}:{n}: {c}" for p, n, c in compared))
    flagged = meaning_flag_reads(root) if root is not None else []
    lines.append(f"meaning-flag reads in probe modules: {len(flagged)}"
                 + "".join(f"\n  {p}:{n}: {c}" for p, n, c in flagged))
    spliced = task_catalogue_imports(root) if root is not None else []
    lines.append(f"task metric catalogues imported by probes: {len(spliced)}"
                 + "".join(f"\n  {p}:{n}: {c}" for p, n, c in spliced))
    named = task_methods_named_after_probes(root) if root is not None else []
    lines.append(f"task methods named after a probe: {len(named)}" + "".join(f"\n  {p}:{n}: {c}" for p, n, c in named))
    ignored = task_attribute_ignores(root) if root is not None else []
    lines.append(f"type: ignore[attr-defined] on task attributes: {len(ignored)}"
                 + "".join(f"\n  {p}:{n}: {c}" for p, n, c in ignored))
    heavy = heavy_inits(root) if root is not None else []
    lines.append(f"probe __init__.py over {INIT_LOGIC_LINES} lines of logic: {len(heavy)}"
                 + "".join(f"\n  {p}: {n}" for p, n in heavy))
    if root is not None:
        tasks_lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in (root / PACKAGE / "tasks").rglob("*.py"))
        lines.append(f"lines in tasks/: {tasks_lines}")
    if harness is not None:
        lines.append(f"harness.py lines: {len(harness.read_text(encoding='utf-8').splitlines())}")
    return "\n".join(lines)


def _summary_line(path: Path) -> str:
    """The first sentence of a module's docstring, on one line (Markdown table cells escaped)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    end = re.search(r"(?<! al)(?<!e\.g)(?<!i\.e)\.(\s|$)", first)  # "Clark et al. 2019" does not end it
    return (first[: end.start() + 1] if end else first).replace("|", "\\|")


def wings_table(graph: Graph) -> str:
    """Every wing, top floor first, with each module and the first sentence of its docstring."""
    rows = ["| wing | module | holds |", "|---|---|---|"]
    for name, _ in reversed(FLOORS):
        inside = sorted(m for m in graph.modules if m not in FACADES and wing_of(m) == name)
        for i, module in enumerate(inside):
            short = module[len(PACKAGE) + 1:]
            rows.append(f"| {name if i == 0 else ''} | `{short}` | {_summary_line(graph.modules[module])} |")
    for facade in FACADES:
        rows.append(f"| face | `{facade}` | {_summary_line(graph.modules[facade])} |")
    return "\n".join(rows)


def update_docs(graph: Graph, page: Path, root: Path = ROOT) -> None:
    """Replace the generated blocks of ``page``: the wings table, the first Mermaid flowchart and the figures."""
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"(<!-- wings: generated by tools/architecture.py --update-docs -->\n).*?(<!-- /wings -->)",
                  lambda m: m.group(1) + wings_table(graph) + "\n" + m.group(2), text, count=1, flags=re.S)
    text = re.sub(r"```mermaid\nflowchart TD\n.*?\n```", lambda m: "```mermaid\n" + mermaid(graph) + "\n```", text,
                  count=1, flags=re.S)
    text = re.sub(r"(Today's figures \(`python tools/architecture.py`\):\n\n```\n).*?(\n```)",
                  lambda m: m.group(1) + figures(graph, root) + m.group(2), text, count=1, flags=re.S)
    page.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mermaid", action="store_true", help="print the wings diagram as Mermaid")
    parser.add_argument("--update-docs", action="store_true", help="rewrite the generated parts of docs/architecture.md")
    parser.add_argument("--root", type=Path, default=ROOT, help="a checkout of bertprobe (default: this one)")
    args = parser.parse_args(argv)
    graph = build(args.root)
    if args.mermaid:
        print(mermaid(graph))
        return 0
    if args.update_docs:
        update_docs(graph, args.root / "docs" / "architecture.md", args.root)
        return 0
    print(figures(graph, args.root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
