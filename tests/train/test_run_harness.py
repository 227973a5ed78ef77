"""The run harness: callbacks see every step, evaluation and checkpoint, also on resume."""

import math
from pathlib import Path

import pytest
import yaml

from rlvr.train import Callback
from rlvr.train.loop import train
from rlvr.train.metrics import read_metrics
from rlvr.train.supervised import sft


class Recorder(Callback):
    def __init__(self):
        self.events = []

    def on_start(self, job, start_step):
        self.events.append(("start", start_step))

    def on_step(self, job, step, record):
        self.events.append(("step", step, len(record.prompts), record.metrics["data/epoch"]))

    def on_eval(self, job, step, record):
        self.events.append(("eval", step, sorted(record.scores)))

    def on_checkpoint(self, job, step, path):
        self.events.append(("checkpoint", step, path.name))

    def on_end(self, job, result):
        self.events.append(("end", sorted(result.evals)))


def test_callbacks_see_the_whole_run(train_config):
    cfg = train_config("steps=3", "eval.at_start=true", "eval.at_end=true", "checkpoint.every=2")
    recorder = Recorder()
    result = train(cfg, callbacks=[recorder])
    assert recorder.events == [
        ("start", 0),
        ("eval", 0, ["avg@1", "avg@2", "pass@1"]),
        ("step", 1, 2, 0.0),
        ("step", 2, 2, 0.0),
        ("checkpoint", 2, "step_000002"),
        ("eval", 3, ["avg@1", "avg@2", "pass@1"]),
        ("step", 3, 2, 0.0),  # 6 prompts, 2 per step: three steps exhaust the first epoch
        ("checkpoint", 3, "step_000003"),
        ("end", [0, 3]),
    ]
    assert sorted(result.evals) == [0, 3]
    rows = read_metrics(result.run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2, 3] and "eval/avg@1" in rows[-1]


def test_resumed_run_starts_after_its_checkpoint(train_config):
    cfg = train_config("steps=2", "checkpoint.every=1")
    train(cfg)
    recorder = Recorder()
    longer = train_config("steps=3", "checkpoint.every=1")
    result = train(longer, resume=True, callbacks=[recorder])
    assert recorder.events[0] == ("start", 2)
    assert [e[1] for e in recorder.events if e[0] == "step"] == [3]
    assert [r["step"] for r in read_metrics(result.run_dir / "metrics.jsonl")] == [1, 2, 3]


def test_a_resume_that_changes_the_config_keeps_the_record_of_the_steps_so_far(train_config):
    """config.yaml must say what the run trained with: a resume under another objective
    keeps the saved file as config.step_000002.yaml and warns with the keys that changed."""
    cfg = train_config("steps=2", "checkpoint.every=1")
    train(cfg)
    run_dir = Path(cfg.log.output_dir)
    before = (run_dir / "config.yaml").read_text()
    changed = train_config("steps=3", "checkpoint.every=1", "objective.name=abc_grpo")
    with pytest.warns(
        UserWarning,
        match=r"objective.name 'grpo' -> 'abc_grpo'.*made step_000002 is kept in config.step_000002.yaml",
    ):
        train(changed, resume=True)
    assert (run_dir / "config.step_000002.yaml").read_text() == before
    assert "abc_grpo" in (run_dir / "config.yaml").read_text()


def test_a_resume_that_extends_steps_keeps_the_record_once(train_config):
    """More steps stretch the schedule: a change, recorded. A second changed resume from the
    same checkpoint keeps the first record, which says what steps 1-2 ran with."""
    cfg = train_config("steps=2", "checkpoint.every=1")
    train(cfg)
    run_dir = Path(cfg.log.output_dir)
    before = (run_dir / "config.yaml").read_text()
    longer = train_config("steps=3", "checkpoint.every=100", "checkpoint.save_final=false")
    with pytest.warns(UserWarning, match=r"steps 2 -> 3"):
        train(longer, resume=True)
    with pytest.warns(UserWarning, match=r"steps 3 -> 4"):  # config.yaml said 3 since
        train(train_config("steps=4", "checkpoint.every=100"), resume=True)
    assert (run_dir / "config.step_000002.yaml").read_text() == before


