"""The ``code`` verifier: run the Python program in a completion against tests in the sandbox.

Reference formats (``docs/sandbox.md`` has the table and the judging rules): stdin/stdout
``{"inputs", "outputs"}`` (APPS/TACO ``input_output``, as an object or its JSON text), the
same with ``"fn_name"`` (call style), a list of asserts, a HumanEval or MBPP row, or a
TACO/APPS row holding one.

No verdict depends on anything the program's code can change: stdout and return values are
judged in the parent; an assert test runs in a test driver (:mod:`rlvr.sandbox.driver`) that
calls the program through a pipe of plain data (``tests/rewards/test_tamper.py``).

Reward (Klear-Reasoner, section 3.2.4 and the ablation in 5.2.3): the fraction of tests
passed, or with ``soft=False`` 1.0 only when every test passes. Each test is its own sandbox
run, ``workers`` at a time, within ``total_time_s`` per program.
"""

from __future__ import annotations

import ast
import builtins
import functools
import json
import math
import os
import re
import secrets
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from itertools import chain
from pathlib import Path
from typing import Any, NamedTuple

from rlvr.rewards.events import record
from rlvr.rewards.extract import after_think
from rlvr.rewards.registry import register
from rlvr.sandbox import (
    DEFAULT_POLICY,
    EXIT_SYNTAX,
    SandboxError,
    SandboxLimits,
    SandboxPolicy,
    SandboxResult,
    SandboxStatus,
    driver,
    plain,
    run_untrusted,
)

SKIPPED = "skipped"
"""Status of a test that was not run (budget spent, or an earlier result made it moot)."""

_PRELUDE = (
    "import bisect, collections, functools, heapq, itertools, math, string, sys\n"
    "from typing import *\n"
    "from collections import Counter, OrderedDict, defaultdict, deque\n"
    "from functools import cache, lru_cache, reduce\n"
    "from heapq import heapify, heappop, heappush\n"
    "from bisect import bisect_left, bisect_right, insort\n"
    "from itertools import accumulate, combinations, permutations, product\n"
    "from math import ceil, comb, floor, gcd, inf, isqrt, sqrt\n"
)
_NUMBER = re.compile(r"(?a)[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")  # Decimal reads "٦" too
_INTEGER = re.compile(r"[+-]?\d+")
_PADDED = re.compile(r"[+-]?0\d+")
_FENCE = re.compile(r"(^[ \t]*)?```([^\n`]*)\n(.*?)```", re.DOTALL | re.MULTILINE)
_OPEN_PYTHON_FENCE = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\n", re.IGNORECASE)
_PYTHON_TAGS = frozenset({"python", "python3", "py"})
_BUILTINS = frozenset(dir(builtins))
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)  # statements that bind a .name


@dataclass(frozen=True)
class CodeConfig:
    """How the code verifier runs and judges tests."""

    limits: SandboxLimits = SandboxLimits(wall_time_s=8.0, cpu_time_s=4.0, memory_mb=1024)
    """Limits of each test's sandbox run."""
    policy: SandboxPolicy = DEFAULT_POLICY
    """Isolation layers asked of the sandbox."""
    workers: int = 0
    """Sandbox runs in flight per program; 0 means the CPU cores this process may use."""
    total_time_s: float = 60.0
    """Budget for all tests of one program; tests not started within it count as failed."""
    rel_tol: float = 1e-5
    """Relative tolerance between numeric tokens or values."""
    abs_tol: float = 1e-8
    """Absolute tolerance between numeric tokens or values."""
    in_process: bool = False
    """Run assert tests the driver cannot judge in the program's interpreter, where the program
    can fake them: only for trusted programs (off: they fail, counted ``asserts_unsupported``)."""

    def __post_init__(self) -> None:
        if self.workers < 0:
            raise ValueError(f"CodeConfig.workers must be >= 0, got {self.workers}")
        if not self.total_time_s > 0:
            raise ValueError(f"CodeConfig.total_time_s must be positive, got {self.total_time_s}")
        if self.rel_tol < 0 or self.abs_tol < 0:
            raise ValueError("CodeConfig.rel_tol and abs_tol must be >= 0")


DEFAULT_CODE_CONFIG = CodeConfig()


@dataclass(frozen=True)
class TestSuite:
    """Tests of one problem, parsed from a reference."""

    __test__ = False  # not a pytest test class

    style: str
    """``stdio``, ``call`` or ``assert``."""
    inputs: tuple[Any, ...]
    """stdin texts, argument lists, or assert statements."""
    outputs: tuple[Any, ...]
    """Expected stdout texts or return values; empty for asserts."""
    fn_name: str | None = None
    """Called by call tests (``Solution`` method too); for asserts, HumanEval's ``entry_point``."""
    setup: str = ""
    """Assert tests: code run before each test (MBPP's ``test_setup_code``, HumanEval's module)."""
    prefix: str = ""
    """Assert tests: code run before the program in its interpreter (a HumanEval prompt's
    imports and helpers, which the completion may use without writing them again)."""
    prompt: str = ""
    """HumanEval: the row's prompt, which a program that does not define ``fn_name`` continues
    (a base model's completion is the function's body, as in HumanEval's own harness)."""

    def __len__(self) -> int:
        return len(self.inputs)


