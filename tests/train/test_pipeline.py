"""Multi-stage pipelines: stages chained by their final models, resumable after a kill."""

import importlib.util
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from rlvr.cli.pipeline import main as pipeline_main
from rlvr.pipeline import check_pipeline, parse_pipeline, read_pipeline, run_pipeline
from rlvr.train.harness import Callback
from rlvr.train.metrics import read_metrics

LOG = ["log.tensorboard=false", "log.progress=off", "log.plots=false"]


class Killed(Exception):
    """Stands for the process being killed."""


class KillAt(Callback):
    """Raises after step ``step``'s metrics (and checkpoint, if one was due) are written."""

    def __init__(self, step: int, hook: str = "on_step") -> None:
        self.step, self.hook = step, hook

    def on_step(self, job, step, record):
        if self.hook == "on_step" and step == self.step:
            raise Killed(step)

    def on_end(self, job, result):
        if self.hook == "on_end":
            raise Killed("end")


def _pipeline_file(tmp_path, tiny_model_dir, sft_file, prompt_file):
    """SFT -> RL -> RL on the tiny random model, each stage a few steps."""
    train = [
        f"data.train={prompt_file}",
        f"data.eval={prompt_file}",
        "data.max_prompt_tokens=64",
        "reward.verifier=even",
        "rollout.prompts_per_step=2",
        "rollout.group_size=4",
        "rollout.max_new_tokens=8",
        "eval.n=2",
        "eval.ks=[1]",
        "eval.at_start=false",
        "eval.every=0",
        "checkpoint.every=1",
        "threads=1",
        *LOG,
    ]
    data = {
        "output_dir": str(tmp_path / "pipe"),
        "model": str(tiny_model_dir),
        "stages": [
            {
                "name": "warm",
                "kind": "sft",
                "config": "sft",
                "overrides": [
                    f"data.train={sft_file}",
                    "epochs=1",
                    "batch_size=3",
                    "threads=1",
                    *LOG,
                ],
            },
            {"name": "math", "kind": "train", "config": "demo", "overrides": ["steps=3", *train]},
            {
                "name": "more",
                "kind": "train",
                "config": "gppo",
                "overrides": ["steps=2", "rollout.filter_zero_advantage=false", *train],
            },
        ],
    }
    path = tmp_path / "pipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _model_name(run_dir):
    return yaml.safe_load((run_dir / "config.yaml").read_text())["model"]["name"]


def test_three_stages_chain_models_and_resume_after_kills(
    tmp_path, tiny_model_dir, sft_file, prompt_file
):
    import rlvr.train.config  # noqa: F401  - the test verifiers are registered by conftest

    pipeline = read_pipeline(str(_pipeline_file(tmp_path, tiny_model_dir, sft_file, prompt_file)))
    out = tmp_path / "pipe"
    # 1st invocation: killed after stage 1 finished its run, before it was marked finished.
    with pytest.raises(Killed):
        run_pipeline(
            pipeline,
            callbacks=lambda s: [KillAt(0, "on_end")] if s.name == "warm" else [],
            announce=lambda _: None,
        )
    assert not (out / "warm" / "stage.json").exists()
    # 2nd: stage 1 resumes with nothing left to do; stage 2 is killed after step 2.
    lines = []
    with pytest.raises(Killed):
        run_pipeline(
            pipeline,
            callbacks=lambda s: [KillAt(2)] if s.name == "math" else [],
            announce=lines.append,
        )
    assert "resuming" in lines[0] and "starting" in lines[1]
    assert (out / "warm" / "stage.json").exists() and not (out / "math" / "stage.json").exists()
    # 3rd: stage 1 skipped, stage 2 resumes at step 3, stage 3 starts from stage 2's model.
    lines = []
    results = run_pipeline(pipeline, announce=lines.append)
    assert [r.status for r in results] == ["skipped", "resumed", "ran"]
    assert "finished, skipped" in lines[0] and "resuming" in lines[1]
    warm, math, more = results
    assert warm.model_dir.parent.parent == out / "warm"
    assert _model_name(out / "math") == str(warm.model_dir)
    assert _model_name(out / "more") == str(math.model_dir)
    assert math.model_dir.name == "step_000003" and more.model_dir.name == "step_000002"
    # The resumed stage ran each step once: steps 1, 2 then 3 (not 1..3 again).
    assert [r["step"] for r in read_metrics(out / "math" / "metrics.jsonl")] == [1, 2, 3]
    summary = json.loads((out / "pipeline.json").read_text())
    assert summary["finished"] and [s["name"] for s in summary["stages"]] == [
        "warm",
        "math",
        "more",
    ]
    assert "1" in summary["stages"][1]["evals"] or "3" in summary["stages"][1]["evals"]
    # A 4th invocation has nothing to do.
    again = run_pipeline(pipeline, overrides=["threads=2"], announce=lambda _: None)
    assert [r.status for r in again] == ["skipped"] * 3  # threads: how it runs, not what it makes
    assert [r.model_dir for r in again] == [r.model_dir for r in results]
    # A changed option of a finished stage is refused, naming it and what to delete.
    changed = rf"^stage 2/3 math: finished with other options \(steps: 3 -> 4\); .*{out}/more$"
    with pytest.raises(ValueError, match=changed):
        run_pipeline(pipeline, overrides=["math:steps=4"], announce=lambda _: None)


