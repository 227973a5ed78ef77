"""What each stage runs with (:mod:`rlvr.pipeline.configs`): its config and data-step options,
where their paths are read from, and what a stage may not set."""

import json
from pathlib import Path

import pytest
import yaml

from rlvr.pipeline import check_pipeline, parse_pipeline, read_pipeline, run_pipeline

from .helpers import EVAL_PROBLEM, _data_pipeline


def test_command_line_data_paths_are_read_from_the_current_folder(tmp_path, monkeypatch):
    """`rlvr pipeline klear sft:data.train=./mine.jsonl` means ./mine.jsonl here, not a file
    next to the bundled pipeline inside the installed package; the file's own ./ paths
    still come from its folder."""
    from rlvr.pipeline import data_step, stage_config

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.jsonl").write_text('{"prompt": "a", "response": "b"}\n')
    pipeline = read_pipeline("klear")
    own = data_step(pipeline, pipeline.stages[0])[1]
    assert Path(own).parent == (pipeline.folder / "../../assets").resolve()
    cfg = stage_config(pipeline, pipeline.stages[3], None, ["data.train=./mine.jsonl"])
    assert Path(cfg.data.train).resolve() == tmp_path / "mine.jsonl"
    _, mine = data_step(pipeline, pipeline.stages[0], ["input=./mine.jsonl"])
    assert Path(mine) == tmp_path / "mine.jsonl"


def test_a_bare_input_file_is_read_from_the_pipeline_files_folder(tmp_path, monkeypatch):
    """``input=raw.jsonl`` is a file (a data stage reads no dataset names): the one beside the
    pipeline file, wherever the command runs; ``against`` keeps bare values as set names."""
    from rlvr.pipeline import data_step

    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    stage = {"name": "clean", "kind": "data", "config": "decontaminate"}
    data = {
        "output_dir": "pipe",
        "stages": [stage | {"overrides": ["input=raw.jsonl", "against=[math500, ./e.jsonl]"]}],
    }
    pipeline = parse_pipeline(data, folder=tmp_path / "files")
    options, source = data_step(pipeline, pipeline.stages[0])
    assert source == str(tmp_path / "files" / "raw.jsonl")
    assert options.against == ("math500", str(tmp_path / "files" / "e.jsonl"))
    _, given = data_step(pipeline, pipeline.stages[0], ["input=mine.jsonl"])
    assert given == str(tmp_path / "here" / "mine.jsonl")


@pytest.mark.parametrize(
    ("in_file", "given"), [([], ["log.output_dir=elsewhere"]), (["log.output_dir=x"], [])]
)
def test_a_stage_output_dir_is_refused_not_ignored(tmp_path, in_file, given):
    data = {
        "output_dir": str(tmp_path / "pipe"),
        "stages": [
            {"name": "a", "kind": "sft", "config": "sft", "overrides": ["data.train=a", *in_file]}
        ],
    }
    with pytest.raises(ValueError, match="log.output_dir.*-o"):
        run_pipeline(parse_pipeline(data, source="p.yaml"), overrides=given)
    assert not (tmp_path / "pipe").exists()


@pytest.mark.parametrize(("stage", "file_model"), [(1, None), (0, "m")])
def test_a_stage_model_in_the_file_that_would_be_replaced_is_refused(tmp_path, stage, file_model):
    stages = [
        {"name": "a", "kind": "sft", "config": "sft", "overrides": ["data.train=a"]},
        {"name": "b", "kind": "sft", "config": "sft", "overrides": ["data.train=a"]},
    ]
    stages[stage]["overrides"].append("model.name=x")
    data = {"output_dir": str(tmp_path / "pipe"), "model": file_model, "stages": stages}
    with pytest.raises(ValueError, match="'model.name=x'.*model"):
        run_pipeline(parse_pipeline(data, source="p.yaml"))
    assert not (tmp_path / "pipe").exists()


def test_bad_data_stages_are_refused(tmp_path, tiny_model_dir):
    path = _data_pipeline(tmp_path, tiny_model_dir)
    data = yaml.safe_load(path.read_text())
    pipeline = read_pipeline(str(path))
    with pytest.raises(ValueError, match="clean.*unknown option.*'bogus'"):
        run_pipeline(pipeline, overrides=["clean:bogus=1"], announce=lambda _: None)
    with pytest.raises(ValueError, match="stage 'filter'.*--keep 'mean>>1': expected"):
        run_pipeline(pipeline, overrides=["filter:keep=mean>>1"], announce=lambda _: None)
    with pytest.raises(ValueError, match="stage 'sft'.*@nope: no earlier data stage 'nope'"):
        run_pipeline(pipeline, overrides=["sft:data.train=@nope"], announce=lambda _: None)
    data["stages"][0]["config"] = "shuffle"
    with pytest.raises(ValueError, match="a data stage's config is one of"):
        parse_pipeline(data)
    data["stages"] = data["stages"][1:]
    with pytest.raises(ValueError, match="the first data stage needs input=FILE"):
        run_pipeline(parse_pipeline(data), announce=lambda _: None)


