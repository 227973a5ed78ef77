"""Fixtures shared by the engine adapters' tests (TRL here, verl in its own environment)."""

from __future__ import annotations

import importlib
import sys

import pytest


@pytest.fixture
def import_without(monkeypatch):
    """``import_without("trl")``: import ``rlvr.engines.trl`` afresh where ``import trl`` fails."""

    def load(engine: str):
        adapter = f"rlvr.engines.{engine}"
        for name in [
            m for m in sys.modules if m == engine or m.startswith((engine + ".", adapter))
        ]:
            monkeypatch.delitem(sys.modules, name)
        monkeypatch.setitem(sys.modules, engine, None)  # import ENGINE -> ModuleNotFoundError
        return importlib.import_module(adapter)

    return load
