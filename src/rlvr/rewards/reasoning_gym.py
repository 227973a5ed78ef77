r"""``reasoning_gym:<task>`` verifiers: reasoning-gym's own scorers, offline.

The reference is a reasoning-gym entry (``{"question", "answer", "metadata"}``), its JSON
text, or the answer alone; the task comes from the spec or from ``metadata["source_dataset"]``. The answer is
found as for ``math``, else the text after ``</think>``. ``binary=True`` pays only a full
score; ``binary=False`` maps the score ``s`` to ``wrong + (correct - wrong) * s``. An answer the
scorer raises on scores ``wrong``, counted as ``reasoning_gym_unreadable`` when the entry's
own answer scores (else it is a failure of the verifier). Scorers of
reasoning-gym 0.1.25 that pay wrong answers in full are replaced (:data:`REPLACED_SCORERS`),
and none is let run a completion as Python (``docs/rewards.md`` says how).
"""

from __future__ import annotations

import ast
import cmath
import contextlib
import functools
import json
import os
import re
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import reasoning_gym
from reasoning_gym.algebra.complex_arithmetic import ComplexArithmeticDataset
from reasoning_gym.algorithmic import binary_matrix, spiral_matrix, string_insertion
from reasoning_gym.factory import DATASETS
from reasoning_gym.games import n_queens

from rlvr.builtins import did_you_mean
from rlvr.rewards.events import record
from rlvr.rewards.extract import after_think, check_extract, extract_with, final_answers
from rlvr.rewards.math import screen_answer
from rlvr.rewards.registry import register


def task_names() -> list[str]:
    """Every task reasoning-gym registers."""
    return sorted(DATASETS)


def _halting_score(answer: str | None, entry: dict[str, Any]) -> float:
    """``game_of_life_halting``: 1 when the answer is the entry's ``True``/``False`` (any case)."""
    if answer is None:
        return 0.0
    return float(answer.strip().lower() == str(entry["answer"]).strip().lower())


COIN_FLIP_TOLERANCE = 1e-4
"""Distance from the probability within which a ``coin_flip`` answer is right (reasoning-gym's)."""
COIN_FLIP_RELATIVE = 0.01
"""Largest error relative to the probability: alone, 1e-4 would pay ``0`` for any probability
below it (15 heads in 15 flips is 3.05e-05)."""


def _coin_flip_score(answer: str | None, entry: dict[str, Any]) -> float:
    """``coin_flip``: 1 within :data:`COIN_FLIP_TOLERANCE` and :data:`COIN_FLIP_RELATIVE` of the
    probability; otherwise the share of leading characters the two numbers (``%.10g``) have in
    common, over the longer."""
    try:
        got, want = (
            float(Fraction(str(s).replace(",", "").strip())) for s in (answer, entry["answer"])
        )
    except (ValueError, ArithmeticError):  # not a number, 1/0, beyond float range (1e309)
        return 0.0
    if abs(got - want) <= min(COIN_FLIP_TOLERANCE, COIN_FLIP_RELATIVE * abs(want)):
        return 1.0
    texts = [f"{got:.10g}", f"{want:.10g}"]
    return len(os.path.commonprefix(texts)) / max(map(len, texts))


_ARITHMETIC_RE = re.compile(r"(?:[0-9 ()+-]|\*(?!\s*\*)|/(?!\s*/))+")  # no ** or //


def _arithmetic_score(answer: str | None, numbers: list[int], target: int) -> float:
    """1 when ``answer`` is an expression of ``+ - * /`` and parentheses that uses each of
    ``numbers`` once and equals ``target`` exactly (computed in fractions), else 0."""
    if answer is None or not _ARITHMETIC_RE.fullmatch(answer.strip()):
        return 0.0
    exact = re.sub(r"[0-9]+", r"F(\g<0>)", answer.strip())  # nothing but F can be called
    try:  # "(6)(4)" calls a Fraction; a number of 5000 digits is beyond int()'s limit
        if sorted(int(n) for n in re.findall(r"[0-9]+", answer)) != sorted(numbers):
            return 0.0
        return float(eval(exact, {"__builtins__": {}}, {"F": Fraction}) == target)
    except (SyntaxError, TypeError, ValueError, ArithmeticError, MemoryError, RecursionError):
        return 0.0


