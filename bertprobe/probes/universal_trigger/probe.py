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
  * Extractive readers (§5 of the paper; the ``answers`` section with ``attacks/span_trigger.py``):
    ``<trigger tokens> <target_answer>.`` is prepended to the context of the questions of one
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
  * Bi-encoders (the ``retrieval`` section, its own deviations in its docstring): corpus poisoning after Zhong et
    al. 2023 (HotFlip on a passage's tokens toward the attack queries; success: held-out queries whose top-10 over
    the poisoned corpus holds it) and a query trigger that pulls one document into held-out queries' top-10.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from bertprobe.data.dataset import Dataset, Example
from bertprobe.hookmarkers import hookimpl
from bertprobe.model.interventions import frozen_parameters
from bertprobe.model.target import Target
from bertprobe.probe import Probe, ProbeContext, Sweep, unit_seed
from bertprobe.probes.attacks.goals import ClassGoal, LabelStateGoal
from bertprobe.probes.attacks.vocabulary import resolve_label
from bertprobe.probes.universal_trigger import answers, entities, labelsets, retrieval
from bertprobe.probes.universal_trigger.figures import trigger_figures
from bertprobe.probes.universal_trigger.params import TriggerParams
from bertprobe.probes.universal_trigger.search import (
    Found,
    SearchState,
    TriggerSearch,
    class_search,
    held_out_logits,
    initial_trigger,
    run_search,
    with_trigger,
)
from bertprobe.results import DefaultExpectation, Finding, ProbeResult
from bertprobe.results.outcomes import Outcomes, example_ids
from bertprobe.stats import bootstrap_ci, wilson_interval


def prepare_search(target: Target, data: Dataset, params: TriggerParams, seed: int, progress: Any = None,
                   log: Any = None, lookup: Callable[[str, Any], Any] | None = None) -> SearchState:
    """The seeded split of the attacked examples, the spliced rows and the search over them: the section of
    ``universal-trigger`` that ``lookup`` (a run's ``ProbeContext.section``; None: the built-in sections, as in a
    worker that rebuilds the restarts' state) finds for the model's task builds it, else the class goal's
    (``search.class_search``)."""
    section = (lookup or ProbeContext().section)(UniversalTriggerProbe.name, target.task)
    build = class_search if section is None else section.search_state
    return build(target, data, params, seed, progress, log)


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
            init = initial_trigger(target.tokenizer, self.params, state.allowed, restart, unit_rng)
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

    Its sections (``bertprobe.sections``; built in: ``labelsets``, ``entities``, ``answers``, ``retrieval``) hold
    ``search_state(target, data, params, seed, progress, log) -> search.SearchState`` (the attacked examples and the
    goal; rebuilt alike in a worker that runs restarts) and optionally ``audit(result, target, data, params, ctx,
    found)`` (``search.Found``: the best trigger); a section without ``audit``, or no section (a classifier), is
    reported by the probe's own code. A section whose attacks are not one trigger search (``retrieval``: a poisoned
    passage and a query trigger) holds ``run(result, target, data, params, ctx)`` instead, which fills ``result``.
    """

    name = "universal-trigger"
    description = "Gradient-guided universal adversarial trigger search (Wallace et al. 2019)"
    requires = frozenset({"predictions", "input-gradients", "data:labels"})
    tasks = frozenset({"classification", "multi-label", "token-classification", "question-answering",
                       "sentence-embedding", "reranker"})  # a reranker is skipped, with the reason (retrieval)
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
        section = ctx.section(self.name, target.task)  # None: a classifier's (the class goal)
        own_run = getattr(section, "run", None)
        if own_run is not None:  # a section whose attacks are not one trigger search (a bi-encoder's: retrieval)
            result = ProbeResult(probe=self.name)
            own_run(result, target, data, params, ctx)
            return result
        assert data is not None
        seed = ctx.seed if params.seed is None else params.seed
        state = prepare_search(target, data, params, seed, ctx.progress, ctx.log, ctx.section)
        search = state.search

        start = time.perf_counter()
        passes, rows = search.forward_passes, search.rows_scored
        restarts = TriggerRestarts(params, seed, ctx.seed, ctx.probe_id).bind(target, data, state=state)
        history = ctx.map(restarts, [(f"restart{r}", r) for r in range(params.restarts)], desc="trigger restarts")
        # the restarts' own counts, wherever they ran (here, or in an executor's workers)
        search.forward_passes = passes + sum(h.get("forward_passes", 0) for h in history)
        search.rows_scored = rows + sum(h.get("rows_scored", 0) for h in history)
        best_run = min(history, key=lambda h: h["loss"])  # the first of equal losses, as before
        best, best_loss = torch.tensor(best_run["trigger_ids"], dtype=torch.long), float(best_run["loss"])
        found = Found(state, best, best_loss, history, time.perf_counter() - start)

        result = ProbeResult(probe=self.name)
        audit = getattr(section, "audit", None) or self._audit  # a section without one: the probe's own report
        audit(result, target, data, params, ctx, found)
        return result

    def _audit(self, result: ProbeResult, target: Target, data: Dataset, params: TriggerParams, ctx: ProbeContext,
               found: Found) -> None:
        """A classifier's (a class pushed to another) or a multi-label model's (a label turned off or on): held-out
        accuracy before and after the trigger, the share it flips, findings, each token alone, the matrix
        baseline's trigger and ``transfer_model``."""
        names = target.label_names
        seed = ctx.seed if params.seed is None else params.seed
        state, best, best_loss, history = found.state, found.trigger, found.loss, found.history
        label, to, examples, search, allowed = state.label, state.to, state.examples, state.search, state.allowed
        search_idx, held_idx = state.search_idx, state.held_idx
        attack = search.attack
        before_logits = held_out_logits(search, None, held_idx)
        after_logits = held_out_logits(search, best, held_idx)
        correct_before, correct_after = attack.correct(before_logits), attack.correct(after_logits)
        hit = attack.hit(after_logits)
        n_correct = int(correct_before.sum())
        tokens = target.tokenizer.convert_ids_to_tokens(best.tolist())
        text = target.tokenizer.decode(best.tolist()).strip()

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
        result.add_metric("search_seconds", found.seconds, False, kind="cost")
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
                perturbed=with_trigger(ex.text, text, params.position) if params.segment == "first" else ex.text_pair,
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
        filler = initial_trigger(tokenizer, params, state.allowed, 0, random.Random(0))
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
                return Example(ex.text, with_trigger(ex.text_pair or "", text, params.position))
            return Example(with_trigger(ex.text, text, params.position), ex.text_pair)
        plain = other.predict(held, params.eval_batch_size)
        attacked = other.predict([attach(ex) for ex in held], params.eval_batch_size)
        result.add_metric("transfer_accuracy_before", sum(p == other_label for p in plain) / len(held), True)
        result.add_metric("transfer_accuracy_after", sum(p == other_label for p in attacked) / len(held), True,
                          f"held-out accuracy of {params.transfer_model} with the trigger text")


@hookimpl
def bertprobe_register_probes(registry: Any) -> None:
    registry.add(UniversalTriggerProbe)


@hookimpl
def bertprobe_register_sections(registry: Any) -> None:
    registry.add(UniversalTriggerProbe.name, labelsets, when="label_sets")
    registry.add(UniversalTriggerProbe.name, entities, when="word_tags")
    registry.add(UniversalTriggerProbe.name, answers, when="span_answers")
    registry.add(UniversalTriggerProbe.name, retrieval, when="ranks_texts")
