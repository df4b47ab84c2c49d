"""What the serving-skew probe and its reader's section write alike: the agreement and difference metrics, McNemar's
test on correctness, and the diagnosis as a finding."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bertprobe.results import Finding, ProbeResult
from bertprobe.results.outcomes import Outcomes
from bertprobe.stats import mcnemar_exact


def add_summary(result: ProbeResult, agree: np.ndarray, gap: np.ndarray, differing: np.ndarray, ids: Sequence[str],
                tolerance: float, what: str = "|difference| of a class probability (the largest per example)") -> None:
    """``agreement``, ``max_score_difference``, ``mean_score_difference``, ``differing`` (and its share), ``examples``;
    per example outcomes of agreement, differing and ``gap`` (``score_difference``), so a matrix pairs them."""
    ids = list(ids)
    result.add_share("agreement", agree.tolist(), ids, True, "share of examples predicted as the reference does")
    result.add_metric("max_score_difference", float(gap.max()), False, f"{what}: largest over examples", kind="extreme")
    result.outcomes.append(Outcomes.from_values("score_difference", ids, gap.tolist(), "score"))
    result.add_metric("mean_score_difference", float(gap.mean()), False, f"{what}: mean over examples",
                      outcome="score_difference")
    result.add_metric("differing", float(differing.sum()), None, f"examples differing (past {tolerance:g})", kind="count")
    result.add_share("differing_share", differing.tolist(), ids, False,
                     f"share of examples differing (another prediction, or scores past {tolerance:g})")
    result.add_metric("examples", float(len(agree)), None, "examples compared", kind="count")


def add_mcnemar(result: ProbeResult, right_candidate: np.ndarray, right_reference: np.ndarray) -> None:
    """The candidate's and the reference's accuracy and McNemar's exact p of their correctness."""
    only_ref = int((right_reference & ~right_candidate).sum())
    only_cand = int((right_candidate & ~right_reference).sum())
    result.add_metric("accuracy", float(right_candidate.mean()), True, "the candidate's share of examples right")
    result.add_metric("reference_accuracy", float(right_reference.mean()), None,
                      "the reference's share of examples right")
    result.add_metric("mcnemar_p", mcnemar_exact(only_ref, only_cand), None,
                      f"McNemar's exact p: {only_ref} examples right under the reference only, {only_cand} under the "
                      "candidate only")
    result.details["discordant"] = {"reference_only": only_ref, "candidate_only": only_cand}


def add_diagnosis(result: ProbeResult, found: dict[str, Any]) -> None:
    """The diagnosis (``diagnosis.diagnose``) in ``details["diagnosis"]``, as the key finding and as the first
    finding, titled "diagnosis"."""
    result.details["diagnosis"] = found
    result.details["key_finding"] = found["statement"]
    result.findings.insert(0, Finding(title="diagnosis", observed=found["statement"],
                                      extra={"cause": found["cause"], "evidence": found["evidence"],
                                             "tried": found["tried"]}))