def test_cli_runs_a_pipeline_and_reports_bad_files(
    tmp_path, tiny_model_dir, sft_file, prompt_file, capsys
):
    path = _pipeline_file(tmp_path, tiny_model_dir, sft_file, prompt_file)
    assert pipeline_main([str(path), "-o", str(tmp_path / "cli"), "more:steps=1"]) == 0
    out = capsys.readouterr().out
    assert "more" in out and "pipeline.json" in out
    assert "to continue" not in out  # every stage finished: nothing to continue
    assert _model_name(tmp_path / "cli" / "more").endswith("step_000003")
    assert read_metrics(tmp_path / "cli" / "more" / "metrics.jsonl")[-1]["step"] == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("stages:\n  - {name: a, kind: rl, config: demo}\n")
    assert pipeline_main([str(bad)]) == 2
    assert (
        "stages[0]: stage 'a': kind must be one of ['sft', 'train', 'data'], got 'rl'"
        in capsys.readouterr().err
    )
    assert pipeline_main([str(path), "nope:steps=1"]) == 2
    assert "no stage 'nope'" in capsys.readouterr().err


def _two_stages(tmp_path, *later: str) -> dict:
    """An SFT stage on an existing file, then an RL stage with the overrides ``later``."""
    (tmp_path / "a.jsonl").write_text('{"prompt": "1", "response": "2"}\n')
    first = ["data.train=" + str(tmp_path / "a.jsonl")]
    return {
        "output_dir": str(tmp_path / "pipe"),
        "stages": [
            {"name": "a", "kind": "sft", "config": "sft", "overrides": first},
            {"name": "b", "kind": "train", "config": "demo", "overrides": list(later)},
        ],
    }


def test_a_bad_override_of_a_later_stage_stops_the_pipeline_before_it_starts(tmp_path):
    with pytest.raises(ValueError, match="stage 'b': .*foo"):
        run_pipeline(parse_pipeline(_two_stages(tmp_path, "foo=1"), source="p.yaml"))
    assert not (tmp_path / "pipe").exists()  # stage a never started


def test_a_later_stage_that_could_not_start_stops_the_pipeline_before_it_starts(
    tmp_path, monkeypatch
):
    """A later stage is checked as its run will check it: its files, and this machine's."""
    import rlvr.train.preflight as preflight

    missing = str(tmp_path / "missing.jsonl")
    with pytest.raises(ValueError, match=f"stage 'b': data.train: {missing}: no such file"):
        run_pipeline(parse_pipeline(_two_stages(tmp_path, f"data.train={missing}"), source="p"))
    monkeypatch.setattr(preflight, "sandbox_isolation", lambda verifier: "fallback-minimal")
    with pytest.raises(ValueError, match="stage 'b': .*reward.allow_unconfined=true"):
        run_pipeline(parse_pipeline(_two_stages(tmp_path, "reward.verifier=code"), source="p"))
    assert not (tmp_path / "pipe").exists()  # stage a never started


def test_a_later_stage_s_field_typo_stops_the_pipeline_before_it_starts(tmp_path):
    """The check found a later stage's missing data file but read none: a misspelt
    data.prompt_field (which `rlvr train --dry-run` finds) failed only once the earlier
    stages had run. Files an earlier data stage writes are not read before they exist."""
    rows = tmp_path / "q.jsonl"
    rows.write_text('{"question": "1 + 1", "answer": "2"}\n')
    typo = _two_stages(tmp_path, f"data.train={rows}", "data.prompt_field=questoin")
    with pytest.raises(ValueError, match=r"stage 'b': .*q\.jsonl:1: missing field 'questoin'"):
        run_pipeline(parse_pipeline(typo, source="p"))
    assert not (tmp_path / "pipe").exists()  # stage a never started
    produced = _two_stages(tmp_path, "data.train=@clean", "data.prompt_field=question")
    produced["stages"].insert(
        0, {"name": "clean", "kind": "data", "config": "dedup", "overrides": [f"input={rows}"]}
    )
    configs = check_pipeline(parse_pipeline(produced, source="p"))  # @clean is not read yet
    assert configs[-1].data.train == str((tmp_path / "pipe" / "clean" / "data.jsonl").absolute())


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


class StopAtStart(Callback):
    def on_start(self, job, start_step):
        raise Killed


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


def test_the_files_model_replaces_a_missing_model_of_a_stage_config_in_the_check(
    tmp_path, tiny_model_dir, sft_file
):
    """The up-front check reads each stage with the model it will start from, not the model
    its config names (here a directory that does not exist, replaced by the file's)."""
    (tmp_path / "mine.yaml").write_text("base: sft\nmodel: {name: ./no-such-model}\n")
    stage = {"name": "warm", "kind": "sft", "config": str(tmp_path / "mine.yaml")}
    data = {
        "output_dir": str(tmp_path / "pipe"),
        "model": str(tiny_model_dir),
        "stages": [stage | {"overrides": [f"data.train={sft_file}"]}],
    }
    with pytest.raises(Killed):  # the stage started: the check passed
        run_pipeline(
            parse_pipeline(data, source="p.yaml"),
            overrides=LOG,
            callbacks=lambda s: [StopAtStart()],
        )


