"""Probe ``cloze``: does a masked LM fill blanks by reasoning or by association?

Papers: Ettinger 2020, "What BERT Is Not: Lessons from a New Suite of Psycholinguistic Diagnostics for
Language Models" (TACL 8:34-48; code aetting/lm-diagnostics): BERT prefers "a robin is a bird" and also
"a robin is not a bird"; Petroni et al. 2019 (LAMA, "Language Models as Knowledge Bases?"); Talmor et al.
2020 (oLMpics, "On What Language Model Pre-training Captures": the always/never quantifier items).

Items come from ``sets``: ``builtin`` (ten categories written for bertprobe, seeded templates),
``builtin:CATEGORY``, ``ettinger:DIR`` (CPRAG-102, ROLE-88, NEG-136-SIMP/NAT in their native tsv) or a
YAML/JSONL file of items (``text`` with ``{mask}``, ``answers``, optional ``distractors``, ``category``,
``id``, ``pair``, ``negated``, ``contrast``).

Ettinger's own figures (``ettinger_*``, ``bertprobe.probes.cloze.ettinger``) are computed as her scripts
compute them: her rows and framing (``<context> [MASK] .``, NEG-SIMP's article chosen by each row's target),
one softmax over the whole vocabulary per distinct context, prediction accuracy at k=1 and k=5 (CPRAG and
NEG once per context, NEG on affirmative-true rows only; ROLE every row), and her sensitivity tests (strict
``>``, and with both probability gaps above 0.01; CPRAG by constraint, NEG by polarity, NEG-NAT by
licensing). A target that is not one vocabulary token has no probability (her NaN): it is a miss, and it
is listed with the reason. Adaptations, not deviations: the mask is the model's own; a BPE or
SentencePiece vocabulary's word is its word-start token ('Ġchess'), and predictions lose that marker
before they are compared. Deviation: her ROLE average probability difference is NaN when one pair lacks
a probability; ours averages the pairs that have both. Her ROLE accuracy per quartile of the human cloze has
no figure for an empty quartile (hers prints 0).

Our own scoring (``bertprobe.probes.cloze.scoring``), for every set: single-token words by one masked pass;
multi-token words by the left-to-right pseudo log-likelihood of their masked span. Ranking is over the
candidates (answers + distractors) when an item has distractors, else over the vocabulary; ties count
against the item. Items with a word the tokenizer maps to its unknown token are skipped and listed. We give
top-1/MRR under that ranking and top-5 where it means something (over the vocabulary, or more than 5
candidates), ``pair_accuracy`` (the best answer beats every distractor), ``negation_sensitivity`` (the top
candidate changes between the affirmative and the negated item of a pair) and ``reversal_sensitivity`` (it
changes when the roles of a pair's sentence are reversed: ROLE-88, the built-in roles): these are not
Ettinger's figures. Every wrong prediction of the ``all_failures`` categories (counting and
quantifiers by default: the arithmetic) is a finding showing the sentence, the candidates and the top
vocabulary predictions with their probabilities.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import torch

from bertprobe.data.dataset import Dataset
from bertprobe.errors import ROW_LIMIT, BertprobeError, DataError, Problems, problems_error
from bertprobe.execution import Sweep
from bertprobe.hookmarkers import hookimpl
from bertprobe.model.masked_scoring import mask_token_problem
from bertprobe.model.target import Target
from bertprobe.probe import Probe, ProbeContext
from bertprobe.probes.cloze.ettinger import EttingerSet, ettinger_files, ettinger_sets, load_set
from bertprobe.probes.cloze.ettinger_report import CATALOGUE, DIRECTIONS, EttingerReadings, add_ettinger, summary_lines
from bertprobe.probes.cloze.items import ClozeItem, category_key
from bertprobe.probes.cloze.scoring import ClozeScorer, ItemScores, long_words, unknown_words
from bertprobe.probes.cloze.sets import resolve_sets
from bertprobe.results import Finding, ProbeResult

METRICS = ("top1_accuracy", "top5_accuracy", "mrr", "pair_accuracy", "negation_sensitivity", "reversal_sensitivity")
SENSITIVITY = {"negation": "negation_sensitivity", "roles": "reversal_sensitivity"}  # a pair's contrast -> its share


@dataclass(frozen=True)
class ClozeParams:
    sets: tuple[str, ...] = ("builtin",)  # item sets: builtin, builtin:CATEGORY, ettinger:DIR (Ettinger 2020), or a .yaml/.jsonl file of items
    categories: tuple[str, ...] = ()  # only these categories (default: all)
    per_category: int = 20  # items sampled per category
    batch_size: int = 32  # items per forward pass
    top_k: int = 5  # predictions counted as a top-k hit
    findings: int = 20  # wrong predictions shown in the report
    all_failures: tuple[str, ...] = ("counting", "quantifiers")  # categories whose every wrong prediction is a finding
    skip_unknown: bool = False  # skip your own file's items with a word the vocabulary lacks (default: refuse them)

    def __post_init__(self) -> None:
        if not self.sets:
            raise ValueError("sets must name at least one item set, e.g. [builtin]")
        if self.per_category < 1 or self.batch_size < 1 or self.top_k < 1:
            raise ValueError("per_category, batch_size and top_k must be at least 1")


CHUNK_ITEMS = 256  # items per work unit: large enough to batch well, small enough to checkpoint


@dataclass
class ItemOutcome:
    item: ClozeItem
    rank: int
    predicted: str
    pair_correct: bool | None
    top: list[tuple[str, float]]
    vocab_top: list[tuple[str, float]] = field(default_factory=list)  # the top tokens over the vocabulary

    @property
    def candidates(self) -> int:
        """How many words the rank is among: the answers and distractors (0: the vocabulary, no distractors)."""
        return len({*self.item.answers, *self.item.distractors}) if self.item.distractors else 0


def evaluate(scores: ItemScores, tokenizer: Any, top_k: int, special: set[int]) -> ItemOutcome:
    """Rank of the best answer, the model's top prediction for one item, and its top vocabulary tokens."""
    item = scores.item
    best_answer = max(scores.answers.values())
    vocab = scores.vocab_logprobs.clone()
    if special:
        vocab[list(special)] = -float("inf")
    best = vocab.topk(min(top_k, vocab.shape[-1]))
    vocab_top = [(tokenizer.convert_ids_to_tokens(int(i)), float(v.exp())) for v, i in zip(best.values, best.indices)]
    if item.distractors:
        pool = {**scores.distractors, **scores.answers}
        ranked = sorted(pool.items(), key=lambda kv: -kv[1])
        # ties count against the item: a distractor scoring as high as the best answer outranks it
        rank = 1 + sum(1 for w, s in ranked if s >= best_answer and w not in scores.answers)
        pair = best_answer > max(scores.distractors.values())
        top = [(w, float(torch.tensor(s).exp())) for w, s in ranked[:top_k]]
        predicted = ranked[0][0]
    else:
        rank = 1 + int((vocab > best_answer).sum())
        pair = None
        top = vocab_top
        predicted = top[0][0]
    return ItemOutcome(item, rank, predicted, pair, top, vocab_top)