def test_a_finished_run_resumed_with_a_change_is_refused_and_keeps_its_record(train_config, capsys):
    """`--resume RUN optim.lr=...` of a run at its last step ran no step, yet rewrote
    config.yaml (the old one kept as config.step_N.yaml) as if it had trained with that lr.
    A change of how steps train is refused now; a bookkeeping change leaves config.yaml."""
    cfg = train_config("steps=2", "checkpoint.every=1")
    train(cfg)
    run_dir = Path(cfg.log.output_dir)
    before = {p.name: p.read_text() for p in run_dir.glob("*.*") if p.is_file()}
    with pytest.raises(
        ValueError,
        match=r"the run is finished \(step_000002 is its last step\), "
        r"so optim.lr 0.001 -> 0.01 would train no step: resume with more steps",
    ):
        train(train_config("steps=2", "checkpoint.every=1", "optim.lr=0.01"), resume=True)
    train(train_config("steps=2", "checkpoint.every=1", "eval.every=1"), resume=True)
    assert "config.yaml is left as it was" in capsys.readouterr().err
    assert {p.name: p.read_text() for p in run_dir.glob("*.*") if p.is_file()} == before


def test_a_resume_that_drops_a_verifier_option_is_a_change(train_config):
    """reward.options held {extract: ...} and now holds {}: no key is on both sides, yet the
    run scores otherwise from here on."""
    from rlvr.train.run_dir import RunDir, _keep_changed_config

    cfg = train_config("steps=1", "checkpoint.every=1")
    train(cfg)
    run_dir = Path(cfg.log.output_dir)
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    saved["reward"]["options"] = {"extract": "flexible"}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(saved))
    run = RunDir(run_dir, run_dir / "checkpoints" / "step_000001", resume=True)
    with pytest.warns(UserWarning, match=r"reward.options.extract 'flexible' -> '-'"):
        _keep_changed_config(cfg, run)
    assert (run_dir / "config.step_000001.yaml").is_file()


def test_a_resume_on_a_full_disk_leaves_config_yaml_whole(train_config):
    """The disk fills while a changed resume writes config.yaml: the run's record of its
    configuration stays whole, so the next --resume (once there is room) reads it. It was
    moved aside and rewritten in place, and left cut at the limit."""
    import resource
    import warnings

    from rlvr.train.run_dir import locate_run_dir, open_run_dir

    cfg = train_config("steps=1", "checkpoint.every=1")
    train(cfg)
    saved = Path(cfg.log.output_dir) / "config.yaml"
    before = saved.read_text()
    longer = train_config("steps=2", "checkpoint.every=1")
    run = locate_run_dir(longer, resume=True)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) // 2, hard))  # Python ignores SIGXFSZ
    try:
        with pytest.raises(OSError), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            open_run_dir(longer, run)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert saved.read_text() == before
    with pytest.warns(UserWarning, match="steps 1 -> 2"):
        result = train(longer, resume=True)
    assert [r["step"] for r in read_metrics(result.run_dir / "metrics.jsonl")] == [1, 2]


def test_a_full_disk_mid_run_names_the_file_and_how_the_run_continues(train_config):
    """The disk fills after step 1's checkpoint: the error named no file ("[Errno 27] File too
    large") and said nothing of --resume; the run then continues exactly."""
    import resource

    limits = resource.getrlimit(resource.RLIMIT_FSIZE)

    class FillDisk(Callback):
        def on_checkpoint(self, job, step, path):  # Python ignores SIGXFSZ: writes raise EFBIG
            size = (path.parent.parent / "metrics.jsonl").stat().st_size
            resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, limits[1]))

    cfg = train_config("steps=3", "checkpoint.every=1")
    try:
        with pytest.raises(OSError) as err:
            train(cfg, callbacks=[FillDisk()])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
    run_dir = Path(cfg.log.output_dir)
    assert f"{run_dir / 'metrics.jsonl'}" in str(err.value)
    assert str(err.value).endswith(
        f"--resume {run_dir} (in a pipeline or a study: running it again) continues from step_000001"
    )
    result = train(cfg, resume=True)
    assert [r["step"] for r in read_metrics(result.run_dir / "metrics.jsonl")] == [1, 2, 3]


def test_plots_that_cannot_be_written_warn_and_the_run_is_done(train_config):
    """A plots folder that could not be written made a finished, checkpointed run exit 2."""

    class BlockPlots(Callback):
        def on_checkpoint(self, job, step, path):
            (path.parent.parent / "plots").write_text("a file where the folder goes")

    cfg = train_config("steps=1", "log.plots=true")
    with pytest.warns(UserWarning, match="plots not written .*; rlvr plot .* draws them"):
        result = train(cfg, callbacks=[BlockPlots()])
    assert result.plots == [] and result.model_dir is not None and result.model_dir.is_dir()


