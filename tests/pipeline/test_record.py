"""What a finished stage records (:mod:`rlvr.pipeline.record`): ``stage.json`` read back from
another folder, damaged, or left by a stage of another kind."""

import json
from pathlib import Path

import pytest
import yaml

from rlvr.cli.pipeline import main as pipeline_main
from rlvr.pipeline import parse_pipeline, run_pipeline

from .helpers import DEDUP, _data_stages


def test_a_finished_stage_is_found_from_another_folder(tmp_path, monkeypatch):
    """``stage.json`` records the final model as an absolute path: a pipeline whose output
    directory was given relative to one folder continues from any other (``-o`` absolute)."""
    from rlvr.pipeline import Stage
    from rlvr.pipeline.record import _finished, _record
    from rlvr.train.harness import RunResult

    monkeypatch.chdir(tmp_path)
    model = Path("out/math/checkpoints/step_000003")
    model.mkdir(parents=True)
    ran = RunResult(run_dir=Path("out/math"), model_dir=model, metrics={"reward/mean": 0.5})
    stage = Stage("math", "train", "demo")
    recorded = _record(stage, ran, "ran", {"steps": 3})
    assert recorded.model_dir == tmp_path / model
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    done = _finished(tmp_path / "out" / "math", stage)
    assert done is not None and Path(done["model_dir"]) == tmp_path / model


def test_a_damaged_stage_json_is_named_and_kept(tmp_path, capsys):
    """A stage.json cut short (a copy, a disk error) gave only json's own message
    ("Expecting ',' delimiter: ..."), naming no file."""
    data = _data_stages(tmp_path, None, {**DEDUP, "overrides": ["input=raw.jsonl"]})
    run_pipeline(parse_pipeline(data, folder=tmp_path), announce=print)
    done = tmp_path / "pipe" / "dedup" / "stage.json"
    done.write_text(done.read_text()[:40])
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    capsys.readouterr()
    assert pipeline_main([str(path)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"rlvr: error: {done}: not valid JSON (")
    assert line.endswith("delete it to rerun the stage") and len(done.read_text()) == 40


@pytest.mark.parametrize("recorded", ["data", "sft"])
def test_a_finished_stage_of_another_kind_in_the_output_directory_is_refused(
    tmp_path, tiny_model_dir, capsys, recorded
):
    """An output directory reused by a pipeline whose stage NAME is of another kind (a data
    stage where a model stage finished, or the reverse) stopped with a KeyError traceback
    ('output' / 'model_dir'); now one line names the stage.json and what to delete."""
    data = _data_stages(tmp_path, str(tiny_model_dir), {**DEDUP, "name": "x"})
    if recorded == "data":  # a dedup stage 'x' finished; now 'x' is an SFT stage
        run_pipeline(parse_pipeline(data, folder=tmp_path), announce=print)
        data["stages"] = [
            {"name": "x", "kind": "sft", "config": "sft", "overrides": ["data.train=./a.jsonl"]}
        ]
        (tmp_path / "a.jsonl").write_text('{"prompt": "1", "response": "2"}\n')
    else:  # an SFT stage 'x' finished (its stage.json as _record writes it); now 'x' is dedup
        done = {"name": "x", "kind": "sft", "config": "sft", "model_dir": str(tiny_model_dir)}
        (tmp_path / "pipe" / "x").mkdir(parents=True)
        (tmp_path / "pipe" / "x" / "stage.json").write_text(json.dumps({**done, "options": {}}))
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    capsys.readouterr()
    for args in ([str(path)], [str(path), "--dry-run"]):
        assert pipeline_main(args) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith(f"rlvr: error: {tmp_path / 'pipe' / 'x' / 'stage.json'}: records")
        assert f"delete {tmp_path / 'pipe' / 'x'}" in line
