"""Assert tests judged in the parent: take an assert apart, judge it from plain values.

An assert test such as ``assert add(1, 2) == 3`` is usually run inside the program's own
interpreter, where the program decides what ``==``, ``bool`` or even ``AssertionError`` mean.
Here it is taken apart instead (:func:`plan_assert`):

- **probes**: the largest sub-expressions that involve the program (``add(1, 2)``) are
  evaluated in the sandboxed child, and their values sent back as plain data
  (:data:`ENCODER_SOURCE`, :func:`decode_plain`): ``None``, ``bool``, ``int``, ``float``,
  ``complex``, ``str``, ``bytes``, and lists, tuples, sets, frozensets and dicts of them
  (``Fraction`` and ``Decimal`` too). Subclasses of these (a ``namedtuple``, a ``Counter``, an
  ``IntEnum``) are sent as their base type; any other object fails the test.
- **expected values**: sub-expressions that involve only test data are evaluated by the
  parent when they are made of literals and the operations below, else once per reference
  in a separate sandboxed run that contains no program code (:func:`expected_source`).
- **the check**: what remains, e.g. ``_p0 == 3``, ``abs(_p0 - 0.5) < 1e-06``,
  ``math.isclose(_p0, 2.0, rel_tol=0.001)``, ``set(_p0) == set((4, 5))``, ``not _p0``, is
  evaluated by the parent (:func:`judge`) on plain values only: comparisons, ``and``/``or``/
  ``not``, arithmetic with size limits, subscripts, and a fixed set of functions (:data:`FUNCTIONS`).

The program never sees the expected values and the comparison never calls its code, so
exiting early, rebinding builtins or ``AssertionError``, permissive ``__eq__``/``__bool__``,
printed markers, ``atexit``/``excepthook`` tricks and frame introspection gain nothing: at
most the program chooses the values it sends back, which is what returning them does.

Not covered: test code inside a probe. A probe is evaluated whole in the child, so a set-up
helper around the program's call (``is_sorted(sort_list(xs))``), a builtin with arguments the
parent does not take (``sorted(f(x), key=len)``) or a helper building the program's input runs
in the program's interpreter, where the program can change what it computes (a global ``all``
of its own, a patched module). Such asserts still count as judged; see ``docs/sandbox.md``.

An assert that cannot be taken apart (several statements, a comparison inside a generator
such as ``all(f(x) == y for ...)``, an expected side that is not plain data) is run inside
the program's interpreter as before, and counted.
"""

from __future__ import annotations

import ast
import builtins
import json
import math
import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

PROBE = "_p"
EXPECTED = "_e"
MAX_DEPTH = 64
"""Deepest nesting of a value sent back."""
MAX_BITS = 1 << 20
"""Largest integer (in bits) the parent computes while judging."""
MAX_ITEMS = 1 << 20
"""Longest sequence the parent builds while judging."""

ENCODER_SOURCE = '''
def _rlvr_plain(value, _depth=0, _json=__import__("json"), _isinstance=isinstance,
                _int=int, _float=float, _str=str, _bytes=bytes, _tuple=tuple, _list=list,
                _dict=dict, _set=set, _frozenset=frozenset, _complex=complex, _repr=float.__repr__,
                _hex=int.__index__, _type=type, _mods=__import__("sys").modules):
    """Plain data as JSON text; raises TypeError for anything else."""
    if _depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    enc = lambda v: _rlvr_plain(v, _depth + 1)
    if value is None or value is True or value is False:
        return _json.dumps(value)
    if _isinstance(value, _int):
        return '{"i": "%x"}' % _hex(value) if _hex(value) >= 0 else '{"i": "-%x"}' % -_hex(value)
    if _isinstance(value, _float):
        return '{"f": "%s"}' % _repr(_float(value))
    if _isinstance(value, _complex):
        return '{"c": [{"f": "%s"}, {"f": "%s"}]}' % (_repr(value.real), _repr(value.imag))
    if _isinstance(value, _str):
        return _json.dumps(_str.__str__(value))
    if _isinstance(value, _bytes):
        return '{"b": "%s"}' % _bytes.hex(value)
    if _isinstance(value, _list):
        return "[" + ",".join(enc(v) for v in _list.__iter__(value)) + "]"
    for cls, tag in ((_tuple, "t"), (_set, "s"), (_frozenset, "F")):
        if _isinstance(value, cls):
            return '{"%s": [' % tag + ",".join(enc(v) for v in cls.__iter__(value)) + "]}"
    if _isinstance(value, _dict):
        pairs = ("[" + enc(k) + "," + enc(v) + "]" for k, v in _dict.items(value))
        return '{"d": [' + ",".join(pairs) + "]}"
    fractions, decimal = _mods.get("fractions"), _mods.get("decimal")
    if fractions is not None and _type(value) is fractions.Fraction:
        return '{"q": [%s, %s]}' % (enc(value.numerator), enc(value.denominator))
    if decimal is not None and _type(value) is decimal.Decimal:
        return '{"D": %s}' % _json.dumps(_str(value))
    raise TypeError("not plain data: " + _type(value).__name__)
'''.replace("MAX_DEPTH", str(MAX_DEPTH))
"""Source of ``_rlvr_plain(value) -> str``, defined in the child to send values back."""


