import json

import pytest
import yaml

from rlvr.cli import main as rlvr
from rlvr.train.metrics import read_metrics


def _write_config(train_config, tmp_path, *overrides, out="cli"):
    from rlvr.train.overrides import dump_yaml

    path = tmp_path / "run.yaml"
    path.write_text(dump_yaml(train_config(*overrides, out=out)))
    return path


def test_train_cli_runs_a_config_with_overrides(train_config, tmp_path, capsys):
    path = _write_config(train_config, tmp_path)
    out = tmp_path / "cli-run"
    assert (
        rlvr(
            [
                "train",
                "--config",
                str(path),
                "steps=1",
                f"log.output_dir={out}",
                "rollout.group_size=2",
            ]
        )
        == 0
    )
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["steps"] == 1 and saved["rollout"]["group_size"] == 2
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [1]
    assert "metrics:" in capsys.readouterr().out


def test_train_cli_resume_reads_the_saved_config(train_config, tmp_path):
    path = _write_config(train_config, tmp_path, "steps=1")
    out = tmp_path / "r"
    assert rlvr(["train", "--config", str(path), f"log.output_dir={out}"]) == 0
    assert rlvr(["train", "--resume", str(out), "steps=2"]) == 0  # extend the finished run
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [1, 2]
    args = ["train", "--config", str(out / "config.yaml"), "--resume", "steps=3"]
    assert rlvr(args) == 0  # `--resume key=value`: resume log.output_dir, extended
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [1, 2, 3]


def test_cli_reports_configuration_errors(tmp_path, capsys):
    assert rlvr(["train", "--config", str(tmp_path / "missing.yaml")]) == 2
    assert f"config file {tmp_path / 'missing.yaml'}: no such file" in capsys.readouterr().err
    assert rlvr(["train", "--config", "demoo"]) == 2
    assert "neither a file nor an embedded config (did you mean demo?" in capsys.readouterr().err
    assert rlvr(["train", "data.train=x.jsonl", "rollout.group_sise=4"]) == 2
    assert "unknown key 'rollout.group_sise'" in capsys.readouterr().err
    assert rlvr(["train", "data.train=x.jsonl", "objective.eps_hgh=0.3"]) == 2
    assert "eps_hgh" in capsys.readouterr().err
    assert rlvr(["sft", "epochs=1"]) == 2
    assert "missing required key(s) data" in capsys.readouterr().err


def test_sft_cli(tiny_model_dir, sft_file, tmp_path, capsys):
    out = tmp_path / "sft"
    args = [
        "sft",
        "--config",
        "sft",
        f"data.train={sft_file}",
        f"model={tiny_model_dir}",
        f"log.output_dir={out}",
        "log.progress=off",
        "log.tensorboard=false",
        "log.plots=false",
        "batch_size=3",
        "epochs=1",
    ]
    assert rlvr(args) == 0
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [1, 2]
    assert "model:" in capsys.readouterr().out


def test_sft_cli_says_the_held_out_nll_before_and_after(tiny_model_dir, sft_file, tmp_path, capsys):
    """With data.eval, rlvr sft prints rlvr train's summary: the held-out NLL before training
    (step 0 of metrics.jsonl), after it, and the change as before -> after (nats, not points).
    A resume that extends the run keeps the one step-0 row and the line before training."""
    out = tmp_path / "sft"
    args = ["sft", "--config", "sft", f"data.train={sft_file}", f"data.eval={sft_file}"]
    args += [f"model={tiny_model_dir}", f"log.output_dir={out}", "log.progress=off"]
    args += ["log.tensorboard=false", "log.plots=false", "batch_size=3", "epochs=1"]
    assert rlvr(args) == 0
    rows = read_metrics(out / "metrics.jsonl")
    before, after = rows[0]["sft/eval_loss"], rows[-1]["sft/eval_loss"]
    assert [r["step"] for r in rows] == [0, 1, 2]
    change = f"held-out change:  eval_loss {before:.3f} -> {after:.3f} ({after - before:+.3f})"
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        f"held-out before:  eval_loss {before:.3f}",
        f"held-out @ 2:     eval_loss {after:.3f}",
        change,
    ]
    assert rlvr(["sft", "--resume", str(out), "epochs=2"]) == 0
    rows = read_metrics(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4] and rows[0]["sft/eval_loss"] == before
    assert capsys.readouterr().out.splitlines()[0] == f"held-out before:  eval_loss {before:.3f}"


def test_plot_cli_writes_pngs_for_several_runs(tmp_path, capsys):
    for name, scale in (("a", 1.0), ("b", 2.0)):
        run = tmp_path / name
        run.mkdir()
        rows = [
            {
                "step": s,
                "reward/mean": scale * s,
                "policy/entropy": 1.0 / s,
                "clip/q1_share": 0.25,
                "eval/avg@1": None,
            }
            for s in (1, 2, 3)
        ]
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert (
        rlvr(["plot", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "plots")])
        == 0
    )
    written = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert written == ["entropy.png", "quadrants.png", "reward.png"]
    assert all((tmp_path / "plots" / w).stat().st_size > 1000 for w in written)
    assert rlvr(["plot", str(tmp_path / "nope")]) == 2


def test_plot_of_several_runs_leaves_the_first_runs_own_plots_alone(tmp_path, capsys):
    runs = []
    for name in ("a", "b"):
        run = tmp_path / name
        (run / "plots").mkdir(parents=True)
        rows = [{"step": s, "reward/mean": 0.1 * s} for s in (1, 2)]
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        runs.append(str(run))
    own = tmp_path / "a" / "plots" / "reward.png"
    own.write_bytes(b"the trainer's plot of run a")
    assert rlvr(["plot", *runs]) == 0
    assert own.read_bytes() == b"the trainer's plot of run a"
    assert (tmp_path / "a" / "plots" / "compare" / "reward.png").stat().st_size > 1000
    assert rlvr(["plot", runs[1]]) == 0  # one run: its own plots folder
    assert (tmp_path / "b" / "plots" / "reward.png").exists()


