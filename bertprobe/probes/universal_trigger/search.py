"""The trigger search of ``universal-trigger`` (its method and deviations: ``probe``'s docstring): the spliced
rows, the HotFlip beam search of one restart, held-out logits, and the search state of a classifier's examples.

A section of the probe (``answers``, ``entities``, ``labelsets``) builds its own ``SearchState`` with the helpers
here (``require_label``, ``attacked_labels``, ``drawn``, ``class_state``); ``class_search`` is the probe's own,
for a single-label classifier.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import torch

from bertprobe.data.dataset import Dataset, Example
from bertprobe.errors import ProbeError
from bertprobe.model.target import Target
from bertprobe.probes.attacks.goals import ClassGoal, LabelStateGoal
from bertprobe.probes.attacks.hotflip import TriggerScorer
from bertprobe.probes.attacks.splice import SplicedRows
from bertprobe.probes.attacks.vocabulary import allowed_vocabulary, resolve_label
from bertprobe.probes.universal_trigger.params import TriggerParams
from bertprobe.progress import progress


def allowed_for(tokenizer: Any, params: TriggerParams) -> torch.Tensor:
    """The vocabulary mask of the probe's filter params."""
    return allowed_vocabulary(tokenizer, params.allow_subwords, params.alphabetic_only, params.blacklist)


def checked_vocabulary(tokenizer: Any, params: TriggerParams) -> torch.Tensor:
    """``allowed_for``, refused when fewer tokens pass the filter than the search takes candidates."""
    allowed = allowed_for(tokenizer, params)
    if int(allowed.sum()) < params.candidates:
        raise ProbeError(f"only {int(allowed.sum())} vocabulary tokens pass the filter; lower candidates")
    return allowed


def spliced_rows(target: Target, examples: list[Example], params: TriggerParams) -> SplicedRows:
    return SplicedRows(target, examples, params.length, params.position, params.segment)


class TriggerSearch(TriggerScorer):
    """The search state: the spliced examples, the attack objective, the beam step and a forward-pass counter."""

    def __init__(self, target: Target, rows: SplicedRows, params: TriggerParams, goal: int, targeted: bool,
                 attack: ClassGoal | LabelStateGoal | None = None) -> None:
        super().__init__(target, rows, goal, targeted, params.max_rows_per_forward, params.scoring == "per-candidate",
                         attack)
        self.params = params

    def beam_step(self, trigger: torch.Tensor, current: float, candidates: torch.Tensor,
                  rows: tuple[int, ...]) -> tuple[torch.Tensor, float]:
        """Left-to-right beam search over the candidates; returns the best trigger and its batch loss."""
        p = self.params
        beams: list[tuple[float, torch.Tensor]] = [(current, trigger)]
        small = rows[::4] if p.halving and p.scoring == "batched" and len(rows) >= 8 else None
        for pos in progress(range(p.length), desc="beam search"):
            expansions = []
            seen = set()
            for _, beam in beams:
                for tok in [int(beam[pos])] + candidates[pos].tolist():
                    cand = beam.clone()
                    cand[pos] = tok
                    key = tuple(cand.tolist())
                    if key not in seen:
                        seen.add(key)
                        expansions.append(cand)
            stacked = torch.stack(expansions)
            if small is not None and len(stacked) > p.halving_keep:
                keep = self.score(stacked, small).argsort()[: max(p.halving_keep, p.beam)]
                stacked = stacked[keep]
            scores = self.score(stacked, rows)
            order = scores.argsort()[: p.beam]
            beams = [(float(scores[i]), stacked[i]) for i in order]
        best_score, best = beams[0]
        if best_score >= current:  # never accept a worse trigger
            return trigger, current
        return best, best_score


def _batches(indices: list[int], lengths: list[int], size: int, rng: random.Random):
    """Endless batches of similar-length examples (little padding), in shuffled order."""
    ordered = sorted(indices, key=lambda i: (lengths[i], i))
    chunks = [tuple(ordered[s : s + size]) for s in range(0, len(ordered), size)]
    while True:
        rng.shuffle(chunks)
        yield from chunks


def run_search(search: TriggerSearch, init: torch.Tensor, search_idx: list[int], allowed: torch.Tensor,
               rng: random.Random, progress: Any) -> tuple[torch.Tensor, list[dict[str, Any]]]:
    """One restart: iterate gradient -> HotFlip candidates -> beam search until no improvement."""
    p = search.params
    trigger = init.clone()
    history: list[dict[str, Any]] = []
    stale = 0
    batches = _batches(search_idx, [len(ids) for ids in search.rows.ids], p.batch_size, rng)
    for it in progress(range(p.iterations), total=p.iterations, desc="trigger search"):
        rows = next(batches)
        current = float(search.score(trigger.unsqueeze(0), rows)[0])
        grad = search.gradient(trigger, rows)
        candidates = search.hotflip(grad, allowed, p.candidates)
        new, loss = search.beam_step(trigger, current, candidates, rows)
        history.append({"iteration": it, "loss_before": current, "loss_after": loss, "trigger_ids": new.tolist()})
        improved = loss < current - 1e-6
        trigger = new
        stale = 0 if improved else stale + 1
        if p.patience is not None:
            if stale >= p.patience:
                break
            if _all_flipped(search, trigger, rows):
                break
    return trigger, history


def _all_flipped(search: TriggerSearch, trigger: torch.Tensor, rows: tuple[int, ...]) -> bool:
    with torch.inference_mode():
        logits = search.forward(search.rows.build(rows, trigger.unsqueeze(0))).cpu()
    return bool(search.attack.hit(logits, rows).all())


