import json
import math
import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from rlvr.train.checkpoint import (
    TrainerState,
    latest_checkpoint,
    list_checkpoints,
    load_trainer_state,
    save_checkpoint,
)
from rlvr.train.config import LogConfig, OptimConfig
from rlvr.train.metrics import MetricsWriter, StepMetrics, read_metrics, truncate_after
from rlvr.train.optim import LRSchedule, build_optimizer


def _optim(model, total=10):
    return build_optimizer(model, OptimConfig(lr=1e-3, warmup_steps=2), total)


def test_checkpoint_restores_optimizer_scheduler_rng_and_data(tiny_model, tmp_path):
    model, tokenizer = tiny_model
    optimizer, scheduler = _optim(model)
    model(torch.tensor([[1, 2, 3]])).logits.sum().backward()
    optimizer.step()
    scheduler.step()
    torch.manual_seed(7), random.seed(7), np.random.seed(7)
    path = save_checkpoint(
        tmp_path,
        model,
        tokenizer,
        optimizer,
        scheduler,
        TrainerState(step=3, data={"epoch": 1, "position": 4}),
    )
    expected = (torch.rand(3), random.random(), np.random.rand())
    torch.manual_seed(0), random.seed(0), np.random.seed(0)
    fresh_opt, fresh_sched = _optim(model)
    state = load_trainer_state(path, fresh_opt, fresh_sched)
    assert (state.step, state.data) == (3, {"epoch": 1, "position": 4})
    assert (
        torch.equal(torch.rand(3), expected[0])
        and random.random() == expected[1]
        and np.random.rand() == expected[2]
    )
    assert fresh_sched.get_last_lr() == scheduler.get_last_lr()
    a, b = optimizer.state_dict()["state"], fresh_opt.state_dict()["state"]
    assert all(torch.equal(a[k]["exp_avg"], b[k]["exp_avg"]) for k in a)
    from rlvr.models import load_model

    reloaded, _ = load_model(str(path))
    for name, value in model.state_dict().items():
        assert torch.equal(reloaded.state_dict()[name], value), name


def test_a_resume_trains_with_its_own_optimiser_settings(tiny_model, tmp_path):
    """``--resume DIR optim.lr=...`` (warned, and recorded in ``config.yaml``) trains at the
    new peak, betas, eps and weight decay; the checkpoint gives the moments and the position.
    Loading the optimiser's state restored the old settings, so the change did nothing."""
    model, tokenizer = tiny_model
    optimizer, scheduler = _optim(model)
    model(torch.tensor([[1, 2, 3]])).logits.sum().backward()
    optimizer.step()
    scheduler.step()
    path = save_checkpoint(tmp_path, model, None, optimizer, scheduler, TrainerState(step=1))
    new = OptimConfig(lr=4e-3, warmup_steps=2, betas=(0.5, 0.6), eps=1e-6, weight_decay=0.1)
    fresh_opt, fresh_sched = build_optimizer(model, new, 10)
    load_trainer_state(path, fresh_opt, fresh_sched)
    assert fresh_sched.get_last_lr() == pytest.approx([4 * lr for lr in scheduler.get_last_lr()])
    group = fresh_opt.param_groups[0]
    assert (group["betas"], group["eps"], group["weight_decay"]) == ((0.5, 0.6), 1e-6, 0.1)
    assert group["initial_lr"] == 4e-3
    a, b = optimizer.state_dict()["state"], fresh_opt.state_dict()["state"]
    assert all(torch.equal(a[k]["exp_avg"], b[k]["exp_avg"]) for k in a)


def test_keep_last_and_half_written_checkpoints(tiny_model, tmp_path):
    model, tokenizer = tiny_model
    optimizer, scheduler = _optim(model)
    for step in (1, 2, 3):
        save_checkpoint(
            tmp_path, model, None, optimizer, scheduler, TrainerState(step=step), keep_last=2
        )
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_000002", "step_000003"]
    # a kill while writing leaves a hidden temporary directory, never a step_ directory
    (tmp_path / "checkpoints" / ".step_000004.tmp123").mkdir()
    (tmp_path / "checkpoints" / "step_000005").mkdir()  # no trainer_state.pt: incomplete
    assert latest_checkpoint(tmp_path).name == "step_000003"
    save_checkpoint(
        tmp_path, model, None, optimizer, scheduler, TrainerState(step=3)
    )  # rewrite in place
    assert latest_checkpoint(tmp_path).name == "step_000003"
    # the next checkpoint removes what killed writers left: hidden temporary directories
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "step_000002",
        "step_000003",
        "step_000005",
    ]


