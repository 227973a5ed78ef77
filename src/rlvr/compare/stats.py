"""Paired bootstrap confidence intervals over seeds (and held-out problems).

Runs of two arms with the same seed share the preset, the held-out problems and the
training prompts' order, so differences are taken **per seed** (paired). For held-out
scores the same problems are evaluated in every run, so they are paired by problem too.

:func:`paired_bootstrap` takes ``arm`` and ``base`` arrays of shape ``[S, P]`` (``S``
seeds, ``P`` problems; ``P = 1`` for a per-run summary such as mean entropy). One
resample draws ``S`` seeds with replacement and, for each drawn seed, ``P`` problems with
replacement (the same ones for both arms), and takes the mean over the drawn seeds of
``mean(arm - base)`` over the drawn problems. The interval is the percentile interval of
``resamples`` such means (default 10,000 at level 0.95), from a fixed RNG seed, so a report
is reproducible. With 3 seeds and ``P = 1`` the 95% interval is the range of the three
per-seed differences (each extreme is the whole resample with probability 1/27 > 2.5%):
it excludes 0 only when all three seeds agree on the sign.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

RESAMPLES = 10_000
LEVEL = 0.95
RNG_SEED = 0


class Interval(NamedTuple):
    """A paired difference: its point estimate and bootstrap interval."""

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


def paired_bootstrap(
    arm: np.ndarray,
    base: np.ndarray,
    *,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = RNG_SEED,
) -> Interval:
    """Bootstrap interval of ``mean(arm - base)``, paired by seed (rows) and problem (columns)."""
    arm, base = np.atleast_2d(np.asarray(arm, float)), np.atleast_2d(np.asarray(base, float))
    if arm.shape != base.shape:
        raise ValueError(f"paired arrays differ in shape: {arm.shape} vs {base.shape}")
    diff = arm - base  # [S, P]
    if diff.size == 0 or np.isnan(diff).any():
        raise ValueError("paired bootstrap needs complete, finite values for every seed")
    seeds, problems = diff.shape
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, seeds, size=(resamples, seeds))  # [R, S]
    if problems == 1:
        stats = diff[rows, 0].mean(axis=1)
    else:
        cols = rng.integers(0, problems, size=(resamples, seeds, problems))  # [R, S, P]
        stats = diff[rows[:, :, None], cols].mean(axis=(1, 2))
    tail = (1.0 - level) / 2
    low, high = np.quantile(stats, [tail, 1.0 - tail])
    return Interval(float(diff.mean()), float(low), float(high), seeds)


def mean_std(values: np.ndarray) -> tuple[float, float]:
    """Mean and sample standard deviation (``ddof = 1``; 0 for one value) of per-seed values."""
    values = np.asarray(values, float)
    std = float(values.std(ddof=1)) if values.size > 1 else 0.0
    return float(values.mean()), std
