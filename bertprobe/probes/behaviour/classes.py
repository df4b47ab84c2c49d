"""The behaviour probe on a classifier (a task without a section of its own: the probe's own code).

Cases from JSONL (``cases.py``), templates (``templates.py``) and perturbations of the suite's data
(``perturb.py``); every distinct text predicted once; each case judged on its texts' class probabilities
(``scoring.py``); failure rates per test and capability (``rates.py``); per identity-swap test, the mean
probability of each class per group and the largest gap between two groups (``fairness_gaps``). A
multi-label model runs the same code through its section (``labelsets.py``), which judges and shows
predicted label sets instead of an argmax.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any, Protocol

import numpy as np

from bertprobe.data.dataset import Dataset, Example
from bertprobe.errors import ProbeError
from bertprobe.model.target import Target
from bertprobe.probe import ProbeContext
from bertprobe.probes.behaviour import mlm_cases
from bertprobe.probes.behaviour.cases import Case, DirExpectation, Text, read_case_files
from bertprobe.probes.behaviour.lexicon import lexicons_with
from bertprobe.probes.behaviour.params import BehaviourParams
from bertprobe.probes.behaviour.perturb import Perturbation, Words, perturbation_specs
from bertprobe.probes.behaviour.rates import failure_rates, slug, summarise
from bertprobe.probes.behaviour.scoring import CaseOutcome, check_labels, class_index, judge_case, named_as_model
from bertprobe.probes.behaviour.templates import expand_template
from bertprobe.progress import progress
from bertprobe.results import Finding, ProbeResult
from bertprobe.stats import bootstrap_ci


class LabelDecisions(Protocol):
    """What the classifier run asks of a label-set section (``labelsets.LabelSets``): the thresholds its
    probabilities are judged at, and how a case's finding reads."""

    thresholds: np.ndarray

    def finding(self, case: Case, verdict: CaseOutcome, labels: list[str], probs: dict[str, np.ndarray]) -> Finding: ...

    def shown(self, p: np.ndarray) -> str: ...


def text_key(text: Text) -> str:
    """One string per text (a pair joined with " ||| "): the key of its predicted probabilities."""
    return text if isinstance(text, str) else f"{text[0]} ||| {text[1]}"


def perturbation_cases(data: Dataset, specs: list[tuple[Perturbation, dict[str, Any]]], words: Words, seed: int,
                       max_examples: int) -> tuple[list[Case], list[dict[str, Any]]]:
    """The cases each perturbation makes of (a seeded sample of) the data, and a row per perturbation: how
    many examples it applied to, or why it was skipped."""
    examples = list(data.examples)
    if len(examples) > max_examples:
        examples = random.Random(seed).sample(examples, max_examples)
    cases: list[Case] = []
    rows = []
    for pert, options in progress(specs, desc="perturbations"):
        words.variants = int(options.get("variants", pert.variants))
        target_field = options.get("field", "text")
        if target_field not in ("text", "text_pair"):
            raise ProbeError(f"perturbation {pert.name}: field must be text or text_pair")
        expect = pert.expect
        if expect is not None and any(k in options for k in ("class", "direction", "tolerance")):
            expect = DirExpectation(options.get("class", expect.cls), options.get("direction", expect.direction),
                                    float(options.get("tolerance", expect.tolerance)))
        applied = 0
        for ex in examples:
            source = ex.text if target_field == "text" else ex.text_pair
            if not source:
                continue
            rng = random.Random(f"{seed}:{pert.name}:{ex.id}")
            edited = pert.edit(source, rng, words)
            if not edited:
                continue
            applied += 1

            def whole(new: str) -> Text:
                if ex.text_pair is None:
                    return new
                return (new, ex.text_pair) if target_field == "text" else (ex.text, new)

            texts = (whole(source), *[whole(e.text) for e in edited])
            groups = (edited[0].source_group, *[e.group for e in edited]) if pert.fairness else ()
            cases.append(Case(test=pert.name, type=pert.type, texts=texts, capability=pert.capability,
                              tolerance=float(options.get("tolerance", 0.0)) if pert.type == "inv" else 0.0,
                              expect=expect, id=str(ex.id), source=f"perturbation {pert.name}",
                              changed=((), *[e.changed for e in edited]), groups=groups))
        rows.append({"perturbation": pert.name, "type": pert.type, "capability": pert.capability, "applied": applied,
                     "examples": len(examples), "description": pert.description,
                     **({} if applied else {"skipped": f"applies to none of the {len(examples)} examples"})})
    return cases, rows


