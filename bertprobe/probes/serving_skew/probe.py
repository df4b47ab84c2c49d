"""Probe ``serving-skew``: does the endpoint serve the audited model?

The model under test (the *candidate*: in practice a served endpoint, though the probe reads it through the
``Target`` interface alone) is compared example by example with a *reference*, the checkpoint that was audited:
``params.reference`` names it (a model of the matrix, or a path), and ``auto`` takes the candidate's ``twin:``.
Metrics: ``agreement`` (share of examples with the same prediction, Wilson interval), ``max_score_difference`` and
``mean_score_difference`` (per example the largest |difference| of a class probability), ``differing`` (examples
past ``tolerance`` or with another prediction) and its share, and, where the data have labels, McNemar's exact p on
correctness (``bertprobe.stats.mcnemar_exact``). Findings: the examples that differ most, both predictions and
scores, and each input's length in the reference's tokens. The diagnosis (``diagnosis``: a finding titled
"diagnosis" and ``details["diagnosis"]``) replays hypotheses on the reference, truncation and lower-casing, and
names one only when the reference so changed reproduces the candidate's outputs; otherwise the sizes of the
differences point at a lower-precision build or at another model.

There is no paper: serving skew (training/serving skew, Google's "Rules of ML" #29-#37; Breck et al. 2017, "The ML
Test Score", Monitor 3) is checked here by replay rather than by a distribution statistic, which tells what the
serving stack does differently, not only that it differs.

Sections (``bertprobe.sections``): ``answers`` for extractive readers (``when="span_answers"``), with
``compare(result, target, reference, data, params, ctx)`` filling the result in this probe's place: agreement is
the share of questions answered with the same span, ``max_score_difference`` the share whose span differs (a
served reader's scores are its own), ``mean_score_difference`` the mean of 1 - F1 between the two answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from bertprobe.data.dataset import Dataset
from bertprobe.errors import ProbeError
from bertprobe.hookmarkers import hookimpl
from bertprobe.model.target import Target
from bertprobe.probe import Probe, ProbeContext
from bertprobe.probes.serving_skew import answers
from bertprobe.probes.serving_skew.compare import (
    Scores,
    class_order,
    describe,
    gaps,
    reorder,
    same,
    scores_of,
    token_lengths,
)
from bertprobe.probes.serving_skew.diagnosis import diagnose
from bertprobe.probes.serving_skew.metrics import add_diagnosis, add_mcnemar, add_summary
from bertprobe.results import DefaultExpectation, Finding, ProbeResult
from bertprobe.results.outcomes import example_ids

NO_REFERENCE = "no reference: name one with params.reference, or give the endpoint a twin:"


@dataclass(frozen=True)
class ServingSkewParams:
    """``reference``: the model the candidate should serve (a name of the matrix or a path; ``auto``: the candidate's
    ``twin:``). ``tolerance``: the largest |probability difference| still "the same". ``findings``: the examples
    that differ most, listed. ``batch_size``: examples per forward pass of the reference (default: sized to the
    device)."""

    reference: str = "auto"
    tolerance: float = 1e-4
    findings: int = 10
    batch_size: int | None = None

    def __post_init__(self) -> None:
        if not self.reference:
            raise ValueError("reference names a model (a name of the matrix or a path), or is auto")
        if self.tolerance < 0 or self.findings < 0:
            raise ValueError("tolerance and findings must be >= 0")


class ServingSkewProbe(Probe):
    name = "serving-skew"
    description = "Does the endpoint serve the audited model? Agreement, score differences, a replayed diagnosis"
    paper = "Breck et al. 2017, The ML Test Score (training/serving skew); diagnosis by replay on the reference"
    requires = frozenset({"predictions"})
    tasks = frozenset({"classification", "multi-label", "question-answering"})
    model_params: ClassVar[dict[str, tuple[str, str]]] = {"reference": ("", "the checkpoint the endpoint serves")}
    metrics: ClassVar[dict[str, str]] = {
        "agreement": "share of examples the candidate predicts as the reference does (Wilson 95% interval)",
        "max_score_difference": "largest |difference| of a class probability over examples and classes "
                                "(extractive QA: share of answers whose span differs)",
        "mean_score_difference": "mean over examples of the largest |difference| of a class probability "
                                 "(extractive QA: mean 1 - F1 between the two answers)",
        "differing": "examples whose prediction differs or whose scores differ by more than tolerance",
        "differing_share": "share of examples that differ (prediction, or scores past tolerance)",
        "mcnemar_p": "McNemar's exact p of the candidate's and the reference's correctness (data with labels)",
        "accuracy": "the candidate's share of examples right (extractive QA: exact match)",
        "reference_accuracy": "the reference's share of examples right (extractive QA: exact match)",
        "examples": "examples compared",
    }
    metric_directions: ClassVar[dict[str, bool | None]] = {"agreement": True, "max_score_difference": False, "mean_score_difference": False,
                         "differing": None, "differing_share": False, "mcnemar_p": None, "accuracy": True,
                         "reference_accuracy": None, "examples": None}
    Params = ServingSkewParams
    defaults = (
        DefaultExpectation("agreement", min=0.99,
                           why="an endpoint serving the audited weights predicts as they do on every input (an fp32 "
                               "server to about 1e-6): one prediction in a hundred changed is another computation"),
        DefaultExpectation("differing_share", max=0.01,
                           why="the same weights behind the same preprocessing give the same probabilities to well "
                               "within the 1e-4 tolerance; more than 1% of inputs past it means the serving stack "
                               "changes inputs or weights (raise tolerance for a deliberately lower-precision build)"),
    )
    key_metrics = ("agreement", "max_score_difference", "differing_share")

    def run(self, target: Target, data: Dataset | None, params: ServingSkewParams, ctx: ProbeContext) -> ProbeResult:
        assert data is not None
        result = ProbeResult(probe=self.name)
        reference = self._reference(target, params, ctx, result)
        if reference is None:
            return result
        if not data.examples:
            raise ProbeError("serving-skew needs at least one example")
        section = ctx.section(self.name, target.task)
        if section is not None:
            section.compare(result, target, reference, data, params, ctx)
        else:
            self._classes(result, target, reference, data, params, ctx)
        result.details["reference"] = reference.spec.label
        return result

    @staticmethod
    def _reference(target: Target, params: ServingSkewParams, ctx: ProbeContext, result: ProbeResult) -> Target | None:
        """The reference loaded (None, the result skipped with the reason, when there is none)."""
        name = params.reference
        if name == "auto":
            name = getattr(target.spec, "twin", None) or ""
            if not name:
                result.status, result.message = "skipped", NO_REFERENCE
                return None
        spec = ctx.resolve_model(name, target.spec)
        if spec == target.spec:
            result.status = "skipped"
            result.message = f"the reference ({name}) is the model under test; name the checkpoint the endpoint serves"
            return None
        if ctx.load_target is not None:
            reference = ctx.load_target(spec)
        else:
            from bertprobe.model.loading import load_target

            reference = load_target(spec)
        if type(reference.task) is not type(target.task):  # outputs of another meaning: nothing to compare
            raise ProbeError(f"the reference {reference.spec.label} is a {reference.task.name} model, the candidate "
                             f"{target.spec.label} a {target.task.name} one: their outputs mean other things; name the "
                             "checkpoint the endpoint serves as params.reference")
        return reference

    def _classes(self, result: ProbeResult, target: Target, reference: Target, data: Dataset,
                 params: ServingSkewParams, ctx: ProbeContext) -> None:
        examples = data.examples
        cand = scores_of(target, examples, logits=ctx.predictions(target, data, params.batch_size).logits)
        order = class_order(target.label_names, reference.label_names)
        ref = reorder(scores_of(reference, examples, logits=ctx.predictions(reference, data, params.batch_size).logits),
                      order)
        agree = same(cand, ref)
        with_scores = "probabilities" in target.capabilities
        gap = gaps(cand, ref) if with_scores else (~agree).astype(float)
        if not with_scores:
            result.details.setdefault("warnings", []).append(
                f"{target.spec.label} answers with labels only: the score differences are 0 (same) or 1 (changed)")
        ids = example_ids(examples)
        differing = (gap > params.tolerance) | ~agree
        add_summary(result, agree, gap, differing, ids, params.tolerance)
        self._mcnemar(result, target, data, cand, ref)
        lengths = token_lengths(reference, examples)

        def replay(changed: Target, some: Any) -> Scores:
            return reorder(scores_of(changed, some, params.batch_size, progress=ctx.progress), order)

        found = diagnose(reference, examples, cand, gap, agree, lengths, params.tolerance, replay, ctx.seed) \
            if with_scores else {"cause": "not diagnosed", "tried": [], "evidence": {"differing": int(differing.sum())},
                                 "statement": "labels only: the scores a diagnosis replays are not served"}
        add_diagnosis(result, found)
        for i in sorted(np.flatnonzero(differing), key=lambda i: (-gap[i], i))[: params.findings]:
            ex = examples[i]
            result.findings.append(Finding(
                title=f"{ex.id or i}: " + ("prediction changed" if not agree[i] else "scores differ") + f" by {gap[i]:.4f}",
                input=ex.text if ex.text_pair is None else f"{ex.text} [SEP] {ex.text_pair}",
                expected="reference: " + describe(target.task, ref.pred[i], ref.probs[i]),
                observed="candidate: " + describe(target.task, cand.pred[i], cand.probs[i]),
                score=float(gap[i]),
                extra={"score_label": "|Δp|", "tokens": int(lengths[i]), "id": ex.id or str(i),
                       "prediction_changed": bool(not agree[i])}))

    @staticmethod
    def _mcnemar(result: ProbeResult, target: Target, data: Dataset, cand: Scores, ref: Scores) -> None:
        if any(ex.label is None for ex in data.examples):
            return
        gold = target.task.gold(data)
        right_c = target.task.correct(torch.as_tensor(cand.pred), gold).numpy().astype(bool)
        right_r = target.task.correct(torch.as_tensor(ref.pred), gold).numpy().astype(bool)
        add_mcnemar(result, right_c, right_r)


@hookimpl
def bertprobe_register_probes(registry: Any) -> None:
    registry.add(ServingSkewProbe)


@hookimpl
def bertprobe_register_sections(registry: Any) -> None:
    registry.add(ServingSkewProbe.name, answers, when="span_answers")
