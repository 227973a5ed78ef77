"""``rlvr`` with no command, ``--help`` and ``--version``."""

from __future__ import annotations

import pytest

from rlvr import __version__
from rlvr.cli import main as rlvr


@pytest.mark.parametrize("argv", [[], ["--help"], ["help"]])
def test_the_usage_names_the_first_command_and_the_version_option(capsys, argv):
    """It listed the commands only: neither which one to run first nor that --version exists."""
    assert rlvr(argv) == 0
    out = capsys.readouterr().out
    assert "rlvr --version" in out
    assert "Start with 'rlvr train': the demo" in out
    assert all(f"  {name} " in out for name in ("train", "sft", "eval", "compare"))


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_prints_the_package_version(capsys, flag):
    assert rlvr([flag]) == 0
    assert capsys.readouterr().out == f"rlvr {__version__}\n"
