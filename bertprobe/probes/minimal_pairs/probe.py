"""Probe ``blimp``: does a masked LM prefer the acceptable sentence of a minimal pair?

Background: Warstadt, Parrish, Liu, Mohananey, Peng, Wang & Bowman 2020, "BLiMP: The Benchmark of Linguistic
Minimal Pairs for English" (TACL 8: 377-392): 67 paradigms of 1,000 pairs, 12 phenomena, 4 fields; a pair is right
when the LM gives the good sentence the higher probability, accuracy per paradigm and its mean over paradigms.
A masked LM has no sentence probability: its pseudo-log-likelihood stands in (Salazar, Liang, Nguyen & Kirchhoff
2020, "Masked Language Model Scoring", ACL), or PLL-word-l2r (``metric: within_word_l2r``: Kauf & Ivanova 2023, "A
Better Way to Do Masked Language Model Scoring", ACL), which masks a token's later pieces of its own word too.
Scoring is the shared engine's (``bertprobe.model.masked_scoring``).

Counting: a pair is right when PLL(good) > PLL(bad), strictly: a tie counts as wrong (``tied_pairs`` counts them).
The 7 BLiMP pairs whose two sentences are the same text are no test (no model can prefer one): they are counted
in ``identical_pairs``, listed in the details and left out of every accuracy. Deviations: the fields'
spellings ``syntax_semantics`` and ``syntax/semantics`` are one field; the term ``s-selection`` is filed under
``argument_structure`` as the BLiMP repository's own results summary does (12 terms); a term's and a field's
accuracy is pooled over their pairs (with 1,000 pairs in every paradigm, the mean over paradigms but for the
identical pairs); every accuracy has a 95% interval (Wilson's; the mean over paradigms: Wilson's on the stratified
mean's effective sample size).

Speed: ``precision: bfloat16`` (or ``auto``: bfloat16 where the device computes it natively) scores every pair in
bfloat16 (its passes 2.3-2.9x float32's on such a CPU), then re-scores the near ties in the model's own precision
(``bertprobe.model.near_ties.settle``): a seeded sample of ``calibration_pairs`` pairs measures how far bfloat16 moves a pair's
margin, and every pair within twice the largest such move is scored again, so the outcomes are the full-precision
run's unless one pair's error exceeds twice the largest measured (over the calibration sample and every
re-scored pair: at least the 200 calibration pairs, 3,896 on a random MLM's BLiMP). The PLLs of pairs outside the band
stay bfloat16's (up to about 0.02 nats off on a MiniLM-L6); ``rescored_pairs``, ``recheck_band``,
``recheck_max_error`` and ``recheck_flips`` say what it took.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from bertprobe.data.dataset import Dataset
from bertprobe.errors import BertprobeError, ProbeError, Problems
from bertprobe.hookmarkers import hookimpl
from bertprobe.model import near_ties
from bertprobe.model.masked_scoring import (
    MaskedScorer,
    mask_token_problem,
    precision_spec_problem,
    resolve_precision,
    unknown_token_items,
)
from bertprobe.model.near_ties import Scores, Settled
from bertprobe.model.target import Target
from bertprobe.probe import Probe, ProbeContext
from bertprobe.probes.minimal_pairs.accuracy import GroupAccuracy, group_accuracy, margin_text, mean_over_groups
from bertprobe.probes.minimal_pairs.pairs import TERM_MERGES, MinimalPair, load_pairs, select_pairs
from bertprobe.probes.minimal_pairs.scoring import PairChunks, PairScore, check_lengths
from bertprobe.results import Finding, ProbeResult


@dataclass(frozen=True)
class BlimpParams:
    data: str = ""  # a BLiMP folder of UID.jsonl files, or one .jsonl file (suites/blimp.yaml: ${BERTPROBE_BLIMP:-...})
    paradigms: tuple[str, ...] = ()  # only these paradigms (UIDs; default: all)
    per_paradigm: int = 0  # pairs sampled per paradigm, seeded by the suite seed and the paradigm (0: all)
    metric: Literal["original", "within_word_l2r"] = "original"  # PLL (Salazar et al. 2020) or PLL-word-l2r (Kauf & Ivanova 2023)
    batch_tokens: int = 2048  # padded tokens per forward pass (masked copies packed by length; 2048 measured best on 2 cores)
    max_rows: int = 512  # masked copies per forward pass
    chunk_pairs: int = 500  # pairs per work unit (what a resumed run skips when done)
    precision: Literal["model", "bfloat16", "auto"] = "model"  # bfloat16: passes 2.3-2.9x faster where native, near ties re-scored
    calibration_pairs: int = 200  # with bfloat16: pairs scored in both precisions to set the re-check band
    worst: int = 5  # the worst paradigms shown as findings
    examples: int = 2  # wrong pairs shown per worst paradigm

    def __post_init__(self) -> None:
        if not self.data:
            raise ValueError("data must name a BLiMP folder of <UID>.jsonl files or one .jsonl file")
        if self.per_paradigm < 0:
            raise ValueError("per_paradigm must be >= 0 (0: every pair)")
        sizes = (self.batch_tokens, self.max_rows, self.chunk_pairs, self.calibration_pairs)
        if min(sizes) < 1 or min(self.worst, self.examples) < 0:
            raise ValueError("batch_tokens, max_rows, chunk_pairs and calibration_pairs must be >= 1; worst and "
                             "examples >= 0")


def metric_key(name: str) -> str:
    """A metric-name-safe form of a paradigm, term or field: letters, digits and underscores."""
    return re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_")


class BlimpProbe(Probe):
    """BLiMP minimal pairs by pseudo-log-likelihood (Warstadt et al. 2020; Salazar et al. 2020)."""

    name = "blimp"
    description = "BLiMP minimal pairs: does a masked LM's pseudo-log-likelihood prefer the acceptable sentence?"
    requires = frozenset({"mlm"})
    tasks = frozenset({"masked-lm"})
    needs_data = False
    metrics = {
        "accuracy": "mean over paradigms of the share of pairs whose good sentence has the higher PLL (the BLiMP paper's score)",
        "pair_accuracy": "share of all pairs whose good sentence has the higher PLL (per-pair outcomes, for paired comparisons)",
        "accuracy_*": "one paradigm's accuracy (suffix: its UID)",
        "term_accuracy_*": "one phenomenon's (linguistics_term) accuracy, pooled over its pairs",
        "field_accuracy_*": "one field's accuracy (syntax, morphology, syntax_semantics, semantics), pooled over its pairs",
        "pairs": "pairs scored (identical pairs excluded)",
        "paradigms": "paradigms scored",
        "identical_pairs": "pairs whose two sentences are the same text: no test, left out of every accuracy",
        "tied_pairs": "pairs with equal PLLs (counted wrong)",
        "unknown_token_pairs": "pairs with text the tokenizer maps to its unknown token (their PLLs read it, not the "
                               "words; named in a warning)",
        "forward_passes": "forward passes of the masked LM",
        "rescored_pairs": "with bfloat16: pairs scored again in the model's precision (calibration and near ties)",
        "recheck_band": "with bfloat16: pairs whose bfloat16 margin was within this many nats were re-scored",
        "recheck_max_error": "with bfloat16: the largest change of a pair's margin between the two precisions (nats)",
        "recheck_flips": "with bfloat16: re-scored pairs whose outcome bfloat16 had wrong",
    }
    metric_directions = {"pairs": None, "paradigms": None, "identical_pairs": None, "tied_pairs": False,
                         "unknown_token_pairs": None, "forward_passes": None, "rescored_pairs": None, "recheck_band": None,
                         "recheck_max_error": None, "recheck_flips": None, "*": True}
    Params = BlimpParams
    key_metrics = ("accuracy", "field_accuracy_*")  # descriptive: no default bound
    paper = ("Warstadt et al. 2020. BLiMP: The Benchmark of Linguistic Minimal Pairs for English (TACL); "
             "Salazar et al. 2020. Masked Language Model Scoring (ACL)")
    path_params = ("data",)

    @classmethod
    def input_problems(cls, params: BlimpParams) -> list[str]:
        """Every bad line of the BLiMP files (each named by file and line) and every unknown paradigm."""
        found = Problems()
        pairs = found.attempt(load_pairs, params.data)
        if pairs is not None:
            found.attempt(select_pairs, pairs, params.paradigms, params.per_paradigm, 0)
        return found.messages

    @classmethod
    def model_problems(cls, params: BlimpParams, model: Any) -> list[str]:
        """A ``precision`` the model's runtime, device or dtype cannot compute."""
        problem = precision_spec_problem(params.precision, model)
        return [problem] if problem else []

    @classmethod
    def tokenizer_problems(cls, params: BlimpParams, tokenizer: Any, max_length: int | None = None,
                           seed: int = 0) -> list[str]:
        """A tokenizer without a mask token; the selected pairs' sentences longer than the model's positions."""
        problem = mask_token_problem(tokenizer)
        if problem or max_length is None:
            return [problem] if problem else []
        try:
            pairs = select_pairs(load_pairs(params.data), params.paradigms, params.per_paradigm, seed)
        except BertprobeError:
            return []  # input_problems names it
        found = Problems()
        found.attempt(check_lengths, tokenizer, max_length, pairs)
        return found.messages

    def run(self, target: Target, data: Dataset | None, params: BlimpParams, ctx: ProbeContext) -> ProbeResult:
        pairs = select_pairs(load_pairs(params.data), params.paradigms, params.per_paradigm, ctx.seed)
        sweep = PairChunks(params.metric, params.batch_tokens, params.max_rows)
        scorer: MaskedScorer = sweep.setup(target, None)
        scorer.progress = ctx.progress
        check_lengths(scorer.tok, scorer.max_length, pairs)
        identical = [p for p in pairs if p.identical]
        scored = [p for p in pairs if not p.identical]
        # the precision resolved here ("auto" on this machine's device), so every worker computes the same
        precision, dropped = near_ties.plan(resolve_precision(params.precision, target), len(scored),
                                            params.calibration_pairs)
        fast = PairChunks(params.metric, params.batch_tokens, params.max_rows, precision)
        reduced = fast.precision != "model"
        fast_scorer: MaskedScorer = fast.setup(target, None) if reduced else scorer
        fast_scorer.progress = ctx.progress
        size = params.chunk_pairs
        # chunks of pairs are work units: a resumed run scores only the chunks it had not finished
        prefix = "bfloat16-" if reduced else ""
        chunks = [(f"{prefix}pairs{i}-{i + len(scored[i:i + size])}", tuple((p.good, p.bad) for p in scored[i:i + size]))
                  for i in range(0, len(scored), size)]
        desc = "BLiMP chunks" + (" (bfloat16)" if reduced else "")
        values = ctx.map((fast if reduced else sweep).bind(target, None, state=fast_scorer), chunks, desc=desc)
        first: list[Scores] = list(zip((float(g) for v in values for g in v["good"]),
                                       (float(b) for v in values for b in v["bad"])))
        if len(first) != len(scored):
            raise ProbeError(f"blimp: {len(first)} scored pairs came back for {len(scored)}")
        settled = None
        if reduced:
            def rescore(indices: list[int]) -> dict[int, Scores]:
                # one unit per pair, keyed by its id: a resumed run re-scores only pairs it had not
                units = [(f"exact-{scored[i].id}", ((scored[i].good, scored[i].bad),)) for i in indices]
                got = ctx.map(sweep.bind(target, None, state=scorer), units, desc="BLiMP near ties re-scored",
                              group=size)
                values.extend(got)
                return {i: (float(v["good"][0]), float(v["bad"][0])) for i, v in zip(indices, got)}

            settled = near_ties.settle(first, rescore,
                                       near_ties.calibration_sample(len(scored), params.calibration_pairs, ctx.seed))
            first = settled.scores
        scores = [PairScore(p, g, b) for p, (g, b) in zip(scored, first)]
        result = ProbeResult(probe=self.name)
        self._accuracies(result, scores)
        result.add_metric("identical_pairs", float(len(identical)), None,
                          "pairs whose two sentences are the same text, left out", kind="count")
        result.add_metric("tied_pairs", float(sum(s.tied for s in scores)), False, "pairs with equal PLLs (wrong)",
                          kind="count")
        result.add_metric("forward_passes", float(sum(v.get("passes", 0) for v in values)), None, kind="cost")
        result.details["metric"] = params.metric
        result.details["precision"] = fast.precision
        if dropped:  # why bfloat16 was not used
            result.details["summary"]["precision"] = dropped
        if settled is not None:
            self._recheck(result, settled)
            result.details["key_finding"] += f" (bfloat16; {settled.rescored} near ties re-scored in float32)"
            result.details["summary"]["precision"] = near_ties.summary(settled, len(scores))
        with_unknown, warning = unknown_token_items(scorer.tok, [(p.id, (p.good, p.bad)) for p in scored])
        result.add_metric("unknown_token_pairs", float(len(with_unknown)), None,
                          "pairs with text the tokenizer maps to its unknown token", kind="count")
        if warning:
            result.details.setdefault("warnings", []).append(warning)
            result.details["unknown_token_pairs"] = with_unknown
        result.details["identical_pairs"] = [p.id for p in identical]
        result.details["merged_labels"] = {"fields": {"syntax/semantics": "syntax_semantics"}, "terms": dict(TERM_MERGES)}
        result.details["masked_rows"] = sum(v.get("rows", 0) for v in values)
        self._findings(result, scores, params)
        return result

    @staticmethod
    def _recheck(result: ProbeResult, settled: Settled) -> None:
        result.add_metric("rescored_pairs", float(settled.rescored), None,
                          f"pairs scored again in the model's precision ({settled.calibration} calibration)", kind="cost")
        result.add_metric("recheck_band", settled.band, None, "margin (nats) within which pairs were re-scored",
                          kind="cost")
        result.add_metric("recheck_max_error", settled.max_error, None,
                          "largest change of a pair's margin between bfloat16 and the model's precision", kind="cost")
        result.add_metric("recheck_flips", float(settled.flips), None, "re-scored pairs bfloat16 had the other way",
                          kind="count")
        result.details["recheck"] = near_ties.details(settled)

    @staticmethod
    def _accuracies(result: ProbeResult, scores: list[PairScore]) -> None:
        if not scores:
            raise ProbeError("blimp: every selected pair has two identical sentences; nothing to score")
        result.add_share("pair_accuracy", [s.correct for s in scores], [s.pair.id for s in scores],
                         description="share of pairs whose good sentence has the higher PLL")
        tables: dict[str, dict[str, GroupAccuracy]] = {
            "paradigms": group_accuracy(scores, lambda s: s.pair.uid),
            "terms": group_accuracy(scores, lambda s: s.pair.term),
            "fields": group_accuracy(scores, lambda s: s.pair.field),
        }
        mean, interval = mean_over_groups(tables["paradigms"])
        result.add_metric("accuracy", mean, True, "mean accuracy over paradigms", ci=interval)
        for table, prefix in (("paradigms", "accuracy_"), ("terms", "term_accuracy_"), ("fields", "field_accuracy_")):
            for name, g in tables[table].items():
                result.add_metric(prefix + metric_key(name), g.accuracy, True, f"{table[:-1]} {name}: {g.correct}/{g.pairs}",
                                  ci=g.interval)
        result.add_metric("pairs", float(len(scores)), None, "pairs scored", kind="count")
        result.add_metric("paradigms", float(len(tables["paradigms"])), None, "paradigms scored", kind="count")
        first: dict[str, MinimalPair] = {}
        for s in scores:
            first.setdefault(s.pair.uid, s.pair)
        result.details["paradigms"] = {
            uid: {"field": first[uid].field, "term": first[uid].term, "pairs": g.pairs, "accuracy": g.accuracy,
                  "ci": list(g.interval)} for uid, g in tables["paradigms"].items()}
        for table in ("terms", "fields"):
            result.details[table] = {name: {"pairs": g.pairs, "accuracy": g.accuracy, "ci": list(g.interval)}
                                     for name, g in tables[table].items()}
        result.details["figures"] = [
            {"kind": "bars", "title": f"BLiMP accuracy per {table[:-1]}", "metrics": [f"{prefix}*"],
             "data": {"labels": list(tables[table]),
                      "series": [{"name": "accuracy", "values": [g.accuracy for g in tables[table].values()]},
                                 {"name": "chance", "values": [0.5] * len(tables[table])}]},
             "axes": {"y": "share of pairs with PLL(good) > PLL(bad)"}}
            for table, prefix in (("fields", "field_accuracy_"), ("terms", "term_accuracy_"))]
        ranked = sorted(tables["paradigms"].items(), key=lambda kv: kv[1].accuracy)
        ties = sum(s.tied for s in scores)
        result.details["key_finding"] = (
            f"BLiMP accuracy {mean:.3f} (mean over {len(ranked)} paradigm{'s' if len(ranked) != 1 else ''}; {result.value('pair_accuracy'):.3f} over "
            f"{len(scores)} pairs" + (f", {ties} of them tied and counted wrong" if ties else "")
            + f"); weakest paradigm: {ranked[0][0]} {ranked[0][1].accuracy:.2f}")
        result.details["summary"] = {
            "fields": ", ".join(f"{n} {g.accuracy:.2f}" for n, g in tables["fields"].items()),
            "weakest paradigms": ", ".join(f"{n} {g.accuracy:.2f}" for n, g in ranked[:3]),
            "strongest paradigms": ", ".join(f"{n} {g.accuracy:.2f}" for n, g in ranked[3:][::-1][:3]) or "-",
        }

    @staticmethod
    def _findings(result: ProbeResult, scores: list[PairScore], params: BlimpParams) -> None:
        """The worst paradigms, each with its most confidently wrong pairs and their PLLs."""
        table = result.details["paradigms"]
        worst = sorted(table, key=lambda uid: table[uid]["accuracy"])[: params.worst]
        for uid in worst:
            wrong = sorted((s for s in scores if s.pair.uid == uid and not s.correct), key=lambda s: s.good - s.bad)
            row = table[uid]
            for s in wrong[: params.examples]:
                result.findings.append(Finding(
                    title=f"{uid} ({row['term']}, accuracy {row['accuracy']:.2f}): pair {s.pair.id}",
                    input=s.pair.good, perturbed=s.pair.bad, expected="PLL(good) > PLL(bad)",
                    observed=f"PLL good {margin_text(s.good)}, bad {margin_text(s.bad)}",
                    score=s.good - s.bad,
                    extra={"paradigm": uid, "accuracy": row["accuracy"], "score_label": "PLL(good) - PLL(bad)"}))


@hookimpl
def bertprobe_register_probes(registry: Any) -> None:
    registry.add(BlimpProbe)
