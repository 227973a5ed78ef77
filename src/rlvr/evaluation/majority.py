r"""maj@k: majority-vote accuracy (self-consistency, Wang et al. 2023; DeepSeek-R1's cons@64).

Each completion's *vote* is its answer key (:meth:`rlvr.rewards.verifier.Verifier.answer_key`:
the math verifier's parsed final answer, reasoning-gym's extracted answer; ``None`` where no
answer was found), with wrong answers the verifier judges equal given one key
(:func:`rlvr.evaluation.grouping.merge_wrong_votes`). The groups are:

- *the right answer*: every completion the verifier scored correct, whatever its key (each was
  judged equal to the reference, so they agree), with every completion sharing a key with one
  of them (a right answer whose check timed out);
- each other key: the completions with that vote.

Completions outside these (no key, not correct) do not vote. A group's *credit* is the share of
its completions scored correct: the right answer's is 1 unless a completion with its key failed,
every other group's 0.

For ``k`` completions, the vote picks the largest group among them, a tie broken uniformly at
random, and scores that group's credit; no vote at all scores 0. ``maj@k`` of a problem with
``n`` samples is the expected score over the ``C(n, k)`` subsets of ``k`` of its samples, ties
counted at their expected value (fractional credit), computed exactly (not sampled) by
:func:`maj_at_k`. ``maj@n`` is the vote of all ``n``; ``maj@1`` is ``avg@1``, the share of
completions scored correct.

Averaged over problems, with the standard error of a mean over problems as
:func:`rlvr.evaluation.metrics.standard_errors` gives for avg@k and pass@k.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from rlvr.evaluation.metrics import mean_stderr
from rlvr.rewards.verifier import Verifier

_RIGHT = object()
"""The group of the right answer (no key can equal it)."""


def vote_groups(answers: Sequence[str | None], correct: Sequence[bool]) -> list[tuple[int, int]]:
    """``(size, correct)`` of each group of votes (module docstring), in the order groups
    first appear: the completions scored correct and those sharing a key with one form one
    group, each other key its own; a wrong completion without a key is in none.

    >>> vote_groups(["4", None, "5", "4.0", "5"], [True, False, False, True, False])
    [(2, 2), (2, 0)]
    """
    if len(answers) != len(correct):
        raise ValueError(f"{len(answers)} answer keys for {len(correct)} completions")
    right = {key for key, ok in zip(answers, correct, strict=True) if ok}
    groups: dict[object, list[int]] = {}
    for key, ok in zip(answers, correct, strict=True):
        if ok or key is not None:
            counts = groups.setdefault(_RIGHT if ok or key in right else key, [0, 0])
            counts[0] += 1
            counts[1] += bool(ok)
    return [(size, right_count) for size, right_count in groups.values()]


def maj_at_k(answers: Sequence[str | None], correct: Sequence[bool], k: int) -> float:
    """Expected majority-vote score of ``k`` of the ``n`` completions drawn without
    replacement (module docstring), exact.

    Dynamic programming over the groups, with states (completions drawn so far, the largest
    group's count, how many groups share it) and whole-number counts of subsets: about
    ``n * k**2 * log(k)`` steps, well under a second for ``n = 64``.

    >>> maj_at_k(["4", "4", "5"], [True, True, False], 3), maj_at_k(["4", "5"], [True, False], 2)
    (1.0, 0.5)
    >>> round(maj_at_k(["4", "4", "5"], [True, True, False], 2), 12)  # {4,4} 1, {4,5} twice 1/2
    0.666666666667
    """
    n = len(answers)
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, n={n}], got {k}")
    groups = vote_groups(answers, correct)
    scale = math.lcm(*(size for size, _ in groups)) if groups else 1
    # (drawn, top count, groups at top) -> [subsets, sum over them of the top groups' credits
    # times scale]: whole numbers, so C(1000, 500) neither overflows nor rounds
    states: dict[tuple[int, int, int], list[int]] = {(0, 0, 0): [1, 0]}
    for size, right in groups:
        credit = right * (scale // size)
        states = _add_group(states, size, credit, k)
    silent = n - sum(size for size, _ in groups)
    total = Fraction(0)
    for (drawn, _top, tied), (_ways, credits) in states.items():
        if tied and k - drawn <= silent:  # the rest of the k are completions that do not vote
            total += Fraction(credits * math.comb(silent, k - drawn), tied)
    return float(total / (math.comb(n, k) * scale))


def _add_group(
    states: dict[tuple[int, int, int], list[int]], size: int, credit: int, k: int
) -> dict[tuple[int, int, int], list[int]]:
    """The states after one more group of ``size`` completions whose credit (times the
    scale) is ``credit``: each way of drawing ``x`` of them, ``C(size, x)`` subsets."""
    out: dict[tuple[int, int, int], list[int]] = defaultdict(lambda: [0, 0])
    for (drawn, top, tied), (ways, credits) in states.items():
        for x in range(min(size, k - drawn) + 1):
            choose = math.comb(size, x)
            if x == 0 or x < top:
                state, gained = (drawn + x, top, tied), credits * choose
            elif x == top:
                state, gained = (drawn + x, top, tied + 1), (credits + ways * credit) * choose
            else:
                state, gained = (drawn + x, x, 1), ways * credit * choose
            entry = out[state]
            entry[0] += ways * choose
            entry[1] += gained
    return out


def majority_values(
    problems: Sequence[tuple[Sequence[str | None], Sequence[bool]]], ks: Sequence[int]
) -> dict[str, list[float]]:
    """``{"maj@k": [each problem's maj@k]}`` for each ``k`` in ``ks`` from each problem's
    ``(answer keys, correct)``."""
    return {f"maj@{k}": [maj_at_k(a, c, k) for a, c in problems] for k in ks}


def majority_summary(values: dict[str, list[float]]) -> tuple[dict[str, float], dict[str, float]]:
    """The mean over problems of each of :func:`majority_values`' metrics, and its standard
    error (NaN for one problem).

    >>> majority_summary({"maj@2": [1.0, 0.5]})
    ({'maj@2': 0.75}, {'maj@2': 0.25})
    """
    means = {name: math.fsum(v) / len(v) for name, v in values.items()}
    return means, {name: mean_stderr(v) for name, v in values.items()}


def answer_keys(
    verifier: Verifier, completions: Sequence[str], references: Sequence[Any]
) -> list[str | None]:
    """Each completion's answer key (:meth:`Verifier.answer_key`, its vote), in order. A key
    the verifier fails to give (its hook raised) is no vote, and one warning says how many and
    the first error."""
    keys: list[str | None] = []
    failed: list[str] = []
    for completion, reference in zip(completions, references, strict=True):
        try:
            keys.append(verifier.answer_key(completion, reference))
        except Exception as err:  # a hook's bug must not lose an evaluation already sampled
            keys.append(None)
            failed.append(f"{type(err).__name__}: {err}")
    if failed:
        warnings.warn(
            f"verifier {verifier.spec!r} gave no answer key for {len(failed)} of {len(keys)} "
            f"completions (they do not vote in maj@k); first error: {failed[0]}",
            stacklevel=2,
        )
    return keys
