"""The code verifier: extraction, reference formats, judging, and pass rates through the sandbox."""

from __future__ import annotations

import doctest
import json
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction

import pytest

from rlvr.rewards import code as code_module
from rlvr.rewards.code import (
    SKIPPED,
    CodeConfig,
    TestSuite,
    code_verifier,
    extract_code,
    parse_reference,
    run_tests,
    stdout_matches,
    values_match,
)
from rlvr.rewards.events import counting
from rlvr.rewards.scoring import score_completions
from rlvr.sandbox import SandboxError, SandboxLimits, SandboxPolicy

FAST = CodeConfig(limits=SandboxLimits(wall_time_s=5.0, cpu_time_s=1.0, memory_mb=256))

# --- stdin/stdout: add two integers --------------------------------------------------------
SUM_REF = {"inputs": ["1 2\n", "-3 5\n", "10 -20\n"], "outputs": ["3\n", "2\n", "-10\n"]}
SUM_RIGHT = "a, b = map(int, input().split())\nprint(a + b)"
SUM_ABS = "a, b = map(int, input().split())\nprint(abs(a) + abs(b))"  # right on 1 of 3
SUM_NEG_ONLY_WRONG = "a, b = map(int, input().split())\nprint(a + b if b > 0 else 0)"  # 2 of 3
SUM_WRONG = "print(0)"
SUM_DEEP = """import resource, sys
from functools import lru_cache
resource.setrlimit(resource.RLIMIT_STACK, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
sys.setrecursionlimit(10**6)
@lru_cache(maxsize=None)  # C frames: past 8 MiB of stack without the line above
def count(n):
    return 0 if n == 0 else count(n - 1) + 1
a, b = map(int, input().split())
print(a + b + count(50000) - 50000)"""

# --- call style --------------------------------------------------------------------------
MAX_REF = {
    "fn_name": "biggest",
    "inputs": [[[1, 5, 2]], [[-4, -2]], [[7]]],
    "outputs": [[5], [-2], [7]],
}
MAX_RIGHT = "def biggest(xs):\n    return max(xs)"
MAX_POSITIVE_ONLY = "def biggest(xs):\n    return max(max(xs), 0)"  # 2 of 3
LEETCODE_REF = {
    "fn_name": "twoSum",
    "inputs": [[[2, 7, 11, 15], 9], [[3, 2, 4], 6], [[3, 3], 6]],
    "outputs": [[0, 1], [1, 2], [0, 1]],
}
LEETCODE_RIGHT = """
class Solution:
    def twoSum(self, nums: List[int], target: int) -> List[int]:
        seen = {}
        for i, x in enumerate(nums):
            if target - x in seen:
                return (seen[target - x], i)
            seen[x] = i
"""

# --- asserts -----------------------------------------------------------------------------
SQUARE_ASSERTS = ["assert square(2) == 4", "assert square(-3) == 9", "assert square(0) == 0"]
SQUARE_RIGHT = "def square(x):\n    return x * x"
SQUARE_ABS_BUG = "def square(x):\n    return x * abs(x)"  # 2 of 3


def _fenced(program: str) -> str:
    return f"Let me think.\n```python\n{program}\n```\nDone."


@pytest.mark.parametrize(
    ("program", "reference", "rate"),
    [
        (SUM_RIGHT, SUM_REF, 1.0),
        (SUM_NEG_ONLY_WRONG, SUM_REF, 2 / 3),
        (SUM_ABS, SUM_REF, 1 / 3),
        (SUM_WRONG, SUM_REF, 0.0),
        (MAX_RIGHT, MAX_REF, 1.0),
        (MAX_POSITIVE_ONLY, MAX_REF, 2 / 3),
        (LEETCODE_RIGHT, LEETCODE_REF, 1.0),
        (SQUARE_RIGHT, SQUARE_ASSERTS, 1.0),
        (SQUARE_ABS_BUG, SQUARE_ASSERTS, 2 / 3),
        (SUM_RIGHT + "\nexit()", SUM_REF, 1.0),
        (SUM_DEEP, SUM_REF, 1.0),
    ],
    ids=[
        "stdio-right",
        "stdio-2of3",
        "stdio-1of3",
        "stdio-wrong",
        "call-right",
        "call-2of3",
        "leetcode",
        "assert-right",
        "assert-2of3",
        "stdio-exit",
        "stdio-deep-recursion",
    ],
)
def test_pass_rates(program: str, reference: object, rate: float) -> None:
    verdict = run_tests(extract_code(_fenced(program)), reference, config=FAST)
    assert verdict.score(soft=True) == pytest.approx(rate, abs=1e-12)
    assert verdict.score(soft=False) == float(rate == 1.0)
    assert len(verdict.passed) == len(parse_reference(reference))


def test_taco_json_string_reference() -> None:
    assert code_verifier(SUM_NEG_ONLY_WRONG, json.dumps(SUM_REF), config=FAST) == pytest.approx(
        2 / 3
    )
    assert code_verifier(SUM_RIGHT, json.dumps(SUM_REF), soft=False, config=FAST) == 1.0


@pytest.mark.parametrize(
    "reference", [SUM_REF, MAX_REF, SQUARE_ASSERTS], ids=["stdio", "call", "assert"]
)
def test_syntax_error_scores_zero_and_stops_early(reference: object) -> None:
    verdict = run_tests(
        "def broken(:\n    pass", reference, config=CodeConfig(limits=FAST.limits, workers=1)
    )
    assert verdict.score() == 0.0
    assert verdict.statuses[0] == "syntax_error"
    assert set(verdict.statuses[1:]) == {SKIPPED}


