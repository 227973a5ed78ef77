r"""Klear-Reasoner's format rule (Sec. 3.2.4): reasoning must be wrapped in ``<think>...</think>``.

Composes with any verifier (``math+format``, :func:`with_format`): a well-formed completion
(:func:`think_format_ok`) gets the inner verifier's score on the text after ``</think>``, a
malformed one ``penalty``. Departure from the paper: Klear does not give the penalty's size;
here it defaults to the inner verifier's ``wrong``, so a malformed response is never paid
and never scored below a wrong one unless asked.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from rlvr.rewards.extract import THINK_CLOSE, THINK_OPEN
from rlvr.rewards.verifier import Verifier

_SPLIT_RE = re.compile(r"\s*<think>(?P<think>.*?)</think>(?P<rest>.*)\Z", re.DOTALL)


def think_format_ok(completion: str, *, think_in_prompt: bool = False) -> bool:
    r"""True when ``completion`` follows the ``<think>...</think>`` rule above.

    >>> think_format_ok("<think>3 * 4 = 12</think> \\boxed{12}")
    True
    >>> think_format_ok("\\boxed{12}"), think_format_ok("<think>12</think>")
    (False, False)
    >>> think_format_ok("3 * 4 = 12</think> 12", think_in_prompt=True)
    True
    """
    most_opens = 0 if think_in_prompt else 1
    if completion.count(THINK_CLOSE) != 1 or completion.count(THINK_OPEN) > most_opens:
        return False
    match = _SPLIT_RE.match(THINK_OPEN + completion if think_in_prompt else completion)
    return bool(match and match["think"].strip() and match["rest"].strip())


def answer_part(completion: str) -> str:
    """What follows the one ``</think>`` of a completion whose format holds: the part the
    inner verifier scores (the whole completion where there is none)."""
    return completion.split(THINK_CLOSE, 1)[-1]


def formatted(
    completion: str,
    reference: Any,
    *,
    inner: Verifier,
    penalty: float | None = None,
    think_in_prompt: bool = False,
) -> float:
    """``inner``'s score on the answer part if the format holds, else the penalty."""
    if not think_format_ok(completion, think_in_prompt=think_in_prompt):
        return inner.failure_value if penalty is None else float(penalty)
    return inner(answer_part(completion), reference)


def _formatted_key(
    completion: str, reference: Any, *, inner: Verifier, think_in_prompt: bool = False, **_: Any
) -> str | None:
    """``inner``'s answer key of the answer part; ``None`` (no vote) where the format fails."""
    if not think_format_ok(completion, think_in_prompt=think_in_prompt):
        return None
    return inner.answer_key(answer_part(completion), reference)


formatted.answer_key = _formatted_key  # type: ignore[attr-defined]


def _check_options(inner: Verifier, penalty: float | None, think_in_prompt: bool) -> None:
    """Refuse a penalty that is not a number, or above the wrong score (a malformed completion
    would be paid more than a wrong one), or not below the correct score (it would count as
    correct in pass@k), and a non-boolean ``think_in_prompt``."""
    if penalty is not None:
        try:
            value = float(penalty)  # as the score is read at each call
        except (TypeError, ValueError):
            raise ValueError(f"format penalty must be a number, got {penalty!r}") from None
        if not value < inner.correct_value or value > inner.failure_value:
            raise ValueError(
                f"format penalty must be at most the wrong score {inner.failure_value} and below "
                f"the correct score {inner.correct_value}, got {penalty}"
            )
    if not isinstance(think_in_prompt, bool):
        raise ValueError(f"format think_in_prompt must be True or False, got {think_in_prompt!r}")


def with_format(
    inner: Verifier, *, penalty: float | None = None, think_in_prompt: bool = False
) -> Verifier:
    r"""Wrap ``inner`` in the format rule (``penalty=None``: the inner ``wrong`` value).

    >>> from rlvr.rewards import get_verifier
    >>> v = with_format(get_verifier("math", wrong=-1.0), penalty=-2.0)
    >>> v("<think>6/8 reduces</think> \\boxed{3/4}", "0.75"), v(r"\boxed{3/4}", "0.75")
    (1.0, -2.0)
    """
    _check_options(inner, penalty, think_in_prompt)
    options = {"inner": inner, "penalty": penalty, "think_in_prompt": think_in_prompt}
    low = inner.score_range[0] if penalty is None else min(inner.score_range[0], float(penalty))
    return replace(
        inner, spec=inner.spec + "+format", fn=formatted, options=options, lowest_value=low
    )
