"""The HotFlip searches of ``universal-trigger`` on a bi-encoder (the ``retrieval`` section's method and deviations:
its docstring): a poisoned passage pulled toward the attack queries, and a query trigger pulling queries toward one
document.

Both reuse the trigger search's machinery: ``SplicedRows`` (the tokens spliced into encoded rows),
``TriggerScorer``'s HotFlip gradient and batched scoring, with the outputs a bi-encoder's embeddings
(``EmbeddingSearch``) and the goals of ``attacks.similarity_goal``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch

from bertprobe.data.dataset import Example
from bertprobe.model.target import Target
from bertprobe.probes.attacks.similarity_goal import CentroidGoal, DocumentGoal, centroid, embedding_outputs
from bertprobe.probes.attacks.splice import SplicedRows
from bertprobe.probes.universal_trigger.params import TriggerParams
from bertprobe.probes.universal_trigger.search import TriggerSearch, initial_trigger, run_search
from bertprobe.tasks.embeddings import EmbeddingSettings


class EmbeddingSearch(TriggerSearch):
    """The trigger search with a bi-encoder's embeddings as the outputs its goal reads."""

    def __init__(self, target: Target, rows: SplicedRows, params: TriggerParams, goal: CentroidGoal | DocumentGoal,
                 settings: EmbeddingSettings) -> None:
        super().__init__(target, rows, params, 0, True, goal)  # type: ignore[arg-type]
        self.settings = settings

    def outputs(self, model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return embedding_outputs(model, batch, self.settings)


def model_text(text: str, settings: EmbeddingSettings) -> str:
    """``text`` as ``tasks.embeddings.embed`` feeds it to the model, without the prompt (lower-cased if set)."""
    return text.lower() if settings.lowercase else text


def passage_rows(target: Target, settings: EmbeddingSettings, length: int) -> SplicedRows:
    """One row, ``[CLS] <passage prompt> <length free tokens> [SEP]``: the poisoned passage as the corpus reads it."""
    return SplicedRows(target, [Example(settings.passage_prompt.rstrip())], length, "append",
                       max_length=(settings.max_length or target.max_length))


def query_rows(target: Target, settings: EmbeddingSettings, queries: Sequence[str], length: int) -> SplicedRows:
    """The attack queries with ``length`` trigger slots at their start, after the query prompt when the model has
    one (E5's ``query: ``), so that the rows are what ``embed`` reads of ``trigger + ' ' + query``."""
    prompt = settings.query_prompt
    rows = SplicedRows(target, [Example(prompt + model_text(q, settings)) for q in queries], length, "prepend",
                       max_length=(settings.max_length or target.max_length))
    if prompt:
        skip = len(target.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        for i, ids in enumerate(rows.ids):
            rows.insert[i] = min(rows.insert[i] + skip, len(ids) - 1)
    return rows


def passage_search(target: Target, settings: EmbeddingSettings, params: TriggerParams, attack: torch.Tensor,
                   allowed: torch.Tensor, rng: random.Random, progress: Any) -> tuple[torch.Tensor, dict[str, Any]]:
    """A ``passage_length``-token passage whose embedding lies close to the attack queries' (``attack``: Q x D).

    Zhong et al. 2023's HotFlip: a seeded random start of allowed tokens; each step takes the gradient of the mean
    similarity (one row: ``CentroidGoal``), scores the ``candidates`` best first-order replacements at one position
    as one batch, and keeps the best if it raises the similarity. Positions are visited in a seeded random order,
    a new order per sweep; the search ends after ``passage_iterations`` steps, or after a whole sweep without a gain.
    Returns the token ids and ``{"similarity_start", "similarity", "steps", "trace"}``.
    """
    rows = passage_rows(target, settings, params.passage_length)
    goal = CentroidGoal(centroid(attack, settings.similarity), settings.similarity)
    search = EmbeddingSearch(target, rows, replace(params, length=params.passage_length), goal, settings)
    pool = allowed.nonzero().squeeze(1).tolist()
    passage = torch.tensor([rng.choice(pool) for _ in range(params.passage_length)], dtype=torch.long)
    whole = (0,)
    current = float(search.score(passage.unsqueeze(0), whole)[0])
    start, trace, stale, order, steps = current, [-current], 0, [], 0
    for step in progress(range(params.passage_iterations), total=params.passage_iterations, desc="poisoned passage"):
        if not order:
            order = list(range(params.passage_length))
            rng.shuffle(order)
        pos = order.pop()
        grad = search.gradient(passage, whole)
        tokens = search.hotflip(grad[pos : pos + 1], allowed, params.candidates)[0]
        stacked = passage.repeat(len(tokens), 1)
        stacked[:, pos] = tokens
        scores = search.score(stacked, whole)
        best = int(scores.argmin())
        steps = step + 1
        if float(scores[best]) < current - 1e-7:
            passage, current, stale = stacked[best].clone(), float(scores[best]), 0
        else:
            stale += 1
        trace.append(-current)
        if stale >= params.passage_length:  # a whole sweep of positions without a gain: a first-order optimum
            break
    info = {"similarity_start": -start, "similarity": -current, "steps": steps, "trace": [round(t, 5) for t in trace],
            "forward_passes": search.forward_passes}
    return passage, info


def trigger_search(target: Target, settings: EmbeddingSettings, params: TriggerParams, queries: Sequence[str],
                   documents: torch.Tensor, index: int, allowed: torch.Tensor, rng: random.Random, restart: int,
                   progress: Any) -> tuple[torch.Tensor, float, list[dict[str, Any]], int]:
    """Wallace et al.'s search (``search.run_search``: HotFlip candidates, beam, halving, patience) for a ``length``-
    token phrase prepended to ``queries`` that pulls document ``index`` of ``documents`` up (``DocumentGoal``);
    returns the trigger, its loss (minus the mean similarity) on the first 256 queries, the history and the forward
    passes."""
    rows = query_rows(target, settings, queries, params.length)
    goal = DocumentGoal(documents, index, params.top_k, settings.similarity)
    search = EmbeddingSearch(target, rows, params, goal, settings)
    init = initial_trigger(target.tokenizer, params, allowed, restart, rng)
    every = list(range(len(queries)))
    trigger, history = run_search(search, init, every, allowed, rng, progress)
    loss = float(search.score(trigger.unsqueeze(0), tuple(every[:256]))[0])
    return trigger, loss, history, search.forward_passes