def test_a_later_stages_config_model_is_not_checked_when_the_file_names_none(
    tmp_path, tiny_model_dir, sft_file
):
    """With no ``model`` in the file, the check read a later stage with the model its own
    config names, which its run never uses (it starts from the earlier stage's): a local
    model there that does not exist stopped the pipeline before its first stage."""
    (tmp_path / "mine.yaml").write_text("base: sft\nmodel: {name: ./no-such-model}\n")
    first = [f"model={tiny_model_dir}", f"data.train={sft_file}"]
    data = {
        "output_dir": str(tmp_path / "pipe"),
        "stages": [
            {"name": "a", "kind": "sft", "config": "sft", "overrides": first},
            {"name": "b", "kind": "sft", "config": "./mine.yaml", "overrides": first[1:]},
        ],
    }
    pipeline = parse_pipeline(data, source="p.yaml", folder=tmp_path)
    _, later = check_pipeline(pipeline)
    assert later.model.name == str(tiny_model_dir)  # stands in for stage a's final model
    with pytest.raises(Killed):  # stage a started: the check passed
        run_pipeline(pipeline, overrides=LOG, callbacks=lambda s: [StopAtStart()])


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


EVAL_PROBLEM = "Alice has twelve red apples and seven green pears in her basket today."


def _data_pipeline(tmp_path, tiny_model_dir):
    """dedup -> decontaminate -> filter -> SFT on the cleaned pairs, from one file."""
    from tests.train.conftest import SFT_PAIRS

    rows = [{**r, "answer": r["response"].rsplit(" ", 1)[1]} for r in SFT_PAIRS]
    rows += [
        {**rows[0], "prompt": "what is 12+7"},  # a duplicate of the first
        {"prompt": f"{EVAL_PROBLEM[:-1]}; how many?", "response": "19", "answer": "19"},
    ]
    (tmp_path / "raw.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "eval.jsonl").write_text(json.dumps({"problem": EVAL_PROBLEM}) + "\n")
    filter_options = ["keep=mean>=0", "n=1", "max_tokens=4", "batch_size=4", "workers=0"]
    data = {
        "output_dir": str(tmp_path / "pipe"),
        "model": str(tiny_model_dir),
        "stages": [
            {
                "name": "dedup",
                "kind": "data",
                "config": "dedup",
                "overrides": ["input=./raw.jsonl"],
            },
            {
                "name": "clean",
                "kind": "data",
                "config": "decontaminate",
                "overrides": ["against=[./eval.jsonl]", "ngram=9"],
            },
            {"name": "filter", "kind": "data", "config": "filter", "overrides": filter_options},
            {
                "name": "sft",
                "kind": "sft",
                "config": "sft",
                "overrides": ["data.train=@filter", "epochs=1", "batch_size=3", *LOG],
            },
        ],
    }
    path = tmp_path / "pipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_data_stages_clean_the_data_a_later_stage_trains_on(tmp_path, tiny_model_dir):
    pipeline = read_pipeline(str(_data_pipeline(tmp_path, tiny_model_dir)))
    out = tmp_path / "pipe"
    lines = []
    results = run_pipeline(pipeline, overrides=["threads=1"], announce=lines.append)
    dedup, clean, kept, sft = results
    # each data stage says what it kept as it finishes, as `rlvr data` does
    assert lines[1] == f"  kept 7 of 8 (dropped 1 duplicate) -> {out / 'dedup' / 'data.jsonl'}"
    assert dedup.counts == {"kept": 7, "duplicate": 1}
    assert clean.counts == {"kept": 6, "contaminated": 1}
    assert kept.counts == {"kept": 6} and kept.output == out / "filter" / "data.jsonl"
    # the filter stage says how far its sampling came (it said nothing until it ended)
    assert "  filter: 4/6 prompts" in lines and "  filter: 6/6 prompts" in lines
    (dropped,) = [
        json.loads(x) for x in (out / "clean" / "data.dropped.jsonl").read_text().splitlines()
    ]
    assert dropped["ngram"] == "alice has twelve red apples and seven green pears"
    # the data stages pass the model on; the SFT stage trained on the filter's output
    assert dedup.model_dir == kept.model_dir == Path(str(tiny_model_dir))
    config = yaml.safe_load((out / "sft" / "config.yaml").read_text())
    assert config["data"]["train"] == str(kept.output.absolute())
    assert config["model"]["name"] == str(tiny_model_dir) and config["threads"] == 1
    summary = json.loads((out / "pipeline.json").read_text())
    assert summary["finished"] and summary["stages"][1]["counts"]["contaminated"] == 1
    again = run_pipeline(pipeline, announce=lambda _: None)
    assert [r.status for r in again] == ["skipped"] * 4
    assert again[2].counts == kept.counts and again[3].model_dir == sft.model_dir


def test_an_interrupted_filter_stage_is_resumed_from_its_scores(
    tmp_path, tiny_model_dir, monkeypatch
):
    """pipeline.json said 'ran' for a filter stage that went on from its recorded scores, and
    gave a data stage's output relative (``output_dir: pipe``) when it ran, absolute when skipped."""
    data = yaml.safe_load(_data_pipeline(tmp_path, tiny_model_dir).read_text())
    data["stages"] = data["stages"][:3]  # the data stages
    data["output_dir"] = "pipe"
    monkeypatch.chdir(tmp_path)
    pipeline = parse_pipeline(data, folder=tmp_path)
    first = run_pipeline(pipeline, announce=lambda _: None)
    ran = json.loads((tmp_path / "pipe" / "pipeline.json").read_text())["stages"]
    (tmp_path / "pipe" / "filter" / "stage.json").unlink()  # stopped after its last batch
    again = run_pipeline(pipeline, announce=lambda _: None)
    assert [r.status for r in again] == ["skipped", "skipped", "resumed"]
    assert again[2].counts == first[2].counts
    summary = json.loads((tmp_path / "pipe" / "pipeline.json").read_text())
    assert summary["stages"][2]["status"] == "resumed"
    assert [r["output"] for r in summary["stages"]] == [r["output"] for r in ran]
    assert ran[0]["output"] == str(tmp_path / "pipe" / "dedup" / "data.jsonl")


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


def _data_stages(tmp_path, model: str | None, *stages: dict) -> dict:
    """A pipeline of ``stages`` with ``raw.jsonl`` beside its file and the model ``model``."""
    (tmp_path / "raw.jsonl").write_text('{"prompt": "what is 1+1", "answer": "2"}\n')
    return {"output_dir": str(tmp_path / "pipe"), "model": model, "stages": list(stages)}


DEDUP = {"name": "dedup", "kind": "data", "config": "dedup", "overrides": ["input=./raw.jsonl"]}


@pytest.mark.parametrize(
    ("stage", "message"),
    [
        (
            {"name": "d2", "kind": "data", "config": "dedup", "overrides": ["input=./no.jsonl"]},
            r"stage 'd2': input: .*no\.jsonl: no such file",
        ),
        (
            {
                "name": "clean",
                "kind": "data",
                "config": "decontaminate",
                "overrides": ["against=[math500, ./nosuch.jsonl]"],
            },
            r"stage 'clean': against: .*nosuch\.jsonl: no such file",
        ),
        (
            {"name": "f", "kind": "data", "config": "filter", "overrides": ["keep=mean>0.5"]},
            "stage 'f': filter samples with a model: set the pipeline's model",
        ),
    ],
)
def test_a_dry_run_checks_the_files_and_model_of_data_stages(tmp_path, capsys, stage, message):
    """What would stop a data stage midway is refused before the first stage starts."""
    from rlvr.pipeline import check_pipeline

    data = _data_stages(tmp_path, None, DEDUP, stage)
    pipeline = parse_pipeline(data, source="p.yaml", folder=tmp_path)
    with pytest.raises(ValueError, match=message):
        check_pipeline(pipeline)
    with pytest.raises(ValueError, match=message):
        run_pipeline(pipeline, announce=lambda _: None)
    assert not (tmp_path / "pipe").exists()  # no stage ran
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    assert pipeline_main([str(path), "--dry-run"]) == 2
    assert "rlvr: error:" in capsys.readouterr().err


DECON = {
    "name": "decon",
    "kind": "data",
    "config": "decontaminate",
    "overrides": ["against=[./raw.jsonl]"],
}
FILTER = {"name": "filter", "kind": "data", "config": "filter", "overrides": ["keep=mean<1"]}


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("decon:ngram=abc", "ngram must be an integer, got 'abc'"),
        ("decon:ngram=0", "ngram must be >= 1, got 0"),
        ("decon:common=-1", "common must be >= 0, got -1"),
        ("decon:common=1", "common=1 cuts every n-gram an evaluation problem has"),
        ("decon:against=[1]", "against must be a string, got 1"),
        ("decon:against=", r"decontaminate needs against=\[SET, \.\.\.\]"),
        ("decon:field=2", "field must be a string, got 2"),
        ("filter:n=0", "n must be >= 1, got 0"),
        ("filter:batch_size=1.5", "batch_size must be an integer, got 1.5"),
        ("filter:max_tokens=0", "max_tokens must be >= 1, got 0"),
        ("filter:temperature=hot", "temperature must be a number, got 'hot'"),
        ("filter:temperature=-1", "temperature must be >= 0"),
        ("filter:top_p=0", r"top_p must be in \(0, 1\]"),
        ("filter:verifier=bogus", "unknown verifier 'bogus'"),
        ("decon:against=[@dedup]", "override 'against=.@dedup.': value is not valid YAML"),
        ("filter:system_prompt=@you", "override 'system_prompt=@you': value is not valid YAML"),
    ],
)
def test_bad_data_stage_options_are_refused_before_any_stage_runs(
    tmp_path, capsys, override, message
):
    """docs/pipelines.md: a data stage's options are checked before the first stage starts,
    in one line (a value of the wrong kind was a traceback, a bad value an error only when
    the stage ran, after the stages before it)."""
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(_data_stages(tmp_path, "smollm2-135m", DEDUP, DECON, FILTER)))
    assert pipeline_main([str(path), override]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert re.search(f"stage '{override.split(':')[0]}': {message}", line), line
    assert not (tmp_path / "pipe").exists()  # no stage ran


def test_a_filter_stage_takes_the_files_model_or_an_earlier_stages(tmp_path):
    from rlvr.pipeline import check_pipeline

    keep = {"name": "f", "kind": "data", "config": "filter", "overrides": ["keep=mean>0.5"]}
    missing = str(tmp_path / "no-model")
    with pytest.raises(ValueError, match=f"stage 'f': model: {missing}: no such directory"):
        check_pipeline(
            parse_pipeline(_data_stages(tmp_path, missing, DEDUP, keep), folder=tmp_path)
        )
    preset = _data_stages(tmp_path, "smollm2-135m", DEDUP, keep)
    assert check_pipeline(parse_pipeline(preset, folder=tmp_path)) == [None, None]
    sft = {"name": "sft", "kind": "sft", "config": "sft", "overrides": ["data.train=@dedup"]}
    again = {**keep, "overrides": ["keep=mean>0.5", "input=@dedup"]}
    later = _data_stages(tmp_path, None, DEDUP, sft, again)
    checked = check_pipeline(parse_pipeline(later, folder=tmp_path))
    assert checked[0] is None and checked[1].data.train.endswith("dedup/data.jsonl")


def test_a_data_stage_that_keeps_no_rows_fails_in_that_stage_naming_it(tmp_path, capsys):
    """Every row contaminated: the decontaminate stage fails (not the one after it, on an
    empty file), unmarked, so that a rerun with other options runs it again."""
    (tmp_path / "eval.jsonl").write_text('{"problem": "what is 1+1"}\n')
    clean = {
        "name": "clean",
        "kind": "data",
        "config": "decontaminate",
        "overrides": ["against=[./eval.jsonl]", "ngram=2"],
    }
    sft = {"name": "sft", "kind": "sft", "config": "sft", "overrides": ["data.train=@clean"]}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(_data_stages(tmp_path, None, DEDUP, clean, sft)))
    assert pipeline_main([str(path)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("rlvr: error: stage 2/3 clean: kept 0 of 1 (dropped 1 contaminated)")
    assert "leaves nothing to train on" in line and "clean/data.dropped.jsonl" in line
    assert not (tmp_path / "pipe" / "clean" / "stage.json").exists()
    assert not (tmp_path / "pipe" / "sft").exists()
    (tmp_path / "raw.jsonl").write_text("")  # refused before any stage runs
    with pytest.raises(ValueError, match=r"p\.yaml: stage 'dedup': input: .*raw\.jsonl: no rows$"):
        run_pipeline(
            replace(read_pipeline(str(path)), output_dir=str(tmp_path / "again")),
            announce=lambda _: None,
        )
    assert not (tmp_path / "again").exists()


def test_a_finished_stage_whose_options_changed_is_refused_not_skipped(tmp_path, capsys):
    """A finished stage records its options and input; a rerun that would make it otherwise
    names the stage, what changed and the folders to delete, and deletes nothing."""
    (tmp_path / "eval.jsonl").write_text('{"problem": "an unrelated question"}\n')
    clean = {
        "name": "clean",
        "kind": "data",
        "config": "decontaminate",
        "overrides": ["against=[./eval.jsonl]"],
    }
    data = _data_stages(tmp_path, None, DEDUP, clean)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "pipe"
    assert [r.status for r in run_pipeline(read_pipeline(str(path)), announce=print)] == ["ran"] * 2
    recorded = json.loads((out / "clean" / "stage.json").read_text())["options"]
    assert recorded["ngram"] == 9 and recorded["input"] == str(out / "dedup" / "data.jsonl")
    clean["overrides"].append("ngram=20")
    path.write_text(yaml.safe_dump(data))
    refused = rf"^stage 2/2 clean: finished with other options \(ngram: 9 -> 20\); .* {out}/clean$"
    with pytest.raises(ValueError, match=refused):
        run_pipeline(read_pipeline(str(path)), announce=print)
    assert pipeline_main([str(path), "--dry-run"]) == 2  # the dry run says so too
    assert "clean: finished with other options (ngram: 9 -> 20)" in capsys.readouterr().err
    assert (out / "clean" / "stage.json").is_file()  # nothing deleted
    (tmp_path / "raw.jsonl").write_text('{"prompt": "what is 2+2", "answer": "4"}\n')
    with pytest.raises(ValueError, match=rf"^stage 1/2 dedup: .*input_sha256: .*{out}/clean$"):
        run_pipeline(read_pipeline(str(path)), announce=print)
    shutil.rmtree(out / "dedup")
    with pytest.raises(ValueError, match=rf"dedup is not finished but later .* {out}/clean to"):
        run_pipeline(read_pipeline(str(path)), announce=print)


def test_an_option_added_to_or_removed_from_a_mapping_is_a_change():
    """reward.options recorded as {} and now holding extract (or the reverse) differ, though
    no key is on both sides; a key only one rlvr version has is not a change."""
    from rlvr.pipeline.checks import _changed

    empty, extract = {"reward.options": {}}, {"reward.options.extract": "flexible"}
    assert _changed(empty, extract) == ['reward.options.extract: null -> "flexible"']
    assert _changed(extract, empty) == ['reward.options.extract: "flexible" -> null']
    assert _changed({"steps": 3}, {"steps": 3, "rollout.new_key": 1}) == []


def test_a_finished_decontaminate_stage_whose_evaluation_files_changed_is_refused(tmp_path):
    """An evaluation problem added to an --against file (or folder) would drop other rows: the
    finished stage is not skipped on such a rerun; a file that is gone only skips it."""
    (tmp_path / "eval.jsonl").write_text('{"problem": "an unrelated question"}\n')
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "test.jsonl").write_text('{"problem": "another question"}\n')
    clean = {
        "name": "clean",
        "kind": "data",
        "config": "decontaminate",
        "overrides": ["against=[./eval.jsonl, ./evals]", "ngram=2"],
    }
    data = _data_stages(tmp_path, None, DEDUP, clean)
    (tmp_path / "raw.jsonl").write_text('{"prompt": "what is 1+1"}\n{"prompt": "what is 3"}\n')
    pipeline = parse_pipeline(data, folder=tmp_path)
    assert [r.status for r in run_pipeline(pipeline, announce=print)] == ["ran"] * 2
    out = tmp_path / "pipe"
    for edited in (tmp_path / "eval.jsonl", tmp_path / "evals" / "test.jsonl"):
        before = edited.read_text()
        edited.write_text(before + '{"problem": "what is 1+1"}\n')
        with pytest.raises(
            ValueError, match=rf"^stage 2/2 clean: .*against_sha256: .*{out}/clean$"
        ):
            run_pipeline(pipeline, announce=print)
        edited.write_text(before)
    assert [r.status for r in run_pipeline(pipeline, announce=print)] == ["skipped"] * 2
    (tmp_path / "eval.jsonl").rename(tmp_path / "eval.bak")
    assert [r.status for r in run_pipeline(pipeline, announce=print)] == ["skipped"] * 2


def test_a_finished_data_stage_whose_input_is_gone_is_still_skipped(tmp_path):
    """Its output stands; the input it was made from may have moved since."""
    data = _data_stages(tmp_path, None, {**DEDUP, "overrides": ["input=raw.jsonl"]})
    run_pipeline(parse_pipeline(data, folder=tmp_path), announce=print)
    (tmp_path / "raw.jsonl").rename(tmp_path / "raw.bak")
    again = run_pipeline(parse_pipeline(data, folder=tmp_path), announce=print)
    assert [r.status for r in again] == ["skipped"]


def test_a_stage_json_that_records_no_options_is_still_finished(tmp_path):
    """A stage finished before stage.json recorded options is taken as it is."""
    data = _data_stages(tmp_path, None, {**DEDUP, "overrides": ["input=raw.jsonl"]})
    run_pipeline(parse_pipeline(data, folder=tmp_path), announce=print)
    done = tmp_path / "pipe" / "dedup" / "stage.json"
    old = {k: v for k, v in json.loads(done.read_text()).items() if k != "options"}
    done.write_text(json.dumps(old))
    data["stages"][0]["overrides"].append("field=answer")
    again = run_pipeline(parse_pipeline(data, folder=tmp_path), announce=print)
    assert [r.status for r in again] == ["skipped"]


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


def test_a_dry_run_checks_each_stages_lora_targets_on_the_models_layers(
    tmp_path, tiny_model_dir, prompt_file, capsys
):
    """`rlvr pipeline --dry-run` passed a stage's `model.lora.targets=[nosuch]` (which
    `rlvr train --dry-run` refuses); the run stopped at that stage, after the ones before it.
    A later stage is checked on the first stage's model, whose architecture it starts from
    (here GPT-NeoX's layer names, where its own config names the `tiny` preset's Qwen2)."""
    import transformers

    neox = tmp_path / "neox"
    config = transformers.GPTNeoXConfig(
        num_hidden_layers=1, hidden_size=16, num_attention_heads=2, intermediate_size=32
    )
    config.vocab_size, config.bos_token_id, config.eos_token_id = 300, 0, 0
    transformers.GPTNeoXForCausalLM(config).save_pretrained(neox)
    transformers.AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(neox)
    data = _two_stages(tmp_path, f"data.train={prompt_file}", "data.eval=null")
    data["stages"][0]["overrides"].append(f"model={neox}")  # stage b: the demo's tiny preset
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    lora = ["b:model.lora.rank=2"]
    assert (
        pipeline_main([str(path), "--dry-run", *lora, "b:model.lora.targets=[query_key_value]"])
        == 0
    )
    capsys.readouterr()
    for stage in ("a", "b"):
        argv = [str(path), "--dry-run", f"{stage}:model.lora.rank=2"]
        assert pipeline_main([*argv, f"{stage}:model.lora.targets=[q_proj]"]) == 2
        line = capsys.readouterr().err.strip()
        assert line.startswith(
            f"rlvr: error: {path}: stage '{stage}': model.lora.targets: this model has no "
            "layer named 'q_proj'; its linear layers and embeddings are embed_in, query_key_value,"
        ), line
    with pytest.raises(ValueError, match="stage 'b': model.lora.targets: .* no layer named 'q_"):
        run_pipeline(
            parse_pipeline(data, source="p"), overrides=[*lora, "b:model.lora.targets=[q_proj]"]
        )
    assert not (tmp_path / "pipe").exists()  # stage a never started


def test_a_dry_run_notes_lora_targets_it_cannot_check_as_rlvr_train_does(
    tmp_path, prompt_file, capsys, monkeypatch
):
    """On a preset not built yet, `rlvr train --dry-run` notes that the targets are not
    checked; `rlvr pipeline --dry-run` passed them without a word."""
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    data = _two_stages(tmp_path, f"data.train={prompt_file}", "data.eval=null")
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data | {"model": "smollm2-135m"}))  # not built in this cache
    lora = ["b:model.lora.rank=4", "b:model.lora.targets=[nosuch]"]
    assert pipeline_main([str(path), "--dry-run", *lora]) == 0
    assert capsys.readouterr().err == (
        "--dry-run: stage 'b': model.lora: not checked against the layers of smollm2-135m "
        "(the run builds the preset first)\n"
    )
    assert not (tmp_path / "cache").exists()  # the preset was not built


