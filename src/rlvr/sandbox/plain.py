"""Plain data as one line of text: the only values that cross between a program and its tests.

:func:`encode` and :func:`decode` carry ``None``, ``bool``, ``int``, ``float``, ``complex``,
``str``, ``bytes``, ``Fraction``, ``Decimal`` and lists, tuples, sets, frozensets and dicts of
them; a subclass (``namedtuple``, ``Counter``, ``IntEnum``) travels as its base type, anything
else is refused. :func:`decode` returns exact builtin types only, so no program code runs
where its answer is used. Standard library only: the child bootstrap carries this source; the
text is JSON through ``_json``'s C functions (``json`` would import ``re`` in every run).
"""

import sys
from _json import encode_basestring_ascii as _quote
from _json import scanstring as _unquote

MAX_DEPTH = 64
"""Deepest nesting of a value."""


class NotPlain(ValueError):
    """Text that does not decode to plain data."""


def _sequence(tag, items, depth):
    return f'{{"{tag}": [' + ",".join(encode(v, depth + 1) for v in items) + "]}"


_WORDS = {"null": None, "true": True, "false": False}


def _scalar(value):
    """JSON text of a plain scalar, or None when ``value`` is not one."""
    if value is None or value is True or value is False:
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return f'{{"i": "{int.__index__(value):x}"}}'
    if isinstance(value, float):
        return f'{{"f": "{float.__repr__(float(value))}"}}'
    if isinstance(value, complex):
        real, imag = float.__repr__(value.real), float.__repr__(value.imag)
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


def _skip(text, i):
    while text[i : i + 1] in (" ", "\n"):
        i += 1
    return i


def _expect(text, i, char):
    i = _skip(text, i)
    if text[i : i + 1] != char:
        raise NotPlain(f"expected {char!r} at {i}")
    return i + 1


def _parse(text, i, depth):
    """(JSON value at ``text[i:]``: null, true, false, strings, lists, one-key objects; end)."""
    if depth > MAX_DEPTH:
        raise NotPlain("value nested too deeply")
    i = _skip(text, i)
    head = text[i : i + 1]
    if head == '"':
        return _unquote(text, i + 1, True)
    if head == "{":
        key, i = _unquote(text, _expect(text, i + 1, '"'), True)
        value, i = _parse(text, _expect(text, i, ":"), depth + 1)
        return {key: value}, _expect(text, i, "}")
    if head == "[":
        items, i = [], _skip(text, i + 1)
        if text[i : i + 1] == "]":
            return items, i + 1
        while True:
            value, i = _parse(text, i, depth + 1)
            items.append(value)
            i = _skip(text, i)
            if text[i : i + 1] != ",":
                return items, _expect(text, i, "]")
            i += 1
    for word, value in _WORDS.items():
        if text.startswith(word, i):
            return value, i + len(word)
    raise NotPlain(f"unexpected text at {i}")


def decode(text):
    """The plain value :func:`encode` wrote; raises :class:`NotPlain` for anything else.

    >>> decode('[{"i": "-2a"}, {"t": [{"f": "nan"}, "x"]}, {"d": [[{"i": "1"}, null]]}]')
    [-42, (nan, 'x'), {1: None}]
    """
    try:
        tree, end = _parse(text, 0, 0)
        if _skip(text, end) != len(text):
            raise NotPlain("text after the value")
        return _decode(tree, 0)
    except (ValueError, TypeError, RecursionError, OverflowError, ArithmeticError) as exc:
        raise NotPlain(str(exc)) from exc