def _sorting_score(answer: str | None, entry: dict[str, Any]) -> float:
    """``number_sorting``: 1 when the answer is the gold list, each number equal as a number
    (``'30'`` for ``'30.0'``); reasoning-gym's let each be off by 1 (``['52', '30']`` was paid
    for ``['52.2', '30.0']``, ``['2', '2', '2']`` for ``['1', '2', '3']``)."""
    try:
        got, want = (json.loads(str(s).replace("'", '"')) for s in (answer, entry["answer"]))
        return float(type(got) is list and [float(x) for x in got] == [float(x) for x in want])
    except (ValueError, TypeError, ArithmeticError, RecursionError):
        return 0.0


REPLACED_SCORERS: dict[str, Callable[[str | None, dict[str, Any]], float]] = {
    "game_of_life_halting": _halting_score,
    "coin_flip": _coin_flip_score,
    "countdown": lambda a, e: _arithmetic_score(
        a, e["metadata"]["numbers"], e["metadata"]["target"]
    ),
    "puzzle24": lambda a, e: _arithmetic_score(a, e["metadata"]["numbers"], 24),
    "number_sorting": _sorting_score,
}
"""Tasks whose reasoning-gym scorer pays wrong answers in full -> the scorer used instead."""

for _module in (binary_matrix, n_queens, spiral_matrix, string_insertion):
    _module.eval = ast.literal_eval  # their scorers eval() an answer: a completion's code ran

SYMPY_PARSED = ("intermediate_integration", "polynomial_multiplication", "simple_integration")
"""Tasks whose scorer runs the answer through ``sympy.parse_expr`` (Python's ``eval``)."""
ELEMENTARY = {"sin", "cos", "tan", "cot", "sec", "csc", "asin", "acos", "atan", "sinh", "cosh"}
ELEMENTARY |= {"tanh", "exp", "log", "ln", "sqrt", "pi"}
_EXPRESSION_RE = re.compile(r"(?:[A-Za-z0-9 +*/()-]|\.(?=[0-9]))*")  # "." in numbers only


def _elementary(answer: str | None) -> bool:
    """Whether ``answer`` is written with numbers, one-letter symbols, :data:`ELEMENTARY`
    functions, ``+ - * / **`` and parentheses: no code, nor ``integrate``/``Integral``/``expand``
    (which restate the question as its answer), nor a size sympy cannot finish (``x**9**9**9``,
    as for ``math``: :func:`rlvr.rewards.math.screen_answer`)."""
    if answer is None or not _EXPRESSION_RE.fullmatch(answer) or screen_answer(answer):
        return False
    return all(len(name) == 1 or name in ELEMENTARY for name in re.findall(r"[A-Za-z]+", answer))


def _finite_complex(answer: str | None) -> bool:
    """Whether ``complex_arithmetic`` reads ``answer`` as a finite number: its score
    ``min(1, exp(-distance))`` is 1 for a NaN distance, so ``nan`` was paid for every entry."""
    number = ComplexArithmeticDataset.parse_string_to_complex(answer)
    return number is not None and cmath.isfinite(number)


ANSWER_GUARDS: dict[str, Callable[[str | None], bool]] = {
    **dict.fromkeys(SYMPY_PARSED, _elementary),
    "complex_arithmetic": _finite_complex,
}
"""Tasks -> which answers reach reasoning-gym's scorer; any other answer scores 0."""


def unknown_task(task: str) -> str:
    """The one-line error for a name that is no reasoning-gym task.

    >>> unknown_task("chainsum").startswith("unknown reasoning-gym task 'chainsum' (did you mean chain_sum?); ")
    True
    """
    names = task_names()
    return (
        f"unknown reasoning-gym task {task!r}{did_you_mean(task, names)}; "
        f"rlvr data tasks lists all {len(names)}"
    )


@functools.cache
def _score_fn(task: str):
    """The task's ``score_answer(answer, entry) -> float`` (one scorer object per process)."""
    if task not in DATASETS:
        raise ValueError(unknown_task(task))
    scorer = REPLACED_SCORERS.get(task) or reasoning_gym.get_score_answer_fn(task)
    guard = ANSWER_GUARDS.get(task)
    if guard is not None:
        return lambda answer, entry: scorer(answer, entry) if guard(answer) else 0.0
    return scorer