@dataclass(frozen=True)
class CodeVerdict:
    """Outcome of one program against its tests, in reference order."""

    passed: tuple[bool, ...]
    """Whether each test passed."""
    statuses: tuple[str, ...]
    """Sandbox status of each test's run (``ok``, ``timeout``, ...) or ``skipped``."""
    judged: int = 0
    """Assert tests judged by a driver the program cannot reach."""
    in_process: int = 0
    """Assert tests that ran inside the program's interpreter (``CodeConfig.in_process``)."""
    unsupported: int = 0
    """Assert tests the driver could not judge, not run in-process: failed, not paid."""

    @property
    def pass_rate(self) -> float:
        """Fraction of tests passed."""
        return sum(self.passed) / len(self.passed)

    def score(self, soft: bool = True) -> float:
        """Pass rate when ``soft``, else 1.0 if every test passed and 0.0 otherwise."""
        return self.pass_rate if soft else float(all(self.passed))


def extract_code(completion: str) -> str:
    """The program in a completion: its last fenced Python block, else the whole text.

    Text up to the last ``</think>`` is ignored; an untagged block and a final ``python`` fence
    left open (a cut-off generation) are the fallbacks (``docs/sandbox.md``). A block's tag is
    the first word of its info string; an indented fence's indent is taken off its lines.

    >>> extract_code("Idea...\\n```python\\nprint(1)\\n```\\nthen\\n```python\\nprint(2)\\n```")
    'print(2)\\n'
    >>> extract_code("x = 1")
    'x = 1'
    """
    text = after_think(completion)
    found = _FENCE.findall(text)  # a fence's indent (in a list item) is not the program's
    blocks = [
        ((tag.split() or [""])[0].lower(), re.sub(f"(?m)^{pad}", "", body))
        for pad, tag, body in found
    ]
    for wanted in (_PYTHON_TAGS, frozenset({""})):
        chosen = [body for tag, body in blocks if tag in wanted]
        if chosen:
            return chosen[-1]
    opened = list(_OPEN_PYTHON_FENCE.finditer(text))
    return text[opened[-1].end() :] if opened else text


def _as_text(value: Any, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    raise ValueError(f"reference: {what} must be a string or a list of strings, got {value!r:.80}")


def _io_suite(reference: Mapping[str, Any]) -> TestSuite:
    inputs, outputs = reference.get("inputs"), reference.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        raise ValueError("reference: 'inputs' and 'outputs' must both be lists")
    if len(inputs) != len(outputs) or not inputs:
        raise ValueError(
            f"reference: {len(inputs)} inputs and {len(outputs)} outputs; need as many, at least one"
        )
    fn_name = reference.get("fn_name") or None
    if fn_name is None:
        texts_in = tuple(_as_text(x, f"inputs[{i}]") for i, x in enumerate(inputs))
        texts_out = tuple(_as_text(y, f"outputs[{i}]") for i, y in enumerate(outputs))
        if not any(y.strip() for y in texts_out):
            raise ValueError("reference: every output is empty; a program printing nothing passes")
        return TestSuite("stdio", texts_in, texts_out)
    if not isinstance(fn_name, str) or not fn_name.isidentifier():
        raise ValueError(f"reference: 'fn_name' must be an identifier, got {fn_name!r}")
    if all(y is None or y == [None] for y in outputs):
        raise ValueError("reference: every output is None; a function doing nothing passes")
    args = tuple(tuple(x) if isinstance(x, list) else (x,) for x in inputs)
    return TestSuite("call", args, tuple(outputs), fn_name)


_INERT = (ast.Assert, ast.Import, ast.ImportFrom, ast.Pass)  # change nothing an assert reads


def _check_parts(check: ast.FunctionDef, shared: set[str]) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """(asserts on ``candidate`` that use no name ``check`` binds or of the module's ``shared``
    variables and follow only asserts and imports, every other statement): an assert after any
    other statement (``data.append(4)``, ``def helper``), or on a variable an earlier call may
    have changed (``DATA == [1, 2, 3]`` after ``candidate(DATA)`` sorted it), stays in ``check``,
    run after it as the reference runs it."""
    nodes = list(ast.walk(check))
    local = _imported(nodes) | _stored(nodes) | shared
    own, rest = [], []
    only_asserts = True  # so far: nothing has run that could change what an assert computes
    for statement in check.body:
        names = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name)}
        only_asserts &= isinstance(statement, _INERT) or _is_docstring(statement)
        standalone = only_asserts and isinstance(statement, ast.Assert) and not names & local
        (own if standalone and "candidate" in names else rest).append(statement)
    return own, rest


def _variables(module: ast.Module) -> set[str]:
    """Names a module's statements assign at its top level (not its functions or imports)."""
    return _stored(n for s in module.body if not isinstance(s, _DEFS) for n in ast.walk(s))


def _is_docstring(statement: ast.stmt) -> bool:
    """A statement that is a constant alone (a docstring, ``...``)."""
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)


