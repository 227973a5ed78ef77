"""Row files of the cleaning steps: outputs never overwrite inputs, a failed write leaves no
temporary file, and rows Parquet cannot hold or files of another type are one clear error."""

import json

import pytest

from rlvr.cli.data import main as data_main
from rlvr.data.rowfiles import check_step_output, dropped_file, write_rows, write_step
from rlvr.evaluation.filtering import passrates_file

ROWS = [{"prompt": "one two"}, {"prompt": "One  two."}, {"prompt": "three"}]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _run(argv):
    """The command's error, as ``rlvr`` prints it (one line), or ``None`` when it succeeds."""
    try:
        data_main.__wrapped__(argv)
    except ValueError as err:
        assert "\n" not in str(err)
        return str(err)
    return None


def test_an_output_over_its_own_input_is_refused(tmp_path):
    src = _write(tmp_path / "same.jsonl", ROWS)
    before = src.read_text()
    error = _run(["dedup", str(src), "-o", str(src)])
    assert "would overwrite the input" in error and src.read_text() == before
    # the dropped rows of x.jsonl go to x.dropped.jsonl: the input here
    audit = _write(tmp_path / "x.dropped.jsonl", ROWS)
    error = _run(["dedup", str(audit), "-o", str(tmp_path / "x.jsonl")])
    assert "its x.dropped.jsonl would overwrite" in error and audit.read_text() == json_lines(ROWS)
    assert not (tmp_path / "x.jsonl").exists()


def test_an_output_over_an_evaluation_set_is_refused(tmp_path):
    src = _write(tmp_path / "train.jsonl", ROWS)
    evals = _write(tmp_path / "eval.jsonl", [{"problem": "four five"}])
    argv = ["decontaminate", str(src), "--against", f"{evals}::problem", "-o", str(evals)]
    assert "would overwrite the input" in _run(argv)
    assert evals.read_text() == json_lines([{"problem": "four five"}])


def test_another_existing_output_is_overwritten(tmp_path):
    src = _write(tmp_path / "in.jsonl", ROWS)
    out = _write(tmp_path / "out.jsonl", [{"prompt": "old"}])
    assert _run(["dedup", str(src), "-o", str(out)]) is None
    assert [json.loads(x)["prompt"] for x in out.read_text().splitlines()] == ["one two", "three"]


def test_an_output_directory_is_one_error_and_leaves_nothing(tmp_path):
    src = _write(tmp_path / "in.jsonl", ROWS)
    folder = tmp_path / "out"
    folder.mkdir()
    assert "is a directory" in _run(["dedup", str(src), "-o", str(folder)])
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["in.jsonl", "out"]


@pytest.mark.parametrize("companion", ["out.dropped.jsonl", "out.passrates.jsonl"])
def test_a_directory_where_a_companion_file_goes_is_refused_before_any_work(tmp_path, companion):
    """It was found only when the file was written: after a filter had sampled every prompt,
    and as `[Errno 21] Is a directory: '.out.dropped.jsonl.tmp123' -> ...`."""
    (tmp_path / companion).mkdir()
    output = tmp_path / "out.jsonl"
    with pytest.raises(ValueError, match=f"its {companion} is a directory"):
        check_step_output(output, [], also=[passrates_file(output)])


def test_a_failed_write_removes_its_temporary_file(tmp_path):
    folder = tmp_path / "out.jsonl"
    (folder / "sub").mkdir(parents=True)
    with pytest.raises(OSError):
        write_rows([{"prompt": "a"}], folder)  # the rename over a directory fails
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


