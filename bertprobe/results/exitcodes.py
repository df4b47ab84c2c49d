"""The one table of exit codes (see the README), and the run's code from its report.

| code | meaning |
|---|---|
| 0 | everything checked held |
| 1 | a probe failed or errored, or a gate found a regression |
| 2 | bad input or usage, found before or during the run; ``compare`` runs that do not pair |
| 3 | an internal error: the run is ``aborted``, with the message in the report |
| 5 | nothing was checked (no expectation and no gate ran); ``--allow-skips`` makes it 0 |
| 130 / 143 | interrupted by SIGINT / SIGTERM, with a partial report |

Where several apply, the first in this order wins: 130/143, 2, 3, 1, 5.
"""

from __future__ import annotations

from bertprobe.results import RunReport

OK, FAILED, USAGE, INTERNAL, NOTHING_CHECKED, SIGINT, SIGTERM = 0, 1, 2, 3, 5, 130, 143


class Terminated(KeyboardInterrupt):
    """SIGTERM (CI runners, Kubernetes, ``timeout``): handled like Ctrl-C, exit code 143."""


def nothing_checked(report: RunReport) -> bool:
    """No expectation was checked and no gate compared models."""
    gate_ran = bool(report.gate) and len(report.model_names) > 1
    return report.score() is None and not gate_ran


def run_exit_code(report: RunReport, allow_skips: bool = False) -> int:
    """The code of a run that completed (interruptions and errors are decided where they are caught)."""
    counts = report.counts()
    if counts.get("failed", 0) or counts.get("error", 0) or report.regressions:
        return FAILED
    if nothing_checked(report) and not allow_skips:
        return NOTHING_CHECKED
    return OK


def most_serious(codes: list[int]) -> int:
    """The code of several runs (``bertprobe run S1 S2``): the first that applies in the table's order."""
    for code in (SIGINT, SIGTERM, USAGE, INTERNAL, FAILED, NOTHING_CHECKED):
        if code in codes:
            return code
    return OK
