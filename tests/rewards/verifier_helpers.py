"""Module-level verifiers for scorer tests (worker processes import them by name)."""

from __future__ import annotations

import os
import sys
import time


def spin(completion: str, reference) -> float:
    """Busy Python loop: interruptible by the in-thread time limit."""
    while True:
        time.sleep(0)


def echo(completion: str, reference, *, correct: float = 1.0, wrong: float = 0.0) -> float:
    """``correct`` when the completion equals the reference, else ``wrong``."""
    return correct if completion == str(reference) else wrong


def boom(completion: str, reference, *, wrong: float = -1.0) -> float:
    """Raises on 'boom', returns NaN on 'nan', kills its process on 'die', calls
    ``sys.exit`` on 'exit', returns the string "1" on 'text', else 1."""
    if completion == "boom":
        raise RuntimeError("verifier exploded")
    if completion == "nan":
        return float("nan")
    if completion == "die":
        os._exit(3)
    if completion == "exit":
        sys.exit(3)
    if completion == "text":
        return "1"  # type: ignore[return-value]
    return 1.0


def huge_power(completion: str, reference) -> float:
    """On "9": 9 ** (9 ** 9), one C call of minutes; else 1."""
    if completion == "9":
        return float(9 ** (9**9) % 2)
    return 1.0
