"""The sweep of ``head-pruning`` (``HeadSweep``): head removals as work units a worker rebuilds from settings, and
how a list of units is run and read (``sweep_units``: sequentially where it pays, else every unit on all examples).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import torch

from bertprobe.data.dataset import Dataset
from bertprobe.execution import Sweep
from bertprobe.model.target import Target
from bertprobe.probe import ProbeContext
from bertprobe.probes.head_pruning.evaluator import Evaluator
from bertprobe.probes.head_pruning.params import HeadParams
from bertprobe.probes.head_pruning.rows import section_of
from bertprobe.probes.head_pruning.sequential import census_first, classify, looks, run_sequential
from bertprobe.stats import bootstrap_ci


@dataclass(frozen=True)
class HeadSweep(Sweep):
    """Per-example correctness under head removals: a unit is ``(mode, cells)``, the ``(layer, head)`` cells
    to remove by masking (``mask``) or uniform attention (``uniform``). Single-head and layer ablations
    are units of one sweep, so an executor can shard them over workers that each build the
    pre-collated batches once. ``section`` is the probe's section for the model's task as it travels to a worker
    (``rows.portable``: a module by its name), None for the built-in one of the worker's task."""

    batch_size: int | None = None
    stack_budget: int | None = None
    layer_cache: bool = True
    cache_budget_mb: float | None = None
    metric: str = "auto"
    rows: tuple[int, ...] | None = None  # a block of the examples (sequential sweeps); None: all of them
    max_examples: int | None = None  # the probe's sample of the data (``sampled``), drawn again by a worker
    sample_seed: int = 0
    distractors: int | None = None  # retrieval data: documents beside the sampled queries' relevant ones (``sampled``)
    section: Any = None

    def evaluator(self, target: Target, data: Dataset) -> Evaluator:
        """The evaluator these settings describe, its layer cache enabled but still empty. ``data`` is the suite's
        data (a worker's) or the probe's sample of it: the sample is drawn again, the same either way."""
        data = sampled(data, self.max_examples, self.sample_seed, self.distractors)
        ev = Evaluator(target, data, self.batch_size, self.metric, subset=self.rows,
                       section=section_of(self.section, target.task))
        ev.budget = self.stack_budget
        if self.layer_cache:
            ev.enable_cache(self.cache_budget_mb)
        return ev

    def setup(self, target: Target, data: Dataset | None) -> Evaluator:
        assert data is not None
        ev = self.evaluator(target, data)
        if ev.cache is not None:
            ev.correct()  # the plain pass that fills the cache
        return ev

    def run(self, state: Evaluator, units: list[Any]) -> list[list[int]]:
        layers, heads = state.shape
        out: list[list[int] | None] = [None] * len(units)
        for mode in ("mask", "uniform"):
            picked = [i for i, (m, _) in enumerate(units) if m == mode]
            if not picked:
                continue
            flags = []
            for i in picked:
                f = torch.zeros(layers, heads, dtype=torch.bool)
                for layer, head in units[i][1]:
                    f[layer, head] = True
                flags.append(f)
            if mode == "mask":
                correct = state.correct_many(masks=[(~f).float() for f in flags])
            else:
                correct = state.correct_many(uniform=flags)
            for i, c in zip(picked, correct):
                kind = np.float64 if state.score.graded else np.int8 if c.ndim == 1 else np.int32
                out[i] = c.astype(kind).tolist()
        return out  # type: ignore[return-value]


def unit_outcomes(values: Any, graded: bool = False) -> np.ndarray:
    """A unit's per-example outcomes as a sweep returns them: 0/1 (bool), scores in [0, 1] (``graded``: a
    question's F1), or rows of counts."""
    array = np.asarray(values)
    if graded:
        return array.astype(np.float64)
    return array.astype(bool) if array.ndim == 1 else array


def paired_drop_ci(score: Any, base: np.ndarray, changed: np.ndarray, resamples: int, confidence: float,
                   seed: int) -> tuple[float, float]:
    """Percentile interval of metric(changed) - metric(base) over examples resampled in pairs (a metric that is
    not a per-example mean, micro-F1, is recomputed on each resample)."""
    idx = np.random.default_rng(seed).integers(0, len(base), size=(resamples, len(base)))
    deltas = score.resampled(changed, idx) - score.resampled(base, idx)
    tail = (1 - confidence) / 2
    return float(np.quantile(deltas, tail)), float(np.quantile(deltas, 1 - tail))


def sequential_ok(ev: Evaluator, params: HeadParams, base_correct: np.ndarray) -> bool:
    """Whether sweeps run sequentially (``why_exact`` finds no reason against it)."""
    return not why_exact(ev, params, base_correct)


def why_exact(ev: Evaluator, params: HeadParams, base_correct: np.ndarray) -> str:
    """Why the sweeps run in the exact mode, for the report; '' when they run sequentially: asked for, a
    per-example 0/1 outcome, at least ``sequential_min`` examples (on SST-2 dev, 872, the sequential sweep saved
    3% of the passes and took 1.24x the wall time: each block pays its own plain pass and pads its own batches)
    and more than one look."""
    if not params.sequential:
        return "exact: sequential: false"
    if ev.groups is not None:
        return "exact: questions share contexts (the intervals resample contexts, which blocks of questions would split)"
    if not (ev.score.decomposable and base_correct.ndim == 1):
        return f"exact: {ev.score.name} is not a mean of per-example 0/1 outcomes"
    if len(base_correct) < params.sequential_min:
        return f"exact: {len(base_correct):,} examples, below sequential_min {params.sequential_min:,}"
    if len(looks(len(base_correct), params.sequential_block, params.sequential_growth)) <= 1:
        return f"exact: {len(base_correct):,} examples make a single look"
    return ""


