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
two terms (between ``min(S, P) - 1`` and ``S + P - 2``: near ``S - 1`` when the seeds dominate
the variance, near ``P - 1`` when the problems do, so below ``S - 1`` when there are fewer
problems than seeds); the sum is slightly conservative, since the
evaluation's sampling noise is counted in both terms, while Satterthwaite's df, estimated
from the same few seeds, is liberal: simulated with 200 problems and no true difference, the
interval excluded 0 in 1-8% of trials with 3 seeds and in 2-13% with 2, the least when the
sampling noise dominates, the most when the seeds' term is several times the problems' and the
noise is small (at most about 6% from 5 seeds on). With 3 seeds and a per-run summary
``t(2) = 4.30``: the interval excludes 0 only when the per-seed differences agree and are
tight relative to their mean.

A percentile bootstrap over seeds cannot give a 95% interval from 3 seeds (the 2.5% and 97.5%
quantiles of the resampled means are the smallest and largest seed difference, which
bracket 0 under no difference only 75% of the time); ``tests/compare/test_stats.py`` checks
the coverage of this interval under no difference.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.integrate import quad
from scipy.optimize import brentq
from scipy.stats import chi2, nct, norm
from scipy.stats import t as student_t

LEVEL = 0.95
MIN_SEEDS = 2


class Interval(NamedTuple):
    """A paired difference: its point estimate and confidence interval."""

    mean: float
    """Mean over seeds of the mean difference over problems."""
    low: float
    high: float
    seeds: int
    """Seeds the estimate is over."""
    se: float = math.nan
    """Standard error of ``mean``."""
    df: float = math.nan
    """Degrees of freedom of its t distribution."""

    def excludes_zero(self) -> int:
        """+1 when the interval is above 0, -1 when below, 0 when it contains 0."""
        if self.low > 0:
            return 1
        if self.high < 0:
            return -1
        return 0

    def text(self, digits: int = 3) -> str:
        return f"{self.mean:+.{digits}f} [{self.low:+.{digits}f}, {self.high:+.{digits}f}]"


def paired_interval(arm: np.ndarray, base: np.ndarray, *, level: float = LEVEL) -> Interval:
    """Student-t interval of ``mean(arm - base)``, paired by seed (rows) and problem (columns)."""
    arm, base = np.atleast_2d(np.asarray(arm, float)), np.atleast_2d(np.asarray(base, float))
    if arm.shape != base.shape:
        raise ValueError(f"paired arrays differ in shape: {arm.shape} vs {base.shape}")
    diff = arm - base  # [S, P]
    if diff.size == 0 or not np.isfinite(diff).all():
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
    half = float(student_t.ppf(0.5 + level / 2, df)) * math.sqrt(var)
    return Interval(mean, mean - half, mean + half, seeds, math.sqrt(var), df)


def p_value(ci: Interval) -> float:
    """Two-sided p-value of the interval's t test of no difference: below ``1 - level`` exactly
    when the interval at ``level`` excludes 0 (the same mean, standard error and df).

    >>> round(p_value(Interval(1.0, -0.39, 2.39, 5, se=0.5, df=4)), 4)
    0.1161
    """
    if not (ci.se >= 0 and ci.df > 0):
        return math.nan
    if ci.se == 0:
        return 0.0 if ci.mean != 0 else 1.0
    return float(2 * student_t.sf(abs(ci.mean) / ci.se, ci.df))


POWER = 0.8


def detectable(ci: Interval, *, power: float = POWER, level: float = LEVEL) -> float:
    """The smallest true difference the interval's test finds with probability ``power``, from
    the study's own standard error: ``nc * se``, where ``nc`` is the noncentrality at which the
    two-sided t test at level ``1 - alpha`` has that power (:func:`t_power`, below
    :data:`EXACT_BELOW` - 1 degrees of freedom), else the usual approximation ``nc = t(1 -
    alpha/2, df) + t(power, df)``, which agrees there to 0.02% and is too small with fewer
    seeds: the test found it 77% of the time with 3 seeds and 73% with 2.

    >>> round(detectable(Interval(0.02, 0.0, 0.04, 3, se=0.01 / 3**0.5, df=2)), 4)
    0.0326
    """
    if not (ci.se >= 0 and ci.df > 0):
        return math.nan
    return _noncentrality(ci.df, power, level) * ci.se


def _approximate_noncentrality(df: float, power: float, level: float) -> float:
    """``t(0.5 + level / 2, df) + t(power, df)``: the textbook minimal-detectable-effect factor."""
    return float(student_t.ppf(0.5 + level / 2, df) + student_t.ppf(power, df))


def _noncentrality(df: float, power: float, level: float) -> float:
    """The noncentrality at which the t test at ``level`` has ``power``: exact (:func:`t_power`
    solved by Brent's method) below :data:`EXACT_BELOW` - 1 df, the approximation from there."""
    approx = _approximate_noncentrality(df, power, level)
    if df >= EXACT_BELOW - 1 or power <= 1 - level:  # no effect already rejects that often
        return approx if power > 1 - level else 0.0
    high = max(approx, 1.0)
    while t_power(high, df, level) < power:
        high *= 2
    return float(brentq(lambda nc: t_power(nc, df, level) - power, 0.0, high, xtol=1e-12))


