"""Taking asserts apart, sending values back as plain data, judging them in the parent."""

from __future__ import annotations

import ast
import collections
import decimal
import enum
import fractions
import math

import pytest

from rlvr.rewards.asserts import (
    ENCODER_SOURCE,
    MAX_DEPTH,
    NotPlain,
    bound_names,
    decode_plain,
    judge,
    plan_assert,
)

TRUSTED = {"math", "K"}


def _plan(statement: str) -> tuple[tuple[str, ...], tuple[str, ...], str] | None:
    plan = plan_assert(statement, TRUSTED)
    return None if plan is None else (plan.probes, plan.expected, ast.unparse(plan.check))


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("assert f(1) == 2", (("f(1)",), (), "_p0 == 2")),
        ("assert candidate([1, 2], 'x') == [3]", (("candidate([1, 2], 'x')",), (), "_p0 == [3]")),
        ("assert abs(f(1) - 0.5) < 1e-6", (("f(1)",), (), "abs(_p0 - 0.5) < 1e-06")),
        ("assert f(1)", (("f(1)",), (), "_p0")),
        ("assert not f(1)", (("f(1)",), (), "not _p0")),
        ("assert f(1) is None", (("f(1)",), (), "_p0 is None")),
        (
            "assert math.isclose(f(2), 12.566, rel_tol=0.001)",
            (("f(2)",), (), "math.isclose(_p0, 12.566, rel_tol=0.001)"),
        ),
        ("assert set(f(1)) == set((4, 5))", (("f(1)",), (), "set(_p0) == set((4, 5))")),
        ("assert f(1) == g(2)", (("f(1)", "g(2)"), (), "_p0 == _p1")),
        ("assert f(1) == f(1) + 0", (("f(1)",), (), "_p0 == _p0 + 0")),
        ("assert f(1)[0] == 2.0 / 3.0", (("f(1)",), (), "_p0[0] == 2.0 / 3.0")),
        ("assert isinstance(f(1), (int, float))", (("f(1)",), (), "isinstance(_p0, (int, float))")),
        ("assert f(1) == K * 2", (("f(1)",), ("K * 2",), "_p0 == _e0")),
        (
            "assert f(5) == [i * i for i in range(5)]",
            (("f(5)",), ("[i * i for i in range(5)]",), "_p0 == _e0"),
        ),
        ("assert sorted(f(1), key=len) == ['a']", (("sorted(f(1), key=len)",), (), "_p0 == ['a']")),
        ("assert f(1) == 2, 'message'", (("f(1)",), (), "_p0 == 2")),
    ],
)
def test_asserts_are_taken_apart(statement, expected):
    assert _plan(statement) == expected


@pytest.mark.parametrize(
    "statement",
    [
        "assert all(f(x) == x for x in range(3))",  # the comparison would run in the program
        "x = f(1)\nassert x == 2",  # two statements
        "assert f(1) is f(1)",  # identity of program objects
        "assert True",  # nothing of the program
        "f(1) == 2",  # not an assert
        "assert [f(x) == 1 for x in (1, 2)][0]",
        "assert f(1) == 2 if K else 3",
        "assert f(",  # does not parse
    ],
)
def test_asserts_that_cannot_be_taken_apart(statement):
    assert _plan(statement) is None


def test_a_function_under_test_named_like_a_builtin_runs_in_process():
    # Builtins stay the test's whatever the program binds (test_red_team.py: shadowing), so
    # an assert on a program's own ``sorted`` has nothing of the program left to take apart.
    assert plan_assert("assert sorted([3, 1]) == [1, 3]") is None


def test_bound_names():
    source = (
        "import os.path\nfrom math import pi as PI\nclass C: pass\nfor i in []: pass\nx = y = 1"
    )
    assert bound_names(source) == {"os", "PI", "C", "i", "x", "y"}
    assert bound_names("def broken(:") == set()


def _encode(value):
    namespace: dict = {}
    exec(ENCODER_SOURCE, namespace)
    return namespace["_rlvr_plain"](value)


class Colour(enum.IntEnum):
    RED = 3


Point = collections.namedtuple("Point", "x y")