def shares(outcomes: list[ItemOutcome]) -> dict[str, tuple[list[str], list[bool]]]:
    """Each proportion's per-case outcomes as (ids, hits): top-1 over items, top-5 over those ranked among more
    than 5 words (among 5 or fewer every answer is in the top 5), pair accuracy over items with distractors,
    negation and reversal sensitivity over the pairs of each contrast (the pair's id)."""
    out: dict[str, tuple[list[str], list[bool]]] = {}
    if not outcomes:
        return out
    ids = [o.item.id for o in outcomes]
    out["top1_accuracy"] = (ids, [o.rank == 1 for o in outcomes])
    wide = [o for o in outcomes if not o.candidates or o.candidates > 5]
    if wide:
        out["top5_accuracy"] = ([o.item.id for o in wide], [o.rank <= 5 for o in wide])
    paired = [o for o in outcomes if o.pair_correct is not None]
    if paired:
        out["pair_accuracy"] = ([o.item.id for o in paired], [bool(o.pair_correct) for o in paired])
    groups: dict[str, dict[bool, ItemOutcome]] = defaultdict(dict)
    for o in outcomes:
        if o.item.pair is not None:
            groups[o.item.pair][o.item.negated] = o
    complete = {pair: g for pair, g in groups.items() if True in g and False in g}
    for contrast, name in SENSITIVITY.items():
        kind = {pair: g for pair, g in complete.items() if g[False].item.contrast == contrast}
        if kind:
            out[name] = (list(kind), [g[True].predicted != g[False].predicted for g in kind.values()])
    return out