def test_a_warning_of_the_check_before_the_first_stage_is_not_given_again_by_the_stage(
    tmp_path, tiny_model_dir, prompt_file, recwarn
):
    """A full-rank `model.lora.rank` (32 on the tiny model's 32-wide layers) was warned about
    twice in a one-stage run: by the check before the first stage, and as the stage loaded.
    The check gives it once, naming the stage, as it does the run's warnings on the stage's
    data (6 prompts, fewer than a step's 8), which the stage does not give again."""
    train = [f"data.train={prompt_file}", "data.eval=null", "reward.verifier=math"]
    train += ["rollout.prompts_per_step=8", "rollout.group_size=2", "rollout.max_new_tokens=4"]
    stage = {"name": "rl", "kind": "train", "config": "demo", "overrides": ["steps=1", *train]}
    data = {"output_dir": str(tmp_path / "pipe"), "model": str(tiny_model_dir), "stages": [stage]}
    lora = ["model.lora.rank=32", "threads=1", *LOG]
    (result,) = run_pipeline(parse_pipeline(data), overrides=lora, announce=lambda line: None)
    assert result.status == "ran"
    for warned in ("reaches the smaller side", "data.train has 6 prompts, fewer than"):
        said = [str(w.message) for w in recwarn if warned in str(w.message)]
        assert len(said) == 1 and said[0].startswith("stage 'rl': "), said


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_a_filter_stage_sampler_without_its_package_is_refused_before_any_stage_runs(tmp_path):
    """``sampler=vllm`` on a filter stage where vLLM is not installed: the check before a run
    refuses it (it failed at that stage, after the stages before it had run); a dry run,
    perhaps for another machine, notes it."""
    from rlvr.pipeline import check_pipeline

    keep = {"name": "f", "kind": "data", "config": "filter"}
    keep["overrides"] = ["keep=mean>0.5", "sampler=vllm", "sampler_options={max_model_len: 64}"]
    pipeline = parse_pipeline(_data_stages(tmp_path, "smollm2-135m", DEDUP, keep), folder=tmp_path)
    with pytest.raises(ValueError, match="stage 'f': sampler=vllm: the vllm sampler needs vLLM"):
        check_pipeline(pipeline, device=True)
    said: list[str] = []
    assert check_pipeline(pipeline, note=said.append) == [None, None]
    assert said == [
        "stage 'f': sampler=vllm: the vllm sampler needs vLLM: pip install \"rlvr[vllm]\" on a "
        "GPU machine, or `make setup-vllm` for the CPU build (docs/training.md) (a run here "
        "would stop)"
    ]
    keep["overrides"][-1] = "sampler_options={memory: 1}"
    with pytest.raises(ValueError, match="stage 'f': sampler_options: unknown option.*memory for"):
        check_pipeline(
            parse_pipeline(_data_stages(tmp_path, "smollm2-135m", DEDUP, keep), folder=tmp_path)
        )


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


