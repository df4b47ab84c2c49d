"""Probe ``head-pruning``: head importance, single-head and layer ablation, pruning curve.

Papers:
  * Michel, Levy, Neubig 2019, "Are Sixteen Heads Really Better than One?" (NeurIPS): importance
    I_h = E_x |dL(x)/d xi_h| of a head-mask variable xi_h, from one forward and backward pass; heads
    pruned from least to most important; up to 40% of BERT-base's heads prunable on MNLI.
  * Kovaleva, Romanov, Rogers, Rumshisky 2019, "Revealing the Dark Secrets of BERT" (EMNLP): a head
    is "disabled" by giving it uniform attention; disabling some heads improved accuracy.

Implementation and deviations:
  * transformers 5 has no ``head_mask``; masks and uniform attention are forward hooks
    (``bertprobe.model``), valid for eager and SDPA attention.
  * Importance uses a per-example mask (``B x L x H``), so |dL(x)/d xi_h| is taken per example as the
    paper's equation says; Michel's code takes the absolute value of batch-summed gradients.
  * Layer-wise normalisation of importance (``normalize``, Michel's default) divides each layer's
    scores by their L2 norm; both raw and normalised maps are reported.
  * Ablation deltas carry a paired percentile-bootstrap confidence interval over examples.
  * ``prunable_fraction`` accounts for the finite test set: the largest step of the curve such that it
    and every smaller step have a paired accuracy drop (bootstrapped over examples) not significantly
    larger than ``tolerance``; its interval starts at the largest step whose drops are significantly
    within it. The plain reading (every step's drop at most ``tolerance``) moved from 0.19 to 0.50 when
    one example of 872 changed at the baseline (fp16 against fp32); it is kept in
    ``details["prunable_fraction_plain"]``. Michel et al. read the curve by eye.
  * ``max_single_head_drop`` carries the paired bootstrap CI of that head's drop.
  * Sequential sweeps (``sequential``, on by default; not in the papers): single-head and layer ablations
    and the pruning curve's steps first run on a census, the 5% of examples (``census_share``) whose plain
    decision is closest to changing (smallest top-two logit gap), which holds most changed predictions and is
    summed exactly; then on growing blocks of the rest (256, 384, 576 ..., in an order fixed by the seed; from
    ``sequential_min``, 2,000, examples), and a unit stops once its paired
    interval lies wholly inside the tolerance band or wholly outside it (a curve step: wholly above or
    below ``-tolerance``), by a betting confidence sequence valid at every look
    (``head_pruning.sequential``, ``head_pruning.betting``);
    ambiguous units run to the end and get the exact mode's interval. Each row and curve point says how
    many examples it used and where it settled; ``prunable_fraction``'s interval is read from the steps'
    intervals; ``ablation_passes`` counts full-pass equivalents. ``sequential: false`` is the exact mode
    (every unit on every example). Metrics recomputed from sums (micro-F1, entity F1) and data of at most
    one block always run exact.
  * Readers (extractive QA), not in the papers: a question may span several windows, so the task gives the
    sweep its rows (``Task.sweep_rows``, ``tasks.qa_heads``): importance is the gradient of HF's QA loss (start
    and end cross-entropies) summed over a question's windows before the absolute value, and ablations and
    the curve score each question's F1 (or ``metric: em``) of the answer decoded over its windows; the census
    margin is the chosen span's confidence. ``max_examples`` samples the questions (each unit costs a pass).
    Where questions share a context (SQuAD's paragraphs: ``tasks.qa_clusters``), every interval (the
    ablations', the curve's, ``prunable_fraction``'s) resamples contexts (a cluster bootstrap), the sweeps
    run exact (sequential blocks of questions would split contexts) and the per-question outcome carries its
    context's key, so a paired gate resamples contexts too.
  * Speed, not in the papers: single-head and layer ablations are units of one ``HeadSweep``
    (resumable; an executor such as ``ray`` shards them over workers with identical numbers). The
    plain pass caches the hidden states entering every layer (``layer_cache``), and each ablation runs
    from its lowest intervened layer: on a 6-layer model the single-head sweep skips 42% of the layer
    computations. The cache holds examples x padded length x hidden x (layers - 1) values (167 MiB
    for SST-2 dev on MiniLM-L6 in fp32); over ``cache_budget_mb`` (default a quarter of free
    memory) or with shared layers (ALBERT) it is off and the summary says why.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal

import numpy as np
import torch

from bertprobe.data.dataset import Dataset
from bertprobe.hookmarkers import hookimpl
from bertprobe.model.architectures import head_grid, heads_per_layer
from bertprobe.model.budgets import ACTIVATION_SHARE, free_memory
from bertprobe.model.interventions import (
    LayerCache,
    encoder_layers,
    evaluate_units,
    head_intervention,
    hidden_size,
)
from bertprobe.model.pruning import (
    head_importance,
    least_important,
    normalize_by_layer,
)
from bertprobe.model.target import Encoded, Target
from bertprobe.model.timing import compare_speed
from bertprobe.probe import Probe, ProbeContext, Sweep
from bertprobe.probes.head_pruning.sequential import census_first, classify, classify_drop, looks, run_sequential
from bertprobe.progress import progress
from bertprobe.results import Finding, ProbeResult
from bertprobe.results.figures import heatmap_spec, layer_head_heatmap
from bertprobe.results.outcomes import Outcomes, example_ids
from bertprobe.stats import bootstrap_ci, bootstrap_means, clustered, gini
from bertprobe.tasks.qa_clusters import cluster_keys


@dataclass(frozen=True)
class HeadParams:
    normalize: bool = True  # divide each layer's importance scores by their L2 norm before ranking (Michel's default)
    ablation: bool = True  # remove each head alone and measure the accuracy drop
    mode: Literal["mask", "uniform"] = "mask"  # how a head is removed: mask (output zeroed, Michel) or uniform (uniform attention, Kovaleva)
    layers: bool = True  # remove each layer's heads together
    pruning: bool = True  # prune heads from least to most important and draw the accuracy curve
    step: float = 0.1  # share of heads pruned per step of the curve
    tolerance: float = 0.01  # accuracy drop a pruning step may cost and still count as prunable
    iterative: bool = False  # recompute importance after each pruning step (Michel's iterative variant)
    physical: bool = False  # remove the heads' weights for real and measure the speed-up
    physical_fraction: float = 0.5  # share of heads physically removed for the speed measurement
    speed_batch_size: int = 64  # batch size of the throughput measurement
    speed_seconds: float = 10.0  # time budget of the physical-pruning speed measurement
    batch_size: int | None = None  # examples per forward pass (default: sized to the device)
    stack: int = 24  # ablation units handed to the evaluator at once (stacked in one pass on a GPU)
    stack_budget: int | None = None  # activation elements per stacked pass (None: 0 on CPU; GPU: a quarter of free memory, <= 2^31)
    layer_cache: bool = True  # ablations start from their lowest intervened layer (cached layer inputs)
    cache_budget_mb: float | None = None  # the most the layer cache may hold (None: a quarter of free memory)
    bootstrap: int = 1000  # paired bootstrap resamples of the drops' intervals
    confidence: float = 0.95  # level of the intervals and of the prunable test
    findings: int = 5  # most important heads listed in the report
    metric: str = "auto"  # what ablations and the curve measure: auto (accuracy; multi-label: micro_f1; NER: entity_f1; a reader: f1 per question), subset_accuracy, sentence_exact, em
    max_examples: int | None = None  # at most this many examples (questions for a reader), a seeded sample in data order; None: all
    sequential: bool = True  # ablations on growing blocks of examples, each stopped once decided (false: every unit on all)
    sequential_min: int = 2000  # fewest examples run sequentially (below, a few percent saved do not pay for the blocks)
    sequential_block: int = 256  # examples of the first look
    sequential_growth: float = 1.5  # each next look holds this many times the examples of the one before
    census_share: float = 0.05  # sequential sweeps first evaluate this share of examples, those whose plain decision is closest to changing (smallest margin), in full; 0: none
    interim_share: float = 0.5  # error of a unit settled before the end, per side, as a share of 1 - confidence (0.5: the exact interval's own 2.5% per side; time-uniform); the final look is the exact interval

    def __post_init__(self) -> None:
        if not 0 < self.step <= 1:
            raise ValueError("step must lie in (0, 1]")
        if not 0 <= self.physical_fraction < 1:
            raise ValueError("physical_fraction must lie in [0, 1)")
        if self.tolerance < 0:
            raise ValueError("tolerance must be >= 0")
        if self.max_examples is not None and self.max_examples < 1:
            raise ValueError("max_examples must be at least 1 (leave it out to use every example)")
        if self.sequential_min < 0:
            raise ValueError("sequential_min must be at least 0")
        if self.sequential_block < 16:
            raise ValueError("sequential_block must be at least 16")
        if self.sequential_growth <= 1:
            raise ValueError("sequential_growth must be above 1")
        if not 0 <= self.census_share < 1:
            raise ValueError("census_share must lie in [0, 1)")
        if not 0 < self.interim_share < 1:
            raise ValueError("interim_share must lie strictly between 0 and 1")


class Evaluator:
    """Pre-tokenised, pre-collated batches reused by every ablation; returns per-example correctness."""

    def __init__(self, target: Target, data: Dataset, batch_size: int | None, metric: str = "auto",
                 subset: Sequence[int] | None = None) -> None:
        """``subset``: the examples of ``data`` evaluated (a sequential block), None for all; a task decides what
        depends on the whole data on all of it (a reader abstains only where the data hold unanswerable questions)."""
        self.target = target
        self.sites = target.attention_sites()
        self.dropped = 0
        self.logits_of = target.task.output_logits  # what a forward pass gives per row (a reader: start and end)
        # a task whose example is several rows (a question's windows) gives them, with how rows become outcomes
        self.rows = target.task.sweep_rows(target, data, metric, subset)
        if subset is not None and self.rows is None:
            data = Dataset([data.examples[i] for i in subset], name=data.name, label_names=data.label_names)
        if self.rows is not None:
            self.score = self.rows.score
            data = Dataset(list(self.rows.examples), name=data.name, label_names=data.label_names)
            self.encoded = Encoded(list(self.rows.rows), list(self.rows.lengths))
            self.labels = self.rows.labels  # per row
        elif target.task.word_tags:  # word-aligned rows; gold on each word's first sub-token
            self.score = target.task.sweep_score(metric)  # per-example outcome and the metric over it
            aligned = target.encode_words(data.examples)
            kept = [i for i, a in enumerate(aligned) if a is not None]
            self.dropped = len(aligned) - len(kept)  # sentences cut by max_length: not scored here
            data = Dataset([data.examples[i] for i in kept], name=data.name, label_names=data.label_names)
            rows = [aligned[i] for i in kept]
            self.encoded = Encoded([r for r, _ in rows], [len(r["input_ids"]) for r, _ in rows])  # type: ignore[misc]
            self.labels = target.task.token_gold([w for _, w in rows], data)  # type: ignore[misc, attr-defined]
        else:
            self.score = target.task.sweep_score(metric)  # per-example outcome and the metric over it
            self.labels = target.task.gold(data)
            self.encoded = target.encode(data.examples)
        self.examples = data.examples
        # a reader's questions come several per context, no independent evidence: the intervals resample contexts
        clusters = target.task.example_clusters(self.examples)
        self.groups = clusters if clustered(clusters) else None
        self.batches = list(target.batches(self.encoded, batch_size))
        self.passes = 0
        self.sweep_passes = 0.0  # the ablation sweeps' unit evaluations, in full-pass equivalents ...
        self.sweep_units = 0  # ... against one full pass per unit
        self.budget: int | None = None  # stacking budget (None: the device's default, see interventions.stack_size)
        self.cache: LayerCache | None = None
        self.cache_note = "off"
        self.margins: np.ndarray | None = None  # the plain pass's per-example margins (``OutcomeScore.margin``)
        self.census = 0  # examples the sequential sweeps evaluated in full first (``sequential.census_first``)

    def enable_cache(self, budget_mb: float | None) -> None:
        """Cache the layer inputs of the next plain pass (``correct()``), if they fit the budget."""
        layers = encoder_layers(self.target.model, self.sites)
        if layers is None:
            self.cache_note = "off: the encoder's layers are shared or not a plain list"
            return
        param = next(self.target.model.parameters())
        need = LayerCache.estimate(self.batches, hidden_size(self.target.model), len(layers), param.element_size())
        budget = free_memory(param.device) // ACTIVATION_SHARE if budget_mb is None else int(budget_mb * 2**20)
        if need > budget:
            self.cache_note = f"off: it would hold {need / 2**20:.0f} MiB, over the budget of {budget / 2**20:.0f} MiB"
            return
        self.cache = LayerCache(layers)
        self.cache_note = f"{need / 2**20:.1f} MiB"

    @property
    def shape(self) -> tuple[int, int]:
        return head_grid(self.sites)

    @property
    def real(self) -> torch.Tensor:
        """``L x H`` bool: which grid cells are heads (a physically pruned layer has fewer)."""
        layers, width = self.shape
        out = torch.zeros(layers, width, dtype=torch.bool)
        for layer, n in enumerate(heads_per_layer(self.sites)):
            out[layer, :n] = True
        return out

    def _collect(self, raw: np.ndarray) -> np.ndarray:
        """Per-example outcomes from the rows' raw outcomes (the same array where an example is one row)."""
        return raw if self.rows is None else self.rows.collect(raw)

    def correct_many(self, masks: list[torch.Tensor] | None = None, uniform: list[torch.Tensor] | None = None,
                     budget: int | None = None) -> list[np.ndarray]:
        """Correctness under each of several interventions, stacked along the batch where the device pays
        (not counted in ``passes``: a sweep's units may run in other processes; the probe counts them)."""
        cache = self.cache if self.cache is not None and self.cache.inputs else None
        if self.rows is not None:
            judge = self.rows.judge
        else:
            judge = None if self.score.name == "accuracy" else self.score.outcome
        outs = evaluate_units(self.target.model, self.sites, self.batches, self.labels, masks=masks,
                              uniform=uniform, budget=budget if budget is not None else self.budget, cache=cache,
                              judge=judge, logits_of=self.logits_of)
        return [self._collect(o.numpy()) for o in outs]

    def correct(self, mask: torch.Tensor | None = None, uniform: torch.Tensor | None = None) -> np.ndarray:
        device = self.target.device
        out: torch.Tensor | None = None  # on the device until the end
        labels = self.labels.to(device)
        self.passes += 1
        plain = mask is None and uniform is None
        judge = self.rows.judge if self.rows is not None else self.score.outcome
        margin = self.score.margin if plain and self.rows is None else None
        margins = torch.empty(len(self.labels), device=device) if margin is not None else None
        capture = self.cache.capture() if plain and self.cache is not None and not self.cache.inputs else contextlib.nullcontext()
        with torch.inference_mode(), head_intervention(self.target.model, self.sites, mask=mask, uniform=uniform), capture:
            for idx, batch in progress(self.batches, desc="predict" if plain else "predict (intervened)"):
                where = torch.tensor(idx, device=device)
                logits = self.logits_of(self.target.forward(batch))
                outcome = judge(logits, labels[where])
                if out is None:
                    out = torch.empty((len(self.labels), *outcome.shape[1:]), dtype=outcome.dtype, device=device)
                out[where] = outcome
                if margin is not None and margins is not None:
                    margins[where] = margin(logits).to(margins.dtype)
        assert out is not None
        raw = out.cpu().numpy()
        if margins is not None:
            self.margins = margins.cpu().numpy()
        elif plain and self.rows is not None and self.rows.margins is not None:
            self.margins = self.rows.margins(raw)
        return self._collect(raw)

    def outcomes_of(self, model: Any) -> np.ndarray:
        """Per-example outcomes of another module on these batches (a physically pruned copy)."""
        parts = []
        judge = self.rows.judge if self.rows is not None else self.score.outcome
        with torch.inference_mode():
            for idx, batch in self.batches:
                parts.append((idx, judge(self.logits_of(model(**batch)), self.labels[idx].to(self.target.device)).cpu().numpy()))
        raw = np.concatenate([p for _, p in parts])[np.argsort(np.concatenate([i for i, _ in parts]))]
        return self._collect(raw)

    def importance(self, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Michel's E_x |dL(x)/d xi_h| at the given mask (ones by default), one forward+backward pass."""
        return head_importance(self.target, self.batches, self.labels, mask,
                               owner=self.rows.owner if self.rows is not None else None)


@dataclass(frozen=True)
class HeadSweep(Sweep):
    """Per-example correctness under head removals: a unit is ``(mode, cells)``, the ``(layer, head)`` cells
    to remove by masking (``mask``) or uniform attention (``uniform``). Single-head and layer ablations
    are units of one sweep, so an executor can shard them over workers that each build the
    pre-collated batches once."""

    batch_size: int | None = None
    stack_budget: int | None = None
    layer_cache: bool = True
    cache_budget_mb: float | None = None
    metric: str = "auto"
    rows: tuple[int, ...] | None = None  # a block of the examples (sequential sweeps); None: all of them
    max_examples: int | None = None  # the probe's sample of the data (``sampled``), drawn again by a worker
    sample_seed: int = 0

    def evaluator(self, target: Target, data: Dataset) -> Evaluator:
        """The evaluator these settings describe, its layer cache enabled but still empty. ``data`` is the suite's
        data (a worker's) or the probe's sample of it: the sample is drawn again, the same either way."""
        data = sampled(data, self.max_examples, self.sample_seed)
        ev = Evaluator(target, data, self.batch_size, self.metric, subset=self.rows)
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


def pruning_curve(ev: Evaluator, order_scores: torch.Tensor, params: HeadParams, base: float,
                  ctx: ProbeContext, sweep: HeadSweep | None = None, data: Dataset | None = None,
                  base_correct: np.ndarray | None = None) -> list[dict[str, Any]]:
    """Prune heads from least to most important in steps; optionally re-rank after each step (Michel).

    Without re-ranking every step's heads are known up front, so with a ``sweep`` the steps are work
    units of it (stacked along the batch where the device pays, resumable, shardable); re-ranking
    needs each step's model before the next, so it evaluates them one after another. Sequential sweeps
    (with ``data`` and ``base_correct``) stop each step once its drop is decided against the tolerance
    (``classify_drop``, one-sided bounds at ``params.confidence``, as ``prunable_fraction_interval`` reads
    them): such a point carries ``ci``, ``examples`` and ``settled`` instead of its per-example outcomes,
    and its metric is the baseline plus its paired change on the examples it used."""
    layers, heads = ev.shape
    real = ev.real
    total = int(real.sum())
    mask = real.float()
    pruned: list[tuple[int, int]] = []
    curve = [{"fraction": 0.0, "heads_pruned": 0, "metric": base}]
    steps = math.ceil(1 / params.step - 1e-9)  # the last step reaches 100% even when step does not divide 1
    scores = order_scores.clone()
    stacked = sweep is not None and not params.iterative

    def point(cells: list[tuple[int, int]], correct: np.ndarray) -> dict[str, Any]:
        return {"fraction": len(cells) / total, "heads_pruned": len(cells), "metric": ev.score.value(correct),
                "pruned": [list(p) for p in cells], "correct": correct}

    points: list[tuple[int, list[tuple[int, int]]]] = []  # (step, heads pruned) awaiting evaluation
    counted = 0  # heads pruned at the last step kept
    ks = range(1, steps + 1) if stacked else ctx.progress(range(1, steps + 1), total=steps, desc="pruning curve")
    for k in ks:
        target_n = min(total, int(round(k * params.step * total)))
        if params.iterative and pruned:  # Michel: re-compute importance with the heads pruned so far
            scores = ev.importance(mask)
            scores = normalize_by_layer(scores) if params.normalize else scores
        remaining = scores.masked_fill((mask == 0) | ~real, float("inf")).flatten().argsort()
        for f in remaining[: target_n - len(pruned)].tolist():
            layer, head = divmod(f, heads)
            mask[layer, head] = 0
            pruned.append((layer, head))
        if len(pruned) == counted:
            continue  # few heads: this step rounds to the previous count
        counted = len(pruned)
        if stacked:
            points.append((k, list(pruned)))
        else:
            curve.append(point(pruned, ev.correct(mask=mask)))
        if len(pruned) >= total:
            break
    if stacked:
        units = [(f"curve{k}", ("mask", cells)) for k, cells in points]
        if data is not None and base_correct is not None and sequential_ok(ev, params, base_correct):
            one_sided = 1 - 2 * (1 - params.confidence)  # its bounds are prunable_fraction's one-sided ones
            rows = sweep_units(units, ev, sweep, data, base_correct, params, ctx, "pruning curve",  # type: ignore[arg-type]
                               [ctx.seed] * len(units), decide=classify_drop, confidence=one_sided,
                               resamples=max(params.bootstrap, 200))
            for (_, cells), row in zip(points, rows):
                curve.append({"fraction": len(cells) / total, "heads_pruned": len(cells), "metric": base + row["delta"],
                              "pruned": [list(p) for p in cells], **row})
            return curve
        for (_, cells), values in zip(points, ctx.map(sweep, units, desc="pruning curve", group=params.stack)):
            curve.append(point(cells, _outcomes(values, ev.score.graded)))
        ev.passes += len(points)
        ev.sweep_passes, ev.sweep_units = ev.sweep_passes + len(points), ev.sweep_units + len(points)
    return curve


def prunable_from_intervals(points: list[dict[str, Any]], tolerance: float) -> tuple[float, float, float]:
    """``prunable_fraction_interval``'s reading from each step's own interval of the accuracy change (a
    sequential curve): ``high`` runs while no drop is significantly larger than the tolerance (upper bound of
    the change >= -tolerance), ``low`` while every drop is significantly within it (lower bound >= -tolerance)."""
    high = low = 0.0
    high_open = low_open = True
    for p in points:
        lower, upper = p["ci"] if p.get("ci") else (float("-inf"), float("inf"))
        high_open = high_open and upper >= -tolerance - 1e-12
        low_open = low_open and lower >= -tolerance - 1e-12
        if high_open:
            high = p["fraction"]
        if low_open:
            low = p["fraction"]
    return high, low, high


def _outcomes(values: Any, graded: bool = False) -> np.ndarray:
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


def prunable_fraction(curve: list[dict[str, Any]], base: float, tolerance: float) -> float:
    """The plain reading: the largest step such that it and every smaller one stay within ``tolerance``
    of the baseline. One example can move it across a flat stretch of the curve (see the interval)."""
    best = 0.0
    for point in curve:
        if point["metric"] < base - tolerance - 1e-12:
            break
        best = point["fraction"]
    return best


def prunable_fraction_interval(base_correct: np.ndarray, steps: list[np.ndarray], fractions: list[float],
                               tolerance: float, confidence: float = 0.95, resamples: int = 1000,
                               seed: int = 0, score: Any = None,
                               groups: Sequence[str] | None = None) -> tuple[float, float, float]:
    """``prunable_fraction`` with the uncertainty of a finite test set: (value, low, high).

    For each step of the curve, the paired accuracy drop (baseline minus pruned, example by example) is
    bootstrapped over examples, the same resamples for every step. ``value`` (= ``high``) is the largest
    fraction such that it and every smaller step have a drop *not significantly larger* than the
    tolerance (the one-sided lower bound of the drop is within it); ``low`` is the largest such that
    every drop is *significantly within* it (the upper bound is). A verdict between ``low`` and ``high``
    depends on which examples happened to be in the test set. ``groups`` (a reader's questions by context)
    resamples whole contexts, the same draws for every step.
    """
    if not steps:
        return 0.0, 0.0, 0.0
    if score is not None and not score.decomposable:  # micro-F1: the metric recomputed on each resample
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, len(base_correct), size=(resamples, len(base_correct)))
        base_values = score.resampled(base_correct, idx)
        drops_per_step = [base_values - score.resampled(c, idx) for c in steps]
    else:
        base = np.asarray(base_correct, dtype=np.float64)  # one generator seeded alike per step: the same resamples
        drops_per_step = [bootstrap_means(base - np.asarray(c, dtype=np.float64), resamples, np.random.default_rng(seed),
                                          groups) for c in steps]
    alpha = 1 - confidence
    high = low = 0.0
    high_open = low_open = True
    for fraction, drops in zip(fractions, drops_per_step):
        lower, upper = float(np.quantile(drops, alpha)), float(np.quantile(drops, 1 - alpha))
        high_open = high_open and lower <= tolerance + 1e-12
        low_open = low_open and upper <= tolerance + 1e-12
        if high_open:
            high = fraction
        if low_open:
            low = fraction
    return high, low, high


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
            correct = _outcomes(values, ev.score.graded)
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
        return [_outcomes(v, ev.score.graded) for v in values]

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



