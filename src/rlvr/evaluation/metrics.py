r"""avg@k and pass@k, with ETR's names for them (mean@k, best@k).

For a problem with ``n`` sampled completions of which ``c`` are correct:

- ``pass@k`` is the unbiased estimator of Chen et al. (2021, Codex paper, Eq. 1),
  :math:`1 - \binom{n-c}{k} / \binom{n}{k}`, the chance that at least one of ``k``
  completions drawn without replacement from the ``n`` is correct. It is computed in the
  numerically stable product form :math:`1 - \prod_{i=n-c+1}^{n} (1 - k/i)`.
  ETR calls it ``best@k``.
- ``avg@k`` is the expected fraction correct among ``k`` such completions, whose
  unbiased (and minimum-variance) estimate from all ``n`` samples is ``c / n`` for every
  ``k <= n``. ETR calls it ``mean@k``; ``avg@n`` with ``n`` samples is the papers'
  "Avg@64" with 64.

Both are averaged over problems (``ALGORITHMS.md``, Evaluation). Their standard error
(:func:`standard_errors`) is that of a mean over problems: the sample standard deviation
of the per-problem values over the square root of the number of problems, so it counts
both which problems were drawn and the completions' sampling noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def _check(n: int, c: int, k: int) -> None:
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 0 <= c <= n:
        raise ValueError(f"c must be in [0, n={n}], got {c}")
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, n={n}], got {k}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples with ``c`` correct (Chen et al., 2021).

    >>> pass_at_k(5, 0, 2), pass_at_k(5, 5, 2), pass_at_k(4, 1, 4)
    (0.0, 1.0, 1.0)
    >>> round(pass_at_k(4, 1, 2), 12)  # 1 - C(3, 2) / C(4, 2) = 1 - 3/6
    0.5
    """
    _check(n, c, k)
    if n - c < k:
        return 1.0
    keep = 1.0
    for i in range(n - c + 1, n + 1):
        keep *= 1.0 - k / i
    return 1.0 - keep


def avg_at_k(n: int, c: int, k: int) -> float:
    """Expected fraction correct among ``k`` of the ``n`` samples: ``c / n``.

    >>> avg_at_k(8, 2, 4)
    0.25
    """
    _check(n, c, k)
    return c / n


best_at_k = pass_at_k
"""ETR's name for pass@k."""

mean_at_k = avg_at_k
"""ETR's name for avg@k."""


def mean_pass_at_k(counts: Sequence[tuple[int, int]], k: int) -> float:
    """pass@k averaged over problems given ``(n, c)`` per problem.

    >>> mean_pass_at_k([(4, 0), (4, 4)], 2)
    0.5
    """
    if not counts:
        raise ValueError("no problems")
    return sum(pass_at_k(n, c, k) for n, c in counts) / len(counts)


def mean_avg_at_k(counts: Sequence[tuple[int, int]], k: int) -> float:
    """avg@k averaged over problems given ``(n, c)`` per problem.

    >>> mean_avg_at_k([(4, 1), (4, 3)], 4)
    0.5
    """
    if not counts:
        raise ValueError("no problems")
    return sum(avg_at_k(n, c, k) for n, c in counts) / len(counts)


def summarize(counts: Sequence[tuple[int, int]], ks: Sequence[int]) -> dict[str, float]:
    """``{"avg@k": ..., "pass@k": ...}`` for each ``k`` in ``ks`` (plus ``avg@n``).

    >>> summarize([(4, 1), (4, 4)], [1, 2])
    {'avg@1': 0.625, 'pass@1': 0.625, 'avg@2': 0.625, 'pass@2': 0.75, 'avg@4': 0.625}
    """
    out: dict[str, float] = {}
    for k in ks:
        out[f"avg@{k}"] = mean_avg_at_k(counts, k)
        out[f"pass@{k}"] = mean_pass_at_k(counts, k)
    n = min(n for n, _ in counts)
    out.setdefault(f"avg@{n}", mean_avg_at_k(counts, n))
    return out


def standard_errors(counts: Sequence[tuple[int, int]], ks: Sequence[int]) -> dict[str, float]:
    """Standard error over problems of each :func:`summarize` entry (NaN for one problem).

    >>> {k: round(v, 4) for k, v in standard_errors([(4, 1), (4, 3)], [2]).items()}
    {'avg@2': 0.25, 'pass@2': 0.25, 'avg@4': 0.25}
    """
    if not counts:
        raise ValueError("no problems")
    n = min(n for n, _ in counts)
    per_problem = {}
    for k in ks:
        per_problem[f"avg@{k}"] = [avg_at_k(m, c, k) for m, c in counts]
        per_problem[f"pass@{k}"] = [pass_at_k(m, c, k) for m, c in counts]
    per_problem.setdefault(f"avg@{n}", [avg_at_k(m, c, n) for m, c in counts])
    return {key: mean_stderr(values) for key, values in per_problem.items()}


def mean_stderr(values: Sequence[float]) -> float:
    """Standard error of a mean: the sample standard deviation (``ddof=1``) over the square
    root of the count (NaN for fewer than two values)."""
    if len(values) < 2:
        return math.nan
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return math.sqrt(var / len(values))