def test_every_file_of_a_checkpoint_has_the_mode_the_umask_gives(tiny_model, tmp_path):
    """safetensors wrote model.safetensors 0600: a teammate could read every file but it."""
    model, tokenizer = tiny_model
    optimizer, scheduler = _optim(model)
    old = os.umask(0o027)
    try:
        path = save_checkpoint(tmp_path, model, tokenizer, optimizer, scheduler, TrainerState(1))
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in path.iterdir() if p.is_file()}
    assert "model.safetensors" in modes and set(modes.values()) == {0o640}, modes


def test_a_killed_writers_partial_copy_goes_before_the_next_checkpoint_is_written(
    tiny_model, tmp_path, monkeypatch
):
    """It went only after the next checkpoint was complete: on a disk that a killed writer's
    partial copy had filled, the next one could not be written."""
    model, tokenizer = tiny_model
    optimizer, scheduler = _optim(model)
    partial = tmp_path / "checkpoints" / ".step_000002.tmp99999"
    partial.mkdir(parents=True)
    (partial / "model.safetensors").write_bytes(b"cut short")
    save = torch.save

    def room_first(payload, path):
        assert not partial.exists(), "the partial copy still takes its room"
        save(payload, path)

    monkeypatch.setattr(torch, "save", room_first)
    save_checkpoint(tmp_path, model, tokenizer, optimizer, scheduler, TrainerState(step=2))
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step_000002"]


def test_a_kill_while_an_old_checkpoint_is_deleted_leaves_no_half_checkpoint(
    tiny_model, tmp_path, monkeypatch
):
    """keep_last deleted step_000001 file by file: a kill part way left a step_000001 folder
    without trainer_state.pt (so never listed, never deleted) and perhaps with its weights."""
    import shutil

    from rlvr.train import checkpoint

    model, tokenizer = tiny_model
    optimizer, scheduler = _optim(model)
    for step in (1, 2):
        save_checkpoint(tmp_path, model, tokenizer, optimizer, scheduler, TrainerState(step=step))
    rmtree = shutil.rmtree

    def killed_part_way(path, ignore_errors=False):
        if Path(path).is_dir() and (Path(path) / "config.json").exists():
            (Path(path) / "trainer_state.pt").unlink()
            raise KeyboardInterrupt  # the kill: the rest of the folder stays
        rmtree(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(checkpoint.shutil, "rmtree", killed_part_way)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(
            tmp_path, model, tokenizer, optimizer, scheduler, TrainerState(step=3), keep_last=2
        )
    monkeypatch.undo()
    visible = sorted(p.name for p in (tmp_path / "checkpoints").iterdir() if p.name[0] != ".")
    assert visible == ["step_000002", "step_000003"]
    save_checkpoint(
        tmp_path, model, tokenizer, optimizer, scheduler, TrainerState(step=4), keep_last=2
    )
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "step_000003",
        "step_000004",
    ]


def test_lr_schedule_warmup_then_constant_or_cosine():
    constant = LRSchedule(warmup_steps=2, total_steps=6, kind="constant")
    assert [constant(s) for s in range(6)] == [0.5, 1.0, 1.0, 1.0, 1.0, 1.0]
    cosine = LRSchedule(warmup_steps=2, total_steps=6, kind="cosine")
    c = math.cos(math.pi / 4)
    expected = [0.5, 1.0, 1.0, 0.5 * (1 + c), 0.5, 0.5 * (1 - c), 0.0]
    assert [cosine(s) for s in range(7)] == pytest.approx(expected, abs=1e-12)


