"""Registries whose built-in entries are found by name: import a module only when its name is asked for.

Verifiers, samplers and model presets share this: each registry keeps a mapping from
built-in names to the module that registers them, so ``import rlvr.rewards`` stays cheap,
an optional backend costs nothing until asked for, and a preset whose build needs the
trainer is reached without the models layer importing it.

>>> registered = {}
>>> available(registered, {"json": "json", "gone": "no.such.module"})
['json']
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping


def module_exists(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def load_builtin(name: str, registered: Mapping[str, object], builtins: Mapping[str, str]) -> None:
    """Import the module that registers ``name`` when it is built in and not registered yet."""
    module = builtins.get(name)
    if name not in registered and module is not None and module_exists(module):
        importlib.import_module(module)


def available(registered: Iterable[str], builtins: Mapping[str, str]) -> list[str]:
    """The registered names and the built-in ones whose module is present, sorted."""
    return sorted(set(registered) | {n for n, m in builtins.items() if module_exists(m)})


def import_own(module: str) -> bool:
    """Import the user's ``module`` from ``PYTHONPATH`` or, as ``python -m`` would find it, the
    working directory (which then stays on ``sys.path``, for worker processes to inherit);
    False when there is no such module. A file that does not parse, or whose code raises while
    it is imported, raises ``ValueError`` naming the file and line (the error chained)."""
    if not module_exists(module) and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
        importlib.invalidate_caches()
    if not module_exists(module):
        return False
    try:
        importlib.import_module(module)
    except SyntaxError as err:  # the user's file: where, in one line (--debug shows the rest)
        where = f"{err.filename}, line {err.lineno}" if err.filename else f"line {err.lineno}"
        raise ValueError(f"module {module!r} does not parse: {err.msg} ({where})") from err
    except Exception as err:  # its own code failed: the error and the line it came from
        frame = traceback.extract_tb(err.__traceback__)[-1]
        raise ValueError(
            f"module {module!r} failed to import: {type(err).__name__}: {err} "
            f"({frame.filename}, line {frame.lineno})"
        ) from err
    return True


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``" (did you mean X?)"`` for the choice ``name`` is a likely typo of, else ``""``.

    >>> did_you_mean("abc_grp", ["grpo", "abc_grpo"]), did_you_mean("zzz", ["grpo"])
    (' (did you mean abc_grpo?)', '')
    """
    near = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean {near[0]}?)" if near else ""


def origin(fn: Callable) -> str:
    """``module.qualname`` of ``fn``, with the line of a lambda (every lambda is ``<lambda>``)."""
    name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}"
    code = getattr(fn, "__code__", None)
    return f"{name}:{code.co_firstlineno}" if "<lambda>" in name and code else name


def same_function(a: Callable, b: Callable) -> bool:
    """Whether ``a`` and ``b`` are one definition (a registry refuses another function under a
    taken name): the same file, line and qualname, so a module reloaded, or one file imported
    under two module names, is the same; without code objects, the same :func:`origin`."""
    code_a, code_b = getattr(a, "__code__", None), getattr(b, "__code__", None)
    if code_a is None or code_b is None:
        return origin(a) == origin(b)
    where = (code_a.co_filename, code_a.co_firstlineno, getattr(a, "__qualname__", ""))
    return where == (code_b.co_filename, code_b.co_firstlineno, getattr(b, "__qualname__", ""))
