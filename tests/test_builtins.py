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


def test_an_own_module_that_does_not_parse_is_one_line_naming_its_file(tmp_path, monkeypatch):
    """A syntax error in your own objective or verifier module printed Python's traceback
    through importlib's frames; it is a ``ValueError`` naming the file and line (the CLI's one
    line), the ``SyntaxError`` chained for ``--debug``."""
    import pytest

    from rlvr.objectives.registry import objective_spec
    from rlvr.rewards.registry import get_verifier

    tag = tmp_path.name.replace("-", "_")
    (tmp_path / f"broken_{tag}.py").write_text("x = 1\ndef mine(batch config):\n    pass\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in sys.path if p not in ("", ".")])
    for lookup in (objective_spec, get_verifier):
        with pytest.raises(ValueError, match=rf"module 'broken_{tag}' does not parse: ") as caught:
            lookup(f"broken_{tag}.mine")
        assert f"broken_{tag}.py, line 2)" in str(caught.value)
        assert isinstance(caught.value.__cause__, SyntaxError)


def test_an_own_module_that_raises_on_import_is_one_line_naming_its_file(tmp_path, monkeypatch):
    """A verifier or objective module whose code raised while imported (a missing package, a
    bad constant) printed Python's traceback; it is a ``ValueError`` naming the module, the
    error and the line that raised, the error chained for ``--debug``."""
    import pytest

    from rlvr.objectives.registry import objective_spec
    from rlvr.rewards.registry import get_verifier

    tag = tmp_path.name.replace("-", "_")
    body = "x = 1\nraise RuntimeError('no weights here')\n"
    (tmp_path / f"raising_{tag}.py").write_text(body)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in sys.path if p not in ("", ".")])
    for lookup in (objective_spec, get_verifier):
        sys.modules.pop(f"raising_{tag}", None)
        with pytest.raises(
            ValueError, match=rf"module 'raising_{tag}' failed to import: "
        ) as caught:
            lookup(f"raising_{tag}.mine")
        message = str(caught.value)
        assert "RuntimeError: no weights here" in message
        assert f"raising_{tag}.py, line 2)" in message
        assert "\n" not in message
        assert isinstance(caught.value.__cause__, RuntimeError)