def sampled(data: Dataset, most: int | None, seed: int) -> Dataset:
    """At most ``most`` examples of ``data``: a sample fixed by ``seed``, kept in data order (all when None or fewer)."""
    if most is None or len(data) <= most:
        return data
    keep = sorted(np.random.default_rng(seed).choice(len(data), size=most, replace=False).tolist())
    return Dataset([data.examples[i] for i in keep], name=data.name, label_names=data.label_names)


class HeadPruningProbe(Probe):
    """Head importance map, single-head and layer ablations, pruning curve (Michel 2019; Kovaleva 2019).

    Metrics: ``importance_gini``, ``max_single_head_drop``, ``heads_improving_when_removed``,
    ``layer_max_drop``, ``prunable_fraction``, ``speedup`` (with ``physical: true``), ``baseline``.
    """

    name = "head-pruning"
    description = "Head importance (Michel 2019), head/layer ablation (Kovaleva 2019) and pruning curve"
    requires = frozenset({"predictions", "heads", "data:labels"})
    tasks = frozenset({"classification", "multiple-choice", "multi-label", "token-classification", "question-answering"})
    metrics = {
        "importance_gini": "concentration of raw importance over heads (0 even, 1 one head)",
        "max_single_head_drop": "largest accuracy drop from removing one head (CI: paired bootstrap of that head's drop)",
        "heads_improving_when_removed": "heads whose removal raises accuracy",
        "layer_max_drop": "largest accuracy drop from removing one layer's heads (CI: paired bootstrap)",
        "prunable_fraction": "largest share of heads pruned whose paired accuracy drop is not significantly above tolerance",
        "speedup": "relative examples/s gain with physical_fraction of the heads removed (median of interleaved repeats)",
        "speedup_latency": "relative examples/s gain at batch 1 (latency)",
        "baseline": "accuracy of the unmodified model",
        "importance_cost_passes": "importance wall time in units of one plain evaluation pass",
        "ablation_passes": "single-head and layer ablations and pruning-curve steps in full-pass equivalents (sequential sweeps stop decided units early)",
        "ablation_passes_saved": "share of one full pass per unit the sequential sweep did not need",
    }
    Params = HeadParams
    key_metrics = ("max_single_head_drop", "layer_max_drop", "prunable_fraction")  # descriptive: no default bound
    paper = "Michel, Levy, Neubig 2019. Are Sixteen Heads Really Better than One? (NeurIPS); Kovaleva, Romanov, Rogers, Rumshisky 2019. Revealing the Dark Secrets of BERT (EMNLP)"
    metric_directions = {"baseline": True, "importance_gini": None, "importance_cost_passes": False, "layer_max_drop": False, "prunable_fraction": True, "max_single_head_drop": False, "heads_improving_when_removed": None, "speedup": True, "speedup_latency": True, "ablation_passes": False, "ablation_passes_saved": None}

    def run(self, target: Target, data: Dataset | None, params: HeadParams, ctx: ProbeContext) -> ProbeResult:
        assert data is not None
        data = sampled(data, params.max_examples, ctx.seed)
        sweep = HeadSweep(params.batch_size, params.stack_budget, params.layer_cache, params.cache_budget_mb,
                          params.metric, max_examples=params.max_examples, sample_seed=ctx.seed)
        ev = sweep.evaluator(target, data)  # its layer cache is filled by the plain pass below
        sweep.bind(target, data, state=ev)
        layers, heads = ev.shape
        result = ProbeResult(probe=self.name)
        t0 = time.perf_counter()
        base_correct = ev.correct()
        eval_seconds = time.perf_counter() - t0
        base = ev.score.value(base_correct)
        exact = base_correct if base_correct.ndim == 1 else base_correct[:, 1:].sum(axis=1) == 0  # no fp, no fn
        outcome = ev.score.name if ev.score.graded else "correct"  # a reader: each question's F1 (a score)
        result.outcomes.append(Outcomes.from_values(outcome, example_ids(ev.examples), exact.tolist(),
                                                    "score" if ev.score.graded else "binary", cluster_keys(ev.groups)))
        if ev.dropped:
            result.details.setdefault("warnings", []).append(
                f"{ev.dropped} sentences longer than max_length are left out of the head sweeps")
        result.add_metric("baseline", base, True, f"{ev.score.name} of the unmodified model",
                          outcome=outcome if ev.score.decomposable else None)
        result.details["metric"] = ev.score.name

        t0 = time.perf_counter()
        raw = ev.importance()
        importance_seconds = time.perf_counter() - t0
        norm = normalize_by_layer(raw)
        ranking = norm if params.normalize else raw
        result.add_metric("importance_gini", gini(raw.flatten().numpy()), None,
                          "concentration of raw importance over heads (0 even, 1 one head)")
        result.add_metric("importance_cost_passes", importance_seconds / max(eval_seconds, 1e-9), False,
                          "importance wall time in units of one plain evaluation pass", kind="cost")
        result.details["importance"] = raw.tolist()
        result.details["importance_normalized"] = norm.tolist()
        maps = [heatmap_spec("head importance (raw)", layer_head_heatmap(raw)),
                heatmap_spec("head importance (normalised per layer)", layer_head_heatmap(norm))]

        if params.ablation:
            deltas = self._ablate(result, ev, sweep, data, base_correct, params, ctx)
            maps.append(heatmap_spec("accuracy change when the head is removed", layer_head_heatmap(deltas)))
        if params.layers:
            units = [(f"layer{layer}", ("mask", [(layer, h) for h in range(heads) if ev.real[layer, h]]))
                     for layer in range(layers)]
            rows = []
            for layer, row in enumerate(sweep_units(units, ev, sweep, data, base_correct, params, ctx,
                                                          "layer ablation", [10_000 + layer for layer in range(layers)])):
                rows.append({"layer": layer, "drop": -row["delta"], "ci": (-row["ci"][1], -row["ci"][0]) if row["ci"] else None,
                             **{k: row[k] for k in ("examples", "settled") if k in row}})
            result.details["layer_ablation"] = rows
            worst_layer = max(rows, key=lambda r: r["drop"])
            result.add_metric("layer_max_drop", worst_layer["drop"], False,
                              "largest accuracy drop from removing one layer's heads (CI: paired bootstrap of that "
                              "layer's drop)", ci=worst_layer["ci"], kind="extreme")
        if params.pruning:
            curve = pruning_curve(ev, ranking, params, base, ctx, sweep, data, base_correct)
            result.details["pruning_curve"] = [{k: v for k, v in p.items() if k not in ("pruned", "correct")}
                                               for p in curve]
            if any("settled" in p for p in curve):  # sequential: each step's own interval
                value, low, high = prunable_from_intervals(curve[1:], params.tolerance)
            else:
                steps = [p for p in curve if "correct" in p]
                value, low, high = prunable_fraction_interval(
                    base_correct, [p["correct"] for p in steps], [p["fraction"] for p in steps], params.tolerance,
                    params.confidence, max(params.bootstrap, 200), ctx.seed, ev.score, ev.groups)
            result.add_metric("prunable_fraction", value, True,
                              f"largest share of heads pruned whose paired accuracy drop is not significantly larger "
                              f"than {params.tolerance:g} (one-sided {params.confidence:.0%} bootstrap); the interval "
                              "runs from the share significantly within it", ci=(low, high))
            result.details["prunable_fraction_plain"] = prunable_fraction(curve, base, params.tolerance)
            if params.physical:
                self._physical(result, target, ev, curve, params, ranking)
        if ev.sweep_units:
            used, exact = ev.sweep_passes, ev.sweep_units
            result.add_metric("ablation_passes", used, False, "single-head and layer ablations and pruning-curve steps in "
                              "full-pass equivalents "
                              "(examples evaluated / examples)", kind="cost")
            result.add_metric("ablation_passes_saved", 1 - used / exact, None, "share of the exact sweep's passes (one "
                              "full pass per unit) the sequential sweep did not need", kind="cost")
            census = f"; a census of the {ev.census:,} closest decisions first" if ev.census else ""
            how = why_exact(ev, params, base_correct) or f"{1 - used / exact:.0%} saved{census}"
            result.details["summary"] = {**result.details.get("summary", {}),
                                         "ablation passes": f"{used:.1f} full-pass equivalents for {exact} units ({how})"}
        result.details["figures"] = maps + head_figures(result, params.tolerance)
        result.details["evaluations"] = ev.passes
        top = raw.flatten().argsort(descending=True)[:3].tolist()
        result.details["summary"] = {
            **result.details.get("summary", {}),
            "most important heads": ", ".join(f"L{f // heads}H{f % heads}" for f in top),
            "evaluations": f"{ev.passes:.4g} passes over {len(ev.examples)} examples"
                           + (f" ({len(ev.labels)} windows)" if ev.rows is not None else ""),
            "layer cache": ev.cache_note,
        }
        result.details["key_finding"] = pruning_finding(result, params.tolerance)
        return result

    def _ablate(self, result: ProbeResult, ev: Evaluator, sweep: HeadSweep, data: Dataset, base_correct: np.ndarray,
                params: HeadParams, ctx: ProbeContext) -> torch.Tensor:
        """Each head removed alone: the ablation table, its metrics and findings; returns the accuracy changes."""
        layers, heads = ev.shape
        table = []
        deltas = torch.zeros(layers, heads)
        pairs = [(layer, head) for layer in range(layers) for head in range(heads) if ev.real[layer, head]]
        # each head is a work unit (a resumed run continues the sweep where it stopped; an executor may
        # shard them); groups of units share forward passes, stacked along the batch where the device pays
        units = [(f"L{layer}H{head}", (params.mode, [(layer, head)])) for layer, head in pairs]
        rows = sweep_units(units, ev, sweep, data, base_correct, params, ctx, f"head ablation ({params.mode})",
                                 [layer * heads + head for layer, head in pairs])
        for (layer, head), row in zip(pairs, rows):
            deltas[layer, head] = row["delta"]
            table.append({"layer": layer, "head": head, **row})
        result.details["ablation"] = table
        worst = min(table, key=lambda r: r["delta"]) if table else None
        drop_ci = (-worst["ci"][1], -worst["ci"][0]) if worst and worst["ci"] else None
        result.add_metric("max_single_head_drop", float(-deltas.min()) + 0.0, False,
                          "largest accuracy drop from removing one head (CI: paired bootstrap of that head's drop)",
                          ci=drop_ci, kind="extreme")
        result.add_metric("heads_improving_when_removed", float((deltas > 0).sum()), None,
                          "heads whose removal raises accuracy", kind="count")
        hurt = [r for r in sorted(table, key=lambda r: r["delta"]) if r["delta"] < 0][: params.findings]
        helps = [r for r in sorted(table, key=lambda r: -r["delta"]) if r["delta"] > 0][: params.findings]
        for row, title in [(r, "removal hurts") for r in hurt] + [(r, "removal helps") for r in helps]:
            ci = f" (CI {row['ci'][0]:+.4f}..{row['ci'][1]:+.4f})" if row["ci"] else ""
            if row["examples"] < len(base_correct):  # a sequential unit stopped once decided
                ci += f" on {row['examples']} of {len(base_correct)} examples ({row['settled']})"
            result.findings.append(Finding(
                title=f"layer {row['layer']} head {row['head']}: {title}",
                observed=f"accuracy change {row['delta']:+.4f}{ci}",
                score=row["delta"],
            ))
        return deltas

    def _physical(self, result: ProbeResult, target: Target, ev: Evaluator, curve: list[dict[str, Any]],
                  params: HeadParams, ranking: torch.Tensor) -> None:
        from bertprobe.model.pruning import count_parameters, prune_heads

        started = time.perf_counter()
        layers, heads = ev.shape
        drop = least_important(ranking, params.physical_fraction, heads_per_layer(ev.sites))
        n = len(drop)
        try:
            pruned, notes = prune_heads(target.model, drop)
        except ValueError as exc:
            result.details["physical"] = {"skipped": str(exc)}
            return
        # throughput: large batches; latency: one example per pass. Interleaved, repeated, bounded in time.
        batches = [b for _, b in target.batches(ev.encoded, params.speed_batch_size)]
        throughput = compare_speed(target.model, pruned, batches, target.device, params.speed_seconds * 0.7)
        singles = [target.collate([ev.encoded.rows[i]]) for i in range(min(64, len(ev.encoded)))]
        latency = compare_speed(target.model, pruned, singles, target.device, params.speed_seconds * 0.3)
        before, after = throughput["per_s_before"], throughput["per_s_after"]
        mask = torch.ones(layers, heads)
        for layer, head in drop:
            mask[layer, head] = 0
        masked_accuracy = ev.score.value(ev.correct(mask=mask))
        pruned_correct = ev.outcomes_of(pruned)
        result.add_metric("speedup", throughput["speedup"], True,
                          f"relative examples/s gain at batch {params.speed_batch_size} with {params.physical_fraction:.0%} "
                          "of heads physically pruned (median of interleaved repeats; CI: their range)",
                          kind="cost", ci=throughput["spread"])
        result.add_metric("speedup_latency", latency["speedup"], True,
                          "relative gain in examples/s at batch 1 (latency), median of interleaved repeats",
                          kind="cost", ci=latency["spread"])
        result.details.setdefault("summary", {})["physical pruning"] = (
            f"{n} heads: throughput {throughput['speedup']:+.1%} (range {throughput['spread'][0]:+.1%}.."
            f"{throughput['spread'][1]:+.1%}), latency {latency['speedup']:+.1%}")
        result.details["physical"] = {
            "heads_pruned": n, "examples_per_s_before": before, "examples_per_s_after": after,
            "throughput": throughput, "latency": latency,
            "parameters_before": count_parameters(target.model), "parameters_after": count_parameters(pruned),
            "accuracy_masked": masked_accuracy, "accuracy_pruned": ev.score.value(pruned_correct),
            "notes": notes, "seconds": time.perf_counter() - started,
        }


