"""The behaviour probe's section for an extractive reader (a task with ``span_answers``).

Cases: MFT from JSONL, the suite's templates and the built-in templates after CheckList's SQuAD suite
(``answers_cases``); INV from JSONL and from perturbations of the suite's questions that carry the gold answers
through a character map (``answers_edits``). Every distinct (question, context) is answered once, through the
shared prediction path. Verdicts:

* ``mft``: a case passes when each item's answer scores at least ``answer_bar`` against its expected answers
  in ``answer_metric`` (SQuAD's F1 by default, or ``em``), normalised as the official script does;
* ``inv``: a case fails when an edited item's answer differs, as SQuAD-normalised text, from the original's
  answer carried through the edit's character map (a swapped name in the answer is swapped in the expected
  answer too; an edit from a JSONL file, without a map, compares the texts as they are).

Reported: failure rates per test and capability with an outcome per case; their intervals are Wilson's over
cases, or where cases share a context (the INV cases of a paragraph's questions: ``tasks.qa_clusters``), over
contexts (Wilson's on the cases' effective sample size, Korn & Graubard 1998: ``stats.clustered_wilson``), and
each outcome carries its context's key so a paired gate or ``compare`` resamples contexts too; per INV test
the gold F1 of the originals and of the edited items (the gold followed the edit); for the templates marked
``origins``, F1 per surname origin group over the same sentences and the largest gap between two groups with
a paired bootstrap interval over cases; findings with the expected and predicted answers marked in the
context (``extra["marks"]``).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from bertprobe.data.dataset import Dataset, Example
from bertprobe.errors import ProbeError
from bertprobe.model.target import Target
from bertprobe.probe import ProbeContext
from bertprobe.probes.behaviour.answers_cases import BUILTIN_TEMPLATES, QACase, expand_qa_template, qa_case_from_mapping
from bertprobe.probes.behaviour.answers_edits import Item, QAPerturbation, item_of, move_span, qa_catalogue
from bertprobe.probes.behaviour.cases import read_case_files
from bertprobe.probes.behaviour.lexicon import lexicons_with, origins, qa_lexicons
from bertprobe.probes.behaviour.params import BehaviourParams
from bertprobe.probes.behaviour.perturb import Words, perturbation_specs
from bertprobe.probes.behaviour.rates import add_origin_gaps, failure_rates, summarise
from bertprobe.progress import progress
from bertprobe.results import Finding, ProbeResult
from bertprobe.stats import bootstrap_ci
from bertprobe.tasks import squad_metrics
from bertprobe.tasks.answer_text import NO_ANSWER, answer_marks, excerpt
from bertprobe.tasks.qa_clusters import question_clusters
from bertprobe.tasks.spans import Answer

Key = tuple[str, str]  # (question, context)


def key_of(item: Item) -> Key:
    return item.question, item.context


def perturbation_cases(data: Dataset, specs: list[tuple[QAPerturbation, dict[str, Any]]], words: Words, seed: int,
                       max_examples: int) -> tuple[list[QACase], list[dict[str, Any]]]:
    """The INV cases each perturbation makes of (a seeded sample of) the questions, and a row per perturbation:
    how many questions it applied to, or why it was skipped. A case keeps its question's cluster (its context,
    ``tasks.qa_clusters``): the failure rates resample a context's cases together."""
    cluster = {id(ex): key for ex, key in zip(data.examples, question_clusters(data.examples))}
    examples = [ex for ex in data.examples if ex.text and ex.text_pair]
    if len(examples) > max_examples:
        examples = random.Random(seed).sample(examples, max_examples)
    cases: list[QACase] = []
    rows = []
    for pert, options in progress(specs, desc="perturbations"):
        words.variants = int(options.get("variants", pert.variants))
        applied = 0
        for ex in examples:
            item = item_of(ex)
            made = pert.edit(item, random.Random(f"{seed}:{pert.name}:{ex.id}"), words)
            if not made:
                continue
            applied += 1
            cases.append(QACase(pert.name, "inv", (item, *made), pert.capability, str(ex.id),
                                f"perturbation {pert.name}", changed=((), *[m.changed for m in made]),
                                cluster=cluster[id(ex)]))
        rows.append({"perturbation": pert.name, "type": "inv", "capability": pert.capability, "applied": applied,
                     "examples": len(examples), "description": pert.description,
                     **({} if applied else {"skipped": f"applies to none of the {len(examples)} questions"})})
    return cases, rows