def test_early_exit_does_not_pass_asserts() -> None:
    cheat = "import sys\ndef square(x):\n    return 0\nsys.exit(0)"
    verdict = run_tests(cheat, SQUARE_ASSERTS, config=FAST)
    assert verdict.passed == (False, False, False)
    assert set(verdict.statuses) == {"ok"}


def test_permissive_eq_does_not_pass_call_tests() -> None:
    cheat = "class Any:\n    def __eq__(self, other):\n        return True\ndef biggest(xs):\n    return Any()"
    assert code_verifier(cheat, MAX_REF, config=FAST) == 0.0


def test_printing_the_answer_does_not_pass_call_tests() -> None:
    cheat = "def biggest(xs):\n    print(max(xs))"  # prints instead of returning
    assert code_verifier(cheat, MAX_REF, config=FAST) == 0.0


def test_crash_after_right_output_fails_the_test() -> None:
    program = SUM_RIGHT + "\nraise RuntimeError('late')"
    assert code_verifier(program, SUM_REF, config=FAST) == 0.0


def test_hanging_test_fails_alone() -> None:
    program = "n = int(input())\nwhile n == 0:\n    pass\nprint(n)"
    reference = {"inputs": ["1", "0", "2"], "outputs": ["1", "0", "2"]}
    verdict = run_tests(program, reference, config=FAST)
    assert verdict.passed == (True, False, True)
    assert verdict.statuses == ("ok", "timeout", "ok")


def test_budget_skips_tests_not_started() -> None:
    config = CodeConfig(limits=SandboxLimits(wall_time_s=30.0), workers=1, total_time_s=0.3)
    verdict = run_tests("import time\ntime.sleep(60)", SUM_REF, config=config)
    assert verdict.statuses == ("timeout", SKIPPED, SKIPPED)
    assert verdict.score() == 0.0


def test_all_or_nothing_stops_after_first_failure() -> None:
    config = CodeConfig(limits=FAST.limits, workers=1)
    verdict = run_tests(SUM_WRONG, SUM_REF, soft=False, config=config)
    assert verdict.statuses == ("ok", SKIPPED, SKIPPED)
    assert verdict.score(soft=False) == 0.0


def test_sandbox_failure_raises() -> None:
    config = CodeConfig(limits=FAST.limits, policy=SandboxPolicy(python="/nonexistent/python"))
    with pytest.raises(SandboxError):
        code_verifier(SUM_RIGHT, SUM_REF, config=config)


@pytest.mark.parametrize(
    "reference", [SUM_REF, ["assert f(1) == 1"], {"fn_name": "f", "inputs": [[1]], "outputs": [1]}]
)
def test_a_program_leaving_with_the_setup_code_is_not_a_sandbox_failure(reference) -> None:
    """``EXIT_SETUP`` (252) from the program is its own error: no ``SandboxError``, none counted."""
    program = "import os\ndef f(x):\n    os._exit(252)\nos._exit(252)"
    with counting() as events:
        assert code_verifier(program, reference, config=FAST) == 0.0
    assert "sandbox_errors" not in events


# --- pieces without the sandbox ----------------------------------------------------------
@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("```python\na = 1\n```\ntext\n```python\nb = 2\n```", "b = 2\n"),
        ("```py\nx = 1\n```\n```\nuntagged\n```", "x = 1\n"),
        ("```\nuntagged = 1\n```", "untagged = 1\n"),
        ("```bash\nls\n```\nprint(1)", "```bash\nls\n```\nprint(1)"),
        ("<think>```python\nthought\n```</think>Answer:\n```python\nfinal\n```", "final\n"),
        ("<think>```python\nthought\n```</think>no code", "no code"),
        ("intro\n```python\nprint(1)\nprint(2", "print(1)\nprint(2"),
        ("print('bare')", "print('bare')"),
        ("1. Code:\n   ```python\n   if x:\n       y()\n   ```", "if x:\n    y()\n"),  # list item
        ("-\n\t```py\n\tx = 1\n\t```", "x = 1\n"),
        ("Here ```python\n  x = 1\n```", "  x = 1\n"),  # only a fence's own indent goes
        ("```\n    return x\n```", "    return x\n"),  # a function's body keeps its indent
        ("```python title=sol.py\nx = 1\n```\n```\ny = 2\n```", "x = 1\n"),
    ],
)
def test_extract_code(completion: str, expected: str) -> None:
    assert extract_code(completion) == expected


