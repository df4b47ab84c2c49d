"""The behaviour probe's section for a multi-label model (a task with ``label_sets``).

The cases, perturbations, fairness gaps and failure rates are the classifier's (``classes.py``); what differs
lives here: a prediction is the set of labels at or above their thresholds (``model.threshold`` /
``model.thresholds``), so the cases are judged on label sets (``scoring.judge_case`` with the thresholds) and
a finding shows the predicted label sets before and after instead of an argmax.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np

from bertprobe.data.dataset import Dataset
from bertprobe.model.target import Target
from bertprobe.probe import ProbeContext
from bertprobe.probes.behaviour import classes
from bertprobe.probes.behaviour.cases import Case
from bertprobe.probes.behaviour.params import BehaviourParams
from bertprobe.probes.behaviour.scoring import CaseOutcome
from bertprobe.results import Finding, ProbeResult
from bertprobe.tasks.multilabel import MultiLabelClassification

MLM_SUBSTITUTION = True  # params.mlm's test runs here (the classifier's code, classes.audit)


@dataclass(frozen=True)
class LabelSets:
    """How the classifier's code reads a multi-label model's probabilities: each label's threshold."""

    task: MultiLabelClassification
    thresholds: np.ndarray

    @classmethod
    def of(cls, target: Target) -> LabelSets:
        task = cast(MultiLabelClassification, target.task)
        return cls(task, task.thresholds.numpy())

    def shown(self, p: np.ndarray) -> str:
        """The predicted label set of one text's probabilities, as the task describes labels."""
        return self.task.describe_labels([int(v) for v in (p >= self.thresholds)])

    def finding(self, case: Case, verdict: CaseOutcome, labels: list[str], probs: dict[str, np.ndarray]) -> Finding:
        """The text that decided a failed case, with the predicted label sets (not an argmax)."""
        cls = labels[verdict.cls]
        original, worst, before, after, changed = classes.decisive(case, verdict, probs)
        if case.type == "mft":
            parts = ([f"exactly {{{', '.join(map(str, case.labels))}}}"] if case.labels is not None else []) + \
                [f"has {x}" for x in (*case.contains, *([case.label] if case.label is not None else []))] + \
                [f"not {x}" for x in (*case.not_contains, *([case.not_label] if case.not_label is not None else []))]
            return Finding(title=f"{case.test} ({case.type})", input=classes.text_key(worst), expected="; ".join(parts),
                           observed=f"{self.shown(after)} (p({cls})={float(after[verdict.cls]):.3f})",
                           score=float(after[verdict.cls]), extra={"kind": "behaviour", "test": case.test})
        if case.type == "inv":
            expected = "label set kept" + (f" or every p moves <= {case.tolerance}" if case.tolerance else "")
        else:
            assert case.expect is not None
            expected = f"p({cls}) {'not down' if case.expect.direction == 'not_down' else 'not up'}"
        return Finding(title=f"{case.test} ({case.type})", input=classes.text_key(original),
                       perturbed=classes.text_key(worst), expected=expected,
                       observed=f"p({cls}) {verdict.before:.3f} -> {verdict.after:.3f}; "
                                f"{self.shown(before)} -> {self.shown(after)}",
                       score=verdict.after - verdict.before,
                       extra={"kind": "behaviour", "test": case.test, "changed": changed, "highlight": changed})


def audit(result: ProbeResult, target: Target, data: Dataset | None, params: BehaviourParams,
          ctx: ProbeContext) -> None:
    """Fill ``result`` with the classifier's run (``classes.audit``), judged and shown as label sets."""
    classes.audit(result, target, data, params, ctx, LabelSets.of(target))