def answer_all(target: Target, keys: Sequence[Key], batch_size: int | None, ctx: ProbeContext) -> dict[Key, Answer]:
    """Each distinct (question, context) answered once, through the shared prediction path."""
    examples = [Example(q, text_pair=c, id=f"b{i}") for i, (q, c) in enumerate(keys)]
    predicted = ctx.predictions(target, Dataset(examples, name="behaviour questions"), batch_size)
    return dict(zip(keys, predicted.answers))


def expected_after(original: Answer, before: Item, after: Item) -> str:
    """The original's answer carried through the edit: its span moved by the edit's character map (without a
    map, the original's text)."""
    if after.edits is None or not original.text:
        return original.text
    a, b = move_span(original.start, original.end, after.edits)
    return after.context[a:b]


def judge(case: QACase, answers: dict[Key, Answer], metric: str, bar: float) -> tuple[bool, int, list[float]]:
    """(passed, the deciding item, each item's score): mft items against their answers (score: ``metric``);
    inv items' answers against the original's, carried through the edit (score 1 for the same answer)."""
    if case.type == "mft":
        scores = [squad_metrics.score(answers[key_of(it)].text, [t for t, _ in it.answers])[metric == "f1"]
                  for it in case.items]
        ok = [s >= bar for s in scores]
        return all(ok), (ok.index(False) if False in ok else 0), scores
    first = answers[key_of(case.items[0])]
    scores = [1.0] + [float(squad_metrics.normalize_answer(answers[key_of(it)].text)
                            == squad_metrics.normalize_answer(expected_after(first, case.items[0], it)))
                      for it in case.items[1:]]
    worst = scores.index(0.0) if 0.0 in scores else 0
    return worst == 0, worst, scores


def _gold_f1(items: Sequence[Item], answers: dict[Key, Answer]) -> float | None:
    scored = [squad_metrics.score(answers[key_of(it)].text, [t for t, _ in it.answers])[1] for it in items if it.answers]
    return round(float(np.mean(scored)), 4) if scored else None


def origin_gaps(cases: Sequence[QACase], answers: dict[Key, Answer], resamples: int, seed: int) -> dict[str, Any]:
    """F1 per origin group over the same sentences (a bootstrap interval each) and the largest gap between two
    groups with a paired bootstrap interval over cases."""
    groups = sorted({g for c in cases for g in c.groups})
    full = [c for c in cases if set(groups) <= set(c.groups)]
    if len(groups) < 2 or not full:
        return {}
    f1 = np.array([[squad_metrics.score(answers[key_of(c.items[c.groups.index(g)])].text,
                                        [t for t, _ in c.items[c.groups.index(g)].answers])[1] for g in groups]
                   for c in full])
    means = f1.mean(axis=0)
    hi, lo = int(np.argmax(means)), int(np.argmin(means))
    if hi == lo:
        hi, lo = 0, 1
    intervals, gap_ci = {}, None
    if resamples > 0 and len(full) > 1:
        intervals = {g: list(bootstrap_ci(f1[:, j], resamples, 0.95, seed)) for j, g in enumerate(groups)}
        gap_ci = list(bootstrap_ci(f1[:, hi] - f1[:, lo], resamples, 0.95, seed))
    return {"cases": len(full), "f1": {g: round(float(m), 4) for g, m in zip(groups, means)}, "intervals": intervals,
            "gap": round(float(means[hi] - means[lo]), 4), "higher": groups[hi], "lower": groups[lo], "interval": gap_ci}