def test_parse_reference_formats() -> None:
    lines = parse_reference({"inputs": [["1 2", "3"]], "outputs": [["x", "y"]]})
    assert lines == TestSuite("stdio", ("1 2\n3",), ("x\ny",))
    call = parse_reference(json.dumps({"fn_name": "f", "inputs": [[1, 2], 5], "outputs": [3, 5]}))
    assert call == TestSuite("call", ((1, 2), (5,)), (3, 5), "f")
    some_none = parse_reference({"fn_name": "f", "inputs": [[0], [1]], "outputs": [None, 1]})
    assert some_none.outputs == (None, 1)
    asserts = parse_reference(["assert f(1) == 1", "assert f(2) == 4"])
    assert (asserts.style, len(asserts)) == ("assert", 2)


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("{not json", "not valid JSON"),
        ({"inputs": ["1"], "outputs": []}, "1 inputs and 0 outputs"),
        ({"inputs": [], "outputs": []}, "at least one"),
        ({"inputs": "1", "outputs": "2"}, "must both be lists"),
        ({"inputs": [1], "outputs": ["1"]}, r"inputs\[0\]"),
        ({"fn_name": "not valid", "inputs": [[1]], "outputs": [1]}, "identifier"),
        # expected what a program doing nothing gives: no test of it (one None among others is)
        ({"fn_name": "f", "inputs": [[1], [2]], "outputs": [None, None]}, "every output is None"),
        ({"fn_name": "f", "inputs": [[1]], "outputs": [[None]]}, "every output is None"),
        ({"inputs": ["1\n", "2\n"], "outputs": ["", " \n"]}, "every output is empty"),
        ([], "non-empty list"),
        (42, "got int"),
        (["assert f(1) == 1", "assert f(2) =="], r"assert test\[1\] does not parse"),
    ],
)
def test_parse_reference_errors(reference: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_reference(reference)


@pytest.mark.parametrize(
    ("actual", "expected", "match"),
    [
        ("3\n", "3", True),
        ("  1   2 \r\n\n\n3\n", "1 2\n3\n", True),
        ("0.333333", "0.3333333333", True),
        ("1e-9", "0", True),
        ("1.001", "1", False),
        ("1 2 3", "1 2\n3", False),
        ("YES", "yes", False),
        ("1 2", "1 2 3", False),
        ("", "0", False),
        ("1_000", "1000", False),
        ("\u0666", "6", False),  # Arabic-Indic six: Decimal reads it, a judge does not
        ("\uff12\uff10", "20", False),  # fullwidth digits
        ("\u0661.5", "1.5", False),
    ],
)
def test_stdout_matches(actual: str, expected: str, match: bool) -> None:
    assert stdout_matches(actual, expected) is match


@pytest.mark.parametrize(
    ("actual", "expected", "match"),
    [
        ((1, 2), [1, 2], True),
        ([[1, 2], (3,)], [[1, 2], [3]], True),
        ({1: [2.0]}, {"1": [2]}, True),
        (0.1 + 0.2, 0.3, True),
        (1.0001, 1, False),
        ([1, 2], [2, 1], False),
        ("a", "a", True),
        (None, [], False),
        (float("nan"), float("nan"), True),  # NaN expected: only NaN meets it
        (0.0, float("nan"), False),
        (float("inf"), float("nan"), False),
        (float("nan"), 0.0, False),
        (Fraction(1, 3), 1 / 3, True),  # fractions and decimals keep the tolerance
        (Decimal(1) / Decimal(3), 1 / 3, True),
        (Decimal("Infinity"), float("inf"), True),
        (Decimal("1e400"), float("inf"), False),  # infinite as a float only
        (Decimal("sNaN"), float("nan"), False),
    ],
)
def test_values_match(actual: object, expected: object, match: bool) -> None:
    assert values_match(actual, expected) is match


@pytest.mark.parametrize(
    ("actual", "expected", "match"),
    [
        ("1000000007", "1000000000", False),  # within the relative tolerance, not the integer
        ("1000000007.0", "1000000000", False),  # written as a float
        ("1000000000.0", "1000000000", True),
        ("1.9999999999999998", "2", True),  # float rounding of an integer answer
        ("2.0001", "2", False),
        ("007", "7", True),
        ("-0", "0", True),
        ("9" * 5000 + ".0", "9" * 4999 + "8", False),  # no float rounding, no digit limit
        ("1000000007", "1000000000.0", True),  # a float answer keeps APPS's tolerance
        ("101", "00000101", False),  # a fixed width is part of the answer
        ("0101", "00101", False),
        ("00000101", "00000101", True),
        ("1e99999999999999999999", "7", False),  # beyond what decimals hold: no error
        ("0", "2.5e400", False),  # beyond float range: any number was within its tolerance
        ("5", "7" * 320 + ".5", False),
        ("2.5000001e400", "2.5e400", True),
        ("+" + "1" * 400, "1" * 400, True),  # an integer beyond float range, written otherwise
    ],
)
def test_an_integer_answer_must_be_that_integer(actual: str, expected: str, match: bool) -> None:
    assert stdout_matches(actual + "\n", expected + "\n") is match


@pytest.mark.parametrize(
    ("actual", "expected", "match"),
    [
        (10**9 + 7, 10**9, False),
        (1e9 + 7, 10**9, False),
        (1e9, 10**9, True),
        (2.0000000001, 2, True),
        (10**400, 10**400, True),
        (10**400, 5.0, False),  # beyond float range: no overflow error
        (float("inf"), float("inf"), True),
        (10**9 + 7, 1e9, True),  # a float expected value keeps the tolerance
        # An exact type rounds exactly: as floats, 10**17 + 3 is 10**17 and was paid.
        (Decimal(10**17 + 3), 10**17, False),
        (Fraction(10**17 + 3), 10**17, False),
        (Decimal(10**17), 10**17, True),
        (Fraction(10**34 + 1, 10**17), 10**17, True),  # 10**17 + 1e-17: rounds to it
    ],
)
def test_an_integer_value_must_be_that_integer(
    actual: object, expected: object, match: bool
) -> None:
    assert values_match(actual, expected) is match


def test_registered_code_verifier_maps_pass_rate_onto_reward_pair() -> None:
    from rlvr.rewards import get_verifier

    half = "print(int(input()) * 2)"
    ref = {"inputs": ["2", "5"], "outputs": ["4", "11"]}
    assert get_verifier("code")(half, ref) == 0.5
    assert get_verifier("code", wrong=-1.0)(half, ref) == 0.0
    assert get_verifier("code:binary", wrong=-1.0)(half, ref) == -1.0
    assert get_verifier("code:binary")(SUM_RIGHT, json.dumps(SUM_REF)) == 1.0
    with pytest.raises(ValueError, match="mode"):
        get_verifier("code:partial")(half, ref)


def test_invalid_config_is_rejected() -> None:
    with pytest.raises(ValueError, match="workers"):
        CodeConfig(workers=-1)
    with pytest.raises(ValueError, match="total_time_s"):
        CodeConfig(total_time_s=0)
    with pytest.raises(ValueError, match="rel_tol and abs_tol"):
        CodeConfig(abs_tol=-1e-9)


def test_docstring_examples() -> None:
    assert doctest.testmod(code_module).failed == 0


# --- the standard benchmarks' reference formats, as they are -------------------------------
HUMANEVAL = {
    "task_id": "HumanEval/2",
    "entry_point": "truncate_number",
    "test": (
        "\n\nMETADATA = {\n    'author': 'jt',\n    'dataset': 'test'\n}\n\n\n"
        "def check(candidate):\n"
        "    assert candidate(3.5) == 0.5\n"
        "    assert abs(candidate(1.33) - 0.33) < 1e-6\n"
        "    assert abs(candidate(123.456) - 0.456) < 1e-6\n"
        "    import math\n"
        "    for x in (2.25, 7.75):\n"
        "        assert math.isclose(candidate(x), x % 1.0)\n"
        "    assert True, 'This prints if this assert fails'\n"
    ),
}
TRUNCATE_RIGHT = "def truncate_number(number: float) -> float:\n    return number % 1.0"
TRUNCATE_WRONG = "def truncate_number(number: float) -> float:\n    return round(number)"
MBPP = {
    "task_id": 17,
    "text": "Write a function to find the perimeter of a square.",
    "test_list": [
        "assert square_perimeter(10)==40",
        "assert square_perimeter(5)==20",
        "assert math.isclose(square_perimeter(0.5), SIDE * 2, rel_tol=1e-9)",
    ],
    "test_setup_code": "SIDE = 1.0",
    "challenge_test_list": [],
}
PERIMETER_RIGHT = "def square_perimeter(a):\n    return 4 * a"
TACO_ROW = {"question": "Add two numbers.", "input_output": json.dumps(SUM_REF)}


def test_humaneval_reference_is_taken_apart():
    suite = parse_reference(HUMANEVAL)
    assert suite.style == "assert" and suite.fn_name == "truncate_number"
    assert suite.inputs == (
        "assert candidate(3.5) == 0.5",
        "assert abs(candidate(1.33) - 0.33) < 1e-06",
        "assert abs(candidate(123.456) - 0.456) < 1e-06",
        "check(candidate)",  # the loop that needs check's own names, run as one test
    )
    assert "METADATA" in suite.setup and "for x in (2.25, 7.75)" in suite.setup
    assert "assert candidate(3.5)" not in suite.setup


@pytest.mark.parametrize(
    ("program", "reference", "rate", "judged"),
    [
        (TRUNCATE_RIGHT, HUMANEVAL, 1.0, 4),
        (TRUNCATE_WRONG, HUMANEVAL, 0.0, 4),
        (PERIMETER_RIGHT, MBPP, 1.0, 3),
        ("def square_perimeter(a):\n    return 40", MBPP, 1 / 3, 3),
        (SUM_RIGHT, TACO_ROW, 1.0, 0),
        (SUM_ABS, {"input_output": SUM_REF}, 1 / 3, 0),
    ],
    ids=["humaneval-right", "humaneval-wrong", "mbpp-right", "mbpp-1of3", "taco", "taco-dict"],
)
def test_benchmark_formats(program, reference, rate, judged):
    verdict = run_tests(program, reference, config=FAST)
    assert verdict.score() == pytest.approx(rate, abs=1e-12)
    assert (verdict.judged, verdict.in_process, verdict.unsupported) == (judged, 0, 0)


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ({"entry_point": "f", "test": "def check(x):\n    assert x(1)"}, "check\\(candidate\\)"),
        ({"entry_point": "f", "test": "def check(candidate):\n    pass"}, "asserts nothing"),
        ({"entry_point": "not valid", "test": "def check(candidate): pass"}, "identifier"),
        ({"entry_point": "f", "test": "def check(:"}, "does not parse"),
        ({"test": "def check(candidate):\n    assert candidate(1)"}, "HumanEval needs"),
        ({"prompt": "def f(x):\n", "entry_point": "f"}, "HumanEval needs"),
        ({"test_list": []}, "non-empty list"),
        ({"test_list": ["assert f(1)"], "test_setup_code": 3}, "test_setup_code"),
        ({"test_list": ["assert f(1) = 1"]}, r"MBPP test_list\[0\] does not parse"),
        ({"test_list": ["assert f(1)"], "test_setup_code": "import ("}, "test_setup_code.* parse"),
        (["import math", "assert True"], "no assert test uses a name of the program"),
        ({"test_list": ["assert 1 + 1 == 2"]}, "no MBPP test_list uses a name of the program"),
    ],
)
def test_benchmark_reference_errors(reference, message):
    with pytest.raises(ValueError, match=message):
        parse_reference(reference)


