r"""The ``math`` verifier: one final answer, screened, compared through ``math-verify``.

The final answers (:func:`rlvr.rewards.extract.final_answers`): none, or several that differ
(``math_hedged``), score ``wrong``. :func:`screen_answer` cuts off answers no honest solution
writes and that would make SymPy compute for hours; ``math-verify`` compares the rest in a
helper process (:func:`rlvr.sandbox.bounded.call_bounded`) under ``compare_timeout_s`` and
``compare_memory_mb``, so :func:`math_verifier` returns in bounded time and memory from any
thread; cut-off answers score ``wrong`` and count as ``math_rejected`` (``docs/rewards.md``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
from decimal import Decimal
from typing import Any

import sympy
from math_verify import LatexExtractionConfig, grader, parse, verify

from rlvr.rewards.events import record
from rlvr.rewards.extract import check_extract, extract_with, final_answers
from rlvr.rewards.registry import register
from rlvr.sandbox.bounded import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, LimitExceeded, call_bounded

MAX_ANSWER_CHARS = 1000
"""Longest answer compared."""
MAX_NESTING = 20
"""Deepest nesting of ``{}``, ``()`` and ``[]`` groups in a compared answer."""
MAX_DIGITS = 200
"""Longest run of digits in a compared answer."""
MAX_POWER_HEIGHT = 2
"""Most powers stacked in one tower: ``x^{y^{z}}`` (2) is compared, ``a^{b^{c^{d}}}`` cut off."""
MAX_RESULT_DIGITS = 100_000
"""Most digits a power or factorial of literal numbers may have (estimated, not computed)."""

# Thousands separators written with LaTeX spaces ("10\,000", "10\ 000") -> "10000".
_THIN_SPACE_RE = re.compile(r"(?<=\d)\\[,;: ](?=\d{3}(?!\d))")
# "x = 1,000" -> "x = 1000": math-verify reads thousands commas only in a bare number.
_ASSIGNED_NUMBER_RE = re.compile(
    r"^([A-Za-z](?:_\{?\w+\}?)?\s*=\s*)(-?\d{1,3}(?:(?:,|\{,\})\d{3})+)(?=(?:\.\d+)?$)"
)
# LaTeX only: math-verify's plain-expression fallback read LaTeX it could not parse as the
# last number in it ("x \\not= 5" was 5, "x**2 + 1" was 1).
_EXTRACTION = (LatexExtractionConfig(),)
_LEADING_APPROX_RE = re.compile(r"^\\(?:approx|sim)(?![A-Za-z])\s*")  # "\approx 5" is 5
_SCIENTIFIC_RE = re.compile(r"[-+]?\d+(?:\.\d*)?[eE][-+]?\d+")


for _name in ("math_verify.parser", "math_verify.grader"):  # its signal timeouts are off here
    logging.getLogger(_name).addFilter(lambda r: "Timeout is disabled" not in r.getMessage())


def parse_answer(answer: str) -> list:
    r"""Parse one answer string (no surrounding prose) into math-verify's representation.

    >>> parse_answer(r"\dfrac{3}{4}")[0]
    3/4
    """
    answer = _THIN_SPACE_RE.sub("", answer.strip().strip("$").strip())
    answer = _LEADING_APPROX_RE.sub("", answer)
    answer = _ASSIGNED_NUMBER_RE.sub(lambda m: m[1] + re.sub(r"[{,}]", "", m[2]), answer)
    return parse(
        "\\boxed{" + answer + "}",
        extraction_config=_EXTRACTION,
        parsing_timeout=None,
    )


def gold_answer(reference: Any) -> str:
    r"""The gold answer of ``reference`` as text: a number, a string (a solution's one
    ``\boxed{}``), or a reasoning-gym entry (its ``answer``). ``ValueError`` for anything else:
    no answer (``None``, NaN, a list), or a solution boxing different answers.

    >>> gold_answer(r"so $\boxed{7}$, again \boxed{ 7 }"), gold_answer(1e-05), gold_answer("2.5E+3")
    ('7', '0.00001', '2500')
    """
    gold = reference.get("answer") if isinstance(reference, dict) else reference
    missing = gold is None or str(gold).strip().lower() == "nan"  # pandas reads a gap as NaN
    if missing or isinstance(gold, (list, tuple, bool, dict)):
        # its str() matches no honest answer ("None" matched \boxed{None}): an error, not a score
        raise ValueError(f"the reference {reference!r:.60} is not one answer (text or a number)")
    text = repr(float(gold)) if isinstance(gold, float) else str(gold).strip()
    if _SCIENTIFIC_RE.fullmatch(text):  # a float's text, "1e-05", is Euler's e minus 5 to SymPy
        return format(Decimal(text), "f")
    boxed = [a for a in final_answers(text) if a] if "\\boxed" in text or "\\fbox" in text else []
    if len({_spelling(a) for a in boxed}) > 1:
        raise ValueError(f"the reference boxes different answers, {boxed!r:.60}: give it one")
    return boxed[-1] if boxed else text


def parse_reference(reference: Any) -> list:
    """Parse a gold answer (:func:`gold_answer`)."""
    return parse_answer(gold_answer(reference))


def answers_match(predicted: str, reference: Any) -> bool:
    r"""True when ``predicted`` (an extracted answer) equals ``reference`` mathematically.

    >>> answers_match("0.75", r"\frac{3}{4}"), answers_match("(0,1]", "(0, 1)")
    (True, False)
    """
    gold = parse_reference(reference)
    guess = parse_answer(predicted)
    if not gold or not guess:
        return False
    verdict = _named_verdict(gold[0], guess[0])
    if verdict is None:
        verdict = _counted_verdict(gold[0], guess[0])
    return verify(gold, guess, timeout_seconds=None) if verdict is None else verdict


def _close_as_numbers(gold: Any, guess: Any) -> bool:
    r"""Whether two numbers ``math-verify`` calls equal are that close. It rounds decimals to 6
    places, so ``0.0`` equalled ``\frac{1}{2^{30}}``, and a decimal holds 15 digits, so
    ``2^{64} - 1 + 0.0`` equalled ``2^{64}``. Here a decimal stands for no integer beyond
    2^53, and a number is within 1% of a nonzero gold one (which never binds above 1e-3).
    Anything but two numbers passes; :func:`_strictly` asks this of each pair ``math-verify``
    compares.

    >>> answers_match("0.0", r"\frac{1}{2^{30}}"), answers_match("0.3333333", r"\frac13")
    (False, True)
    """
    if not all(isinstance(x, sympy.Expr) and x.is_number for x in (gold, guess)):
        return True
    try:
        if guess.has(sympy.Float) and not gold.has(sympy.Float) and gold.is_integer:
            return abs(gold) <= 2**53
        # doit(): a percentage is x * (1/100), left unevaluated
        want, got = (complex(x.doit().evalf(30)) for x in (gold, guess))
    except (TypeError, ValueError, OverflowError, ArithmeticError):
        return True  # not a complex number: math-verify's verdict stands
    if want == 0 or not math.isfinite(abs(want) + abs(got)):
        return True  # infinities, too
    return abs(got - want) <= 0.01 * abs(want)


def _strictly(compare: Any) -> Any:
    r"""``math-verify``'s ``compare(gold, guess, ...)``, true only when :func:`_close_as_numbers`
    agrees, a percentage read as its fraction or its number (``3\%`` is right for 0.03 and 3).
    It replaces the comparisons ``math-verify`` makes of each pair of values, inside sets,
    tuples, intervals, matrices and equations too (``x = 0.0`` was paid for ``2^{-30}``)."""

    def compare_strictly(gold: Any, guess: Any, *args: Any) -> bool:
        if not compare(gold, guess, *args):
            return False
        readings = [(x, grader.get_pct_val(x, x)) for x in (gold, guess)]
        return any(_close_as_numbers(g, p) for g in readings[0] for p in readings[1])

    return compare_strictly


def _pairwise(compare_sets: Any) -> Any:
    r"""``math-verify``'s set comparison, two finite sets (or tuples) compared only pair by pair:
    SymPy's set equality let ``\{2^{64} - 1 + 0.0\}`` equal ``\{2^{64}\}`` unchecked. An
    interval with an infinite end is never read as the pair of its ends: ``-\infty, 2`` was
    paid for ``(-\infty, 2)`` (``(0, 5)`` may be a point, so ``0, 5`` still is)."""

    def compare(gold: Any, guess: Any, *args: Any) -> bool:
        sets = [
            x if isinstance(x, (sympy.Set, sympy.Tuple)) else sympy.FiniteSet(x)
            for x in (gold, guess)
        ]
        finite = [isinstance(x, (sympy.FiniteSet, sympy.Tuple)) for x in sets]
        if all(finite):
            return grader.sympy_deep_compare_set_and_tuple(*sets, *args)
        if any(finite) and any(_unbounded_interval(x) for x in sets):
            return False
        return compare_sets(gold, guess, *args)

    return compare


def _unbounded_interval(value: Any) -> bool:
    """Whether ``value`` is an interval with an infinite end (``(-\\infty, 2)``)."""
    return isinstance(value, sympy.Interval) and (value.start.is_infinite or value.end.is_infinite)


def _written(value: Any) -> tuple | None:
    """The items of a finite set as written, repeats kept (``2, 2, 3``), or of a tuple;
    ``None`` for anything else."""
    if isinstance(value, sympy.FiniteSet):  # latex2sympy keeps the written order beside the set's
        return tuple(getattr(value, "_unsorted_args", value.args))
    return tuple(value) if isinstance(value, sympy.Tuple) else None


def _counted_verdict(gold: Any, guess: Any) -> bool | None:
    """Whether ``guess`` lists each value of a gold list that repeats one (roots counted with
    multiplicity, ``2, 2, 3``) as many times, in any order; ``None`` for any other gold
    (``math-verify`` decides). A set drops repeats, so ``2, 3`` equalled ``2, 2, 3``."""
    items = _written(gold) if isinstance(gold, sympy.FiniteSet) else None
    if items is None or len(items) == len(gold.args):
        return None
    listed = _written(guess)
    if listed is None or len(listed) != len(items):
        return False
    keyed = [sympy.ordered(x, keys=grader.sort_key, default=False) for x in (items, listed)]
    return _same(*(sympy.Tuple(*x) for x in keyed))


def _named(value: Any) -> tuple[tuple, tuple, bool] | None:
    """``(unknowns, values, declared)`` of an answer naming two or more distinct unknowns:
    ``x = 5, y = 6`` (in the written order; ``declared`` False) or ``(x, y) = (5, 6)``
    (``declared`` True); ``None`` for any other answer."""
    if isinstance(value, sympy.Eq) and isinstance(value.lhs, sympy.Tuple):
        names, values, declared = tuple(value.lhs), _listed(value.rhs), True
    elif isinstance(value, sympy.FiniteSet):
        equations = _written(value)
        if not all(isinstance(e, sympy.Eq) for e in equations):
            return None
        names = tuple(e.lhs for e in equations)
        values, declared = tuple(e.rhs for e in equations), False
    else:
        return None
    distinct = len(set(names)) == len(names) > 1 and all(isinstance(n, sympy.Symbol) for n in names)
    return (names, values, declared) if distinct and len(values or ()) == len(names) else None


def _listed(value: Any) -> tuple | None:
    """The values of a plain list, in the order written: ``(5, 6)`` (parsed as an open
    interval), ``(6, 5)`` (a tuple), ``5, 6`` or ``\\{5, 6\\}`` (a set); else ``None``."""
    if isinstance(value, sympy.Tuple):
        return tuple(value)
    if isinstance(value, sympy.Interval) and value.left_open and value.right_open:
        return (value.start, value.end)
    if isinstance(value, sympy.FiniteSet):
        items = _written(value)
        return None if any(isinstance(x, sympy.Eq) for x in items) else items
    return None


def _named_verdict(gold: Any, guess: Any) -> bool | None:
    """Whether ``guess`` gives each unknown its gold value, when either answer names its
    unknowns (:func:`_named`); ``None`` when neither does (``math-verify`` decides).

    Named against named matches by name, in any order. Plain values against named ones are
    read in the declared order of ``(x, y) = ...``; against ``y = 6, x = 5`` they must match
    in the written order and in alphabetical order both (a list does not say which it
    follows). ``math-verify`` sorted both lists, paying ``(6, 5)`` for ``x = 5, y = 6``, and
    read ``(x, y) = (5, 6)`` as an equation, paying ``y = 5, x = 6`` for it.
    """
    want, got = _named(gold), _named(guess)
    if want is None and got is None:
        return None
    if want is not None and got is not None:
        values = dict(zip(got[0], got[1], strict=True))
        return set(want[0]) == set(values) and all(
            _same(v, values[n]) for n, v in zip(want[0], want[1], strict=True)
        )
    (names, values, declared), listed = want or got, _listed(guess if want else gold)
    if listed is None or len(listed) != len(names):
        return None
    by_name = dict(zip(names, values, strict=True))
    orders = {names} if declared else {names, tuple(sorted(names, key=str))}
    pairs = [
        (by_name[n], x) if want else (x, by_name[n])
        for o in orders
        for n, x in zip(o, listed, strict=True)
    ]
    return all(_same(g, p) for g, p in pairs)


def _same(gold: Any, guess: Any) -> bool:
    """``math-verify``'s verdict on two parsed values (strict: :func:`_strictly`)."""
    return verify(gold, guess, timeout_seconds=None)


