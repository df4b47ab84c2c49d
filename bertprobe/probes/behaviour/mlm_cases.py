"""The INV test ``INV: MLM substitution (BAE-style)``: a masked LM (``params.mlm``) proposes context-fitting
substitutes for words of the test sentences, and the classifier's prediction must not change.

CheckList's masked-LM fill-ins (Ribeiro et al. 2020) and BAE-R's replacements (Garg & Ramakrishnan 2020): per
sentence (a seeded sample of ``mlm_cases`` of the data's texts, or of the other cases' originals without data),
a seeded sample of ``mlm_words`` of its content words is masked, one at a time (``bertprobe.model.fill_in``); of
the LM's ``mlm_top_k`` candidates those of probability >= ``mlm_min_prob`` are kept when they are whole words,
not the original, no stop word (the shipped English list, plus ``mlm_stop``) and no label-bearing word (the
lexicons ``mlm_protect``: by default the sentiment adjectives and verbs, and the negation words). Those words
are never masked either: replacing "good" with "bad" is no invariance. Up to ``mlm_edits`` substitutions make a
case's edited texts (the best of each masked word first); a case fails when one of them flips the prediction.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from bertprobe.data.dataset import Dataset
from bertprobe.errors import ProbeError
from bertprobe.model.fill_in import Proposal, Slot, default_stop_words, propose_substitutions
from bertprobe.model.spec import same_model
from bertprobe.model.target import Target
from bertprobe.probe import ProbeContext, model_param_problem
from bertprobe.probes.behaviour.cases import Case, Text
from bertprobe.probes.behaviour.lexicon import edits
from bertprobe.probes.behaviour.params import BehaviourParams
from bertprobe.results import Finding

TEST = "INV: MLM substitution (BAE-style)"
CAPABILITY = "substitution"
NEEDS = "mlm"  # the capability the mlm param's model must offer (``BehaviourProbe.model_params``)
WHAT = "a masked LM (an ...ForMaskedLM checkpoint with a mask token, e.g. the classifier's base model)"
WORD = re.compile(r"[A-Za-z]{2,}(?:[-'][A-Za-z]+)*")


@dataclass(frozen=True)
class Substitution:
    """One edited text of the test: the proposal it came from and the case it belongs to."""

    case: int
    proposal: Proposal


def load_mlm(target: Target, params: BehaviourParams, ctx: ProbeContext) -> Target:
    """The masked LM ``params.mlm`` names, loaded through the harness (once per run: its caches), refused with a
    one-line ProbeError when it is the classifier itself or no masked LM."""
    assert params.mlm is not None
    if ctx.load_target is None:
        raise ProbeError("mlm needs the harness to load a second model (ctx.load_target)")
    spec = ctx.resolve_model(params.mlm, target.spec)
    if same_model(spec.path, target.spec.path):
        raise ProbeError(model_param_problem("params.mlm", params.mlm, WHAT, f"it names the model under test "
                                             f"({target.spec.label})"))
    mlm = ctx.load_target(spec)
    if NEEDS not in mlm.capabilities or getattr(mlm.tokenizer, "mask_token_id", None) is None:
        why = (f"a {mlm.task.name} model" if NEEDS not in mlm.capabilities else "its tokenizer has no mask token")
        raise ProbeError(model_param_problem("params.mlm", params.mlm, WHAT, why))
    return mlm


def protected_words(lexicons: dict[str, list[str]], names: tuple[str, ...]) -> set[str]:
    """The lower-cased words of the lexicons ``names`` (each word of a multi-word entry) and the negation words:
    never masked, never proposed."""
    unknown = [n for n in names if n not in lexicons]
    if unknown:
        raise ProbeError(f"mlm_protect: no lexicon {', '.join(map(repr, unknown))}; lexicons: {', '.join(sorted(lexicons))}")
    words = {w.lower() for name in names for entry in lexicons[name] for w in WORD.findall(entry)}
    return words | {w.lower() for w in edits()["negation_words"]}


def source_texts(data: Dataset | None, cases: list[Case], seed: int, limit: int) -> list[tuple[str, Text]]:
    """(id, text) of the sentences the test edits: a seeded sample of ``limit`` of the data's texts, or without
    data of the other cases' single-text originals."""
    if data is not None:
        pool: list[tuple[str, Text]] = [(str(ex.id), ex.text if ex.text_pair is None else (ex.text, ex.text_pair))
                                        for ex in data.examples if ex.text]
    else:
        firsts = dict.fromkeys(c.texts[0] for c in cases if c.texts and isinstance(c.texts[0], str))
        pool = [(f"text{i}", t) for i, t in enumerate(firsts)]
    if len(pool) > limit:
        pool = random.Random(f"{seed}:mlm").sample(pool, limit)
    return pool


def first(text: Text) -> str:
    return text if isinstance(text, str) else text[0]


def with_first(text: Text, new: str) -> Text:
    return new if isinstance(text, str) else (new, text[1])


