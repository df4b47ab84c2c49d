"""The calibration probe's section for entities (tasks with ``word_tags``: NER): predicted entities and words
binned against whether they are right (Guo et al. 2017's measures at two levels)."""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from bertprobe.data.dataset import Dataset
from bertprobe.errors import ProbeError
from bertprobe.probes.calibration.metrics import ece_parts, ece_value
from bertprobe.probes.calibration.scaling import fit_temperature, judge_scaling, proper_scores, softmax
from bertprobe.results import Catalogue, ProbeResult
from bertprobe.results.outcomes import Outcomes, example_ids
from bertprobe.tasks.entities import spans
from bertprobe.tasks.token_classification import TokenClassification


def audit(result: ProbeResult, target: Any, data: Dataset, params: Any, ctx: Any) -> None:
    """Entity-level and token-level calibration on the shared per-word logits (``entity_calibration``)."""
    entity_calibration(result, target, data, ctx.predictions(target, data, params.batch_size).logits, params, ctx.seed)


def entity_calibration(result: ProbeResult, target: Any, data: Dataset, raw: Any, params: Any, seed: int) -> None:
    """NER calibration at two levels. Entity level (``ece``, the default gate; ``brier``): each predicted entity's
    confidence is the mean of its words' top-tag probabilities, binned against whether the entity is exactly
    right (span and type). Token level: each word's top-tag probability against whether its tag is right
    (``ece_token``, ``brier_token``, ``nll_token``). One temperature fitted by the words' NLL on the fitting half
    of the sentences, judged on the other half (token NLL and entity ECE)."""
    task = cast(TokenClassification, target.task)
    scheme = str(task.settings.get("scheme", "IOB2"))
    lengths = [len(ex.label or ()) for ex in data.examples]
    logits = [raw[i, :n].double().numpy() for i, n in enumerate(lengths)]
    gold = [np.asarray(ex.label, dtype=int) for ex in data.examples]
    if len(gold) < 2:
        raise ProbeError("calibration needs at least 2 sentences")

    def entity_units(sentences: list[int], temperature: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
        conf, right = [], []
        for i in sentences:
            probs = softmax(logits[i], temperature)
            tags = task.tags(probs.argmax(axis=1))
            truth = set(spans(task.tags(gold[i]), scheme))
            for a, b, kind in spans(tags, scheme):
                conf.append(float(probs[a:b].max(axis=1).mean()))
                right.append(float((a, b, kind) in truth))
        return np.asarray(conf), np.asarray(right)

    everything = list(range(len(gold)))
    conf, right = entity_units(everything)
    probs_all = [softmax(z) for z in logits]
    word_conf = np.concatenate([p.max(axis=1) for p in probs_all]) if probs_all else np.zeros(0)
    word_right = np.concatenate([(p.argmax(axis=1) == g).astype(float) for p, g in zip(probs_all, gold)])
    brier_words = np.concatenate([proper_scores(p, g)[0] for p, g in zip(probs_all, gold) if len(g)])
    nll_words = np.concatenate([proper_scores(p, g)[1] for p, g in zip(probs_all, gold) if len(g)])
    ids = example_ids(data.examples)
    per_sentence_nll = [float(proper_scores(p, g)[1].mean()) if len(g) else 0.0 for p, g in zip(probs_all, gold)]
    result.outcomes.append(Outcomes.from_values("nll", ids, per_sentence_nll, "score"))
    if len(conf):
        entity = ece_parts(conf, right, params.bins)
        result.add_metric("ece", entity["ece"], False, f"entity-level ECE: a predicted entity's mean top-tag probability "
                          f"against whether it is exactly right, {params.bins} bins")
        result.add_metric("mce", entity["mce"], False, "entity-level maximum calibration error", kind="extreme")
        result.add_metric("brier", float(((conf - right) ** 2).mean()), False, "entity-level Brier score")
        result.details["bins"] = entity["bins"]
    result.add_metric("entities", float(len(conf)), None, "predicted entities binned", kind="count")
    token = ece_parts(word_conf, word_right, params.bins)
    result.add_metric("ece_token", token["ece"], False, "token-level ECE of each word's top tag probability")
    result.add_metric("brier_token", float(brier_words.mean()), False, "multi-class Brier score per word")
    result.add_metric("nll_token", float(nll_words.mean()), False, "NLL of each word's gold tag", outcome="nll")
    result.add_metric("accuracy", float(word_right.mean()), True, "share of words tagged right")
    order = np.random.default_rng(seed).permutation(len(gold))
    cut = min(len(gold) - 1, max(1, int(round(params.fit_share * len(gold)))))
    fit, held = sorted(order[:cut].tolist()), sorted(order[cut:].tolist())
    fit_logits = np.concatenate([logits[i] for i in fit]) if fit else np.zeros((0, 1))
    fit_gold = np.concatenate([gold[i] for i in fit]) if fit else np.zeros(0, dtype=int)
    temperature = fit_temperature(fit_logits, fit_gold) if len(fit_gold) else 1.0
    result.add_metric("temperature", temperature, None, "temperature fitted by the words' NLL on the fitting half")
    held_logits = np.concatenate([logits[i] for i in held])
    held_gold = np.concatenate([gold[i] for i in held])
    sentences = []  # per held-out sentence: its words' NLL and its entities' (confidence, right), before and after
    for suffix, t in (("", 1.0), ("_scaled", temperature)):
        result.add_metric(f"nll_heldout{suffix}", float(proper_scores(softmax(held_logits, t), held_gold)[1].mean()), False,
                          "words' NLL on the held-out half" + (" after temperature scaling" if suffix else ""))
        c, r = entity_units(held, t)
        result.add_metric(f"ece_heldout{suffix}", ece_parts(c, r, params.bins)["ece"] if len(c) else 0.0, False,
                          "entity-level ECE on the held-out half" + (" after temperature scaling" if suffix else ""))
        sentences.append([(proper_scores(softmax(logits[i], t), gold[i])[1], *entity_units([i], t)) for i in held])

    def change(idx: np.ndarray) -> tuple[float, float]:
        out = []
        for per_sentence in sentences:
            chosen = [per_sentence[i] for i in idx]
            words = np.concatenate([w for w, _, _ in chosen])
            conf, right = np.concatenate([c for _, c, _ in chosen]), np.concatenate([r for _, _, r in chosen])
            out.append((float(words.mean()) if len(words) else 0.0, ece_value(conf, right, params.bins)))
        (nll_b, ece_b), (nll_a, ece_a) = out
        return nll_a - nll_b, ece_a - ece_b

    judge_scaling(result, len(held), change, params, seed)
    result.add_metric("examples", float(len(gold)), None, "sentences evaluated", kind="count")
    series = [{"name": "perfect calibration", "x": [0, 1], "y": [0, 1]},
              {"name": "words (top tag)", "x": [b["confidence"] for b in token["bins"]], "y": [b["accuracy"] for b in token["bins"]]}]
    if len(conf):
        series.append({"name": "entities", "x": [b["confidence"] for b in result.details["bins"]],
                       "y": [b["accuracy"] for b in result.details["bins"]]})
    result.details["bins_token"] = token["bins"]
    result.details["figures"] = [{"kind": "line", "title": "reliability diagram: predicted entities and words",
                                  "data": {"series": series}, "axes": {"x": "confidence (bin mean)", "y": "share right"}}]
    ece = result.value("ece")
    result.details["key_finding"] = (f"entity ECE {ece:.3f} over {len(conf)} predicted entities, token ECE {token['ece']:.3f}, "
                                     f"{result.details['temperature_scaling']}") if ece is not None else \
        f"no entity predicted; token ECE {token['ece']:.3f}"


# what this section writes in the calibration probe's place (merged by Probe.catalogue)
catalogue = Catalogue(
    {"ece_token": "token classification: ECE of each word's top tag probability",
     "brier_token": "token classification: multi-class Brier score per word",
     "nll_token": "token classification: NLL of each word's gold tag",
     "entities": "token classification: predicted entities binned by the entity-level ECE"},
    {"ece_token": False, "brier_token": False, "nll_token": False, "entities": None})
