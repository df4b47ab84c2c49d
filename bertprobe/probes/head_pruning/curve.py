"""The pruning curve of ``head-pruning``: heads pruned from least to most important, and how much may be pruned.

``pruning_curve`` evaluates the steps (Michel et al. 2019: one ranking, or re-ranked after each step);
``prunable_fraction`` is the plain reading of the curve, ``prunable_fraction_interval`` the one with the
uncertainty of a finite test set (paired bootstrap of each step's drop), and ``prunable_from_intervals`` the
same reading from a sequential curve's own intervals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from bertprobe.data.dataset import Dataset
from bertprobe.model.pruning import normalize_by_layer
from bertprobe.probe import ProbeContext
from bertprobe.probes.head_pruning.evaluator import Evaluator
from bertprobe.probes.head_pruning.params import HeadParams
from bertprobe.probes.head_pruning.sequential import classify_drop
from bertprobe.probes.head_pruning.sweep import HeadSweep, sequential_ok, sweep_units, unit_outcomes
from bertprobe.stats import bootstrap_means


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
            curve.append(point(cells, unit_outcomes(values, ev.score.graded)))
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
