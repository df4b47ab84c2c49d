"""The spurious-cues probe's section for extractive readers (``span_answers``; ``audit(result, target, data, params,
ctx)``): partial inputs and the answer-position prior.

Papers: Kaushik & Lipton 2018, "How Much Reading Does Reading Comprehension Require? A Critical Investigation of
Popular Benchmarks" (EMNLP): question-only and passage-only baselines often come close to full models, so a
score does not show that the question was read. Ko et al. 2020, "Look at the First Sentence: Position Bias in
Question Answering" (EMNLP): a reader trained where answers sit in the first sentence learns the position, not
the question, and fails when the answer moves.

Three measurements, each on the reader as given (its answers over all windows, ``task.answers``):

1. Question removed: every question replaced by the empty string (``empty``), or reduced to its question word
   as written (``question-word``: "When?", "How many?"; "how" keeps a following many, much, long, old, far,
   often, big, large, tall, high or deep; a question without a wh-word becomes empty). F1 and exact match with
   their bootstrap intervals over questions (over contexts where questions share one: ``tasks.qa_clusters``), and
   the F1 drop from the full input, paired question by question (resampled by context likewise).
2. Answer's sentence moved: the sentence holding the (first) gold answer moved to the end of the context, gold
   spans moved with it (every gold in that sentence keeps its text at its new offset; a gold crossing its
   boundary is dropped). Sentences are split as ``tasks.answer_text.sentences`` splits them. Only questions whose answer
   sentence is not already the last one (and lies in one sentence) are moved; F1 on them against the full-input
   F1 of the same questions, paired.
3. Answer positions: the relative position (start character / context length) of each predicted answer and of
   the first gold answer, in ``position_bins`` equal bins, over the answerable questions the reader answered;
   the share of each in the context's first sentence (Wilson's interval over questions, or on the effective
   sample size over contexts where they share one, Korn & Graubard 1998), their paired difference (``first_sentence_excess``), and the total
   variation distance between the two histograms (bootstrap over questions, or contexts where they share one).

Each per-question outcome carries its context's key (``tasks.qa_clusters.cluster_keys``), so a paired gate or
``compare`` between two readers resamples contexts too.

Every metric is measured, not gated: no published bar holds for a given reader scored without its question
(Kaushik & Lipton retrain models on partial inputs, and what a question-free reader scores depends on how many
candidate answers a context holds); set ``expect`` on ``f1_question_empty`` or ``f1_drop_sentence_moved`` for a
bound of your own. Deviations: Kaushik & Lipton and Ko et al. *train* readers on partial or biased data; here
the given fine-tuned reader is scored with the question removed and the answer moved, which audits that reader.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

import numpy as np

from bertprobe.data.dataset import Dataset, Example
from bertprobe.results import Catalogue, Finding, ProbeResult
from bertprobe.results.outcomes import Outcomes, example_ids
from bertprobe.stats import clustered, clustered_wilson, paired_bootstrap_diff, paired_bootstrap_statistic
from bertprobe.tasks import squad_metrics
from bertprobe.tasks.answer_text import answer_marks, excerpt, sentences
from bertprobe.tasks.qa_clusters import cluster_keys, interval_over, intervals_over, mean_interval, question_clusters
from bertprobe.tasks.question_answering import QuestionAnswering
from bertprobe.tasks.spans import Answer

Gold = tuple[tuple[str, int], ...]
QUESTION_MODES = ("empty", "question-word")
MODE_KEYS = {"empty": "empty", "question-word": "word"}  # metric names: f1_question_empty, f1_question_word
HOW_HEADS = frozenset({"many", "much", "long", "old", "far", "often", "big", "large", "tall", "high", "deep"})
_TOKEN = re.compile(r"[A-Za-z]+")

QA_CUE_METRICS = {
    "f1_full": "question answering: F1 on the full inputs",
    "f1_question_empty": "question answering: F1 with every question removed (empty)",
    "f1_question_word": "question answering: F1 with every question reduced to its question word ('When?')",
    "exact_match_question_*": "question answering: share of questions answered exactly without the question "
                              "(empty) or from its question word alone",
    "f1_drop_question_*": "question answering: full-input F1 minus F1 without the question (paired bootstrap)",
    "f1_sentence_moved": "question answering: F1 with the answer's sentence moved to the end of the context "
                         "(the questions whose answer sentence moved)",
    "f1_full_moved_questions": "question answering: full-input F1 of the questions whose answer sentence moved",
    "f1_drop_sentence_moved": "question answering: F1 drop when the answer's sentence moves to the end (paired)",
    "questions_moved": "question answering: questions whose answer sentence was moved to the end",
    "questions_not_moved": "question answering: questions left out of the move (answer already in the last "
                           "sentence, across sentences, or unanswerable)",
    "first_sentence_predicted": "question answering: share of predicted answers in the context's first sentence",
    "first_sentence_gold": "question answering: share of gold answers in the context's first sentence",
    "first_sentence_excess": "question answering: predicted minus gold share in the first sentence (paired)",
    "position_distance": "question answering: total variation distance between the predicted and gold "
                         "answer-position histograms (0: alike, 1: disjoint)",
}
QA_CUE_DIRECTIONS: dict[str, bool | None] = {
    "f1_full": True, "f1_question_*": None, "exact_match_question_*": None, "f1_drop_question_*": None,
    "f1_sentence_moved": True, "f1_full_moved_questions": True, "f1_drop_sentence_moved": False,
    "questions_*": None, "first_sentence_predicted": None, "first_sentence_gold": None,
    "first_sentence_excess": False, "position_distance": False}


def reduce_question(question: str, mode: str) -> str:
    """The question under ``mode``: ``empty`` -> ""; ``question-word`` -> its first wh-word as written, with
    "?" ("How many?" where "how" is followed by one of ``HOW_HEADS``), or "" when it has none."""
    if mode == "empty":
        return ""
    if mode != "question-word":
        raise ValueError(f"unknown question mode {mode!r}: use one of {', '.join(QUESTION_MODES)}")
    tokens = list(_TOKEN.finditer(question))
    for k, m in enumerate(tokens):
        if squad_metrics.question_word(m.group()) == "other":
            continue
        kept = m.group()
        if kept.lower() == "how" and k + 1 < len(tokens) and tokens[k + 1].group().lower() in HOW_HEADS:
            kept += " " + tokens[k + 1].group()
        return kept + "?"
    return ""


def move_answer_sentence(context: str, gold: Gold) -> tuple[str, Gold] | None:
    """``context`` with the sentence holding the first gold answer moved to its end, and the gold answers at
    their new offsets (a gold crossing the moved sentence's boundary is dropped). None when nothing moves: no
    gold, the answer spans sentences, or its sentence is already the last."""
    if not gold:
        return None
    text, start = gold[0]
    spans = sentences(context)
    end = start + max(len(text), 1)
    holding = [k for k, (a, b) in enumerate(spans) if a < end and b > start]
    if len(holding) != 1 or holding[0] == len(spans) - 1:
        return None
    a, b = spans[holding[0]]
    body = context[a:b]
    core = body.rstrip()
    sep = body[len(core):] or " "
    rest = context[:a] + context[b:]
    rest_core = rest.rstrip()
    moved_at = len(rest_core) + len(sep)
    new = rest_core + sep + core + rest[len(rest_core):]
    out = []
    for t, s in gold:
        e = s + len(t)
        if a <= s and e <= a + len(core):
            s2 = s - a + moved_at
        elif e <= a:
            s2 = s
        elif s >= b:
            s2 = s - (b - a)
        else:
            continue
        if new[s2 : s2 + len(t)] == t:
            out.append((t, s2))
    return new, tuple(out)


def relative_position(start: int, context: str) -> float:
    """Where a span starting at character ``start`` lies in ``context``: 0 at its start, under 1 at its end."""
    return start / max(len(context), 1)


def position_bins(positions: Sequence[float], bins: int) -> np.ndarray:
    """Counts of ``positions`` in ``bins`` equal bins of [0, 1) (a position of 1 or more in the last)."""
    counts = np.zeros(bins, dtype=np.int64)
    for p in positions:
        counts[min(max(int(p * bins), 0), bins - 1)] += 1
    return counts


def in_first_sentence(start: int, context: str) -> bool:
    """Whether character ``start`` lies in the first sentence of ``context`` (``answer_text.sentences``)."""
    return start < sentences(context)[0][1]


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _ci(ci: tuple[float, float] | None) -> str:
    return f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""


class _Audit:
    """One run of the section: the full-input scores and the helpers each measurement shares."""

    def __init__(self, task: QuestionAnswering, result: ProbeResult, target: Any, data: Dataset, params: Any,
                 ctx: Any) -> None:
        self.task, self.result, self.target, self.params, self.ctx = task, result, target, params, ctx
        self.examples = data.examples
        self.ids = example_ids(self.examples)
        self.cluster = dict(zip(self.ids, question_clusters(self.examples)))  # intervals resample contexts
        self.full: list[Answer] = list(ctx.predictions(target, data, params.batch_size).answers)
        self.em, self.f1 = self.scores(self.full, self.examples)

    def scores(self, answers: Sequence[Answer], examples: Sequence[Example]) -> tuple[list[float], list[float]]:
        out = self.task.outcomes(answers, examples)
        return [o["em"] for o in out], [o["f1"] for o in out]

    def answers(self, examples: list[Example]) -> list[Answer]:
        return self.task.answers(self.target, examples, self.params.batch_size, self.ctx.progress)

    def mean_metric(self, name: str, values: list[float], ids: list[str], higher: bool | None, what: str,
                    kind: str = "score") -> None:
        groups = [self.cluster[i] for i in ids]
        self.result.outcomes.append(Outcomes.from_values(name, ids, values, kind,  # type: ignore[arg-type]
                                                         cluster_keys(groups)))
        what = f"{what} ({interval_over(values, groups, self.params.bootstrap)})" if self.params.bootstrap else what
        self.result.add_metric(name, float(np.mean(values)) if values else None, higher, what,
                               mean_interval(values, self.params, self.ctx.seed, groups), outcome=name)

    def over(self, names: Sequence[str]) -> str:
        """How the intervals of the mean metrics ``names`` were drawn (``qa_clusters.intervals_over``), from their
        outcomes and the questions' contexts."""
        outcomes = {o.name: o for o in self.result.outcomes}
        return intervals_over([(outcomes[n].values, [self.cluster[i] for i in outcomes[n].ids]) for n in names
                               if n in outcomes], self.params.bootstrap)

    def drop_metric(self, name: str, full: list[float], partial: list[float], ids: list[str], what: str,
                    higher: bool | None = None) -> None:
        """``name``: mean of full - partial over paired questions, with the paired bootstrap interval."""
        diff = [a - b for a, b in zip(full, partial)]
        groups = [self.cluster[i] for i in ids]
        self.result.outcomes.append(Outcomes.from_values(name, ids, diff, "score", cluster_keys(groups)))
        if self.params.bootstrap and clustered(groups):
            what += " (resampled by context: a context's questions together)"
        ci = (paired_bootstrap_diff(partial, full, self.params.bootstrap, self.params.confidence, self.ctx.seed,
                                    groups) if self.params.bootstrap and diff else None)
        self.result.add_metric(name, float(np.mean(diff)) if diff else None, higher, what, ci, outcome=name)

    def finding(self, title: str, i: int, ex: Example, answer: Answer, question: str | None, f1: float) -> None:
        golds = [t for t, _ in (ex.label or ())]
        context, marks = excerpt(ex.text_pair or "", answer_marks(answer, ex.label))
        self.result.findings.append(Finding(
            title=title, input=self.examples[i].text, perturbed=question,
            expected=" | ".join(dict.fromkeys(golds)) or "(no answer)", observed=answer.text or "(no answer)",
            score=round(float(answer.confidence), 4),
            extra={"kind": "answer", "id": self.ids[i], "f1": round(f1, 4), "columns": {"context": context},
                   "marks": {"context": [list(m) for m in marks]}}))

    # ---- 1. the question removed ----------------------------------------------------------------------
    def question_removed(self) -> None:
        for mode in self.params.question_removed:
            key = MODE_KEYS[mode]
            reduced = [replace(ex, text=reduce_question(ex.text, mode)) for ex in self.examples]
            got = self.answers(reduced)
            em, f1 = self.scores(got, reduced)
            what = "removed (empty)" if mode == "empty" else "reduced to its question word"
            self.mean_metric(f"f1_question_{key}", f1, self.ids, None, f"F1 with every question {what}: what the reader "
                             "finds without reading the question")
            self.mean_metric(f"exact_match_question_{key}", em, self.ids, None,
                             f"share of questions answered exactly with the question {what}", "binary")
            self.drop_metric(f"f1_drop_question_{key}", self.f1, f1, self.ids,
                             f"full-input F1 minus F1 with the question {what} (paired bootstrap)")
            self.result.details[f"answers_unchanged_question_{key}"] = sum(
                a.text == b.text for a, b in zip(got, self.full)) / max(len(got), 1)
            right = sorted((i for i in range(len(got)) if em[i]), key=lambda i: -got[i].confidence)
            for i in right[: max(self.params.findings // 2, 1) if self.params.findings else 0]:
                self.finding(f"answered with the question {what}", i, reduced[i], got[i],
                             reduced[i].text or "(empty question)", f1[i])

    # ---- 2. the answer's sentence moved to the end ------------------------------------------------------
    def sentence_moved(self) -> None:
        rows, moved = [], []
        for i, ex in enumerate(self.examples):
            out = move_answer_sentence(ex.text_pair or "", tuple(ex.label or ()))
            if out is not None and out[1]:
                rows.append(i)
                moved.append(replace(ex, text_pair=out[0], label=out[1]))
        self.result.add_metric("questions_moved", float(len(rows)), None,
                               "questions whose answer sentence was moved to the end of the context", kind="count")
        self.result.add_metric("questions_not_moved", float(len(self.examples) - len(rows)), None,
                               "questions left as they were: answer already in the last sentence, across "
                               "sentences, or unanswerable", kind="count")
        if not rows:
            self.result.details["sentence_moved"] = "no question has its answer in a sentence before the last"
            return
        # answered with the rest of the data (unchanged), so that SQuAD 2.0's null threshold applies as it does to
        # the full inputs (the task applies it when the examples it answers hold unanswerable questions)
        if any(ex.label == () for ex in self.examples):
            swapped = list(self.examples)
            for i, ex in zip(rows, moved):
                swapped[i] = ex
            every = self.answers(swapped)
            got = [every[i] for i in rows]
        else:
            got = self.answers(moved)
        em, f1 = self.scores(got, moved)
        ids = [self.ids[i] for i in rows]
        full = [self.f1[i] for i in rows]
        self.mean_metric("f1_full_moved_questions", full, ids, True,
                         "full-input F1 of the questions whose answer sentence was moved")
        self.mean_metric("f1_sentence_moved", f1, ids, True,
                         "F1 with the answer's sentence moved to the end of the context, gold spans moved with it")
        self.drop_metric("f1_drop_sentence_moved", full, f1, ids,
                         "full-input F1 minus F1 with the answer's sentence at the end (paired bootstrap)", False)
        lost = sorted((j for j in range(len(rows)) if self.em[rows[j]] and not em[j]), key=lambda j: f1[j])
        for j in lost[: max(self.params.findings // 2, 1) if self.params.findings else 0]:
            self.finding("lost when the answer's sentence moved to the end", rows[j], moved[j], got[j], None, f1[j])

    # ---- 3. where the answers lie ----------------------------------------------------------------------
    def positions(self) -> None:
        rows = [i for i, (ex, a) in enumerate(zip(self.examples, self.full)) if ex.label and a.text]
        bins = self.params.position_bins
        self.result.details["position_questions"] = len(rows)
        if not rows:
            return
        contexts = [self.examples[i].text_pair or "" for i in rows]
        gold_start = [self.examples[i].label[0][1] for i in rows]  # type: ignore[index]
        pred_start = [self.full[i].start for i in rows]
        gold_pos = np.array([relative_position(s, c) for s, c in zip(gold_start, contexts)])
        pred_pos = np.array([relative_position(s, c) for s, c in zip(pred_start, contexts)])
        gold_first = np.array([in_first_sentence(s, c) for s, c in zip(gold_start, contexts)], dtype=np.float64)
        pred_first = np.array([in_first_sentence(s, c) for s, c in zip(pred_start, contexts)], dtype=np.float64)
        ids = [self.ids[i] for i in rows]
        n, conf = len(rows), self.params.confidence
        groups = [self.cluster[i] for i in ids]
        for name, hits, who in (("first_sentence_predicted", pred_first, "predicted"), ("first_sentence_gold",
                                                                                        gold_first, "gold")):
            self.result.outcomes.append(Outcomes.from_values(name, ids, hits.tolist(), groups=cluster_keys(groups)))
            ci = clustered_wilson(hits.tolist(), groups, conf) if self.params.bootstrap else None
            self.result.add_metric(name, float(hits.mean()), None, f"share of {who} answers in the context's first "
                                   f"sentence (answerable questions the reader answered; "
                                   f"{interval_over(hits.tolist(), groups)})", ci, outcome=name)
        self.drop_metric("first_sentence_excess", pred_first.tolist(), gold_first.tolist(), ids,
                         "predicted minus gold share of answers in the first sentence (paired bootstrap): above 0, "
                         "the reader leans to the start (Ko et al. 2020)", False)

        def distance(idx: np.ndarray) -> list[float]:
            g, p = position_bins(gold_pos[idx], bins), position_bins(pred_pos[idx], bins)
            return [0.5 * float(np.abs(g / len(idx) - p / len(idx)).sum())]

        [ci] = (paired_bootstrap_statistic(distance, n, self.params.bootstrap, conf, self.ctx.seed, groups)
                if self.params.bootstrap else [None])
        self.result.add_metric("position_distance", distance(np.arange(n))[0], False,
                               f"total variation distance between the predicted and gold answer-position histograms "
                               f"({bins} bins; {'cluster bootstrap over contexts' if clustered(groups) else 'bootstrap over questions'})", ci)
        gold_h, pred_h = position_bins(gold_pos, bins) / n, position_bins(pred_pos, bins) / n
        labels = [f"{100 * k // bins}-{100 * (k + 1) // bins}%" for k in range(bins)]
        self.result.details["positions"] = {"bins": labels, "gold": gold_h.tolist(), "predicted": pred_h.tolist(),
                                            "questions": n}

    # ---- the report -----------------------------------------------------------------------------------
    def figures(self) -> None:
        r = self.result
        names = [n for n in ("f1_full", *(f"f1_question_{MODE_KEYS[m]}" for m in self.params.question_removed),
                             "f1_full_moved_questions", "f1_sentence_moved") if n in r.metrics]
        labels = {"f1_full": "full", "f1_question_empty": "no question", "f1_question_word": "question word only",
                  "f1_full_moved_questions": "full (moved set)", "f1_sentence_moved": "answer sentence at end"}
        figures: list[dict[str, Any]] = [{
            "kind": "bars", "title": f"F1 on full and partial inputs ({self.over(names)})",
            "metrics": ["f1_full", "f1_question_*", "f1_sentence_moved", "f1_full_moved_questions"],
            "data": {"labels": [labels[n] for n in names], "series": [{
                "name": "F1", "values": [r.value(n) for n in names],
                **({"errors": [list(r.metrics[n].ci or ()) for n in names]} if self.params.bootstrap else {})}]},
            "axes": {"y": "F1"}}]
        pos = r.details.get("positions")
        if pos:
            figures.append({"kind": "bars", "title": "where answers lie in the context: predicted against gold "
                            f"(share of {pos['questions']} answers per bin of relative position)",
                            "metrics": ["position_distance", "first_sentence_*"],
                            "data": {"labels": pos["bins"], "series": [{"name": "gold", "values": pos["gold"]},
                                                                       {"name": "predicted", "values": pos["predicted"]}]},
                            "axes": {"x": "relative position of the answer's start", "y": "share of answers"}})
        r.details["figures"] = figures

    def key_finding(self) -> str:
        r = self.result
        parts = []
        for mode in self.params.question_removed:
            key = MODE_KEYS[mode]
            em, f1 = r.metrics[f"exact_match_question_{key}"], r.metrics[f"f1_question_{key}"]
            lead = "without the question" if mode == "empty" else "from its question word alone"
            parts.append(f"{lead}, the reader still finds {_percent(em.value)} of the answers exactly "
                         f"(F1 {f1.value:.2f}{_ci(f1.ci)} against {r.value('f1_full'):.2f} with it)")
        if "f1_sentence_moved" in r.metrics:
            drop = r.metrics["f1_drop_sentence_moved"]
            parts.append(f"with the answer's sentence moved to the end, F1 {r.value('f1_sentence_moved'):.2f} "
                         f"against {r.value('f1_full_moved_questions'):.2f} (drop {drop.value:.2f}{_ci(drop.ci)}, "
                         f"{int(r.value('questions_moved') or 0)} questions)")
        if "first_sentence_predicted" in r.metrics:
            excess = r.metrics["first_sentence_excess"]
            parts.append(f"{_percent(r.value('first_sentence_predicted'))} of its answers lie in the first sentence, "
                         f"against {_percent(r.value('first_sentence_gold'))} of the gold "
                         f"(difference {excess.value:+.2f}{_ci(excess.ci)})")
        return "; ".join(parts) or f"{len(self.examples)} questions, no partial input asked"


def audit(result: ProbeResult, target: Any, data: Dataset, params: Any, ctx: Any) -> None:
    """Fill ``result`` with the spurious-cues probe's measurements on a reader (see the module docstring)."""
    task = cast(QuestionAnswering, target.task)
    run = _Audit(task, result, target, data, params, ctx)
    run.mean_metric("f1_full", run.f1, run.ids, True, "F1 on the full inputs")
    result.details["questions"] = len(data.examples)
    run.question_removed()
    run.sentence_moved()
    run.positions()
    run.figures()
    result.details["task"] = {"name": task.name, **dict(task.settings)}
    result.details["key_finding"] = run.key_finding()


# what this section writes in the spurious-cues probe's place (merged by Probe.catalogue)
catalogue = Catalogue(QA_CUE_METRICS, QA_CUE_DIRECTIONS,
                      key_metrics=("f1_question_*", "f1_drop_sentence_moved", "first_sentence_excess"))
