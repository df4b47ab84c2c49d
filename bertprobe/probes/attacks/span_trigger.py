"""Universal triggers on an extractive reader (Wallace et al. 2019, §5): the questions of one type, the
held-out measurement and the result.

The trigger ``<free tokens> <target answer>.`` is prepended to the context of every question of one type
(``question_word``: why, who, when, where, as ``squad_metrics.question_word`` reads it). The search
(``universal_trigger.answers``) flips the free tokens with HotFlip on the gradient of the target span's start and end
log-likelihood (``span_goal.SpanGoal``) over each question's first window. The reported success is measured on
held-out questions of the type by the task's own decoding (``task.answers``: all windows of the edited
context; split from the searched ones by context, so no held-out question shares a paragraph with a searched
one): the share answered with exactly the target answer (SQuAD-normalised), with its Wilson interval over
questions, or where held-out questions share a context, Wilson's on the questions' effective sample size over
their contexts (``stats.clustered_wilson``, Korn & Graubard 1998); the outcomes carry each question's
context key, so a paired gate or ``compare`` resamples contexts too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bertprobe.data.dataset import Example
from bertprobe.errors import ProbeError
from bertprobe.probes.attacks.span_goal import edited, is_target
from bertprobe.results import Finding, ProbeResult
from bertprobe.results.outcomes import Outcomes
from bertprobe.stats import clustered, clustered_wilson
from bertprobe.tasks.qa_clusters import cluster_keys, interval_over, question_clusters
from bertprobe.tasks.squad_metrics import QUESTION_WORDS, question_word, score


def questions_of(examples: Sequence[Example], word: str) -> list[Example]:
    """The labelled questions whose question word is ``word`` (``squad_metrics.question_word``)."""
    if word not in QUESTION_WORDS:
        raise ProbeError(f"question_word {word!r} is not one of {', '.join(QUESTION_WORDS)}")
    return [ex for ex in examples if ex.label is not None and question_word(ex.text) == word]


def split_by_context(examples: Sequence[Example], cut: int) -> tuple[list[Example], list[Example]]:
    """The search and held-out questions: whole contexts (``qa_clusters.question_clusters``) in the order they
    first appear, to the search until it holds ``cut`` questions, the rest held out, so that no held-out question
    shares its paragraph with a searched one (its answer is no independent evidence then). The last context is
    always held out, so with two contexts or more both parts hold whole paragraphs (the cut moves to a context's
    edge). With one question per context, ``examples[:cut]`` and ``examples[cut:]`` (``cut`` below their number).
    Only where every question asks about one paragraph is it split at ``cut``: ``span_result`` warns then."""
    members: dict[str, list[Example]] = {}
    for ex, key in zip(examples, question_clusters(examples)):
        members.setdefault(key, []).append(ex)
    groups = list(members.values())
    if len(groups) < 2:
        return list(examples[:cut]), list(examples[cut:])
    search: list[Example] = []
    held: list[Example] = []
    for k, group in enumerate(groups):
        # a context goes to the search while that brings it closer to ``cut`` (the first always), never the last
        closer = not search or abs(len(search) + len(group) - cut) < abs(len(search) - cut)
        (search if not held and closer and k < len(groups) - 1 else held).extend(group)
    return search, held


def shared_paragraphs(examples: Sequence[Example], search_idx: Sequence[int], held_idx: Sequence[int]) -> int:
    """How many paragraphs (``qa_clusters.question_clusters``) both searched and held-out questions ask about."""
    keys = question_clusters(examples)
    return len({keys[i] for i in search_idx} & {keys[i] for i in held_idx})


def answered(task: Any, target: Any, examples: Sequence[Example], answer: str, trigger_text: str | None,
             batch_size: int | None = None, progress: Any = None) -> tuple[list[Any], list[Example]]:
    """The task's answers to ``examples`` with ``<trigger_text> <answer>. `` prefixed to each context (None: the
    plain examples), and the examples as asked (golds moved with the edit)."""
    asked = list(examples) if trigger_text is None else [edited(ex, answer, trigger_text) for ex in examples]
    return task.answers(target, asked, batch_size, progress), asked


def success(answers: Sequence[Any], answer: str) -> list[bool]:
    """Per question: answered with exactly the target ``answer`` (SQuAD-normalised)."""
    return [is_target(a.text, answer) for a in answers]


def rate_metric(result: ProbeResult, name: str, hits: Sequence[bool], description: str, outcome: str | None = None,
                higher_is_better: bool | None = False, groups: Sequence[str] | None = None, seed: int = 0) -> None:
    """A share of questions with its interval: Wilson's over questions, or with ``groups`` (each question's
    context) where two share one, over contexts (``stats.clustered_wilson``: Wilson's on the questions'
    effective sample size, Korn & Graubard 1998). ``seed`` is kept for callers: the interval draws nothing."""
    n = len(hits)
    values = [float(h) for h in hits]
    if n and clustered(groups):
        description += f" ({interval_over(values, groups)})"
    result.add_metric(name, sum(hits) / n if n else 0.0, higher_is_better, description,
                      ci=clustered_wilson(values, groups, 0.95) if n else None, outcome=outcome)


def span_result(result: ProbeResult, params: Any, state: Any, best: Any, best_loss: float,
                history: list[dict[str, Any]], search_seconds: float, ids: Sequence[str], ctx: Any,
                groups: Sequence[str] | None = None) -> ProbeResult:
    """Held-out success of the trigger on a reader, written into ``result`` (returned): the share of questions of
    the type answered with exactly the target answer, with and without the free trigger tokens (the answer alone
    prefixed), F1 on their gold answers before and after, the matrix baseline's trigger, ``transfer_model``,
    findings. ``groups``: each held-out question's context (``qa_clusters.question_clusters`` over the whole data;
    by default over the held-out questions), which the intervals resample and the outcomes carry."""
    search, examples, held_idx = state.search, state.examples, state.held_idx
    target = search.target
    task, answer = target.task, params.target_answer
    tokenizer = target.tokenizer
    text = tokenizer.decode(best.tolist()).strip()
    held = [examples[i] for i in held_idx]
    size = params.eval_batch_size
    plain, _ = answered(task, target, held, answer, None, size, state.progress)
    alone, _ = answered(task, target, held, answer, "", size, state.progress)
    after, asked = answered(task, target, held, answer, text, size, state.progress)
    golds = task.golds(held)
    f1_before = [score(a.text, g)[1] for a, g in zip(plain, golds)]
    f1_after = [score(a.text, g)[1] for a, g in zip(after, golds)]
    hits, hits_alone = success(after, answer), success(alone, answer)
    n = len(held)
    groups = list(groups) if groups is not None else question_clusters(held)
    keys, seed = cluster_keys(groups), ctx.seed  # a paired gate or compare resamples contexts too
    result.outcomes += [
        Outcomes.from_values("target_answered", ids, hits, groups=keys),
        Outcomes.from_values("target_answered_alone", ids, hits_alone, groups=keys),
        Outcomes.from_values("f1_before", ids, f1_before, "score", keys),
        Outcomes.from_values("f1_after", ids, f1_after, "score", keys),
    ]
    word = params.question_word
    rate_metric(result, "success_rate", hits, f"share of held-out '{word}' questions answered {answer!r} with the trigger",
                "target_answered", groups=groups, seed=seed)
    rate_metric(result, "target_alone_rate", hits_alone, f"share answered {answer!r} with only '{answer}.' prefixed "
                "(no trigger tokens)", "target_answered_alone", groups=groups, seed=seed)
    result.add_metric("f1_before", sum(f1_before) / n, True, f"held-out '{word}' F1 on the gold answers", outcome="f1_before")
    result.add_metric("f1_after", sum(f1_after) / n, True, "the same with the trigger", outcome="f1_after")
    result.add_metric("search_seconds", search_seconds, False, kind="cost")
    result.add_metric("forward_passes", float(search.forward_passes), False, "model forward calls during the search",
                      kind="cost")
    result.add_metric("examples_searched", float(len(state.search_idx)), kind="count")
    result.add_metric("examples_held_out", float(n), kind="count")
    rate = sum(hits) / n
    result.details.update({
        "trigger_tokens": tokenizer.convert_ids_to_tokens(best.tolist()), "trigger_ids": best.tolist(),
        "trigger_text": text, "target_answer": answer, "inserted": f"{text} {answer}.".strip(),
        "question_word": word, "target_label": word, "to_label": None, "direction": "target span",
        "rows_scored": search.rows_scored, "vocabulary_size": int(state.allowed.sum()), "search_loss": best_loss,
        "history": history,
        "windows": "the search reads each question's first window (the one holding the trigger); success is "
                   "decoded over all windows",
        "key_finding": (f"trigger '{text} {answer}.' makes {rate:.0%} of {n} held-out '{word}' questions answer "
                        f"{answer!r} ({sum(hits_alone) / n:.0%} with the answer alone)" + (" (few questions)" if n < 30 else "")),
        "summary": {"trigger": f"'{text} {answer}.' (prepended to the contexts of '{word}' questions)",
                    "effect": f"{sum(hits)} of {n} held-out '{word}' questions answered {answer!r}"},
    })
    shown = sorted((i for i in range(n) if hits[i]), key=lambda i: (-(f1_before[i] - f1_after[i]), i))[: params.findings]
    for i in shown:
        ex = asked[i]
        result.findings.append(Finding(
            title=f"answered {after[i].text!r} instead of {plain[i].text!r}", input=f"{held[i].text} | {held[i].text_pair}",
            perturbed=f"{ex.text} | {ex.text_pair}", expected=" / ".join(dict.fromkeys(golds[i])) or "(no answer)",
            observed=after[i].text, score=round(f1_before[i] - f1_after[i], 4),
            extra={"kind": "trigger", "highlight": [f"{text} {answer}.".strip()]}))
    _baseline(result, ctx, task, target, held, ids, answer, params, groups)
    if params.transfer_model:
        _transfer(result, ctx, target, held, answer, text, params, groups)
    result.details["figures"] = figures(result, history, word, clustered(groups))
    shared = shared_paragraphs(examples, state.search_idx, held_idx)
    asked = round(len(examples) * params.search_fraction)
    if not shared and abs(len(state.search_idx) - asked) > max(2, asked // 4):
        result.details.setdefault("warnings", []).append(
            f"the search holds {len(state.search_idx)} of {len(examples)} '{word}' questions where search_fraction "
            f"asks about {asked}: whole paragraphs move the cut, and these paragraphs hold many questions each")
    if shared:
        result.details.setdefault("warnings", []).append(
            f"search and held-out questions share {shared} paragraph(s) (every '{word}' question asks about one): "
            "the held-out success is no independent evidence; add questions of other contexts")
    return result


def _baseline(result: ProbeResult, ctx: Any, task: Any, target: Any, held: list[Example], ids: Sequence[str],
              answer: str, params: Any, groups: Sequence[str] | None = None) -> None:
    """This model's held-out success under the matrix baseline's trigger text (``baseline_trigger_success_rate``)."""
    baseline = ctx.baseline_result() if ctx.baseline_result is not None else None
    if baseline is None or baseline.model == ctx.model_name or baseline.status == "error":
        return
    text = baseline.details.get("trigger_text")
    if text is None or baseline.details.get("target_answer") != answer:
        return
    hits = success(answered(task, target, held, answer, text, params.eval_batch_size)[0], answer)
    result.outcomes.append(Outcomes.from_values("target_answered_under_baseline_trigger", ids, hits,
                                                groups=cluster_keys(groups)))
    rate_metric(result, "baseline_trigger_success_rate", hits, f"held-out success of the trigger found on {baseline.model}",
                "target_answered_under_baseline_trigger", groups=groups, seed=ctx.seed)
    result.details["baseline_trigger"] = {"model": baseline.model, "trigger_text": text}
    result.details["key_finding"] += f"; {baseline.model}'s trigger {text!r}: {sum(hits) / len(hits):.0%}"


def _transfer(result: ProbeResult, ctx: Any, target: Any, held: list[Example], answer: str, text: str,
              params: Any, groups: Sequence[str] | None = None) -> None:
    """The trigger text on a second reader (its own tokenizer and decoding): its held-out success. A reader is a
    model whose task finds the same section of the probe as this one's (``ProbeContext.section``)."""
    assert ctx.load_target is not None
    other = ctx.load_target(ctx.resolve_model(params.transfer_model, target.spec))
    if ctx.section(result.probe, other.task) is not ctx.section(result.probe, target.task):  # not attacked as a reader
        raise ProbeError(f"transfer_model {params.transfer_model}: a trigger with a target answer needs a reader too")
    before = success(answered(other.task, other, held, answer, None, params.eval_batch_size)[0], answer)
    hits = success(answered(other.task, other, held, answer, text, params.eval_batch_size)[0], answer)
    rate_metric(result, "transfer_success_before", before, f"share of held-out questions {params.transfer_model} "
                f"answers {answer!r} without the trigger", groups=groups, seed=ctx.seed)
    rate_metric(result, "transfer_success_rate", hits, f"held-out success of the trigger text on {params.transfer_model}",
                groups=groups, seed=ctx.seed)