def test_a_filter_stage_without_a_rule_is_told_the_majority_rule():
    """docs/data.md: with n=16, pass@16>0.5 keeps every prompt solved once; Klear's rule
    reads as a majority of the samples correct, mean>0.5."""
    from rlvr.pipeline import data_step

    stage = {"name": "f", "kind": "data", "config": "filter", "overrides": ["input=x.jsonl"]}
    pipeline = parse_pipeline({"stages": [stage]}, source="p.yaml")
    with pytest.raises(ValueError, match=None) as err:
        data_step(pipeline, pipeline.stages[0])
    assert "stage 'f': filter needs keep=RULE, e.g. keep=mean>0.5 (a majority" in str(err.value)


def test_a_decontaminate_stage_against_a_folder_without_its_split_names_the_option(tmp_path):
    """A folder of one train split as ``against`` gave datasets' ``Unknown split "test"``
    naming no option; in a pipeline the option is the stage's ``split=``."""
    from rlvr.evaluation.data_steps import run_step, step_options

    evals = tmp_path / "evals"
    evals.mkdir()
    (evals / "train.jsonl").write_text(json.dumps({"problem": EVAL_PROBLEM}) + "\n")
    src = tmp_path / "raw.jsonl"
    src.write_text(json.dumps({"prompt": "what is one plus one"}) + "\n")
    options = step_options("decontaminate", {"against": [str(evals)]})
    with pytest.raises(ValueError) as err:
        run_step(options, src, tmp_path / "out.jsonl", model=None)
    assert str(err.value) == (
        f"{evals}: no split 'test'; its splits: train; name one with split=NAME in the "
        "stage's overrides"
    )
    options = step_options("decontaminate", {"against": [str(evals)], "split": "train"})
    assert run_step(options, src, tmp_path / "out.jsonl", model=None).kept == 1


@pytest.mark.parametrize(
    ("kind", "config", "message"),
    [
        ("train", "sft", r"unknown key 'epochs'; .* \(config 'sft' is a kind: sft config\)$"),
        ("sft", "gppo", r"unknown key 'data.gym'; .* \(config 'gppo' is a kind: train config\)$"),
    ],
)
def test_a_stage_whose_config_is_of_the_other_kind_is_told_so(tmp_path, kind, config, message):
    """`kind: train` with `config: sft` said only `unknown key 'epochs'`."""
    (tmp_path / "a.jsonl").write_text('{"prompt": "1", "response": "2"}\n')
    stage = {"name": "a", "kind": kind, "config": config, "overrides": ["data.train=./a.jsonl"]}
    data = {"output_dir": str(tmp_path / "pipe"), "stages": [stage]}
    with pytest.raises(ValueError, match=message):
        check_pipeline(parse_pipeline(data, source="p.yaml", folder=tmp_path))
    stage["kind"] = "sft" if kind == "train" else "train"
    stage["overrides"].append("stpes=1")
    with pytest.raises(ValueError, match=r"unknown key 'stpes'; [^(]*$"):  # a typo: no hint
        check_pipeline(parse_pipeline(data, source="p.yaml", folder=tmp_path))


def test_a_command_line_key_only_the_other_kind_takes_names_the_stages_that_take_it():
    """`rlvr pipeline klear eval.reports=false` reached the SFT stage too, whose `eval` has no
    `reports`: `unknown key 'eval.reports'`, not saying how to give it to the RL stages alone."""
    from rlvr.pipeline import stage_config

    pipeline = read_pipeline("klear")
    sft = next(s for s in pipeline.stages if s.kind == "sft")
    said = (
        r"stage 'sft': unknown key 'eval.reports'; .* \(a key=value on the command line reaches "
        r"every SFT and RL stage; give it to the stages that take it by name: "
        r"math:eval.reports=false code:eval.reports=false\)$"
    )
    with pytest.raises(ValueError, match=said):
        stage_config(pipeline, sft, None, ["eval.reports=false"])
    with pytest.raises(ValueError, match=r"unknown key 'eval.reprots'; [^(]*$"):  # a typo
        stage_config(pipeline, sft, None, ["eval.reprots=false"])