# Builtins that take a function as an object and never call it.
_INSPECTING = frozenset({"bool", "callable", "hasattr", "id", "isinstance", "issubclass"})
_INSPECTING |= {"print", "repr", "str", "type"}


def _inspects_only(statement: str, names: Iterable[str]) -> bool:
    """Whether ``statement`` reads the program's ``names`` only as objects (``callable(f)``,
    ``f is not None``, ``f == f``, ``assert f``, ``not f``, ``f.__name__``): the driver's
    stand-in for ``f`` passes it whatever the program is, one without ``f`` too, so it tests
    nothing.

    >>> _inspects_only("assert callable(f)", {"f"}), _inspects_only("assert list(map(f, [1]))", {"f"})
    (True, False)
    >>> _inspects_only("assert f", {"f"}), _inspects_only("assert f != None", {"f"})
    (True, True)
    """
    uses = [(p, c) for p in ast.walk(ast.parse(statement)) for c in ast.iter_child_nodes(p)]
    uses = [(p, c) for p, c in uses if isinstance(c, ast.Name) and c.id in names]
    return bool(uses) and all(_inspecting(parent, name) for parent, name in uses)


def _inspecting(parent: ast.AST, name: ast.Name) -> bool:
    if isinstance(parent, ast.Call):
        func = parent.func
        return func is not name and isinstance(func, ast.Name) and func.id in _INSPECTING
    if isinstance(parent, ast.Attribute):
        return parent.attr.startswith("__") and parent.attr != "__call__"
    if isinstance(parent, ast.UnaryOp):
        return isinstance(parent.op, ast.Not)
    return isinstance(parent, (ast.Assert, ast.Compare))  # its truth, or compared as an object


def _can_fail(node: ast.AST, program: Iterable[str] = ("candidate",)) -> bool:
    """An assert that is not always true, a ``raise``, or a call made for its effect other than
    the ``program``'s or a builtin's (a checking helper: EvalPlus's ``assertion(out, exp, 0)``).

    >>> [any(map(_can_fail, ast.walk(ast.parse(t)))) for t in ("candidate(1) == 2", "print(1)")]
    [False, False]
    """
    if isinstance(node, ast.Assert):
        return not _always_true(node.test)
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        func = node.value.func
        return not (isinstance(func, ast.Name) and func.id in _BUILTINS.union(program))
    return isinstance(node, ast.Raise)


def _always_true(test: ast.expr) -> bool:
    """Whether an assert of ``test`` passes whatever the program does, short of raising: a true
    constant, ``x or True``, or a non-empty tuple (``assert (f(1) == 2, "message")``).

    >>> [_always_true(ast.parse(t).body[0].value) for t in ("f(1) or 1", "(f(1), 'm')", "f(1) and 1")]
    [True, True, False]
    """
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if isinstance(test, ast.Tuple):
        return bool(test.elts)
    if isinstance(test, ast.BoolOp):
        parts = [_always_true(value) for value in test.values]
        return any(parts) if isinstance(test.op, ast.Or) else all(parts)
    return False


def _tests(statement: str, names: tuple[str, ...]) -> bool:
    """Whether a test entry tests the program's ``names``: it uses them other than as objects
    and can fail (``f(1) == 2`` without ``assert``, or ``print(f(1))``, cannot)."""
    if not names or _inspects_only(statement, names):
        return False
    return any(_can_fail(node, names) for node in ast.walk(ast.parse(statement)))


def _tests_candidate(statements: list[ast.stmt]) -> bool:
    """True when ``statements`` use ``candidate`` other than as an object (:func:`_inspects_only`)
    and can fail: a remainder of HumanEval's ``assert True, "This prints if this assert fails"``
    lines, or of ``assert candidate is not None`` in a loop, passes any program."""
    nodes = [n for statement in statements for n in ast.walk(statement)]
    uses = any(isinstance(n, ast.Name) and n.id == "candidate" for n in nodes)
    source = ast.unparse(ast.Module(body=statements, type_ignores=[]))
    return uses and not _inspects_only(source, {"candidate"}) and any(map(_can_fail, nodes))


def _prompt_helpers(prompt: Any, entry: str) -> str:
    """A HumanEval prompt's top-level code but the entry point (``poly`` before ``find_zero``);
    empty when there is no prompt or it does not parse."""
    try:
        module = ast.parse(prompt) if isinstance(prompt, str) else None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        module = None
    if module is None:
        return ""
    return ast.unparse([s for s in module.body if not (isinstance(s, _DEFS) and s.name == entry)])


