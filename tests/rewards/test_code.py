"""The code verifier: extraction, reference formats, judging, and pass rates through the sandbox."""

from __future__ import annotations

import doctest
import json

import pytest

from rlvr.rewards import code as code_module
from rlvr.rewards.code import (
    SKIPPED,
    CodeConfig,
    TestSuite,
    code_binary_verifier,
    code_verifier,
    extract_code,
    parse_reference,
    run_tests,
    stdout_matches,
    values_match,
)
from rlvr.rewards.sandbox import SandboxError, SandboxLimits, SandboxPolicy

FAST = CodeConfig(limits=SandboxLimits(wall_time_s=5.0, cpu_time_s=1.0, memory_mb=256))

# --- stdin/stdout: add two integers --------------------------------------------------------
SUM_REF = {"inputs": ["1 2\n", "-3 5\n", "10 -20\n"], "outputs": ["3\n", "2\n", "-10\n"]}
SUM_RIGHT = "a, b = map(int, input().split())\nprint(a + b)"
SUM_ABS = "a, b = map(int, input().split())\nprint(abs(a) + abs(b))"  # right on 1 of 3
SUM_NEG_ONLY_WRONG = "a, b = map(int, input().split())\nprint(a + b if b > 0 else 0)"  # 2 of 3
SUM_WRONG = "print(0)"

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
    assert code_binary_verifier(SUM_RIGHT, json.dumps(SUM_REF), config=FAST) == 1.0


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
    ],
)
def test_extract_code(completion: str, expected: str) -> None:
    assert extract_code(completion) == expected


def test_parse_reference_formats() -> None:
    lines = parse_reference({"inputs": [["1 2", "3"]], "outputs": [["x", "y"]]})
    assert lines == TestSuite("stdio", ("1 2\n3",), ("x\ny",))
    call = parse_reference(json.dumps({"fn_name": "f", "inputs": [[1, 2], 5], "outputs": [3, 5]}))
    assert call == TestSuite("call", ((1, 2), (5,)), (3, 5), "f")
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
        ([], "non-empty list"),
        (42, "got int"),
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
    ],
)
def test_values_match(actual: object, expected: object, match: bool) -> None:
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


def test_docstring_examples() -> None:
    assert doctest.testmod(code_module).failed == 0
