"""Across runs: ``reports/index.html`` lists every run in a reports folder, ``reports/latest`` points at
the newest, and ``bertprobe clean`` removes runs.

Both shared files are rebuilt from the run folders themselves and replaced atomically (written to a
temporary name, then renamed), so runs finishing together in one folder (a CI matrix) lose no entry.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from bertprobe.results import RunReport


@dataclass
class RunEntry:
    path: Path
    report: RunReport

    @property
    def resumable(self) -> bool:
        """An interrupted or aborted run that kept at least one result."""
        return self.report.status in ("interrupted", "aborted") and bool(self.report.probes)


def _read_run(folder: Path) -> RunReport:
    """A run's report: its report.json when the run finished (small), else a fold of its events (a killed
    run's report.json still says 'running'; its events say it was interrupted)."""
    summary = folder / "report.json"
    if summary.is_file():
        report = RunReport.from_dict(json.loads(summary.read_text(encoding="utf-8")))
        if report.status != "running":
            return report
    return RunReport.from_events(folder / "events.jsonl")


def find_runs(reports_dir: Path) -> list[RunEntry]:
    """Every run folder (one holding events.jsonl) under ``reports_dir``, newest first."""
    entries = []
    if not reports_dir.is_dir():
        return entries
    for child in reports_dir.iterdir():
        if child.is_symlink() or not (child / "events.jsonl").is_file():
            continue
        try:
            report = _read_run(child)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        entries.append(RunEntry(child, report))
    return sorted(entries, key=lambda e: (e.report.started_at, e.path.name), reverse=True)


def _atomic_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _atomic_symlink(link: Path, target: str) -> None:
    tmp = link.with_name(f".{link.name}.{uuid.uuid4().hex}.tmp")
    os.symlink(target, tmp)
    os.replace(tmp, link)


def update_index(reports_dir: Path) -> Path | None:
    """Rebuild ``index.html`` and ``latest`` in ``reports_dir`` from its run folders."""
    from bertprobe.reporters.summary import score_text

    runs = find_runs(reports_dir)
    rows = []
    for entry in runs:
        r = entry.report
        link = f"{entry.path.name}/report.html"
        models = ", ".join(r.model_names) or r.model
        status = r.status + (" (resumable)" if entry.resumable else "")
        rows.append(f"<tr class='{html.escape(r.status)}'><td><a href='{html.escape(link)}'>{html.escape(entry.path.name)}</a></td>"
                    f"<td>{html.escape(r.suite)}</td><td>{html.escape(models)}</td><td>{html.escape(status)}</td>"
                    f"<td>{html.escape(score_text(r))}</td><td>{html.escape(r.started_at)}</td></tr>")
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>bertprobe runs</title><style>"
            "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:80em}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:.2em .5em}.aborted td{background:#fde8ea}"
            ".interrupted td{background:#fff3e0}</style></head><body><h1>bertprobe runs</h1>"
            f"<p>{len(runs)} run(s) in {html.escape(str(reports_dir))}; newest first. Aborted runs are marked; "
            "'bertprobe clean --aborted' removes those that cannot be resumed.</p>"
            "<table><tr><th>run</th><th>suite</th><th>models</th><th>status</th><th>score</th><th>started (UTC)</th></tr>"
            + "".join(rows) + "</table></body></html>")
    index = reports_dir / "index.html"
    _atomic_text(index, page)
    if runs:
        _atomic_symlink(reports_dir / "latest", runs[0].path.name)
    return index


def clean(reports_dir: Path, names: list[str], aborted: bool) -> list[Path]:
    """Remove the named run folders, or (``aborted``) the aborted or killed runs that cannot be resumed."""
    removed = []
    runs = {e.path.name: e for e in find_runs(reports_dir)}
    targets = []
    for name in names:
        entry = runs.get(Path(name).name)
        if entry is None:
            from bertprobe.errors import BertprobeError

            raise BertprobeError(f"'{name}' is not a run folder in {reports_dir}")
        targets.append(entry)
    if aborted:
        targets += [e for e in runs.values() if e.report.status in ("aborted", "interrupted") and not e.resumable]
    for entry in targets:
        shutil.rmtree(entry.path)
        removed.append(entry.path)
    update_index(reports_dir)
    return removed