@pytest.mark.parametrize(
    ("rows", "column"),
    [
        ([{"prompt": "a", "x": {}}], "'x'"),
        ([{"prompt": "a", "answer": 15}, {"prompt": "b", "answer": "3/4"}], "column 'answer'"),
    ],
)
def test_rows_parquet_cannot_hold_are_one_error(tmp_path, rows, column):
    src = _write(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.parquet"
    error = _run(["dedup", str(src), "-o", str(out)])
    assert error.startswith(f"{out}: cannot write these rows as Parquet")
    assert column in error and error.endswith("write a .jsonl file instead")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_an_unsupported_input_type_names_the_supported_ones(tmp_path):
    src = tmp_path / "a.csv"
    src.write_text("prompt\nx\n")
    error = _run(["dedup", str(src), "-o", str(tmp_path / "o.jsonl")])
    assert "unsupported file type '.csv'" in error and ".jsonl, .json" in error


@pytest.mark.parametrize("step", [["dedup"], ["decontaminate", "--against"]])
def test_a_folder_as_input_is_called_a_folder(tmp_path, step):
    """A dataset folder given as the input was called "no such file"; it exists, and the
    error now says these steps read one file and how to write one."""
    folder = tmp_path / "ds"
    folder.mkdir()
    against = [str(_write(tmp_path / "eval.jsonl", ROWS))] if len(step) > 1 else []
    _write(folder / "train.jsonl", ROWS)
    error = _run([*step[:1], str(folder), *step[1:], *against, "-o", str(tmp_path / "o.jsonl")])
    assert error.startswith(f"{folder}: is a directory; give one .jsonl, .json")
    assert "Dataset.to_json" in error and not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize(
    ("name", "load"),
    [
        ("org/ds", "datasets.load_dataset('org/ds', split='train')"),
        ("math500", "datasets.load_dataset('HuggingFaceH4/MATH-500', split='test')"),
    ],
)
def test_a_hub_name_as_input_says_these_steps_read_a_file(tmp_path, monkeypatch, name, load):
    """`rlvr data dedup org/ds` (a hub data set, as `rlvr train` and `--against` take) said
    "org/ds: no such file", as of a mistyped file; it says how to write the set to one."""
    monkeypatch.chdir(tmp_path)
    error = _run(["dedup", name, "-o", "o.jsonl"])
    assert error == (
        f"{name}: no such file (a hub data set is read from a file: write its rows to one with "
        f"{load}.to_json('rows.jsonl'))"
    )
    assert _run(["dedup", "rows", "-o", "o.jsonl"]) == "rows: no such file"


def json_lines(rows):
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_parquet_values_json_has_no_type_for_are_written_faithfully(tmp_path):
    """JSON lines written from Parquet held Python reprs (``default=str``): bytes became the
    text ``"b'\\x00ab'"``, a timestamp ``"2024-01-02 03:04:05"``. Now timestamps, dates and
    times are ISO 8601, decimals their exact text, and bytes base64 (as docs/data.md says);
    a value of another such type (a duration) is one error naming its column."""
    import base64
    import datetime
    import decimal

    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    when = datetime.datetime(2024, 1, 2, 3, 4, 5, 6)
    row = {"prompt": "1 + 1 =", "blob": b"\x00ab\xff", "ts": when, "day": when.date()}
    row |= {"utc": when.replace(tzinfo=datetime.timezone.utc), "cost": decimal.Decimal("1.50")}
    source = tmp_path / "typed.parquet"
    pq.write_table(pa.Table.from_pylist([row, dict(row)]), source)
    assert _run(["dedup", str(source), "-o", str(tmp_path / "kept.jsonl")]) is None
    kept = json.loads((tmp_path / "kept.jsonl").read_text())
    assert base64.b64decode(kept["blob"]) == b"\x00ab\xff"
    assert kept["ts"] == "2024-01-02T03:04:05.000006" and kept["day"] == "2024-01-02"
    assert kept["utc"] == "2024-01-02T03:04:05.000006+00:00" and kept["cost"] == "1.50"
    dropped = json.loads((tmp_path / "kept.dropped.jsonl").read_text())
    assert dropped["row"] == kept
    pq.write_table(pa.Table.from_pylist([{"prompt": "a", "took": datetime.timedelta(1)}]), source)
    error = _run(["dedup", str(source), "-o", str(tmp_path / "kept.jsonl")])
    assert "column 'took'" in error and "timedelta" in error


def test_an_output_is_not_written_when_its_dropped_rows_cannot_be(tmp_path):
    """The kept rows were written first: a failing `.dropped.jsonl` left an output that looked
    finished without the record of what was dropped."""
    output = tmp_path / "kept.jsonl"
    dropped_file(output).mkdir()  # the dropped rows' file cannot be written
    with pytest.raises(OSError):
        write_step([{"q": "1"}], [{"reason": "rule", "row": {"q": "2"}}], output)
    assert not output.exists()


def test_a_failed_rerun_leaves_the_earlier_output_and_its_dropped_rows(tmp_path):
    """The dropped rows were written before the kept ones and deleted when those failed: an
    earlier run's output was left without its record of what was dropped."""
    out = tmp_path / "out.parquet"
    good = _write(tmp_path / "good.jsonl", [{"prompt": "a b", "x": 1}, {"prompt": "A  b", "x": 2}])
    assert _run(["dedup", str(good), "-o", str(out)]) is None
    before = out.read_bytes(), dropped_file(out).read_text()
    mixed = [{"prompt": "c", "x": 1}, {"prompt": "d", "x": "two"}, {"prompt": "C", "x": 3}]
    error = _run(["dedup", str(_write(tmp_path / "mixed.jsonl", mixed)), "-o", str(out)])
    assert "cannot write these rows as Parquet (column 'x')" in error
    assert (out.read_bytes(), dropped_file(out).read_text()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "good.jsonl",
        "mixed.jsonl",
        "out.dropped.jsonl",
        "out.parquet",
    ]
