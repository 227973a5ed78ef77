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
from collections.abc import Iterable, Mapping


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
    False when there is no such module."""
    if not module_exists(module) and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
        importlib.invalidate_caches()
    if not module_exists(module):
        return False
    importlib.import_module(module)
    return True


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``" (did you mean X?)"`` for the choice ``name`` is a likely typo of, else ``""``.

    >>> did_you_mean("abc_grp", ["grpo", "abc_grpo"]), did_you_mean("zzz", ["grpo"])
    (' (did you mean abc_grpo?)', '')
    """
    near = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean {near[0]}?)" if near else ""