def seeds_needed(
    sd: float, effect: float, *, power: float = POWER, level: float = LEVEL, most: int = 1000
) -> int:
    """Seeds a paired per-seed t test needs to detect ``effect`` with ``power``, when the
    per-seed differences have standard deviation ``sd`` (at least 2): the noncentral t's
    power below 30 seeds, ``(t(0.975, n - 1) + t(power, n - 1)) * sd / sqrt(n)`` from there
    (they agree).

    >>> seeds_needed(0.0145, 0.02), seeds_needed(0.0145, 0.01)
    (7, 19)
    """
    n = _seeds_for(sd, effect, power, level, most)
    if n is None:
        raise ValueError(f"more than {most} seeds needed for an effect of {effect} at sd {sd}")
    return n


def seeds_to_detect(
    ci: Interval,
    effect: float,
    *,
    power: float = POWER,
    level: float = LEVEL,
    most: int = 1000,
    spread_bound: float | None = None,
) -> int | None:
    """Seeds at which the study would detect a true difference of ``effect`` with ``power``,
    projected from ``ci``: standard error ``se * sqrt(seeds / n)`` and ``df = n - 1``. Every
    variance term is taken to shrink with seeds, as sampling noise does (a fixed per-problem
    effect would not). ``None`` when no ``n <= most`` does (``effect`` 0 or no ``se``).

    ``spread_bound`` (e.g. 0.8) projects from the per-seed spread at that one-sided upper
    confidence bound instead, ``sd * sqrt(df / chi2(1 - spread_bound, df))``: a few seeds'
    spread is itself uncertain, and a study sized on its point estimate is often too small.

    >>> seeds_to_detect(Interval(0.01, -0.01, 0.03, 3, se=0.0145 / 3**0.5, df=2), 0.01)
    19
    >>> seeds_to_detect(Interval(0.01, -0.01, 0.03, 3, se=0.0145 / 3**0.5, df=2), 0.01,
    ...                 spread_bound=0.8)
    76
    """
    sd = ci.se * math.sqrt(ci.seeds)
    if spread_bound is not None:
        if not ci.df > 0:
            return None
        sd *= math.sqrt(ci.df / chi2.ppf(1 - spread_bound, ci.df))
    return _seeds_for(sd, effect, power, level, most)


EXACT_BELOW = 30
"""Seeds (``df + 1``) below which :func:`detectable` and the seed counts use the exact power
:func:`t_power`; from 30 seeds on the approximation agrees with it to 0.02% of the effect."""


def _seeds_for(sd: float, effect: float, power: float, level: float, most: int) -> int | None:
    """The smallest ``n`` in ``[2, most]`` whose detectable effect at ``se = sd / sqrt(n)`` is
    at most ``effect`` and, below :data:`EXACT_BELOW` seeds, whose t test finds ``effect``
    with probability ``power`` (:func:`t_power`: the approximation alone is up to a seed
    short there, e.g. 3 seeds at 77% power for an effect of 3.1 sd)."""
    if not (effect > 0 and sd >= 0):
        return None
    for n in range(MIN_SEEDS, most + 1):  # screened by the approximation, which is quick
        if _approximate_noncentrality(n - 1, power, level) * sd / math.sqrt(n) > effect:
            continue
        if (
            sd == 0
            or n >= EXACT_BELOW
            or t_power(effect * math.sqrt(n) / sd, n - 1, level) >= power
        ):
            return n
    return None


def t_power(noncentrality: float, df: float, level: float = LEVEL) -> float:
    """Probability that a two-sided t test at ``level`` rejects when ``mean / se`` has
    noncentrality ``noncentrality`` (the noncentral t's power, as statsmodels' ``TTestPower``):
    from ``scipy.stats.nct``, or where that is NaN (scipy 1.17 at some df and noncentralities,
    e.g. df 2 at 8.5) by quadrature over the chi-square of the variance estimate:
    ``E[Phi(nc - c sqrt(V / df)) + Phi(-nc - c sqrt(V / df))]``, ``V ~ chi2(df)``, ``c = t(0.5 +
    level / 2, df)`` (the two agree to 1e-9 where both exist).

    >>> round(t_power(3.0, 7), 4), round(t_power(0.0, 4), 4), round(t_power(8.5, 2), 4)
    (0.7306, 0.05, 0.9719)
    """
    c = student_t.ppf(0.5 + level / 2, df)
    tails = nct.sf(c, df, noncentrality) + nct.cdf(-c, df, noncentrality)
    return float(tails) if math.isfinite(tails) else _t_power_by_quadrature(noncentrality, df, c)


def _t_power_by_quadrature(noncentrality: float, df: float, c: float) -> float:
    """``P(|T| > c)`` for ``T`` noncentral t, as ``E[Phi(nc - c sqrt(V / df)) + Phi(-nc - c
    sqrt(V / df))]`` over ``V ~ chi2(df)``."""

    def rejects(v: float) -> float:
        at = c * math.sqrt(v / df)
        tails = norm.cdf(noncentrality - at) + norm.cdf(-noncentrality - at)
        return float(tails * chi2.pdf(v, df))

    return float(quad(rejects, 0, math.inf, limit=200)[0])


def mean_std(values: np.ndarray) -> tuple[float, float]:
    """Mean and sample standard deviation (``ddof = 1``; 0 for one value) of per-seed values."""
    values = np.asarray(values, float)
    std = float(values.std(ddof=1)) if values.size > 1 else 0.0
    return float(values.mean()), std
