import math

import pytest
import torch

from rlvr.advantages import (
    GroupStats,
    StatsOptions,
    compute_advantages,
    group_stats,
    zero_advantage_groups,
)

REWARDS = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0], dtype=torch.float64)


def test_group_std_uses_population_std():
    adv = compute_advantages(REWARDS, 4, "group_std")
    # group 1: mean 0.25, population std sqrt(3)/4
    std1 = math.sqrt(3) / 4
    expected1 = [0.75 / (std1 + 1e-6)] + [-0.25 / (std1 + 1e-6)] * 3
    expected2 = [0.25 / (std1 + 1e-6)] * 2 + [-0.75 / (std1 + 1e-6)] + [0.25 / (std1 + 1e-6)]
    assert torch.allclose(adv, torch.tensor(expected1 + expected2, dtype=torch.float64), atol=1e-12)


def test_group_mean_and_batch_std():
    assert compute_advantages(REWARDS, 4, "group_mean").tolist() == [
        0.75,
        -0.25,
        -0.25,
        -0.25,
        0.25,
        0.25,
        -0.75,
        0.25,
    ]
    batch_std = 0.5  # population std of four 1s and four 0s
    adv = compute_advantages(REWARDS, 4, "batch_std")
    expected = torch.tensor(
        [0.75, -0.25, -0.25, -0.25, 0.25, 0.25, -0.75, 0.25], dtype=torch.float64
    ) / (batch_std + 1e-6)
    assert torch.allclose(adv, expected, atol=1e-12)


def test_constant_group_gives_zero_advantages_and_is_detected():
    rewards = torch.tensor([1.0, 1.0, 0.0, 1.0, -1.0, -1.0])
    # middle group: deviations +-0.5, population std 0.5
    expected = torch.tensor([0.0, 0.0, -0.5 / (0.5 + 1e-6), 0.5 / (0.5 + 1e-6), 0.0, 0.0])
    assert torch.allclose(compute_advantages(rewards, 2, "group_std"), expected, atol=1e-7)
    assert zero_advantage_groups(rewards, 2).tolist() == [True, False, True]


@pytest.mark.parametrize("mode", ["group_std", "group_mean", "batch_std"])
@pytest.mark.parametrize("value", [0.1, 1 / 3, 0.7, 0.9])
def test_equal_soft_rewards_give_exactly_zero_advantages(mode, value):
    # Klear's soft code rewards (share of tests passed): a float32 group mean of G equal
    # values can miss the value by one rounding step; under group_std that residue was
    # divided by a std of the same size and gave every response the same advantage ~0.06.
    rewards = torch.tensor([value] * 8 + [0.0, 1.0] * 4, dtype=torch.float32)
    adv = compute_advantages(rewards, 8, mode)
    assert adv[:8].tolist() == [0.0] * 8
    assert adv[8:].abs().min() > 0.4


def test_eps_argument_is_used():
    adv = compute_advantages(torch.tensor([1.0, 0.0]), 2, "group_std", eps=0.5)
    assert torch.allclose(adv, torch.tensor([0.5, -0.5]))


@pytest.mark.parametrize(
    ("rewards", "group_size", "match"),
    [
        (torch.zeros(6), 4, "does not divide"),
        (torch.zeros(6), 0, "group_size"),
        (torch.zeros(2, 3), 3, "1-D"),
        (torch.tensor([1.0, float("nan")]), 2, "NaN"),
    ],
)
def test_bad_rewards(rewards, group_size, match):
    with pytest.raises(ValueError, match=match):
        compute_advantages(rewards, group_size)


def test_unknown_mode_lists_valid():
    with pytest.raises(ValueError, match="group_std, group_mean, batch_std"):
        compute_advantages(REWARDS, 4, "rloo")


def test_group_stats_pass_rate_and_batch_scope():
    stats = group_stats(REWARDS, 4)
    assert stats.pass_rate.tolist() == [0.25] * 4 + [0.75] * 4
    assert stats.reward_mean.tolist() == [0.5] * 8
    assert stats.reward_std.tolist() == [0.5] * 8
    assert stats.options == StatsOptions()


def test_group_stats_group_scope_and_threshold():
    rewards = torch.tensor([0.2, 0.6, 1.0, 0.6], dtype=torch.float64)
    stats = group_stats(rewards, 2, pass_threshold=0.5, scope="group")
    assert stats.pass_rate.tolist() == [0.5, 0.5, 1.0, 1.0]
    assert torch.allclose(
        stats.reward_mean, torch.tensor([0.4, 0.4, 0.8, 0.8], dtype=torch.float64)
    )
    assert torch.allclose(stats.reward_std, torch.tensor([0.2, 0.2, 0.2, 0.2], dtype=torch.float64))


def test_reward_range_maps_plus_minus_one_to_unit_interval():
    rewards = torch.tensor([1.0, -1.0, 1.0, 1.0])
    stats = group_stats(rewards, 2, reward_range=(-1, 1))
    assert stats.reward_mean.tolist() == [0.75] * 4
    assert torch.allclose(
        stats.reward_std, torch.full((4,), math.sqrt(0.75 * 0.25), dtype=torch.float64)
    )
    assert stats.pass_rate.tolist() == [0.5, 0.5, 1.0, 1.0]  # raw rewards > 0


def test_reward_outside_range_is_an_error():
    with pytest.raises(ValueError, match="reward_range"):
        group_stats(torch.tensor([1.0, -1.0]), 2, reward_range=(0, 1))


def test_rows_selects_a_micro_batch():
    stats = group_stats(REWARDS, 4, scope="group")
    part = stats.rows(slice(2, 6))
    assert isinstance(part, GroupStats) and len(part) == 4
    assert part.pass_rate.tolist() == [0.25, 0.25, 0.75, 0.75]
    assert part.options == stats.options
    picked = stats.rows(torch.tensor([7, 0]))
    assert picked.reward_mean.tolist() == [0.75, 0.25]


def test_bad_stats_options():
    with pytest.raises(ValueError, match="scope"):
        StatsOptions(scope="minibatch")
    with pytest.raises(ValueError, match="reward_range"):
        StatsOptions(reward_range=(1.0, 0.0))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_rewards_give_float32_advantages(dtype):
    # computed in bfloat16 a group of one 1 and seven 0s got 2.6562, not 2.6458
    rewards = torch.tensor([1.0] + [0.0] * 7, dtype=dtype)
    adv = compute_advantages(rewards, 8)
    exact = compute_advantages(rewards.double(), 8)
    assert adv.dtype == torch.float32
    assert torch.allclose(adv.double(), exact, atol=1e-6)
