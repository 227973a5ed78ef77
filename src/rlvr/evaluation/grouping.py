r"""Wrong answers the verifier judges equal vote as one in maj@k.

Answer keys (:meth:`rlvr.rewards.verifier.Verifier.answer_key`) are exact where the verifier is
not: the ``math`` key keeps ``0.333333`` apart from ``\frac13``, ``3\%`` from ``3`` and
``(x+1)^2`` from ``x^2+2x+1``, all of which its comparison calls equal. The right answer's
completions vote as one whatever their keys (:func:`rlvr.evaluation.majority.vote_groups`);
:func:`merge_wrong_votes` does the same for wrong ones, asking the verifier's own comparison
(for ``math``, :func:`rlvr.rewards.math.answers_match` under the verifier's
``compare_timeout_s`` and ``compare_memory_mb``, as in scoring) about a problem's distinct
wrong keys, the largest group first:

- of two answers, the larger group's stands in the reference's place (the comparison is not
  quite symmetric: its 1% tolerance is relative to the reference);
- two numbers whose keys are more than 2% apart (and not a factor 100 apart, a percentage
  against its number) are never asked about: the comparison cannot call them equal, and a real
  model's wrong answers are mostly such numbers;
- each answer joins the first group, largest first, whose *leader* (its largest answer) the
  verifier judges it equal to, or leads a new group: every answer of a group is judged equal
  to its leader, and only leaders are asked about (at most distinct answers times groups
  comparisons). The verifier's equality is not transitive: it calls ``99999 = 19`` equal to
  19, ``9999997 = 17`` to ``99999 = 19`` and 17 to ``9999997 = 17``, so joining every pair it
  calls equal (union-find) chained 19 and 17 together on the ``tiny`` model's ``math-mini``
  answers. With leaders two answers of a group can still be ones it tells apart, each judged
  equal to the leader; a wrong group made larger can only lower maj@k;
- at most :data:`MAX_COMPARISONS` comparisons a problem; answers past it stay apart.

A wrong answer is never joined to the right one: the verifier judged it unequal to the
reference. Verifiers without a comparison here (``reasoning_gym``, your own) keep their keys.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from typing import Any

from rlvr.rewards.format import answer_part, formatted
from rlvr.rewards.math import answers_match, compared_answer, math_verifier, screen_answer
from rlvr.rewards.verifier import Verifier
from rlvr.sandbox.bounded import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, LimitExceeded, call_bounded

MAX_COMPARISONS = 256
"""Most comparisons the verifier makes for one problem's wrong answers (each is 0.3 to 20 ms)."""

Same = Callable[[str, str], bool]
"""``same(completion_a, completion_b)``: whether the verifier judges ``b``'s answer equal to
``a``'s (``a`` in the reference's place)."""


def merge_wrong_votes(
    verifier: Verifier,
    completions: Sequence[str],
    keys: Sequence[str | None],
    correct: Sequence[bool],
) -> list[str | None]:
    """One problem's votes: ``keys``, each wrong key the verifier judges equal to a larger
    group's leading key (module docstring) replaced by that key.
    The keys unchanged for a verifier without a comparison here.

    >>> from rlvr.rewards import get_verifier
    >>> merge_wrong_votes(get_verifier("math"), [r"\\boxed{0.333333}", r"\\boxed{1/3}",
    ...     r"\\boxed{1/3}", r"\\boxed{2}"], ["0.333333", "0.333333333333", "0.333333333333",
    ...     "2"], [False] * 4)
    ['0.333333333333', '0.333333333333', '0.333333333333', '2']
    """
    same = comparison(verifier)
    right = {key for key, ok in zip(keys, correct, strict=True) if ok}
    members: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        if key is not None and key not in right:
            members.setdefault(key, []).append(i)
    if same is None or len(members) < 2:
        return list(keys)
    order = sorted(members, key=lambda key: -len(members[key]))  # stable: ties as they appear
    leader = {key: key for key in order}
    leaders: list[str] = []
    calls = 0
    for b in order:
        for a in leaders:
            if _numbers_apart(a, b):
                continue
            if calls == MAX_COMPARISONS:
                return [leader.get(key, key) for key in keys]
            calls += 1
            if same(completions[members[a][0]], completions[members[b][0]]):
                leader[b] = a
                break
        else:
            leaders.append(b)
    return [leader.get(key, key) for key in keys]


def _numbers_apart(a: str, b: str) -> bool:
    """Whether keys ``a`` and ``b`` are two finite numbers the verifier cannot call equal: each
    more than 2% (plus 1e-5: math-verify rounds to 6 decimal places) from the other, from 100
    times it and from a hundredth of it (a percentage read as its number).

    >>> _numbers_apart("12", "13"), _numbers_apart("0.03", "3"), _numbers_apart("1/3", "2")
    (True, False, False)
    """
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    if not (math.isfinite(x) and math.isfinite(y)):
        return False
    return not any(abs(x - f * y) <= 0.02 * max(abs(x), abs(f * y)) + 1e-5 for f in (1, 100, 0.01))


def comparison(verifier: Verifier) -> Same | None:
    """The verifier's judgement of two completions' answers, for the built-in ``math`` and
    ``+format`` on it; ``None`` for any other verifier."""
    if verifier.fn is formatted:
        inner = comparison(verifier.options["inner"])
        if inner is None:
            return None
        # a key (not None) means the format held: one </think>, the answer after it
        return lambda a, b: inner(answer_part(a), answer_part(b))
    if verifier.fn is math_verifier:
        return lambda a, b: _math_same(a, b, verifier.options)
    return None


def _math_same(reference: str, completion: str, options: dict[str, Any]) -> bool:
    """Whether the ``math`` verifier with ``options`` would score ``completion``'s final answer
    correct against ``reference``'s: :func:`~rlvr.rewards.math.answers_match` under its
    comparison limits, False for an answer it cuts off or a comparison that fails."""
    extract = options.get("extract", "strict")
    answers = [compared_answer(c, extract) for c in (reference, completion)]
    if any(a is None or screen_answer(a) is not None for a in answers):
        return False
    with contextlib.suppress(LimitExceeded, RuntimeError):
        return bool(
            call_bounded(
                answers_match,
                answers[1],
                answers[0],
                timeout_s=options.get("compare_timeout_s", DEFAULT_TIMEOUT_S),
                memory_mb=options.get("compare_memory_mb", DEFAULT_MEMORY_MB),
            )
        )
    return False