def test_test_code_runs_with_python_semantics_on_the_programs_plain_answers():
    reference = {
        "test_list": [
            "assert squares(4) == [i * i for i in range(4)]",
            "assert squares(2) == helper(2)",
            "assert squares(1) == Fraction(1, 1) * 1",
        ],
        "test_setup_code": "from fractions import Fraction\ndef helper(n):\n    return [0, 1][:n]",
    }
    right = "def squares(n):\n    return [i * i for i in range(n)]"
    verdict = run_tests(right, reference, config=FAST)
    assert verdict.passed == (True, True, False)  # [0] != Fraction(1): as Python says
    assert (verdict.judged, verdict.in_process, verdict.unsupported) == (3, 0, 0)
    cheat = "class A(list):\n    def __eq__(self, o): return True\ndef squares(n):\n    return A()"
    assert run_tests(cheat, reference, config=FAST).passed == (False, False, False)


def test_answers_that_are_not_plain_data_are_not_paid_and_are_counted():
    reference = ["assert all(square(x) == x * x for x in range(3))", "assert square(3) == 9"]
    cheat = "class A:\n    def __eq__(self, o): return True\ndef square(x):\n    return A()"
    scores = score_completions(
        "code", [SQUARE_RIGHT, cheat], [reference, reference], timeout_s=None, workers=0
    )
    assert scores.values == [1.0, 0.0]
    assert scores.event_count("asserts_judged") == 2
    assert scores.event_count("asserts_unsupported") == 2
    assert scores.metrics()["verifier/asserts_unsupported"] == 2.0