def test_metrics_writer_nulls_nonfinite_and_truncates_on_resume(tmp_path):
    cfg = LogConfig(output_dir=str(tmp_path), tensorboard=True, progress="off")
    writer = MetricsWriter(tmp_path, cfg, resume_step=None, config={})
    for step in (1, 2, 3):
        writer.write(step, {"a": step, "b": torch.tensor(float("nan")) if step == 2 else 0.5})
    writer.close()
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert rows[1] == {"step": 2, "a": 2.0, "b": None, "log/nonfinite_metrics": 1.0}
    with open(tmp_path / "metrics.jsonl", "a") as fh:
        fh.write('{"step": 4, "a"')  # torn line of a killed run
    writer = MetricsWriter(tmp_path, cfg, resume_step=2, config={})
    writer.write(3, {"a": 30})
    writer.close()
    assert [(r["step"], r["a"]) for r in read_metrics(tmp_path / "metrics.jsonl")] == [
        (1, 1.0),
        (2, 2.0),
        (3, 30.0),
    ]
    assert list((tmp_path / "tb").iterdir())


def test_truncate_after_keeps_rows_up_to_step(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps({"step": s}) + "\n" for s in (0, 1, 2, 3)))
    truncate_after(path, 1)
    assert [r["step"] for r in read_metrics(path)] == [0, 1]


def test_step_metrics_weights_and_extremes():
    acc = StepMetrics()
    acc.add({"clip/frac": 0.5, "ratio/max": 1.2, "ratio/min": 0.9}, weight=1)
    acc.add({"clip/frac": 0.0, "ratio/max": 1.1, "ratio/min": 0.8}, weight=3)
    acc.add_sum("optim/skipped_steps", 1)
    acc.add_sum("optim/skipped_steps", 1)
    assert acc.result() == {
        "clip/frac": 0.125,
        "ratio/max": 1.2,
        "ratio/min": 0.8,
        "optim/skipped_steps": 2.0,
    }


def _reduced_metrics(name, rows, **hparams):
    """An objective's metrics over 16 rows of unequal length (4 groups of 4), reduced over
    the micro-batches ``rows`` the way the trainer does (step counts, metric weights)."""
    from rlvr.objectives import group_stats_for, metric_weights, policy_loss
    from rlvr.train.update import exact_shares

    gen = torch.Generator().manual_seed(0)
    lengths = torch.tensor([12, 12, 12, 12, 2, 2, 2, 2, 6, 9, 3, 11, 1, 5, 7, 12])
    mask = (torch.arange(12)[None, :] < lengths[:, None]).double()  # [16, 12]
    rewards = torch.tensor([0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0, 1, 1], dtype=torch.float64)
    grouped = rewards.view(4, 4)
    adv = (grouped - grouped.mean(dim=1, keepdim=True)).view(-1)
    logp = -2 * torch.rand(16, 12, generator=gen, dtype=torch.float64)
    old = logp + 0.3 * torch.randn(16, 12, generator=gen, dtype=torch.float64)
    entropy = torch.rand(16, 12, generator=gen, dtype=torch.float64)
    stats = (
        group_stats_for(name, rewards, 4, **hparams) if name in ("etr", "pmpo", "apmpo") else None
    )
    reg = {"sft_coef": 0.1, "kl_coef": 0.1}
    counts = {
        "num_tokens": mask.sum(),
        "num_seqs": 16,
        "num_sft_tokens": (mask * (rewards[:, None] >= 1)).sum(),
    }
    acc = StepMetrics()
    for index in rows:
        index = torch.tensor(index)
        _, metrics = policy_loss(
            name,
            logp=logp[index],
            old_logp=old[index],
            advantages=adv[index],
            mask=mask[index],
            rewards=rewards[index],
            group_stats=None if stats is None else stats.rows(index),
            ref_logp=old[index] - 0.1,
            entropy=entropy[index],
            **counts,
            **reg,
            **hparams,
        )
        weights = metric_weights(mask[index], rewards[index], sft_threshold=1.0)
        acc.add(metrics, float(mask[index].sum()), weights)
    return exact_shares(acc.result())


