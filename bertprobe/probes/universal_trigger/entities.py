"""``universal-trigger`` on a token classifier (``word_tags``): entity suppression.

``target_label`` names an entity type (ORG, PER...); the trigger is prepended to the sentences holding a gold entity
of that type, and the search (``attacks.entity_goal.EntityGoal``) pushes the tagger to lose them. Reported: the
type's strict recall on the held-out sentences without and with the trigger (``accuracy_before`` /
``accuracy_after``), the share of found entities it suppresses (``success_rate``), per-entity outcomes.
"""

from __future__ import annotations

import random
from typing import Any, cast

import torch

from bertprobe.data.dataset import Dataset, Example
from bertprobe.errors import ProbeError
from bertprobe.model.target import Target
from bertprobe.probe import ProbeContext
from bertprobe.probes.attacks.entity_goal import EntityGoal, word_firsts
from bertprobe.probes.universal_trigger.figures import trigger_figures
from bertprobe.probes.universal_trigger.params import TriggerParams
from bertprobe.probes.universal_trigger.search import (
    Found,
    SearchState,
    TriggerSearch,
    attacked_labels,
    class_state,
    drawn,
    require_label,
)
from bertprobe.progress import progress
from bertprobe.results import Finding, ProbeResult
from bertprobe.results.outcomes import Outcomes, example_ids
from bertprobe.stats import wilson_interval
from bertprobe.tasks.entities import marked, spans
from bertprobe.tasks.token_classification import TokenClassification


def search_state(target: Target, data: Dataset, params: TriggerParams, seed: int, progress: Any = None,
                 log: Any = None) -> SearchState:
    """The sentences with an entity of type ``target_label`` (seeded order, split into a search and a held-out
    part), the trigger prepended, the suppression goal of their gold entities of the type."""
    require_label(params)
    names = list(cast(TokenClassification, target.task).entity_types)
    if params.to_label is not None or params.position != "prepend" or params.segment != "first":
        raise ProbeError("on a token-classification model the trigger is prepended to the sentence and suppresses "
                         "entities of target_label: leave to_label, position and segment out")
    label, to = attacked_labels(target, params, names)
    rng = random.Random(seed)
    examples = drawn(entity_examples(target, data, names[label]), params, rng, f"with an entity of type '{names[label]}'")
    goal = entity_goal(target, examples, params, names[label])
    return class_state(target, examples, params, label, to, goal, rng, progress, log)


def entity_examples(target: Target, data: Dataset, kind: str) -> list[Example]:
    """The sentences holding a gold entity of the attacked type."""
    task = cast(TokenClassification, target.task)
    return [ex for ex in data.examples if ex.words and ex.label is not None
            and any(k == kind for _, _, k in spans(task.tags(list(ex.label)), task.scheme))]  # type: ignore[arg-type]


def entity_goal(target: Target, examples: list[Example], params: TriggerParams, kind: str) -> EntityGoal:
    """The entity-suppression goal of these examples: where each word is read, and the gold spans of the type."""
    task = cast(TokenClassification, target.task)
    firsts, gold = [], []
    for ex in examples:
        firsts.append(word_firsts(target.tokenizer, ex.text, ex.words or (), target.max_length - params.length))
        gold.append(tuple(s for s in spans(task.tags(list(ex.label or ())), task.scheme) if s[2] == kind))  # type: ignore[arg-type]
    return EntityGoal(kind, task.label_names.index("O"), tuple(task.label_names), task.scheme, tuple(firsts),
                      tuple(gold), params.length)


def entity_hits(search: TriggerSearch, trigger: torch.Tensor | None, rows: list[int]) -> tuple[list[list[bool]], list[list[str]]]:
    """Entity suppression: for each row, whether each gold entity of the attacked type is found, and the
    predicted tags of its words, with the trigger spliced in (or without: ``trigger=None``)."""
    goal: EntityGoal = search.attack  # type: ignore[assignment]
    found: dict[int, list[bool]] = {}
    tags: dict[int, list[str]] = {}
    shift = 0 if trigger is None else goal.shift
    ordered = sorted(rows, key=lambda r: len(search.rows.ids[r]))
    with torch.inference_mode():
        for start in progress(range(0, len(ordered), search.params.eval_batch_size), desc="held-out predict"):
            chunk = tuple(ordered[start : start + search.params.eval_batch_size])
            batch = (search.target.collate([search.rows.plain(r) for r in chunk]) if trigger is None
                     else search.rows.build(chunk, trigger.unsqueeze(0)))
            logits = search.target.model(**batch).logits.float().cpu()
            for j, r in enumerate(chunk):
                found[r] = goal.found(logits[j], r, shift)
                tags[r] = goal.word_tags(logits[j], r, shift)
    return [found[r] for r in rows], [tags[r] for r in rows]