def audit(result: ProbeResult, target: Target, data: Dataset | None, params: BehaviourParams,
          ctx: ProbeContext) -> None:
    """Fill ``result`` with the behaviour probe's run on an extractive reader (see the module docstring)."""
    lexicons = lexicons_with({k: list(v) for k, v in params.lexicons.items()})
    specs = perturbation_specs(params.perturbations, qa_catalogue(), ("name", "variants")) \
        if data is not None and params.perturbations != () else []
    words = {**qa_lexicons(), **lexicons}
    cases: list[QACase] = read_case_files(params.cases, qa_case_from_mapping)
    groups = origins() if params.origins else {}
    templates = [*(BUILTIN_TEMPLATES if params.builtin_templates else ()), *params.templates]
    for i, spec in enumerate(templates):
        where = f"templates[{i - (len(templates) - len(params.templates))}]" if i >= len(templates) - len(params.templates) \
            else f"built-in template '{spec['test']}'"
        cases += expand_qa_template(spec, words, groups, ctx.seed, params.max_cases, where)
    rows: list[dict[str, Any]] = []
    if data is not None and specs:
        made, rows = perturbation_cases(data, specs, Words(lexicons=words), ctx.seed, params.max_examples)
        cases += made
    elif params.perturbations:
        raise ProbeError("perturbations need the suite's data; add a data: section or set perturbations: []")
    if not cases:
        raise ProbeError("no behavioural case to run: give cases:, templates:, builtin_templates: true, or data for "
                         "the perturbations")
    every = [key_of(it) for c in cases for it in c.items]
    distinct = list(dict.fromkeys(every))
    answers = answer_all(target, distinct, params.batch_size, ctx)
    ctx.log(f"{len(cases)} cases, {len(distinct)} distinct questions answered once each")
    verdicts = [judge(c, answers, params.answer_metric, params.answer_bar) for c in cases]
    tests, failed = failure_rates(result, cases, [v[0] for v in verdicts],
                                  lambda i: _finding(cases[i], verdicts[i], answers), params.findings,
                                  [c.context_key for c in cases])
    by_test: dict[str, list[QACase]] = defaultdict(list)
    for case in cases:
        by_test[case.test].append(case)
    for row in tests:
        members = by_test[row["test"]]
        if row["type"] == "inv":
            row["gold_f1_original"] = _gold_f1([c.items[0] for c in members], answers)
            row["gold_f1_edited"] = _gold_f1([it for c in members for it in c.items[1:]], answers)
        else:
            row["f1"] = _gold_f1([it for c in members for it in c.items], answers)
    fairness = {}
    for test, members in by_test.items():
        gaps = origin_gaps(members, answers, params.bootstrap, ctx.seed) if any(c.groups for c in members) else {}
        if gaps:
            fairness[test] = gaps
    line = add_origin_gaps(result, fairness, "f1", "answer_f1_by_origin", lambda gaps, test, group: (
        f"answer F1 on '{test}' with surnames of the '{group}' group" if group is not None
        else f"largest gap in answer F1 between surname origin groups of '{test}'"), lambda gaps: "F1")
    summarise(result, tests, len(cases), failed, len(distinct), line)
    result.details["perturbations"] = rows
    result.details["task"] = target.task.name
    result.details["verdicts"] = {"mft": f"each item's answer {params.answer_metric.upper()} >= {params.answer_bar} "
                                         "against its expected answers (SQuAD normalisation)",
                                  "inv": "the edited item's answer equals the original's carried through the edit "
                                         "(SQuAD-normalised text); fails when it changes"}
    result.details["questions_in_cases"] = len(every)


def _cell(item: Item, answer: Answer) -> tuple[str, list[list[Any]]]:
    context, marks = excerpt(item.context, answer_marks(answer, item.answers))
    return context, [list(m) for m in marks]


def _finding(case: QACase, verdict: tuple[bool, int, list[float]], answers: dict[Key, Answer]) -> Finding:
    """The item that decided a failed case, its context with the expected (gold) and predicted answers marked."""
    _, worst, scores = verdict
    item = case.items[worst]
    answer = answers[key_of(item)]
    context, marks = _cell(item, answer)
    extra: dict[str, Any] = {"kind": "answer", "test": case.test, "id": case.id,
                             "changed": list(case.changed[worst]) if case.changed else [],
                             "columns": {"context": context}, "marks": {"context": marks}}
    if case.groups:
        extra["group"] = case.groups[worst]
    if case.type == "mft":
        golds = " | ".join(dict.fromkeys(t for t, _ in item.answers))
        title = f"{case.test} (mft, {case.groups[worst]})" if case.groups else f"{case.test} (mft)"
        return Finding(title=title, input=item.question, expected=golds, observed=answer.text or NO_ANSWER,
                       score=round(scores[worst], 4), extra=extra)
    original = case.items[0]
    first = answers[key_of(original)]
    extra["columns"]["original context"], extra["marks"]["original context"] = _cell(original, first)
    expected = expected_after(first, original, item)
    return Finding(title=f"{case.test} (inv)", input=original.question,
                   perturbed=item.question if item.question != original.question else None,
                   expected=f"{expected or NO_ANSWER} (the original's answer, carried through the edit)",
                   observed=answer.text or NO_ANSWER, score=0.0, extra=extra)
