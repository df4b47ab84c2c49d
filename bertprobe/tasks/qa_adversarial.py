"""Adversarial SQuAD files scored as their authors scored them (Jia & Liang 2017, AddSent and AddOneSent).

Jia & Liang release their adversarial sets in SQuAD's format: each original question keeps its id, and each
adversarial copy of it (the same question over the context with a distractor sentence added) has the original's
id plus a suffix (``<id>-high-conf``, ``<id>-high-conf-turk0``, ...). Their score for a model is, per original
question, the *lowest* F1 over the original and its adversarial variants, averaged over the originals: the
model is only credited with a question that no variant fooled it on.

How a file is recognised (``data.options.adversarial``, read by ``group``):

* ``auto`` (the default): a question whose id is another question's id plus ``-suffix`` is a variant of that one
  (of the shortest such id, so ``<id>-high-conf-turk0`` belongs to ``<id>`` even when ``<id>-high-conf`` is there
  too); the report says the layout was detected, and ``none`` turns it off;
* ``jia-liang``: declared; every id holding a ``-`` is a variant of the id before its first ``-`` (the layout of
  the released files, whose original ids are SQuAD's dash-free hex ids), whether or not that original is in the
  data (a ``--limit`` sample may leave it out: the group is then scored over the variants present);
* ``none``: plain questions.

Each variant carries ``meta["adversarial_of"]`` (its original's id) from then on. ``audit`` adds to the accuracy
probe's QA section: EM and F1 on the originals, on the variants alone, and the adversarial score (``adversarial_f1``
and ``adversarial_exact_match``, the lowest over each group), with bootstrap intervals over originals (over their
contexts where originals share one: ``tasks.qa_clusters``); the
paired change per original (``adversarial_delta_f1``, adversarial score minus the original's F1, with a paired
bootstrap interval) and outcomes keyed by the original's id (``f1_original``, ``f1_adversarial``) for paired
gates; findings: the variants that cost the most F1, with the distractor (the text the variant's context adds to
its original's), the gold answer and the prediction marked in the context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bertprobe.data.dataset import Dataset, Example
from bertprobe.errors import DataError
from bertprobe.results import Finding, ProbeResult
from bertprobe.results.outcomes import Outcomes
from bertprobe.stats import paired_bootstrap_diff
from bertprobe.tasks import squad_metrics
from bertprobe.tasks.answer_text import answer_marks, excerpt
from bertprobe.tasks.qa_accuracy import add_pair, interval, percent
from bertprobe.tasks.qa_clusters import (  # ORIGINAL: a variant's meta key
    ORIGINAL,
    cluster_keys,
    interval_over,
    question_clusters,
)
from bertprobe.tasks.spans import Answer

MODES = ("auto", "jia-liang", "none")
OPTION = "adversarial"
DECLARED = "adversarial_declared"  # a variant's meta key: True where data.options declared the layout

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


def mode_of(options: Any) -> str:
    """``data.options.adversarial`` checked (``auto`` when absent); a DataError names the allowed values."""
    value = (options or {}).get(OPTION, "auto")
    if value is False or value is None:
        return "none"
    if value not in MODES:
        raise DataError(f"data.options.{OPTION}: {value!r} is no layout of adversarial questions; give one of "
                        f"{', '.join(MODES)} (jia-liang: ids '<original id>-<suffix>', as Jia & Liang's files)")
    return str(value)


def originals_of(ids: Sequence[str], mode: str) -> list[str | None]:
    """Each question's original id when it is an adversarial variant (see the module docstring), else None."""
    if mode == "none":
        return [None] * len(ids)
    if mode == "jia-liang":
        return [i.split("-", 1)[0] if "-" in i and i.split("-", 1)[0] else None for i in ids]
    present = set(ids)
    out: list[str | None] = []
    for i in ids:
        cut = i.find("-")
        found = None
        while cut > 0:
            if i[:cut] in present:
                found = i[:cut]
                break
            cut = i.find("-", cut + 1)
        out.append(found)
    return out


def group(data: Dataset, options: Any) -> Dataset:
    """``data`` with each adversarial variant marked (``meta["adversarial_of"]``); unchanged when none is found.
    A declared layout that matches no id is a DataError."""
    mode = mode_of(options)
    ids = [ex.id for ex in data.examples]
    of = originals_of(ids, mode)
    if mode == "jia-liang" and not any(of):
        raise DataError(f"data.options.{OPTION}: jia-liang, but no question id of {data.name or 'the data'} is an "
                        "original's id plus a suffix ('<id>-high-conf', '<id>-high-conf-turk0'); leave the option "
                        "out for plain questions")
    if not any(of):
        return data
    examples = [replace(ex, meta={**ex.meta, ORIGINAL: o, DECLARED: mode == "jia-liang"}) if o else ex
                for ex, o in zip(data.examples, of)]
    return Dataset(examples, data.name, data.label_names)


def distractor_span(original: str, variant: str) -> tuple[int, int] | None:
    """The characters of ``variant`` that ``original`` lacks (the longest common prefix and suffix removed,
    surrounding whitespace trimmed), or None when the contexts are equal or nothing was added."""
    if original == variant:
        return None
    start = 0
    while start < min(len(original), len(variant)) and original[start] == variant[start]:
        start += 1
    end_v, end_o = len(variant), len(original)
    while end_v > start and end_o > start and original[end_o - 1] == variant[end_v - 1]:
        end_v, end_o = end_v - 1, end_o - 1
    while start < end_v and variant[start].isspace():
        start += 1
    while end_v > start and variant[end_v - 1].isspace():
        end_v -= 1
    return (start, end_v) if end_v > start else None


def groups_of(examples: Sequence[Example]) -> dict[str, dict[str, Any]]:
    """Per original id (every question that is no variant is one, with or without variants), its index (None
    when absent from the data) and its variants' indices, in data order."""
    out: dict[str, dict[str, Any]] = {}
    for i, ex in enumerate(examples):
        key = ex.meta.get(ORIGINAL)
        entry = out.setdefault(key or ex.id, {"original": None, "variants": []})
        if key:
            entry["variants"].append(i)
        else:
            entry["original"] = i
    return out


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def audit(result: ProbeResult, data: Dataset, params: Any, ctx: Any, target: Any) -> bool:
    """Add the adversarial section to the accuracy probe's ``result``, after ``qa_accuracy`` filled it (the shared
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
                      f"averaged ({over(low_em)})", interval(low_em, params, seed, within),
                      outcome="em_adversarial")
    result.add_metric("adversarial_f1", _mean(low_f1), True,
                      "Jia & Liang's adversarial F1: per original the lowest F1 over it and its variants, averaged "
                      f"({over(low_f1)})", interval(low_f1, params, seed, within), outcome="f1_adversarial")
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