def add_scores(result: ProbeResult, outcomes: list[ItemOutcome], suffix: str = "", with_outcomes: bool = False) -> dict[str, float]:
    """Add ``aggregate``'s scores as metrics (names ending in ``suffix``), each share with its Wilson interval
    (with ``with_outcomes``, its per-item or per-pair outcomes too, for paired comparisons); return the scores."""
    for name, (ids, hits) in shares(outcomes).items():
        result.add_share(name + suffix, hits, ids if with_outcomes else None)
    if outcomes:
        result.add_metric("mrr" + suffix, reciprocal_rank(outcomes), True)
    return {name: result.value(name + suffix) for name in METRICS if name + suffix in result.metrics}


def reciprocal_rank(outcomes: list[ItemOutcome]) -> float:
    """The mean reciprocal rank of the expected word over ``outcomes`` (not empty)."""
    return sum(1 / o.rank for o in outcomes) / len(outcomes)


def aggregate(outcomes: list[ItemOutcome]) -> dict[str, float]:
    """top1/top5/MRR over items, pair accuracy over items with distractors, negation/reversal sensitivity over
    pairs."""
    out = {name: sum(hits) / len(hits) for name, (_, hits) in shares(outcomes).items()}
    if outcomes:
        out["mrr"] = reciprocal_rank(outcomes)
    return out


@dataclass(frozen=True)
class ClozeChunks(Sweep):
    """Scores chunks of cloze items (a unit is a tuple of ``ClozeItem``); each chunk's value holds its
    items' ranks, predictions and top words, and the forward passes it took."""

    batch_size: int = 32
    top_k: int = 5

    def setup(self, target: Target, data: Dataset | None) -> tuple[ClozeScorer, set[int]]:
        return ClozeScorer(target, self.batch_size), set(target.tokenizer.all_special_ids)

    def run(self, state: tuple[ClozeScorer, set[int]], units: list[Any]) -> list[dict[str, Any]]:
        scorer, special = state
        out = []
        for chunk in units:
            before = scorer.passes
            rows = [{"id": o.item.id, "rank": o.rank, "predicted": o.predicted, "pair": o.pair_correct,
                     "top": [list(t) for t in o.top], "vocab": [list(t) for t in o.vocab_top]}
                    for o in (evaluate(sc, scorer.tok, self.top_k, special) for sc in scorer.score(list(chunk)))]
            out.append({"rows": rows, "passes": scorer.passes - before})
        return out


def unknown_word_error(items: list[ClozeItem], words: dict[str, list[str]], unk: str) -> DataError:
    """One line per item of a user's file whose answers or distractors the vocabulary lacks (all at once)."""
    lines = [f"{it.source}: item {it.id!r}: {', '.join(repr(w) for w in words[it.id])} "
             f"{'is' if len(words[it.id]) == 1 else 'are'} the unknown token {unk!r} in this model's vocabulary; fix "
             "the word, or set skip_unknown: true" for it in items[:ROW_LIMIT]]
    return DataError(lines[0]) if len(lines) == 1 else problems_error(lines, DataError, "cloze items")  # type: ignore[return-value]


def in_categories(items: list[ClozeItem], categories: tuple[str, ...]) -> list[ClozeItem]:
    """The items of ``categories`` (all of them when none is named)."""
    if not categories:
        return items
    wanted = {category_key(c) for c in categories}
    return [it for it in items if category_key(it.category) in wanted]


