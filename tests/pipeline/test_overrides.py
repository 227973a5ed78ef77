"""The command line of a pipeline run (:mod:`rlvr.pipeline.overrides`, ``rlvr pipeline -o``):
overrides by stage, the first stage's model, overrides that would do nothing."""

import re

import pytest
import yaml

from rlvr.cli.pipeline import main as pipeline_main
from rlvr.pipeline import parse_pipeline, read_pipeline, run_pipeline

from .helpers import DEDUP, LOG, Killed, StopAtStart, _data_stages, _model_name


@pytest.mark.parametrize("given", ["model={}", "model.name={}", "warm:model={}"])
def test_a_command_line_model_replaces_the_files_first_model(
    tmp_path, tiny_model_dir, sft_file, given
):
    data = {
        "output_dir": str(tmp_path / "pipe"),
        "model": str(tmp_path / "no-such-model"),
        "stages": [
            {
                "name": "warm",
                "kind": "sft",
                "config": "sft",
                "overrides": [f"data.train={sft_file}"],
            },
            {
                "name": "more",
                "kind": "sft",
                "config": "sft",
                "overrides": [f"data.train={sft_file}"],
            },
        ],
    }
    lines = []
    with pytest.raises(Killed):
        run_pipeline(
            parse_pipeline(data, source="p.yaml"),
            overrides=[given.format(tiny_model_dir), *LOG],
            callbacks=lambda s: [StopAtStart()],
            announce=lines.append,
        )
    assert f"starting from {tiny_model_dir} in" in lines[0]
    assert _model_name(tmp_path / "pipe" / "warm") == str(tiny_model_dir)


def test_a_model_for_a_later_stage_is_refused_not_ignored(tmp_path):
    data = {
        "output_dir": str(tmp_path / "pipe"),
        "stages": [
            {"name": "a", "kind": "sft", "config": "sft", "overrides": ["data.train=a.jsonl"]},
            {"name": "b", "kind": "train", "config": "demo"},
        ],
    }
    with pytest.raises(ValueError, match="'b:model.name=x'.*the stages before it pass on"):
        run_pipeline(parse_pipeline(data, source="p.yaml"), overrides=["b:model.name=x"])
    assert not (tmp_path / "pipe").exists()


@pytest.mark.parametrize(
    ("given", "message"),
    [
        # a data stage read `field` as field=None (its default): the override did nothing
        ("dedup:field", "expected key=value .* or NAME:key=value"),
        ("dedup:=x", "expected key=value"),
        ("model", "expected key=value"),  # was the first stage's model: ""
        # a pipeline of data stages only dropped it (key=value is for SFT and RL stages)
        ("threads=2", "reaches no stage .* NAME:key=value: dedup"),
    ],
)
def test_a_command_line_override_that_would_do_nothing_is_refused(tmp_path, capsys, given, message):
    """Each of these passed without a word; now one line says what an override looks like."""
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(_data_stages(tmp_path, None, DEDUP)))
    capsys.readouterr()
    assert pipeline_main([str(path), "--dry-run", given]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"rlvr: error: override {given!r}: ") and re.search(message, line)
    with pytest.raises(ValueError, match=message):
        run_pipeline(read_pipeline(str(path)), overrides=[given], announce=print)
    assert not (tmp_path / "pipe").exists()


@pytest.mark.parametrize("given", [["-o", ""], ["--output-dir="]])
@pytest.mark.parametrize("dry", [["--dry-run"], []])
def test_an_empty_output_directory_option_is_refused_not_taken_as_none(
    tmp_path, capsys, given, dry
):
    """`-o ""` (say, `-o "$OUT"` with OUT unset) ran the pipeline in the file's output_dir,
    without a word."""
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(_data_stages(tmp_path, None, DEDUP)))
    assert pipeline_main([str(path), *given, *dry]) == 2
    assert capsys.readouterr().err == (
        "rlvr: error: -o/--output-dir is empty: give a directory, or leave -o out for the "
        "file's output_dir\n"
    )
    assert not (tmp_path / "pipe").exists()
