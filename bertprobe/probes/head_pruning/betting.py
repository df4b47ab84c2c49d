"""A betting confidence sequence for the mean of a paired 0/1 difference, valid at every look.

Waudby-Smith & Ramdas (2024, "Estimating means of bounded random variables by betting", JRSS-B): for each
candidate mean ``m`` of ``y = (x + 1) / 2`` in ``[0, 1]`` (``x`` = changed - plain: in {-1, 0, 1} for 0/1
outcomes, in [-1, 1] for scores such as a question's F1; the bets' clipping bounds the loss alike), a gambler
bets ``lambda_t(m)`` on ``y_t - m`` with a stake chosen from the examples before ``t`` only (predictable):
the approximate growth-rate-adaptive (aGRAPA) bet ``(mu_hat - m) / (var_hat + (mu_hat - m)^2)``, clipped so
that one example never loses more than ``CLIP`` of the capital. Under a true mean ``m`` the capital is a
nonnegative martingale, so by Ville's inequality it ever reaches ``1 / alpha`` with probability at most
``alpha``, however often it is looked at: ``m`` is rejected once it has. The upward and downward bets are
two one-sided processes, each at ``alpha``; the confidence sequence is the set of ``m`` neither has
rejected, a ``1 - 2 alpha`` interval valid at any stopping time. No normal approximation: a unit that changed
nothing on its first examples is not declared harmless before its zero count means something (about
``log(1 / alpha) / tolerance`` examples), which the Wald intervals with a continuity fudge got wrong.
"""

from __future__ import annotations

import math

import numpy as np

CLIP = 0.8  # the largest share of its capital a bet may lose on one example


def delta_grid(tolerance: float) -> np.ndarray:
    """Candidate differences: fine (0.0005) within +-0.1, where units' effects and tolerances lie, coarse
    (0.01) out to +-0.99, and the tolerance's edges exactly."""
    fine = np.arange(-0.1, 0.1 + 1e-9, 0.0005)
    coarse = np.arange(-0.99, 0.99 + 1e-9, 0.01)
    return np.unique(np.round(np.concatenate([fine, coarse, [-tolerance, tolerance]]), 10))


class BettingSequence:
    """One unit's confidence sequence for the mean paired difference, fed block by block in a fixed order."""

    def __init__(self, alpha: float, grid: np.ndarray) -> None:
        self.threshold = math.log(1 / alpha)
        self.grid = grid
        self.m = (grid + 1) / 2  # candidate means of y = (x + 1) / 2
        g = grid.size
        self.log_up, self.log_down = np.zeros(g), np.zeros(g)
        self.best_up, self.best_down = np.zeros(g), np.zeros(g)  # running maxima: Ville's inequality
        self.t, self.total, self.squares = 0, 0.0, 0.0

    def update(self, x: np.ndarray) -> None:
        """Bet on each next difference (changed - plain, in [-1, 1]) in turn."""
        y = (np.asarray(x, dtype=np.float64) + 1) / 2
        if y.size == 0:
            return
        steps = self.t + np.arange(y.size)  # examples seen before each bet
        sums = self.total + np.concatenate([[0.0], np.cumsum(y)[:-1]])
        mu = (0.5 + sums) / (steps + 1)  # predictable: from earlier examples only
        resid = np.empty_like(y)
        squares = self.squares
        for i in range(y.size):  # the variance needs the mean before each step
            resid[i] = squares
            squares += (y[i] - mu[i]) ** 2
        var = (0.25 + resid) / (steps + 1)
        gap = mu[:, None] - self.m[None, :]
        bet = np.clip(gap / (var[:, None] + gap * gap), -CLIP / (1 - self.m), CLIP / self.m)
        move = y[:, None] - self.m[None, :]
        up = np.cumsum(np.log1p(np.maximum(bet, 0) * move), axis=0) + self.log_up
        down = np.cumsum(np.log1p(-np.maximum(-bet, 0) * move), axis=0) + self.log_down
        self.best_up = np.maximum(self.best_up, up.max(axis=0))
        self.best_down = np.maximum(self.best_down, down.max(axis=0))
        self.log_up, self.log_down = up[-1], down[-1]
        self.t += y.size
        self.total += float(y.sum())
        self.squares = squares

    def interval(self) -> tuple[float, float]:
        """The largest candidate below which every candidate is rejected by the upward bets, and the smallest
        above which every one is rejected by the downward bets (conservative on the grid)."""
        up = self.best_up >= self.threshold
        down = self.best_down >= self.threshold
        first_open = int(np.argmin(up)) if not up.all() else up.size
        last_open = up.size - 1 - int(np.argmin(down[::-1])) if not down.all() else -1
        low = float(self.grid[first_open - 1]) if first_open > 0 else -1.0
        high = float(self.grid[last_open + 1]) if last_open + 1 < self.grid.size else 1.0
        return low, max(low, high)


__all__ = ["BettingSequence", "CLIP", "delta_grid"]