DECON_BAD = ["input=./bad.jsonl", "against=[./raw.jsonl]"]
FILTER_BAD = ["input=./bad.jsonl", "keep=mean<1"]


@pytest.mark.parametrize(
    ("name", "text", "step", "options", "message"),
    [
        ("bad.jsonl", "", "decontaminate", DECON_BAD, r"input: .*bad\.jsonl: no rows"),
        ("bad.jsonl", "x\n", "decontaminate", DECON_BAD, r"input: .*bad\.jsonl:1: invalid JSON"),
        ("bad.jsonl", '{"q": 1}\n', "dedup", DECON_BAD[:1], "no prompt field .* with field=NAME"),
        ("bad.csv", "a\n1\n", "dedup", ["input=./bad.csv"], r"unsupported file type '\.csv'"),
        ("bad.parquet", "x", "dedup", ["input=./bad.parquet"], r"input: .*bad\.parquet"),
        ("bad.jsonl", "", "filter", FILTER_BAD, r"input: .*bad\.jsonl: no rows"),
        ("bad.jsonl", '{"q": 1}\n', "filter", FILTER_BAD, "input: .*missing field 'prompt'"),
        ("bad.jsonl", "", "decontaminate", ["against=[./bad.jsonl]"], "against: .*no rows"),
    ],
)
def test_a_data_stage_s_unreadable_input_is_refused_before_any_stage_runs(
    tmp_path, tiny_model_dir, capsys, name, text, step, options, message
):
    """An empty, malformed or unreadable input (or `against` file) of a data stage passed the
    check and `--dry-run` (only that the file exists was checked) and stopped the pipeline
    when the stage ran, after the stages before it (here an SFT stage)."""
    (tmp_path / name).write_text(text)
    (tmp_path / "a.jsonl").write_text('{"prompt": "1", "response": "2"}\n')
    stages = [
        {"name": "sft", "kind": "sft", "config": "sft", "overrides": ["data.train=./a.jsonl"]},
        {"name": "clean", "kind": "data", "config": step, "overrides": options},
    ]
    if not any(o.startswith("input=") for o in options):  # the first data stage needs one
        stages[1]["overrides"] = ["input=./raw.jsonl", *options]
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(_data_stages(tmp_path, str(tiny_model_dir), *stages)))
    capsys.readouterr()
    for args in ([str(path), "--dry-run"], [str(path)]):
        assert pipeline_main(args) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert re.search(rf"^rlvr: error: .*p\.yaml: stage 'clean': .*{message}", line), line
    assert not (tmp_path / "pipe").exists()  # the SFT stage did not run