def is_own(item: ClozeItem) -> bool:
    """Whether ``item`` comes from a user's own file (not built in, not Ettinger's)."""
    return item.source != "builtin" and not item.source.startswith("ettinger")


def own_unknown(items: list[ClozeItem], skip: dict[str, list[str]]) -> list[ClozeItem]:
    """The items of a user's own file among those with an unknown word (built-in and Ettinger items are skipped or
    scored as her NaN instead)."""
    return [it for it in items if it.id in skip and is_own(it)]


LONG_WORD = 4  # word pieces from which a word of your own items is likely misspelt or rare: said, still scored


def warn_long_words(result: ProbeResult, tokenizer: Any, own: list[ClozeItem]) -> None:
    """A warning naming the words of the user's own items that the vocabulary splits into ``LONG_WORD`` pieces or
    more: scored by their span's pseudo log-likelihood, such a word can hardly outrank a one-token word (a typo
    scored silently otherwise); ``details.long_words`` lists them all."""
    found = long_words(tokenizer, own, LONG_WORD)
    if not found:
        return
    result.details["long_words"] = found
    shown = "; ".join(f"{item}: " + ", ".join(f"{w!r} {n} pieces" for w, n in words.items())
                      for item, words in list(found.items())[:3])
    more = f" (and {len(found) - 3} more items)" if len(found) > 3 else ""
    result.details.setdefault("warnings", []).append(
        f"{len(found)} of your items hold a word of {LONG_WORD} or more word pieces in this vocabulary ({shown}{more}): "
        "scored by the pseudo log-likelihood of its span, such a word rarely wins; check its spelling")


def chunk_rows(value: Any) -> list[dict[str, Any]]:
    """A chunk's item rows (a run recorded before chunks carried their passes holds the bare list)."""
    return value["rows"] if isinstance(value, dict) else value