def test_in_process_humaneval_binds_candidate_to_the_entry_point():
    reference = {
        "entry_point": "origin",
        "test": "def check(candidate):\n    assert candidate().x == 0\n",
    }
    program = "class P:\n    x = 0\ndef origin():\n    return P()\n"
    on = run_tests(program, reference, config=replace(FAST, in_process=True))
    assert (on.passed, on.unsupported, on.in_process) == ((True,), 0, 1)


def test_the_programs_changes_to_mutable_arguments_reach_the_test():
    program = "def fill(xs, d, s):\n    xs.append(1)\n    d['k'] = 2\n    s.add(3)\n"
    test = "xs, d, s = [], {}, set()\nfill(xs, d, s)\nassert (xs, d, s) == ([1], {'k': 2}, {3})"
    assert run_tests(program, [test], config=FAST).passed == (True,)


def test_a_test_that_does_not_parse_is_refused_rather_than_failing_every_program():
    with pytest.raises(ValueError, match=r"assert test\[0\] does not parse"):
        run_tests("def f(x):\n    return x\n", ["assert f(1) ==", "assert f(2) == 2"], config=FAST)


def test_in_process_runs_what_the_driver_cannot_judge_when_asked_for():
    reference = ["p = Point(1, 2)\nassert p.x + p.y == 3", "assert apply(abs, -2) == 2"]
    program = (
        "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
        "def apply(f, x):\n    return f(x)\n"
    )
    off = run_tests(program, reference, config=FAST)
    assert (off.passed, off.unsupported, off.in_process) == ((False, False), 2, 0)
    on = run_tests(program, reference, config=replace(FAST, in_process=True))
    assert (on.passed, on.unsupported, on.in_process) == ((True, True), 0, 2)


ENCODE_PROMPT = (  # HumanEval/38's shape: the check encodes with the prompt's own helper
    "import random\n\ndef encode(s: str):\n    return s[::-1]\n\n"
    'def decode(s: str):\n    """Undo encode."""\n'
)
ENCODE_TEST = (
    "def check(candidate):\n"
    "    for _ in range(5):\n"
    "        s = ''.join(random.choice('abc') for _ in range(6))\n"
    "        assert candidate(encode(s)) == s\n"
)


TRUNCATE_PROMPT = 'def truncate_number(number: float) -> float:\n    """ The decimal part. """\n'


@pytest.mark.parametrize(
    ("completion", "rate"),
    [
        ("    return number % 1.0\n", 1.0),  # a base model continues the prompt: the body
        ("    return number % 1.0\n\n\ndef unrelated():\n    pass\n", 1.0),
        ("    return round(number)\n", 0.0),
        (_fenced(TRUNCATE_RIGHT), 1.0),  # a whole function, as an instruct model writes it
        ("```python\n    return number % 1.0\n```", 1.0),  # the body alone, fenced
    ],
)
def test_a_humaneval_completion_may_be_the_body_of_the_prompts_function(completion, rate):
    reference = {**HUMANEVAL, "prompt": TRUNCATE_PROMPT}
    assert code_verifier(completion, reference, config=FAST) == rate


def test_a_humaneval_checks_helpers_are_the_prompts():
    reference = {"prompt": ENCODE_PROMPT, "test": ENCODE_TEST, "entry_point": "decode"}
    uses_the_prompts = "def decode(s):\n    return encode(s)\n"  # the completion alone
    verdict = run_tests(uses_the_prompts, reference, config=FAST)
    assert verdict.passed == (True,) and verdict.judged == 1
    # a program redefining the helper changes its own copy, not the one the test encodes with
    hack = "def encode(s):\n    return s\ndef decode(s):\n    return s\n"
    assert run_tests(hack, reference, config=FAST).passed == (False,)


@pytest.mark.parametrize(
    "check",
    [ENCODE_TEST, "def check(candidate):\n    assert candidate(encode('ab')) == 'ab'\n"],
    ids=["in-a-loop", "top-level-assert"],
)
def test_a_humaneval_row_without_the_prompt_its_check_needs_is_refused(check):
    with pytest.raises(ValueError, match=r"uses encode, defined by neither 'test' nor 'prompt'"):
        parse_reference({"test": "import random\n" + check, "entry_point": "decode"})


@pytest.mark.parametrize(
    "reference",
    [
        ["assert gcd(12, 18) == 6", "assert gcd(7, 5) == 1"],
        {"test_list": ["assert gcd(12, 18) == 6", "assert gcd(7, 5) == 1"]},
        {"fn_name": "gcd", "inputs": [[12, 18], [7, 5]], "outputs": [6, 1]},
    ],
    ids=["asserts", "mbpp", "call"],
)
def test_a_task_named_like_a_prelude_function_is_the_programs(reference):
    """``gcd`` is in the prelude the program gets (``math.gcd``): a program that does not
    define it is not paid for the prelude's, and one that imports it is."""
    for program in ("pass", "def gcd(a, b):\n    return 6", "def lcm(a, b):\n    return a * b"):
        assert run_tests(program, reference, config=FAST).pass_rate < 1.0, program
    for program in ("from math import gcd", "def gcd(a, b):\n    return gcd(b, a % b) if b else a"):
        assert run_tests(program, reference, config=FAST).pass_rate == 1.0, program


