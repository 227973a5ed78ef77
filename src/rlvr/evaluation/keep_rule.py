"""Keep rules of ``rlvr data filter``: which prompts to keep, given ``c`` correct of ``n`` samples.

A rule compares one measure with numbers, parsed by a regular expression (no ``eval``)::

    mean>0.5      mean>=0.5      0<mean<1      0.2<=mean<=0.8      pass@4>0.5      score>0

Measures of one prompt, from its ``n`` completions:

- ``mean``: the share of completions judged correct, ``c / n`` (the pass rate; Klear keeps
  math prompts where "a majority pass", ``mean>0.5``; DAPO-style difficulty windows drop
  the prompts every or no completion solves, ``0<mean<1``);
- ``pass@k``: the unbiased pass@k estimate from the ``n`` samples (``k <= n``;
  :func:`rlvr.evaluation.metrics.pass_at_k`). With ``k = n`` it is 1 when any completion is
  correct and 0 otherwise, so ``pass@16>0.5`` with ``-n 16`` keeps every prompt solved at
  least once;
- ``score``: the mean verifier score (the soft code reward's mean share of tests passed).

A one-sided rule is ``MEASURE OP NUMBER`` (``OP``: ``<``, ``<=``, ``>``, ``>=``, ``==``); a
window is ``NUMBER OP MEASURE OP NUMBER`` with ``<`` or ``<=`` on both sides.
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass

from rlvr.evaluation.metrics import pass_at_k

_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq}
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?"
_OP = r"<=|>=|==|<|>"
_MEASURE = r"mean|score|pass@\d+"
_RULE = re.compile(
    rf"^\s*(?:(?P<lo>{_NUM})\s*(?P<lo_op>{_OP})\s*)?(?P<measure>{_MEASURE})"
    rf"\s*(?P<op>{_OP})\s*(?P<value>{_NUM})\s*$"
)


@dataclass(frozen=True)
class KeepRule:
    """A parsed rule: ``lower lower_op measure op value`` (the lower part optional)."""

    text: str
    """The rule as written."""
    measure: str
    """``mean``, ``score`` or ``pass@k``."""
    op: str
    """Comparison of the measure with ``value``."""
    value: float
    """Right-hand number."""
    lower: float | None = None
    """Left-hand number of a window (``lower < measure``)."""
    lower_op: str = "<"
    """``<`` or ``<=``: how the window's lower bound compares."""

    @property
    def k(self) -> int | None:
        """The ``k`` of a ``pass@k`` rule (``None`` for ``mean`` / ``score``)."""
        return int(self.measure[5:]) if self.measure.startswith("pass@") else None

    def measured(self, n: int, correct: int, score: float) -> float:
        """The rule's measure of one prompt: ``correct`` of ``n`` completions correct, mean
        verifier score ``score``."""
        if self.measure == "mean":
            return correct / n
        if self.measure == "score":
            return score
        return pass_at_k(n, correct, self.k or 0)

    def keeps(self, value: float) -> bool:
        """Whether a prompt whose measure is ``value`` is kept."""
        if self.lower is not None and not _OPS[self.lower_op](self.lower, value):
            return False
        return _OPS[self.op](value, self.value)


def parse_rule(text: str, n: int | None = None) -> KeepRule:
    """Parse a keep rule; ``n`` (completions per prompt) bounds ``pass@k``'s ``k``. A rule no
    prompt can meet is refused: outside [0, 1] for ``mean`` and ``pass@k``, an empty window,
    or (given ``n``) between the values ``mean`` or ``pass@k`` can take (``0<mean<1`` with
    ``n=1``, where the pass rate is 0 or 1).

    >>> parse_rule("0<mean<1").keeps(0.5), parse_rule("0<mean<1").keeps(1.0)
    (True, False)
    >>> parse_rule("pass@16>0.5", n=16).k
    16
    """
    found = _RULE.match(text)
    if found is None:
        raise ValueError(
            f"--keep {text!r}: expected MEASURE OP NUMBER or NUMBER OP MEASURE OP NUMBER, with "
            "MEASURE one of mean, score, pass@k and OP one of < <= > >= == "
            "(e.g. 'mean>0.5', '0<mean<1', 'pass@4>0.5')"
        )
    lower, lower_op = found["lo"], found["lo_op"] or "<"
    if lower is not None and (lower_op not in ("<", "<=") or found["op"] not in ("<", "<=")):
        raise ValueError(f"--keep {text!r}: a window reads LOW < MEASURE < HIGH (< or <= only)")
    rule = KeepRule(
        text,
        found["measure"],
        found["op"],
        float(found["value"]),
        None if lower is None else float(lower),
        lower_op,
    )
    if rule.k is not None and not 1 <= rule.k <= (n or rule.k):
        raise ValueError(f"--keep {text!r}: k must be in [1, n={n}]")
    bounded = rule.measure != "score"
    if _keeps_nothing(rule, bounded):
        why = f"{rule.measure} lies in [0, 1]" if bounded else "no number satisfies it"
        raise ValueError(f"--keep {text!r} can keep no prompt ({why})")
    values = _values(rule, n) if bounded and n is not None else []
    if values and not any(rule.keeps(v) for v in values):
        shown = ", ".join(f"{v:.4g}" for v in values[:6]) + (", ..." if len(values) > 6 else "")
        raise ValueError(
            f"--keep {text!r} can keep no prompt (with n={n}, {rule.measure} is one of {shown})"
        )
    return rule


def _values(rule: KeepRule, n: int) -> list[float]:
    """The values a ``mean`` or ``pass@k`` rule's measure can take with ``n`` samples (one per
    count of correct completions, 0 to ``n``), ascending and distinct."""
    return sorted({rule.measured(n, correct, 0.0) for correct in range(n + 1)})


def _keeps_nothing(rule: KeepRule, bounded: bool) -> bool:
    """Whether no value (in [0, 1] when ``bounded``: a pass rate or pass@k) meets the rule."""
    lo, hi = (0.0, 1.0) if bounded else (-math.inf, math.inf)
    lo_open = hi_open = False
    limits = [(rule.op, rule.value)]
    if rule.lower is not None:
        limits.append(({"<": ">", "<=": ">="}[rule.lower_op], rule.lower))
    for op, value in limits:
        if op in (">", ">=", "==") and (value > lo or (value == lo and op == ">")):
            lo, lo_open = value, op == ">"
        if op in ("<", "<=", "==") and (value < hi or (value == hi and op == "<")):
            hi, hi_open = value, op == "<"
    return lo > hi or (lo == hi and (lo_open or hi_open))
