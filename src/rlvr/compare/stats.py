"""Paired confidence intervals over seeds (and held-out problems), with Student's t.

Runs of two arms with the same seed share the preset, the held-out problems and the
training prompts' order, so differences are taken **per seed** (paired). For held-out
scores the same problems are evaluated in every run, so they are paired by problem too.

:func:`paired_interval` takes ``arm`` and ``base`` arrays of shape ``[S, P]`` (``S``
seeds, ``P`` problems; ``P = 1`` for a per-run summary such as mean entropy) and treats
``d = arm - base`` as ``mu + seed effect + problem effect + noise``. The estimate is the
mean of ``d``; its variance is estimated as

    var(per-seed means of d) / S  +  var(per-problem means of d) / P   (the second if P > 1)

with sample variances (``ddof = 1``), and the interval is ``mean -+ t(df) * sqrt(var)`` at
``level`` (default 0.95). For ``P = 1`` this is the paired t interval over seeds (``df = S - 1``),
the textbook test for a handful of seeds. For ``P > 1`` ``df`` is Welch-Satterthwaite's for the
two terms (between ``S - 1`` and ``S + P - 2``: near ``S - 1`` when the seeds dominate the
variance, larger when the problems do); the sum is slightly conservative, since the
evaluation's sampling noise is counted in both terms, while Satterthwaite's df, estimated
from the same few seeds, is slightly liberal: simulated with 3 seeds and 200 problems and no
true difference, the interval excluded 0 in 2-7% of trials depending on which term dominates. With 3 seeds and a per-run summary
``t(2) = 4.30``: the interval excludes 0 only when the per-seed differences agree and are
tight relative to their mean.

A percentile bootstrap over seeds cannot give a 95% interval from 3 seeds (the 2.5% and 97.5%
quantiles of the resampled means are the smallest and largest seed difference, which
bracket 0 under no difference only 75% of the time); ``tests/compare/test_stats.py`` checks
the coverage of this interval under no difference.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

LEVEL = 0.95
MIN_SEEDS = 2
_GRID = 4001
"""Simpson points on [0, pi/2) for the t distribution's CDF (error far below 1e-9)."""


class Interval(NamedTuple):
    """A paired difference: its point estimate and confidence interval."""

    mean: float
    """Mean over seeds of the mean difference over problems."""
    low: float
    high: float
    seeds: int
    """Seeds the estimate is over."""

    def excludes_zero(self) -> int:
        """+1 when the interval is above 0, -1 when below, 0 when it contains 0."""
        if self.low > 0:
            return 1
        if self.high < 0:
            return -1
        return 0

    def text(self, digits: int = 3) -> str:
        return f"{self.mean:+.{digits}f} [{self.low:+.{digits}f}, {self.high:+.{digits}f}]"


def _t_cdf_upper_half(theta: float, df: float) -> float:
    """P(0 < T < sqrt(df) tan(theta)): the t density in theta = atan(t / sqrt(df)) is
    c * cos(theta)^(df - 1) with c = Gamma((df + 1) / 2) / (sqrt(pi) Gamma(df / 2))."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(math.pi)
    x = np.linspace(0.0, theta, _GRID)
    y = np.cos(x) ** (df - 1)
    h = theta / (_GRID - 1)
    simpson = h / 3 * (y[0] + y[-1] + 4 * y[1:-1:2].sum() + 2 * y[2:-1:2].sum())
    return c * float(simpson)


@functools.lru_cache(maxsize=64)
def t_quantile(q: float, df: float) -> float:
    """Quantile ``q`` of Student's t with ``df >= 1`` degrees of freedom (bisection on its CDF).

    >>> round(t_quantile(0.975, 2), 4)
    4.3027
    """
    if not df >= 1:
        raise ValueError(f"t quantile needs df >= 1, got {df}")
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile must be in (0, 1), got {q}")
    if q < 0.5:
        return -t_quantile(1.0 - q, df)
    target, lo, hi = q - 0.5, 0.0, math.pi / 2
    for _ in range(60):
        mid = (lo + hi) / 2
        if _t_cdf_upper_half(mid, df) < target:
            lo = mid
        else:
            hi = mid
    return math.sqrt(df) * math.tan((lo + hi) / 2)


def paired_interval(arm: np.ndarray, base: np.ndarray, *, level: float = LEVEL) -> Interval:
    """Student-t interval of ``mean(arm - base)``, paired by seed (rows) and problem (columns)."""
    arm, base = np.atleast_2d(np.asarray(arm, float)), np.atleast_2d(np.asarray(base, float))
    if arm.shape != base.shape:
        raise ValueError(f"paired arrays differ in shape: {arm.shape} vs {base.shape}")
    diff = arm - base  # [S, P]
    if diff.size == 0 or np.isnan(diff).any():
        raise ValueError("a paired interval needs complete, finite values for every seed")
    seeds, problems = diff.shape
    if seeds < MIN_SEEDS:
        raise ValueError(f"a paired interval needs at least {MIN_SEEDS} seeds, got {seeds}")
    seed_var = diff.mean(axis=1).var(ddof=1) / seeds
    problem_var = diff.mean(axis=0).var(ddof=1) / problems if problems > 1 else 0.0
    var = seed_var + problem_var
    df = float(seeds - 1)
    if problem_var > 0:  # Welch-Satterthwaite
        df = var**2 / (seed_var**2 / (seeds - 1) + problem_var**2 / (problems - 1))
    mean = float(diff.mean())
    half = t_quantile(0.5 + level / 2, df) * math.sqrt(var)
    return Interval(mean, mean - half, mean + half, seeds)


def mean_std(values: np.ndarray) -> tuple[float, float]:
    """Mean and sample standard deviation (``ddof = 1``; 0 for one value) of per-seed values."""
    values = np.asarray(values, float)
    std = float(values.std(ddof=1)) if values.size > 1 else 0.0
    return float(values.mean()), std