def test_a_stopped_pipeline_in_a_timestamped_directory_says_how_to_continue(
    tmp_path, capsys, monkeypatch
):
    """`output_dir: runs/x-{time}` (klear's): running the same command again after a stop
    starts a new directory, from the first stage. The directory was named only by a model
    stage's line; now the command that continues it (`-o DIR`) is said before the first
    stage, after Ctrl-C and after an error in a stage."""
    data = _data_stages(tmp_path, None, DEDUP, DECON)
    data["output_dir"] = str(tmp_path / "p-{time}")
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    capsys.readouterr()
    assert pipeline_main([str(path), "decon:ngram=1"]) == 2  # every row dropped
    out, err = capsys.readouterr()
    (made,) = tmp_path.glob("p-*")
    again = f"rlvr pipeline {path} -o {made} decon:ngram=1"
    assert out.splitlines()[0] == f"pipeline:    {made}  (to continue after a stop: {again})"
    (line,) = err.splitlines()
    assert line.startswith("rlvr: error: stage 2/2 decon: kept 0 of 1")
    assert line.endswith(f"; to continue: {again}")
    import rlvr.pipeline.run
    from rlvr.evaluation.data_steps import DecontaminateOptions, run_step

    def interrupted(options, *args, **kwargs):  # Ctrl-C in stage 2, after stage 1 wrote
        if isinstance(options, DecontaminateOptions):
            raise KeyboardInterrupt
        return run_step(options, *args, **kwargs)

    monkeypatch.setattr(rlvr.pipeline.run, "run_step", interrupted)
    assert pipeline_main([str(path), "-o", str(made)]) == 130  # -o given: nothing to add
    assert capsys.readouterr().err.splitlines() == ["rlvr: interrupted"]
    shutil.rmtree(made)
    assert pipeline_main([str(path)]) == 130
    (made,) = tmp_path.glob("p-*")
    assert capsys.readouterr().err.splitlines() == [
        f"to continue: rlvr pipeline {path} -o {made}",
        "rlvr: interrupted",
    ]
    monkeypatch.undo()
    assert pipeline_main([str(path), "-o", str(tmp_path / "o-{time}")]) == 0  # -o expands too
    (given,) = tmp_path.glob("o-2*")  # its last line named runs/o-{time}/pipeline.json
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"pipeline:    {given}/pipeline")


