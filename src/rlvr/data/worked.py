"""Step-by-step worked solutions for reasoning-gym problems, as SFT data.

A worked solution shows one arithmetic step per line inside ``<think>...</think>`` and
ends with the answer in ``\\boxed{}``::

    <think>
    4 - 1 = 3
    3 - 7 = -4
    </think>
    \\boxed{-4}

Every step is computed from the entry's metadata (not parsed from the question text),
so the steps are correct by construction and the boxed answer is the entry's
``answer``. Supported tasks are listed in :data:`WORKED_TASKS`.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


@dataclass(frozen=True)
class WorkedPair:
    """One SFT example: a problem and its worked solution."""

    prompt: str
    """The problem text as reasoning-gym states it (no chat template applied)."""
    response: str
    """``<think>`` steps ``</think>`` and the ``\\boxed{}`` answer."""
    answer: str
    """The reference answer, as reasoning-gym gives it."""
    metadata: dict[str, Any]
    """The entry's reasoning-gym metadata (task name, expression, ...)."""


def chain_sum_steps(entry: dict[str, Any]) -> list[str]:
    """Left-to-right partial sums of a ``chain_sum`` expression, one ``a op b = c`` per step.

    >>> chain_sum_steps({"metadata": {"expression": "4 - 1 - 7"}})
    ['4 - 1 = 3', '3 - 7 = -4']
    """
    tokens = entry["metadata"]["expression"].split()
    if len(tokens) % 2 == 0 or any(op not in "+-" for op in tokens[1::2]):
        raise ValueError(f"not a chain_sum expression: {entry['metadata']['expression']!r}")
    total = int(tokens[0])
    if len(tokens) == 1:
        return [str(total)]
    steps = []
    for op, term in zip(tokens[1::2], tokens[2::2], strict=True):
        value = total + int(term) if op == "+" else total - int(term)
        steps.append(f"{total} {op} {term} = {value}")
        total = value
    return steps


def leg_counting_steps(entry: dict[str, Any]) -> list[str]:
    """Legs per kind of animal (``count * legs = subtotal``), then the running total.

    >>> leg_counting_steps({"metadata": {"animals": {"cat": 2, "bird": 3}}})
    ['cat: 2 * 4 = 8', 'bird: 3 * 2 = 6', '8 + 6 = 14']
    """
    from reasoning_gym.arithmetic.leg_counting import ANIMALS

    animals = entry["metadata"]["animals"]
    unknown = sorted(set(animals) - set(ANIMALS))
    if unknown:
        raise ValueError(f"leg_counting entry names unknown animals: {unknown}")
    subtotals = [count * ANIMALS[name] for name, count in animals.items()]
    steps = [f"{name}: {n} * {ANIMALS[name]} = {n * ANIMALS[name]}" for name, n in animals.items()]
    total = subtotals[0]
    for sub in subtotals[1:]:
        steps.append(f"{total} + {sub} = {total + sub}")
        total += sub
    return steps


# reasoning-gym task name -> function(entry) -> the lines of its worked solution.
WORKED_TASKS: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "chain_sum": chain_sum_steps,
    "leg_counting": leg_counting_steps,
}


def format_response(steps: Sequence[str], answer: str) -> str:
    """The response text: steps inside ``<think>`` tags (none: an empty block), then ``\\boxed{answer}``."""
    thought = "".join(step + "\n" for step in steps)
    return "<think>\n" + thought + "</think>\n\\boxed{" + answer + "}"


def boxed_answer(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` in ``text`` (None when there is none).

    >>> boxed_answer("<think>1 + 1 = 2</think>\\n\\\\boxed{2}")
    '2'
    """
    found = _BOXED.findall(text)
    return found[-1].strip() if found else None


def worked_pair(entry: dict[str, Any], *, show_steps: bool = True) -> WorkedPair:
    """The worked solution of one reasoning-gym entry (its task read from the metadata).

    With ``show_steps=False`` the ``<think>`` block is left empty: a bare answer, as a
    model that guesses without working would write it.
    """
    task = entry.get("metadata", {}).get("source_dataset")
    if task not in WORKED_TASKS:
        raise ValueError(
            f"no worked solutions for task {task!r}; supported: {sorted(WORKED_TASKS)}"
        )
    steps = WORKED_TASKS[task](entry)
    final = steps[-1].rsplit("= ", 1)[-1]
    if final != entry["answer"]:
        raise ValueError(
            f"worked solution of {entry['question']!r} ends in {final}, answer is {entry['answer']}"
        )
    response = format_response(steps if show_steps else [], entry["answer"])
    return WorkedPair(entry["question"], response, entry["answer"], entry["metadata"])


def worked_pairs(
    entries: Iterable[dict[str, Any]], *, bare_fraction: float = 0.0, seed: int = 0
) -> list[WorkedPair]:
    """Worked solutions for every entry (e.g. a ``reasoning_gym.create_dataset`` result).

    ``bare_fraction`` of the pairs, chosen at random with ``seed``, give the bare answer
    without steps (see :func:`worked_pair`).
    """
    if not 0.0 <= bare_fraction <= 1.0:
        raise ValueError(f"bare_fraction must be in [0, 1], got {bare_fraction}")
    rng = random.Random(seed)
    return [worked_pair(entry, show_steps=rng.random() >= bare_fraction) for entry in entries]


def write_jsonl(pairs: Iterable[WorkedPair], path: str | Path) -> Path:
    """Write pairs as JSONL rows ``{"prompt", "response", "answer", "metadata"}``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for pair in pairs:
            out.write(json.dumps(asdict(pair), ensure_ascii=False) + "\n")
    return path