def held_out_logits(search: TriggerSearch, trigger: torch.Tensor | None, rows: list[int]) -> torch.Tensor:
    """Logits on ``rows`` with the trigger spliced in (or without: ``trigger=None``); the attack's goal reads them."""
    p = search.params
    ordered = sorted(rows, key=lambda r: len(search.rows.ids[r]))
    out = torch.empty(len(rows), search.target.model.config.num_labels)
    where = {r: i for i, r in enumerate(rows)}
    with torch.inference_mode():
        for start in progress(range(0, len(ordered), p.eval_batch_size), desc="held-out predict"):
            chunk = tuple(ordered[start : start + p.eval_batch_size])
            if trigger is None:
                batch = search.target.collate([search.rows.plain(r) for r in chunk])
            else:
                batch = search.rows.build(chunk, trigger.unsqueeze(0))
            probs = search.target.model(**batch).logits.float().cpu()
            for j, r in enumerate(chunk):
                out[where[r]] = probs[j]
    return out


def initial_trigger(tokenizer: Any, params: TriggerParams, allowed: torch.Tensor, restart: int,
                    rng: random.Random) -> torch.Tensor:
    """Where restart ``restart`` starts: ``init`` at every position (restart 0), else random allowed tokens."""
    if restart > 0:  # later restarts start from random allowed tokens
        pool = allowed.nonzero().squeeze(1).tolist()
        return torch.tensor([rng.choice(pool) for _ in range(params.length)], dtype=torch.long)
    ids = tokenizer(params.init, add_special_tokens=False)["input_ids"]
    if len(ids) == 1:
        ids = ids * params.length
    if len(ids) != params.length:
        raise ProbeError(f"init {params.init!r} is {len(ids)} tokens; give one token or exactly length={params.length}")
    return torch.tensor(ids, dtype=torch.long)


def with_trigger(text: str, trigger_text: str, position: str) -> str:
    """``text`` with the trigger's text prepended or appended."""
    return f"{trigger_text} {text}" if position == "prepend" else f"{text} {trigger_text}"


@dataclass
class SearchState:
    """Everything a restart needs, rebuilt the same from (target, data, params, seed) in any process."""

    label: int
    to: int | None
    examples: list[Example]
    search_idx: list[int]
    held_idx: list[int]
    search: TriggerSearch
    allowed: torch.Tensor
    after_shuffle: Any
    progress: Any
    log: Any


def require_label(params: TriggerParams) -> None:
    """A classifier's or tagger's trigger attacks ``target_label``; ``target_answer`` is a reader's."""
    if params.target_answer is not None:
        raise ProbeError("target_answer applies to question-answering models only; set target_label (the class attacked)")
    if params.retrieval is not None:
        raise ProbeError("retrieval applies to bi-encoders (sentence-embedding models) only; set target_label (the "
                         "class attacked)")
    if params.target_label is None:
        raise ProbeError("target_label is required: the class whose examples are attacked, e.g. positive")


def attacked_labels(target: Target, params: TriggerParams, names: list[str]) -> tuple[int, int | None]:
    """``target_label`` and ``to_label`` as indices of ``names`` (the model's classes, or a tagger's entity types)."""
    label = resolve_label(params.target_label, names, "target_label", target.task.label_map)  # type: ignore[arg-type]
    to = resolve_label(params.to_label, names, "to_label", target.task.label_map) if params.to_label is not None else None
    if to == label:
        raise ProbeError("to_label must differ from target_label")
    return label, to


def drawn(examples: list[Example], params: TriggerParams, rng: random.Random, which: str) -> list[Example]:
    """The attacked ``examples`` in seeded order, at most ``max_examples`` of them; fewer than 4 are refused
    (``which``: what they are, for the message)."""
    rng.shuffle(examples)
    if params.max_examples:
        examples = examples[: params.max_examples]
    if len(examples) < 4:
        raise ProbeError(f"only {len(examples)} examples {which}; need at least 4")
    return examples


def class_state(target: Target, examples: list[Example], params: TriggerParams, label: int, to: int | None,
                attack: Any, rng: random.Random, progress: Any = None, log: Any = None) -> SearchState:
    """The search over ``drawn`` examples for ``attack``: the first ``search_fraction`` of them searched, the rest
    held out."""
    cut = max(1, min(len(examples) - 1, round(len(examples) * params.search_fraction)))
    rows = spliced_rows(target, examples, params)
    goal = to if to is not None else label
    search = TriggerSearch(target, rows, params, goal, to is not None, attack)
    allowed = checked_vocabulary(target.tokenizer, params)
    return SearchState(label, to, examples, list(range(cut)), list(range(cut, len(examples))), search, allowed,
                       rng.getstate(), progress or (lambda it, **_: it), log or (lambda _msg: None))


def class_search(target: Target, data: Dataset, params: TriggerParams, seed: int, progress: Any = None,
                 log: Any = None) -> SearchState:
    """A single-label classifier's search: the examples of ``target_label``, pushed to ``to_label`` (or any other
    class), split (seeded) into a search and a held-out part."""
    require_label(params)
    names = target.label_names
    label, to = attacked_labels(target, params, names)
    rng = random.Random(seed)
    examples = drawn([ex for ex in data.examples if ex.label == label], params, rng, f"of class '{names[label]}'")
    return class_state(target, examples, params, label, to, ClassGoal(label, to), rng, progress, log)


@dataclass(frozen=True)
class Found:
    """What the restarts found (what a section's ``audit`` reports): the best trigger's ids, its search loss, each
    restart's history, and the search's wall time."""

    state: SearchState
    trigger: torch.Tensor
    loss: float
    history: list[dict[str, Any]]
    seconds: float