GAP_TIE = 1e-6  # gaps closer than this are one gap (the first class's is reported)


def fairness_gaps(cases: list[Case], probs: dict[str, np.ndarray], label_names: list[str], resamples: int,
                  seed: int) -> dict[str, Any]:
    """Per group, the mean probability of each class over the cases that hold every group; the largest gap
    between two groups (any class) with a paired bootstrap interval over cases."""
    groups = sorted({g for c in cases for g in c.groups if g})
    full = [c for c in cases if set(groups) <= set(c.groups)]
    if len(groups) < 2 or not full:
        return {}
    # cases x groups x classes
    cube = np.stack([np.stack([probs[text_key(c.texts[c.groups.index(g)])] for g in groups]) for c in full])
    means = cube.mean(axis=0)
    best = (0.0, 0, 0, 0)
    for k in range(len(label_names)):
        hi, lo = int(np.argmax(means[:, k])), int(np.argmin(means[:, k]))
        gap = float(means[hi, k] - means[lo, k])
        # a later class only where its gap is larger beyond float noise: a binary classifier's two classes have the
        # same gap, and noise alone (an fp32 ONNX build of the same weights) must not swap the class and the groups
        if gap > best[0] + GAP_TIE:
            best = (gap, k, hi, lo)
    gap, k, hi, lo = best
    if gap == 0.0:  # every group alike: name two of them all the same
        hi, lo = 0, 1
    interval = None
    if resamples > 0 and len(full) > 1:
        diffs = cube[:, hi, k] - cube[:, lo, k]
        interval = list(bootstrap_ci(diffs, resamples, 0.95, seed))
    return {"cases": len(full), "groups": {g: {label_names[j]: round(float(means[i, j]), 4) for j in range(len(label_names))}
                                           for i, g in enumerate(groups)},
            "gap": round(gap, 4), "class": label_names[k], "higher": groups[hi], "lower": groups[lo], "interval": interval,
            # per class (multi-label: per label): the largest gap between two groups in its mean probability
            "per_class": {label_names[j]: round(float(means[:, j].max() - means[:, j].min()), 4) for j in range(len(label_names))}}


