"""verl reward function: rlvr's ``reasoning_gym:chain_sum`` verifier (1 correct, 0 wrong).

verl loads it with ``reward.custom_reward_function.path=examples/verl_reward.py``
(``name`` defaults to ``compute_score``) and calls it once per response.
"""

from __future__ import annotations

import functools
import json
from typing import Any


@functools.cache
def _verifier():
    from rlvr.rewards import get_verifier

    return get_verifier("reasoning_gym:chain_sum")


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None, **_: Any
) -> float:
    """The verifier's score of ``solution_str`` against the row's reasoning-gym entry."""
    entry = (
        json.loads(extra_info["entry"]) if extra_info and "entry" in extra_info else ground_truth
    )
    return float(_verifier()(solution_str, entry))
