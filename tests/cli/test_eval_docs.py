"""docs/evaluation.md's `rlvr eval` table names every option the command takes."""

from pathlib import Path

from rlvr.cli.eval import _parser

DOC = (Path(__file__).resolve().parents[2] / "docs" / "evaluation.md").read_text()


def test_every_eval_option_is_in_the_docs_table():
    table = DOC.split("| option | meaning |", 1)[1].split("\n\n", 1)[0]
    options = [
        flag
        for action in _parser()._actions
        for flag in action.option_strings
        if flag.startswith("--") and flag != "--help"
    ]
    missing = [flag for flag in options if f"`{flag}" not in table]
    assert not missing, f"docs/evaluation.md's option table lacks {missing}"