class NotPlain(ValueError):
    """Text that does not decode to plain data."""


_SCALARS: dict[str, Callable[[str], Any]] = {
    "i": lambda body: int(body, 16),
    "f": float,
    "b": bytes.fromhex,
    "D": Decimal,
}
_CONTAINERS: dict[str, Callable[[list], Any]] = {
    "t": tuple,
    "s": set,
    "F": frozenset,
    "d": lambda pairs: {k: v for k, v in pairs},
    "c": lambda parts: complex(*parts),
    "q": lambda parts: Fraction(*parts),
}


def _decode(node: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise NotPlain("value nested too deeply")
    if node is None or isinstance(node, (bool, str)):
        return node
    if isinstance(node, list):
        return [_decode(v, depth + 1) for v in node]
    if not isinstance(node, dict) or len(node) != 1:
        raise NotPlain(f"unexpected {type(node).__name__}")
    ((tag, body),) = node.items()
    if tag in _SCALARS and isinstance(body, str):
        return _SCALARS[tag](body)
    if tag in _CONTAINERS and isinstance(body, list):
        values = [_decode(v, depth + 1) for v in body]
        if tag == "d" and not all(isinstance(p, list) and len(p) == 2 for p in values):
            raise NotPlain("bad dict entry")
        if tag == "c" and not (len(values) == 2 and all(type(v) is float for v in values)):
            raise NotPlain("bad complex entry")
        if tag == "q" and not (len(values) == 2 and all(type(v) is int for v in values)):
            raise NotPlain("bad fraction entry")
        return _CONTAINERS[tag](values)
    raise NotPlain(f"bad {tag!r} entry")


def decode_plain(text: str) -> Any:
    """The plain value a child encoded with ``_rlvr_plain``; raises :class:`NotPlain`.

    >>> decode_plain('[{"i": "-2a"}, {"t": [{"f": "nan"}, "x"]}, {"d": [[{"i": "1"}, null]]}]')
    [-42, (nan, 'x'), {1: None}]
    """
    try:
        return _decode(json.loads(text), 0)
    except (ValueError, TypeError, RecursionError, OverflowError, ArithmeticError) as exc:
        raise NotPlain(str(exc)) from exc


# --- the parent's evaluator --------------------------------------------------------------
def _sorted(values: Iterable, *, reverse: bool = False) -> list:
    return sorted(values, reverse=reverse)


def _round(number: Any, ndigits: int | None = None) -> Any:
    if ndigits is not None and not (isinstance(ndigits, int) and abs(ndigits) <= 1000):
        raise Unjudgeable("round() to more than 1000 digits")
    return round(number, ndigits)


def _sum(values: Iterable, start: Any = 0) -> Any:
    values = list(values)
    if not all(isinstance(v, (int, float, complex, Fraction, Decimal)) for v in [*values, start]):
        raise Unjudgeable("sum() of anything but numbers")
    return sum(values, start)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "all": all,
    "any": any,
    "bool": bool,
    "float": float,
    "frozenset": frozenset,
    "int": int,
    "len": len,
    "list": list,
    "max": max,
    "min": min,
    "round": _round,
    "set": set,
    "sorted": _sorted,
    "str": str,
    "sum": _sum,
    "tuple": tuple,
    "math.ceil": math.ceil,
    "math.fabs": math.fabs,
    "math.floor": math.floor,
    "math.isclose": math.isclose,
    "math.isfinite": math.isfinite,
    "math.isinf": math.isinf,
    "math.isnan": math.isnan,
    "math.sqrt": math.sqrt,
}
"""Functions a check may call on plain values (by the name the test uses)."""
_KEYWORDS = {"math.isclose": {"rel_tol", "abs_tol"}, "sorted": {"reverse"}}
_TYPES = {t.__name__: t for t in (bool, int, float, complex, str, bytes, list, tuple, dict, set)}
_TYPES |= {"frozenset": frozenset, "NoneType": type(None)}
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
_ARITHMETIC = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_SINGLETONS = (None, True, False)
_CONSTANTS = {"math.pi": math.pi, "math.e": math.e, "math.tau": math.tau, "math.inf": math.inf}
_CONSTANTS["math.nan"] = math.nan


