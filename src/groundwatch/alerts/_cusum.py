"""Integer CUSUMs and their exact run lengths: the designs :class:`~.detector.DropDetector` runs.

A design turns one observation into an integer step of a one-sided CUSUM ``S = max(0, S + X)``;
with integer steps the statistic is a finite Markov chain whose average run length is solved
exactly (Brook & Evans, 1972), and the alarm threshold is the smallest whose in-control run
length reaches a target.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["MeanDesign", "RateDesign", "cusum_arl", "threshold_for_arl"]

# Grid of the integer CUSUM: the larger step of the rate CUSUM spans this many units, the mean
# CUSUM moves in steps of this fraction of a standard deviation. Finer grids change run lengths by
# well under a percent and cost quadratically more to solve.
_RATE_GRID = 20
_MEAN_GRID = 0.25
_MEAN_CLAMP_SIGMAS = 6.0
_MIN_SIGMA = 0.05


# --------------------------------------------------------------------------------------------
# Exact run lengths of an integer CUSUM


def cusum_arl(increments: Mapping[int, float], threshold: int) -> float:
    """Average run length of the integer CUSUM ``S = max(0, S + X)`` started at 0.

    ``X`` takes the integer value ``i`` with probability ``increments[i]`` (independently each
    step); the run ends at the first ``S >= threshold``. Exact for the chain: it solves
    ``(I - P) L = 1`` over the transient states ``0 .. threshold-1`` (Brook & Evans, 1972) with a
    banded elimination, ``O(threshold * max|X|^2)``.

    Returns ``math.inf`` when the threshold can never be reached.
    """
    h = int(threshold)
    if h <= 0:
        return 1.0
    probs = {int(i): float(p) for i, p in increments.items() if p > 0.0}
    if not probs or max(probs) <= 0:
        return math.inf
    lo = max(0, -min(probs))
    hi = max(0, max(probs))
    width = lo + hi + 1
    # Row s of (I - P) holds the columns s-lo .. s+hi at offsets 0 .. width-1.
    rows = [[0.0] * width for _ in range(h)]
    rhs = [1.0] * h
    for s in range(h):
        row = rows[s]
        row[lo] += 1.0
        for step, p in probs.items():
            nxt = s + step
            if nxt >= h:
                continue  # absorbed: the alarm
            nxt = max(nxt, 0)
            row[nxt - s + lo] -= p
    # (I - P) is a non-singular M-matrix when the alarm is reachable, so elimination without
    # pivoting is stable and fill-in stays inside the band.
    for i in range(h):
        pivot_row = rows[i]
        pivot = pivot_row[lo]
        if pivot <= 1e-300:
            return math.inf
        last_col = min(h - 1, i + hi)
        for r in range(i + 1, min(h, i + lo + 1)):
            row = rows[r]
            factor = row[i - r + lo]
            if factor == 0.0:
                continue
            factor /= pivot
            for c in range(i, last_col + 1):
                row[c - r + lo] -= factor * pivot_row[c - i + lo]
            rhs[r] -= factor * rhs[i]
    arl = [0.0] * h
    for i in range(h - 1, -1, -1):
        row = rows[i]
        acc = rhs[i]
        for c in range(i + 1, min(h - 1, i + hi) + 1):
            acc -= row[c - i + lo] * arl[c]
        arl[i] = acc / row[lo]
    return arl[0] if arl[0] > 0 else math.inf


def threshold_for_arl(increments: Mapping[int, float], target_arl: float) -> int:
    """Smallest integer threshold whose in-control run length is at least ``target_arl``."""
    key = tuple(sorted((int(i), float(p)) for i, p in increments.items() if p > 0.0))
    return _threshold_for_arl(key, float(target_arl))


@lru_cache(maxsize=256)
def _threshold_for_arl(key: tuple[tuple[int, float], ...], target: float) -> int:
    incs = dict(key)
    lo_h, hi_h = 1, max(1, max(incs))
    while cusum_arl(incs, hi_h) < target:
        lo_h, hi_h = hi_h, hi_h * 2
        if hi_h > 1_000_000:  # pragma: no cover - only for a degenerate law
            return hi_h
    while lo_h < hi_h:
        mid = (lo_h + hi_h) // 2
        if cusum_arl(incs, mid) >= target:
            hi_h = mid
        else:
            lo_h = mid + 1
    return hi_h


# --------------------------------------------------------------------------------------------
# Designs: how one series turns an observation into an integer CUSUM step


@dataclass(frozen=True)
class RateDesign:
    """Bernoulli CUSUM for a rise of a rate from ``p0`` to ``p1``, in integer steps.

    A hallucination adds ``up``, any other answer subtracts ``down``; ``up / down`` approximates
    ``ln(p1/p0) / -ln((1-p1)/(1-p0))`` and ``scale`` converts back to log-likelihood units.
    """

    p0: float
    p1: float
    up: int
    down: int
    scale: float
    h: int

    @classmethod
    def build(cls, p0: float, p1: float, target_arl: float) -> RateDesign:
        a = math.log(p1 / p0)
        b = -math.log((1.0 - p1) / (1.0 - p0))
        scale = max(_RATE_GRID / max(a, b), 2.0 / min(a, b))
        scale = min(scale, 10 * _RATE_GRID / min(a, b))
        up = max(1, round(a * scale))
        down = max(1, round(b * scale))
        h = threshold_for_arl({up: p0, -down: 1.0 - p0}, target_arl)
        return cls(p0=p0, p1=p1, up=up, down=down, scale=scale, h=h)

    def step(self, x: float) -> int:
        return self.up if x >= 0.5 else -self.down

    @property
    def indifference(self) -> float:
        """The rate at which the statistic does not move on average (between ``p0`` and
        ``p1``): above it, evidence for the rise builds up; below it, it drains."""
        return self.down / (self.up + self.down)

    def in_control(self, mean: float) -> bool:
        """Whether a recent rate is on the baseline's side of :attr:`indifference`."""
        return mean < self.indifference

    def arl(self, p: float) -> float:
        """Run length from zero when the true rate is ``p``."""
        return cusum_arl({self.up: p, -self.down: 1.0 - p}, self.h)