@pytest.mark.parametrize(
    ("value", "decoded"),
    [
        (None, None),
        (True, True),
        (-(2**300), -(2**300)),
        (-0.0, -0.0),
        (math.inf, math.inf),
        (1 - 2j, 1 - 2j),
        ("é\n\"'", "é\n\"'"),
        (b"\x00\xff", b"\x00\xff"),
        ([1, (2, [3])], [1, (2, [3])]),
        ({1, "a"}, {1, "a"}),
        (frozenset({2}), frozenset({2})),
        ({"k": [1], 2: None}, {"k": [1], 2: None}),
        (fractions.Fraction(1, 3), fractions.Fraction(1, 3)),
        (decimal.Decimal("1.10"), decimal.Decimal("1.10")),
        (Colour.RED, 3),  # subclasses travel as their base type
        (Point(1, 2), (1, 2)),
        (collections.Counter("aab"), {"a": 2, "b": 1}),
    ],
)
def test_plain_values_round_trip(value, decoded):
    got = decode_plain(_encode(value))
    assert got == decoded and type(got) is type(decoded)


def test_nan_and_integers_past_the_str_limit_round_trip():
    assert math.isnan(decode_plain(_encode(math.nan)))
    huge = 10**5000  # past int's 4300-digit str conversion limit: sent as hex
    assert decode_plain(_encode(huge)) == huge


class Anything:
    def __eq__(self, other):
        return True


@pytest.mark.parametrize("value", [Anything(), [Anything()], object(), bytearray(b"x"), len])
def test_other_objects_are_refused_in_the_child(value):
    with pytest.raises(TypeError, match="not plain data"):
        _encode(value)


def test_cycles_and_deep_nesting_are_refused():
    cycle: list = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="nested too deeply"):
        _encode(cycle)
    with pytest.raises(NotPlain):
        decode_plain("[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5))


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"x": 1}',  # unknown tag
        '{"i": 5}',  # int not as hex text
        '{"s": [[1]]}',  # a set of lists
        '{"d": [[[1], 2]]}',  # a list as a key
        '{"q": [{"i": "1"}, {"i": "0"}]}',  # zero denominator
        '{"i": "1", "f": "2"}',
        "[" * 100_000,
    ],
)
def test_malformed_values_are_refused_in_the_parent(text):
    with pytest.raises(NotPlain):
        decode_plain(text)


def _check(source: str):
    return ast.parse(source, mode="eval").body


@pytest.mark.parametrize(
    ("check", "env", "verdict"),
    [
        ("_p0 == 3", {"_p0": 3}, True),
        ("_p0 == 3", {"_p0": 3.0}, True),  # Python's own ==
        ("_p0 == [1, 2]", {"_p0": (1, 2)}, False),  # a tuple is not a list
        ("_p0 == True", {"_p0": 1}, True),
        ("not _p0", {"_p0": []}, True),
        ("_p0 is None", {"_p0": None}, True),
        ("abs(_p0 - 0.3) < 1e-9", {"_p0": 0.1 + 0.2}, True),
        ("math.isclose(_p0, math.pi, rel_tol=1e-3)", {"_p0": 3.1416}, True),
        ("set(_p0) == {1, 2}", {"_p0": [2, 1, 2]}, True),
        ("sorted(_p0, reverse=True) == [3, 1]", {"_p0": [1, 3]}, True),
        ("round(_p0, 2) == 1.23", {"_p0": 1.2345}, True),
        ("_p0[1:] == 'bc'", {"_p0": "abc"}, True),
        ("_p0 == float('inf')", {"_p0": math.inf}, True),
        ("_p0 == _e0", {"_p0": [0, 1, 4], "_e0": [0, 1, 4]}, True),
        ("isinstance(_p0, int)", {"_p0": 2}, True),
        ("_p0 < 'a'", {"_p0": 1}, False),  # a TypeError fails the test
        ("_p0 ** 10**9 > 0", {"_p0": 3}, False),  # too big to compute: fails, quickly
        ("_p0 * 10**9 == 'x'", {"_p0": "ab"}, False),
        ("round(_p0, -10**9) == 0", {"_p0": 5}, False),
        ("sum(_p0, []) == []", {"_p0": [[1]] * 10}, False),  # only numbers are summed
        ("'%s' % _p0 == ''", {"_p0": 1}, False),
        ("_unknown == 1", {}, False),
    ],
)
def test_judge(check, env, verdict):
    assert judge(_check(check), env) is verdict