def test_a_second_run_in_the_same_output_directory_is_refused_while_one_runs(tmp_path):
    """Two `rlvr pipeline` runs on one directory (a second terminal) ran the same stages at
    once: the second "resumed" the stage the first was training, the two wrote over each
    other's checkpoints and metrics, and the first stopped with a checkpoint I/O error."""
    from filelock import FileLock

    data = _data_stages(tmp_path, None, DEDUP)
    out = tmp_path / "pipe"
    out.mkdir()
    with FileLock(out / ".pipeline.lock"):  # the first run, in another process
        with pytest.raises(ValueError, match=f"^{out}: another rlvr pipeline is running there"):
            run_pipeline(parse_pipeline(data, folder=tmp_path), announce=print)
        assert not (out / "dedup").exists()
    results = run_pipeline(parse_pipeline(data, folder=tmp_path), announce=print)
    assert [r.status for r in results] == ["ran"]  # the lock goes with the run that held it
    assert [r.status for r in run_pipeline(parse_pipeline(data, folder=tmp_path))] == ["skipped"]


@pytest.mark.parametrize("under", ["", "sub"])
def test_an_output_directory_that_is_a_file_is_refused_before_any_stage_runs(
    tmp_path, tiny_model_dir, capsys, under
):
    """A file as `-o` (or a folder under one) was found only as a stage wrote: a data stage
    after the stages before it, an SFT stage naming `log.output_dir`, which no one set."""
    (tmp_path / "a.jsonl").write_text('{"prompt": "1", "response": "2"}\n')
    sft = {"name": "sft", "kind": "sft", "config": "sft", "overrides": ["data.train=./a.jsonl"]}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(_data_stages(tmp_path, str(tiny_model_dir), sft)))
    (tmp_path / "taken").write_text("a file\n")
    out = tmp_path / "taken" / under if under else tmp_path / "taken"
    capsys.readouterr()
    for dry in (["--dry-run"], []):
        assert pipeline_main([str(path), "-o", str(out), *dry]) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert (
            line
            == f"rlvr: error: output directory {out}: {tmp_path / 'taken'} is a file, not a directory"
        )


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