class Unjudgeable(ValueError):
    """An expression the parent does not evaluate."""


def _function_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def _size(value: Any) -> int:
    if isinstance(value, int):
        return value.bit_length()
    return len(value) if isinstance(value, (str, bytes, list, tuple)) else 0


def _arithmetic(op: ast.operator, a: Any, b: Any) -> Any:
    """``a <op> b`` on plain values, refusing results too big to compute quickly."""
    numbers = (int, float, complex)
    if isinstance(op, ast.Pow):
        if not (isinstance(a, numbers) and isinstance(b, numbers)):
            raise Unjudgeable("** needs numbers")
        if isinstance(a, int) and isinstance(b, int) and abs(b) * max(1, a.bit_length()) > MAX_BITS:
            raise Unjudgeable("power too large")
    elif isinstance(op, ast.Mult) and not (isinstance(a, numbers) and isinstance(b, numbers)):
        count = b if isinstance(b, int) else a if isinstance(a, int) else None
        if count is None or count * max(_size(a), _size(b)) > MAX_ITEMS:
            raise Unjudgeable("repetition too large")
    elif isinstance(op, ast.Mod) and not isinstance(a, numbers):
        raise Unjudgeable("% formatting is not evaluated")
    result = _ARITHMETIC[type(op)](a, b)
    if isinstance(result, int) and result.bit_length() > MAX_BITS:
        raise Unjudgeable("integer too large")
    return result


def _name(node: ast.Name, env: dict[str, Any]) -> Any:
    if node.id not in env:
        raise Unjudgeable(f"unknown name {node.id}")
    return env[node.id]


def _attribute(node: ast.Attribute, env: dict[str, Any]) -> Any:
    name = _function_name(node)
    if name not in _CONSTANTS:
        raise Unjudgeable(f"{ast.unparse(node)} is not evaluated by the parent")
    return _CONSTANTS[name]


def _display(node: ast.List | ast.Tuple | ast.Set, env: dict[str, Any]) -> Any:
    values = [_evaluate(e, env) for e in node.elts]
    return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](values)


def _dict(node: ast.Dict, env: dict[str, Any]) -> dict:
    if None in node.keys:
        raise Unjudgeable("** in a dict display")
    pairs = zip(node.keys, node.values, strict=True)
    return {_evaluate(k, env): _evaluate(v, env) for k, v in pairs}  # type: ignore[arg-type]


def _unary(node: ast.UnaryOp, env: dict[str, Any]) -> Any:
    unary = {ast.Not: operator.not_, ast.USub: operator.neg, ast.UAdd: operator.pos}
    if type(node.op) not in unary:
        raise Unjudgeable("~ is not evaluated by the parent")
    return unary[type(node.op)](_evaluate(node.operand, env))


def _binary(node: ast.BinOp, env: dict[str, Any]) -> Any:
    if type(node.op) not in _ARITHMETIC:
        raise Unjudgeable(f"{type(node.op).__name__} is not evaluated by the parent")
    return _arithmetic(node.op, _evaluate(node.left, env), _evaluate(node.right, env))


def _subscript(node: ast.Subscript, env: dict[str, Any]) -> Any:
    return _evaluate(node.value, env)[_evaluate(node.slice, env)]


def _slice(node: ast.Slice, env: dict[str, Any]) -> slice:
    parts = (node.lower, node.upper, node.step)
    return slice(*(None if p is None else _evaluate(p, env) for p in parts))


def _evaluate(node: ast.expr, env: dict[str, Any]) -> Any:
    """Value of ``node`` built from constants, ``env`` and the operations above."""
    handler = _HANDLERS.get(type(node))
    if handler is None:
        raise Unjudgeable(f"{type(node).__name__} is not evaluated by the parent")
    return handler(node, env)


def _boolean(node: ast.BoolOp, env: dict[str, Any]) -> Any:
    value: Any = None
    for operand in node.values:
        value = _evaluate(operand, env)
        if bool(value) is isinstance(node.op, ast.Or):
            return value
    return value


def _compare(node: ast.Compare, env: dict[str, Any]) -> bool:
    left = _evaluate(node.left, env)
    for op, right_node in zip(node.ops, node.comparators, strict=True):
        right = _evaluate(right_node, env)
        if not _COMPARE[type(op)](left, right):
            return False
        left = right
    return True


