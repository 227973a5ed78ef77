"""Plain data as one line of text: the only values that cross between a program and its tests.

:func:`encode` and :func:`decode` carry ``None``, ``bool``, ``int``, ``float``, ``complex``,
``str``, ``bytes``, ``Fraction``, ``Decimal`` and lists, tuples, sets, frozensets and dicts of
them; a subclass (``namedtuple``, ``Counter``, ``IntEnum``) travels as its base type, anything
else is refused. :func:`decode` returns exact builtin types only, so no program code runs
where its answer is used. Standard library only: the child bootstrap carries this source; the
text is JSON through ``_json``'s C encoder and scanner (``json`` would import ``re`` in every run).
"""

import sys
from _json import encode_basestring_ascii as _quote
from _json import make_scanner as _make_scanner

MAX_DEPTH = 64  # deepest nesting of a value
MAX_FRACTION_BITS = 1 << 16  # a Fraction's parts: reducing two of 2M bits takes seconds


class NotPlain(ValueError):
    """Text that does not decode to plain data."""


def _sequence(tag, items, depth):
    return f'{{"{tag}": [' + ",".join(encode(v, depth + 1) for v in items) + "]}"


def _scalar(value):
    """JSON text of a plain scalar, or None when ``value`` is not one."""
    if value is None or value is True or value is False:
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return f'{{"i": "{int.__index__(value):x}"}}'
    if isinstance(value, float):
        return f'{{"f": "{float.__repr__(value)}"}}'  # a subclass's __float__ is not asked
    if isinstance(value, complex):
        real, imag = (float.__repr__(part.__get__(value)) for part in (complex.real, complex.imag))
        return f'{{"c": [{{"f": "{real}"}}, {{"f": "{imag}"}}]}}'
    if isinstance(value, str):
        return _quote(str.__str__(value))
    if isinstance(value, bytes):
        return f'{{"b": "{bytes.hex(value)}"}}'
    decimal = sys.modules.get("decimal")
    if decimal is not None and type(value) is decimal.Decimal:
        return f'{{"D": {_quote(str(value))}}}'
    return None


def encode(value, depth=0):
    """``value`` as JSON text; raises ``TypeError`` for anything but plain data.

    >>> encode([-42, (1.5, "x"), {1: None}])
    '[{"i": "-2a"},{"t": [{"f": "1.5"},"x"]},{"d": [[{"i": "1"},null]]}]'
    """
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    text = _scalar(value)
    if text is not None:
        return text
    if isinstance(value, list):
        return "[" + ",".join(encode(v, depth + 1) for v in list.__iter__(value)) + "]"
    for cls, tag in ((tuple, "t"), (set, "s"), (frozenset, "F")):
        if isinstance(value, cls):
            return _sequence(tag, cls.__iter__(value), depth)
    if isinstance(value, dict):
        pairs = (f"[{encode(k, depth + 1)},{encode(v, depth + 1)}]" for k, v in dict.items(value))
        return '{"d": [' + ",".join(pairs) + "]}"
    fractions = sys.modules.get("fractions")
    if fractions is not None and type(value) is fractions.Fraction:
        return _sequence("q", (value.numerator, value.denominator), depth)
    raise TypeError("not plain data: " + type(value).__name__)


def _fraction(parts):
    from fractions import Fraction

    if max(abs(part).bit_length() for part in parts) > MAX_FRACTION_BITS:
        raise ValueError(f"a Fraction's parts are over {MAX_FRACTION_BITS} bits")
    return Fraction(*parts)


def _decimal(text):
    from decimal import Decimal

    return Decimal(text)


_SCALARS = {"i": lambda body: int(body, 16), "f": float, "b": bytes.fromhex, "D": _decimal}
_CONTAINERS = {
    "t": tuple,
    "s": set,
    "F": frozenset,
    "d": lambda pairs: {k: v for k, v in pairs},
    "c": lambda parts: complex(*parts),
    "q": _fraction,
}
_SHAPES = {
    "d": lambda values: all(type(p) is list and len(p) == 2 for p in values),
    "c": lambda values: len(values) == 2 and all(type(v) is float for v in values),
    "q": lambda values: len(values) == 2 and all(type(v) is int for v in values),
}


def _decode(node, depth):
    if depth > MAX_DEPTH:
        raise NotPlain("value nested too deeply")
    if node is None or type(node) in (bool, str):
        return node
    if type(node) is list:
        return [_decode(v, depth + 1) for v in node]
    if type(node) is not dict or len(node) != 1:
        raise NotPlain("unexpected " + type(node).__name__)
    ((tag, body),) = node.items()
    if tag in _SCALARS and type(body) is str:
        return _SCALARS[tag](body)
    if tag in _CONTAINERS and type(body) is list:
        values = [_decode(v, depth + 1) for v in body]
        if not _SHAPES.get(tag, lambda values: True)(values):
            raise NotPlain(f"bad {tag!r} entry")
        return _CONTAINERS[tag](values)
    raise NotPlain(f"bad {tag!r} entry")


def _refuse(text):
    raise NotPlain("untagged number or constant: " + text)


def _one_key(pairs):
    if len(pairs) != 1:
        raise NotPlain("an object must have exactly one key")
    return dict(pairs)


class _Syntax:
    """``_json``'s C scanner, strict: objects of one key, no bare numbers, NaN or Infinity."""

    strict, object_hook, object_pairs_hook = True, None, staticmethod(_one_key)
    parse_float = parse_int = parse_constant = staticmethod(_refuse)


_scan = _make_scanner(_Syntax)


def decode(text):
    """The plain value :func:`encode` wrote; raises :class:`NotPlain` for anything else.

    >>> decode('[{"i": "-2a"}, {"t": [{"f": "nan"}, "x"]}, {"d": [[{"i": "1"}, null]]}]')
    [-42, (nan, 'x'), {1: None}]
    """
    try:
        text = text.strip(" \n")
        tree, end = _scan(text, 0)
        if end != len(text):
            raise NotPlain("text after the value")
        return _decode(tree, 0)
    except (ValueError, TypeError, RecursionError, ArithmeticError, StopIteration) as exc:
        raise NotPlain(str(exc)) from exc
