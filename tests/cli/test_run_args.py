"""``rlvr train`` / ``rlvr sft`` arguments: overrides on either side of the options."""

import argparse

import pytest

from rlvr.cli.common import parse_run_args
from rlvr.train.config import SFTConfig, TrainConfig


def _parse(cls, argv, default_config="demo"):
    return parse_run_args(argparse.ArgumentParser(), cls, argv, default_config=default_config)


def test_overrides_before_and_after_config():
    cfg, resume, _, _ = _parse(TrainConfig, ["steps=3", "--config", "abc_grpo", "seed=2"])
    assert (cfg.steps, cfg.seed, cfg.objective.name, resume) == (3, 2, "abc_grpo", False)


def test_overrides_around_resume_of_a_run_directory(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("base: demo\nsteps: 2\n")
    cfg, resume, _, _ = _parse(TrainConfig, ["seed=5", "--resume", str(run), "steps=7"])
    assert (cfg.steps, cfg.seed, cfg.log.output_dir, resume) == (7, 5, str(run), True)


def test_resume_without_a_directory_reads_the_saved_config_of_the_run_it_continues(
    tmp_path, monkeypatch
):
    """A bare `rlvr train --resume` continued the newest runs/demo-<time> with the demo's
    configuration (and the overrides), not the one the run was started with."""
    monkeypatch.chdir(tmp_path)
    for name, steps in (("demo-20260101-000000", 4), ("demo-20260102-000000", 2)):
        (tmp_path / "runs" / name).mkdir(parents=True)
        saved = f"base: demo\nsteps: {steps}\nobjective: {{name: abc_grpo}}\n"
        (tmp_path / "runs" / name / "config.yaml").write_text(saved)
    cfg, resume, _, _ = _parse(TrainConfig, ["--resume", "seed=5"])
    got = (cfg.steps, cfg.objective.name, cfg.seed, cfg.log.output_dir, resume)
    assert got == (2, "abc_grpo", 5, "runs/demo-20260102-000000", True)


def test_resume_of_a_log_output_dir_reads_its_saved_config(tmp_path):
    """`--resume log.output_dir=DIR` (no --config) read the default (or class default)
    configuration, where `--resume DIR` reads the run's; the two are the same now."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("epochs: 3\ndata: {train: x.jsonl}\n")
    cfg, _, _, _ = _parse(SFTConfig, ["--resume", f"log.output_dir={run}", "seed=4"], None)
    assert (cfg.epochs, cfg.data.train, cfg.seed, cfg.log.output_dir) == (3, "x.jsonl", 4, str(run))


def test_resume_with_no_earlier_run_starts_the_default_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg, resume, _, _ = _parse(TrainConfig, ["--resume", "steps=7"])
    assert (cfg.steps, cfg.objective.name, cfg.log.output_dir, resume) == (
        7,
        "grpo",
        "runs/demo-{time}",
        True,
    )


def test_sft_overrides_after_config(tmp_path):
    cfg, _, _, _ = _parse(SFTConfig, ["epochs=3", "--config", "sft", "data.train=x.jsonl"], None)
    assert (cfg.epochs, cfg.data.train) == (3, "x.jsonl")


def test_unknown_option_is_still_refused():
    with pytest.raises(SystemExit):
        _parse(TrainConfig, ["steps=3", "--nope"])


@pytest.mark.parametrize("argv", [["--steps", "3"], ["--steps=3"]])
def test_a_key_written_as_an_option_is_shown_as_key_value(capsys, argv):
    with pytest.raises(SystemExit):
        _parse(TrainConfig, argv)
    assert (
        "unrecognized option --steps; configuration keys are key=value: steps=3"
        in capsys.readouterr().err
    )


def test_an_abbreviated_option_still_reaches_argparse():
    cfg, _, dry, _ = _parse(TrainConfig, ["--conf", "abc_grpo", "--dry"])
    assert cfg.objective.name == "abc_grpo" and dry


def test_a_yaml_file_without_required_keys_is_told_how_to_inherit_them(tmp_path):
    mine = tmp_path / "my.yaml"
    mine.write_text("steps: 3\n")
    with pytest.raises(ValueError, match="missing required key.* data .*base: demo"):
        _parse(TrainConfig, ["--config", str(mine)])


def test_sft_help_shows_sft_overrides(capsys):
    from rlvr.cli import main as rlvr

    with pytest.raises(SystemExit):
        rlvr(["sft", "--help"])
    out = capsys.readouterr().out
    assert "data.train=pairs.jsonl epochs=2" in out and "objective.name" not in out


@pytest.mark.parametrize(
    ("command", "listed", "not_listed"), [("train", "demo", "sft"), ("sft", "sft", "demo")]
)
def test_help_lists_only_the_embedded_configs_the_command_runs(capsys, command, listed, not_listed):
    from rlvr.cli import main as rlvr

    with pytest.raises(SystemExit):
        rlvr([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps the list
    configs = out.split("embedded config (", 1)[1].split(")", 1)[0].split(", ")
    assert listed in configs and not_listed not in configs
    assert command == "sft" or "abc/grpo" in configs


def test_train_help_lists_every_key_with_its_default_and_docstring(capsys):
    from rlvr.cli import main as rlvr
    from rlvr.train.config_keys import config_keys

    with pytest.raises(SystemExit):
        rlvr(["train", "--help"])
    out = capsys.readouterr().out
    assert "  rollout.group_size=8 " in out and "Completions sampled per prompt (G)." in out
    assert "  objective.eps_low=0.2 " in out  # the objective's hyperparameters sit in its section
    assert "objective.params" not in out
    listed = [line.split("=", 1)[0].strip() for line in out.splitlines() if line.startswith("  ")]
    assert {k.key for k in config_keys(TrainConfig)} <= set(listed)


def test_train_help_shows_the_values_and_objective_of_the_run_it_would_start(capsys):
    """With no --config, `rlvr train` runs the demo: --help shows its values (steps=60), and
    an objective named on the line brings its own hyperparameters (ABC-GRPO's eps1..eps4)."""
    from rlvr.cli import main as rlvr

    with pytest.raises(SystemExit):
        rlvr(["train", "objective.name=abc_grpo", "objective.eps3=0.3", "--help"])
    out = capsys.readouterr().out
    assert (
        "  steps=60 " in out and "  objective.eps3=0.3 " in out and "  objective.eps4=0.2 " in out
    )
    assert "objective.eps_low" not in out


@pytest.mark.parametrize("argv", [["--config=gppo"], ["--conf", "gppo"]])
def test_train_help_reads_the_config_however_it_is_written(capsys, argv):
    from rlvr.cli import main as rlvr

    with pytest.raises(SystemExit):
        rlvr(["train", *argv, "--help"])
    assert "  objective.name=gppo " in capsys.readouterr().out


def test_config_keys_expand_a_required_section_with_its_class_defaults():
    from rlvr.train.config_keys import config_keys

    keys = {k.key: k for k in config_keys(SFTConfig)}
    assert keys["data.train"].default == "required"
    assert keys["data.max_tokens"].default == "1024"
    assert keys["log.plots"].doc.startswith("Write PNG plots")


def test_resume_of_a_checkpoint_directory_names_its_run(tmp_path):
    """`--resume RUN/checkpoints/step_000008` said "pass --config as well", which would have
    started a fresh run inside the checkpoint."""
    run = tmp_path / "run"
    step = run / "checkpoints" / "step_000008"
    step.mkdir(parents=True)
    (run / "config.yaml").write_text("base: demo\n")
    (step / "trainer_state.pt").write_bytes(b"")
    with pytest.raises(
        ValueError, match=rf"a checkpoint of the run {run}; resume the run: --resume {run}$"
    ):
        _parse(TrainConfig, ["--resume", str(step)])


@pytest.mark.parametrize(
    ("cls", "saved", "other"),
    [
        (TrainConfig, "epochs: 1\nbatch_size: 4\ndata: {train: x.jsonl}\n", "rlvr sft"),
        (SFTConfig, "base: demo\nrollout: {group_size: 4}\n", "rlvr train"),
    ],
)
def test_resume_of_the_other_commands_run_says_which_command(tmp_path, cls, saved, other):
    """`rlvr train --resume <an sft run>` stopped with "unknown key 'epochs'"."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(saved)
    with pytest.raises(ValueError, match=rf"is an? {other} run: resume it with {other} --resume"):
        _parse(cls, ["--resume", str(run)], None)


def test_train_help_says_why_the_command_lines_configuration_does_not_load(capsys):
    """`rlvr train objective.name=abc_grp --help` listed GRPO's keys and defaults as if the
    name were fine; it now ends saying the configuration does not load, and why."""
    from rlvr.cli import main as rlvr

    with pytest.raises(SystemExit):
        rlvr(["train", "objective.name=abc_grp", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert out.endswith(
        "the configuration of this command line does not load: objective: unknown objective "
        "'abc_grp'; valid: grpo, dapo, dr_grpo, abc_grpo, cispo, etr, gmpo, gppo, gspo, pmpo, "
        "apmpo, or module.name for one your own module registers (did you mean abc_grpo?)"
    )
    with pytest.raises(SystemExit):
        rlvr(["sft", "--help"])  # nothing named, no default: no note
    assert "does not load" not in capsys.readouterr().out


def test_a_key_given_twice_on_the_command_line_is_warned_with_the_value_kept(tmp_path, recwarn):
    """`rlvr train optim.lr=1e-3 ... optim.lr=2e-3` kept the last without a word; one line
    names the key and the value kept. A key given once (one on each side of --resume DIR,
    which sets log.output_dir itself) says nothing."""
    argv = ["optim.lr=1e-3", "--config", "demo", "steps=3", "optim.lr=2e-3", "seed=1"]
    with pytest.warns(UserWarning) as said:
        cfg, _, _, _ = _parse(TrainConfig, argv)
    assert cfg.optim.lr == 2e-3
    assert [str(w.message) for w in said] == [
        "optim.lr is given twice on the command line (1e-3, then 2e-3); the last is kept: "
        "optim.lr=2e-3"
    ]
    recwarn.clear()
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("base: demo\nsteps: 2\nlog: {output_dir: elsewhere}\n")
    _parse(TrainConfig, ["seed=5", "--resume", str(run), "steps=7"])
    _parse(SFTConfig, ["data.train=x.jsonl", "steps=3"], None)
    assert not [w for w in recwarn if "command line" in str(w.message)]


def test_a_pipeline_and_a_study_warn_only_of_their_own_command_line(recwarn):
    """A pipeline stage's overrides (klear's math stage: threads=2) and then the command
    line's (threads=1) are one list by design: only a key repeated on the command line is
    warned, by the command; `rlvr compare` likewise."""
    from rlvr.cli import main as rlvr

    def said() -> list[str]:
        found = [str(w.message) for w in recwarn if "on the command line" in str(w.message)]
        recwarn.clear()
        return found

    assert rlvr(["pipeline", "klear", "threads=1", "--dry-run"]) == 0
    assert said() == []
    assert rlvr(["pipeline", "klear", "threads=2", "threads=1", "--dry-run"]) == 0
    assert said() == [
        "threads is given twice on the command line (2, then 1); the last is kept: threads=1"
    ]
    assert rlvr(["compare", "abc", "steps=3", "steps=4", "steps=5", "--dry-run"]) == 0
    assert said() == [
        "steps is given 3 times on the command line (3, then 4, then 5); the last is kept: steps=5"
    ]