def head_figures(result: ProbeResult, tolerance: float) -> list[dict[str, Any]]:
    """The pruning curve with its tolerance band and prunable_fraction marked, and the layer-ablation bars
    (the importance and ablation maps are ``details["heatmaps"]``, drawn with a colour bar; changes
    centred on 0)."""
    figures: list[dict[str, Any]] = []
    metric = str(result.details.get("metric", "accuracy"))
    curve = result.details.get("pruning_curve")
    base = result.value("baseline")
    if curve and base is not None:
        marks = []
        prunable = result.metrics.get("prunable_fraction")
        if prunable is not None and prunable.value is not None:
            marks.append({"x": prunable.value, "label": f"prunable {prunable.value:.2f}"})
        figures.append({"kind": "line", "title": f"pruning curve: {metric} as heads are removed, least important first",
                        "data": {"series": [{"name": metric, "x": [p["fraction"] for p in curve],
                                             "y": [p["metric"] for p in curve]}],
                                 "band": [base - tolerance, base], "band_label": f"within {tolerance:g} of baseline",
                                 "marks": marks},
                        "axes": {"x": "fraction of heads pruned", "y": metric}})
    layers = result.details.get("layer_ablation")
    if layers:
        figures.append({"kind": "bars", "title": f"{metric} drop when all heads of one layer are removed",
                        "data": {"labels": [f"L{r['layer']}" for r in layers],
                                 "series": [{"name": "drop", "values": [r["drop"] for r in layers]}]},
                        "axes": {"x": "layer", "y": f"{metric} drop"}})
    return figures