def sweep_units(units: list[tuple[str, Any]], ev: Evaluator, sweep: HeadSweep, data: Dataset,
                base_correct: np.ndarray, params: HeadParams, ctx: ProbeContext, desc: str, seeds: list[int],
                decide: Callable[[tuple[float, float] | None, float], str] = classify,
                confidence: float | None = None, resamples: int | None = None) -> list[dict[str, Any]]:
    """Each unit's change of the metric against the plain model, with its paired interval, the examples it
    used and where it settled against the tolerance: sequentially, a census of the closest decisions then growing
    blocks of the rest (``head_pruning.sequential``), where the outcome is a per-example 0/1, else every unit on
    all examples.
    ``decide``, ``confidence`` and ``resamples`` change how a unit is judged (the pruning curve's points: against
    ``-tolerance`` only, one-sided bounds at ``params.confidence``); the interim level stays the params'."""
    n = len(base_correct)
    level = params.confidence if confidence is None else confidence
    resamples = params.bootstrap if resamples is None else resamples
    rows: list[dict[str, Any]] = []
    if not sequential_ok(ev, params, base_correct):
        for seed, values in zip(seeds, ctx.map(sweep, units, desc=desc, group=params.stack)):
            correct = unit_outcomes(values, ev.score.graded)
            if ev.score.decomposable:
                diff = correct.astype(np.float64) - base_correct.astype(np.float64)
                delta = float(diff.mean())
                ci = bootstrap_ci(diff, resamples, level, seed=seed, groups=ev.groups) if resamples else None
            else:
                delta = ev.score.value(correct) - ev.score.value(base_correct)
                ci = paired_drop_ci(ev.score, base_correct, correct, resamples, level, seed) if resamples else None
            rows.append({"delta": delta, "ci": ci, "examples": n, "settled": decide(ci, params.tolerance)})
        ev.passes += len(units)
        ev.sweep_passes, ev.sweep_units = ev.sweep_passes + len(units), ev.sweep_units + len(units)
        return rows
    order, census = census_first(np.random.default_rng(ctx.seed).permutation(n), ev.margins, params.census_share)
    ev.census = census
    settings = {f.name: getattr(sweep, f.name) for f in fields(sweep) if f.name != "rows"}

    def evaluate(open_units: list[tuple[str, Any]], a: int, b: int) -> list[np.ndarray]:
        block = HeadSweep(**settings, rows=tuple(int(i) for i in order[a:b])).bind(ev.target, data)
        settled = len(units) - len(open_units)
        values = ctx.map(block, [(f"{key}@{a}:{b}", unit) for key, unit in open_units],
                         desc=f"{desc}: {settled} settled, {len(open_units)} open, examples {a}-{b} of {n}",
                         group=params.stack)
        if block.__dict__.get("_state") is not None and block.state().cache is not None:
            ev.passes += (b - a) / n  # the block's plain pass that fills its layer cache
        return [unit_outcomes(v, ev.score.graded) for v in values]

    done = run_sequential(units, base_correct, order, evaluate, params.tolerance, level, params.interim_share,
                          resamples, ctx.seed, params.sequential_block,
                          seeds={key: seed for (key, _), seed in zip(units, seeds)}, growth=params.sequential_growth,
                          decide=decide, interim_alpha=params.interim_share * (1 - params.confidence),
                          census=census)
    for state in done.units:
        rows.append({"delta": state.estimate, "ci": state.ci, "examples": state.seen, "settled": state.settled,
                     "look": state.look, "census": census})
    ev.passes += done.passes
    ev.sweep_passes, ev.sweep_units = ev.sweep_passes + done.passes, ev.sweep_units + len(units)
    return rows



def sampled(data: Dataset, most: int | None, seed: int, distractors: int | None = None) -> Dataset:
    """At most ``most`` examples of ``data``: a sample fixed by ``seed``, kept in data order (all when None or fewer).
    Retrieval data (a corpus) keep only their sampled queries' relevant documents and ``distractors`` others drawn
    with ``seed`` (all when None or fewer), in corpus order; sampling a sample again changes nothing."""
    if most is not None and len(data) > most:
        keep = sorted(np.random.default_rng(seed).choice(len(data), size=most, replace=False).tolist())
        data = Dataset([data.examples[i] for i in keep], name=data.name, label_names=data.label_names,
                       corpus=data.corpus)
    if data.corpus is None or distractors is None:
        return data
    return replace(data, corpus=corpus_subset(data, distractors, seed))


def corpus_subset(data: Dataset, distractors: int, seed: int) -> Any:
    """``data``'s corpus cut to the examples' relevant documents (grade >= 1) and ``distractors`` of the rest drawn
    with ``seed``, in corpus order (the corpus itself where nothing is cut)."""
    from bertprobe.data.beir import Corpus

    corpus = data.corpus
    relevant = {corpus.index[d] for ex in data.examples for d, g in (ex.label or ()) if g >= 1 and d in corpus.index}
    rest = [i for i in range(len(corpus)) if i not in relevant]
    if len(rest) <= distractors:
        return corpus
    drawn = np.random.default_rng(seed).choice(len(rest), size=distractors, replace=False).tolist()
    keep = sorted(relevant | {rest[k] for k in drawn})
    return Corpus(tuple(corpus.ids[i] for i in keep), tuple(corpus.texts[i] for i in keep),
                  tuple(corpus.titles[i] for i in keep), corpus.name)
