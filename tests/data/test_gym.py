"""reasoning-gym task sets written to JSONL with a seed, and the `rlvr data` command."""

from __future__ import annotations

import json

import pytest

from rlvr.cli.data import main
from rlvr.data import gym_rows, load_examples, questions_in, write_jsonl
from rlvr.data.gym import check_gym_config


def test_rows_are_reproducible_and_unique():
    a = gym_rows("chain_sum", size=20, seed=5, config={"max_terms": 2, "max_digits": 1})
    b = gym_rows("chain_sum", size=20, seed=5, config={"max_terms": 2, "max_digits": 1})
    assert a == b
    assert len({r["question"] for r in a}) == 20
    assert all(r["metadata"]["num_terms"] == 2 for r in a)
    assert a[0]["id"] == "chain_sum-5-0"


def test_exclude_keeps_sets_disjoint():
    train = gym_rows("basic_arithmetic", size=30, seed=0)
    test = gym_rows("basic_arithmetic", size=30, seed=1, exclude={r["question"] for r in train})
    assert not {r["question"] for r in train} & {r["question"] for r in test}


def test_small_spaces_run_out_with_a_clear_error():
    with pytest.raises(ValueError, match="gave only .* unique questions"):
        gym_rows(
            "chain_sum",
            size=500,
            seed=0,
            config={"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1},
        )


def test_bad_task_and_config():
    with pytest.raises(ValueError, match="unknown reasoning-gym task 'chainsum'"):
        gym_rows("chainsum", size=1, seed=0)
    with pytest.raises(ValueError, match=r"no config field\(s\) \['terms'\].*max_terms"):
        gym_rows("chain_sum", size=1, seed=0, config={"terms": 3})
    with pytest.raises(ValueError, match="invalid config"):
        gym_rows("chain_sum", size=1, seed=0, config={"min_terms": 5, "max_terms": 2})


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ({"min_terms": "ten"}, "config field min_terms must be a whole number, got 'ten'"),
        ({"min_terms": None}, "config field min_terms must be a whole number, got None"),
        ({"allow_negation": 1}, "config field allow_negation must be true or false, got 1"),
    ],
)
def test_a_config_value_of_the_wrong_type_is_named(tmp_path, capsys, config, said):
    """``--set min_terms=ten`` reached reasoning-gym's own checks, whose ``assert`` raised a
    ``TypeError`` (comparing 'ten' with 0): a traceback naming no field."""
    with pytest.raises(ValueError, match=f"task 'chain_sum': {said}"):
        gym_rows("chain_sum", size=1, seed=0, config=config)
    (name, value), out = next(iter(config.items())), tmp_path / "x.jsonl"
    argv = ["gen", "chain_sum", "-o", str(out), "--set", f"{name}={json.dumps(value)}"]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("rlvr: error: ") and said in line and not out.exists()


def test_a_config_value_of_the_fields_type_passes():
    """Optional fields take null, float fields whole numbers; the defaults of every task pass."""
    rows = gym_rows("chain_sum", size=2, seed=0, config={"max_terms": 3, "allow_negation": False})
    assert len(rows) == 2
    check_gym_config("basic_arithmetic", {"whitespace": "single"})
    check_gym_config("binary_matrix", {"p_zero": 1})  # a float field given a whole number


def test_round_trip_through_jsonl(tmp_path):
    rows = gym_rows("countdown", size=3, seed=2)
    path = tmp_path / "cd.jsonl"
    assert write_jsonl(rows, path) == 3
    examples = load_examples(str(path), fields="reasoning_gym")
    assert [e.reference for e in examples] == json.loads(json.dumps(rows))  # tuples become lists
    assert [e.prompt for e in examples] == [r["question"] for r in rows]
    assert questions_in([path]) == {r["question"] for r in rows}


def test_a_write_that_fails_part_way_leaves_the_earlier_file(tmp_path):
    """A full disk (here: rows that fail part way) left a file cut short, which a later run
    read as a smaller data set without a word; the earlier file now stays as it was."""
    path = tmp_path / "cd.jsonl"
    write_jsonl([{"question": "old"}], path)

    def rows():
        yield {"question": "q1"}
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        write_jsonl(rows(), path)
    assert path.read_text() == '{"question": "old"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cd.jsonl"]


