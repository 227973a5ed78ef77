"""Small Python function-writing tasks with call-style tests, generated from a seed.

Each problem asks for one function (``sum_multiples(nums)``, ``caesar(s)``, ...), shows
one example call, and carries hidden tests in the form the ``code`` verifier reads::

    {"id": "code_tasks-0-3", "question": "Write a Python function ...",
     "tests": {"fn_name": "clamp_all", "inputs": [[[3, -7, 12]], ...], "outputs": [[3, -2, 9], ...]},
     "family": "clamp", "level": 1, "key": "clamp|-2|9"}

Load them with the ``code_tasks`` field mapping (the verifier receives ``tests``) and score
with ``code`` (Klear's soft pass rate) or ``code:binary``.

A *family* is a kind of problem with parameters (the divisor in "sum the multiples of
k", the shift of a Caesar cipher); a problem is a family plus its parameters, and its
``key`` names both. Problem ``i`` of a set is drawn from ``random.Random(f"{seed}:{i}")``,
so a set depends only on its seed and options; keys are unique within a set, and
``exclude`` drops keys already used elsewhere, so a held-out set never shares a problem
(even reworded) with the training set. Expected outputs come from the reference solutions
below, run here on the drawn inputs. Difficulty: each family has a ``level`` (1: one
loop or one built-in, 2: a condition or two, 3: a small algorithm) and ``min_level`` /
``max_level`` select the families; ``tests`` sets the hidden tests per problem.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MAX_DRAWS_PER_ROW = 50

VERSION = 2
"""Changes whenever a seed draws other rows (cached sets carry it in their name's hash)."""

WORDS = [
    "apple",
    "river",
    "stone",
    "cloud",
    "tiger",
    "lemon",
    "bread",
    "chair",
    "music",
    "green",
    "house",
    "light",
    "ocean",
    "pilot",
    "queen",
    "robot",
    "sugar",
    "table",
    "uncle",
    "voice",
    "water",
    "yellow",
    "zebra",
    "angle",
    "brick",
    "candy",
    "dance",
    "eagle",
    "flame",
    "grape",
    "honey",
    "index",
    "jelly",
    "kite",
    "lunar",
    "maple",
]


@dataclass(frozen=True)
class Problem:
    """One drawn problem: the text of the task, its function and its parameters."""

    key: str
    """Family and parameters, unique per problem (``clamp|-2|9``)."""
    fn_name: str
    """Name of the function to write."""
    signature: str
    """Its parameter list, e.g. ``nums``."""
    task: str
    """What it must return, one sentence."""
    solve: Callable[..., Any]
    """Reference solution."""
    draw: Callable[[random.Random], tuple]
    """Draws one argument tuple for a test."""


@dataclass(frozen=True)
class Family:
    """A kind of problem and how its parameters are drawn."""

    name: str
    """Family name (``code_tasks:<name>`` selects it alone)."""
    level: int
    """Difficulty 1-3."""
    make: Callable[[random.Random], Problem]
    """Draws a problem (parameters) of this family."""


def _ints(rng: random.Random, lo: int = -20, hi: int = 20, max_len: int = 8) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(rng.randint(0, max_len))]


def _words(rng: random.Random, max_len: int = 6) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, max_len)))


# ---------------------------------------------------------------- families, level 1


def _sum_multiples(rng: random.Random) -> Problem:
    k, op = rng.randint(2, 9), rng.choice(("sum", "count"))
    rem = rng.randrange(k)
    what = "the sum of the numbers" if op == "sum" else "how many numbers"
    which = (
        f"divisible by {k}"
        if rem == 0
        else f"leaving remainder {rem} when divided by {k} (x % {k} == {rem})"
    )
    return Problem(
        f"sum_multiples|{op}|{k}|{rem}",
        f"{op}_multiples" if rem == 0 else f"{op}_remainder",
        "nums",
        f"{what} in the list `nums` are {which}" if op == "count" else f"{what} in `nums` {which}",
        lambda nums: (sum if op == "sum" else len)([x for x in nums if x % k == rem]),
        lambda r: (_ints(r),),
    )


