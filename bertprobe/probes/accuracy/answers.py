"""The accuracy probe's section for extractive readers (tasks with ``span_answers``: ``bertprobe.sections``).

Exact match and F1 as the official SQuAD v1.1 script defines them (``tasks.squad_metrics``), stored as shares
in [0, 1] like every other metric (the key finding prints them x100, as SQuAD papers do: ``EM 58.4, F1
71.2``), each with an interval over contexts where questions share one, as SQuAD's about five per paragraph do,
else over questions (``tasks.qa_clusters``): exact match Wilson's, on its effective sample size over contexts
(Korn & Graubard 1998), F1 a percentile bootstrap (a cluster bootstrap over contexts); SQuAD 2.0's has-answer and no-answer
splits when the data hold unanswerable questions; the same per question word (what, who, when, where, why,
how, which, other). Per-question outcomes ``em`` (0/1) and ``f1`` (a score in [0, 1]) back the metrics, so a
paired gate or ``compare`` pairs two builds question by question; F1 is a mean over questions, so its
paired difference is exact. Findings: the most confident wrong answers (exact match 0), with the question,
the gold answers and the prediction, and the gold and predicted spans marked in an excerpt of the context
(``extra["marks"]``, which the reporters draw: HTML ``<mark>``, Markdown brackets).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, cast

from bertprobe.data.dataset import Dataset
from bertprobe.probes.accuracy import adversarial
from bertprobe.probes.accuracy.pairs import add_pair, percent
from bertprobe.results import Catalogue, DefaultExpectation, Finding, ProbeResult
from bertprobe.results.outcomes import Outcomes, example_ids
from bertprobe.tasks import squad_metrics
from bertprobe.tasks.answer_text import NO_ANSWER, answer_marks, excerpt
from bertprobe.tasks.qa_clusters import interval_over, intervals_over, question_clusters
from bertprobe.tasks.question_answering import QuestionAnswering
from bertprobe.tasks.spans import Answer

THROUGHPUT_QUESTIONS = 32  # questions answered again, warm, to time end-to-end answering
THROUGHPUT_SECONDS = 3.0  # timing stops after this much, once one pass is done
SPLITS = (("has_answer", True, "answerable questions"), ("no_answer", False, "unanswerable questions (SQuAD 2.0)"))

# What this section adds to the accuracy probe's catalogue (its ``catalogue``, with the adversarial section's:
# ``Probe.catalogue`` merges them with the probe's own). Per question word metrics are named question_<word>_..., never with a per-label prefix (f1_, recall_...):
# the accuracy probe reads those as class names, which validate checks against the model's labels.
QA_METRICS = {
    "exact_match": "question answering: share of questions whose answer equals a gold answer after SQuAD's "
                   "normalisation (bootstrap interval over contexts where questions share one, a cluster "
                   "bootstrap; else over questions)",
    "f1": "question answering: mean over questions of the best token F1 against the gold answers (SQuAD v1.1)",
    "has_answer_exact_match": "question answering, SQuAD 2.0 data: exact match on the answerable questions",
    "has_answer_f1": "question answering, SQuAD 2.0 data: F1 on the answerable questions",
    "no_answer_exact_match": "question answering, SQuAD 2.0 data: share of unanswerable questions the reader "
                             "abstained on (equal to no_answer_f1)",
    "no_answer_f1": "question answering, SQuAD 2.0 data: F1 on the unanswerable questions",
    "has_answer_questions": "question answering, SQuAD 2.0 data: answerable questions",
    "no_answer_questions": "question answering, SQuAD 2.0 data: unanswerable questions",
    "question_*_exact_match": "question answering: exact match on the questions of one question word (what, who, "
                              "when, where, why, how, which, other)",
    "question_*_f1": "question answering: F1 on the questions of one question word (bootstrap interval)",
    "questions_*": "question answering: questions of one question word",
    "windows": "question answering: windows predicted (long contexts are split into overlapping windows)",
    "windowed_questions": "question answering: questions whose context took more than one window",
}
QA_DIRECTIONS: dict[str, bool | None] = {
    "exact_match": True, "f1": True, "has_answer_questions": None, "no_answer_questions": None,
    "has_answer_*": True, "no_answer_*": True,
    "question_*_exact_match": True, "question_*_f1": True, "questions_*": None, "windows": None,
    "windowed_questions": None}
QA_DEFAULTS = (
    DefaultExpectation(
        "f1", min=0.5, interval=True,
        why="question answering: below 0.5 the reader recovers less than half of the answer tokens, worse than SQuAD's "
            "sliding-window logistic-regression baseline (F1 51.0, Rajpurkar et al. 2016); BERT-base scores about 0.88 "
            "and a weak in-domain reader about 0.7, so only a reader surely below that baseline is failed (bootstrap "
            "interval, over contexts where questions share one); exact match has no default, since it punishes answers one word off"),
    DefaultExpectation(
        "question_*_f1", min=0.5, interval=True,
        why="question answering, per question word (what, who, when, why...): the same bound for each kind of question, "
            "which an overall F1 over easy 'when' and 'who' questions hides (why and how questions are the hard ones); "
            "judged on the bootstrap interval, so a word with few questions fails only when it is surely below"),
    DefaultExpectation(
        "no_answer_exact_match", min=0.5, interval=True,
        why="question answering on SQuAD 2.0 data: below 0.5 the reader answers most questions its context cannot "
            "answer, the failure SQuAD 2.0 was built to expose (Rajpurkar et al. 2018); set null_threshold to trade "
            "has-answer F1 for abstentions"),
)


def _throughput(result: ProbeResult, task: Any, target: Any, data: Dataset, params: Any, seconds: float) -> None:
    """Questions answered per second end to end (windows, forward passes, decoding), timed warm on up to
    ``THROUGHPUT_QUESTIONS`` questions spread over the context lengths: the median of up to 3 passes."""
    examples = data.examples
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].text_pair or ""))
    wanted = min(len(order), THROUGHPUT_QUESTIONS)
    picked = [examples[order[round((k + 0.5) * len(order) / wanted - 0.5)]] for k in range(wanted)] if wanted else []
    rates: list[float] = []
    spent = 0.0
    while picked and len(rates) < 3 and (not rates or spent < THROUGHPUT_SECONDS):
        start = time.perf_counter()
        task.answers(target, picked, params.batch_size)
        took = time.perf_counter() - start
        spent += took
        rates.append(len(picked) / max(took, 1e-9))
    if not rates:
        result.add_metric("examples_per_s", len(examples) / max(seconds, 1e-9), True,
                          "questions answered per second in the one pass over the data (warm-up included)", kind="cost")
        return
    rates.sort()
    result.add_metric("examples_per_s", rates[len(rates) // 2], True,
                      f"questions answered per second end to end (windows, forward passes, decoding), warm: median of "
                      f"{len(rates)} timed pass(es) over {len(picked)} questions spread over the context lengths "
                      "(interval: slowest and fastest pass)", (rates[0], rates[-1]), kind="cost")


def _findings(result: ProbeResult, answers: Sequence[Answer], data: Dataset, em: list[float], f1: list[float],
              ids: list[str], params: Any) -> None:
    """The most confident wrong answers (exact match 0), each with its context excerpt marked."""
    wrong = sorted((i for i in range(len(answers)) if not em[i]), key=lambda i: -answers[i].confidence)
    for i in wrong[: params.findings]:
        ex, a = data.examples[i], answers[i]
        golds = [text for text, _ in (ex.label or ())]
        context, marks = excerpt(ex.text_pair or "", answer_marks(a, ex.label))
        result.findings.append(Finding(
            title="confidently wrong answer", input=ex.text,
            expected=" | ".join(dict.fromkeys(golds)) if golds else f"{NO_ANSWER}: the question is unanswerable",
            observed=a.text or NO_ANSWER, score=round(float(a.confidence), 4),
            extra={"kind": "answer", "id": ids[i], "f1": round(f1[i], 4),
                   "columns": {"context": context}, "marks": {"context": [list(m) for m in marks]}}))


def _per_word(result: ProbeResult, words: list[str], em: list[float], f1: list[float], ids: list[str],
              params: Any, seed: int, groups: Sequence[str] | None = None) -> list[str]:
    """EM and F1 per question word (the words present, in ``QUESTION_WORDS`` order), with intervals, counts and
    outcomes; returns the words present."""
    present = [w for w in squad_metrics.QUESTION_WORDS if w in words]
    for w in present:
        picked = [i for i, x in enumerate(words) if x == w]
        add_pair(result, f"question_{w}_", "", picked, em, f1, ids, params, seed, f"'{w}' questions", groups)
        result.add_metric(f"questions_{w}", float(len(picked)), None, f"questions whose question word is '{w}'",
                          kind="count")
    return present


def audit(result: ProbeResult, target: Any, data: Dataset, params: Any, ctx: Any) -> None:
    """Fill ``result`` with the accuracy probe's section for a reader (see the module docstring), and with the
    adversarial section after it where the data hold Jia & Liang's variants (``adversarial.audit``)."""
    task = cast(QuestionAnswering, target.task)
    predicted = ctx.predictions(target, data, params.batch_size)  # shared with calibration and slices
    answers: list[Answer] = list(predicted.answers)
    examples = data.examples
    golds = task.golds(examples)
    ids = example_ids(examples)
    scores = [squad_metrics.score(a.text, g) for a, g in zip(answers, golds)]
    em, f1 = [s[0] for s in scores], [s[1] for s in scores]
    everyone = list(range(len(examples)))
    groups = question_clusters(examples)  # each question's context: the intervals resample contexts
    add_pair(result, "", "", everyone, em, f1, ids, params, ctx.seed, "all questions", groups)
    # the answer as served, for a matrix's agreement between builds: its text, or the abstention
    result.outcomes.append(Outcomes.from_values("prediction", ids, [a.text or NO_ANSWER for a in answers], "label"))
    split = any(not g for g in golds)
    if split:  # SQuAD 2.0: the answerable and the unanswerable questions on their own
        for prefix, answerable, what in SPLITS:
            picked = [i for i in everyone if bool(golds[i]) == answerable]
            if picked:
                add_pair(result, f"{prefix}_", "", picked, em, f1, ids, params, ctx.seed, what, groups)
            result.add_metric(f"{prefix}_questions", float(len(picked)), None, what, kind="count")
    words = [squad_metrics.question_word(ex.text) for ex in examples]
    present = _per_word(result, words, em, f1, ids, params, ctx.seed, groups)
    result.add_metric("examples", float(len(examples)), None, "questions evaluated", kind="count")
    _throughput(result, task, target, data, params, predicted.seconds)
    windows = sum(a.windows for a in answers)
    long = sum(a.windows > 1 for a in answers)
    rebuilt = sum(a.rebuilt for a in answers)
    max_length = task.setting("max_length")
    result.add_metric("windows", float(windows), None, f"windows predicted (contexts longer than max_length "
                      f"{max_length} are split into overlapping windows)", kind="count")
    result.add_metric("windowed_questions", float(long), None,
                      f"questions whose context took more than one window of {max_length} sub-tokens", kind="count")
    _findings(result, answers, data, em, f1, ids, params)

    result.details["task"] = {"name": task.name, **dict(task.settings)}
    result.details["squad"] = squad_metrics.summary([a.text for a in answers], golds)  # the official script's dict
    if rebuilt:
        import tokenizers

        result.details["rebuilt_windows"] = (
            f"tokenizers {tokenizers.__version__} returned windows that left part of {rebuilt} context(s) out; "
            "bertprobe rebuilt them so that every sub-token lies in some window")
    table, samples = [], []
    for w in present:
        m = result.metrics[f"question_{w}_f1"]
        idx = [i for i, x in enumerate(words) if x == w]
        within = [groups[i] for i in idx]
        samples += [([em[i] for i in idx], within), ([f1[i] for i in idx], within)]
        table.append([w, int(result.value(f"questions_{w}") or 0), result.value(f"question_{w}_exact_match"), m.value,
                      f"[{m.ci[0]:.3f}, {m.ci[1]:.3f}]" if m.ci else "-",
                      interval_over([f1[i] for i in idx], within, params.bootstrap, short=True)])
    result.details["question_words"] = {row[0]: {"questions": row[1], "exact_match": row[2], "f1": row[3]} for row in table}
    overall = result.metrics["f1"]
    result.details["figures"] = [
        {"kind": "table", "title": "exact match and F1 per question word (shares)",
         "data": {"columns": ["question word", "questions", "exact match", "F1", f"F1 {params.confidence:.0%} interval",
                              "F1 interval method"], "rows": table}},
        {"kind": "bars", "title": f"exact match and F1 per question word ({intervals_over(samples, params.bootstrap)})",
         "tabulate": False, "metrics": ["question_*_f1", "question_*_exact_match", "f1", "exact_match"],
         "data": {"labels": present, "series": [
             {"name": "exact match", "values": [result.value(f"question_{w}_exact_match") for w in present],
              **({"errors": [list(result.metrics[f"question_{w}_exact_match"].ci or ()) for w in present]}
                 if params.bootstrap else {})},
             {"name": "F1", "values": [result.value(f"question_{w}_f1") for w in present],
              **({"errors": [list(result.metrics[f"question_{w}_f1"].ci or ()) for w in present]}
                 if params.bootstrap else {})}],
             "reference": {"value": overall.value, "label": f"F1 {percent(overall.value)}"}},
         "axes": {"y": "share"}},
    ]
    finding = f"EM {percent(result.value('exact_match'))}, F1 {percent(overall.value)}"
    if overall.ci:
        finding += f" [{percent(overall.ci[0])}, {percent(overall.ci[1])}]"
    finding += f" on {_questions(len(examples))}"
    if split:
        finding += (f" (has answer F1 {percent(result.value('has_answer_f1'))}, no answer "
                    f"EM {percent(result.value('no_answer_exact_match'))})")
    if len(present) > 1:
        weakest = min(present, key=lambda w: result.value(f"question_{w}_f1") or 0.0)
        finding += (f"; weakest question word {weakest} F1 {percent(result.value(f'question_{weakest}_f1'))} "
                    f"({_questions(int(result.value(f'questions_{weakest}') or 0))})")
    if long:
        finding += f"; {long} long context{'s' if long != 1 else ''} answered over windows"
    if rebuilt:
        finding += f"; windows rebuilt for {rebuilt} context{'s' if rebuilt != 1 else ''}"
    result.details["key_finding"] = finding
    adversarial.audit(result, target, data, params, ctx)  # Jia & Liang's variants, where the data hold them


def _questions(n: int) -> str:
    return f"{n} question" if n == 1 else f"{n} questions"


catalogue = Catalogue({**QA_METRICS, **adversarial.METRICS}, {**QA_DIRECTIONS, **adversarial.DIRECTIONS}, QA_DEFAULTS,
                      ("exact_match", "f1", "question_*_f1", "has_answer_f1", "no_answer_exact_match"), absent=("accuracy", "accuracy_*"))