def test_a_prelude_function_beside_the_programs_stays_the_tests():
    # the test's sqrt computes the expected value: a program's own sqrt may not replace it
    reference = ["assert hyp(3, 4) == sqrt(25)"]
    liar = "def sqrt(x):\n    return 0\ndef hyp(a, b):\n    return 0\n"
    assert run_tests(liar, reference, config=FAST).passed == (False,)
    right = "def hyp(a, b):\n    return (a * a + b * b) ** 0.5\n"
    assert run_tests(right, reference, config=FAST).passed == (True,)


@pytest.mark.parametrize("dropped", ["assert callable(max)", "print(max([3]))"])
def test_the_builtin_named_function_is_read_from_the_tests_kept(dropped):
    """``dropped`` alone made ``max`` the program's; once it was left out the driver took both
    ``max`` and ``len`` as Python's, and ``pass`` was paid 1.0: the reference is refused."""
    reference = [dropped, "assert max([1, 2]) == len('ab')", "assert max([4, 2, 1]) == len('abcd')"]
    with pytest.raises(ValueError, match="no assert test uses a name of the program"):
        run_tests("pass", reference, config=FAST)


def test_a_program_may_name_its_function_like_a_prelude_class():
    # ``product`` and ``Counter`` are itertools' and collections' in the prelude
    reference = ["assert product([2, 3]) == 6", "assert count('aab') == Counter({'a': 2, 'b': 1})"]
    program = (
        "def product(xs):\n    out = 1\n    for x in xs:\n        out *= x\n    return out\n"
        "def count(s):\n    return dict(Counter(s))\n"
    )
    assert run_tests(program, reference, config=FAST).passed == (True, True)


def test_a_program_raising_stop_iteration_does_not_end_the_tests_loop():
    reference = ["assert all(map(lambda x: double(x) == 2 * x, [1, 2, 3]))"]
    program = "def double(x):\n    if x > 1:\n        raise StopIteration\n    return 2 * x\n"
    assert run_tests(program, reference, config=FAST).passed == (False,)


def test_the_programs_exceptions_and_changes_to_arguments_reach_the_test():
    reference = [
        "try:\n    root(-1)\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError",
        "xs = [3, 1, 2]\nsort_in_place(xs)\nassert xs == [1, 2, 3]",
        "assert missing(1) == 1",
    ]
    program = (
        "def root(x):\n    if x < 0:\n        raise ValueError('negative')\n    return x ** 0.5\n"
        "def sort_in_place(xs):\n    xs.sort()\n"
    )
    assert run_tests(program, reference, config=FAST).passed == (True, True, False)


def test_an_exception_class_of_the_programs_own_reaches_the_test_as_exception():
    """Only builtin classes cross by name: a program's subclass of ValueError is ``Exception``
    in the test, so ``except ValueError`` misses it and ``except Exception`` catches it."""
    program = "class Negative(ValueError):\n    pass\ndef root(x):\n    raise Negative('no')\n"
    catch = "try:\n    root(-1)\nexcept {}:\n    pass\nelse:\n    raise AssertionError"
    reference = [catch.format("ValueError"), catch.format("Exception")]
    assert run_tests(program, reference, config=FAST).passed == (False, True)


def test_truthiness_and_identity_asserts_are_judged_on_plain_values():
    reference = ["assert is_even(4)", "assert not is_even(3)", "assert find(3) is None"]
    right = "def is_even(n):\n    return n % 2 == 0\ndef find(n):\n    return None"
    assert run_tests(right, reference, config=FAST).passed == (True, True, True)
    cheat = (
        "class T:\n    def __bool__(self): return True\n    def __eq__(self, o): return True\n"
        "def is_even(n):\n    return T()\ndef find(n):\n    return T()"
    )
    assert run_tests(cheat, reference, config=FAST).passed == (False, False, False)


@pytest.mark.parametrize(
    "setup",
    [
        "def twice(x):\n    return double(x)",
        "if True:\n    def twice(x):\n        return double(x)",
    ],
    ids=["top", "under-if"],
)
def test_a_set_up_helper_calls_the_program_only_for_tests_that_read_it(setup):
    """``assert True`` is no test because the set-up reads ``double``; ``twice`` is the set-up's
    and calls the program's ``double``, also when defined under ``if``."""
    reference = {
        "test_list": ["assert True", "assert twice(2) == 4", "assert double(3) == 6"],
        "test_setup_code": setup,
    }
    assert parse_reference(reference).inputs == ("assert twice(2) == 4", "assert double(3) == 6")
    right = "def double(x):\n    return 2 * x"
    assert run_tests(right, reference, config=FAST).passed == (True, True)


def test_an_entry_checking_what_another_did_to_a_set_up_variable_is_refused():
    """Each entry runs after a fresh set-up: ``DATA == [1, 2, 3]`` alone passed once the entry
    is dropped (no name of the program), and a function doing nothing was paid 1.0."""
    reference = {
        "test_list": ["assert sort_in_place(DATA) is None", "assert DATA == [1, 2, 3]"],
        "test_setup_code": "DATA = [3, 1, 2]",
    }
    with pytest.raises(ValueError, match=r"test_list\[1\] checks DATA, which MBPP test_list\[0\]"):
        run_tests("def sort_in_place(xs):\n    return None", reference, config=FAST)