def _count_letters(rng: random.Random) -> Problem:
    letters = rng.choice(("aeiou", *string.ascii_lowercase))
    what = "vowels (a, e, i, o, u)" if letters == "aeiou" else f"letters '{letters}'"
    return Problem(
        f"count_letters|{letters}",
        "count_vowels" if letters == "aeiou" else f"count_{letters}",
        "s",
        f"how many {what} the lowercase string `s` contains",
        lambda s: sum(c in letters for c in s),
        lambda r: (_words(r),),
    )


def _clamp(rng: random.Random) -> Problem:
    lo, hi = rng.randint(-9, 0), rng.randint(1, 15)
    return Problem(
        f"clamp|{lo}|{hi}",
        "clamp_all",
        "nums",
        f"a new list with each number of `nums` clamped to the range [{lo}, {hi}] "
        f"(below {lo} becomes {lo}, above {hi} becomes {hi})",
        lambda nums: [min(max(x, lo), hi) for x in nums],
        lambda r: (_ints(r),),
    )


def _power_sum(rng: random.Random) -> Problem:
    p, offset = rng.randint(2, 4), rng.randint(-5, 5)
    shifted = f"(x + {offset})" if offset > 0 else f"(x - {-offset})" if offset else "x"
    return Problem(
        f"power_sum|{p}|{offset}",
        "power_sum",
        "nums",
        f"the sum of {shifted} ** {p} over the numbers x in the list `nums`",
        lambda nums: sum((x + offset) ** p for x in nums),
        lambda r: (_ints(r, -6, 6),),
    )


def _running(rng: random.Random) -> Problem:
    op = rng.choice(("max", "min", "sum"))
    fn = {"max": max, "min": min, "sum": lambda a, b: a + b}[op]

    def solve(nums: list[int]) -> list[int]:
        out: list[int] = []
        for x in nums:
            out.append(x if not out else fn(out[-1], x))
        return out

    return Problem(
        f"running|{op}",
        f"running_{op}",
        "nums",
        f"a list whose i-th item is the {op} of `nums[0]` to `nums[i]`",
        solve,
        lambda r: (_ints(r),),
    )


def _repeat_words(rng: random.Random) -> Problem:
    k, sep = rng.randint(2, 5), rng.choice(("-", "+", "_", "/", ",", ":"))
    return Problem(
        f"repeat_words|{k}|{sep}",
        "repeat_words",
        "s",
        f"the words of the string `s` each repeated {k} times and joined by '{sep}' "
        f"(for example 'ab cd' gives '{sep.join(['ab'] * k + ['cd'] * k)}')",
        lambda s: sep.join(w for w in s.split() for _ in range(k)),
        lambda r: (_words(r, 4),),
    )


def _affine(rng: random.Random) -> Problem:
    a, b = rng.choice((-3, -2, 2, 3, 4, 5)), rng.randint(-5, 5)
    body = f"{a} * x" + (f" + {b}" if b > 0 else f" - {-b}" if b else "")
    return Problem(
        f"affine|{a}|{b}",
        "transform",
        "nums",
        f"a new list with `{body}` for each number x of `nums`",
        lambda nums: [a * x + b for x in nums],
        lambda r: (_ints(r),),
    )


def _count_in_range(rng: random.Random) -> Problem:
    lo, hi = rng.randint(-10, 0), rng.randint(1, 12)
    return Problem(
        f"count_in_range|{lo}|{hi}",
        "count_in_range",
        "nums",
        f"how many numbers x in the list `nums` satisfy {lo} <= x <= {hi}",
        lambda nums: sum(lo <= x <= hi for x in nums),
        lambda r: (_ints(r),),
    )


# ---------------------------------------------------------------- families, level 2


