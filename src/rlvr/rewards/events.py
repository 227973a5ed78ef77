"""Counting what happened inside a verifier call (answers cut off, asserts not judged).

A verifier calls :func:`record`; the :class:`rlvr.rewards.scoring.Scorer` collects each call's
counts with :func:`counting` (a verifier called on its own records into nothing), and
:meth:`Scores.metrics` logs each event of :data:`EVENTS` as ``verifier/<name>``.

>>> with counting() as counts:
...     record("math_hedged")
>>> counts
{'math_hedged': 1}
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

EVENTS: dict[str, str] = {
    "math_rejected": "math answers cut off before or during comparison (too long, too deeply "
    "nested, exponent towers, huge numbers, or past the comparison's time or memory limit)",
    "math_hedged": "math completions with several different final answers",
    "reasoning_gym_hedged": "reasoning_gym completions with several different final answers",
    "reasoning_gym_unreadable": "reasoning_gym answers the task's scorer raised on (it scores "
    "the entry's own answer, so the answer is at fault, not the verifier): scored wrong",
    "asserts_judged": "assert tests judged by a test driver the program cannot reach",
    "asserts_unsupported": "assert tests the driver could not judge (the program's answer was "
    "not plain data, or a class): failed and not paid",
    "asserts_in_process": "assert tests that ran inside the program's interpreter with the "
    "code verifier's in_process option (a program can fake these)",
    "sandbox_errors": "code completions whose sandbox failed to run (the sandbox's fault, not "
    "the program's; part of the failures)",
}
"""Event name -> what it counts."""

_COUNTS: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar(
    "rlvr_verifier_events", default=None
)


def record(name: str, n: int = 1) -> None:
    """Count ``n`` occurrences of the event ``name`` in the current :func:`counting` block."""
    if name not in EVENTS:
        raise ValueError(f"unknown verifier event {name!r}; valid: {', '.join(sorted(EVENTS))}")
    counts = _COUNTS.get()
    if counts is not None and n:
        counts[name] = counts.get(name, 0) + n


@contextmanager
def counting() -> Iterator[dict[str, int]]:
    """Collect the events recorded in this block (this thread or task only) into a dict."""
    counts: dict[str, int] = {}
    token = _COUNTS.set(counts)
    try:
        yield counts
    finally:
        _COUNTS.reset(token)
