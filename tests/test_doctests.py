"""Run the doctest examples of every package and top-level module (the verl adapter's run in
the verl environment's tests)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

PACKAGES = [
    "rlvr.rewards",
    "rlvr.sandbox",
    "rlvr.data",
    "rlvr.evaluation",
    "rlvr.cli",
    "rlvr.generation",
    "rlvr.objectives",
    "rlvr.compare",
    "rlvr.train",
    "rlvr.models",
]
MODULES = ["rlvr.bundled", "rlvr.dotted"]  # rlvr.advantages and rlvr.builtins: their own tests


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        module = importlib.import_module(package)
        names += [f"{package}.{info.name}" for info in pkgutil.iter_modules(module.__path__)]
    return sorted(names + MODULES)


@pytest.mark.parametrize("name", _modules())
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_every_verifier_module_has_examples():
    for name in [
        "rlvr.rewards.math",
        "rlvr.rewards.format",
        "rlvr.rewards.reasoning_gym",
        "rlvr.rewards.extract",
    ]:
        assert doctest.testmod(importlib.import_module(name)).attempted > 0, name