class ClozeProbe(Probe):
    """Cloze reasoning checks on masked LMs (Ettinger 2020; Petroni et al. 2019; Talmor et al. 2020)."""

    name = "cloze"
    description = "Cloze reasoning checks on masked LMs: counting, negation, roles, ... (Ettinger 2020)"
    requires = frozenset({"mlm"})
    tasks = frozenset({"masked-lm"})
    needs_data = False
    metrics = {
        "top1_accuracy*": "bertprobe's, not Ettinger's: share of items whose expected word ranks first among its "
                          "candidates (or the vocabulary) (suffix _CATEGORY: one category)",
        "top5_accuracy*": "bertprobe's: share of items ranked over the vocabulary or over more than 5 candidates whose "
                          "expected word is among the top 5",
        "mrr*": "bertprobe's: mean reciprocal rank of the expected word",
        "pair_accuracy*": "bertprobe's: share of items with distractors where the best answer beats every distractor",
        "negation_sensitivity*": "bertprobe's: share of affirmative/negated pairs whose top candidate changes with the "
                                 "negation",
        "reversal_sensitivity*": "bertprobe's: share of role-reversal pairs (ROLE-88, the built-in roles) whose top "
                                 "candidate changes when the roles are reversed",
        "items": "items scored",
        **CATALOGUE,
    }
    Params = ClozeParams
    key_metrics = ("top1_accuracy", "pair_accuracy", "negation_sensitivity", "reversal_sensitivity")  # descriptive: no default bound
    paper = "Ettinger 2020. What BERT Is Not: Lessons from a New Suite of Psycholinguistic Diagnostics for Language Models (TACL)"
    metric_directions = {"items": None, **DIRECTIONS, "*": True}
    path_params = ("sets",)

    @classmethod
    def input_problems(cls, params: ClozeParams) -> list[str]:
        """Every item file's problems (each Ettinger tsv file's bad rows, an item file's), then what only the
        sets together show (an item id twice, two Ettinger sets of one kind)."""
        found = Problems()
        for spec in params.sets:
            if spec.startswith("ettinger:"):
                for file in found.attempt(ettinger_files, spec) or []:
                    found.attempt(load_set, file)
            else:
                found.attempt(resolve_sets, (spec,), 0, 1)
        if not found:
            found.attempt(resolve_sets, params.sets, 0, params.per_category)
            found.attempt(ettinger_sets, params.sets)
        return found.messages

    @classmethod
    def tokenizer_problems(cls, params: ClozeParams, tokenizer: Any, max_length: int | None = None,
                           seed: int = 0) -> list[str]:
        """No mask token; the words of your own item files that this vocabulary maps to its unknown token (unless
        ``skip_unknown``)."""
        problem = mask_token_problem(tokenizer)
        if problem:
            return [problem]
        if params.skip_unknown:
            return []
        try:
            items = in_categories(resolve_sets(params.sets, 0, params.per_category), params.categories)
        except BertprobeError:
            return []  # input_problems names it
        skip = unknown_words(tokenizer, items)
        own = own_unknown(items, skip)
        if not own:
            return []
        error = unknown_word_error(own, skip, tokenizer.unk_token)
        return list(getattr(error, "problems", [str(error)]))

    def run(self, target: Target, data: Dataset | None, params: ClozeParams, ctx: ProbeContext) -> ProbeResult:
        items = resolve_sets(params.sets, ctx.seed, params.per_category)
        esets = ettinger_sets(params.sets)
        items = in_categories(items, params.categories)
        if params.categories:
            wanted = {category_key(c) for c in params.categories}
            esets = [e for e in esets if category_key(e.name) in wanted]
        result = ProbeResult(probe=self.name)
        if not items:
            result.status = "skipped"
            result.message = "no cloze items selected"
            return result
        sweep = ClozeChunks(params.batch_size, params.top_k)
        state = sweep.setup(target, None)
        scorer = state[0]
        scorer.progress = ctx.progress
        skip = scorer.unknown_words(items)
        own = own_unknown(items, skip)
        if own and not params.skip_unknown:  # a word of the user's own items the vocabulary lacks: a typo, or the wrong model
            raise unknown_word_error(own, skip, target.tokenizer.unk_token)
        unknown = [it for it in items if it.id in skip]
        items = [it for it in items if it.id not in skip]
        result.details["items_skipped_unknown_words"] = [it.id for it in unknown]
        warn_long_words(result, target.tokenizer, [it for it in items if is_own(it)])
        ettinger_line = self._ettinger(result, target, esets, params, ctx)
        if not items:
            result.message = f"all {len(unknown)} cloze items use words outside the model's vocabulary"
            if not esets:
                result.status = "skipped"
            else:
                result.details["key_finding"] = ettinger_line
            return result
        passes = self._items(result, target, items, sweep, state, params, ctx)
        result.details["forward_passes"] = passes + sum(t["forward_passes"] for t in result.details.get("ettinger", {}).values())
        if ettinger_line:
            result.details["key_finding"] = f"{ettinger_line} | bertprobe's ranking: {result.details['key_finding']}"
            result.details["summary"].update(summary_lines(result.details["ettinger"]))
        return result

    def _ettinger(self, result: ProbeResult, target: Target, esets: list[EttingerSet], params: ClozeParams,
                  ctx: ProbeContext) -> str:
        """Ettinger's own figures of her sets (one masked pass per distinct context); their headline."""
        if not esets:
            return ""
        readings = ctx.map(EttingerReadings(params.batch_size).bind(target, None, state=target),
                           [(f"ettinger-{e.name}", e) for e in esets], desc="Ettinger sets")
        return add_ettinger(result, esets, list(readings))

    def _items(self, result: ProbeResult, target: Target, items: list[ClozeItem], sweep: ClozeChunks, state: Any,
               params: ClozeParams, ctx: ProbeContext) -> int:
        """Score the items (top-1/top-5/MRR, pairs, negation), their tables and findings; the passes taken."""
        by_id = {it.id: it for it in items}
        # chunks of items are work units: a resumed run scores only the chunks it had not finished, and an
        # executor may score them in parallel workers
        size = CHUNK_ITEMS
        chunks = [(f"items{i}-{i + len(items[i:i + size])}", tuple(items[i:i + size]))  # a tuple: one unit, not a group
                  for i in range(0, len(items), size)]
        values = ctx.map(sweep.bind(target, None, state=state), chunks, desc="cloze chunks")
        outcomes = [ItemOutcome(by_id[r["id"]], int(r["rank"]), str(r["predicted"]), r["pair"],
                                [(str(w), float(p)) for w, p in r["top"]],
                                [(str(w), float(p)) for w, p in r.get("vocab", [])])
                    for value in values for r in chunk_rows(value)]
        passes = sum(value.get("passes", 0) for value in values if isinstance(value, dict))
        add_scores(result, outcomes, with_outcomes=True)
        result.add_metric("items", float(len(items)), kind="count")
        by_category: dict[str, list[ItemOutcome]] = defaultdict(list)
        for o in outcomes:
            by_category[category_key(o.item.category)].append(o)
        table = {}
        for cat, group in sorted(by_category.items()):
            table[cat] = {"items": len(group), **add_scores(result, group, suffix=f"_{cat}")}
        result.details["categories"] = table
        result.details["figures"] = [{
            "kind": "bars", "title": "top-1 accuracy per category", "metrics": ["top1_accuracy*"],
            "data": {"labels": list(table), "series": [{"name": "top-1 accuracy",
                                                        "values": [v.get("top1_accuracy") for v in table.values()]}]},
            "axes": {"y": "top-1 accuracy"}}]
        ranked = sorted(table.items(), key=lambda kv: kv[1].get("top1_accuracy", 0))
        words = {"top1_accuracy": "top-1 accuracy", "pair_accuracy": "pair accuracy",
                 "negation_sensitivity": "negation sensitivity", "reversal_sensitivity": "reversal sensitivity"}
        headline = [f"{words[name]} {result.value(name):.2f}" for name in words if result.value(name) is not None]
        result.details["key_finding"] = "; ".join(headline + [
            f"weakest category: {c} {v.get('top1_accuracy', 0):.2f} ({v['items']} items)" for c, v in ranked[:1]]
            + [f"{len(items)} items in all"])
        result.details["summary"] = {
            "weakest categories": ", ".join(f"{c} {v.get('top1_accuracy', 0):.2f}" for c, v in ranked[:3]),
            # the strongest never repeat the weakest (few categories): the rest of the ranking, best first
            "strongest categories": ", ".join(f"{c} {v.get('top1_accuracy', 0):.2f}"
                                              for c, v in ranked[3:][::-1][:3]) or "-",
        }
        result.details["items"] = [
            {"id": o.item.id, "category": o.item.category, "rank": o.rank, "predicted": o.predicted,
             "answers": list(o.item.answers)} for o in outcomes
        ]
        result.findings += failure_findings(outcomes, target.tokenizer.mask_token, params)
        return passes


def failure_findings(outcomes: list[ItemOutcome], mask: str, params: ClozeParams) -> list[Finding]:
    """A finding per wrong prediction: every one of the ``all_failures`` categories, then the others' first
    ``findings``. Each shows the sentence and, with the candidates' ranking, the top vocabulary predictions."""
    every = {category_key(c) for c in params.all_failures}
    failed = [o for o in outcomes if o.rank != 1]
    chosen = [o for o in failed if category_key(o.item.category) in every]
    chosen += [o for o in failed if category_key(o.item.category) not in every][: params.findings]
    out = []
    for o in chosen:
        observed = ", ".join(f"{w} {p:.3g}" for w, p in o.top)  # small probabilities stay readable
        if o.item.distractors and o.vocab_top:
            observed = f"candidates: {observed}; top predictions: " + ", ".join(f"{w} {p:.3g}" for w, p in o.vocab_top)
        out.append(Finding(title=f"{o.item.category}: {o.item.id}", input=o.item.text.replace("{mask}", mask),
                           expected=" | ".join(o.item.answers), observed=observed, score=float(o.rank),
                           extra={"score_label": "answer's rank"}))
    return out


@hookimpl
def bertprobe_register_probes(registry: Any) -> None:
    registry.add(ClozeProbe)
