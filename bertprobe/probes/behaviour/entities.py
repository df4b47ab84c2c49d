"""The behaviour probe's section for a token classifier (NER: a task with ``word_tags``).

Cases from JSONL and templates with entity slots (``entities_cases``), and perturbations of the suite's
tagged sentences that carry the entities through a word map (``entities_edits``); each distinct sentence
predicted once; failure rates per test, the entity F1 before and after each edit, and recall of persons per
origin group with the largest gap between groups (``fairness_gap.<test>``, a paired bootstrap interval over
sentences).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from bertprobe.data.dataset import Dataset, Example
from bertprobe.errors import DataError, ProbeError
from bertprobe.model.target import Target
from bertprobe.probe import ProbeContext
from bertprobe.probes.behaviour.cases import read_case_files
from bertprobe.probes.behaviour.entities_cases import (
    EntityCase,
    EntityVerdict,
    entity_case_from_mapping,
    expand_entity_template,
    judge_entities,
)
from bertprobe.probes.behaviour.entities_edits import EntityWords, Span, Tagged, entity_catalogue, model_types
from bertprobe.probes.behaviour.lexicon import edits, keyboard, lexicons_with, origins
from bertprobe.probes.behaviour.params import BehaviourParams
from bertprobe.probes.behaviour.perturb import perturbation_specs
from bertprobe.probes.behaviour.rates import add_origin_gaps, failure_rates, summarise
from bertprobe.registry import did_you_mean
from bertprobe.results import Finding, ProbeResult
from bertprobe.tasks.entities import bracketed, detect_scheme, marked, spans, split_tag
from bertprobe.tasks.token_classification import TokenClassification

Words = tuple[str, ...]


def _decoder(entity_types: Sequence[str]) -> Any:
    def decode(tags: list[str], where: str) -> list[Span]:
        for tag in tags:
            prefix, kind = split_tag(tag)
            if prefix not in "OBIESUL":
                raise DataError(f"{where}: '{tag}' is not a tag (O, B-TYPE, I-TYPE, E-TYPE, S-TYPE)")
            if kind and kind not in entity_types:
                raise DataError(f"{where}: entity type '{kind}' (in {tag}) is not the model's "
                                f"({', '.join(entity_types)}){did_you_mean(kind, list(entity_types))}")
        return spans(tags, detect_scheme(tags))
    return decode


def perturbation_cases(data: Dataset, target: Target, specs: list[tuple[Any, dict[str, Any]]], words: EntityWords,
                       seed: int, max_examples: int) -> tuple[list[EntityCase], list[dict[str, Any]]]:
    """The inv cases each perturbation makes of (a seeded sample of) the tagged sentences, and a row per
    perturbation: how many sentences it applied to, or why it was skipped."""
    task = cast(TokenClassification, target.task)
    examples = [ex for ex in data.examples if ex.words]
    if len(examples) > max_examples:
        examples = random.Random(seed).sample(examples, max_examples)
    sentences = []
    for ex in examples:
        labelled = ex.label is not None
        gold = tuple(spans(task.tags(list(ex.label)), task.scheme)) if labelled else ()  # type: ignore[arg-type]
        sentences.append((ex, Tagged(tuple(ex.words or ()), gold), labelled))
    cases: list[EntityCase] = []
    rows = []
    for pert, options in specs:
        row = {"perturbation": pert.name, "type": "inv", "capability": pert.capability, "examples": len(examples),
               "description": pert.description, "applied": 0}
        rows.append(row)
        if pert.family and pert.family not in words.types:
            row["skipped"] = f"the model has no {pert.family} type (its types: {', '.join(task.entity_types)})"
            continue
        words.variants = int(options.get("variants", pert.variants))
        for ex, sent, labelled in sentences:
            edited = pert.edit(sent, random.Random(f"{seed}:{pert.name}:{ex.id}"), words)
            if not edited:
                continue
            row["applied"] += 1
            cases.append(EntityCase(test=pert.name, type="inv", sentences=(sent, *edited), capability=pert.capability,
                                    id=str(ex.id), source=f"perturbation {pert.name}", has_gold=labelled))
        if not row["applied"]:
            row["skipped"] = f"applies to none of the {len(examples)} sentences"
    return cases, rows


def predict_entities(target: Target, sentences: Sequence[Words], batch_size: int | None,
                     ctx: ProbeContext) -> dict[Words, tuple[Span, ...]]:
    """The predicted entities of each distinct sentence, through the shared word-level prediction path."""
    task = cast(TokenClassification, target.task)
    examples = [Example(" ".join(w), words=w, id=str(i)) for i, w in enumerate(sentences)]
    predicted = ctx.predictions(target, Dataset(examples, name="behaviour sentences"), batch_size)
    out = {}
    for words, logits in zip(sentences, predicted.logits):
        tags = task.tags(logits[: len(words)].argmax(-1))
        out[words] = tuple(sorted(spans(tags, task.scheme)))
    return out


def origin_recall(cases: Sequence[EntityCase], predicted: dict[Words, tuple[Span, ...]], kind: str, resamples: int,
                  seed: int) -> dict[str, Any]:
    """Recall of ``kind`` entities per origin group over the same sentences, and the largest gap between two
    groups with a paired percentile bootstrap over sentences."""
    groups = sorted({g for c in cases for g in c.groups if g})
    if len(groups) < 2:
        return {}
    found = np.zeros((len(cases), len(groups)))
    gold = np.zeros((len(cases), len(groups)))
    for i, case in enumerate(cases):
        for sent in case.sentences[1:]:
            g = groups.index(sent.group)
            want = {s for s in sent.gold if s[2] == kind}
            gold[i, g] += len(want)
            found[i, g] += len(want & set(predicted[sent.words]))
    if not gold.sum():
        return {}
    recall = found.sum(0) / gold.sum(0)
    hi, lo = int(np.argmax(recall)), int(np.argmin(recall))
    rng = np.random.default_rng(seed)
    intervals, gap_ci = {}, None
    if resamples > 0 and len(cases) > 1:
        idx = rng.integers(0, len(cases), size=(resamples, len(cases)))
        draws = found[idx].sum(1) / np.maximum(gold[idx].sum(1), 1)
        intervals = {g: [float(np.quantile(draws[:, j], 0.025)), float(np.quantile(draws[:, j], 0.975))]
                     for j, g in enumerate(groups)}
        gaps = draws[:, hi] - draws[:, lo]
        gap_ci = [float(np.quantile(gaps, 0.025)), float(np.quantile(gaps, 0.975))]
    return {"cases": len(cases), "type": kind, "recall": {g: round(float(r), 4) for g, r in zip(groups, recall)},
            "intervals": intervals, "entities": {g: int(n) for g, n in zip(groups, gold.sum(0))},
            "gap": round(float(recall[hi] - recall[lo]), 4), "higher": groups[hi], "lower": groups[lo], "interval": gap_ci}


def _f1(pairs: Sequence[tuple[Sequence[Span], Sequence[Span]]]) -> float | None:
    tp = sum(len(set(g) & set(p)) for g, p in pairs)
    total = sum(len(g) + len(p) for g, p in pairs)
    return round(2 * tp / total, 4) if total else None


def audit(result: ProbeResult, target: Target, data: Dataset | None, params: BehaviourParams,
          ctx: ProbeContext) -> None:
    """Fill ``result`` with the behaviour probe's run on a token classifier (see the module docstring)."""
    lexicons = lexicons_with({k: list(v) for k, v in params.lexicons.items()})
    specs = perturbation_specs(params.perturbations, entity_catalogue(), ("name", "variants")) \
        if data is not None and params.perturbations != () else []
    task = cast(TokenClassification, target.task)
    types = model_types(task.entity_types)
    decode = _decoder(task.entity_types)
    cases: list[EntityCase] = read_case_files(
        params.cases, lambda raw, where, source: entity_case_from_mapping(raw, where, decode, source))
    for i, spec in enumerate(params.templates):
        cases += expand_entity_template(spec, lexicons, types, ctx.seed, params.max_cases, f"templates[{i}]")
    rows: list[dict[str, Any]] = []
    if data is not None and specs:
        words = EntityWords(lexicons=lexicons, edits=edits(), keys=keyboard(), types=types, origins=origins())
        made, rows = perturbation_cases(data, target, specs, words, ctx.seed, params.max_examples)
        cases += made
    elif params.perturbations:
        raise ProbeError("perturbations need the suite's data; add a data: section or set perturbations: []")
    if not cases:
        raise ProbeError("no behavioural case to run: give cases:, templates:, or tagged data for the perturbations")
    every = [s.words for c in cases for s in c.sentences]
    distinct = list(dict.fromkeys(every))
    predicted = predict_entities(target, distinct, params.batch_size, ctx)
    ctx.log(f"{len(cases)} cases, {len(distinct)} distinct sentences predicted once each")
    verdicts = [judge_entities(c, [predicted[s.words] for s in c.sentences]) for c in cases]
    tests, failed = failure_rates(result, cases, [v.passed for v in verdicts],
                                  lambda i: _finding(cases[i], verdicts[i], predicted), params.findings)
    by_test: dict[str, list[EntityCase]] = defaultdict(list)
    for case in cases:
        by_test[case.test].append(case)
    for row in tests:  # entity F1 against gold on the originals and on the edited sentences
        group = [c for c in by_test[row["test"]] if c.has_gold]
        if row["type"] == "inv" and group:
            row["entity_f1_original"] = _f1([(c.sentences[0].gold, predicted[c.sentences[0].words]) for c in group])
            row["entity_f1_edited"] = _f1([(s.gold, predicted[s.words]) for c in group for s in c.sentences[1:]])
        elif group:
            row["entity_f1"] = _f1([(s.gold, predicted[s.words]) for c in group for s in c.sentences])
    fairness = {}
    for test, members in by_test.items():
        grouped = [c for c in members if any(c.groups) and c.has_gold]
        gaps = origin_recall(grouped, predicted, types.get("person", ""), params.bootstrap, ctx.seed) if grouped else {}
        if gaps:
            fairness[test] = gaps
    line = add_origin_gaps(result, fairness, "recall", "recall_by_origin", lambda gaps, test, group: (
        f"recall of {gaps['type']} entities whose surnames are of the '{group}' group" if group is not None
        else f"largest gap in {gaps['type']} recall between origin groups of '{test}'"), lambda gaps: f"{gaps['type']} recall")
    summarise(result, tests, len(cases), failed, len(distinct), line)
    result.details["perturbations"] = rows
    result.details["task"] = target.task.name
    result.details["sentences_in_cases"] = len(every)  # predicted as len(distinct) sentences, each once


def _finding(case: EntityCase, verdict: EntityVerdict, predicted: dict[Words, tuple[Span, ...]]) -> Finding:
    """The sentence that decided a failed case, with the expected and the predicted entities bracketed."""
    sent = case.sentences[verdict.worst]
    shown = sorted(set(bracketed(sent.words, (*verdict.expected, *verdict.observed))), key=len, reverse=True)
    extra = {"kind": "entities", "test": case.test, "highlight": shown, "gold": marked(sent.words, sent.gold),
             "changed": [sent.words[i] for i in sent.changed if i < len(sent.words)]}
    if case.type == "mft":
        return Finding(title=f"{case.test} (mft)", input=" ".join(sent.words), expected=marked(sent.words, verdict.expected),
                       observed=marked(sent.words, verdict.observed), score=float(len(set(verdict.expected) - set(verdict.observed))),
                       extra=extra)
    original = case.sentences[0]
    return Finding(title=f"{case.test} (inv)", input=marked(original.words, predicted[original.words]),
                   perturbed=" ".join(sent.words), expected=marked(sent.words, verdict.expected),
                   observed=marked(sent.words, verdict.observed),
                   score=float(len(set(verdict.expected) ^ set(verdict.observed))), extra=extra)
