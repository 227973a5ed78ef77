"""The module docstrings' examples run, and docs/objectives.md covers every objective."""

import doctest
from pathlib import Path

import rlvr.advantages
import rlvr.objectives
from rlvr.objectives import OBJECTIVES, objective_spec

DOC = Path(__file__).resolve().parents[2] / "docs" / "objectives.md"


def test_doctests():
    for module in (rlvr.objectives, rlvr.advantages):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_docs_table_has_a_row_per_objective_with_its_module():
    rows = [line for line in DOC.read_text().splitlines() if line.startswith("| `")]
    for name in OBJECTIVES:
        row = next((r for r in rows if r.startswith(f"| `{name}`")), None)
        assert row is not None, f"docs/objectives.md has no row for {name}"
        module = objective_spec(name).loss_fn.__module__.replace(".", "/")
        assert f"src/{module}.py" in row, f"row for {name} does not cite src/{module}.py"