@dataclass(frozen=True)
class MeanDesign:
    """Lower CUSUM on a standardised score, ``S = max(0, S + (mu0 - x)/sigma0 - k)``, on a grid."""

    mu0: float
    sigma0: float
    k: float
    h: int

    @classmethod
    def build(
        cls,
        sample: Sequence[float],
        shift_sigmas: float,
        target_arl: float,
        se_shift: float = 1.0,
        tail_mass: float = 0.004,
    ) -> MeanDesign:
        n = len(sample)
        mu0 = sum(sample) / n
        var = sum((x - mu0) ** 2 for x in sample) / max(1, n - 1)
        sigma0 = max(math.sqrt(var), _MIN_SIGMA)
        design = cls(mu0=mu0, sigma0=sigma0, k=shift_sigmas / 2.0, h=1)
        # In-control law: the bootstrap law of the warm-up, shifted down by one standard error so
        # that an optimistic warm-up mean does not turn into false alarms, plus ``tail_mass`` at
        # the worst score (0): a few hundred answers under-sample the rare very bad answer, and
        # the run length is most sensitive to exactly that tail.
        se = se_shift * sigma0 / math.sqrt(n)
        law: dict[int, float] = {}
        for x in sample:
            step = design.step(x - se)
            law[step] = law.get(step, 0.0) + (1.0 - tail_mass) / n
        worst = design.step(0.0)
        law[worst] = law.get(worst, 0.0) + tail_mass
        h = threshold_for_arl(law, target_arl)
        return cls(mu0=mu0, sigma0=sigma0, k=design.k, h=h)

    def step(self, x: float) -> int:
        z = (self.mu0 - x) / self.sigma0
        z = min(max(z, -_MEAN_CLAMP_SIGMAS), _MEAN_CLAMP_SIGMAS)
        return round((z - self.k) / _MEAN_GRID)

    @property
    def indifference(self) -> float:
        """The mean at which the statistic does not move on average: ``k`` standard
        deviations below the baseline, half way to the drop the design is tuned for."""
        return self.mu0 - self.k * self.sigma0

    def in_control(self, mean: float) -> bool:
        """Whether a recent mean is on the baseline's side of :attr:`indifference`."""
        return mean > self.indifference
