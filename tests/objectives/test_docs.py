"""The module docstrings' examples run, and docs/objectives.md covers every objective."""

import doctest
import re
from pathlib import Path

import pytest

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


def test_the_own_objective_example_runs_as_the_docs_say(tmp_path, monkeypatch):
    """docs/objectives.md's objective of your own, pasted into my_objectives.py, is reached as
    `my_objectives.wide_q4` from a configuration, a contrast and policy_loss, with the value
    worked by hand: row 0 (A = 1) clamps [1.5, 0.5, 1.1] to [1.2, 0.8, 1.1], row 1 (A = -1,
    q4 = 0.3) [1.4, 0.7, 1.2] to [1.3, 0.8, 1.2]: (-3.1/3 + 3.3/3) / 2 = 1/30."""
    import re
    import sys

    import torch

    from rlvr.objectives import ObjectiveConfig, policy_loss, registry
    from rlvr.objectives.contrast import parse_contrast
    from rlvr.train.config import TrainConfig
    from rlvr.train.overrides import load_config

    section = DOC.read_text().split("## An objective of your own", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    (tmp_path / "my_objectives.py").write_text(code)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in sys.path if p not in ("", ".")])
    monkeypatch.setattr(registry, "OBJECTIVES", dict(registry.OBJECTIVES))
    monkeypatch.delitem(sys.modules, "my_objectives", raising=False)
    cfg = load_config(
        TrainConfig, "demo", ["objective.name=my_objectives.wide_q4", "objective.q4=0.3"]
    )
    assert cfg.objective.params.q4 == 0.3 and cfg.objective.advantage_mode == "group_mean"
    contrast = parse_contrast("my_objectives.wide_q4:q4=0.4", ObjectiveConfig())
    assert contrast.objective.params.q4 == 0.4
    ratio = torch.tensor([[1.5, 0.5, 1.1], [1.4, 0.7, 1.2]], dtype=torch.float64)
    loss, metrics = policy_loss(
        "my_objectives.wide_q4", logp=ratio.log(), old_logp=torch.zeros_like(ratio),
        advantages=torch.tensor([1.0, -1.0], dtype=torch.float64),
        mask=torch.ones(2, 3, dtype=torch.bool), q4=0.3, validate=True,
    )  # fmt: skip
    assert torch.isclose(loss, torch.tensor(1 / 30, dtype=torch.float64), atol=1e-12)
    assert float(metrics["wide_q4/capped_frac"]) == pytest.approx(1 / 6)
    assert float(metrics["clip/frac"]) == pytest.approx(4 / 6)  # both bounds in both rows
    monkeypatch.delitem(sys.modules, "my_objectives")


def _row_defaults(cell: str, rows: dict[str, list[str]]) -> dict[str, object]:
    """The hyperparameter defaults a row's defaults cell gives: ``a = b = 0.2`` sets both,
    ``rest as `pmpo``` takes the named row's for those it does not set."""
    import ast

    out: dict[str, object] = {}
    inherited: dict[str, object] = {}
    for span in re.findall(r"`([^`]+)`", cell):
        if "=" not in span:
            if span in rows and "rest as" in cell:
                inherited = _row_defaults(rows[span][3], rows)
            continue
        for item in re.split(r",\s*(?=[a-z_]\w*\s*=)", span):
            *names, value = (part.strip() for part in item.split("="))
            text = {"false": "False", "true": "True"}.get(value, value)
            for name in names:
                out[name] = ast.literal_eval(text)
    return {**inherited, **out}


def test_each_rows_defaults_and_modes_are_the_objectives():
    """docs/objectives.md's table: each objective's row names every hyperparameter with its
    default (a dual clip's ``clip_c`` included), and its advantage and aggregation modes."""
    import dataclasses

    table = DOC.read_text().split("## The objectives", 1)[1]
    rows = {
        cells[0].strip("` "): cells
        for line in table.splitlines()
        if line.startswith("| `")
        for cells in [[c.strip() for c in line.strip("|").split("|")]]
        if len(cells) == 8  # the table of objectives (name ... departures)
    }
    wrong = []
    for name in OBJECTIVES:
        spec = objective_spec(name)
        stated = _row_defaults(rows[name][3], rows)
        for f in dataclasses.fields(spec.config_cls):
            if f.name not in stated:
                wrong.append(f"{name}: {f.name} not in its row")
            elif stated[f.name] != f.default:
                wrong.append(f"{name}: {f.name} = {stated[f.name]!r}, default {f.default!r}")
        modes = re.findall(r"`([^`]+)`", rows[name][4])
        if modes != [spec.advantage_mode, spec.loss_agg]:
            wrong.append(f"{name}: modes {modes}, code {[spec.advantage_mode, spec.loss_agg]}")
    assert wrong == []
