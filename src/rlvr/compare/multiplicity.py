"""Many claims read together: each verdict's p-value, corrected across the study.

Every claim is its own 95% test (:mod:`rlvr.compare.claims`): with 28 claims and no true
difference anywhere, one or two would still be decided by chance. :func:`adjust` gives every
tested verdict (each claim in each regime; untestable claims and claims without intervals are
left out) its p-value and two corrections across all of them:

- **Holm** (Holm 1979, step-down Bonferroni): a verdict holds when its corrected p is below
  0.05; the chance that *any* verdict holding is wrong stays at most 5% (family-wise error),
  whatever the dependence between claims (they share runs, so they are dependent).
- **Benjamini-Hochberg** (1995, ``scipy.stats.false_discovery_control``): the expected share
  of wrong verdicts among those holding stays at most 5% (false discovery rate), for
  independent or positively dependent tests; less strict than Holm.

A study that names its confirmatory claims before its runs (``confirms``) corrects across
those only; its other verdicts are descriptive: their own ``p``, no correction, not findings.

A verdict's p-value is the smallest level at which its rule decides as it did. Each interval
has its two-sided t p-value ``p_i`` (:func:`rlvr.compare.stats.p_value`); ``k`` intervals:

- reproduced needs every interval on the claimed side (an intersection-union test, valid
  without correction): ``p_rep = max p_i``, an interval whose mean is on the other side
  counting 1;
- not reproduced needs any interval on the other side: ``p_not = min(1, k * min p_i)`` over
  the intervals whose mean is on the other side (Bonferroni over the ``k`` intervals, since
  "any of k" is decided more often than 5% by chance);
- ``p = min(p_rep, p_not)``. A reproduced verdict has ``p < 0.05`` and an inconclusive one
  ``p >= 0.05``; a not reproduced verdict of a rule with ``k > 1`` intervals can have ``p`` up
  to ``k * 0.05``: the per-claim rule does not correct within the claim, its p-value does.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
from scipy.stats import false_discovery_control

from rlvr.compare.claims import DESCRIPTIVE, NOT_REPRODUCED, REPRODUCED, UNTESTABLE, Verdict
from rlvr.compare.stats import LEVEL, p_value

ALPHA = 1 - LEVEL


def verdict_p(verdict: Verdict) -> float | None:
    """The verdict's p-value (module docstring); None when no interval was computed.

    >>> from rlvr.compare.claims import Claim
    >>> from rlvr.compare.stats import Interval
    >>> claim = Claim("c", text="a > b", rule="direction", metric="m", arm="a", baseline="b")
    >>> ci = Interval(1.0, -0.39, 2.39, 5, se=0.5, df=4)
    >>> round(verdict_p(Verdict(claim, "inconclusive", "", "", {"a - b": ci})), 4)
    0.1161
    """
    if not verdict.intervals:
        return None
    side = verdict.claim.claimed_side
    tests = [(np.sign(ci.mean), p_value(ci)) for ci in verdict.intervals.values()]
    p_rep = max(p if sign == side else 1.0 for sign, p in tests)
    other = [p for sign, p in tests if sign == -side]
    p_not = min(1.0, len(tests) * min(other)) if other else 1.0
    return min(p_rep, p_not)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order.

    >>> holm([0.01, 0.04, 0.03, 0.005])
    [0.03, 0.06, 0.06, 0.02]
    """
    m = len(pvalues)
    adjusted, running = [1.0] * m, 0.0
    for rank, i in enumerate(sorted(range(m), key=pvalues.__getitem__)):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def adjust(verdicts: list[Verdict]) -> list[Verdict]:
    """``verdicts`` with ``p`` set on every tested one, and ``p_holm`` and ``q_bh`` on those
    of the family: every tested verdict (not untestable, its intervals giving a p-value) but a
    ``descriptive`` one (a study's ``confirms`` names the others), in the same order."""
    ps = {i: verdict_p(v) for i, v in enumerate(verdicts) if v.status != UNTESTABLE}
    tested = [i for i, p in ps.items() if p is not None and math.isfinite(p)]
    out = list(verdicts)
    for i in tested:
        out[i] = dataclasses.replace(out[i], p=ps[i])
    family = [i for i in tested if verdicts[i].role != DESCRIPTIVE]
    if not family:
        return out
    raw = [ps[i] for i in family]
    for i, p_holm, q_bh in zip(family, holm(raw), false_discovery_control(raw), strict=True):
        out[i] = dataclasses.replace(out[i], p_holm=p_holm, q_bh=float(q_bh))
    return out


def holds(verdict: Verdict, field: str = "p_holm") -> bool:
    """Whether ``verdict`` is decided (reproduced or not reproduced) and its corrected p-value
    ``field`` (``p_holm`` or ``q_bh``) is below 0.05."""
    p = getattr(verdict, field)
    return verdict.status in (REPRODUCED, NOT_REPRODUCED) and p is not None and p < ALPHA


def holding(verdicts: list[Verdict], field: str = "p_holm") -> list[Verdict]:
    """The verdicts that :func:`holds` keeps."""
    return [v for v in verdicts if holds(v, field)]


def p_text(p: float | None) -> str:
    """A p-value as reports print it: 3 decimals, or 2 significant digits below 0.001."""
    if p is None:
        return ""
    return f"{p:.1e}" if p < 1e-3 else f"{p:.3f}"
