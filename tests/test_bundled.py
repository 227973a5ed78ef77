"""YAML files by bundled name or by path: one-line errors that name the file."""

from pathlib import Path

import pytest

from rlvr.bundled import UniqueKeyLoader, bundled_names, read_source


def _read(name: str):
    return read_source(
        name,
        package="rlvr.compare",
        folder="studies",
        kind="a bundled study",
        choices=lambda: bundled_names("rlvr.compare", "studies"),
    )


def test_bundled_by_name_with_its_folder():
    names = bundled_names("rlvr.compare", "studies")
    assert "abc" in names and names == sorted(names) and not any(n.endswith(".yaml") for n in names)
    source = _read("abc")
    assert source.where == "rlvr/compare/studies/abc.yaml"
    assert isinstance(source.data, dict) and (source.folder / "abc.yaml").is_file()
    assert "klear" in bundled_names("rlvr", "configs/pipelines")  # nested folders


def test_a_path_wins_and_keeps_its_folder(tmp_path):
    path = tmp_path / "abc"  # same name as a bundled study: the file is read
    path.write_text("x: 1\n")
    source = _read(str(path))
    assert source.data == {"x": 1} and source.where == str(path)
    assert source.folder == Path(tmp_path).resolve()


def test_unknown_name_lists_the_choices():
    with pytest.raises(ValueError) as err:
        _read("nope")
    message = str(err.value)
    assert message.startswith("study 'nope' is neither a file nor a bundled study (abc")
    assert "\n" not in message


def test_a_missing_path_is_named_a_missing_file(tmp_path):
    """It listed the bundled studies, as if the path were a misspelt name."""
    with pytest.raises(ValueError, match=r"^study file runs/mine.yaml: no such file$"):
        _read("runs/mine.yaml")


def test_invalid_yaml_names_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("a: [1, 2\n")
    with pytest.raises(ValueError, match=rf"^{path}: not valid YAML"):
        _read(str(path))


def test_invalid_yaml_says_where_in_the_file_in_one_line(tmp_path):
    """The parser's own text named the file '<unicode string>', over five lines."""
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\narms: [ {recipe: abc/grpo\n")
    with pytest.raises(ValueError) as err:
        _read(str(path))
    assert str(err.value) == (
        f"{path}: not valid YAML: while parsing a flow mapping at line 2, column 9: expected "
        "',' or '}', but got '<stream end>' at line 3, column 1"
    )
    path.write_text("a: b: c\n")
    with pytest.raises(ValueError) as err:
        _read(str(path))
    assert str(err.value) == (
        f"{path}: not valid YAML: mapping values are not allowed here at line 1, column 5"
    )


def test_a_key_given_twice_is_refused_naming_both_lines(tmp_path):
    """PyYAML keeps the last of two equal keys: a second ``rollout:`` block dropped every key
    of the first, and the run went on with the defaults, saying nothing."""
    path = tmp_path / "run.yaml"
    path.write_text("base: demo\nrollout:\n  group_size: 4\nsteps: 3\nrollout:\n  minibatches: 2\n")
    with pytest.raises(ValueError) as err:
        _read(str(path))
    assert str(err.value) == (
        f"{path}: not valid YAML: key 'rollout' given twice: first at line 2, again at line 5, "
        "column 1"
    )
    path.write_text("a:\n  b: 1\n  b: 2\n")  # in a nested mapping too
    with pytest.raises(ValueError, match="key 'b' given twice: first at line 2, again at line 3"):
        _read(str(path))


def test_a_merged_key_may_be_set_again(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("base: &b {lr: 1, wd: 0}\nother:\n  <<: *b\n  lr: 2\n")
    assert _read(str(path)).data["other"] == {"lr": 2, "wd": 0}


def test_every_bundled_yaml_file_names_each_key_once():
    import yaml

    import rlvr

    files = sorted(Path(rlvr.__file__).parent.rglob("*.yaml"))
    assert len(files) > 50
    for path in files:
        yaml.load(path.read_text(), Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader
