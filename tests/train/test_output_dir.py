"""``{time}`` in ``log.output_dir``: a new time for a new run, the newest run for ``--resume``."""

import re
from dataclasses import dataclass, field

import pytest

from rlvr.train.config import LoraConfig
from rlvr.train.run_dir import _check_same_model, expand_output_dir


@dataclass(frozen=True)
class _Log:
    output_dir: str


@dataclass(frozen=True)
class _Config:
    log: _Log = field(default_factory=lambda: _Log("runs/x"))


def _out(pattern: str, *, resume: bool) -> str:
    return expand_output_dir(_Config(_Log(pattern)), resume=resume).log.output_dir


def test_a_directory_without_time_is_kept(tmp_path):
    assert _out(str(tmp_path / "run"), resume=True) == str(tmp_path / "run")


def test_a_new_run_gets_the_current_time(tmp_path):
    (tmp_path / "demo-20260101-120000").mkdir()
    out = _out(str(tmp_path / "demo-{time}"), resume=False)
    assert re.fullmatch(re.escape(str(tmp_path)) + r"/demo-\d{8}-\d{6}", out)
    assert not out.endswith("20260101-120000")


def test_resume_continues_the_newest_run_the_pattern_names(tmp_path, capsys):
    root = tmp_path / "a[1]"  # glob characters in the rest of the path are literal
    for name in (
        "demo-20260101-120000",
        "demo-20260102-090000",
        "demo-latest",
        "other-20270101-000000",
    ):
        (root / name).mkdir(parents=True)
    assert _out(str(root / "demo-{time}"), resume=True) == str(root / "demo-20260102-090000")
    assert "continuing" in capsys.readouterr().err


def test_resume_with_no_run_yet_starts_a_new_one_and_says_so(tmp_path, capsys):
    out = _out(str(tmp_path / "demo-{time}"), resume=True)
    assert re.fullmatch(re.escape(str(tmp_path)) + r"/demo-\d{8}-\d{6}", out)
    assert "no earlier run matches" in capsys.readouterr().err


def test_a_resume_takes_another_spelling_of_the_same_model_directory(tmp_path, monkeypatch):
    """``model.name=my-llama`` (or its absolute path) on resuming a run started from
    ``./my-llama`` was refused as another model."""

    monkeypatch.chdir(tmp_path)
    (tmp_path / "my-llama").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.yaml").write_text("model: {name: ./my-llama}\n")

    @dataclass
    class Model:
        name: str
        lora: LoraConfig = field(default_factory=LoraConfig)

    @dataclass
    class Config:
        model: Model

    checkpoint = tmp_path / "run" / "checkpoints" / "step_000001"
    for name in ("./my-llama", "my-llama", str(tmp_path / "my-llama")):
        _check_same_model(Config(Model(name)), tmp_path / "run", checkpoint)
    with pytest.raises(ValueError, match="started from './my-llama'"):
        _check_same_model(Config(Model("other")), tmp_path / "run", checkpoint)


def test_config_yaml_names_local_files_so_a_resume_from_another_folder_reads_them(
    tmp_path, monkeypatch
):
    """A run started in the folder of its data and model wrote ``data.train: qa.jsonl`` and
    ``model.name: ./m`` into ``config.yaml``: ``--resume DIR`` from another folder then found
    no file (or another folder's ``qa.jsonl``). They are written as absolute paths; names
    that are not local paths (a preset, a generated set) stay as they are."""
    import yaml

    from rlvr.train import TrainConfig, load_config
    from rlvr.train.run_dir import RunDir, _keep_changed_config, open_run_dir

    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    (home / "m").mkdir(parents=True)
    (home / "qa.jsonl").write_text('{"question": "1 + 1", "solution": "2"}\n')
    elsewhere.mkdir()
    monkeypatch.chdir(home)
    overrides = ["model.name=./m", "data.train=qa.jsonl", "log.output_dir=run"]
    cfg = load_config(TrainConfig, "demo", overrides)
    open_run_dir(cfg, RunDir(home / "run", None))
    saved = yaml.safe_load((home / "run" / "config.yaml").read_text())
    assert saved["model"]["name"] == str(home / "m")
    assert saved["data"]["train"] == str(home / "qa.jsonl")
    assert saved["data"]["eval"] == "reasoning_gym:chain_sum"  # not a path: as given

    monkeypatch.chdir(elsewhere)
    again = load_config(TrainConfig, str(home / "run" / "config.yaml"), ["steps=5"])
    assert (again.model.name, again.data.train) == (str(home / "m"), str(home / "qa.jsonl"))

    # a run that wrote relative paths (before), resumed from its folder: nothing changed
    monkeypatch.chdir(home)
    saved["model"]["name"], saved["data"]["train"] = "./m", "qa.jsonl"
    (home / "run" / "config.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
    checkpoint = home / "run" / "checkpoints" / "step_000001"
    _keep_changed_config(cfg, RunDir(home / "run", checkpoint, resume=True))
    assert not (home / "run" / "config.step_000001.yaml").exists()