def test_cli_gen_tasks_and_show(tmp_path, capsys):
    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    assert (
        main(
            [
                "gen",
                "chain_sum",
                "--size",
                "6",
                "--seed",
                "0",
                "-o",
                str(train),
                "--set",
                "max_terms=2",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "gen",
                "chain_sum",
                "--size",
                "6",
                "--seed",
                "1",
                "-o",
                str(test),
                "--exclude",
                str(train),
                "--set",
                "max_terms=2",
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in test.read_text().splitlines()]
    assert len(rows) == 6 and not questions_in([train]) & {r["question"] for r in rows}
    assert main(["tasks"]) == 0
    assert "chain_sum" in capsys.readouterr().out.split()
    assert main(["show", str(test), "--fields", "reasoning_gym", "--limit", "2"]) == 0
    shown = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [s["id"] for s in shown] == [r["id"] for r in rows[:2]]


def test_cli_reports_bad_input(tmp_path, capsys):
    assert main(["gen", "chain_sum", "-o", str(tmp_path / "x.jsonl"), "--set", "oops"]) == 2
    assert "key=value" in capsys.readouterr().err
    assert main(["gen", "chain_sum", "-o", str(tmp_path / "x.jsonl"), "--set", "a=@3"]) == 2
    (line,) = capsys.readouterr().err.splitlines()  # was a yaml traceback
    assert line.startswith("rlvr: error: --set 'a=@3': value is not valid YAML")


@pytest.mark.parametrize(
    ("output", "said"),
    [
        (
            "rows.parquet",
            "unsupported file type '.parquet' (rows are written as JSON lines); name a .jsonl file",
        ),
        ("rows.txt", "unsupported file type '.txt'"),
        ("folder", "is a directory; name a .jsonl file"),
        ("afile/rows.jsonl", "afile is a file, not a directory"),
    ],
)
def test_gen_refuses_an_output_no_command_reads_back_before_generating(
    tmp_path, capsys, output, said
):
    """``-o rows.parquet`` wrote JSON lines that the next command failed to read as Parquet
    ("magic bytes not found"), ``-o rows.txt`` a file no command reads; ``-o`` a folder failed
    after the rows were made, naming a temporary file (``.folder.tmp123 -> folder``)."""
    (tmp_path / "folder").mkdir()
    (tmp_path / "afile").write_text("kept")
    assert main(["gen", "chain_sum", "--size", "2", "-o", str(tmp_path / output)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"rlvr: error: output {tmp_path / output}: ") and said in line
    assert (tmp_path / "afile").read_text() == "kept" and not list((tmp_path / "folder").iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "folder"]


def test_gen_names_a_missing_exclude_file(tmp_path, capsys):
    """It said ``[Errno 2] No such file or directory: 'held.jsonl'``, naming no option."""
    argv = ["gen", "chain_sum", "--size", "2", "-o", str(tmp_path / "x.jsonl")]
    assert main([*argv, "--exclude", str(tmp_path / "held.jsonl")]) == 2
    assert capsys.readouterr().err == (
        f"rlvr: error: --exclude {tmp_path / 'held.jsonl'}: no such file; name a file rlvr data "
        "gen wrote\n"
    )


def test_show_reads_a_file_with_its_own_field_names(tmp_path, capsys):
    """`rlvr data show` had no --prompt-field / --answer-field: a file with `problem` /
    `solution` could not be shown, and the error did not say how to name its fields."""
    data = tmp_path / "mine.jsonl"
    data.write_text('{"problem": "1 + 1?", "sol": {"value": "2"}}\n')
    assert main(["show", str(data)]) == 2
    err = capsys.readouterr().err
    assert "missing field 'prompt'" in err and "--prompt-field / --answer-field" in err
    argv = ["show", str(data), "--prompt-field", "problem", "--answer-field", "sol.value"]
    assert main(argv) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["prompt"], shown["reference"]) == ("1 + 1?", "2")


def test_cli_gen_refuses_to_write_over_an_exclude_file(tmp_path, capsys):
    """'-o train.jsonl --exclude train.jsonl' replaced the training set it was to stay apart from."""
    train = tmp_path / "train.jsonl"
    assert main(["gen", "chain_sum", "--size", "3", "--seed", "0", "-o", str(train)]) == 0
    before = train.read_text()
    argv = ["gen", "chain_sum", "--size", "3", "--seed", "1", "-o", str(train)]
    assert main([*argv, "--exclude", str(tmp_path / "." / "train.jsonl")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "would overwrite --exclude" in line
    assert train.read_text() == before


def test_show_writes_bytes_and_timestamps_as_the_data_steps_do(tmp_path, capsys):
    """`rlvr data show` printed a bytes reference as Python's repr, "b'\\x00ab'", where the
    data steps write base64; a timestamp as "2024-01-02 03:04:05", not ISO 8601."""
    import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tmp_path / "typed.parquet"
    when = datetime.datetime(2024, 1, 2, 3, 4, 5)
    pq.write_table(pa.table({"prompt": ["p"], "answer": [b"\x00ab"], "ts": [when]}), data)
    assert main(["show", str(data), "--limit", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["reference"] == "AGFi"
    assert main(["show", str(data), "--answer-field", "ts"]) == 0
    assert json.loads(capsys.readouterr().out)["reference"] == "2024-01-02T03:04:05"
