"""Proper scores and temperature scaling, shared by the calibration probe's classes audit and its sections
(entities, label sets): Brier and NLL, softmax and sigmoid at a temperature, the temperature fitted by NLL (a
golden-section search on log T), and the judgement of whether the fitted temperature helps on held-out data.
See ``bertprobe.probes.calibration.probe`` for the papers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from bertprobe.results import ProbeResult
from bertprobe.stats import paired_bootstrap_statistic


def proper_scores(probs: np.ndarray, gold: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per example: the multi-class Brier score and the negative log-likelihood of the gold class."""
    onehot = np.zeros_like(probs)
    onehot[np.arange(len(gold)), gold] = 1.0
    brier = ((probs - onehot) ** 2).sum(axis=1)
    nll = -np.log(np.clip(probs[np.arange(len(gold)), gold], 1e-12, None))
    return brier, nll


def fit_temperature(logits: np.ndarray, gold: np.ndarray, low: float = -3.0, high: float = 3.0, steps: int = 60) -> float:
    """T > 0 minimising the NLL of softmax(logits / T): golden-section search on log T in [e^low, e^high]."""

    def nll(log_t: float) -> float:
        z = logits / math.exp(log_t)
        z = z - z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        return float(-logp[np.arange(len(gold)), gold].mean())

    return golden_section(nll, low, high, steps)


def binary_nll(logits: np.ndarray, gold: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Binary cross-entropy of sigmoid(logits / T) against 0/1 gold, element-wise (numerically stable)."""
    z = logits / temperature
    return np.maximum(z, 0) - z * gold + np.log1p(np.exp(-np.abs(z)))


def fit_binary_temperature(logits: np.ndarray, gold: np.ndarray, low: float = -3.0, high: float = 3.0,
                           steps: int = 60) -> float:
    """T > 0 minimising the mean binary cross-entropy of sigmoid(logits / T) over every (example, label) pair."""
    return golden_section(lambda log_t: float(binary_nll(logits, gold, math.exp(log_t)).mean()), low, high, steps)


def sigmoid(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-logits / temperature))


def golden_section(loss: Any, low: float, high: float, steps: int) -> float:
    """exp of the log T in [low, high] minimising ``loss(log T)`` (deterministic, no optimiser state)."""
    ratio = (math.sqrt(5) - 1) / 2
    a, b = low, high
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = loss(c), loss(d)
    for _ in range(steps):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = loss(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = loss(d)
    return math.exp((a + b) / 2)


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = logits / temperature
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


MIN_HELD_OUT = 100  # below this, a fitted temperature is flagged as resting on few examples


def judge_scaling(result: ProbeResult, held: int, change: Callable[[np.ndarray], tuple[float, float]],
                   params: Any, seed: int) -> None:
    """Advice only past noise. ``change(indices)`` is (NLL after - before, ECE after - before) on those held-out
    units; a paired bootstrap over the held-out units (``bertprobe.stats``, seeded) gives each change its 95%
    interval. A change is measurable when it is at least ``min_scaling_change`` and its interval excludes 0
    (without ``bootstrap``, on its size alone). Temperature scaling helps when it measurably lowers the NLL or
    the ECE and measurably raises neither; it is harmful when it measurably raises either (a warning: do not
    apply it); otherwise it has no measurable effect, whichever way the point estimates lean."""
    t = result.value("temperature") or 1.0
    nll, nll_t = result.value("nll_heldout") or 0.0, result.value("nll_heldout_scaled") or 0.0
    ece, ece_t = result.value("ece_heldout") or 0.0, result.value("ece_heldout_scaled") or 0.0
    deltas = (nll_t - nll, ece_t - ece)
    intervals = (paired_bootstrap_statistic(change, held, params.bootstrap, 0.95, seed) if params.bootstrap
                 else [None, None])
    for name, delta, ci, what in zip(("nll_heldout_change", "ece_heldout_change"), deltas, intervals, ("NLL", "ECE")):
        result.add_metric(name, delta, None, f"held-out {what} after temperature scaling minus before, with its "
                          "paired 95% interval", ci=ci)

    def measurable(delta: float, ci: tuple[float, float] | None) -> int:
        """-1 measurably lower, +1 measurably higher, 0 neither."""
        if abs(delta) < params.min_scaling_change or (ci is not None and ci[0] <= 0 <= ci[1]):
            return 0
        return 1 if delta > 0 else -1

    effects = [measurable(d, ci) for d, ci in zip(deltas, intervals)]
    verdict = 1 if -1 in effects and 1 not in effects else -1 if 1 in effects else 0
    result.add_metric("temperature_helps", float(verdict), None,
                      "1 when the fitted temperature measurably lowers the held-out NLL or ECE and raises neither "
                      "(apply it), -1 when it measurably raises one (do not), 0: no measurable effect")

    def shown(what: str, before: float, after: float, ci: tuple[float, float] | None) -> str:
        return f"{what} {before:.3f} -> {after:.3f}" + (f" [Δ {ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "")

    change_text = (f"held-out {shown('NLL', nll, nll_t, intervals[0])}, {shown('ECE', ece, ece_t, intervals[1])}")
    few = f"; fitted on few examples ({held} held out)" if held < MIN_HELD_OUT else ""
    if verdict == 1:
        result.details["temperature_scaling"] = f"temperature {t:.2f} helps ({change_text}): apply it{few}"
    elif verdict == -1:
        result.details["temperature_scaling"] = f"temperature {t:.2f} is harmful ({change_text}): do not apply it{few}"
        worse = " and ".join(w for w, e in zip(("NLL", "ECE"), effects) if e == 1)
        result.details.setdefault("warnings", []).append(
            f"the fitted temperature {t:.2f} measurably worsens the held-out {worse} ({change_text}): do not apply it"
            + few)
    else:  # the minimum is named where it, not the interval, made a change no effect
        small = any(abs(d) < params.min_scaling_change and (ci is None or not ci[0] <= 0 <= ci[1])
                    for d, ci in zip(deltas, intervals) if d)
        minimum = f"; a change under {params.min_scaling_change:g} counts as none" if small else ""
        result.details["temperature_scaling"] = f"temperature {t:.2f}: no measurable effect ({change_text}{minimum}){few}"