def _entry(reference: Any) -> dict[str, Any]:
    """The reasoning-gym entry behind ``reference``: an entry, its JSON text (a dataset column
    stored as text; read, not scored as the answer) or a bare answer, made a minimal entry."""
    if isinstance(reference, str) and reference.lstrip().startswith("{"):
        with contextlib.suppress(ValueError):
            parsed = json.loads(reference)
            if isinstance(parsed, dict) and "answer" in parsed:
                reference = parsed
    if isinstance(reference, dict):
        if "answer" not in reference:
            raise ValueError(f"reasoning-gym reference has no 'answer' key: {sorted(reference)}")
        return {"metadata": {}, **reference}
    if isinstance(reference, float) and cmath.isnan(reference):  # str(nan) paid "nan"
        raise ValueError("the reference is NaN (a missing value), not an answer")
    return {"answer": None if reference is None else str(reference), "metadata": {}}


def _task_of(entry: dict[str, Any], task: str | None) -> str:
    if task:
        return task
    metadata = entry["metadata"]
    source = metadata.get("source_dataset") if isinstance(metadata, dict) else None
    if not source:
        raise ValueError(
            "no task: use a 'reasoning_gym:<task>' spec or references with metadata.source_dataset"
        )
    return str(source)


def gym_answer(completion: str, extract: str = "strict") -> str | None:
    """The answer string given to reasoning-gym's scorer (``None``: flexible found no number, or
    the completion states several different answers, a hedge as for ``math``, counted as
    ``reasoning_gym_hedged``)."""
    if extract == "strict" and len({a for a in final_answers(completion) if a}) > 1:
        record("reasoning_gym_hedged")
        return None
    found = extract_with(completion, extract)
    if found is None and extract == "strict":
        return after_think(completion).strip()
    return found


_DECIMAL_RE = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|[-+]?\.\d+")


def gym_answer_key(
    completion: str, reference: Any, *, extract: str = "strict", **_: Any
) -> str | None:
    """The answer key (maj@k) of ``reasoning_gym``: the answer handed to the scorer, stripped,
    runs of spacing made one space; a plain decimal number as its value (``+01,000.00`` is
    ``1000``, as the arithmetic tasks' scorers read it). ``None``: no answer, or an empty one.

    >>> gym_answer_key("<answer> 1,000.50 </answer>", None), gym_answer_key("a  b", None)
    ('1000.5', 'a b')
    """
    text = " ".join((gym_answer(completion, extract) or "").split())
    if not text:
        return None
    if _DECIMAL_RE.fullmatch(text):
        number = Decimal(text.replace(",", "")).normalize()
        return format(number + 0, "f")  # + 0: -0 is 0
    return text


def _check_options(*, task: str | None, binary: bool, extract: str, **_: Any) -> None:
    """Refuse bad option values when the verifier is built (the registry calls this)."""
    check_extract(extract)
    if task:
        _score_fn(task)  # an unknown task raises, listing the valid ones
    if not isinstance(binary, bool):
        raise ValueError(f"binary must be True or False, got {binary!r}")


@register("reasoning_gym", spec_arg="task", check=_check_options)
def reasoning_gym_verifier(
    completion: str,
    reference: Any,
    *,
    task: str | None = None,
    correct: float = 1.0,
    wrong: float = 0.0,
    binary: bool = True,
    extract: str = "strict",
) -> float:
    r"""Score ``completion`` with the reasoning-gym scorer of ``task``.

    ``extract="flexible"`` hands the scorer the completion's last number
    (:func:`rlvr.rewards.extract.last_number`) instead of the strictly extracted answer.

    >>> entry = {"question": "4 - 1 - 7 =", "answer": "-4", "metadata": {"source_dataset": "chain_sum"}}
    >>> reasoning_gym_verifier("<answer>-4</answer>", entry), reasoning_gym_verifier(r"\boxed{5}", entry)
    (1.0, 0.0)
    >>> reasoning_gym_verifier("The answer is -4.", "-4", task="chain_sum", wrong=-1.0)
    1.0
    >>> reasoning_gym_verifier("4 - 1 - 7 = -4", entry), reasoning_gym_verifier("4 - 1 - 7 = -4", entry, extract="flexible")
    (0.0, 1.0)
    """
    entry = _entry(reference)
    answer = gym_answer(completion, extract)
    if answer is None:
        return wrong
    score = _score_fn(_task_of(entry, task))
    try:
        raw = float(score(answer, entry))
    except Exception:  # the answer's fault if the entry's own answer scores, else a failure
        with contextlib.suppress(Exception):
            float(score(entry["answer"], entry))
            record("reasoning_gym_unreadable")
            return wrong
        raise
    if binary:
        return correct if raw >= 1.0 else wrong
    return wrong + (correct - wrong) * min(max(raw, 0.0), 1.0)


reasoning_gym_verifier.answer_key = gym_answer_key  # type: ignore[attr-defined]
