"""Probe ``distractor``: does one added sentence that resembles the question steer the reader to its fake answer?

Jia & Liang 2017, "Adversarial Examples for Evaluating Reading Comprehension Systems" (EMNLP). AddOneSent adds
to a paragraph one sentence made from the question, with its entities and numbers changed and a fake answer
of the answer's type, which answers a *different* question, so a reader that understands the paragraph keeps
its answer; under AddSent BiDAF's F1 falls from 75.5 to 34.3, and every model they tested lost tens of points.
This probe builds such a sentence for each question of any QA data (``probes.distractor.rules``: the forms
what, which, who, when, where, how many and how much; numbers, years, names, places and a few antonyms changed;
the fake answer from the behaviour probe's lexicons, or a nearby number or date, or for a common noun phrase
another question's answer of the same question word and shape), inserts it at the end of the
context (``position: start``: before it, the gold spans moved), and answers again through the task.

Metrics, over the questions the rules cover: F1 and exact match with and without the distractor, the paired
drop (``f1_drop``: original minus adversarial, paired per question), the share of answers that moved into the
distractor, the same per question word, and the share of questions covered (with the reasons the others are
not). Intervals resample contexts where questions share one (SQuAD asks about five per paragraph, and they are
no independent evidence: ``tasks.qa_clusters``): a cluster bootstrap of each F1 and paired drop, a context's
questions drawn together (an F1 from fewer than 30 contexts: Wilson's with one trial per context), and Wilson's
interval on the effective sample size (Korn & Graubard 1998) of each share and exact match; where no two
questions share a context, a bootstrap over questions (Wilson's below 30 questions for an F1) and Wilson's over
questions for the shares. Each description names the interval drawn (``qa_clusters.interval_over``). The outcomes carry each question's context key, so a paired gate or ``compare``
resamples contexts too. Findings: the questions that lost the most F1, with the distractor, the gold answer and
the prediction marked in the context.

Deviations: the sentences come from rules over words, not from a parse and crowd workers: Jia & Liang's
AddOneSent sentences were checked for fluency by people and ours are not (a hand-checked sample is in the
probe's docs page); unknown capitalised names are swapped for a lexicon name of as many words, not for their
nearest GloVe neighbour; questions the rules cannot convert (why, how, a common-noun answer, nothing to change)
are counted, not guessed. Jia & Liang's AddOneSent picks one random sentence per question; so does this probe
(one per question, seeded by the run's seed and the question's id), so there is no adversarial search.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from bertprobe.data.dataset import Dataset, Example
from bertprobe.errors import ProbeError
from bertprobe.hookmarkers import hookimpl
from bertprobe.model.target import Target
from bertprobe.probe import Probe, ProbeContext
from bertprobe.probes.distractor.rules import Distractor, build, insert, moved_golds, package_lexicon, shift
from bertprobe.results import DefaultExpectation, Finding, ProbeResult
from bertprobe.results.outcomes import Outcomes, example_ids
from bertprobe.stats import clustered, clustered_wilson, paired_bootstrap_diff
from bertprobe.tasks.answer_text import answer_marks, excerpt
from bertprobe.tasks.qa_clusters import mean_interval
from bertprobe.tasks.qa_clusters import cluster_keys, interval_over, question_clusters
from bertprobe.tasks.squad_metrics import QUESTION_WORDS, normalize_answer, question_word


@dataclass(frozen=True)
class DistractorParams:
    """``position``: where the distractor goes, at the ``end`` of the context (AddOneSent's default) or its
    ``start``. ``bootstrap``: resamples of the intervals (0: none). ``confidence``: their level. ``findings``:
    questions shown with the distractor and both answers marked. ``batch_size``: windows per forward pass.
    ``control``: also insert, in the same place, the distractor built for *another* question (a sentence of the
    same kind that does not mimic this question) and report the F1 lost to it, so the drop splits into what any
    added sentence costs and what the mimicry costs (one more pass over the covered questions)."""

    position: Literal["end", "start"] = "end"
    bootstrap: int = 1000
    confidence: float = 0.95
    findings: int = 5
    batch_size: int | None = None
    control: bool = False

    def __post_init__(self) -> None:
        if self.bootstrap < 0 or self.findings < 0 or not 0 < self.confidence < 1:
            raise ValueError("bootstrap and findings must be >= 0 and confidence in (0, 1)")


class DistractorProbe(Probe):
    name = "distractor"
    description = "AddOneSent-style distractors (Jia & Liang 2017): F1 with and without a sentence that mimics the question"
    paper = "Jia & Liang 2017, Adversarial Examples for Evaluating Reading Comprehension Systems (EMNLP)"
    requires = frozenset({"predictions", "data:labels", "data:text-pair"})
    tasks = frozenset({"question-answering"})
    metrics = {
        "original_f1": "F1 on the covered questions without the distractor (cluster bootstrap interval over "
                       "contexts where questions share one, else over questions; Wilson's on fewer than 30)",
        "original_exact_match": "exact match on the covered questions without the distractor",
        "adversarial_f1": "F1 on the covered questions with the distractor inserted",
        "adversarial_exact_match": "exact match on the covered questions with the distractor inserted",
        "f1_drop": "original minus adversarial F1, paired per question (paired bootstrap interval, resampling "
                   "contexts where questions share one)",
        "exact_match_drop": "original minus adversarial exact match, paired per question",
        "moved_to_distractor": "share of covered questions whose answer lies in the distractor (Wilson's interval, "
                               "on the effective sample size over contexts where questions share one)",
        "coverage": "share of the answerable questions the rules turn into a distractor (Wilson's interval, on the "
                    "effective sample size over contexts where questions share one)",
        "covered": "questions with a distractor",
        "uncovered": "answerable questions the rules do not convert (counted, not guessed)",
        "control_f1": "control: F1 with another question's distractor inserted instead (control: true)",
        "control_f1_drop": "control: original minus control F1, paired per question: what any added sentence costs",
        "mimicry_f1_drop": "control: control minus adversarial F1, paired per question: what the resemblance to the "
                           "question costs",
        "question_*_f1_drop": "the F1 drop on the covered questions of one question word",
        "question_*_moved_to_distractor": "the share of answers moved into the distractor, per question word",
        "questions_*": "covered questions of one question word",
    }
    metric_directions = {"original_f1": True, "original_exact_match": True, "adversarial_f1": True,
                         "adversarial_exact_match": True, "f1_drop": False, "exact_match_drop": False,
                         "moved_to_distractor": False, "coverage": None, "covered": None, "uncovered": None,
                         "question_*_f1_drop": False, "question_*_moved_to_distractor": False, "questions_*": None,
                         "control_f1": True, "control_f1_drop": False, "mimicry_f1_drop": False}
    Params = DistractorParams
    defaults = (DefaultExpectation(
        "f1_drop", max=0.1, interval=True,
        why="one sentence that answers another question should barely move a reader that understands the paragraph "
            "(Jia & Liang's human readers lost a few points; their models tens, BiDAF 75.5 -> 34.3 under AddSent): a "
            "reader that surely loses more than 10 F1 points to a rule-built sentence matches the question's words "
            "instead of reading; judged on the paired bootstrap interval, so a small sample fails only when surely past"),)
    key_metrics = ("f1_drop", "adversarial_f1", "moved_to_distractor", "coverage")

    def run(self, target: Target, data: Dataset | None, params: DistractorParams, ctx: ProbeContext) -> ProbeResult:
        assert data is not None
        if any(ex.label is None for ex in data.examples):
            raise ProbeError("distractor needs the gold answers of every question (the fake answer is of their type)")
        result = ProbeResult(probe=self.name)
        original = list(ctx.predictions(target, data, params.batch_size).answers)
        ids = example_ids(data.examples)
        clusters = question_clusters(data.examples)  # each question's context: the intervals resample contexts
        lex = package_lexicon()
        made: list[tuple[int, Distractor]] = []
        reasons: Counter[str] = Counter()
        pools: dict[str, list[str]] = {}  # the data's gold answers per question word: fakes for common nouns
        for ex in data.examples:
            if ex.label:
                pools.setdefault(question_word(ex.text), []).append(ex.label[0][0])
        pools = {w: sorted(set(p)) for w, p in pools.items()}
        for i, ex in enumerate(data.examples):
            if not ex.label:
                continue  # unanswerable (SQuAD 2.0): no answer to fake
            got = build(ex.text, [t for t, _ in ex.label], lex, random.Random(f"{ctx.seed}:{ids[i]}"),
                        pool=pools.get(question_word(ex.text), ()))
            if isinstance(got, Distractor):
                made.append((i, got))
            else:
                reasons[got] += 1
        answerable = sum(bool(ex.label) for ex in data.examples)
        if not made:
            raise ProbeError(f"distractor: the rules convert none of the {answerable} answerable questions "
                             f"({'; '.join(f'{r}: {n}' for r, n in reasons.most_common(3))}); it needs what, which, "
                             "who, when, where or how many questions with names, places, numbers or dates")
        changed, spans = [], []
        for i, d in made:
            ex = data.examples[i]
            context, start, end = insert(ex.text_pair or "", d.sentence, params.position)
            changed.append(Example(ex.text, context, moved_golds(ex.label, shift(params.position, d.sentence)),
                                   id=ex.id, meta=dict(ex.meta)))
            spans.append((start, end))
        adversarial = target.task.answers(target, changed, params.batch_size, ctx.progress)
        before = target.task.outcomes([original[i] for i, _ in made], [data.examples[i] for i, _ in made])
        after = target.task.outcomes(adversarial, changed)
        moved = [float(a.text != "" and a.start < e and s < a.end) for a, (s, e) in zip(adversarial, spans)]
        picked = [ids[i] for i, _ in made]
        words = [question_word(data.examples[i].text) for i, _ in made]
        within = [clusters[i] for i, _ in made]
        self._metrics(result, before, after, moved, picked, words, within, params, ctx.seed)
        if params.control:
            self._control(result, target, data, made, before, after, picked, within, params, ctx)
        converted = {i for i, _ in made}
        asked = [i for i, ex in enumerate(data.examples) if ex.label]
        self._coverage(result, [float(i in converted) for i in asked], [clusters[i] for i in asked], reasons, params)
        self._findings(result, made, changed, spans, adversarial, original, before, after, params)
        result.details["position"] = params.position
        result.details["sample"] = [{"question": data.examples[i].text, "distractor": d.sentence, "fake": d.fake,
                                     "form": d.form} for i, d in made[:10]]
        drop = result.metrics["f1_drop"]
        note = (f"F1 {100 * (result.value('original_f1') or 0):.1f} -> {100 * (result.value('adversarial_f1') or 0):.1f}"
                f" with a distractor at the {params.position} of {len(made)} questions")
        if drop.ci:
            note += f" (drop {100 * (drop.value or 0):.1f} points [{100 * drop.ci[0]:.1f}, {100 * drop.ci[1]:.1f}])"
        note += (f"; {100 * (result.value('moved_to_distractor') or 0):.0f}% of answers moved into it; rules cover "
                 f"{100 * (result.value('coverage') or 0):.0f}% of {answerable} answerable questions")
        if params.control:
            note += (f"; another question's sentence costs {100 * (result.value('control_f1_drop') or 0):.1f} points, "
                     f"the mimicry {100 * (result.value('mimicry_f1_drop') or 0):.1f}")
        result.details["key_finding"] = note
        return result

    @staticmethod
    def _metrics(result: ProbeResult, before: list[dict[str, float]], after: list[dict[str, float]],
                 moved: list[float], ids: list[str], words: list[str], groups: list[str], params: DistractorParams,
                 seed: int) -> None:
        """Original and adversarial F1/EM, their paired drops, the share moved; overall and per question word.
        ``groups``: each question's context, the unit the intervals resample (``tasks.qa_clusters``)."""
        def mean(values: list[float]) -> float:
            return sum(values) / len(values) if values else 0.0

        keys = cluster_keys(groups)  # a paired gate or compare resamples contexts too
        for key, name in (("f1", "f1"), ("em", "exact_match")):
            b, a = [o[key] for o in before], [o[key] for o in after]
            kind = "score" if key == "f1" else "binary"
            result.outcomes += [Outcomes.from_values(f"{key}_original", ids, b, kind, keys),
                                Outcomes.from_values(f"{key}_adversarial", ids, a, kind, keys)]
            result.add_metric(f"original_{name}", mean(b), True, f"{name.replace('_', ' ')} without the distractor "
                              f"({interval_over(b, groups, params.bootstrap)})", mean_interval(b, params, seed, groups),
                              outcome=f"{key}_original")
            result.add_metric(f"adversarial_{name}", mean(a), True, f"{name.replace('_', ' ')} with the distractor "
                              f"({interval_over(a, groups, params.bootstrap)})", mean_interval(a, params, seed, groups),
                              outcome=f"{key}_adversarial")
            result.add_metric(f"{name}_drop", mean(b) - mean(a), False,
                              f"{name.replace('_', ' ')} without minus with the distractor, paired per question "
                              f"({_paired_over(groups)})", _paired(a, b, groups, params, seed))
        result.outcomes.append(Outcomes.from_values("moved_to_distractor", ids, moved, groups=keys))
        result.add_metric("moved_to_distractor", mean(moved), False,
                          f"share of answers inside the distractor ({interval_over(moved, groups)})",
                          clustered_wilson(moved, groups, params.confidence),
                          outcome="moved_to_distractor")
        rows = []
        for w in [w for w in QUESTION_WORDS if w in words]:
            idx = [k for k, x in enumerate(words) if x == w]
            b, a, m = [before[k]["f1"] for k in idx], [after[k]["f1"] for k in idx], [moved[k] for k in idx]
            within = [groups[k] for k in idx]
            interval = _paired(a, b, within, params, seed)
            result.add_metric(f"question_{w}_f1_drop", mean(b) - mean(a), False,
                              f"F1 drop on the covered '{w}' questions ({_paired_over(within)})", interval)
            result.add_metric(f"question_{w}_moved_to_distractor", mean(m), False,
                              f"share of '{w}' answers moved into the distractor ({interval_over(m, within)})",
                              clustered_wilson(m, within, params.confidence))
            result.add_metric(f"questions_{w}", float(len(idx)), None, f"covered '{w}' questions", kind="count")
            rows.append([w, len(idx), mean(b), mean(a), mean(b) - mean(a),
                         f"[{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "-", _paired_over(within, short=True),
                         mean(m)])
        result.details.setdefault("figures", []).append(
            {"kind": "table", "title": "F1 without and with the distractor, per question word (shares)",
             "data": {"columns": ["question word", "questions", "F1", "F1 with distractor", "drop",
                                  f"drop {params.confidence:.0%} interval", "drop interval method",
                                  "moved into distractor"], "rows": rows}})

    @staticmethod
    def _control(result: ProbeResult, target: Target, data: Dataset, made: list[tuple[int, Distractor]],
                 before: list[dict[str, float]], after: list[dict[str, float]], ids: list[str], groups: list[str],
                 params: DistractorParams, ctx: ProbeContext) -> None:
        """F1 with another question's distractor in the same place (half the list away; the next one where that
        sentence holds a gold answer of this question), and the drop split into control and mimicry."""
        n = len(made)
        examples = []
        for k, (i, _) in enumerate(made):
            ex = data.examples[i]
            golds = [f" {normalize_answer(t)} " for t, _ in ex.label or ()]
            other = next((made[(k + n // 2 + step) % n][1].sentence for step in range(n)
                          if (k + n // 2 + step) % n != k and not any(
                              g in f" {normalize_answer(made[(k + n // 2 + step) % n][1].sentence)} " for g in golds)),
                         None)
            sentence = other or made[k][1].sentence
            context, _, _ = insert(ex.text_pair or "", sentence, params.position)
            examples.append(Example(ex.text, context, moved_golds(ex.label, shift(params.position, sentence)), id=ex.id))
        control = target.task.outcomes(target.task.answers(target, examples, params.batch_size, ctx.progress), examples)
        b, c, a = [o["f1"] for o in before], [o["f1"] for o in control], [o["f1"] for o in after]
        result.outcomes.append(Outcomes.from_values("f1_control", ids, c, "score", cluster_keys(groups)))
        result.add_metric("control_f1", sum(c) / n, True, "F1 with another question's distractor inserted instead "
                          f"({interval_over(c, groups, params.bootstrap)})", mean_interval(c, params, ctx.seed, groups), outcome="f1_control")
        for name, x, y, what in (("control_f1_drop", b, c, "original minus control F1: any added sentence"),
                                 ("mimicry_f1_drop", c, a, "control minus adversarial F1: the resemblance")):
            result.add_metric(name, (sum(x) - sum(y)) / n, False, f"{what}, paired per question "
                              f"({_paired_over(groups)})", _paired(y, x, groups, params, ctx.seed))

    @staticmethod
    def _coverage(result: ProbeResult, hits: list[float], groups: list[str], reasons: Counter[str],
                  params: DistractorParams) -> None:
        """The share of the answerable questions converted (``hits``: 1 for each converted one; ``groups``: their
        contexts), and the reasons the others are not."""
        answerable, covered = len(hits), round(sum(hits))
        result.add_metric("coverage", covered / answerable if answerable else 0.0, None,
                          f"share of the answerable questions the rules convert ({interval_over(hits, groups)})",
                          clustered_wilson(hits, groups, params.confidence) if answerable else None)
        result.add_metric("covered", float(covered), None, "questions with a distractor", kind="count")
        result.add_metric("uncovered", float(answerable - covered), None, "answerable questions not converted",
                          kind="count")
        result.details["uncovered"] = dict(reasons.most_common())
        result.details["figures"].append(
            {"kind": "table", "title": "questions the rules do not convert, by reason",
             "data": {"columns": ["reason", "questions"], "rows": [[r, n] for r, n in reasons.most_common()]}})

    @staticmethod
    def _findings(result: ProbeResult, made: list[tuple[int, Distractor]], changed: list[Example],
                  spans: list[tuple[int, int]], adversarial: list[Any], original: list[Any],
                  before: list[dict[str, float]], after: list[dict[str, float]], params: DistractorParams) -> None:
        """The questions that lost the most F1 (most confident first among equals), marked in their contexts."""
        order = sorted((k for k in range(len(made)) if after[k]["f1"] < before[k]["f1"]),
                       key=lambda k: (after[k]["f1"] - before[k]["f1"], -adversarial[k].confidence))
        for k in order[: params.findings]:
            ex, a = changed[k], adversarial[k]
            marks = [*answer_marks(a, ex.label), (*spans[k], "distractor")]
            context, shown = excerpt(ex.text_pair or "", marks)
            golds = [t for t, _ in (ex.label or ())]
            result.findings.append(Finding(
                title="the distractor changed the answer", input=ex.text, expected=" | ".join(dict.fromkeys(golds)),
                observed=a.text or "(no answer)", score=round(before[k]["f1"] - after[k]["f1"], 4),
                extra={"kind": "distractor", "id": ex.id, "distractor": made[k][1].sentence, "fake": made[k][1].fake,
                       "answer_original": original[made[k][0]].text, "f1": round(after[k]["f1"], 4),
                       "columns": {"context": context}, "marks": {"context": [list(m) for m in shown]}}))


def _paired(a: list[float], b: list[float], groups: list[str], params: DistractorParams,
            seed: int) -> tuple[float, float] | None:
    """The paired bootstrap interval of mean(b) - mean(a), resampling contexts where questions share one."""
    if not params.bootstrap or not a:
        return None
    return paired_bootstrap_diff(a, b, params.bootstrap, params.confidence, seed, groups if clustered(groups) else None)


def _paired_over(groups: list[str], short: bool = False) -> str:
    """How ``_paired`` draws a paired difference's interval over these questions (``groups``: their contexts), in
    words: the paired bootstrap over questions, or where two share a context, over contexts."""
    if clustered(groups):
        return "paired cluster bootstrap interval over contexts" + ("" if short else ": a context's questions resampled together")
    return "paired bootstrap interval over questions"


@hookimpl
def bertprobe_register_probes(registry: Any) -> None:
    registry.add(DistractorProbe)
