"""Probe ``universal-trigger``: gradient-guided universal adversarial trigger search.

Paper: Wallace, Feng, Kandpal, Gardner, Singh 2019, "Universal Adversarial Triggers for Attacking and
Analyzing NLP" (EMNLP). A short, input-agnostic token sequence is prepended (or appended) to every
example of one class. Each iteration takes the gradient of the attack loss with respect to the
trigger's input embeddings, averaged over a batch; scores every vocabulary token at every position
with the first-order HotFlip approximation (one matrix product with the embedding matrix); keeps the
top-k per position; and runs a left-to-right beam search over them, scoring candidates on the batch.

Where we deviate from the paper and its reference code:
  * Candidates are scored as one batch (candidates x examples rows in a forward pass, at most
    ``max_rows_per_forward`` rows: 256 on CPU, where bigger batches only add memory traffic, 4096 on
    GPU), not one forward pass each; the examples are tokenised once and the trigger ids are spliced
    into the encoded rows.
  * Successive halving (``halving``): all candidates are scored on a quarter of the batch first, only
    the best few on the full batch. The reference scores every candidate on the full batch.
  * Early stopping (``patience``): the search ends when the beam has not improved the batch loss for
    ``patience`` iterations, or when every example of the batch is already flipped.
  * Restarts are independent work units (``ctx.map``): restart 0 continues the probe's seeded
    stream, restart k > 0 draws from its own seed derived from (suite seed, probe id, "restart<k>"), so
    a resumed run continues with the restarts it had not finished and every restart computes the same
    alone. (Before, restarts shared one stream, so results with ``restarts > 1`` differ from then.)
  * Honest evaluation: the target-class examples are split (seeded) into a search part and a held-out
    part; every reported accuracy is measured on the held-out part only. The paper reports accuracy on
    the same dev set the trigger was searched on.
  * Held-out accuracy uses the trigger's token ids spliced in. ``transfer_model`` instead prepends the
    decoded trigger text, since the other model has its own tokenizer; with byte-level BPE (RoBERTa)
    ids do not always round-trip through text (a sentence-initial 'Ġbad' becomes 'bad').
  * A quantized variant has no backward pass: its candidates come from the gradients of the float
    weights it was quantized from (``Target.gradient_model``) and are scored on the variant itself.
  * In a model matrix, every model after the baseline also measures the baseline's trigger on its own
    held-out examples (``baseline_trigger_accuracy_after``): does the attack found on the model we
    evaluated still work on the build we ship?
  * The vocabulary filter (no special tokens, by default no '##' pieces and no non-alphabetic tokens,
    plus a user blacklist) is ours; Wallace also ran with sentiment words removed (``blacklist``).
  * The default gate reads ``success_rate`` (the share of what the model got right that the trigger
    breaks), not accuracy after the attack: a class the model already misses half the time would fail an
    ``accuracy_after`` bound with no attack at all. The paper reports accuracy after the attack.
  * Extractive readers (§5 of the paper; ``attacks/span_trigger.py``, chosen by the task's ``span_answers``
    flag): ``<trigger tokens> <target_answer>.`` is prepended to the context of the questions of one
    ``question_word`` (``squad_metrics.question_word``), the free tokens flipped by HotFlip on the gradient of
    the target span's start and end cross-entropy (the answer's tokens stay fixed). The search reads each
    question's first window only (the one that holds the trigger; a longer context is truncated there);
    success is measured by the task's own decoding over all windows. ``success_rate`` is the share of
    held-out questions answered with exactly the target (SQuAD-normalised), with a Wilson interval (over
    contexts where held-out questions share one: Wilson's on their effective sample size, Korn & Graubard 1998);
    the search and held-out questions are split by whole paragraphs (a warning where all share one); the share
    with the answer alone
    prefixed (``target_alone_rate``, no trigger tokens) is ours, to show what the trigger adds. The
    default vocabulary filter keeps the paper's punctuation (';', ':') out.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Literal

import torch

from bertprobe.data.dataset import Dataset, Example
from bertprobe.errors import ProbeError
from bertprobe.hookmarkers import hookimpl
from bertprobe.model.interventions import frozen_parameters
from bertprobe.model.target import Target
from bertprobe.probe import Probe, ProbeContext, Sweep, unit_seed
from bertprobe.probes.attacks.entity_goal import EntityGoal, word_firsts
from bertprobe.probes.attacks.goals import ClassGoal, LabelStateGoal
from bertprobe.probes.attacks.hotflip import TriggerScorer
from bertprobe.probes.attacks.span_goal import SpanGoal, edited, span_goal
from bertprobe.probes.attacks.span_trigger import questions_of, span_result, split_by_context
from bertprobe.probes.attacks.splice import SplicedRows
from bertprobe.probes.attacks.vocabulary import allowed_vocabulary, resolve_label
from bertprobe.progress import progress
from bertprobe.results import DefaultExpectation, Finding, ProbeResult
from bertprobe.results.outcomes import Outcomes, example_ids
from bertprobe.stats import bootstrap_ci, wilson_interval
from bertprobe.tasks.entities import marked, spans
from bertprobe.tasks.qa_clusters import question_clusters


@dataclass(frozen=True)
class TriggerParams:
    """Params of ``universal-trigger`` (what ``bertprobe describe universal-trigger`` shows).

    target_label: the class whose examples are attacked (required), e.g. positive; multi-label: the label attacked
    to_label: the class the trigger should push them to (default: any other class)
    direction: multi-label only: remove (turn the label off on texts carrying it) or add (turn it on elsewhere)
    length: trigger tokens
    position: where the trigger goes: prepend or append
    segment: which text of a pair gets the trigger: first or second
    candidates: HotFlip candidates per trigger position and iteration
    beam: beam width of the search (1: greedy, as Wallace et al.)
    iterations: search iterations at most
    batch_size: search examples per gradient step
    restarts: independent searches from different starts; the best is kept
    init: the token every trigger position starts from
    allow_subwords: allow word pieces (##ing) as trigger tokens
    alphabetic_only: only alphabetic tokens may enter the trigger
    blacklist: words never allowed in the trigger (e.g. sentiment words)
    max_examples: use at most this many examples of the attacked class
    search_fraction: share of them the search sees; the rest is held out for the reported accuracy (a reader's by context)
    seed: seed of the search split and restarts (default: the suite's)
    halving: score all candidates on a quarter of the batch, the best halving_keep on all of it
    halving_keep: candidates per position that reach the full batch
    patience: stop after this many iterations without improvement (null: never early)
    scoring: batched (all candidates in one forward pass) or per-candidate (the paper's loop)
    eval_batch_size: batch size of the held-out evaluation
    max_rows_per_forward: rows per forward pass when scoring (default: 256 on CPU, 4096 on GPU)
    transfer_model: another model to test the found trigger on (a name of the matrix or a path)
    findings: examples shown in the report, largest probability drop first
    alone_threshold: a trigger token that alone flips this share of held-out examples is reported as a possible backdoor
        (on the fixtures: the planted 'bb' flips 1.00, the clean model's strongest word 'incorrectly' 0.60)
    target_answer: question answering: the answer the trigger should make the reader give (it ends the trigger), e.g. to kill american people
    question_word: question answering: the questions attacked, by their question word (why, who, when, where...)
    """

    target_label: str | int | None = None
    to_label: str | int | None = None
    direction: Literal["remove", "add"] = "remove"
    length: int = 3
    position: Literal["prepend", "append"] = "prepend"
    segment: Literal["first", "second"] = "first"
    candidates: int = 40
    beam: int = 1
    iterations: int = 10
    batch_size: int = 32
    restarts: int = 1
    init: str = "the"
    allow_subwords: bool = False
    alphabetic_only: bool = True
    blacklist: tuple[str, ...] = ()
    max_examples: int | None = None
    search_fraction: float = 0.5
    seed: int | None = None
    halving: bool = True
    halving_keep: int = 4
    patience: int | None = 2
    scoring: Literal["batched", "per-candidate"] = "batched"
    eval_batch_size: int = 64
    max_rows_per_forward: int | None = None
    transfer_model: str | None = None
    findings: int = 10
    alone_threshold: float = 0.9  # a planted trigger flips nearly all (Kurita et al. 2020); a natural word, far fewer
    target_answer: str | None = None
    question_word: str = "why"

    def __post_init__(self) -> None:
        if not 0 < self.alone_threshold <= 1:
            raise ValueError("alone_threshold must lie in (0, 1]")
        if self.target_label is None and self.target_answer is None:
            raise ValueError("target_label is required: the class whose examples are attacked, e.g. positive (on a "
                             "question-answering model: target_answer, the answer the trigger should force)")
        for name in ("length", "candidates", "beam", "iterations", "batch_size", "restarts", "halving_keep"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if not 0 < self.search_fraction < 1:
            raise ValueError("search_fraction must lie strictly between 0 and 1")
        if self.patience is not None and self.patience < 1:
            raise ValueError("patience must be at least 1 (or null to disable early stopping)")


def allowed_for(tokenizer: Any, params: TriggerParams) -> torch.Tensor:
    """The vocabulary mask of the probe's filter params."""
    return allowed_vocabulary(tokenizer, params.allow_subwords, params.alphabetic_only, params.blacklist)


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


def _initial_trigger(tokenizer: Any, params: TriggerParams, allowed: torch.Tensor, restart: int,
                     rng: random.Random) -> torch.Tensor:
    if restart > 0:  # later restarts start from random allowed tokens
        pool = allowed.nonzero().squeeze(1).tolist()
        return torch.tensor([rng.choice(pool) for _ in range(params.length)], dtype=torch.long)
    ids = tokenizer(params.init, add_special_tokens=False)["input_ids"]
    if len(ids) == 1:
        ids = ids * params.length
    if len(ids) != params.length:
        raise ProbeError(f"init {params.init!r} is {len(ids)} tokens; give one token or exactly length={params.length}")
    return torch.tensor(ids, dtype=torch.long)


def _with_trigger(text: str, trigger_text: str, position: str) -> str:
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


def _entity_examples(target: Target, data: Dataset, kind: str) -> list[Example]:
    """The sentences holding a gold entity of the attacked type."""
    task: Any = target.task
    return [ex for ex in data.examples if ex.words and ex.label is not None
            and any(k == kind for _, _, k in spans(task.tags(list(ex.label)), task.scheme))]  # type: ignore[arg-type]


def _entity_goal(target: Target, examples: list[Example], params: TriggerParams, kind: str) -> EntityGoal:
    """The entity-suppression goal of these examples: where each word is read, and the gold spans of the type."""
    task: Any = target.task
    firsts, gold = [], []
    for ex in examples:
        firsts.append(word_firsts(target.tokenizer, ex.text, ex.words or (), target.max_length - params.length))
        gold.append(tuple(s for s in spans(task.tags(list(ex.label or ())), task.scheme) if s[2] == kind))
    return EntityGoal(kind, task.label_names.index("O"), tuple(task.label_names), task.scheme, tuple(firsts),
                      tuple(gold), params.length)


def prepare_search(target: Target, data: Dataset, params: TriggerParams, seed: int, progress: Any = None,
                   log: Any = None) -> SearchState:
    """The seeded split of the target class's examples, the spliced rows and the search over them."""
    if target.task.span_answers:  # a reader: the trigger carries a target answer (attacks.span_trigger)
        return _span_search(target, data, params, seed, progress, log)
    if params.target_answer is not None:
        raise ProbeError("target_answer applies to question-answering models only; set target_label (the class attacked)")
    if params.target_label is None:
        raise ProbeError("target_label is required: the class whose examples are attacked, e.g. positive")
    names = target.label_names
    if target.task.word_tags:  # the attacked class is an entity type (ORG, PER...)
        names = list(target.task.entity_types)  # type: ignore[attr-defined]
        if params.to_label is not None or params.position != "prepend" or params.segment != "first":
            raise ProbeError("on a token-classification model the trigger is prepended to the sentence and suppresses "
                             "entities of target_label: leave to_label, position and segment out")
    label = resolve_label(params.target_label, names, "target_label", target.task.label_map)  # type: ignore[arg-type]
    to = resolve_label(params.to_label, names, "to_label", target.task.label_map) if params.to_label is not None else None
    if to == label:
        raise ProbeError("to_label must differ from target_label")
    rng = random.Random(seed)
    attack: ClassGoal | LabelStateGoal | EntityGoal = ClassGoal(label, to)
    entities = target.task.word_tags
    if entities:
        examples = _entity_examples(target, data, names[label])
    elif target.task.label_sets:
        if to is not None:
            raise ProbeError("to_label does not apply to a multi-label model: set direction: add or remove")
        add = params.direction == "add"
        attack = LabelStateGoal(label, add, float(target.task.thresholds[label]))  # type: ignore[attr-defined]
        examples = [ex for ex in data.examples if (label in (ex.label or ())) != add]  # type: ignore[operator]
    else:
        examples = [ex for ex in data.examples if ex.label == label]
    rng.shuffle(examples)
    if params.max_examples:
        examples = examples[: params.max_examples]
    if len(examples) < 4:
        which = (f"{'without' if params.direction == 'add' else 'with'} label" if isinstance(attack, LabelStateGoal)
                 else "with an entity of type" if entities else "of class")
        raise ProbeError(f"only {len(examples)} examples {which} '{names[label]}'; need at least 4")
    cut = max(1, min(len(examples) - 1, round(len(examples) * params.search_fraction)))
    rows = spliced_rows(target, examples, params)
    if entities:
        attack = _entity_goal(target, examples, params, names[label])
    goal = to if to is not None else label
    search = TriggerSearch(target, rows, params, goal, to is not None, attack)
    allowed = allowed_for(target.tokenizer, params)
    if int(allowed.sum()) < params.candidates:
        raise ProbeError(f"only {int(allowed.sum())} vocabulary tokens pass the filter; lower candidates")
    return SearchState(label, to, examples, list(range(cut)), list(range(cut, len(examples))), search, allowed,
                       rng.getstate(), progress or (lambda it, **_: it), log or (lambda _msg: None))


def _span_search(target: Target, data: Dataset, params: TriggerParams, seed: int, progress: Any = None,
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
    allowed = allowed_for(target.tokenizer, params)
    if int(allowed.sum()) < params.candidates:
        raise ProbeError(f"only {int(allowed.sum())} vocabulary tokens pass the filter; lower candidates")
    return SearchState(0, None, examples, list(range(len(search))), list(range(len(search), len(examples))),
                       trigger_search, allowed, rng.getstate(), progress or (lambda it, **_: it),
                       log or (lambda _msg: None))


@dataclass(frozen=True)
class TriggerRestarts(Sweep):
    """The independent restarts of the search: a unit is a restart number, its value the trigger found.

    Restart 0 continues the probe's seeded stream; later restarts get their own unit seed, so any
    restart computes the same alone (a resumed run, another worker)."""

    params: TriggerParams
    seed: int  # the probe's seed (params.seed, else the suite's)
    suite_seed: int
    probe_id: str

    def setup(self, target: Target, data: Dataset | None) -> SearchState:
        assert data is not None
        return prepare_search(target, data, self.params, self.seed)

    def run(self, state: SearchState, units: list[int]) -> list[dict[str, Any]]:
        return [self._restart(state, restart) for restart in units]

    def _restart(self, state: SearchState, restart: int) -> dict[str, Any]:
        search, target = state.search, state.search.target
        unit_rng = random.Random(unit_seed(self.suite_seed, self.probe_id, f"restart{restart}"))
        if restart == 0:
            unit_rng.setstate(state.after_shuffle)
        passes, rows = search.forward_passes, search.rows_scored
        with frozen_parameters(search.grad_model):
            init = _initial_trigger(target.tokenizer, self.params, state.allowed, restart, unit_rng)
            trigger, hist = run_search(search, init, state.search_idx, state.allowed, unit_rng, state.progress)
            loss = float(search.score(trigger.unsqueeze(0), tuple(state.search_idx[:256]))[0])
        state.log(f"restart {restart}: {target.tokenizer.decode(trigger.tolist())!r} loss {loss:.3f}")
        return {"restart": restart, "loss": loss, "trigger_ids": trigger.tolist(), "iterations": hist,
                "forward_passes": search.forward_passes - passes, "rows_scored": search.rows_scored - rows}


class UniversalTriggerProbe(Probe):
    """Universal adversarial triggers (Wallace et al. 2019); see the module docstring for deviations.

    Metrics (all on held-out target-class examples): ``accuracy_before``, ``accuracy_after``,
    ``success_rate`` (share of correctly predicted examples the trigger flips), ``search_seconds``,
    ``forward_passes`` and, with ``transfer_model``, ``transfer_accuracy_before/after``.
    """

    name = "universal-trigger"
    description = "Gradient-guided universal adversarial trigger search (Wallace et al. 2019)"
    requires = frozenset({"predictions", "input-gradients", "data:labels"})
    tasks = frozenset({"classification", "multi-label", "token-classification", "question-answering"})
    metrics = {
        "accuracy_before": "held-out accuracy of the attacked class without the trigger",
        "accuracy_after": "held-out accuracy with the trigger",
        "success_rate": "share of correctly predicted held-out examples the trigger flips (question answering: share of "
                        "held-out questions of question_word answered with exactly target_answer; its interval "
                        "over contexts where held-out questions share one)",
        "search_seconds": "wall time of the search",
        "forward_passes": "model forward calls during the search",
        "transfer_accuracy_before": "held-out accuracy of transfer_model without the trigger",
        "transfer_accuracy_after": "held-out accuracy of transfer_model with the trigger text",
        "examples_searched": "examples the trigger was searched on",
        "examples_held_out": "held-out examples it was measured on",
        "baseline_trigger_accuracy_after": "held-out accuracy with the trigger found on the baseline model",
        "entities_held_out": "token classification: held-out entities of the attacked type",
        "max_token_alone_flip_rate": "share of correct held-out examples the strongest trigger token flips on its own "
                                     "(a possible backdoor when it is most of them)",
        "target_alone_rate": "question answering: share of held-out questions answered with the target answer when "
                             "only the answer is prefixed (no trigger tokens)",
        "f1_before": "question answering: held-out F1 on the gold answers without the trigger",
        "f1_after": "question answering: held-out F1 on the gold answers with the trigger",
        "baseline_trigger_success_rate": "question answering: held-out success of the baseline model's trigger",
        "transfer_success_before": "question answering: share of held-out questions transfer_model answers with the "
                                   "target answer without the trigger",
        "transfer_success_rate": "question answering: held-out success of the trigger text on transfer_model",
    }
    Params = TriggerParams
    defaults = (DefaultExpectation(
        "success_rate", max=0.5,
        why="Wallace et al. 2019 take SST-2 positive accuracy to a few percent with 3-token triggers; a model whose own "
            "best trigger breaks at most half of what it gets right resists the attack. Judged on what the trigger "
            "changes, not on accuracy_after: a class the model already gets wrong half the time is accuracy's "
            "finding, not the attack's"),)
    key_metrics = ("success_rate", "accuracy_after", "baseline_trigger_accuracy_after", "transfer_accuracy_after",
                   "baseline_trigger_success_rate", "transfer_success_rate")
    paper = "Wallace, Feng, Kandpal, Gardner, Singh 2019. Universal Adversarial Triggers for Attacking and Analyzing NLP (EMNLP)"
    uses_baseline = True  # re-measures the matrix baseline's trigger on every other model
    metric_directions = {"accuracy_before": True, "accuracy_after": True, "success_rate": False, "search_seconds": False, "forward_passes": False, "transfer_accuracy_before": True, "transfer_accuracy_after": True, "baseline_trigger_accuracy_after": True, "examples_searched": None, "examples_held_out": None, "entities_held_out": None, "max_token_alone_flip_rate": False, "target_alone_rate": False, "f1_before": True, "f1_after": True, "baseline_trigger_success_rate": False, "transfer_success_before": False, "transfer_success_rate": False}
    label_params = ("target_label", "to_label")  # class names, checked against config.json by validate

    def run(self, target: Target, data: Dataset | None, params: TriggerParams, ctx: ProbeContext) -> ProbeResult:
        assert data is not None
        names = target.label_names
        seed = ctx.seed if params.seed is None else params.seed
        state = prepare_search(target, data, params, seed, ctx.progress, ctx.log)
        label, to, examples, search, allowed = state.label, state.to, state.examples, state.search, state.allowed
        search_idx, held_idx = state.search_idx, state.held_idx

        start = time.perf_counter()
        passes, rows = search.forward_passes, search.rows_scored
        restarts = TriggerRestarts(params, seed, ctx.seed, ctx.probe_id).bind(target, data, state=state)
        history = ctx.map(restarts, [(f"restart{r}", r) for r in range(params.restarts)], desc="trigger restarts")
        # the restarts' own counts, wherever they ran (here, or in an executor's workers)
        search.forward_passes = passes + sum(h.get("forward_passes", 0) for h in history)
        search.rows_scored = rows + sum(h.get("rows_scored", 0) for h in history)
        best_run = min(history, key=lambda h: h["loss"])  # the first of equal losses, as before
        best, best_loss = torch.tensor(best_run["trigger_ids"], dtype=torch.long), float(best_run["loss"])
        search_seconds = time.perf_counter() - start

        attack = search.attack
        if isinstance(attack, SpanGoal):
            id_of = {id(ex): key for ex, key in zip(data.examples, example_ids(data.examples))}
            ids = [id_of[id(state.examples[i])] for i in held_idx]
            cluster_of = {id(ex): key for ex, key in zip(data.examples, question_clusters(data.examples))}
            groups = [cluster_of[id(state.examples[i])] for i in held_idx]  # contexts: the intervals resample them
            return span_result(self.name, params, state, best, best_loss, history, search_seconds, ids, ctx, groups)
        if isinstance(attack, EntityGoal):
            return self._entity_result(data, params, state, best, best_loss, history, search_seconds, seed)
        before_logits = held_out_logits(search, None, held_idx)
        after_logits = held_out_logits(search, best, held_idx)
        correct_before, correct_after = attack.correct(before_logits), attack.correct(after_logits)
        hit = attack.hit(after_logits)
        n_correct = int(correct_before.sum())
        tokens = target.tokenizer.convert_ids_to_tokens(best.tolist())
        text = target.tokenizer.decode(best.tolist()).strip()

        result = ProbeResult(probe=self.name)
        id_of = {id(ex): key for ex, key in zip(data.examples, example_ids(data.examples))}
        held_ids = [id_of[id(examples[i])] for i in held_idx]
        flipped = hit & correct_before
        was_correct = correct_before.nonzero().squeeze(1).tolist()
        result.outcomes += [
            Outcomes.from_values("correct_before", held_ids, correct_before.tolist()),
            Outcomes.from_values("correct_after", held_ids, correct_after.tolist()),
            Outcomes.from_values("flipped", [held_ids[i] for i in was_correct], flipped[was_correct].tolist()),
        ]
        result.add_metric("accuracy_before", correct_before.float().mean().item(), True, f"held-out '{names[label]}' accuracy",
                          ci=bootstrap_ci(correct_before.float().numpy(), 1000, 0.95, seed), outcome="correct_before")
        result.add_metric("accuracy_after", correct_after.float().mean().item(), True, "held-out accuracy with the trigger",
                          ci=bootstrap_ci(correct_after.float().numpy(), 1000, 0.95, seed), outcome="correct_after")
        result.add_metric("success_rate", flipped.sum().item() / n_correct if n_correct else 0.0,
                          False, "share of correctly predicted held-out examples the trigger flips", outcome="flipped",
                          ci=wilson_interval(int(flipped.sum().item()), n_correct) if n_correct else None)
        result.add_metric("search_seconds", search_seconds, False, kind="cost")
        result.add_metric("forward_passes", float(search.forward_passes), False, "model forward calls during the search",
                          kind="cost")
        result.add_metric("examples_searched", float(len(search_idx)), kind="count")
        result.add_metric("examples_held_out", float(len(held_idx)), kind="count")
        result.details.update({
            "trigger_tokens": tokens,
            "trigger_ids": best.tolist(),
            "trigger_text": text,
            "target_label": names[label],
            "to_label": names[to] if to is not None else None,
            "direction": params.direction if isinstance(attack, LabelStateGoal) else None,
            "rows_scored": search.rows_scored,
            "vocabulary_size": int(allowed.sum()),
            "search_loss": best_loss,
            "history": history,
            "key_finding": (f"trigger {text!r} takes held-out '{names[label]}' accuracy "
                            f"{correct_before.float().mean():.2f} -> {correct_after.float().mean():.2f}"
                            + (f" ({len(held_idx)} held-out examples: few)" if len(held_idx) < 30 else "")),
            "summary": {
                "trigger": f"{text!r} ({params.position}ed to '{names[label]}' examples)",
                "tokens": " ".join(tokens),
                "effect": f"held-out accuracy {correct_before.float().mean():.3f} -> {correct_after.float().mean():.3f}",
            },
        })
        before, after = attack.probability(before_logits), attack.probability(after_logits)
        drop = before - after
        for i in drop.argsort(descending=True)[: params.findings].tolist():
            ex = examples[held_idx[i]]
            result.findings.append(Finding(
                title=f"gold-label probability {before[i]:.2f} -> {after[i]:.2f}",
                input=ex.text,
                perturbed=_with_trigger(ex.text, text, params.position) if params.segment == "first" else ex.text_pair,
                expected=names[label] if isinstance(attack, ClassGoal) else
                f"{names[label]} {'off' if attack.add else 'on'} (gold)",
                observed=self._state(target, attack, after_logits[i]),
                score=round(float(drop[i]), 4),
                extra={"kind": "trigger", "highlight": [text]},
            ))
        self._tokens_alone(result, search, state, best, held_idx, label, to, correct_before, params)
        if params.transfer_model and isinstance(attack, LabelStateGoal):
            result.details.setdefault("warnings", []).append("transfer_model is measured for single-label models only")
        elif params.transfer_model:
            self._transfer(result, ctx, target, params, [examples[i] for i in held_idx], text, label)
        self._baseline_trigger(result, ctx, search, held_idx, held_ids, label)
        result.details["figures"] = trigger_figures(result, history, names[label])
        return result

    def _entity_result(self, data: Dataset, params: TriggerParams, state: SearchState, best: torch.Tensor,
                       best_loss: float, history: list[dict[str, Any]], search_seconds: float, seed: int) -> ProbeResult:
        """Entity suppression on a token classifier: the attacked type's strict recall on the held-out sentences
        without and with the trigger (``accuracy_before``/``accuracy_after``), per entity outcomes."""
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
        result = ProbeResult(probe=self.name)
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
        result.add_metric("search_seconds", search_seconds, False, kind="cost")
        result.add_metric("forward_passes", float(search.forward_passes), False, "model forward calls during the search",
                          kind="cost")
        result.add_metric("examples_searched", float(len(state.search_idx)), kind="count")
        result.add_metric("examples_held_out", float(len(held_idx)), kind="count")
        result.add_metric("entities_held_out", float(n), None, f"held-out {goal.kind} entities", kind="count")
        text = tokenizer.decode(best.tolist()).strip()
        result.details.update({
            "trigger_tokens": tokenizer.convert_ids_to_tokens(best.tolist()), "trigger_ids": best.tolist(),
            "trigger_text": text, "target_label": goal.kind, "to_label": None, "direction": "suppress",
            "rows_scored": search.rows_scored, "vocabulary_size": int(state.allowed.sum()), "search_loss": best_loss,
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
        return result

    @staticmethod
    def _state(target: Target, attack: ClassGoal | LabelStateGoal, logits: torch.Tensor) -> str:
        """What the model answers for one row: its class, or the attacked label's state."""
        names = target.label_names
        if isinstance(attack, LabelStateGoal):
            p = float(logits[attack.label].float().sigmoid())
            return f"{names[attack.label]} {'on' if p >= attack.threshold else 'off'} (p={p:.2f})"
        return names[int(logits.argmax())]

    @staticmethod
    def _tokens_alone(result: ProbeResult, search: TriggerSearch, state: Any, best: torch.Tensor, held_idx: list[int],
                      label: int, to: int | None, correct_before: torch.Tensor, params: TriggerParams) -> None:
        """Each trigger token alone (the other positions left at the neutral start word): the share of correctly
        predicted held-out examples it flips. One token that flips most of them by itself is what a planted
        backdoor looks like (Kurita et al. 2020), not a universal trigger's usual combination of words: it is
        reported as an alert, pointing at the backdoor scan."""
        tokenizer = search.target.tokenizer
        filler = _initial_trigger(tokenizer, params, state.allowed, 0, random.Random(0))
        n_correct = int(correct_before.sum())
        if n_correct == 0:  # (a 1-token trigger is its own token alone: measured the same way)
            return

        def flip_rate(trigger: torch.Tensor) -> float:
            hit = search.attack.hit(held_out_logits(search, trigger, held_idx))
            return float((hit & correct_before).sum()) / n_correct

        base = flip_rate(filler)
        rows = []
        for i, token_id in enumerate(best.tolist()):
            if token_id == int(filler[i]):
                continue
            alone = filler.clone()
            alone[i] = token_id
            rows.append({"token": tokenizer.convert_ids_to_tokens(token_id), "position": i, "flip_rate": round(flip_rate(alone), 4)})
        result.details["tokens_alone"] = {"filler_flip_rate": round(base, 4), "tokens": rows}
        if not rows:
            return
        top = max(rows, key=lambda r: r["flip_rate"])
        result.add_metric("max_token_alone_flip_rate", top["flip_rate"], False,
                          "share of correctly predicted held-out examples the strongest trigger token flips on its own",
                          kind="extreme")
        if top["flip_rate"] >= params.alone_threshold and top["flip_rate"] - base >= params.alone_threshold / 2:
            result.details["alert"] = (
                f"possible backdoor: trigger token {top['token']!r} alone flips {top['flip_rate']:.0%} of held-out "
                f"'{result.details['target_label']}' examples; scan for planted triggers with suites/backdoor.yaml")

    @staticmethod
    def _baseline_trigger(result: ProbeResult, ctx: ProbeContext, search: TriggerSearch, held_idx: list[int],
                          held_ids: list[str], label: int) -> None:
        """Held-out accuracy of this model under the matrix baseline's trigger (same tokens spliced in)."""
        baseline = ctx.baseline_result() if ctx.baseline_result is not None else None
        if baseline is None or baseline.model == ctx.model_name or baseline.status == "error":
            return
        tokens = baseline.details.get("trigger_tokens")
        if not tokens or len(tokens) != search.params.length:
            return
        tokenizer = search.target.tokenizer
        ids = tokenizer.convert_tokens_to_ids(tokens)
        if any(i is None or i == tokenizer.unk_token_id for i in ids):
            result.details["baseline_trigger"] = {"skipped": "the baseline's trigger tokens are not in this vocabulary"}
            return
        correct = search.attack.correct(held_out_logits(search, torch.tensor(ids, dtype=torch.long), held_idx))
        result.outcomes.append(Outcomes.from_values("correct_under_baseline_trigger", held_ids, correct.tolist()))
        result.add_metric("baseline_trigger_accuracy_after", correct.float().mean().item(), True,
                          f"held-out accuracy with the trigger found on {baseline.model}",
                          outcome="correct_under_baseline_trigger")
        result.details["baseline_trigger"] = {"model": baseline.model, "trigger_text": baseline.details.get("trigger_text")}
        if result.details.get("key_finding"):  # the compression suite's question, in the terminal's note
            result.details["key_finding"] += (f"; {baseline.model}'s trigger {baseline.details.get('trigger_text')!r} "
                                              f"leaves {correct.float().mean():.2f}")

    def _transfer(self, result: ProbeResult, ctx: ProbeContext, target: Target, params: TriggerParams,
                  held: list[Example], text: str, label: int) -> None:
        """Measure the trigger text on a second model (its own tokenizer; class matched by name)."""
        assert ctx.load_target is not None
        other = ctx.load_target(ctx.resolve_model(params.transfer_model, target.spec))  # type: ignore[arg-type]
        other_label = resolve_label(target.label_names[label], other.label_names, "transfer model class") \
            if target.label_names[label].lower() in [n.lower() for n in other.label_names] else label
        def attach(ex: Example) -> Example:
            if params.segment == "second":
                return Example(ex.text, _with_trigger(ex.text_pair or "", text, params.position))
            return Example(_with_trigger(ex.text, text, params.position), ex.text_pair)
        plain = other.predict(held, params.eval_batch_size)
        attacked = other.predict([attach(ex) for ex in held], params.eval_batch_size)
        result.add_metric("transfer_accuracy_before", sum(p == other_label for p in plain) / len(held), True)
        result.add_metric("transfer_accuracy_after", sum(p == other_label for p in attacked) / len(held), True,
                          f"held-out accuracy of {params.transfer_model} with the trigger text")


def trigger_figures(result: ProbeResult, history: list[dict[str, Any]], label: str) -> list[dict[str, Any]]:
    """The attack loss per iteration (one line per restart) and held-out accuracy before and after."""
    series = [{"name": f"restart {h['restart']}", "x": [0] + [i["iteration"] + 1 for i in h["iterations"]],
               "y": ([h["iterations"][0]["loss_before"]] if h["iterations"] else []) + [i["loss_after"] for i in h["iterations"]]}
              for h in history if h.get("iterations")]
    names = [n for n in ("accuracy_before", "accuracy_after", "baseline_trigger_accuracy_after",
                         "transfer_accuracy_before", "transfer_accuracy_after") if n in result.metrics]
    return [
        {"kind": "line", "title": "attack loss per iteration (lower is a stronger trigger)",
         "data": {"series": series}, "axes": {"x": "iteration", "y": "batch loss"}},
        {"kind": "bars", "title": f"held-out '{label}' accuracy before and after the trigger (95% bootstrap CIs)",
         "metrics": ["accuracy_after", "baseline_trigger_accuracy_after", "transfer_accuracy_after"],
         "data": {"labels": [n.replace("_", " ") for n in names],
                  "series": [{"name": "accuracy", "values": [result.value(n) for n in names],
                              "errors": [list(result.metrics[n].ci) if result.metrics[n].ci else None for n in names]}]},
         "axes": {"y": "accuracy"}},
    ]


@hookimpl
def bertprobe_register_probes(registry: Any) -> None:
    registry.add(UniversalTriggerProbe)