def test_an_interrupted_stage_after_a_stage_to_rerun_is_named_with_the_folders_to_delete(
    tmp_path, tiny_model_dir, sft_file, prompt_file
):
    """A finished stage with other options named only the finished folders after it to delete:
    a later stage interrupted with checkpoints was left, and after the earlier stage ran
    again it resumed from a checkpoint trained from the earlier stage's old model."""
    pipeline = read_pipeline(str(_pipeline_file(tmp_path, tiny_model_dir, sft_file, prompt_file)))
    out = tmp_path / "pipe"
    with pytest.raises(Killed):  # warm finished, math stopped after a checkpoint
        run_pipeline(
            pipeline,
            callbacks=lambda s: [KillAt(2)] if s.name == "math" else [],
            announce=lambda _: None,
        )
    assert any((out / "math" / "checkpoints").glob("step_*"))
    refused = rf"^stage 1/3 warm: finished with other options .* delete {out}/warm, {out}/math$"
    with pytest.raises(ValueError, match=refused):
        run_pipeline(pipeline, overrides=["warm:batch_size=2"], announce=lambda _: None)
    shutil.rmtree(out / "warm")  # as told before: only warm, so math would resume
    refused = rf"^stage 1/3 warm is not finished but later stages .* delete {out}/math to"
    with pytest.raises(ValueError, match=refused):
        run_pipeline(pipeline, overrides=["warm:batch_size=2"], announce=lambda _: None)
    assert not (out / "warm").exists()


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