def _humaneval_suite(reference: Mapping[str, Any]) -> TestSuite:
    """HumanEval: the asserts of ``check(candidate)`` one by one, the rest as one test. The
    prompt's helpers run before the test (the test's ``encode_cyclic`` is the prompt's, not one
    the program may redefine) and before the program (which may call them)."""
    entry, test = reference.get("entry_point"), reference.get("test")
    if not isinstance(entry, str) or not entry.isidentifier() or not isinstance(test, str):
        raise ValueError("reference: HumanEval needs 'test' source and an identifier 'entry_point'")
    try:
        module = ast.parse(test)
    except SyntaxError as exc:
        raise ValueError(f"reference: HumanEval 'test' does not parse ({exc})") from exc
    checks = [n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if len(checks) != 1 or [a.arg for a in checks[0].args.args] != ["candidate"]:
        raise ValueError("reference: HumanEval 'test' must define check(candidate)")
    own, rest = _check_parts(checks[0], _variables(module))
    tests = [t for t in map(ast.unparse, own) if _tests(t, ("candidate",))]
    if _tests_candidate(rest):
        checks[0].body = rest
        tests.append("check(candidate)")
    else:
        module.body.remove(checks[0])
    if not tests:
        raise ValueError("reference: HumanEval 'check' asserts nothing about candidate")
    helpers = _prompt_helpers(reference.get("prompt"), entry)
    setup = f"{helpers}\n{ast.unparse(module)}" if helpers else ast.unparse(module)
    used = _names(setup).free.union(*(_names(t).free for t in tests)) - _names(setup).top
    unknown = used - _BUILTINS - _prelude().keys() - {"candidate"}
    if unknown:  # the program would define them: a helper the test trusts must not be its
        raise ValueError(
            f"reference: HumanEval 'test' uses {', '.join(sorted(unknown))}, defined by neither"
            " 'test' nor 'prompt' (keep the row's 'prompt')"
        )
    prompt = reference.get("prompt")
    prompt = prompt if isinstance(prompt, str) else ""
    return TestSuite("assert", tuple(tests), (), entry, setup, helpers, prompt)


def _parses(sources: Iterable[str], what: str) -> None:
    """Raise ``ValueError`` naming the first of ``sources`` that is not Python: a test that
    cannot compile fails for every program, a correct one included."""
    for i, source in enumerate(sources):
        try:
            ast.parse(source)
        except (SyntaxError, ValueError) as exc:
            raise ValueError(f"reference: {what}[{i}] does not parse ({exc})") from None


def _assert_suite(tests: Sequence[str], what: str, setup: str = "") -> TestSuite:
    """Assert tests that parse, less those that use no name of the program (``import math``,
    ``assert True``), only inspect it (:func:`_inspects_only`) or cannot fail (``f(1) == 2``
    without ``assert``): any program that ran passed them. ``ValueError`` when none is left.

    Which builtin-named function is the program's depends on the tests kept
    (:func:`_read_by_every_test`), so they are left out until the rest all still qualify: the
    driver then reads the names the same way (``assert callable(max)`` left out once made
    ``max`` in ``assert max([1, 2]) == len('ab')`` Python's, a test every program passed).
    """
    _parses(tests, what)
    _refuse_dependent(tests, TestSuite("assert", tuple(tests), (), setup=setup), what)
    suite, kept = TestSuite("assert", (), (), setup=setup), tuple(tests)
    while suite.inputs != kept:
        suite = replace(suite, inputs=kept)
        kept = tuple(t for t in kept if _tests(t, _program_names(t, suite)))
    if not kept:
        raise ValueError(f"reference: no {what} uses a name of the program")
    return suite


def _refuse_dependent(tests: Sequence[str], suite: TestSuite, what: str) -> None:
    """Raise ``ValueError`` when an entry checks a set-up variable without calling the program
    while another entry hands that variable to the program: each entry runs alone after a
    fresh set-up, so the check would not see what the call did (a function doing nothing
    passed ``assert f(DATA) is None`` and then ``assert DATA == [1, 2, 3]``)."""
    variables = _variables(ast.parse(suite.setup))
    reads = [(_names(t).free & variables, bool(_program_names(t, suite))) for t in tests]
    for i, (read, calls) in enumerate(reads):
        given = [j for j, (other, by_call) in enumerate(reads) if by_call and read & other]
        if read and not calls and given:
            raise ValueError(
                f"reference: {what}[{i}] checks {', '.join(sorted(read))}, which {what}"
                f"[{given[0]}] uses with the program; entries run one by one, each after a"
                " fresh set-up, so it would not see what the program did to it"
            )


def _mbpp_suite(reference: Mapping[str, Any]) -> TestSuite:
    tests, setup = reference.get("test_list"), reference.get("test_setup_code") or ""
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
        raise ValueError("reference: MBPP 'test_list' must be a non-empty list of strings")
    if not isinstance(setup, str):
        raise ValueError("reference: MBPP 'test_setup_code' must be a string")
    _parses([setup], "MBPP test_setup_code")
    return _assert_suite(tests, "MBPP test_list", setup)


def parse_reference(reference: Any) -> TestSuite:
    """Read a reference in any accepted format (see the module docstring) into a suite.

    >>> parse_reference('{"inputs": ["1 2\\\\n"], "outputs": ["3\\\\n"]}').style
    'stdio'
    >>> parse_reference(["assert f(1) == 2"]).inputs
    ('assert f(1) == 2',)
    >>> parse_reference({"test_list": ["assert f(1) == 2"], "test_setup_code": "k = 3"}).setup
    'k = 3'
    """
    if isinstance(reference, (str, bytes)):
        try:
            reference = json.loads(reference)
        except ValueError as exc:
            raise ValueError(f"reference: not valid JSON ({exc})") from exc
    if isinstance(reference, Mapping):
        if "input_output" in reference:  # a TACO/APPS row
            return parse_reference(reference["input_output"])
        if "entry_point" in reference and "test" in reference:
            return _humaneval_suite(reference)
        if "test_list" in reference:
            return _mbpp_suite(reference)
        if "inputs" not in reference and ("entry_point" in reference or "test" in reference):
            return _humaneval_suite(reference)  # to say which of the two is missing
        return _io_suite(reference)
    if isinstance(reference, Sequence) and reference and all(isinstance(s, str) for s in reference):
        return _assert_suite(reference, "assert test")
    raise ValueError(
        "reference: expected {'inputs': [...], 'outputs': [...]} (optionally with 'fn_name'), "
        "a HumanEval or MBPP row, or a non-empty list of assert statements, "
        f"got {type(reference).__name__}"
    )


def _compile_guard(code: str, prefix: str = "") -> str:
    """Harness lines compiling the program, leaving with EXIT_SYNTAX when it does not compile,
    then running ``prefix`` and the program in the harness's own namespace, named ``solution``.

    The prelude's names reach the program as builtins do, not as its globals: a test calling
    ``gcd`` or ``fn_name="gcd"`` finds the program's own ``gcd`` or none, never ``math.gcd``."""
    return (
        "import sys as _sys\n"
        "try:\n"
        f"    _code = compile({code!r}, 'solution.py', 'exec')\n"
        "except (SyntaxError, ValueError, RecursionError) as _exc:\n"
        "    _sys.excepthook(type(_exc), _exc.with_traceback(None), None)\n"
        f"    raise SystemExit({EXIT_SYNTAX})\n"
        "_ns = globals()\n"
        "_ns['__name__'] = 'solution'\n"
        "_ns['__builtins__'] = dict(vars(__import__('builtins')))\n"
        f"exec({_PRELUDE!r}, _ns['__builtins__'])\n"
        f"exec({prefix!r}, _ns)\n"
        "exec(_code, _ns)\n"
    )


def _call_harness(code: str, fn_name: str, args: tuple[Any, ...], nonce: str) -> str:
    """A call test: plain data (:mod:`rlvr.sandbox.plain`) in, and out after ``nonce``."""
    return _compile_guard(code) + (
        f"_cls = _ns.get('Solution')\n"
        f"if isinstance(_cls, type) and hasattr(_cls, {fn_name!r}):\n"
        f"    _fn = getattr(_cls(), {fn_name!r})\n"
        "else:\n"
        f"    _fn = _ns[{fn_name!r}]\n"
        f"exec({_source(plain)!r}, _plain := {{}})\n"
        f"_out = _fn(*_plain['decode']({plain.encode(list(args))!r}))\n"
        f"_sys.stdout.write('\\n{nonce} ' + _plain['encode'](_out) + '\\n')\n"
    )


def _assert_harness(code: str, suite: TestSuite, statement: str, nonce: str) -> str:
    """An assert test run inside the program's interpreter (``CodeConfig.in_process``)."""
    lines = f"exec({suite.setup!r}, _ns)\n" if suite.setup else ""
    if suite.fn_name is not None:
        lines += f"_ns['candidate'] = _ns[{suite.fn_name!r}]\n"
    lines += f"exec(compile({statement!r}, 'test.py', 'exec'), _ns)\n"
    guard = _compile_guard(code, suite.prefix)
    return guard + lines + f"_sys.stdout.write('\\n{nonce}\\n')\n"


@functools.cache
def _source(module: Any) -> str:
    return Path(module.__file__).read_text(encoding="utf-8")


def _driver(suite: TestSuite, statement: str) -> str:
    """Source of the test driver of one assert test (see :mod:`rlvr.sandbox.driver`)."""
    stubs = {name: name for name in _program_names(statement, suite)}
    if suite.fn_name is not None:
        stubs["candidate"] = suite.fn_name
    used = _names(statement).used | _names(suite.setup).used
    prelude = _PRELUDE if used & _prelude().keys() else ""  # its imports cost time in every run
    return _source(driver) + f"\nrun({prelude!r}, {suite.setup!r}, {statement!r}, {stubs!r})\n"


def _numbers_close(a: str, b: str, cfg: CodeConfig) -> bool:
    """Numeric tokens within the tolerance, compared as decimals (no float rounding, no overflow:
    as floats, ``b = 1e400`` was infinite and any number was within its tolerance); an integer
    ``b`` needs ``a`` to round to it exactly, and one written with leading zeros (``00000101``,
    a fixed width) needs ``a`` written the same."""
    if not (_NUMBER.fullmatch(a) and _NUMBER.fullmatch(b)) or _PADDED.fullmatch(b):
        return False  # for a padded b, the caller compared the texts
    try:
        x, y = Decimal(a), Decimal(b)
        if _INTEGER.fullmatch(b) and x.to_integral_value(ROUND_HALF_EVEN) != y:
            return False
        return abs(x - y) <= Decimal(cfg.abs_tol) + Decimal(cfg.rel_tol) * abs(y)
    except ArithmeticError:  # an exponent beyond what decimals hold
        return False


def _reals_close(a: Any, b: Any, cfg: CodeConfig) -> bool:
    """As :func:`_numbers_close`, for numbers; infinities compare with ``==``, NaN meets NaN."""
    if isinstance(b, int) and isinstance(a, int):
        return a == b
    try:
        x, y = float(a), float(b)
    except (OverflowError, ValueError):  # beyond float range against a float; a signalling NaN
        return False
    if not (math.isfinite(x) and math.isfinite(y)):
        return a == b or (math.isnan(x) and math.isnan(y))
    if isinstance(b, int) and round(a) != b:  # exactly: float(Decimal(10**17 + 3)) is 1e17
        return False
    return abs(x - y) <= cfg.abs_tol + cfg.rel_tol * abs(y)


def stdout_matches(actual: str, expected: str, cfg: CodeConfig = DEFAULT_CODE_CONFIG) -> bool:
    """Whitespace- and numeric-tolerant comparison of a program's stdout with the expected one.

    >>> stdout_matches("1 2\\n\\n3.0000001  \\n", "1  2\\n3\\n")
    True
    >>> stdout_matches("1 2 3\\n", "1 2\\n3\\n")
    False
    """
    got = [line.split() for line in actual.splitlines() if line.strip()]
    want = [line.split() for line in expected.splitlines() if line.strip()]
    if [len(g) for g in got] != [len(w) for w in want]:  # as many lines, as many tokens in each
        return False
    tokens = zip(chain.from_iterable(got), chain.from_iterable(want), strict=True)
    return all(s == t or _numbers_close(s, t, cfg) for s, t in tokens)


def _normalise(value: Any) -> Any:
    """Tuples as lists, dict keys as strings: how a value looks after a JSON round trip."""
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _normalise(v) for k, v in value.items()}
    return value


