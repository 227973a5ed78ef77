"""optim.min_lr: the cosine schedule ends at a floor (Klear's SFT: 8e-5 decayed to 4e-5)."""

import math

import pytest
import torch

from rlvr.train.config import OptimConfig
from rlvr.train.optim import LRSchedule, build_optimizer


def test_cosine_ends_at_the_floor():
    schedule = LRSchedule(warmup_steps=0, total_steps=4, kind="cosine", floor=0.5)
    c = math.cos(math.pi / 4)
    expected = [1.0, 0.5 + 0.25 * (1 + c), 0.75, 0.5 + 0.25 * (1 - c), 0.5, 0.5]
    assert [schedule(s) for s in range(6)] == pytest.approx(expected, abs=1e-12)


def test_optimizer_learning_rates_from_8e5_to_4e5():
    cfg = OptimConfig(lr=8e-5, min_lr=4e-5, schedule="cosine", warmup_steps=1)
    optimizer, scheduler = build_optimizer(torch.nn.Linear(2, 1), cfg, total_steps=3)
    rates = []
    for _ in range(4):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    # warm-up step 0 at (0 + 1) / 1 of the peak; then the cosine over steps 1..3
    assert rates == pytest.approx([8e-5, 8e-5, 6e-5, 4e-5], rel=1e-9)


def test_floor_above_the_peak_is_refused():
    with pytest.raises(ValueError, match=r"optim.min_lr must be in \[0, optim.lr=1e-05\]"):
        OptimConfig(lr=1e-5, min_lr=2e-5)


def test_klear_sft_recipe():
    from rlvr.train.config import SFTConfig
    from rlvr.train.overrides import load_config

    cfg = load_config(SFTConfig, "klear/sft", ["data.train=x.jsonl"])
    assert (cfg.optim.lr, cfg.optim.min_lr, cfg.optim.schedule, cfg.epochs) == (
        8e-5,
        4e-5,
        "cosine",
        4,
    )


@pytest.mark.parametrize(("warmup", "total"), [(0, 4), (1, 3), (10, 16)])
def test_the_last_planned_step_trains_above_the_floor_as_documented(warmup, total):
    """optim.min_lr is reached just after the last planned step: that step trains at
    min_lr + (lr - min_lr) * (1 - cos(pi / n)) / 2, n the steps after warm-up (the docs said
    the floor was reached at the last step)."""
    lr, floor = 8e-5, 4e-5
    schedule = LRSchedule(warmup_steps=warmup, total_steps=total, kind="cosine", floor=floor / lr)
    n = total - warmup
    last = floor + (lr - floor) * (1 - math.cos(math.pi / n)) / 2
    assert lr * schedule(total - 1) == pytest.approx(last, rel=1e-12)
    assert lr * schedule(total) == pytest.approx(floor, rel=1e-12)