def _reverse_words(rng: random.Random) -> Problem:
    mode, case = rng.choice(("order", "letters")), rng.choice(("keep", "upper", "title"))
    doing = "the order of its words reversed" if mode == "order" else "each word spelled backwards"
    upper = {"keep": "", "upper": ", in upper case", "title": ", each word capitalised"}[case]

    def solve(s: str) -> str:
        words = s.split()
        words = words[::-1] if mode == "order" else [w[::-1] for w in words]
        out = " ".join(words)
        return {"keep": out, "upper": out.upper(), "title": out.title()}[case]

    return Problem(
        f"reverse_words|{mode}|{case}",
        "reverse_words" if mode == "order" else "reverse_each",
        "s",
        f"the string `s` with {doing}{upper} (words separated by single spaces)",
        solve,
        lambda r: (_words(r),),
    )


def _fizzbuzz(rng: random.Random) -> Problem:
    a, b = rng.sample(range(2, 8), 2)
    w1, w2 = rng.choice((("Fizz", "Buzz"), ("Foo", "Bar"), ("Ping", "Pong")))

    def solve(n: int) -> list[str]:
        out = []
        for i in range(1, n + 1):
            word = (w1 if i % a == 0 else "") + (w2 if i % b == 0 else "")
            out.append(word or str(i))
        return out

    return Problem(
        f"fizzbuzz|{a}|{b}|{w1}",
        "fizzbuzz",
        "n",
        f"a list of strings for i = 1 .. n: '{w1}' if i is divisible by {a}, '{w2}' if by "
        f"{b}, '{w1}{w2}' if by both, otherwise str(i)",
        solve,
        lambda r: (r.randint(1, 20),),
    )


def _word_filter(rng: random.Random) -> Problem:
    k, cmp = rng.randint(2, 4), rng.choice(("longer", "shorter", "exactly"))  # words: 1-5 letters
    test = {"longer": int.__gt__, "shorter": int.__lt__, "exactly": int.__eq__}[cmp]
    has = {"longer": f"more than {k}", "shorter": f"fewer than {k}", "exactly": f"exactly {k}"}[cmp]
    return Problem(
        f"word_filter|{cmp}|{k}",
        f"{cmp}_words" if cmp != "exactly" else f"words_of_length_{k}",
        "s",
        f"the list of words of the string `s` (in order) that have {has} letters",
        lambda s: [w for w in s.split() if test(len(w), k)],
        lambda r: (" ".join(r.choice(WORDS)[: r.randint(1, 5)] for _ in range(r.randint(0, 6))),),
    )


def _digit_stat(rng: random.Random) -> Problem:
    op = rng.choice(("sum", "product", "count_odd", "max"))
    what = {
        "sum": "the sum of the decimal digits",
        "product": "the product of the decimal digits",
        "count_odd": "how many odd decimal digits are in",
        "max": "the largest decimal digit",
    }[op]

    def solve(n: int) -> int:
        digits = [int(c) for c in str(abs(n))]
        if op == "sum":
            return sum(digits)
        if op == "product":
            out = 1
            for d in digits:
                out *= d
            return out
        return sum(d % 2 for d in digits) if op == "count_odd" else max(digits)

    return Problem(
        f"digit_stat|{op}",
        f"digit_{op}",
        "n",
        f"{what} of the integer `n` (ignore its sign)",
        solve,
        lambda r: (r.randint(-99999, 99999),),
    )


def _rotate(rng: random.Random) -> Problem:
    k, side = rng.randint(1, 7), rng.choice(("left", "right"))

    def solve(nums: list[int]) -> list[int]:
        if not nums:
            return []
        shift = k % len(nums) if side == "left" else -k % len(nums)
        return nums[shift:] + nums[:shift]

    return Problem(
        f"rotate|{side}|{k}",
        f"rotate_{side}",
        "nums",
        f"the list `nums` rotated {side} by {k} position{'s' * (k > 1)} "
        "(an empty list stays empty)",
        solve,
        lambda r: (_ints(r, 0, 9),),
    )


# ---------------------------------------------------------------- families, level 3


def _caesar(rng: random.Random) -> Problem:
    k, way = rng.randint(1, 25), rng.choice(("forward", "back"))
    step, wrap = (k, "from z to a") if way == "forward" else (-k, "from a to z")
    return Problem(
        f"caesar|{way}|{k}",
        "caesar",
        "s",
        f"the string `s` with every lowercase letter shifted {k} places {way} in the "
        f"alphabet (wrapping {wrap}); other characters unchanged",
        lambda s: "".join(chr((ord(c) - 97 + step) % 26 + 97) if "a" <= c <= "z" else c for c in s),
        lambda r: (_words(r, 4),),
    )