def _call(node: ast.Call, env: dict[str, Any]) -> Any:
    name = _function_name(node.func)
    if name == "isinstance" and len(node.args) == 2 and not node.keywords:
        return isinstance(_evaluate(node.args[0], env), _type_spec(node.args[1]))
    if name not in FUNCTIONS or any(a for a in node.args if isinstance(a, ast.Starred)):
        raise Unjudgeable(f"call of {ast.unparse(node.func)} is not evaluated by the parent")
    if any(k.arg not in _KEYWORDS.get(name, ()) for k in node.keywords):
        raise Unjudgeable(f"keywords of {name} are not evaluated by the parent")
    args = [_evaluate(a, env) for a in node.args]
    kwargs = {k.arg: _evaluate(k.value, env) for k in node.keywords if k.arg}
    if name in ("str", "int") and any(_size(a) > MAX_ITEMS // 256 for a in args):
        raise Unjudgeable("number conversion too large")
    return FUNCTIONS[name](*args, **kwargs)


def _type_spec(node: ast.expr) -> type | tuple[type, ...]:
    if isinstance(node, ast.Name) and node.id in _TYPES:
        return _TYPES[node.id]
    if isinstance(node, ast.Tuple):
        return tuple(_type_spec(e) for e in node.elts)  # type: ignore[misc]
    raise Unjudgeable("isinstance needs builtin types")


_HANDLERS: dict[type, Callable[[Any, dict[str, Any]], Any]] = {
    ast.Constant: lambda node, env: node.value,
    ast.Name: _name,
    ast.Attribute: _attribute,
    ast.List: _display,
    ast.Tuple: _display,
    ast.Set: _display,
    ast.Dict: _dict,
    ast.UnaryOp: _unary,
    ast.BinOp: _binary,
    ast.BoolOp: _boolean,
    ast.Compare: _compare,
    ast.Subscript: _subscript,
    ast.Slice: _slice,
    ast.Call: _call,
}


def judge(check: ast.expr, env: dict[str, Any]) -> bool:
    """Truth of the check expression on the plain values in ``env``; False on any error.

    >>> judge(ast.parse("abs(_p0 - 0.5) < 1e-6 and _p1 == [1, 2]", mode="eval").body,
    ...       {"_p0": 0.5000001, "_p1": [1, 2]})
    True
    """
    try:
        return bool(_evaluate(check, env))
    except (Exception, RecursionError):  # any failure of test or value: the test fails
        return False


# --- taking an assert apart --------------------------------------------------------------
@dataclass(frozen=True)
class AssertPlan:
    """One assert statement taken apart."""

    statement: str
    """The assert as written."""
    probes: tuple[str, ...]
    """Expressions the child evaluates on the program, bound to ``_p0``, ``_p1``, ..."""
    expected: tuple[str, ...]
    """Test-data expressions evaluated in a separate run, bound to ``_e0``, ``_e1``, ..."""
    check: ast.expr
    """The judging expression over those names, evaluated by :func:`judge`."""


def bound_names(source: str) -> set[str]:
    """Names a module binds at its top level (functions, classes, imports, assignments).

    >>> sorted(bound_names("import math as m\\ndef f(): pass\\nx, (y, z) = 1, (2, 3)"))
    ['f', 'm', 'x', 'y', 'z']
    """
    try:
        module = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    names: set[str] = set()
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        else:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    names.add(sub.id)
    return names


class _Splitter:
    """Replaces the program's parts of an expression by probes, test data by expected values."""

    def __init__(self, program: Callable[[str], bool]) -> None:
        self.program = program
        self.probes: list[str] = []
        self.expected: list[str] = []

    def uses_program(self, node: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and self.program(n.id) for n in ast.walk(node))

    def placeholder(self, node: ast.expr, into: list[str], prefix: str) -> ast.Name:
        source = ast.unparse(node)
        if source not in into:
            into.append(source)
        return ast.Name(f"{prefix}{into.index(source)}", ast.Load())

    def split(self, node: ast.expr) -> ast.expr:
        if not self.uses_program(node):
            return (
                node if _parent_evaluable(node) else self.placeholder(node, self.expected, EXPECTED)
            )
        parts = self._parts(node)
        if parts is not None:
            return parts
        if isinstance(node, (ast.Lambda, ast.GeneratorExp, ast.Starred, ast.NamedExpr)):
            raise Unjudgeable(f"{type(node).__name__} cannot be sent back")
        if any(
            isinstance(n, (ast.Compare, ast.BoolOp)) and self.uses_program(n)
            for n in ast.walk(node)
        ):
            raise Unjudgeable("a comparison inside the program's part")
        return self.placeholder(node, self.probes, PROBE)

    def _parts(self, node: ast.expr) -> ast.expr | None:
        """``node`` with its operands split, when the parent evaluates its own operation."""
        if isinstance(node, ast.Compare):
            for op, a, b in zip(
                node.ops, [node.left, *node.comparators], node.comparators, strict=False
            ):
                if (
                    isinstance(op, (ast.Is, ast.IsNot))
                    and not _is_singleton(a)
                    and not _is_singleton(b)
                ):
                    raise Unjudgeable("'is' against something other than None, True or False")
            return ast.Compare(
                self.split(node.left), node.ops, [self.split(c) for c in node.comparators]
            )
        if isinstance(node, ast.BoolOp):
            return ast.BoolOp(node.op, [self.split(v) for v in node.values])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub, ast.UAdd)):
            return ast.UnaryOp(node.op, self.split(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            return ast.BinOp(self.split(node.left), node.op, self.split(node.right))
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
            return ast.Subscript(self.split(node.value), self.split(node.slice), ast.Load())
        if isinstance(node, ast.Set):
            return ast.Set([self.split(e) for e in node.elts])
        if isinstance(node, (ast.List, ast.Tuple)):
            return type(node)([self.split(e) for e in node.elts], ast.Load())
        if isinstance(node, ast.Call):
            return self._call(node)
        return None

    def _call(self, node: ast.Call) -> ast.expr | None:
        """A call the parent makes itself, with its arguments split; else None."""
        name = _function_name(node.func)
        if name is None or self.uses_program(node.func):
            return None
        if name == "isinstance" and len(node.args) == 2 and not node.keywords:
            _type_spec(node.args[1])  # builtin type names only
            return ast.Call(node.func, [self.split(node.args[0]), node.args[1]], [])
        allowed = _KEYWORDS.get(name, set())
        if name not in FUNCTIONS or any(k.arg not in allowed for k in node.keywords):
            return None
        if any(isinstance(a, ast.Starred) for a in node.args):
            return None
        keywords = [ast.keyword(k.arg, self.split(k.value)) for k in node.keywords]
        return ast.Call(node.func, [self.split(a) for a in node.args], keywords)


def _is_singleton(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and any(node.value is s for s in _SINGLETONS)


def _parent_evaluable(node: ast.expr) -> bool:
    """True when ``node`` (test data only) is evaluated by the parent as it stands."""
    try:
        _evaluate(node, {})
    except (Exception, RecursionError):
        return False
    return True


_TRUSTED = frozenset(dir(builtins))


def _local_names(node: ast.AST) -> set[str]:
    """Names bound inside an expression: comprehension targets, lambda parameters, ``:=``."""
    local: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            local.add(sub.id)
        elif isinstance(sub, ast.arg):
            local.add(sub.arg)
    return local


def plan_assert(statement: str, trusted_names: Iterable[str] = ()) -> AssertPlan | None:
    """Take one assert statement apart, or ``None`` when it must run inside the program.

    A name is the program's when it is neither a builtin nor in ``trusted_names`` (names the
    test's own set-up code and prelude bind). A trusted name keeps the test's meaning even
    where the program rebinds it: a program that defines its own ``abs`` or ``math`` must not
    decide the check or the expected side. An assert that then uses nothing of the program
    (the function under test is itself named like a builtin) runs inside the program.

    >>> plan = plan_assert("assert abs(add(1, 2) - 3.0) < 1e-9")
    >>> plan.probes, plan.expected, ast.unparse(plan.check)
    (('add(1, 2)',), (), 'abs(_p0 - 3.0) < 1e-09')
    >>> plan_assert("assert all(add(x, 1) == x + 1 for x in range(3))") is None
    True
    """
    trusted = _TRUSTED | set(trusted_names)
    try:
        module = ast.parse(statement)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if len(module.body) != 1 or not isinstance(module.body[0], ast.Assert):
        return None
    local = _local_names(module.body[0].test)
    splitter = _Splitter(lambda name: name not in local and name not in trusted)
    try:
        check = ast.fix_missing_locations(splitter.split(module.body[0].test))
    except (Unjudgeable, RecursionError):
        return None
    if not splitter.probes:
        return None  # nothing of the program in it: run as written
    return AssertPlan(statement, tuple(splitter.probes), tuple(splitter.expected), check)
