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
