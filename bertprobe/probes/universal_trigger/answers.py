"""``universal-trigger`` on an extractive reader (``span_answers``): a trigger that carries a target answer.

Wallace et al. 2019, §5: ``<trigger tokens> <target_answer>.`` is prepended to the context of the questions of one
``question_word``; the free tokens are flipped by HotFlip on the gradient of the target span's start and end
cross-entropy (``attacks.span_goal``), and the held-out success is measured by the task's own decoding
(``attacks.span_trigger.span_result``).
"""

from __future__ import annotations

import random
from typing import Any

from bertprobe.data.dataset import Dataset, Example
from bertprobe.errors import ProbeError
from bertprobe.model.target import Target
from bertprobe.probe import ProbeContext
from bertprobe.probes.attacks.span_goal import edited, span_goal
from bertprobe.probes.attacks.span_trigger import questions_of, span_result, split_by_context
from bertprobe.probes.attacks.splice import SplicedRows
from bertprobe.probes.universal_trigger.params import TriggerParams
from bertprobe.probes.universal_trigger.search import Found, SearchState, TriggerSearch, checked_vocabulary
from bertprobe.results import ProbeResult
from bertprobe.results.outcomes import example_ids
from bertprobe.tasks.qa_clusters import question_clusters


def search_state(target: Target, data: Dataset, params: TriggerParams, seed: int, progress: Any = None,
                 log: Any = None) -> SearchState:
    """A reader's questions of ``question_word``, split (seeded) into a search and a held-out part."""
    examples = questions_of(data.examples, params.question_word)
    rng = random.Random(seed)
    rng.shuffle(examples)
    if params.max_examples:
        examples = examples[: params.max_examples]
    if len(examples) < 4:
        raise ProbeError(f"only {len(examples)} labelled '{params.question_word}' questions; need at least 4")
    cut = max(1, min(len(examples) - 1, round(len(examples) * params.search_fraction)))
    search, held = split_by_context(examples, cut)
    return span_search_state(target, search, held, params, rng, progress, log)


def span_search_state(target: Target, search: list[Example], held: list[Example], params: TriggerParams,
                      rng: random.Random, progress: Any = None, log: Any = None) -> SearchState:
    """The search over a reader's questions ``search`` (``held`` kept out of it): each context opened with the
    target answer, the free trigger tokens spliced in front of it, within the reader's first window."""
    task: Any = target.task
    if not params.target_answer or not params.target_answer.strip():
        raise ProbeError("on a question-answering model set target_answer (the answer the trigger should force, e.g. "
                         "'to kill american people') and question_word (why, who, when, where)")
    if params.retrieval is not None:
        raise ProbeError("retrieval applies to bi-encoders (sentence-embedding models) only; on a question-answering "
                         "model set target_answer and question_word")
    if params.target_label is not None or params.to_label is not None or params.position != "prepend":
        raise ProbeError("on a question-answering model the trigger and its target_answer are prepended to the context "
                         "of the question_word questions: leave target_label, to_label and position out")
    first = bool(task.setting("question_first"))  # the model reads (question, context), else (context, question)
    examples = list(search) + list(held)
    base = [edited(ex, params.target_answer, "") for ex in examples]
    if not first:
        base = [Example(ex.text_pair or "", ex.text) for ex in base]
    rows = SplicedRows(target, base, params.length, "prepend", "second" if first else "first",
                       max_length=int(task.setting("max_length")), truncation="only_second" if first else "only_first",
                       keep_encodings=True)
    contexts = [ex.text_pair or "" for ex in examples]
    goal = span_goal(target.tokenizer, contexts, rows, params.target_answer, first, int(task.setting("n_best")),
                     int(task.setting("max_answer_tokens")))
    trigger_search = TriggerSearch(target, rows, params, 0, True, goal)  # type: ignore[arg-type]
    allowed = checked_vocabulary(target.tokenizer, params)
    return SearchState(0, None, examples, list(range(len(search))), list(range(len(search), len(examples))),
                       trigger_search, allowed, rng.getstate(), progress or (lambda it, **_: it),
                       log or (lambda _msg: None))


def audit(result: ProbeResult, target: Target, data: Dataset, params: TriggerParams, ctx: ProbeContext,
          found: Found) -> None:
    """The held-out questions' success (``attacks.span_trigger.span_result``), each with its id and its context,
    which the intervals resample."""
    state = found.state
    id_of = {id(ex): key for ex, key in zip(data.examples, example_ids(data.examples))}
    ids = [id_of[id(state.examples[i])] for i in state.held_idx]
    cluster_of = {id(ex): key for ex, key in zip(data.examples, question_clusters(data.examples))}
    groups = [cluster_of[id(state.examples[i])] for i in state.held_idx]  # contexts: the intervals resample them
    span_result(result, params, state, found.trigger, found.loss, found.history, found.seconds, ids, ctx, groups)
