"""The seeds ``rlvr`` takes: whole numbers from 0 to :data:`SEED_MAX`, checked where each is
given (``seed=``, ``eval.seed=``, ``data.gym.seed=``, ``--seed``) before any model loads."""

from __future__ import annotations

from typing import Any

SEED_MAX = 2**32 - 1
"""The largest seed: NumPy's and ``transformers.set_seed``'s range is 0 to 2**32 - 1 (torch's
generators overflow past 2**64 - 1, and the data order seeds with ``seed * 1_000_003``)."""


def seed_problem(value: Any) -> str | None:
    """Why ``value`` is no seed (``None``: it is one).

    >>> seed_problem(0), seed_problem(2**32 - 1)
    (None, None)
    >>> seed_problem(99999999999999999999)
    'must be a whole number from 0 to 4294967295 (2**32 - 1), got 99999999999999999999'
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= SEED_MAX:
        return f"must be a whole number from 0 to {SEED_MAX} (2**32 - 1), got {value!r}"
    return None


def check_seed(name: str, value: Any) -> None:
    """``ValueError`` naming ``name`` (``seed``, ``eval.seed``) unless ``value`` is a seed."""
    if (problem := seed_problem(value)) is not None:
        raise ValueError(f"{name} {problem}")