def choose(proposals: list[list[Proposal]], limit: int) -> list[Proposal]:
    """Up to ``limit`` proposals of one sentence, most probable first, the best of each masked word before any
    word's second best; one per edited text."""
    out: list[Proposal] = []
    texts: set[str] = set()
    depth = 0
    while len(out) < limit and any(depth < len(p) for p in proposals):
        layer = sorted((p[depth] for p in proposals if depth < len(p)), key=lambda x: -x.probability)
        for prop in layer:
            if len(out) < limit and prop.text not in texts:
                out.append(prop)
                texts.add(prop.text)
        depth += 1
    return out


def mlm_cases(target: Target, data: Dataset | None, others: list[Case], lexicons: dict[str, list[str]],
              params: BehaviourParams, ctx: ProbeContext) -> tuple[list[Case], list[Substitution], dict[str, Any]]:
    """The test's cases, the substitution behind each edited text, and the row that describes the test (or says
    why it made no case)."""
    mlm = load_mlm(target, params, ctx)
    never = protected_words(lexicons, params.mlm_protect)
    stop = default_stop_words() | {w.lower() for w in params.mlm_stop}
    sources = source_texts(data, others, ctx.seed, params.mlm_cases)
    sentences = [first(t) for _, t in sources]
    slots: list[Slot] = []
    for i, (key, _) in enumerate(sources):
        spans = [m.span() for m in WORD.finditer(sentences[i]) if m.group().lower() not in stop | never]
        rng = random.Random(f"{ctx.seed}:mlm:{key}")
        picked = sorted(rng.sample(spans, min(params.mlm_words, len(spans))))
        slots += [Slot(i, a, b) for a, b in picked]
    found = propose_substitutions(mlm, sentences, slots, params.mlm_top_k, params.mlm_min_prob, stop=stop,
                                  blocked=never, progress=ctx.progress)
    by_sentence: dict[int, list[list[Proposal]]] = {}
    for slot, props in zip(slots, found):
        by_sentence.setdefault(slot.sentence, []).append(props)
    cases: list[Case] = []
    subs: list[Substitution] = []
    for i, (key, text) in enumerate(sources):
        chosen = choose(by_sentence.get(i, []), params.mlm_edits)
        if not chosen:
            continue
        texts = (text, *[with_first(text, p.text) for p in chosen])
        cases.append(Case(test=TEST, type="inv", texts=texts, capability=CAPABILITY, id=key, source=f"mlm {params.mlm}",
                          changed=((), *[(p.substitute,) for p in chosen])))
        subs += [Substitution(len(cases) - 1, p) for p in chosen]
    row: dict[str, Any] = {"perturbation": TEST, "type": "inv", "capability": CAPABILITY, "applied": len(cases),
                           "examples": len(sources), "masked_words": len(slots), "edits": len(subs),
                           "description": f"a word replaced by a fill-in of {params.mlm} (p >= {params.mlm_min_prob})"}
    if not cases:
        row["skipped"] = (f"the masked LM proposed no substitute of p >= {params.mlm_min_prob} for the "
                          f"{len(slots)} masked words of {len(sources)} sentences")
    ctx.log(f"{TEST}: {len(slots)} words masked in {len(sources)} sentences, {len(subs)} substitutions kept")
    return cases, subs, row


def describe_edits(findings: list[Finding], cases: list[Case], subs: list[Substitution], probs: dict[str, np.ndarray],
                   key: Callable[[Text], str], said: Callable[[np.ndarray], str]) -> list[dict[str, Any]]:
    """Every substitution with the two predictions (the rows of ``details.mlm_substitution.edits``); each finding of
    the test gets its case's edits (``extra.edits``) and the decisive one first in ``observed``. ``key(text)``: a
    text's key in ``probs``; ``said(p)``: a prediction in words (the class, or a label set)."""
    rows = []
    for sub in subs:
        original = cases[sub.case].texts[0]
        edited = with_first(original, sub.proposal.text)
        before, after = said(probs[key(original)]), said(probs[key(edited)])
        rows.append({"case": cases[sub.case].id, "input": key(original), "perturbed": key(edited),
                     "word": sub.proposal.original, "substitute": sub.proposal.substitute,
                     "p_mlm": round(sub.proposal.probability, 4), "before": before, "after": after,
                     "flipped": before != after})
    for f in findings:
        if f.extra.get("test") != TEST:
            continue
        mine = [r for r in rows if r["input"] == f.input]
        f.extra["edits"] = [{k: r[k] for k in ("word", "substitute", "p_mlm", "before", "after")} for r in mine]
        decisive = next((r for r in mine if r["perturbed"] == f.perturbed), None)
        if decisive is not None:
            f.observed = (f"'{decisive['word']}' -> '{decisive['substitute']}' (p_mlm={decisive['p_mlm']:.3f}): "
                          f"{decisive['before']} -> {decisive['after']}; {f.observed}")
    return rows