def pruning_finding(result: ProbeResult, tolerance: float) -> str:
    """One line: the most harmful head, the most harmful layer, and how much may be pruned, in points of the
    probe's metric (accuracy, or entity F1 for a tagger)."""
    metric = result.details.get("metric", "accuracy")
    parts = []
    table = result.details.get("ablation") or []
    if table:
        worst = min(table, key=lambda r: r["delta"])
        parts.append(f"removing L{worst['layer']}H{worst['head']} costs {-100 * worst['delta']:.1f} points of "
                     f"{metric} (the most of {len(table)} heads)")
    layers = result.details.get("layer_ablation") or []
    if layers:
        worst_layer = max(layers, key=lambda r: r["drop"])
        parts.append(f"removing all of L{worst_layer['layer']} {100 * worst_layer['drop']:.1f}")
    prunable = result.metrics.get("prunable_fraction")
    if prunable is not None and prunable.value is not None:
        ci = f" [{prunable.ci[0]:.0%}, {prunable.ci[1]:.0%}]" if prunable.ci else ""
        points = f"{100 * tolerance:g} point" + ("" if 100 * tolerance == 1 else "s")
        parts.append(f"{prunable.value:.0%}{ci} of heads prunable within {points}")
    return "; ".join(parts)


@hookimpl
def bertprobe_register_probes(registry: Any) -> None:
    registry.add(HeadPruningProbe)