def audit(result: ProbeResult, target: Target, data: Dataset | None, params: BehaviourParams, ctx: ProbeContext,
          sets: LabelDecisions | None = None) -> None:
    """Fill ``result`` with the probe's run on a classifier (``sets``: a multi-label model's label sets, from
    ``labelsets.audit``)."""
    lexicons = lexicons_with({k: list(v) for k, v in params.lexicons.items()})
    labels = list(target.label_names)
    cases: list[Case] = read_case_files(params.cases)
    for i, spec in enumerate(params.templates):
        cases += expand_template(spec, lexicons, ctx.seed, params.max_cases, f"templates[{i}]")
    skipped: list[dict[str, Any]] = []
    if data is not None and params.perturbations != ():
        made, rows = perturbation_cases(data, perturbation_specs(params.perturbations), Words(lexicons=lexicons),
                                        ctx.seed, params.max_examples)
        cases += made
        skipped = [r for r in rows if "skipped" in r]
    elif params.perturbations:
        raise ProbeError("perturbations need the suite's data; add a data: section or set perturbations: []")
    else:
        rows = []
    cases, unresolved = resolvable(cases, labels, skipped, sets is not None, target.task.label_map)
    substitutions: list[mlm_cases.Substitution] = []
    if params.mlm:
        made, substitutions, row = mlm_cases.mlm_cases(target, data, cases, lexicons, params, ctx)
        offset = len(cases)
        cases += made
        substitutions = [mlm_cases.Substitution(s.case + offset, s.proposal) for s in substitutions]
        rows = [*rows, row]
    if not cases:  # say why each source of cases made none (the masked LM's fill-ins below their floor, ...)
        why = "; ".join(f"{r['perturbation']}: {r['skipped']}" for r in rows if "skipped" in r)
        raise ProbeError("no behavioural case to run" + (f" ({why})" if why else "")
                         + ": give cases:, templates:, or data for the perturbations"
                         + (", or lower mlm_min_prob" if params.mlm else ""))
    probs = predict(target, cases, params, ctx)
    thresholds = sets.thresholds if sets is not None else None
    verdicts = [judge_case(c, lambda t: probs[text_key(t)], labels, thresholds) for c in cases]
    report(result, cases, verdicts, probs, labels, params, ctx, sets)
    result.details["perturbations"] = rows
    if params.mlm:
        said = sets.shown if sets is not None else (lambda p: labels[int(np.argmax(p))])
        edits = mlm_cases.describe_edits(result.findings, cases, substitutions, probs, text_key, said)
        result.details["mlm_substitution"] = {"mlm": params.mlm, "test": mlm_cases.TEST, "edits": edits[:200],
                                              "shown": min(len(edits), 200), "total": len(edits),
                                              "flipped": sum(e["flipped"] for e in edits)}
        if not substitutions:  # the test the suite asked for ran on nothing: said beside the decision, not only in json
            result.details.setdefault("warnings", []).append(
                f"{mlm_cases.TEST} made no case: {rows[-1]['skipped']}; lower mlm_min_prob or name another masked LM")
    if unresolved:
        result.details["unresolved"] = unresolved


def resolvable(cases: list[Case], labels: list[str], skipped: list[dict[str, Any]],
               multi_label: bool = False, label_map: Any = None) -> tuple[list[Case], list[str]]:
    """Check every label and write it as the model names it (``named_as_model``); a perturbation whose class
    the model lacks is skipped with the reason (on a multi-label model, also a directional one that names
    no label)."""
    keep, unresolved = [], []
    for case in cases:
        if case.source.startswith("perturbation ") and case.expect is not None and (
                case.expect.cls is not None or multi_label):
            try:
                if case.expect.cls is None:
                    raise ValueError("no label")
                class_index(case.expect.cls, labels, case.test, label_map)
            except Exception:
                reason = (f"{case.test}: the model has no class '{case.expect.cls}' (classes: {', '.join(labels)})"
                          if case.expect.cls is not None else
                          f"{case.test}: a directional perturbation on a multi-label model needs 'class: LABEL'")
                if reason not in unresolved:
                    unresolved.append(reason)
                    skipped.append({"perturbation": case.test, "skipped": reason})
                continue
        check_labels(case, labels, multi_label, label_map)  # a label set for a single-label model, a dir without a class
        keep.append(named_as_model(case, labels, label_map))
    return keep, unresolved


def predict(target: Target, cases: list[Case], params: BehaviourParams, ctx: ProbeContext) -> dict[str, np.ndarray]:
    """Each distinct text once, through the shared batched prediction path."""
    distinct: dict[str, Text] = {}
    for case in cases:
        for text in case.texts:
            distinct.setdefault(text_key(text), text)
    examples = [Example(t, id=str(i)) if isinstance(t, str) else Example(t[0], text_pair=t[1], id=str(i))
                for i, t in enumerate(distinct.values())]
    encoded = target.encode(examples, cache=False)
    matrix = target.predict_proba(encoded, params.batch_size).numpy()
    ctx.log(f"{len(cases)} cases, {len(examples)} distinct texts predicted once each")
    return dict(zip(distinct, matrix))


