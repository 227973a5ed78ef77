"""Advantages and group statistics over uid-labelled, reordered, padded verl batches."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, get_adv_estimator_fn  # noqa: E402

from rlvr.advantages import ADVANTAGE_MODES, StatsOptions, compute_advantages, group_stats  # noqa: E402
from rlvr.engines.verl.stats import labelled_advantages, labelled_group_stats  # noqa: E402

G, PROMPTS, PAD = 4, 5, 3


def shuffled_batch(seed=0, low=0.0):
    """Rewards of PROMPTS contiguous groups, then reordered with uids, plus PAD padding rows."""
    gen = torch.Generator().manual_seed(seed)
    rewards = torch.randint(0, 3, (PROMPTS * G,), generator=gen).double() / 2 + low
    rewards[:G] = 1.0  # an all-equal group
    uids = np.array([f"u{i // G}" for i in range(PROMPTS * G)], dtype=object)
    order = torch.randperm(PROMPTS * G, generator=gen)
    scores = torch.cat([rewards[order], torch.zeros(PAD, dtype=torch.float64)])
    labels = np.concatenate([uids[order.numpy()], np.array(["pad"] * PAD, dtype=object)])
    valid = torch.cat([torch.ones(PROMPTS * G), torch.zeros(PAD)]).bool()
    return rewards, order, scores, labels, valid


@pytest.mark.parametrize("mode", ADVANTAGE_MODES)
def test_labelled_advantages_equal_contiguous_ones(mode):
    rewards, order, scores, labels, valid = shuffled_batch()
    got = labelled_advantages(scores, labels, mode, valid)
    expected = compute_advantages(rewards.double(), G, mode)[order]
    torch.testing.assert_close(got[: PROMPTS * G], expected, rtol=0, atol=1e-12)
    assert bool((got[PROMPTS * G :] == 0).all())


@pytest.mark.parametrize("mode", ADVANTAGE_MODES)
def test_registered_estimators(mode):
    rewards, order, scores, labels, valid = shuffled_batch()
    mask = valid[:, None].double().expand(-1, 3).clone()
    token_rewards = torch.zeros_like(mask)
    token_rewards[:, -1] = scores
    adv, returns = get_adv_estimator_fn(f"rlvr_{mode}")(
        token_level_rewards=token_rewards, response_mask=mask, index=labels, config=None
    )
    expected = compute_advantages(rewards.double(), G, mode)[order]
    torch.testing.assert_close(adv[: PROMPTS * G, 0], expected, rtol=0, atol=1e-12)
    assert torch.equal(adv, returns) and bool((adv[PROMPTS * G :] == 0).all())


def test_group_mean_is_verl_grpo_without_std_and_group_std_is_not_verl_grpo():
    """verl's grpo divides by the unbiased std: sqrt(G/(G-1)) times ours, up to eps."""
    rewards, _, _, _, _ = shuffled_batch()
    mask = torch.ones(PROMPTS * G, 2, dtype=torch.float64)
    token_rewards = torch.stack([torch.zeros_like(rewards), rewards], dim=1)
    index = np.array([f"u{i // G}" for i in range(PROMPTS * G)], dtype=object)
    verl_mean, _ = compute_grpo_outcome_advantage(
        token_rewards, mask, index, norm_adv_by_std_in_grpo=False
    )
    ours_mean, _ = get_adv_estimator_fn("rlvr_group_mean")(token_rewards, mask, index=index)
    torch.testing.assert_close(ours_mean, verl_mean, rtol=0, atol=1e-12)
    verl_std, _ = compute_grpo_outcome_advantage(token_rewards, mask, index)
    ours_std, _ = get_adv_estimator_fn("rlvr_group_std")(token_rewards, mask, index=index)
    moving = ours_std.abs() > 0.1
    ratio = ours_std[moving] / verl_std[moving]
    torch.testing.assert_close(
        ratio, torch.full_like(ratio, (G / (G - 1)) ** 0.5), rtol=1e-5, atol=0
    )


@pytest.mark.parametrize(
    "options",
    [
        StatsOptions(pass_threshold=0.0, reward_range=(0.0, 2.0), scope="batch"),
        StatsOptions(pass_threshold=0.6, reward_range=(0.0, 2.0), scope="group"),
        StatsOptions(pass_threshold=0.0, reward_range=None, scope="batch"),
    ],
)
def test_labelled_group_stats_equal_contiguous_ones(options):
    rewards, order, scores, labels, valid = shuffled_batch(seed=2)
    got = labelled_group_stats(scores, labels, options, valid)
    expected = group_stats(
        rewards,
        G,
        pass_threshold=options.pass_threshold,
        reward_range=options.reward_range,
        scope=options.scope,
    ).rows(order)
    n = PROMPTS * G
    for name in ("pass_rate", "reward_mean", "reward_std"):
        torch.testing.assert_close(
            getattr(got, name)[:n], getattr(expected, name), rtol=0, atol=1e-12
        )
        assert bool((getattr(got, name)[n:] == 0).all())
    assert got.options == options


def test_padding_rows_stay_out_of_batch_statistics():
    rewards, order, scores, labels, valid = shuffled_batch(seed=3, low=0.5)
    with_pad = labelled_group_stats(scores, labels, StatsOptions(reward_range=(0, 2)), valid)
    counted = labelled_group_stats(scores, labels, StatsOptions(reward_range=(0, 2)))
    assert with_pad.reward_mean[0] != counted.reward_mean[0]  # the zeros would drag the mean
    expected = ((rewards - 0) / 2).mean()
    torch.testing.assert_close(with_pad.reward_mean[0], expected, rtol=0, atol=1e-12)


def test_out_of_range_reward_is_an_error():
    _, _, scores, labels, valid = shuffled_batch()
    with pytest.raises(ValueError, match="reward_range"):
        labelled_group_stats(scores, labels, StatsOptions(reward_range=(0.0, 0.5)), valid)
