"""The accuracy probe's section for adversarial SQuAD files, scored as Jia & Liang 2017 scored them (AddSent,
AddOneSent): per original question, the *lowest* F1 over the original and its adversarial variants, averaged over
the originals. It adds to the answers section (``answers.py``) where the data hold variants, grouped on load by
``tasks.qa_adversarial`` (see there how a file is recognised): EM and F1 on the originals, on the variants alone,
and the adversarial score (``adversarial_f1``, ``adversarial_exact_match``), with intervals over originals (over
their contexts where originals share one: ``tasks.qa_clusters``); the paired change per original
(``adversarial_delta_f1``, with a paired bootstrap interval) and outcomes keyed by the original's id
(``f1_adversarial``, ``em_adversarial``) for paired gates; findings: the variants that cost the most F1, with the
distractor, the gold answer and the prediction marked in the context.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bertprobe.data.dataset import Dataset, Example
from bertprobe.probes.accuracy.pairs import add_pair, percent
from bertprobe.results import Finding, ProbeResult
from bertprobe.results.outcomes import Outcomes
from bertprobe.stats import paired_bootstrap_diff
from bertprobe.tasks import squad_metrics
from bertprobe.tasks.answer_text import answer_marks, excerpt
from bertprobe.tasks.qa_adversarial import DECLARED, distractor_span, groups_of
from bertprobe.tasks.qa_clusters import ORIGINAL, cluster_keys, interval_over, mean_interval, question_clusters
from bertprobe.tasks.spans import Answer

METRICS = {
    "original_exact_match": "question answering, adversarial data (Jia & Liang 2017): exact match on the original "
                            "questions",
    "original_f1": "question answering, adversarial data: F1 on the original questions",
    "variant_exact_match": "question answering, adversarial data: exact match on the adversarial questions alone",
    "variant_f1": "question answering, adversarial data: F1 on the adversarial questions alone",
    "adversarial_exact_match": "question answering, adversarial data: Jia & Liang's score on exact match, per "
                               "original the lowest over it and its variants, averaged",
    "adversarial_f1": "question answering, adversarial data: Jia & Liang's adversarial F1, per original the lowest F1 "
                      "over it and its variants, averaged (bootstrap interval over originals)",
    "adversarial_delta_f1": "question answering, adversarial data: adversarial F1 minus original F1, paired per "
                            "original (paired bootstrap interval)",
    "adversarial_delta_exact_match": "question answering, adversarial data: adversarial exact match minus original "
                                     "exact match, paired per original",
    "adversarial_originals": "question answering, adversarial data: original questions (groups)",
    "adversarial_variants": "question answering, adversarial data: adversarial questions",
}
DIRECTIONS: dict[str, bool | None] = {
    "original_*": True, "variant_*": True, "adversarial_exact_match": True, "adversarial_f1": True,
    "adversarial_delta_*": True, "adversarial_originals": None, "adversarial_variants": None}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def audit(result: ProbeResult, target: Any, data: Dataset, params: Any, ctx: Any) -> bool:
    """Add the adversarial section to the accuracy probe's ``result``, after ``answers.audit`` filled it (the shared
    answers, scored again: a dictionary lookup); False (nothing added) when no question of ``data`` is a variant."""
    examples = data.examples
    if not any(ex.meta.get(ORIGINAL) for ex in examples):
        return False
    seed = ctx.seed
    answers = list(ctx.predictions(target, data, params.batch_size).answers)
    pairs = [squad_metrics.score(a.text, [t for t, _ in (ex.label or ())]) for a, ex in zip(answers, examples)]
    em, f1 = [e for e, _ in pairs], [f for _, f in pairs]
    groups = groups_of(examples)
    ids = [ex.id for ex in examples]
    originals = [g["original"] for g in groups.values() if g["original"] is not None]
    variants = [i for g in groups.values() for i in g["variants"]]
    clusters = question_clusters(examples)  # a variant is in its original's context: resampled with it
    add_pair(result, "original_", "", originals, list(em), list(f1), ids, params, seed, "the original questions",
             clusters)
    add_pair(result, "variant_", "", variants, list(em), list(f1), ids, params, seed,
             "the adversarial questions alone", clusters)
    keys = list(groups)
    members = [([g["original"]] if g["original"] is not None else []) + g["variants"] for g in groups.values()]
    low_f1 = [min(f1[i] for i in m) for m in members]
    low_em = [min(em[i] for i in m) for m in members]
    within = [clusters[m[0]] for m in members]  # each original's context
    def over(values: list[float]) -> str:  # the interval drawn (qa_clusters.interval_over), over originals
        return interval_over(values, within, params.bootstrap, unit="originals").replace("contexts", "the originals' contexts")

    result.outcomes += [Outcomes.from_values("em_adversarial", keys, low_em, groups=cluster_keys(within)),
                        Outcomes.from_values("f1_adversarial", keys, low_f1, "score", cluster_keys(within))]
    result.add_metric("adversarial_exact_match", _mean(low_em), True,
                      "Jia & Liang's adversarial exact match: per original the lowest over it and its variants, "
                      f"averaged ({over(low_em)})", mean_interval(low_em, params, seed, within),
                      outcome="em_adversarial")
    result.add_metric("adversarial_f1", _mean(low_f1), True,
                      "Jia & Liang's adversarial F1: per original the lowest F1 over it and its variants, averaged "
                      f"({over(low_f1)})", mean_interval(low_f1, params, seed, within), outcome="f1_adversarial")
    paired = [(k, g["original"]) for k, g in zip(range(len(keys)), groups.values()) if g["original"] is not None]
    for name, scores, low in (("f1", f1, low_f1), ("exact_match", em, low_em)):
        before = [scores[i] for _, i in paired]
        after = [low[k] for k, _ in paired]
        ci = (paired_bootstrap_diff(before, after, params.bootstrap, params.confidence, seed,
                                    [within[k] for k, _ in paired])
              if params.bootstrap and paired else None)
        result.add_metric(f"adversarial_delta_{name}", _mean(after) - _mean(before) if paired else None, True,
                          f"adversarial {name.replace('_', ' ')} minus the original's, paired per original "
                          f"({len(paired)} originals present; paired bootstrap interval)", ci)
    result.add_metric("adversarial_originals", float(len(groups)), None, "original questions (groups)", kind="count")
    result.add_metric("adversarial_variants", float(len(variants)), None, "adversarial questions", kind="count")
    declared = any(examples[i].meta.get(DECLARED) for i in variants)
    missing = sum(g["original"] is None for g in groups.values())
    result.details["adversarial"] = {
        "layout": "jia-liang (declared)" if declared else "jia-liang (detected: ids '<original id>-<suffix>'; "
                  "data.options.adversarial: none scores them as plain questions)",
        "originals": len(groups), "variants": len(variants), "originals_missing": missing,
        "score": "per original, the lowest F1 (exact match) over it and its variants, averaged (Jia & Liang 2017)"}
    rows = []
    for label, prefix in (("originals", "original"), ("adversarial questions alone", "variant"),
                          ("adversarial score (lowest per original)", "adversarial")):
        m = result.metrics[f"{prefix}_f1"]
        rows.append([label, result.value(f"{prefix}_exact_match"), m.value,
                     f"[{m.ci[0]:.3f}, {m.ci[1]:.3f}]" if m.ci else "-"])
    result.details.setdefault("figures", []).append(
        {"kind": "table", "title": "adversarial questions (Jia & Liang 2017): exact match and F1 (shares)",
         "data": {"columns": ["questions", "exact match", "F1", f"F1 {params.confidence:.0%} interval"], "rows": rows}})
    _findings(result, answers, examples, groups, em, f1, params)
    delta = result.metrics["adversarial_delta_f1"]
    note = (f"adversarial F1 {percent(result.value('adversarial_f1'))} against {percent(result.value('original_f1'))} "
            f"on the originals ({len(groups)} originals, {len(variants)} adversarial questions")
    if delta.ci:
        note += f"; paired change {100 * (delta.value or 0):+.1f} [{100 * delta.ci[0]:+.1f}, {100 * delta.ci[1]:+.1f}]"
    result.details["key_finding"] = result.details.get("key_finding", "") + "; " + note + ")"
    return True


def _findings(result: ProbeResult, answers: Sequence[Answer], examples: Sequence[Example],
              groups: dict[str, dict[str, Any]], em: Sequence[float], f1: Sequence[float], params: Any) -> None:
    """The variants that cost the most F1 against their original (most confident first among equals), each with
    the distractor, the gold answer and the prediction marked in its context."""
    costs = []
    for g in groups.values():
        base = f1[g["original"]] if g["original"] is not None else 1.0
        costs += [(base - f1[i], i, g["original"]) for i in g["variants"] if f1[i] < base]
    costs.sort(key=lambda c: (-c[0], -answers[c[1]].confidence))
    for cost, i, o in costs[: params.findings]:
        ex, a = examples[i], answers[i]
        marks = answer_marks(a, ex.label)
        span = distractor_span(examples[o].text_pair or "", ex.text_pair or "") if o is not None else None
        if span:
            marks.append((*span, "distractor"))
        context, shown = excerpt(ex.text_pair or "", marks)
        golds = [text for text, _ in (ex.label or ())]
        extra: dict[str, Any] = {"kind": "adversarial", "id": ex.id, "original": ex.meta.get(ORIGINAL),
                                 "f1": round(f1[i], 4), "f1_original": round(f1[o], 4) if o is not None else None,
                                 "columns": {"context": context}, "marks": {"context": [list(m) for m in shown]}}
        if o is not None:
            extra["answer_original"] = answers[o].text
        if span:
            extra["distractor"] = (ex.text_pair or "")[span[0]:span[1]]
        result.findings.append(Finding(
            title="adversarial question answered worse than its original", input=ex.text,
            expected=" | ".join(dict.fromkeys(golds)) if golds else "(no answer)",
            observed=a.text or "(no answer)", score=round(cost, 4), extra=extra))