def report(result: ProbeResult, cases: list[Case], verdicts: list[CaseOutcome], probs: dict[str, np.ndarray],
           labels: list[str], params: BehaviourParams, ctx: ProbeContext, sets: LabelDecisions | None = None) -> None:
    """Failure rates, fairness gaps and the summary of the judged cases."""
    tests, total_failed = failure_rates(result, cases, [v.passed for v in verdicts],
                                        lambda i: finding(cases[i], verdicts[i], labels, probs, sets),
                                        params.findings)
    by_test: dict[str, list[int]] = defaultdict(list)
    for i, case in enumerate(cases):
        by_test[case.test].append(i)
    fairness = {}
    for test, idx in progress(list(by_test.items()), desc="fairness gaps"):
        grouped = [cases[i] for i in idx if cases[i].groups]
        gaps = fairness_gaps(grouped, probs, labels, params.bootstrap, ctx.seed) if grouped else {}
        if gaps:
            fairness[test] = gaps
            result.add_metric(f"fairness_gap.{slug(test)}", gaps["gap"], False,
                              f"largest gap between groups of '{test}' in the mean probability of one class",
                              ci=tuple(gaps["interval"]) if gaps["interval"] else None, cases=gaps["cases"])
    line = None
    if fairness:
        worst = max(fairness.items(), key=lambda kv: kv[1]["gap"])
        result.add_metric("max_fairness_gap", worst[1]["gap"], False, f"largest fairness gap (test '{worst[0]}')",
                          kind="extreme")
        result.details["fairness"] = fairness
        name, gaps = worst
        line = (f"{name}: '{gaps['higher']}' {gaps['gap']:+.3f} p({gaps['class']}) against '{gaps['lower']}'"
                if gaps["gap"] > 0 else "")
    summarise(result, tests, len(cases), total_failed, len(probs), line)


def decisive(case: Case, verdict: CaseOutcome,
             probs: dict[str, np.ndarray]) -> tuple[Text, Text, np.ndarray, np.ndarray, list[str]]:
    """A failed case's original and deciding texts, their probabilities, and the words the edit changed."""
    original, worst = case.texts[0], case.texts[verdict.worst]
    changed = list(case.changed[verdict.worst]) if verdict.worst < len(case.changed) else []
    return original, worst, probs[text_key(original)], probs[text_key(worst)], changed


def finding(case: Case, verdict: CaseOutcome, labels: list[str], probs: dict[str, np.ndarray],
            sets: LabelDecisions | None = None) -> Finding:
    """The text that decided a failed case, with the predicted class before and after (a multi-label model's
    predicted label sets: ``sets.finding``)."""
    if sets is not None:
        return sets.finding(case, verdict, labels, probs)
    cls = labels[verdict.cls]
    original, worst, before, after, changed = decisive(case, verdict, probs)
    if case.type == "mft":
        expected = f"{cls}" if case.label is not None else f"not {cls}"
        return Finding(title=f"{case.test} ({case.type})", input=text_key(worst), expected=expected,
                       observed=f"{labels[int(np.argmax(after))]} (p={float(after.max()):.3f})",
                       score=float(after[verdict.cls]), extra={"kind": "behaviour", "test": case.test})
    if case.type == "inv":
        expected = f"{labels[int(np.argmax(before))]} kept" + (f" or p moves <= {case.tolerance}" if case.tolerance else "")
    else:
        assert case.expect is not None
        expected = f"p({cls}) {'not down' if case.expect.direction == 'not_down' else 'not up'}" + (
            f" beyond {case.expect.tolerance}" if case.expect.tolerance else "")
    return Finding(title=f"{case.test} ({case.type})", input=text_key(original), perturbed=text_key(worst),
                   expected=expected,
                   observed=f"p({cls}) {verdict.before:.3f} -> {verdict.after:.3f}; "
                            f"{labels[int(np.argmax(before))]} -> {labels[int(np.argmax(after))]}",
                   score=verdict.after - verdict.before,
                   extra={"kind": "behaviour", "test": case.test, "changed": changed, "highlight": changed})
