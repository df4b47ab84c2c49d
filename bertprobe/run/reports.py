"""Built-in plugin: a readable partial report after every probe, the final reports and the runs index at the end.

Report writing is a plugin like any other (cf. pytest's built-in plugins): the session only emits
events and calls the hooks. These implementations run first (``tryfirst``), so another plugin's
``bertprobe_session_finish`` already finds the report files on disk. Blocking this module
(``BERTPROBE_DISABLE_PLUGINS=bertprobe.run.reports``) leaves only ``events.jsonl``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bertprobe.hookmarkers import hookimpl
from bertprobe.reporters.runindex import update_index
from bertprobe.results import ProbeResult, RunReport


def write_reports(session: Any) -> list[Path]:
    """Every format the suite names, written into the run folder from ``session.report``."""
    paths = []
    for fmt in session.suite.formats:
        reporter = session.plugins.reporters.get(fmt)
        reporter = reporter() if isinstance(reporter, type) else reporter
        paths.append(reporter.write(session.report, session.run_dir))
    return paths


def update_runs_index(session: Any) -> None:
    """reports/index.html and reports/latest, rebuilt from the run folders; a failure only warns."""
    reports_dir = Path(session.run_dir).parent
    try:
        update_index(reports_dir)
    except OSError as exc:
        session.say(f"warning: could not update {reports_dir / 'index.html'}: {exc}")


@hookimpl(tryfirst=True)
def bertprobe_probe_result(session: Any, result: ProbeResult) -> None:
    write_reports(session)


@hookimpl(tryfirst=True)
def bertprobe_session_finish(session: Any, report: RunReport) -> None:
    write_reports(session)
    update_runs_index(session)
