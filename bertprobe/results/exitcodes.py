"""The one table of exit codes (see the README), and the run's code from its report.

| code | meaning |
|---|---|
| 0 | everything checked held; in a gated matrix: every candidate may replace the baseline and misses nothing |
| 1 | some decision is *do not ship*: an expectation failed, a probe errored, or (a gated matrix) a candidate |
|   | regressed significantly or misses an expectation the baseline holds |
| 2 | bad input or usage, found before or during the run; ``compare`` runs that do not pair |
| 3 | an internal error: the run is ``aborted``, with the message in the report |
| 4 | a gated matrix whose every candidate *may replace* the baseline, some missing expectations the baseline misses too |
| 5 | nothing was checked (no expectation and no gate ran, or a gated candidate had nothing checked); |
|   | ``--allow-skips`` makes it 0 |
| 130 / 143 | interrupted by SIGINT / SIGTERM, with a partial report |

Where several apply, the first in this order wins: 130/143, 2, 3, 1, 5, 4.

In a gated matrix the code follows the decisions (``bertprobe.results.verdict``): the baseline is the model in
service, so what it misses itself fails nothing; a candidate fails the run (1) only when it may not replace the
baseline, and one that may, but shares misses with it, gives 4: replace, and track the shared misses.
"""

from __future__ import annotations

from bertprobe.results import RunReport
from bertprobe.results.verdict import decide

OK, FAILED, USAGE, INTERNAL, NOTHING_CHECKED, SIGINT, SIGTERM = 0, 1, 2, 3, 5, 130, 143
SHARED_MISSES = 4


class Terminated(KeyboardInterrupt):
    """SIGTERM (CI runners, Kubernetes, ``timeout``): handled like Ctrl-C, exit code 143."""


def nothing_checked(report: RunReport) -> bool:
    """No expectation was checked and no gate compared models."""
    gate_ran = bool(report.gate) and len(report.model_names) > 1
    return report.score() is None and not gate_ran


def run_exit_code(report: RunReport, allow_skips: bool = False) -> int:
    """The code of a run that completed (interruptions and errors are decided where they are caught)."""
    verdicts = decide(report)
    if report.counts().get("error", 0) or report.regressions or any(v.blocking for v in verdicts):
        return FAILED
    gated = any(v.decision == "baseline" for v in verdicts)
    if not gated and report.counts().get("failed", 0):  # a model judged on its own missed an expectation
        return FAILED
    undecided = gated and any(v.decision == "no decision" for v in verdicts)  # a candidate nothing checked
    if (nothing_checked(report) or undecided) and not allow_skips:
        return NOTHING_CHECKED
    if any(v.below_bar for v in verdicts):
        return SHARED_MISSES
    return OK


def most_serious(codes: list[int]) -> int:
    """The code of several runs (``bertprobe run S1 S2``): the first that applies in the table's order."""
    for code in (SIGINT, SIGTERM, USAGE, INTERNAL, FAILED, NOTHING_CHECKED, SHARED_MISSES):
        if code in codes:
            return code
    return OK
