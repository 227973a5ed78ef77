"""rlvr's verifiers as TRL reward functions (:func:`verifier_reward`).

A verifier is called as ``(completion, reference)`` on a completion's text; TRL calls a reward
function as ``(prompts=, completions=, ..., **dataset columns)``, and on a conversational dataset
(prompts as lists of messages) each completion is a list of messages, not text.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from rlvr.rewards import Verifier


def completion_text(completion: Any) -> str:
    """The text a verifier scores: a plain completion as it is; a conversational one (TRL's list
    of messages) by its last message's content, text blocks joined.

    >>> completion_text("4")
    '4'
    >>> completion_text([{"role": "assistant", "content": "The sum is 4"}])
    'The sum is 4'
    >>> completion_text([{"role": "assistant", "content": [{"type": "text", "text": "4"}]}])
    '4'
    """
    if isinstance(completion, str):
        return completion
    content = completion[-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if block.get("type") == "text")


def verifier_reward(verifier: Verifier, column: str = "reference") -> Callable[..., list[float]]:
    """A TRL reward function scoring each completion with ``verifier`` against the dataset
    column ``column``, on plain and conversational datasets alike. TRL logs it as
    ``rewards/<verifier spec>/mean``. ``RlvrGRPOTrainer`` refuses it before the model loads when
    the train dataset has no such column (its signature names the column)."""

    def reward(completions: list, **kwargs: Any) -> list[float]:
        references = kwargs[column]
        return [
            float(verifier(completion_text(c), r))
            for c, r in zip(completions, references, strict=True)
        ]

    keyword = inspect.Parameter.KEYWORD_ONLY
    reward.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter("completions", keyword),
            inspect.Parameter(column, keyword),
            inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD),
        ]
    )
    reward.__name__ = reward.__qualname__ = verifier.spec
    return reward
