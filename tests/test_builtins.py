"""Built-in registry entries are imported only when their name is asked for."""

import doctest
import sys

import rlvr.builtins as builtins


def test_doctests():
    assert doctest.testmod(builtins).failed == 0


def test_load_builtin_imports_only_unregistered_present_modules(monkeypatch):
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    table = {"colours": "colorsys", "gone": "no.such.module"}
    builtins.load_builtin("colours", {"colours": object()}, table)  # registered already
    assert "colorsys" not in sys.modules
    builtins.load_builtin("gone", {}, table)  # absent module: nothing happens
    builtins.load_builtin("colours", {}, table)
    assert "colorsys" in sys.modules
    assert builtins.available(["mine"], table) == ["colours", "mine"]