@pytest.mark.parametrize(
    ("name", "hparams"),
    [
        ("grpo", {"clip_c": 1.2}),
        ("etr", {}),
        ("gspo", {}),
        ("gmpo", {}),
        ("cispo", {}),
        ("pmpo", {"stats_scope": "group"}),
        ("apmpo", {"stats_scope": "group"}),
    ],
)
def test_step_metrics_over_micro_batches_equal_the_whole_batch(name, hparams):
    """Micro-batches of unequal length, one without positive responses: sft/loss was their
    token-count-weighted mean of per-micro-batch NLLs (the one without positives counting
    as 0), not the NLL of the step's positive tokens; pmpo/p and apmpo/* (means over
    sequences, one value per group here) were weighted by tokens too."""
    whole = _reduced_metrics(name, [list(range(16))], **hparams)
    rows = [[0, 1, 2], [3, 4], [5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15]]  # [0, 1, 2]: no positive
    micro = _reduced_metrics(name, rows, **hparams)
    assert set(micro) == set(whole) and "sft/loss" in whole
    for metric, value in whole.items():
        assert micro[metric] == pytest.approx(value, rel=1e-6, abs=1e-9), metric


def test_quadrant_shares_are_recomputed_from_event_fractions():
    from rlvr.train.update import exact_shares

    # micro-batch A: 10 tokens, 1 event in q1; micro-batch B: 30 tokens, 3 events in q3
    acc = StepMetrics()
    acc.add(
        {
            "clip/q1_frac": 0.1,
            "clip/q2_frac": 0.0,
            "clip/q3_frac": 0.0,
            "clip/q4_frac": 0.0,
            "clip/q1_share": 1.0,
            "clip/q3_share": 0.0,
        },
        weight=10,
    )
    acc.add(
        {
            "clip/q1_frac": 0.0,
            "clip/q2_frac": 0.0,
            "clip/q3_frac": 0.1,
            "clip/q4_frac": 0.0,
            "clip/q1_share": 0.0,
            "clip/q3_share": 1.0,
        },
        weight=30,
    )
    out = exact_shares(acc.result())
    assert out["clip/q1_share"] == pytest.approx(0.25) and out["clip/q3_share"] == pytest.approx(
        0.75
    )
    assert out["clip/q2_share"] == 0.0 and out["clip/q4_share"] == 0.0
    assert exact_shares({"clip/frac": 0.5}) == {"clip/frac": 0.5}


def test_wandb_is_used_when_installed_and_asked_for(tmp_path, monkeypatch):
    import sys
    import types

    calls = []
    fake = types.ModuleType("wandb")
    fake.init = lambda **kw: calls.append(("init", kw)) or fake
    fake.log = lambda row, step: calls.append(("log", step, row))
    fake.finish = lambda: calls.append(("finish",))
    monkeypatch.setitem(sys.modules, "wandb", fake)
    cfg = LogConfig(
        output_dir=str(tmp_path), tensorboard=False, wandb=True, wandb_project="p", progress="off"
    )
    writer = MetricsWriter(tmp_path, cfg, resume_step=None, config={"steps": 3})
    writer.write(1, {"reward/mean": 0.5, "bad": float("inf")})
    writer.close()
    assert (
        calls[0][0] == "init"
        and calls[0][1]["project"] == "p"
        and calls[0][1]["config"] == {"steps": 3}
    )
    assert calls[1] == ("log", 1, {"reward/mean": 0.5, "log/nonfinite_metrics": 1.0})
    assert calls[2] == ("finish",)


def test_wandb_missing_is_a_warning(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "wandb", None)  # import fails
    cfg = LogConfig(output_dir=str(tmp_path), tensorboard=False, wandb=True, progress="off")
    with pytest.warns(UserWarning, match="wandb is not installed"):
        MetricsWriter(tmp_path, cfg, resume_step=None, config={}).close()