for _name in ("sympy_numeric_eq", "sympy_symbolic_eq"):
    setattr(grader, _name, _strictly(getattr(grader, _name)))
grader.sympy_compare_sets = _pairwise(grader.sympy_compare_sets)


_POWER_RE = re.compile(r"\^|\*\*")
_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?")
_DIGITS_RE = re.compile(r"\d+")
_FACTORIAL_RE = re.compile(r"(\d+)\s*!")
_COMMAND_RE = re.compile(r"\\[A-Za-z]+")
_OPENERS, _CLOSERS = "{([", "})]"
_SPACING_RE = re.compile(r"\s+|\\left|\\right|\\[,;:! ]|\$")


def _nesting(text: str) -> int:
    depth = deepest = 0
    for char in text:
        if char in _OPENERS:
            depth += 1
            deepest = max(deepest, depth)
        elif char in _CLOSERS:
            depth = max(0, depth - 1)
    return deepest


def _group_end(text: str, start: int) -> int:
    """End of the balanced group opening at ``text[start]`` (the text's end if unclosed)."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] in _OPENERS:
            depth += 1
        elif text[i] in _CLOSERS:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _token_end(text: str, start: int) -> int:
    """End of the operand starting at ``start``: a group, a number, a command or a character."""
    if start >= len(text):
        return start
    if text[start] in _OPENERS:
        return _group_end(text, start)
    number = _NUMBER_RE.match(text, start)
    if number:
        return number.end()
    command = _COMMAND_RE.match(text, start)
    return command.end() if command else start + 1


def _exponent_end(text: str, start: int) -> int:
    """End of an exponent: one operand, and any power chained onto it (``2^3^4``)."""
    end = _token_end(text, start)
    chained = _POWER_RE.match(text, end)
    return _exponent_end(text, chained.end()) if chained else end


def _ungroup(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] in _OPENERS and _group_end(text, 0) == len(text):
        return text[1:-1]
    return text


def _power_height(text: str, limit: int = MAX_POWER_HEIGHT + 1) -> int:
    """Most powers stacked in one tower in ``text`` (``x^{y^{z}}``: 2), at most ``limit``."""
    best, i = 0, 0
    while i < len(text) and best < limit:
        op = _POWER_RE.match(text, i)
        if op is None:
            i += 1
            continue
        end = _exponent_end(text, op.end())
        best = max(best, 1 + _power_height(_ungroup(text[op.end() : end]), limit - 1))
        i = end
    return best


def _log10_value(text: str) -> float | None:
    """log10 of a positive number or power of numbers (``2^{3^{4}}``); ``None`` for anything else."""
    text = _ungroup(text)
    number = _NUMBER_RE.match(text)
    if number is None or float(number.group()) <= 0:
        return None
    base = float(number.group())
    if number.end() == len(text):
        return math.log10(base)
    op = _POWER_RE.match(text, number.end())
    if op is None or _exponent_end(text, op.end()) != len(text):
        return None
    exponent = _log10_value(text[op.end() :])
    if exponent is None or base <= 1:
        return None if exponent is None else 0.0
    return math.inf if exponent > 300 else 10**exponent * math.log10(base)


def _power_digits(text: str) -> float:
    """Largest estimated digit count of a power of literal numbers in ``text`` (0 without one)."""
    largest = 0.0
    for op in _POWER_RE.finditer(text):
        base = re.search(r"(\d+(?:\.\d+)?)\s*\}?\s*$", text[: op.start()])
        if base is None or float(base.group(1)) in (0.0, 1.0):
            continue
        exponent = _log10_value(text[op.end() : _exponent_end(text, op.end())])
        if exponent is not None:  # a base below 1 gives as many digits in the denominator
            scale = abs(math.log10(float(base.group(1))))
            largest = max(largest, math.inf if exponent > 300 else 10**exponent * scale)
    return largest


def screen_answer(answer: str) -> str | None:
    r"""Why ``answer`` is too big to compare, or ``None`` when it may be compared.

    >>> screen_answer(r"\frac{3}{4}") is None, screen_answer(r"2^{10}") is None
    (True, True)
    >>> screen_answer(r"10^{10^{10^{10}}}")
    'a tower of 3 or more stacked powers'
    >>> screen_answer("9^{123456789}")
    'a power with about 117807716 digits'
    """
    if len(answer) > MAX_ANSWER_CHARS:
        return f"longer than {MAX_ANSWER_CHARS} characters"
    if _nesting(answer) > MAX_NESTING:
        return f"groups nested deeper than {MAX_NESTING}"
    if max((len(d) for d in _DIGITS_RE.findall(answer)), default=0) > MAX_DIGITS:
        return f"a number with more than {MAX_DIGITS} digits"
    if _power_height(answer) > MAX_POWER_HEIGHT:
        return f"a tower of {MAX_POWER_HEIGHT + 1} or more stacked powers"
    digits = _power_digits(answer)
    if digits > MAX_RESULT_DIGITS:
        return f"a power with about {digits:.0f} digits"
    for n in _FACTORIAL_RE.findall(answer):
        if int(n) > 10_000:
            return f"the factorial of {n}"
    return None


def _spelling(answer: str) -> str:
    """The answer with spacing and fraction spellings dropped (to tell repeats from hedges)."""
    answer = _SPACING_RE.sub("", answer).rstrip(".")
    return answer.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")


def final_answer(completion: str) -> str | None:
    r"""The one final answer of ``completion``; ``None`` when there is none or several differ.

    A completion with different answers counts as ``math_hedged``.

    >>> final_answer(r"\boxed{\dfrac{1}{2}} ... so again \boxed{\frac{1}{2}}")
    '\\frac{1}{2}'
    >>> final_answer(r"\boxed{3} or \boxed{4}") is None
    True
    """
    answers = [a for a in final_answers(completion) if a]
    if not answers:
        return None
    if len({_spelling(a) for a in answers}) > 1:
        record("math_hedged")
        return None
    return answers[-1]


def compared_answer(completion: str, extract: str = "strict") -> str | None:
    """The answer of ``completion`` the ``math`` verifier compares: :func:`final_answer`
    (``strict``), else the one ``extract`` takes (``flexible``: the last number)."""
    return final_answer(completion) if extract == "strict" else extract_with(completion, extract)


def _check_options(
    *, compare_timeout_s: float, compare_memory_mb: int, extract: str, **_: Any
) -> None:
    """Refuse bad option values when the verifier is built (the registry calls this)."""
    check_extract(extract)
    if not compare_timeout_s > 0:
        raise ValueError(f"compare_timeout_s must be positive, got {compare_timeout_s!r}")
    if not compare_memory_mb > 0:
        raise ValueError(f"compare_memory_mb must be positive, got {compare_memory_mb!r}")


@register("math", check=_check_options)
def math_verifier(
    completion: str,
    reference: Any,
    *,
    correct: float = 1.0,
    wrong: float = 0.0,
    compare_timeout_s: float = DEFAULT_TIMEOUT_S,
    compare_memory_mb: int = DEFAULT_MEMORY_MB,
    extract: str = "strict",
) -> float:
    r"""``correct`` if the completion's one final answer equals ``reference``, else ``wrong``.

    ``compare_timeout_s`` and ``compare_memory_mb`` bound the comparison (module docstring);
    ``extract="flexible"`` takes the completion's last number as its answer.

    >>> math_verifier(r"Half of 3/2 is \boxed{\dfrac{3}{4}}.", "0.75")
    1.0
    >>> math_verifier("The answer is 10,000.", r"10^4", wrong=-1.0)
    1.0
    >>> math_verifier("The answer is 7.", "8", wrong=-1.0)
    -1.0
    >>> math_verifier("8 is what I would guess without committing.", "8")
    0.0
    >>> math_verifier(r"\boxed{7} or \boxed{8}", "8"), math_verifier(r"\boxed{9^{9^{9^{9}}}}", "8")
    (0.0, 0.0)
    >>> math_verifier("8 is what I would guess, or 8.0", "8", extract="flexible")
    1.0
    """
    gold = gold_answer(reference)  # a bad reference is an error, before any answer is read
    answer = compared_answer(completion, extract)
    if answer is None:
        return wrong
    if screen_answer(answer) is not None:
        record("math_rejected")
        return wrong
    try:
        same = call_bounded(
            answers_match,
            answer,
            gold,
            timeout_s=compare_timeout_s,
            memory_mb=compare_memory_mb,
        )
    except LimitExceeded:
        record("math_rejected")
        return wrong
    return correct if same else wrong


def _unnamed(value: Any) -> Any:
    """``value`` without the one unknown it names: ``x = 5`` is 5, ``x = 2, x = 3`` is the set
    ``{2, 3}``; anything else as it is."""
    if isinstance(value, sympy.Eq) and isinstance(value.lhs, sympy.Symbol):
        return value.rhs
    equations = _written(value) or ()
    names = {e.lhs if isinstance(e, sympy.Eq) else None for e in equations}
    if len(names) == 1 and isinstance(next(iter(names)), sympy.Symbol):
        return sympy.FiniteSet(*(e.rhs for e in equations))
    return value


def canonical_answer(answer: str) -> str:
    r"""One text for an answer's value, its vote in maj@k: :func:`parse_answer`'s value with one
    named unknown dropped (:func:`_unnamed`); a number evaluated (``10^4``; ``75\%`` is 0.75) as
    its integer (exact) or its 12 significant digits, anything else as SymPy writes it, decimals
    made fractions (sets are sorted). Unparsed: ``text:`` and the answer without spacing.

    >>> [canonical_answer(a) for a in (r"\dfrac34", "0.75", "10,000", "x = 10^4", r"\{2, 1\}")]
    ['0.750000000000', '0.750000000000', '10000', '10000', '{1, 2}']
    """
    parsed = parse_answer(answer)
    value = parsed[0] if parsed else None
    if not isinstance(value, sympy.Basic):
        return "text:" + _spelling(answer)
    value = _unnamed(value).xreplace({f: sympy.Rational(str(f)) for f in value.atoms(sympy.Float)})
    if not value.is_number:
        return str(value)
    try:
        value = value.doit()
        near = sympy.N(value, 15)
        if value.is_Integer or not (near.is_extended_real and near.is_finite):
            return str(value if value.is_Integer else sympy.N(near, 12))
        whole = abs(near) < 2**53 and float(near).is_integer()
        return str(int(near)) if whole else str(sympy.N(near, 12))
    except (TypeError, ValueError, ArithmeticError):
        return str(value)


def math_answer_key(
    completion: str,
    reference: Any,
    *,
    extract: str = "strict",
    compare_timeout_s: float = DEFAULT_TIMEOUT_S,
    compare_memory_mb: int = DEFAULT_MEMORY_MB,
    **_: Any,
) -> str | None:
    """The ``math`` verifier's answer key: :func:`canonical_answer` of the final answer it
    compares (``None``: none, or a hedge), under its comparison's limits; an answer it cuts
    off is keyed by its spelling (``text:...``).

    >>> math_answer_key("so the answer is 0.5", None), math_answer_key(r"\boxed{1}, \boxed{2}", 1)
    ('0.500000000000', None)
    """
    answer = compared_answer(completion, extract)
    if answer is None:
        return None
    if screen_answer(answer) is None:
        with contextlib.suppress(LimitExceeded):
            return call_bounded(
                canonical_answer,
                answer,
                timeout_s=compare_timeout_s,
                memory_mb=compare_memory_mb,
            )
    return "text:" + _spelling(answer)


def _start_helper() -> None:
    """Start a comparison helper process (and import SymPy in it) ahead of the first answer."""
    call_bounded(answers_match, "0", "0")


math_verifier.warm_up = _start_helper  # type: ignore[attr-defined]
math_verifier.answer_key = math_answer_key  # type: ignore[attr-defined]