def test_humaneval_asserts_after_checks_own_set_up_stay_in_check():
    """Asserts after an import are taken apart (HumanEval/53); after any other statement they
    run in ``check`` after it: a helper ``check`` defines is the test's, not a name the
    reference lacks."""
    reference = {
        "entry_point": "add",
        "test": (
            "def check(candidate):\n"
            "    import random\n"
            "    assert candidate(0, 1) == 1\n"
            "    def twice(n):\n        return 2 * n\n"
            "    assert candidate(2, 2) == twice(2)\n"
        ),
    }
    assert parse_reference(reference).inputs == ("assert candidate(0, 1) == 1", "check(candidate)")
    add_right, add_zero = "def add(a, b):\n    return a + b", "def add(a, b):\n    return 0"
    assert run_tests(add_right, reference, config=FAST).passed == (True, True)
    assert run_tests(add_zero, reference, config=FAST).passed == (False, False)


# HumanEval's later checks end in `assert True, "This prints if this assert fails ..."`.
HUMANEVAL_ASSERT_TRUE = {
    "task_id": "HumanEval/64",
    "entry_point": "vowels_count",
    "test": (
        "def check(candidate):\n"
        "    # Check some simple cases\n"
        '    assert candidate("abcde") == 2, "Test 1"\n'
        '    assert candidate("Alone") == 3, "Test 2"\n'
        "    # Check some edge cases that are easy to work out by hand.\n"
        '    assert True, "This prints if this assert fails 2 (also good for debugging!)"\n'
    ),
}


def test_humaneval_assert_true_lines_are_not_a_free_test():
    suite = parse_reference(HUMANEVAL_ASSERT_TRUE)
    assert suite.inputs == (
        "assert candidate('abcde') == 2, 'Test 1'",
        "assert candidate('Alone') == 3, 'Test 2'",
    )
    assert "def check" not in suite.setup
    verdict = run_tests("def vowels_count(s):\n    return -1", HUMANEVAL_ASSERT_TRUE, config=FAST)
    assert verdict.passed == (False, False)


def test_only_a_one_element_list_is_read_as_a_wrapper():
    # Unwrapped list answers: the first element alone is not the answer.
    reference = {"fn_name": "primes", "inputs": [[10], [3]], "outputs": [[2, 3, 5, 7], [2]]}
    first_only = "def primes(n):\n    return 2"
    assert run_tests(first_only, reference, config=FAST).passed == (False, True)
    right = "def primes(n):\n    return [p for p in range(2, n) if all(p % d for d in range(2, p))]"
    assert run_tests(right, reference, config=FAST).passed == (True, True)


# Right answers whose repr is no Python literal (APPS's ``==`` takes them); the reference goes
# through JSON, Infinity included.
RETURNS_REF = {
    "fn_name": "answer",
    "inputs": [[i] for i in range(8)],
    "outputs": [{"a": 2, "b": 1}, {"x": 1}, {"1": [2]}, [1, 2], [1 / 3], 2.5, 1, float("inf")],
}
RIGHT_RETURNS = "Counter('aab') OrderedDict(x=1) defaultdict(list,{1:[2]}) P(1,2) Fraction(1,3)"
RIGHT_RETURNS += " Decimal('2.50') E.A float('inf')"
WRONG_RETURNS = "Counter('abb') OrderedDict(x=2) defaultdict(list,{1:[3]}) P(2,1) Fraction(1,2)"
WRONG_RETURNS += " Decimal('2.6') E.B float('-inf')"
NOT_PLAIN_RETURNS = "type('T',(),{})() deque([1,2]) " * 4  # [3] is deque([1, 2]) for [1, 2]


@pytest.mark.parametrize(
    ("values", "passed"),
    [(RIGHT_RETURNS, True), (WRONG_RETURNS, False), (NOT_PLAIN_RETURNS, False)],
    ids=["right", "wrong", "not-plain"],
)
def test_call_answers_are_read_as_plain_data(values: str, passed: bool) -> None:
    program = (
        "from collections import *\nfrom decimal import Decimal\nfrom enum import IntEnum\n"
        "from fractions import Fraction\nP = namedtuple('P', 'x y')\nE = IntEnum('E', 'A B')\n"
        f"def answer(i):\n    return [{', '.join(values.split())}][i]\n"
    )
    verdict = run_tests(program, json.dumps(RETURNS_REF), config=FAST)
    assert verdict.passed == (passed,) * 8


def test_call_arguments_and_answers_carry_infinity_and_nan() -> None:
    kinds = '{"fn_name": "f", "inputs": [[[1.5, Infinity, -Infinity, NaN]]], "outputs": [[["1.5", "inf", "-inf", "nan"]]]}'
    assert run_tests("def f(xs):\n    return list(map(repr, xs))", kinds, config=FAST).passed == (
        True,
    )
    same = (
        '{"fn_name": "f", "inputs": [[NaN], [Infinity], [NaN]], "outputs": [NaN, Infinity, [NaN]]}'
    )
    assert run_tests("def f(x):\n    return x", same, config=FAST).passed == (True,) * 3
    assert run_tests("def f(x):\n    return 0.0", same, config=FAST).passed == (False,) * 3


@pytest.mark.parametrize("text", ["6", "[6]", "{'a': 1}", "(1, 2)", '{"i": "6", "f": "1.0"}'])
def test_a_call_result_line_must_be_tagged_plain_data(text: str) -> None:
    assert code_module._returned_value(f"{text}\nN {text}\n", "N") == (False, None)
    assert code_module._returned_value('N {"i": "6"}\n', "N") == (True, 6)


