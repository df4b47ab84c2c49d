"""The calibration probe's section for extractive QA: is an answer given with 0.9 right nine times in ten?

Each question's unit is its chosen span. Its confidence is ``Answer.confidence`` (``tasks.spans.decode``: the
span's probability under a softmax over the scores of the question's ``n_best`` candidate spans, all its
windows together); whether it came true is SQuAD's exact match. ECE, MCE and the equal-mass ECE use the
classifier's bins and definition (``calibration.metrics``: Guo et al. 2017); the Brier score is that of
the confidence as a binary forecast of exact match, mean of (confidence - EM)^2.

Selective QA after Kamath, Jia & Liang 2020 ("Selective Question Answering under Domain Shift", ACL): the
reader abstains from its least confident questions; the risk-coverage curve gives, for each coverage k/N,
the risk 1 - F1 (and 1 - EM) of the k most confident answers; AURC is its mean over k = 1..N (Geifman &
El-Yaniv 2017, the classifier's definition); F1 and EM at the chosen coverages; and the largest coverage at
which the answered questions' F1 still reaches ``target_f1`` (Kamath et al. report coverage at 80% and 90%
accuracy). Deviations: F1 rather than accuracy is the headline risk (SQuAD's main metric), EM's curve is
given beside it; the confidence is the decoder's n-best softmax, not a separately trained calibrator
(Kamath et al.'s is a random forest on such features), so this measures the raw reader, which is what ships.
Temperature scaling is not fitted: a temperature over the start and end logits changes the n-best softmax
itself, which the shared decoding does not keep. Intervals: percentile bootstrap over contexts (a cluster
bootstrap, ``tasks.qa_clusters``: the questions of a paragraph resampled together) where questions share one,
else over questions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from bertprobe.data.dataset import Dataset, Example
from bertprobe.errors import ProbeError
from bertprobe.probes.calibration.metrics import ece_parts, risk_coverage
from bertprobe.progress import progress
from bertprobe.results import Catalogue, Finding, ProbeResult
from bertprobe.results.outcomes import Outcomes, example_ids
from bertprobe.stats import cluster_members, clustered, resample_indices
from bertprobe.tasks.qa_clusters import cluster_keys, question_clusters
from bertprobe.tasks.question_answering import QuestionAnswering
from bertprobe.tasks.spans import Answer

# What this section adds to the calibration probe's catalogue (its ``catalogue`` below, merged by ``Probe.catalogue``).
QA_METRICS = {
    "exact_match": "extractive QA: share of questions answered exactly (SQuAD EM), the event the confidence forecasts",
    "f1": "extractive QA: mean SQuAD F1 over questions",
    "aurc_em": "extractive QA: area under the risk-coverage curve with risk 1 - EM",
    "f1_at_coverage_*": "extractive QA: F1 of the N% most confident answers (selective QA)",
    "em_at_coverage_*": "extractive QA: EM of the N% most confident answers",
    "coverage_at_f1_*": "extractive QA: largest share of questions answered, most confident first, whose F1 reaches target_f1",
}
QA_DIRECTIONS: dict[str, bool | None] = {"exact_match": True, "f1": True, "aurc_em": False, "f1_at_coverage_*": True,
                                         "em_at_coverage_*": True, "coverage_at_f1_*": True}
QA_COVERAGES = (1.0, 0.5)  # always reported beside the probe's ``coverages`` (0.9 and 0.8 by default)
WRONG_SHOWN = 5  # the most confident wrong answers listed as findings


def selective_scores(confidence: np.ndarray, em: np.ndarray, f1: np.ndarray, coverages: Sequence[float],
                     target_f1: float) -> dict[str, Any]:
    """Risk-coverage of selective QA: coverage k/N with the risks 1 - F1 and 1 - EM of the k most confident
    answers (ties in question order), AURC of each, F1 and EM at each coverage (the floor(c N) most confident,
    at least one), and the largest coverage whose answered questions reach ``target_f1`` (0 when none does)."""
    coverage, risk_f1 = risk_coverage(confidence, f1)
    _, risk_em = risk_coverage(confidence, em)
    at = {}
    for c in coverages:
        k = max(1, int(math.floor(c * len(confidence) + 1e-9)))
        at[c] = (float(1 - risk_f1[k - 1]), float(1 - risk_em[k - 1]))
    reach = np.flatnonzero(1 - risk_f1 >= target_f1 - 1e-12)
    return {"coverage": coverage, "risk_f1": risk_f1, "risk_em": risk_em, "aurc": float(risk_f1.mean()),
            "aurc_em": float(risk_em.mean()), "at": at,
            "coverage_at_target": float(coverage[reach[-1]]) if len(reach) else 0.0}


def qa_calibration(result: ProbeResult, answers: Sequence[Answer], examples: Sequence[Example],
                   outcomes: Sequence[dict[str, float]], golds: Sequence[Sequence[str]], params: Any, seed: int,
                   groups: Sequence[str] | None = None) -> None:
    """Fill the calibration probe's ``result`` for a reader (see the module docstring); ``outcomes`` are the
    task's per-question ``em`` and ``f1``, ``golds`` its gold answer texts, ``groups`` each question's cluster
    (its context: the intervals resample contexts)."""
    if len(answers) < 2:
        raise ProbeError("calibration needs at least 2 questions")
    confidence = np.array([a.confidence for a in answers], dtype=np.float64)
    em = np.array([o["em"] for o in outcomes], dtype=np.float64)
    f1 = np.array([o["f1"] for o in outcomes], dtype=np.float64)
    width, mass = ece_parts(confidence, em, params.bins), ece_parts(confidence, em, params.bins, True)
    brier = (confidence - em) ** 2
    coverages = tuple(dict.fromkeys((QA_COVERAGES[0], *params.coverages, QA_COVERAGES[1])))
    selective = selective_scores(confidence, em, f1, coverages, params.target_f1)
    ids = example_ids(examples)
    keys = cluster_keys(groups)  # a paired gate or compare resamples contexts too
    result.outcomes += [Outcomes.from_values("em", ids, em, groups=keys),
                        Outcomes.from_values("f1", ids, f1, "score", keys),
                        Outcomes.from_values("confidence", ids, confidence, "score", keys),
                        Outcomes.from_values("brier", ids, brier, "score", keys),
                        Outcomes.from_values("ece_contribution", ids, width["contribution"], "score", keys)]
    intervals = _intervals(confidence, em, f1, params, seed, groups)
    for name, value, description, outcome in (
        # ECE has no paired outcome (an example's contribution is its bin's gap): it gates on its own bound, as
        # for a classifier; the Brier score is a mean of per-question scores, so two readers pair on it
        ("ece", width["ece"], f"expected calibration error of the answer's confidence against exact match, "
                              f"{params.bins} equal-width bins", None),
        ("ece_equal_mass", mass["ece"], f"the same over {params.bins} equal-mass bins", None),
        ("mce", width["mce"], "maximum calibration error (largest bin gap)", None),
        ("brier", float(brier.mean()), "Brier score of the confidence as a forecast of exact match", "brier"),
    ):
        result.add_metric(name, value, False, description, ci=intervals.get(name), outcome=outcome,
                          kind="extreme" if name == "mce" else "quality")
    # shown for reading the curve beside them; accuracy owns and gates EM and F1 (a matrix pairs them there once,
    # so a regression is not counted three times in the Holm correction): no direction, no outcome here
    result.add_metric("exact_match", float(em.mean()), None, "share of questions answered exactly (SQuAD EM; gated "
                      "by accuracy)", ci=intervals.get("exact_match"))
    result.add_metric("f1", float(f1.mean()), None, "mean SQuAD F1 over questions (gated by accuracy)",
                      ci=intervals.get("f1"))
    wrong = em == 0
    rate = float((confidence[wrong] >= params.high_confidence).mean()) if wrong.any() else 0.0
    result.add_metric("overconfident_error_rate", rate, False,
                      f"share of wrong answers (EM 0) given with confidence >= {params.high_confidence}")
    result.add_metric("aurc", selective["aurc"], False, "area under the risk-coverage curve, risk 1 - F1 of the "
                      "answered questions (mean over coverages)", ci=intervals.get("aurc"))
    result.add_metric("aurc_em", selective["aurc_em"], False, "area under the risk-coverage curve, risk 1 - EM",
                      ci=intervals.get("aurc_em"))
    for c, (f1_c, em_c) in selective["at"].items():
        pct = round(c * 100)
        result.add_metric(f"f1_at_coverage_{pct}", f1_c, True, f"F1 of the {pct}% most confident answers")
        result.add_metric(f"em_at_coverage_{pct}", em_c, True, f"EM of the {pct}% most confident answers")
    target = round(params.target_f1 * 100)
    result.add_metric(f"coverage_at_f1_{target}", selective["coverage_at_target"], True,
                      f"largest share of questions answered (the most confident first) whose F1 reaches {params.target_f1}")
    result.add_metric("examples", float(len(answers)), None, "questions evaluated", kind="count")
    result.details["bins"] = width["bins"]
    result.details["bins_equal_mass"] = mass["bins"]
    result.details["selective"] = {f"{round(c * 100)}%": {"f1": round(v[0], 6), "em": round(v[1], 6)}
                                   for c, v in selective["at"].items()}
    result.details["temperature_scaling"] = ("not fitted for a reader: a temperature over the start and end logits "
                                             "changes the n-best softmax itself")
    result.details["figures"] = _figures(width["bins"], selective, params)
    result.findings += _confident_wrong(answers, examples, golds, em, confidence)
    full, most = selective["at"][1.0][0], selective["at"][min(coverages)]
    result.details["key_finding"] = (f"ECE {width['ece']:.3f} over {len(answers)} answers; F1 {full:.3f} on every "
                                     f"question, {most[0]:.3f} on the {round(min(coverages) * 100)}% most confident; "
                                     f"AURC {selective['aurc']:.3f}")


def _intervals(confidence: np.ndarray, em: np.ndarray, f1: np.ndarray, params: Any, seed: int,
               groups: Sequence[str] | None = None) -> dict[str, tuple[float, float]]:
    """Percentile bootstrap intervals (seeded) over questions, or over their contexts where ``groups`` puts two
    questions in one (``stats.resample_indices``)."""
    if not params.bootstrap:
        return {}
    rng = np.random.default_rng(seed)
    members = cluster_members(groups) if groups is not None and clustered(groups) else None
    names = ("ece", "ece_equal_mass", "mce", "brier", "exact_match", "f1", "aurc", "aurc_em")
    draws: dict[str, list[float]] = {k: [] for k in names}
    n = len(confidence)
    for _ in progress(range(params.bootstrap), desc="bootstrap"):
        idx = resample_indices(rng, n, members)
        c, e, f = confidence[idx], em[idx], f1[idx]
        width = ece_parts(c, e, params.bins)
        draws["ece"].append(width["ece"])
        draws["mce"].append(width["mce"])
        draws["ece_equal_mass"].append(ece_parts(c, e, params.bins, True)["ece"])
        draws["brier"].append(float(((c - e) ** 2).mean()))
        draws["exact_match"].append(float(e.mean()))
        draws["f1"].append(float(f.mean()))
        draws["aurc"].append(float(risk_coverage(c, f)[1].mean()))
        draws["aurc_em"].append(float(risk_coverage(c, e)[1].mean()))
    return {k: (float(np.quantile(v, 0.025)), float(np.quantile(v, 0.975))) for k, v in draws.items()}


def _figures(bins: list[dict[str, Any]], selective: dict[str, Any], params: Any) -> list[dict[str, Any]]:
    counts = [0] * params.bins
    for b in bins:
        counts[b["bin"]] = b["count"]
    coverage = selective["coverage"]
    step = max(1, len(coverage) // 200)
    return [
        {"kind": "line", "title": "reliability diagram (answer confidence against exact match)",
         "data": {"series": [{"name": "answers", "x": [b["confidence"] for b in bins], "y": [b["accuracy"] for b in bins]},
                             {"name": "perfect calibration", "x": [0, 1], "y": [0, 1]}]},
         "axes": {"x": "confidence (bin mean)", "y": "exact match"}},
        {"kind": "bars", "title": "answer confidence histogram",
         "data": {"labels": [f"{k / params.bins:.2f}-{(k + 1) / params.bins:.2f}" for k in range(params.bins)],
                  "series": [{"name": "questions", "values": counts}]}, "axes": {"y": "questions"}},
        {"kind": "line", "title": "risk-coverage curve (selective QA: the least confident abstained from)",
         "metrics": ["aurc", "aurc_em"],
         "data": {"series": [{"name": "1 - F1", "x": coverage[::step].tolist(), "y": selective["risk_f1"][::step].tolist()},
                             {"name": "1 - EM", "x": coverage[::step].tolist(), "y": selective["risk_em"][::step].tolist()}]},
         "axes": {"x": "coverage (share of questions answered)", "y": "risk"}},
    ]


def _confident_wrong(answers: Sequence[Answer], examples: Sequence[Example], golds: Sequence[Sequence[str]],
                     em: np.ndarray, confidence: np.ndarray) -> list[Finding]:
    """The most confident wrong answers (kept short: question, gold and predicted text; the accuracy probe marks
    the spans in their contexts)."""
    wrong = [i for i in np.argsort(-confidence, kind="stable") if em[i] == 0][:WRONG_SHOWN]
    return [Finding(title=f"confident wrong answer ({confidence[i]:.2f})", input=examples[i].text,
                    expected=" | ".join(dict.fromkeys(golds[i])) or "(no answer)",
                    observed=answers[i].text or "(no answer)", score=round(float(confidence[i]), 6),
                    extra={"kind": "overconfident", "id": examples[i].id}) for i in wrong]


def audit(result: ProbeResult, target: Any, data: Dataset, params: Any, ctx: Any) -> None:
    """The section's entry point: the shared answers (decoded once per run), scored by the reader's task."""
    task = cast(QuestionAnswering, target.task)
    answers = ctx.predictions(target, data, params.batch_size).answers
    qa_calibration(result, answers, data.examples, task.outcomes(answers, data.examples), task.golds(data),
                   params, ctx.seed, question_clusters(data.examples))


# what this section writes in the calibration probe's place (merged by Probe.catalogue)
catalogue = Catalogue(QA_METRICS, QA_DIRECTIONS)
