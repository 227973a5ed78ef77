"""rlvr's verifiers as TRL reward functions (:func:`verifier_reward`).

A verifier is called as ``(completion, reference)`` on a completion's text; TRL calls a reward
function as ``(prompts=, completions=, ..., **dataset columns)``, and on a conversational dataset
(prompts as lists of messages) each completion is a list of messages, not text.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

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


class CheckedReward:
    """A reward function whose return value is checked before TRL reads it: one number (or
    ``None``) per completion, in a list, tuple, 1-D tensor or array. TRL's own failures name
    no function (a float: ``'float' object is not iterable``; strings: ``too many dimensions
    'str'``). Picklable when the function is; ``name`` is the one TRL logs it under."""

    def __init__(self, func: Callable[..., Any], name: str) -> None:
        self.func, self.name = func, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.checked(self.func(*args, **kwargs))

    def checked(self, out: Any) -> Any:
        """``out``, or ValueError naming the function and what is wrong with it."""
        problem = reward_output_problem(out)
        if problem is not None:
            raise ValueError(
                f"reward function {self.name!r} returned {problem}; a reward function returns "
                "one float (or None) per completion, as a list"
            )
        return out


class CheckedAsyncReward(CheckedReward):
    """:class:`CheckedReward` of an async reward function (TRL awaits it, with the others)."""

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.checked(await self.func(*args, **kwargs))


def checked_rewards(funcs: list, names: list[str], given: int) -> list:
    """TRL's ``reward_funcs`` with the first ``given`` (the caller's) functions as
    :class:`CheckedReward` (async ones: :class:`CheckedAsyncReward`) under their TRL
    ``names``; reward models and what TRL added (an environment's reward) as they are."""
    from trl.trainer.utils import is_async_callable

    def checked(func: Any, name: str) -> Any:
        wrapper = CheckedAsyncReward if is_async_callable(func) else CheckedReward
        return func if isinstance(func, torch.nn.Module) else wrapper(func, name)

    return [
        checked(func, name) if index < given else func
        for index, (func, name) in enumerate(zip(funcs, names, strict=True))
    ]


def reward_output_problem(out: Any) -> str | None:
    """What is wrong with a reward function's return value ``out``, else ``None``.

    >>> reward_output_problem([1.0, None, 0])
    >>> reward_output_problem(0.5)
    'a float (0.5)'
    >>> reward_output_problem([1.0, "0.0"])
    "a str ('0.0') at position 1"
    """
    if isinstance(out, (torch.Tensor, np.ndarray)) and out.ndim == 1:
        out = list(out)
    if not isinstance(out, (list, tuple)):
        return f"a {type(out).__name__} ({_shown(out)})"
    for position, value in enumerate(out):
        if isinstance(value, (torch.Tensor, np.ndarray)) and value.ndim == 0:
            value = value.item()
        if value is not None and not isinstance(value, numbers.Real):
            return f"a {type(value).__name__} ({_shown(value)}) at position {position}"
    return None


def _shown(value: Any) -> str:
    """``repr(value)``, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