def test_progress_bar_and_plain_lines(capsys):
    from rlvr.train.progress import ProgressReporter

    shown = [("reward/mean", "reward"), ("policy/entropy", "entropy")]
    bar = ProgressReporter(LogConfig(progress="on"), total=2, start=0, title="train", shown=shown)
    bar.step(1, {"reward/mean": 0.25, "policy/entropy": None})
    bar.close()
    lines = ProgressReporter(
        LogConfig(progress="auto"), total=2, start=0, title="train", shown=shown
    )
    lines.step(2, {"reward/mean": 0.5, "policy/entropy": 1.5})
    assert "train step 2/2  reward 0.500  entropy 1.500" in capsys.readouterr().err


def test_a_share_headline_is_shown_as_a_percentage(capsys):
    """A contrast share of 0.0005 read as 0.000 to three decimals: shown as 0.05% instead."""
    from rlvr.train.loop import contrast_shown
    from rlvr.train.progress import ProgressReporter

    shown = [("reward/mean", "reward"), *contrast_shown(["grpo"])]
    lines = ProgressReporter(LogConfig(progress="auto"), total=1, start=0, title="t", shown=shown)
    lines.step(1, {"reward/mean": 0.5, "contrast/grpo/token_frac": 0.0005})
    assert "t step 1/1  reward 0.500  differs vs grpo 0.05%" in capsys.readouterr().err


def test_a_plain_line_longer_than_the_console_stays_one_line(capsys):
    """Off a terminal rich's console is 80 columns wide: a step's line must not wrap there,
    or a log parser finds a metric's value on the next line."""
    from rlvr.train.progress import ProgressReporter

    shown = [(f"metric/{i}", f"headline{i}") for i in range(12)]
    lines = ProgressReporter(LogConfig(progress="auto"), total=1, start=0, title="t", shown=shown)
    lines.step(1, {f"metric/{i}": 0.5 for i in range(12)})
    lines.message("x" * 200)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and len(err[0]) > 80 and err[0].endswith("headline11 0.500")


def test_progress_off_still_prints_warnings(capsys):
    """log.progress=off dropped the start notes, the unconfined-sandbox warning included."""
    from rlvr.train.progress import ProgressReporter

    quiet = ProgressReporter(LogConfig(progress="off"), total=1, start=0, title="t", shown=[])
    quiet.step(1, {})
    quiet.message("code sandbox isolation: bwrap")
    quiet.message("warning: programs can read files outside their box")
    assert capsys.readouterr().err == "warning: programs can read files outside their box\n"


def test_plain_lines_are_thinned_on_long_runs(capsys):
    from rlvr.train.progress import MAX_PLAIN_LINES, ProgressReporter

    total = 8 * MAX_PLAIN_LINES + 3
    lines = ProgressReporter(
        LogConfig(progress="auto"), total=total, start=0, title="sft", shown=[]
    )
    for step in range(1, total + 1):
        lines.step(step, {})
    printed = [line.split()[2] for line in capsys.readouterr().err.splitlines()]
    assert printed[:2] == ["8/403", "16/403"] and printed[-1] == "403/403"
    assert len(printed) == MAX_PLAIN_LINES + 1


def test_to_host_reads_all_tensors_in_one_copy_and_gives_to_float_values(monkeypatch):
    from rlvr.train.metrics import to_float, to_host

    metrics = {"a": torch.tensor(0.1, dtype=torch.float64), "b": torch.tensor(3), "c": 2}
    weights = {"w": torch.tensor([True, False, True]).sum(), "n": 4.0}
    reads = []
    for name in ("item", "tolist", "__float__", "__bool__", "__int__"):
        method = getattr(torch.Tensor, name)
        monkeypatch.setattr(
            torch.Tensor,
            name,
            lambda self, *a, _m=method, _n=name, **k: (reads.append(_n), _m(self, *a, **k))[1],
        )
    got_metrics, got_weights, empty = to_host(metrics, weights, {})
    assert reads == ["tolist"]  # one device-to-host copy for the one device
    monkeypatch.undo()
    assert got_metrics == {k: to_float(v) for k, v in metrics.items()}
    assert got_metrics["a"] == float(torch.tensor(0.1, dtype=torch.float32))  # as to_float rounds
    assert got_weights == {"w": 2.0, "n": 4.0} and empty == {}
    assert all(type(v) is float for v in [*got_metrics.values(), *got_weights.values()])
