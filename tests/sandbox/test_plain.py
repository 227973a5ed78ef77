"""The plain-data codec between a program and its test driver: what crosses, what is refused."""

from __future__ import annotations

import collections
import decimal
import enum
import fractions
import math

import pytest

from rlvr.sandbox.plain import MAX_DEPTH, NotPlain, decode, encode


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
        ("é\n\"'\ud800", "é\n\"'\ud800"),
        (b"\x00\xff", b"\x00\xff"),
        ([1, (2, [3])], [1, (2, [3])]),
        ({1, "a"}, {1, "a"}),
        (frozenset({2}), frozenset({2})),
        ({"k": [1], 2: None}, {"k": [1], 2: None}),
        ([], []),
        (fractions.Fraction(1, 3), fractions.Fraction(1, 3)),
        (decimal.Decimal("1.10"), decimal.Decimal("1.10")),
        (Colour.RED, 3),  # subclasses travel as their base type
        (Point(1, 2), (1, 2)),
        (collections.Counter("aab"), {"a": 2, "b": 1}),
    ],
)
def test_plain_values_round_trip(value, decoded):
    got = decode(encode(value))
    assert got == decoded and type(got) is type(decoded)


def test_nan_and_integers_past_the_str_limit_round_trip():
    assert math.isnan(decode(encode(math.nan)))
    huge = 10**5000  # past int's 4300-digit str conversion limit: sent as hex
    assert decode(encode(huge)) == huge


class Anything:
    def __eq__(self, other):
        return True


@pytest.mark.parametrize("value", [Anything(), [Anything()], object(), bytearray(b"x"), len, int])
def test_other_objects_are_refused(value):
    with pytest.raises(TypeError, match="not plain data"):
        encode(value)


def test_cycles_and_deep_nesting_are_refused():
    cycle: list = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="nested too deeply"):
        encode(cycle)
    with pytest.raises(NotPlain):
        decode("[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5))


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "",
        "1",  # a bare number: numbers always travel tagged
        '{"x": 1}',  # a bare number inside
        '{"x": "1"}',  # unknown tag
        '{"t": "abc"}',  # a container tag on a string
        '{"c": [{"i": "1"}, {"i": "2"}]}',  # a complex of ints: the shape check
        '{"i": 5}',  # int not as hex text
        '{"s": [[1]]}',  # a set of lists
        '{"d": [[[1], 2]]}',  # a list as a key
        '{"q": [{"i": "1"}, {"i": "0"}]}',  # zero denominator
        '{"i": "1", "f": "2"}',
        '"unterminated',
        "[null] trailing",
        "[" * 100_000,
    ],
)
def test_malformed_text_is_refused(text):
    with pytest.raises(NotPlain):
        decode(text)


def test_a_subclass_travels_as_its_value_not_as_its_methods_say():
    """A float or complex subclass's own ``__float__`` / ``real`` decided what was sent (the
    module says a subclass travels as its base type)."""

    class Lying(float):
        def __float__(self):
            return 0.5

    class LyingComplex(complex):
        real = 9.0

    assert decode(encode(Lying(2.0))) == 2.0
    assert decode(encode(LyingComplex(1, 2))) == 1 + 2j


def test_a_fraction_too_large_to_reduce_cheaply_is_refused():
    """Decoding reduces a Fraction (a gcd): two parts of ~2M bits, under the output cap, cost
    the parent seconds of CPU per test, outside the sandbox's limits."""
    from rlvr.sandbox.plain import MAX_FRACTION_BITS

    top, bottom = f"{3**50000:x}", f"{2 ** (MAX_FRACTION_BITS + 1) + 1:x}"
    text = '{"q": [{"i": "' + top + '"}, {"i": "' + bottom + '"}]}'
    with pytest.raises(NotPlain, match="over 65536 bits"):
        decode(text)
    assert decode(encode(fractions.Fraction(3**1000, 2**1000))) == fractions.Fraction(
        3**1000, 2**1000
    )
