"""The progress of ``rlvr eval`` and ``rlvr data filter`` off a terminal: a line per tenth."""

from __future__ import annotations

from rlvr.cli.common import progress_bar


def test_off_a_terminal_progress_is_a_line_at_each_tenth_on_stderr(capsys):
    with progress_bar("eval", "problems") as progress:
        for done in (0, 2, 8, 9, 16, 24, 25):
            progress(done, 25)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "eval: 8/25 problems",  # 2/25 is still the first tenth; 9/25 the same as 8/25
        "eval: 16/25 problems",
        "eval: 24/25 problems",
        "eval: 25/25 problems",
    ]


def test_rlvr_eval_says_how_far_sampling_came(tiny_model_dir, tmp_path, capsys):
    """`rlvr eval` said nothing until its table (a long evaluation looked hung)."""
    import json

    from rlvr.cli.eval import main

    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{i} + 1 =", "answer": str(i + 1)}) + "\n" for i in range(4)))  # fmt: skip
    argv = ["--model", str(tiny_model_dir), "--data", str(data), "-n", "1", "--max-tokens", "2"]
    assert main([*argv, "--batch-size", "2", "--output", str(tmp_path / "e.json")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if line.startswith("eval: ")] == [
        "eval: 2/4 problems",
        "eval: 4/4 problems",
    ]