def test_plot_with_nothing_to_plot_is_an_error(tmp_path, capsys):
    data = tmp_path / "prompts.jsonl"  # a prompt file given by mistake
    data.write_text(json.dumps({"prompt": "1+1?", "answer": "2"}) + "\n")
    assert rlvr(["plot", str(data), "--out", str(tmp_path / "plots")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlvr: error: nothing to plot: ") and str(data) in err
    assert "\n" not in err


def test_malformed_row_names_file_and_line(train_config, tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "1+1?", "answer": "2"}) + '\n{"prompt": \n')
    config = tmp_path / "c.yaml"
    from rlvr.train.overrides import dump_yaml

    config.write_text(dump_yaml(train_config(f"data.train={bad}")))
    assert rlvr(["train", "--config", str(config)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert (
        len(err) == 1
        and err[0].startswith("rlvr: error: ")
        and "bad.jsonl:2: invalid JSON" in err[0]
    )


def test_plot_refuses_rows_it_cannot_read_in_one_line(tmp_path, capsys):
    """A row that was no object, a metric without a step, or a value that was no number
    ended in a traceback (AttributeError, KeyError) or an error naming no file."""
    cases = {
        "list": ("[1, 2]", "row 1 is a list, not a JSON object"),
        "nostep": (
            '{"global_step": 3, "reward/mean": 0.5}',
            'row 1 has reward/mean but no whole-number "step"',
        ),
        "text": (
            '{"step": 1, "reward/mean": "high"}',
            "row 1: reward/mean is 'high', not a number",
        ),
    }
    for name, (line, message) in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text(json.dumps({"step": 0, "reward/mean": 0.1}) + "\n" + line + "\n")
        assert rlvr(["plot", str(path), "--out", str(tmp_path / "plots")]) == 2
        err = capsys.readouterr().err.strip()
        assert err == f"rlvr: error: {path}: {message.replace('row 1', 'row 2')}", err


def test_plot_out_that_is_a_file_is_refused_before_drawing(tmp_path, capsys):
    """``--out`` naming a file said only ``[Errno 17] File exists``."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward/mean": 0.5}) + "\n")
    out = tmp_path / "figures.png"
    out.write_text("kept")
    assert rlvr(["plot", str(run), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"rlvr: error: --out {out}: {out} is a file, not a directory"
    assert out.read_text() == "kept"


@pytest.mark.parametrize(
    "damage",
    [lambda data: data[:1000], lambda data: b"garbage\n", lambda data: b""],
    ids=["cut-short", "text", "empty"],
)
def test_a_damaged_checkpoint_is_refused_in_one_line_and_the_run_kept(
    train_config, tmp_path, capsys, damage
):
    """trainer_state.pt cut short: one line naming what to delete, and the run's config and
    metrics as they were (the restore comes before config.yaml is rewritten). Overwritten
    with text, it said only ``invalid literal for int() with base 10: 'arbage\\n'``."""
    path = _write_config(train_config, tmp_path, "steps=2", "checkpoint.every=1")
    out = tmp_path / "r"
    assert rlvr(["train", "--config", str(path), f"log.output_dir={out}"]) == 0
    state = out / "checkpoints" / "step_000002" / "trainer_state.pt"
    state.write_bytes(damage(state.read_bytes()))
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    capsys.readouterr()
    assert rlvr(["train", "--resume", str(out), "steps=3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"rlvr: error: {state} is damaged (")
    assert err.endswith(f"delete {state.parent} to resume from step_000001")
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_sft_resume_without_a_directory_asks_for_the_run(capsys):
    """rlvr sft has no default config, so --resume alone named no run: the error spoke of a
    missing data key and suggested 'base: klear/sft'."""
    for argv in (["sft", "--resume"], ["sft", "--resume", "epochs=2"]):
        assert rlvr(argv) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith("rlvr: error: --resume needs the run directory (--resume runs/sft-")


def test_a_checkpoint_with_damaged_weights_names_the_one_to_resume_from(
    train_config, tmp_path, capsys
):
    """model.safetensors cut short: the error said the weights were damaged but not what to do;
    deleting the checkpoint it names lets the run resume from the one before."""
    import shutil

    path = _write_config(train_config, tmp_path, "steps=2", "checkpoint.every=1")
    out = tmp_path / "r"
    assert rlvr(["train", "--config", str(path), f"log.output_dir={out}"]) == 0
    damaged = out / "checkpoints" / "step_000002"
    weights = damaged / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    capsys.readouterr()
    assert rlvr(["train", "--resume", str(out), "steps=3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "damaged weights" in err and err.endswith(f"delete {damaged} to resume from step_000001")
    shutil.rmtree(damaged)
    assert rlvr(["train", "--resume", str(out), "steps=3"]) == 0
    assert [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [1, 2, 3]


def test_resume_of_a_directory_that_does_not_exist_says_so(tmp_path, capsys):
    """A mistyped run directory was told to 'pass --config as well', which starts a new run
    there from scratch instead of resuming the one meant."""
    for command in ("train", "sft"):
        assert rlvr([command, "--resume", str(tmp_path / "typo")]) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line == f"rlvr: error: --resume {tmp_path / 'typo'}: no such directory"
    assert not (tmp_path / "typo").exists()