def test_a_finished_run_without_a_checkpoint_is_not_started_over(train_config):
    """checkpoint.save_final=false and no checkpoint due: --resume (to extend it, say) warned
    'starting from scratch' and dropped the finished run's metrics and config."""
    cfg = train_config("steps=2", "checkpoint.save_final=false")
    train(cfg)
    run_dir = Path(cfg.log.output_dir)
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    with pytest.raises(ValueError, match=r"finished its 2 steps without a checkpoint"):
        train(train_config("steps=3", "checkpoint.save_final=false"), resume=True)
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before


def test_a_run_whose_checkpoints_were_deleted_is_not_started_over(train_config):
    """``rlvr compare`` deletes a finished run's checkpoints; ``rlvr train --resume RUN
    steps=...`` on it (to extend it) warned 'no checkpoint; starting from scratch' and
    replaced the metrics and samples of every step it had logged."""
    import shutil

    cfg = train_config("steps=3", "checkpoint.every=1")
    train(cfg)
    run_dir = Path(cfg.log.output_dir)
    shutil.rmtree(run_dir / "checkpoints")
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    with pytest.raises(ValueError, match=r"its metrics reach step 3 but no checkpoint is left"):
        train(train_config("steps=4", "checkpoint.every=1"), resume=True)
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before


def test_a_run_killed_while_writing_its_first_checkpoint_starts_over(train_config):
    """The step of the first checkpoint is logged, then the kill: nothing to continue
    from, and nothing lost by starting over."""

    class Kill(Callback):
        def on_step(self, job, step, record):
            if step == 2:
                raise KeyboardInterrupt  # as a kill before step 2's checkpoint is complete

    cfg = train_config("steps=3", "checkpoint.every=2")
    with pytest.raises(KeyboardInterrupt):
        train(cfg, callbacks=[Kill()])
    assert not list(Path(cfg.log.output_dir).glob("checkpoints/step_*"))
    with pytest.warns(UserWarning, match="no checkpoint in .*; starting from scratch"):
        result = train(cfg, resume=True)
    assert [r["step"] for r in read_metrics(result.run_dir / "metrics.jsonl")] == [1, 2, 3]


def test_a_resume_with_the_same_config_keeps_one_config_file(train_config, recwarn):
    cfg = train_config("steps=2", "checkpoint.every=1")
    train(cfg)
    train(cfg, resume=True)
    assert sorted(p.name for p in Path(cfg.log.output_dir).glob("config*.yaml")) == ["config.yaml"]
    assert not [w for w in recwarn if "--resume" in str(w.message)]


def test_resuming_a_finished_run_reports_its_final_model(train_config):
    """No step is left, yet the run has a final model: the result and summary name it."""
    finished = train(train_config("steps=2"))
    again = train(train_config("steps=2"), resume=True)
    assert finished.model_dir is not None and again.model_dir == finished.model_dir
    assert f"model:            {finished.model_dir}" in again.summary_lines()


def test_a_callback_that_raises_stops_the_run_and_keeps_its_checkpoints(train_config):
    class Stop(Callback):
        def on_step(self, job, step, record):
            if step == 2:
                raise KeyboardInterrupt

    cfg = train_config("steps=4", "checkpoint.every=1")
    with pytest.raises(KeyboardInterrupt):
        train(cfg, callbacks=[Stop()])
    result = train(cfg, resume=True)  # continues from step 1's checkpoint
    assert [r["step"] for r in read_metrics(result.run_dir / "metrics.jsonl")] == [1, 2, 3, 4]


def test_a_checkpoint_that_cannot_be_written_stops_in_one_line_and_leaves_no_part(
    train_config, monkeypatch
):
    """A full disk while step 2's checkpoint is written: an OSError naming it and how the run
    continues, nothing of it left behind (a partial copy fills the disk further), and the
    run resumes from step 1 once there is room."""
    import torch

    from rlvr.train import checkpoint

    save = torch.save

    def full_disk(payload, path):
        Path(path).write_bytes(b"PK\x03\x04 cut short")
        if payload["step"] == 2:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1 vs 2")
        save(payload, path)

    cfg = train_config("steps=3", "checkpoint.every=1")
    monkeypatch.setattr(checkpoint.torch, "save", full_disk)
    with pytest.raises(OSError, match=r"could not write checkpoint .*step_000002") as err:
        train(cfg)
    assert str(err.value).endswith("continues from step_000001")
    run_dir = Path(cfg.log.output_dir)
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step_000001"]
    monkeypatch.undo()
    result = train(cfg, resume=True)
    assert [r["step"] for r in read_metrics(result.run_dir / "metrics.jsonl")] == [1, 2, 3]


