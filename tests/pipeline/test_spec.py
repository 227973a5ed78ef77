"""Pipeline files (:mod:`rlvr.pipeline.spec`): parsing, stage and pipeline validation, the
embedded pipelines, and where a file's own relative paths are read from."""

import json
import shutil

import pytest
import yaml

from rlvr.cli.pipeline import main as pipeline_main
from rlvr.pipeline import check_pipeline, parse_pipeline, read_pipeline

from .helpers import DEDUP, _data_stages


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "missing required key(s) stages"),
        ({"stages": []}, "'stages' must be a non-empty list"),
        ({"stages": [{"name": "a", "kind": "sft"}]}, "missing required key(s) stages[0].config"),
        ({"stages": [{"name": "a", "kind": "sft", "config": ""}]}, "config must name a config"),
        (
            {"stages": [{"name": "a", "kind": "sft", "config": "sft"}] * 2},
            "stage names must be unique",
        ),
        ({"stages": [{"name": "a", "kind": "sft", "config": "x", "extra": 1}]}, "unknown key"),
        ({"stages": [], "steps": 3}, "unknown key 'steps'; valid keys of a pipeline: stages, "),
        (
            {"stages": [{"name": "a", "kind": "sft", "config": "x", "overrides": "a=1"}]},
            "overrides",
        ),
        # NAME:key=value could not reach these stages (it read 'a' as the stage's name)
        ({"stages": [{"name": "a:b", "kind": "sft", "config": "x"}]}, "without ':' or '='"),
        ({"stages": [{"name": "a=b", "kind": "sft", "config": "x"}]}, "without ':' or '='"),
        # its run directory would be the summary file the pipeline writes after each stage
        ({"stages": [{"name": "pipeline.json", "kind": "sft", "config": "x"}]}, "summary"),
    ],
)
def test_bad_pipelines_are_one_line_errors(data, message):
    with pytest.raises(ValueError, match=None) as err:
        parse_pipeline(data, source="p.yaml")
    assert message in str(err.value) and str(err.value).startswith("p.yaml")


def test_embedded_klear_pipeline_parses_into_data_sft_math_code():
    pipeline = read_pipeline("klear")
    assert [(s.name, s.kind) for s in pipeline.stages] == [
        ("dedup", "data"),
        ("decontaminate", "data"),
        ("filter", "data"),
        ("sft", "sft"),
        ("math", "train"),
        ("code", "train"),
    ]
    from rlvr.pipeline import data_step, stage_config

    configs = [stage_config(pipeline, s, "some-model") for s in pipeline.stages[3:]]
    assert all(c.model.name == "some-model" for c in configs)
    assert configs[2].reward.verifier == "code" and configs[2].objective.name == "gppo"
    assert data_step(pipeline, pipeline.stages[0])[1].endswith("chain_sum-worked.jsonl")
    assert configs[0].data.train.endswith("filter/data.jsonl")  # the SFT trains on the filter's
    options, source = data_step(pipeline, pipeline.stages[2])
    assert source.endswith("decontaminate/data.jsonl") and options.keep == "mean<1"


def test_klear_sft_asset_is_reproducible_and_disjoint_from_the_held_out_sets():
    """The bundled worked chain sums: seed 4_000_000, minus the demo's chain-sum held-out
    questions, and none of the math stage's held-out questions (one-digit products)."""
    from pathlib import Path

    from rlvr.data.gym import gym_rows
    from rlvr.data.worked import worked_pairs
    from rlvr.pipeline import data_step, stage_config
    from rlvr.train.config import TrainConfig
    from rlvr.train.overrides import load_config

    pipeline = read_pipeline("klear")
    asset = data_step(pipeline, pipeline.stages[0])[1]
    rows = [json.loads(line) for line in Path(asset).read_text().splitlines()]
    prompts = {r["prompt"] for r in rows}
    math = stage_config(pipeline, pipeline.stages[4], None)
    assert math.data.eval == "reasoning_gym:products" and math.objective.name == "gppo"
    held_math = {
        r["question"]
        for r in gym_rows(
            "products",
            size=math.data.gym.eval_size,
            seed=math.data.gym.held_out_seed,
            config=math.data.gym.config,
        )
    }
    assert len(rows) == 256 and not held_math & prompts
    # Made against the 200 held-out chain sums of the demo (the chain-sum recipes' set).
    gym = load_config(TrainConfig, "demo", []).data.gym
    full = {
        r["question"]
        for r in gym_rows("chain_sum", size=200, seed=gym.held_out_seed, config=gym.config)
    }
    assert not full & prompts
    expected = gym_rows("chain_sum", size=256, seed=4_000_000, config=gym.config, exclude=full)
    assert [r["response"] for r in rows] == [p.response for p in worked_pairs(expected)]


def test_the_files_model_and_stage_configs_are_read_beside_it(
    tmp_path, monkeypatch, tiny_model_dir
):
    """``model: ./model-chat`` was read from the current folder while ``data.train`` was read
    from the pipeline file's: ``cd /; rlvr pipeline /x/pipe.yaml`` gave "no such directory"."""
    files = tmp_path / "files"
    files.mkdir()
    shutil.copytree(tiny_model_dir, files / "model-chat")
    (files / "qa.jsonl").write_text('{"prompt": "1 + 1?", "answer": "2"}\n')
    (files / "rl.yaml").write_text("base: demo\ndata: {train: qa.jsonl, eval: null}\n")
    stage = {"name": "rl", "kind": "train", "config": "rl.yaml", "overrides": ["steps=1"]}
    data = {"output_dir": str(tmp_path / "pipe"), "model": "./model-chat", "stages": [stage]}
    (files / "pipe.yaml").write_text(yaml.safe_dump(data))
    monkeypatch.chdir("/")
    (cfg,) = check_pipeline(read_pipeline(str(files / "pipe.yaml")), device=True)
    assert (cfg.model.name, cfg.data.train) == (str(files / "model-chat"), str(files / "qa.jsonl"))
    del data["model"]
    stage["overrides"].append("model.name=./model-chat")  # the first stage's own model
    (cfg,) = check_pipeline(parse_pipeline(data, folder=files))
    assert cfg.model.name == str(files / "model-chat")


def test_a_pipelines_output_directory_given_as_its_file_says_how_to_continue(tmp_path, capsys):
    """`rlvr pipeline runs/p` (as `rlvr train --resume RUN_DIR` takes a run) said `pipeline
    'runs/p' is neither a file nor an embedded pipeline (klear)`."""
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(_data_stages(tmp_path, None, DEDUP)))
    assert pipeline_main([str(path)]) == 0
    capsys.readouterr()
    out = tmp_path / "pipe"
    assert pipeline_main([str(out)]) == 2
    assert capsys.readouterr().err == (
        f"rlvr: error: pipeline file {out}: is a pipeline's output directory, not its file; "
        f"to continue it: rlvr pipeline {path} -o {out}\n"
    )
    assert pipeline_main([str(out / "dedup")]) == 2
    assert "dedup: is a directory, not a YAML file" in capsys.readouterr().err