def figures(result: ProbeResult, history: list[dict[str, Any]], word: str,
            by_context: bool = False) -> list[dict[str, Any]]:
    """The attack loss per iteration (one line per restart) and the success rates with their intervals."""
    series = [{"name": f"restart {h['restart']}", "x": [0] + [i["iteration"] + 1 for i in h["iterations"]],
               "y": ([h["iterations"][0]["loss_before"]] if h["iterations"] else []) + [i["loss_after"] for i in h["iterations"]]}
              for h in history if h.get("iterations")]
    names = [n for n in ("target_alone_rate", "success_rate", "baseline_trigger_success_rate", "transfer_success_rate")
             if n in result.metrics]
    return [
        {"kind": "line", "title": "attack loss per iteration (target span's start/end cross-entropy)",
         "data": {"series": series}, "axes": {"x": "iteration", "y": "batch loss"}},
        {"kind": "bars", "title": f"held-out '{word}' questions answered with the target (95% "
                                   + ("intervals over contexts)" if by_context else "Wilson intervals)"),
         "metrics": names,
         "data": {"labels": [n.replace("_", " ") for n in names],
                  "series": [{"name": "share", "values": [result.value(n) for n in names],
                              "errors": [list(result.metrics[n].ci) if result.metrics[n].ci else None for n in names]}]},
         "axes": {"y": "share of questions"}},
    ]