def _is_real(x: Any) -> bool:
    return isinstance(x, (int, float, Fraction, Decimal)) and not isinstance(x, bool)


def values_match(actual: Any, expected: Any, cfg: CodeConfig = DEFAULT_CODE_CONFIG) -> bool:
    """Equality of normalised values, numbers (not booleans) within the tolerance.

    >>> values_match((1, [2.0000000001]), [1, [2]])
    True
    >>> values_match({1: "a"}, {"1": "a"})
    True
    """
    a, b = _normalise(actual), _normalise(expected)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(values_match(x, y, cfg) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(values_match(a[k], b[k], cfg) for k in a)
    if _is_real(a) and _is_real(b):
        return _reals_close(a, b, cfg)
    return bool(a == b)


def _returned_value(stdout: str, nonce: str) -> tuple[bool, Any]:
    """(found, value) of the harness's result line, plain data (exact builtin types)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(nonce + " "):
            try:
                return True, plain.decode(line[len(nonce) + 1 :])
            except plain.NotPlain:
                break
    return False, None


@functools.cache
def _prelude() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(_PRELUDE, namespace)  # standard-library imports only
    return namespace


@functools.cache
def _prelude_fixed() -> frozenset[str]:
    """Prelude names that are always the test's: modules and values (``math``, ``inf``)."""
    return frozenset(k for k, v in _prelude().items() if not callable(v))


def _imported(nodes: Iterable[ast.AST]) -> set[str]:
    imports = [n for n in nodes if isinstance(n, (ast.Import, ast.ImportFrom))]
    return {(a.asname or a.name).split(".")[0] for node in imports for a in node.names}


def _stored(nodes: Iterable[ast.AST]) -> set[str]:
    return {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


@dataclass(frozen=True)
class _Names:
    """What a piece of test code does with names (nothing when it does not parse)."""

    top: frozenset[str] = frozenset()  # bound at its top level, imports included
    used: frozenset[str] = frozenset()  # every name it mentions
    free: frozenset[str] = frozenset()  # read, never bound (assign, parameter, def, class, import)
    bound: frozenset[str] = frozenset()  # bound anywhere, a ``def`` under ``if`` too


@functools.lru_cache(maxsize=4096)
def _names(source: str) -> _Names:
    """
    >>> n = _names("import math as m\\ndef f(x): return g(x)\\ny, (z, w) = 1, (2, 3)")
    >>> sorted(n.top), sorted(n.free)
    (['f', 'm', 'w', 'y', 'z'], ['g'])
    """
    try:
        module = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _Names()
    top = _imported(module.body) | {n.name for n in module.body if isinstance(n, _DEFS)}
    top |= _stored(n for s in module.body if not isinstance(s, _DEFS) for n in ast.walk(s))
    nodes = list(ast.walk(module))
    names = [n for n in nodes if isinstance(n, ast.Name)]
    bound = {n.id for n in names if not isinstance(n.ctx, ast.Load)} | _imported(nodes)
    bound |= {n.arg for n in nodes if isinstance(n, ast.arg)}
    bound |= {n.name for n in nodes if isinstance(n, _DEFS)}
    loaded = {n.id for n in names if isinstance(n.ctx, ast.Load)}
    used = frozenset(n.id for n in names)
    return _Names(frozenset(top), used, frozenset(loaded - bound), frozenset(bound))


@functools.lru_cache(maxsize=4096)
def _program_names(statement: str, suite: TestSuite) -> tuple[str, ...]:
    """Names a test uses that must be the program's: read by the test and its set-up, bound by
    neither, and not a builtin or one of the prelude's (``sqrt``, ``Counter``) unless the test
    uses nothing else: then the prelude's functions and classes are the program's (``assert
    gcd(4, 6) == 2`` tests the program's ``gcd``, not ``math.gcd``), else its builtins
    (``assert sorted([3, 1]) == [1, 3]``). The prelude's modules and values never are.

    >>> _program_names("for x in range(3): assert f(x) == abs(g(x))", TestSuite("assert", (), ()))
    ('f', 'g')
    >>> _program_names("assert gcd(4, 6) == max(2, 1)", TestSuite("assert", (), ()))
    ('gcd',)
    """
    test, own = _read_and_own(statement, suite)
    names = own or _read_by_every_test((test & _prelude().keys()) or test, suite)
    return tuple(sorted(names - {"candidate"}))


def _read_and_own(statement: str, suite: TestSuite) -> tuple[frozenset[str], frozenset[str]]:
    """The names a test reads that neither it nor its set-up binds, and those of them (and of
    the set-up's, when the test reads a name the set-up binds) that are no builtin's and not
    the prelude's."""
    setup = _names(suite.setup)
    read = _names(statement).free
    test = read - setup.top - _prelude_fixed()
    free = (test | (setup.free if read & setup.bound else frozenset())) - _prelude_fixed()
    return test, free - _BUILTINS - _prelude().keys()


def _read_by_every_test(names: frozenset[str], suite: TestSuite) -> frozenset[str]:
    """The one of ``names`` (builtins' or the prelude's) that every test of ``suite`` reading
    only such names reads; none when not exactly one, and the test then pays nothing. A task
    named ``max`` is tested through ``max``; were ``len`` in ``assert max(x) == len(x)`` the
    program's too, a program defining both would compute both sides.

    >>> tests = ("assert max([1, 2]) == len([1, 2])", "assert max([3]) == 3")
    >>> sorted(_read_by_every_test(frozenset({"max", "len"}), TestSuite("assert", tests, ())))
    ['max']
    """
    read = [_read_and_own(t, suite) for t in suite.inputs]
    shared = names.intersection(*(test for test, own in read if test and not own))
    return shared if len(shared) == 1 else frozenset()


def _judge(
    suite: TestSuite, index: int, result: SandboxResult, nonce: str, cfg: CodeConfig
) -> bool:
    if suite.style == "assert" and result.report:
        return result.ok and result.report.splitlines() == ["pass"]
    if not result.ok:
        return False
    if suite.style == "stdio":
        return stdout_matches(result.stdout, suite.outputs[index], cfg)
    if suite.style == "assert":  # run in the program's interpreter (CodeConfig.in_process)
        return nonce in result.stdout.splitlines()
    found, value = _returned_value(result.stdout, nonce)
    expected = suite.outputs[index]
    if not found:
        return False
    # APPS wraps a return value in a one-element list; a longer list is the value itself.
    wrapped = [expected[0]] if isinstance(expected, list) and len(expected) == 1 else []
    try:  # a value that cannot be compared (Decimal('sNaN') == True raises) fails the test
        return any(values_match(value, e, cfg) for e in [expected, *wrapped])
    except (ValueError, ArithmeticError):  # ValueError: str() of a 5000-digit dict key
        return False


class _Outcome(NamedTuple):
    """One test's result; ``how`` an assert test ran: ``judged``, ``unsupported``, ``in_process``."""

    passed: bool
    status: str
    how: str


class _Run:
    """One program's tests: their sandbox runs, the deadline and the early stop."""

    def __init__(self, code: str, suite: TestSuite, cfg: CodeConfig, soft: bool) -> None:
        self.code, self.suite, self.cfg, self.soft = code, suite, cfg, soft
        self.deadline = time.monotonic() + cfg.total_time_s
        self.stop = threading.Event()

    def _job(self, index: int, nonce: str, in_process: bool) -> dict[str, Any]:
        """:func:`run_untrusted`'s program, and stdin or driver, for one test."""
        code, suite, test = self.code, self.suite, self.suite.inputs[index]
        if suite.style == "stdio":
            return {"source": code, "stdin": test}
        if suite.style == "call":
            assert suite.fn_name is not None
            return {"source": _call_harness(code, suite.fn_name, test, nonce)}
        if in_process:  # else a driver judges the assert test
            return {"source": _assert_harness(code, suite, test, nonce)}
        return {"source": _compile_guard(code, suite.prefix), "driver": _driver(suite, test)}

    def _sandboxed(self, index: int, nonce: str, in_process: bool) -> SandboxResult | None:
        remaining = self.deadline - time.monotonic()
        if self.stop.is_set() or remaining <= 0:
            return None
        job = self._job(index, nonce, in_process)
        limits = replace(self.cfg.limits, wall_time_s=min(self.cfg.limits.wall_time_s, remaining))
        result = run_untrusted(**job, limits=limits, policy=self.cfg.policy)
        if result.status is SandboxStatus.SANDBOX_ERROR:
            self.stop.set()
            raise SandboxError(f"sandbox failed to run a test: {result.stderr.strip()[-500:]}")
        return result

    def test(self, index: int) -> _Outcome:
        nonce = secrets.token_hex(16)
        result = self._sandboxed(index, nonce, in_process=False)
        how = "judged" if self.suite.style == "assert" else ""
        # The driver could not judge the test: the program's answer does not cross the channel.
        if result is not None and how and "\nunsupported" in "\n" + result.report:
            how = "unsupported"
            if self.cfg.in_process:
                how, result = "in_process", self._sandboxed(index, nonce, in_process=True)
        if result is None:
            return _Outcome(False, SKIPPED, how)
        if how and result.report.startswith("setup "):  # no program could pass: not a score
            self.stop.set()
            raise ValueError(
                f"reference: the test's set-up fails in the sandbox ({result.report[6:].strip()}; "
                "it has Python's standard library only)"
            )
        passed = how != "unsupported" and _judge(self.suite, index, result, nonce, self.cfg)
        if result.status is SandboxStatus.SYNTAX_ERROR or not (passed or self.soft):
            self.stop.set()
        return _Outcome(passed, result.status.value, how)


def run_tests(
    code: str, reference: Any, *, soft: bool = True, config: CodeConfig = DEFAULT_CODE_CONFIG
) -> CodeVerdict:
    """Run ``code`` against every test of ``reference``, in parallel, within the time budget.

    A program that does not compile, or with ``soft=False`` the first failure, stops the tests
    not yet started. Raises :class:`SandboxError` when the sandbox itself cannot run,
    ``ValueError`` for a malformed reference.
    """
    suite = parse_reference(reference)
    if suite.prompt and suite.fn_name not in _names(code).top:
        code = suite.prompt + code  # the body of the prompt's function, in HumanEval's way
    run = _Run(code, suite, config, soft)
    workers = max(1, min(config.workers or len(os.sched_getaffinity(0)), len(suite)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        passed, statuses, hows = zip(*pool.map(run.test, range(len(suite))), strict=True)
    return CodeVerdict(
        passed,
        statuses,
        judged=hows.count("judged"),
        in_process=hows.count("in_process"),
        unsupported=hows.count("unsupported"),
    )


def code_verifier(
    completion: str, reference: Any, *, soft: bool = True, config: CodeConfig = DEFAULT_CODE_CONFIG
) -> float:
    """Reward of a completion's program: its test pass rate, or all-or-nothing with ``soft=False``.

    >>> code_verifier("```python\\nprint(int(input()) * 2)\\n```", {"inputs": ["2", "5"], "outputs": ["4", "11"]})
    0.5
    >>> code_verifier("def add(a, b):\\n    return a + b", {"fn_name": "add", "inputs": [[1, 2]], "outputs": [[3]]})
    1.0
    >>> code_verifier("def add(a, b):\\n    return a - b", ["assert add(1, 2) == 3", "assert add(2, 0) == 2"])
    0.5
    >>> code_verifier("def add(a, b):\\n    return a - b", ["assert add(1, 2) == 3", "assert add(2, 0) == 2"], soft=False)
    0.0
    """
    try:
        verdict = run_tests(extract_code(completion), reference, soft=soft, config=config)
    except SandboxError:
        record("sandbox_errors")  # the sandbox's fault, not the program's: counted apart
        raise
    record("asserts_judged", verdict.judged)
    record("asserts_in_process", verdict.in_process)
    record("asserts_unsupported", verdict.unsupported)
    return verdict.score(soft)


CODE_MODES = ("soft", "binary")


def _check_options(*, mode: str, **_: Any) -> None:
    """Refuse a bad mode when the verifier is built (the registry calls this)."""
    if mode not in CODE_MODES:
        raise ValueError(f"code verifier mode must be one of {CODE_MODES}, got {mode!r}")


@register("code", spec_arg="mode", check=_check_options, sandboxed=True)
def code_reward(
    completion: str, reference: Any, *, mode: str = "soft", correct: float = 1.0, wrong: float = 0.0
) -> float:
    """The registered ``code`` verifier: the pass rate (Klear's soft reward) or, as ``code:binary``,
    all-or-nothing, mapped onto ``[wrong, correct]``; with ``wrong=-1`` Klear's +1/-1 hard reward.

    >>> ref = {"inputs": ["2", "5"], "outputs": ["4", "11"]}
    >>> code_reward("print(int(input()) * 2)", ref, wrong=-1.0)
    0.0
    >>> code_reward("print(int(input()) * 2)", ref, mode="binary", wrong=-1.0)
    -1.0
    """
    _check_options(mode=mode)
    rate = code_verifier(completion, reference, soft=mode == "soft")
    return wrong + (correct - wrong) * rate