def test_sft_runs_in_the_same_harness(tiny_model_dir, sft_file, tmp_path):
    from rlvr.train.config import SFTConfig
    from rlvr.train.overrides import from_dict

    cfg = from_dict(
        SFTConfig,
        {
            "model": {"name": str(tiny_model_dir)},
            "data": {"train": sft_file, "eval": sft_file},
            "batch_size": 3,
            "epochs": 2,
            "log": {
                "output_dir": str(tmp_path / "sft"),
                "tensorboard": False,
                "progress": "off",
                "plots": False,
            },
        },
    )
    recorder = Recorder()
    result = sft(cfg, callbacks=[recorder])
    evals = [e for e in recorder.events if e[0] == "eval"]
    # before training (eval.at_start, as rlvr train's), then at the end of each epoch
    assert evals == [("eval", step, ["eval_loss"]) for step in (0, 2, 4)]
    assert [e[1] for e in recorder.events if e[0] == "step"] == [1, 2, 3, 4]
    rows = read_metrics(result.run_dir / "metrics.jsonl")
    assert result.evals[0]["eval_loss"] == rows[0]["sft/eval_loss"] and rows[0]["step"] == 0
    assert result.evals[4]["eval_loss"] == rows[-1]["sft/eval_loss"]
    lines = result.summary_lines()
    before, after = result.evals[0]["eval_loss"], result.evals[4]["eval_loss"]
    assert lines[0] == f"held-out before:  eval_loss {before:.3f}"
    assert lines[3] == (
        f"held-out change:  eval_loss {before:.3f} -> {after:.3f} ({after - before:+.3f})"
    )


def test_a_loss_changes_by_its_own_units_not_in_points():
    """SFT's held-out ``eval_loss`` (nats) is no share of problems: its change is before ->
    after (difference), where ``avg@k`` changes in percentage points (x 100, ``pts``)."""
    from rlvr.train.harness import RunResult

    evals = {0: {"eval_loss": 2.3104}, 4: {"eval_loss": 2.0}, 8: {"eval_loss": 1.8701}}
    result = RunResult(Path("run"), None, {}, evals)
    assert result.summary_lines()[:4] == [
        "held-out before:  eval_loss 2.310",
        "held-out @ 4:     eval_loss 2.000",
        "held-out @ 8:     eval_loss 1.870",
        "held-out change:  eval_loss 2.310 -> 1.870 (-0.440)",
    ]
    assert result.change_points() == {}
    assert result.change_values() == {"eval_loss": (2.3104, 1.8701)}
    late = RunResult(Path("run"), None, {}, {4: {"eval_loss": 2.0}, 8: {"eval_loss": 1.87}})
    assert not any(line.startswith("held-out change") for line in late.summary_lines())


def test_the_change_line_gives_each_paired_interval_and_its_problems():
    from rlvr.evaluation.paired import Difference
    from rlvr.train.harness import RunResult

    evals = {0: {"avg@4": 0.5, "pass@4": 0.8, "pass@2": 0.7}, 10: {"avg@4": 0.754, "pass@4": 0.9}}
    intervals = {
        "avg@4": Difference(0.254, 0.21, 0.298, 1e-9, 200),
        "pass@4": Difference(0.1, 0.012, 0.188, 0.03, 200),
    }
    result = RunResult(Path("run"), None, {}, evals, change_intervals=intervals)
    assert result.summary_lines()[2] == (
        "held-out change:  avg@4 +25.4 pts [+21.0, +29.8]  pass@4 +10.0 pts [+1.2, +18.8]"
        "  (95%, paired over 200 problems)"
    )
    one = {"avg@4": Difference(0.254, math.nan, math.nan, math.nan, 1)}  # one problem: no interval
    lonely = RunResult(Path("run"), None, {}, evals, change_intervals=one)
    assert lonely.summary_lines()[2] == "held-out change:  avg@4 +25.4 pts  pass@4 +10.0 pts"
    assert RunResult(Path("run"), None, {}, evals).summary_lines()[2] == lonely.summary_lines()[2]