def _dedupe(rng: random.Random) -> Problem:
    keep = rng.choice(("first", "last"))

    def solve(nums: list[int]) -> list[int]:
        seq = nums if keep == "first" else nums[::-1]
        seen: set[int] = set()
        out = [x for x in seq if not (x in seen or seen.add(x))]
        return out if keep == "first" else out[::-1]

    return Problem(
        f"dedupe|{keep}",
        f"dedupe_keep_{keep}",
        "nums",
        f"the list `nums` with repeated values removed, keeping the {keep} occurrence of "
        "each value, in their original order",
        solve,
        lambda r: (_ints(r, 0, 6, 10),),
    )


def _chunk_sums(rng: random.Random) -> Problem:
    k, op = rng.randint(2, 6), rng.choice(("sum", "max"))
    fn = sum if op == "sum" else max
    return Problem(
        f"chunk_sums|{op}|{k}",
        f"chunk_{op}s",
        "nums",
        f"the {'sums' if op == 'sum' else 'maxima'} of consecutive chunks of {k} items of `nums` "
        "(the last chunk may be shorter)",
        lambda nums: [fn(nums[i : i + k]) for i in range(0, len(nums), k)],
        lambda r: (_ints(r, -9, 9, 11),),
    )


def _kth_largest(rng: random.Random) -> Problem:
    k, end = rng.randint(1, 3), rng.choice(("largest", "smallest"))
    nth = ("", "second ", "third ")[k - 1]
    return Problem(
        f"kth_largest|{end}|{k}",
        f"kth_{end}",
        "nums",
        f"the {nth}{end} distinct value in `nums`, or None when it has fewer than {k} distinct values",
        lambda nums: (
            sorted(set(nums), reverse=end == "largest")[k - 1] if len(set(nums)) >= k else None
        ),
        lambda r: (_ints(r, -9, 9),),
    )


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("sum_multiples", 1, _sum_multiples),
        Family("count_letters", 1, _count_letters),
        Family("clamp", 1, _clamp),
        Family("power_sum", 1, _power_sum),
        Family("running", 1, _running),
        Family("repeat_words", 1, _repeat_words),
        Family("affine", 1, _affine),
        Family("count_in_range", 1, _count_in_range),
        Family("reverse_words", 2, _reverse_words),
        Family("fizzbuzz", 2, _fizzbuzz),
        Family("word_filter", 2, _word_filter),
        Family("digit_stat", 2, _digit_stat),
        Family("rotate", 2, _rotate),
        Family("caesar", 3, _caesar),
        Family("dedupe", 3, _dedupe),
        Family("chunk_sums", 3, _chunk_sums),
        Family("kth_largest", 3, _kth_largest),
    )
}
"""Every family by name."""

OPTIONS = ("min_level", "max_level", "tests")
"""Generator options (``data.gym.config`` for ``code_tasks:<family|all>`` sources)."""


def _question(problem: Problem, example: tuple, result: Any) -> str:
    call = f"{problem.fn_name}({', '.join(repr(a) for a in example)})"
    return (
        f"Write a Python function `{problem.fn_name}({problem.signature})` that returns "
        f"{problem.task}.\n\nExample: `{call}` returns `{result!r}`."
    )


def check_code_family(name: str) -> None:
    """Refuse, with one line, a name that is no code task family (nor ``all``)."""
    if name != "all" and name not in FAMILIES:
        raise ValueError(f"unknown code task family {name!r}; valid: all, {', '.join(FAMILIES)}")


def _families(name: str, min_level: int, max_level: int) -> list[Family]:
    check_code_family(name)
    chosen = list(FAMILIES.values()) if name == "all" else [FAMILIES[name]]
    chosen = [f for f in chosen if min_level <= f.level <= max_level]
    if not chosen:
        raise ValueError(f"no code task family {name!r} with level in [{min_level}, {max_level}]")
    return chosen


