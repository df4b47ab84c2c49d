"""Generate the documentation site's probe pages from the code, so that they cannot drift from it.

    python tools/docs_pages.py            # rewrite docs/probes/<probe>.md for every built-in probe
    python tools/docs_pages.py --check    # exit 1 naming the stale pages (tests/test_docs.py runs this)

Each page holds the probe's one-line description, its requirements, the suites that use it, its module
docstring (paper, method, deviations), a table of its params (type, default, meaning: from the
``Params`` dataclass) and of its metrics (direction, meaning: from ``Probe.catalogue()``, the probe's own
and what the built-in tasks add to it), then the hand-written notes in ``docs/probes/notes/<probe>.md``
when there are any.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def docstring_markdown(doc: str) -> str:
    """A probe module's docstring (plain text with RST literals) as Markdown."""
    out: list[str] = []
    bullet = re.compile(r"^\s*(?:[*-]|\d+\.)\s")
    for line in doc.replace("``", "`").splitlines():
        stripped = line.strip()
        if re.fullmatch(r"[A-Z][\w ,()'-]*:", stripped):  # "Papers:", "Where we deviate:"
            out += ["", f"**{stripped[:-1]}**", ""]
            continue
        if bullet.match(line) and out and out[-1].strip() and not bullet.match(out[-1]) and not out[-1].startswith("    "):
            out.append("")
        if stripped.startswith(">"):
            line = line.replace(">", "\\>", 1)
        # docstring bullets sit at 2 spaces with continuations at 4: Markdown wants items at 0 and 4
        if re.match(r"^  (?:[*-]|\d+\.)\s", line):
            line = line[2:]
        out.append(line.rstrip())
    text = "\n".join(out)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def _suites_using(name: str, suites_dir: Path) -> list[str]:
    import yaml

    using = []
    for path in sorted(suites_dir.glob("*.yaml")):
        raw = yaml.safe_load(path.read_text()) or {}
        if any(isinstance(p, dict) and p.get("probe") == name for p in raw.get("probes") or []):
            using.append(path.name)
    return using


def probe_page(cls: type, notes_dir: Path, suites_dir: Path) -> str:
    """The Markdown page of one probe class."""
    from bertprobe.params import param_rows

    module = sys.modules[cls.__module__]
    lines = [f"# {cls.name}", "", f"{cls.description}", ""]
    requires = ", ".join(f"`{r}`" for r in sorted(cls.requires)) or "nothing"
    suites = ", ".join(f"`suites/{s}`" for s in _suites_using(cls.name, suites_dir)) or "none shipped"
    tasks = ", ".join(f"`{t}`" for t in sorted(cls.tasks))
    lines += [f"**Tasks:** {tasks}. **Requires:** {requires}. **Shipped suites:** {suites}. "
              f"**Source:** `{cls.__module__}`. In the terminal: `bertprobe describe {cls.name}`.", ""]
    doc = inspect.getdoc(module) or ""
    if doc:
        lines += ["## Paper, method and deviations", "", docstring_markdown(doc)]
    rows = param_rows(cls.Params)
    lines += ["## Params", ""]
    if rows:
        lines += ["Set under the probe's `params:` in a suite, or with "
                  f"`--set probes.{cls.name}.params.NAME=VALUE`.", "",
                  "| param | type | default | meaning |", "|---|---|---|---|"]
        lines += [f"| `{name}` | {_cell(kind)} | `{_cell(default)}` | {_cell(meaning)} |"
                  for name, kind, default, meaning in rows]
    else:
        lines.append("None.")
    catalogue = cls.catalogue()
    lines += ["", "## Gated by default", ""]
    if catalogue.defaults:
        lines += ["Without an `expect:` of its own for these metrics, a suite judges this probe by these bounds "
                  "(`expect: {METRIC: off}` turns one off; the report then lists it as measured, not gated):", "",
                  "| metric | bound | why |", "|---|---|---|"]
        lines += [f"| `{d.metric}` | {_cell(d.describe())} | {_cell(d.why)} |" for d in catalogue.defaults]
    else:
        keys = ", ".join(f"`{k}`" for k in catalogue.key_metrics) or "none"
        lines.append(f"Nothing: this probe describes, it does not judge. Its key metrics ({keys}) are listed in the "
                     "report as measured, not gated, until your suite sets `expect:` on them.")
    lines += ["", "## Metrics", "", "What `expect:` may name (`*` stands for any suffix); every report also "
              "carries each metric's meaning.", "", "| metric | direction | meaning |", "|---|---|---|"]
    lines += [f"| `{metric}` | {direction} | {_cell(meaning)} |" for metric, direction, meaning in cls.metric_rows()]
    note = notes_dir / f"{cls.name}.md"
    if note.exists():
        lines += ["", "## Notes", "", note.read_text().strip()]
    return "\n".join(lines).rstrip() + "\n"


def builtin_probes() -> list[type]:
    """The probes bertprobe itself ships (not those of installed third-party plugins)."""
    from bertprobe.plugins import build_plugins

    plugins = build_plugins(entry_points=False)
    return [plugins.probes.get(n) for n in plugins.probes.names()]


def pages(root: Path = ROOT) -> dict[Path, str]:
    docs = root / "docs" / "probes"
    return {docs / f"{cls.name}.md": probe_page(cls, docs / "notes", root / "suites") for cls in builtin_probes()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report stale pages instead of writing them")
    args = parser.parse_args(argv)
    stale = []
    for path, text in pages().items():
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path.relative_to(ROOT))
        else:
            path.write_text(text)
    if stale:
        print(f"stale: {', '.join(map(str, stale))}; run python tools/docs_pages.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
