"""The progress of a study: plain lines and the live table name each run's regime."""

import io

from rich.console import Console

from rlvr.compare import load_study, plan
from rlvr.compare.progress import StudyDisplay
from rlvr.compare.runner import RunState


def _states(tmp_path) -> list[RunState]:
    path = tmp_path / "s.yaml"
    path.write_text(
        "include: [abc]\nseeds: [0]\n"
        "regimes: {paper: {}, off-policy: {rollout: {minibatches: 16}}}\n"
    )
    return [RunState(spec) for spec in plan(load_study(str(path)), tmp_path / "runs")]


def test_plain_lines_name_the_regime(tmp_path, capsys):
    """ "abc/grpo seed 0 [off-policy]" printed as "abc/grpo seed 0": rich read the regime in
    brackets as a style tag and dropped it, so the two regimes' runs read the same."""
    states = _states(tmp_path)
    display = StudyDisplay(states, live=False)
    display.event(states[-1], "started")
    display.last_plain = 0.0
    states[-1].status = "running"
    display.refresh(states)
    states[-1].status = "finished"
    display.last_plain = 0.0
    display.refresh(states)  # between two runs: it ended "running: " with nothing after
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "4 runs: 0 finished earlier (reused), 0 to resume, 4 to start"
    assert err[3] == "1/4 runs finished; running: none"
    assert err[1].split() == ["abc/abc_grpo", "seed", "0", "[off-policy]", "started"]
    assert err[2] == "0/4 runs finished; running: abc/abc_grpo seed 0 [off-policy] step 0/30"


def test_plain_lines_say_first_which_runs_are_reused(tmp_path, capsys):
    """A second `rlvr compare` of a finished study printed only its verdicts: nothing said
    that its runs were reused, not made again."""
    states = _states(tmp_path)
    states[0].status = "done"
    states[1].resumed = True
    StudyDisplay(states, live=False)
    err = capsys.readouterr().err.splitlines()
    assert err == ["4 runs: 1 finished earlier (reused), 1 to resume, 2 to start"]


def test_the_live_table_has_a_regime_column(tmp_path):
    """The table had arm and seed only: a study with regimes showed each arm x seed twice,
    with nothing to tell the rows apart."""
    states = _states(tmp_path)
    display = StudyDisplay(states, live=False)
    console = Console(file=io.StringIO(), width=120)
    console.print(display._table(states))
    rows = [line.split() for line in console.file.getvalue().splitlines() if "seed" not in line]
    cells = [[c for c in row if c not in ("│", "┃")] for row in rows]
    assert ["abc/grpo", "paper", "0", "queued", "0/30"] in cells
    assert ["abc/grpo", "off-policy", "0", "queued", "0/30"] in cells