def audit(result: ProbeResult, target: Target, data: Dataset, params: TriggerParams, ctx: ProbeContext,
          found: Found) -> None:
    """Entity suppression on a token classifier: the attacked type's strict recall on the held-out sentences
    without and with the trigger (``accuracy_before``/``accuracy_after``), per entity outcomes."""
    state, best, history = found.state, found.trigger, found.history
    search, held_idx, examples = state.search, state.held_idx, state.examples
    goal: EntityGoal = search.attack  # type: ignore[assignment]
    tokenizer = search.target.tokenizer
    before, _ = entity_hits(search, None, held_idx)
    after, tags_after = entity_hits(search, best, held_idx)
    id_of = {id(ex): key for ex, key in zip(data.examples, example_ids(data.examples))}
    ids = [f"{id_of[id(examples[r])]}:{a}-{b}" for r in held_idx for a, b, _ in goal.gold[r]]
    found_before = [f for row in before for f in row]
    found_after = [f for row in after for f in row]
    n, n_before = len(found_before), sum(found_before)
    lost = [b and not a for b, a in zip(found_before, found_after)]
    result.outcomes += [
        Outcomes.from_values("correct_before", ids, found_before),
        Outcomes.from_values("correct_after", ids, found_after),
        Outcomes.from_values("flipped", [i for i, f in zip(ids, found_before) if f], [x for x, f in zip(lost, found_before) if f]),
    ]
    recall_before, recall_after = n_before / n if n else 0.0, sum(found_after) / n if n else 0.0
    result.add_metric("accuracy_before", recall_before, True, f"held-out recall of {goal.kind} entities",
                      ci=wilson_interval(n_before, n) if n else None, outcome="correct_before")
    result.add_metric("accuracy_after", recall_after, True, f"held-out recall of {goal.kind} entities with the trigger",
                      ci=wilson_interval(sum(found_after), n) if n else None, outcome="correct_after")
    result.add_metric("success_rate", sum(lost) / n_before if n_before else 0.0, False,
                      f"share of the {goal.kind} entities found without the trigger that it suppresses", outcome="flipped",
                      ci=wilson_interval(sum(lost), n_before) if n_before else None)
    result.add_metric("search_seconds", found.seconds, False, kind="cost")
    result.add_metric("forward_passes", float(search.forward_passes), False, "model forward calls during the search",
                      kind="cost")
    result.add_metric("examples_searched", float(len(state.search_idx)), kind="count")
    result.add_metric("examples_held_out", float(len(held_idx)), kind="count")
    result.add_metric("entities_held_out", float(n), None, f"held-out {goal.kind} entities", kind="count")
    text = tokenizer.decode(best.tolist()).strip()
    result.details.update({
        "trigger_tokens": tokenizer.convert_ids_to_tokens(best.tolist()), "trigger_ids": best.tolist(),
        "trigger_text": text, "target_label": goal.kind, "to_label": None, "direction": "suppress",
        "rows_scored": search.rows_scored, "vocabulary_size": int(state.allowed.sum()), "search_loss": found.loss,
        "history": history,
        "key_finding": f"trigger {text!r} takes held-out {goal.kind} recall {recall_before:.2f} -> {recall_after:.2f}"
                       + (f" ({n} held-out entities: few)" if n < 30 else ""),
        "summary": {"trigger": f"{text!r} (prepended to sentences with a {goal.kind} entity)",
                    "effect": f"held-out {goal.kind} recall {recall_before:.3f} -> {recall_after:.3f} over {n} entities"},
    })
    worst = sorted(range(len(held_idx)), key=lambda i: -(sum(before[i]) - sum(after[i])))
    for i in [i for i in worst if sum(before[i]) > sum(after[i])][: params.findings]:
        ex = examples[held_idx[i]]
        words = list(ex.words or ())
        result.findings.append(Finding(
            title=f"{sum(before[i]) - sum(after[i])} of {len(before[i])} {goal.kind} entities suppressed",
            input=marked(words, goal.gold[held_idx[i]]), perturbed=f"{text} {ex.text}",
            expected=marked(words, goal.gold[held_idx[i]]),
            observed=marked(words, [s for s in spans(tags_after[i], goal.scheme)]),
            score=float(sum(before[i]) - sum(after[i])), extra={"kind": "trigger", "highlight": [text]}))
    result.details["figures"] = trigger_figures(result, history, goal.kind)