def _tests(problem: Problem, rng: random.Random, count: int) -> tuple[list, list]:
    """``count + 1`` distinct argument tuples (the first, the prompt's example, not empty) and outputs.

    The ``count`` hidden tests expect distinct outputs where the draws allow it, and otherwise
    repeat the fewest: a function returning one constant passes as few of them as it can.
    """
    inputs: list[tuple] = []
    outputs: list[Any] = []
    spare: list[tuple[tuple, Any]] = []  # drawn inputs whose output a hidden test already expects
    for _ in range(count * MAX_DRAWS_PER_ROW):
        args = problem.draw(rng)
        empty = any(hasattr(a, "__len__") and not a for a in args)
        if args in inputs or any(args == a for a, _ in spare) or (empty and not inputs):
            continue
        output = problem.solve(*args)
        if output in outputs[1:]:
            spare.append((args, output))
            continue
        inputs.append(args)
        outputs.append(output)
        if len(inputs) == count + 1:
            break
    while len(inputs) < count + 1 and spare:
        hidden = outputs[1:]
        args, output = min(spare, key=lambda drawn: hidden.count(drawn[1]))
        spare.remove((args, output))
        inputs.append(args)
        outputs.append(output)
    return inputs, outputs


def code_task_options(config: Mapping[str, Any] | None) -> dict[str, int]:
    """The :data:`OPTIONS` of ``config`` over their defaults; a ``ValueError`` naming an option
    that is not one, or whose value is not a whole number (``tests`` >= 1)."""
    options = {"min_level": 1, "max_level": 3, "tests": 5, **dict(config or {})}
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ValueError(f"code_tasks has no option(s) {unknown}; valid: {list(OPTIONS)}")
    for name, value in options.items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"code_tasks option {name} must be a whole number, got {value!r}")
    if options["tests"] < 1:
        raise ValueError(f"code_tasks option tests must be >= 1, got {options['tests']}")
    return options


def check_code_tasks(family: str, config: Mapping[str, Any] | None) -> None:
    """Refuse, with one line, an unknown ``family`` or bad options (what
    :func:`code_task_rows` would refuse), generating nothing."""
    options = code_task_options(config)
    _families(family, options["min_level"], options["max_level"])


def code_task_rows(
    family: str = "all",
    *,
    size: int,
    seed: int,
    config: Mapping[str, Any] | None = None,
    exclude: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """``size`` problems of ``family`` (or ``all``) with unique keys, none in ``exclude``.

    ``config`` holds the :data:`OPTIONS`: ``min_level`` (1), ``max_level`` (3) and
    ``tests`` (hidden tests per problem, 5). The example in the question is not among
    the hidden tests.
    """
    options = code_task_options(config)
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    families = _families(family, options["min_level"], options["max_level"])
    seen, rows = set(exclude), []
    for index in range(size * MAX_DRAWS_PER_ROW):
        rng = random.Random(f"{seed}:{index}")
        chosen = families[rng.randrange(len(families))]
        problem = chosen.make(rng)
        if problem.key in seen:
            continue
        seen.add(problem.key)
        inputs, outputs = _tests(problem, rng, options["tests"])
        rows.append(
            {
                "id": f"code_tasks-{seed}-{index}",
                "question": _question(problem, inputs[0], outputs[0]),
                "tests": {
                    "fn_name": problem.fn_name,
                    "inputs": [list(a) for a in inputs[1:]],
                    "outputs": outputs[1:],
                },
                "family": chosen.name,
                "level": chosen.level,
                "key": problem.key,
            }
        )
        if len(rows) == size:
            return rows
    raise ValueError(
        f"code_tasks:{family} (seed {seed}) gave only {len(rows)} new distinct problems, "
        f"{size} asked (families {[f.name for f in families]} have too few parameter choices)"
    )


def keys_in(paths: Iterable[Any]) -> set[str]:
    """Every problem ``key`` in the given JSONL files (for ``exclude``)."""
    from rlvr.data.loading import field_values

    return field_values(paths, "key", " (not a code_tasks file)")
