"""Running a pipeline (:mod:`rlvr.pipeline.run`): stages chained by their final models, resumed
after a kill, data stages, one run at a time, stops and how to continue."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from rlvr.cli.pipeline import main as pipeline_main
from rlvr.pipeline import parse_pipeline, read_pipeline, run_pipeline
from rlvr.train.metrics import read_metrics

from .helpers import (
    DECON,
    DEDUP,
    LOG,
    KillAt,
    Killed,
    _data_pipeline,
    _data_stages,
    _model_name,
    _pipeline_file,
)


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
