import json

import pytest

from rlvr.atomic import atomic_path, write_json, write_text


def test_write_json_makes_the_folder_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "sub" / "out.json"
    write_json(path, {"a": 1, "p": tmp_path, "é": [1.5]})
    assert (
        path.read_text(encoding="utf-8")
        == json.dumps({"a": 1, "p": str(tmp_path), "é": [1.5]}, indent=1, ensure_ascii=False) + "\n"
    )
    assert [p.name for p in path.parent.iterdir()] == ["out.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary_one(tmp_path):
    path = tmp_path / "rows.jsonl"
    write_text(path, "old\n")
    with pytest.raises(RuntimeError), atomic_path(path) as tmp:
        tmp.write_text("half")
        raise RuntimeError("writer died")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]


def test_a_full_disk_names_the_file_not_written(tmp_path, monkeypatch):
    """``rlvr data gen`` / ``dedup`` / ``eval --output`` on a full disk said only ``[Errno 28]
    No space left on device``: the write to the temporary file names no file. Nested writes
    (the kept rows around the dropped ones) name both."""
    import errno

    path = tmp_path / "rows.jsonl"
    write_text(path, "old\n")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError) as err, atomic_path(path), atomic_path(tmp_path / "d.jsonl"):
        full()
    assert err.value.errno == errno.ENOSPC
    assert str(err.value) == (
        f"[Errno 28] No space left on device: nothing written to {tmp_path / 'd.jsonl'} nor to "
        f"{path}"
    )
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]


def test_an_error_naming_another_file_is_left_as_it_is(tmp_path):
    with pytest.raises(FileNotFoundError) as err, atomic_path(tmp_path / "out.json"):
        (tmp_path / "missing.txt").read_text()
    assert err.value.filename == str(tmp_path / "missing.txt")