@pytest.mark.parametrize(
    "checking",
    [
        "        if candidate(x) != 2 * x:\n            raise AssertionError(x)\n",
        "        assert_equal(candidate(x), 2 * x)\n",  # EvalPlus's assertion(out, exp, atol)
    ],
    ids=["raise", "helper"],
)
def test_a_humaneval_remainder_that_checks_without_assert_is_a_test(checking):
    """A loop that fails by ``raise`` or through a helper is a test: dropping it paid a program
    right on ``candidate(0)`` alone 1.0."""
    reference = {
        "entry_point": "double",
        "test": (
            "def assert_equal(out, exp):\n    assert out == exp, (out, exp)\n\n"
            "def check(candidate):\n"
            "    assert candidate(0) == 0\n"
            "    for x in range(1, 4):\n" + checking
        ),
    }
    assert parse_reference(reference).inputs == ("assert candidate(0) == 0", "check(candidate)")
    zero = "def double(x):\n    return 0"
    assert run_tests(zero, reference, config=FAST).passed == (True, False)
    assert run_tests("def double(x):\n    return 2 * x", reference, config=FAST).pass_rate == 1.0


@pytest.mark.parametrize(
    "setup",
    [
        "from math import *",
        "try:\n    from math import isclose\nexcept ImportError:\n    pass",
        "if True:\n    def isclose(a, b, rel_tol):\n        return abs(a - b) <= rel_tol * abs(b)",
    ],
    ids=["star-import", "import-in-try", "def-in-if"],
)
def test_a_helper_the_setup_binds_out_of_sight_stays_the_tests(setup):
    """Names the set-up binds are the test's even where the static scan of its top level does
    not see them: a program defining ``isclose`` to say True was paid 1.0 for a wrong area."""
    reference = {
        "test_list": [
            "assert isclose(area(2), 12.566, rel_tol=1e-3)",
            "assert isclose(area(1), 3.1416, rel_tol=1e-3)",
        ],
        "test_setup_code": setup,
    }
    liar = "def isclose(*args, **kwargs):\n    return True\ndef area(r):\n    return 0\n"
    assert run_tests(liar, reference, config=FAST).passed == (False, False)
    right = "import math\ndef area(r):\n    return math.pi * r * r\n"
    assert run_tests(right, reference, config=FAST).passed == (True, True)


@pytest.mark.parametrize(
    "reference",
    [
        {"test_list": ["assert f(2) == 4"], "test_setup_code": "import numpy as np"},
        {  # EvalPlus's shape: a checking helper on numpy
            "prompt": "def f(x):\n    pass\n",
            "entry_point": "f",
            "test": "import numpy as np\ndef assertion(out, exp, atol):\n"
            "    assert np.allclose(out, exp)\ndef check(candidate):\n"
            "    for x in range(3):\n        assertion(candidate(x), 2 * x, 0)\n",
        },
        {"test_list": ["assert f(2) == 4"], "test_setup_code": "1 / 0"},
    ],
)
def test_a_set_up_no_program_can_pass_is_an_error_not_a_zero(reference):
    """A test whose set-up fails in the sandbox (numpy, which it does not hold) scored every
    program 0, the correct one included, with nothing to say why: a reward of no signal."""
    with pytest.raises(ValueError, match=r"reference: the test's set-up fails in the sandbox \("):
        code_verifier("def f(x):\n    return 2 * x", reference)


HELPER = "def helper():\n    return 1"


@pytest.mark.parametrize(
    "reference",
    [
        ["import math", "assert f(1) == 2"],
        ["assert True", "assert f(1) == 2"],
        {"test_list": ["from typing import List", "assert f(1) == 2"]},
        {"test_list": ["assert helper() == 1", "assert f(1) == 2"], "test_setup_code": HELPER},
    ],
)
def test_an_entry_that_tests_no_name_of_the_program_is_not_a_free_test(reference):
    # it passed any program that ran: `pass` scored 0.5 on each of these
    assert run_tests("pass", reference, config=FAST).passed == (False,)
    assert run_tests("def f(x):\n    return 2 * x", reference, config=FAST).passed == (True,)


HUMANEVAL_CALLABLE = {
    "entry_point": "f",
    "test": "def check(candidate):\n    assert callable(candidate)\n    assert candidate(1) == 2\n",
}


@pytest.mark.parametrize(
    "reference",
    [
        ["assert callable(f)", "assert f(1) == 2"],
        ["assert f is not None", "assert f(1) == 2"],
        ["assert f.__name__ == 'f'", "assert f(1) == 2"],
        HUMANEVAL_CALLABLE,
    ],
)
def test_a_test_that_only_inspects_the_program_is_not_a_free_test(reference):
    # the driver's stand-in for f passed these for any program: `pass` scored 0.5
    assert run_tests("f = None", reference, config=FAST).passed == (False,)
    assert run_tests("def f(x):\n    return 2 * x", reference, config=FAST).passed == (True,)


def test_a_test_calling_the_program_through_another_function_is_kept():
    tests = ["assert list(map(f, [1])) == [2]", "assert f.__call__(1) == 2"]
    assert run_tests("def f(x):\n    return 2 * x", tests, config=FAST).passed == (True, True)
    assert run_tests("f = None", tests, config=FAST).passed == (False, False)


def test_code_gives_no_answer_key_so_no_maj_at_k():
    from rlvr.rewards import get_verifier

    verifier = get_verifier("code")
    assert not verifier.votes
    with pytest.raises(ValueError, match="verifier 'code' gives no answer keys"):
        verifier.answer_key("def f(): pass", {"inputs": [], "outputs": []})
