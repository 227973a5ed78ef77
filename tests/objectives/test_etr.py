"""etr: elastic per-sequence band (ETR eq. 6-9), clamp, pass threshold."""

import math

import pytest
import torch

from rlvr.advantages import group_stats
from rlvr.objectives import group_stats_for, make_config, policy_loss

from .helpers import close, inputs, run

T1 = math.tanh(1.0)
EPS_POS = 0.2 + 0.1 * T1 + 0.1 * 4 * 0.5 * 0.5  # A = +1, p_g = 0.5
EPS_NEG = 0.2 - 0.1 * T1 + 0.1 * 4 * 0.5 * 0.5  # A = -1


def test_hand_worked_band_value_and_gradient():
    ratios, adv = [[1.35, 1.1], [0.7, 1.0]], [1.0, -1.0]
    rewards = torch.tensor([1.0, 0.0])  # one group, pass rate 0.5
    loss, metrics, grad = run("etr", ratios, adv, rewards=rewards, group_size=2)
    # row 0 band 1 +- 0.376: 1.35 stays (GRPO would clip it); row 1 band 1 +- 0.224: 0.7 clipped
    close(loss, ((-1.35 - 1.1) / 2 + ((1 - EPS_NEG) + 1.0) / 2) / 2)
    close(grad, [[-1.35 / 4, -1.1 / 4], [0.0, 1.0 / 4]])
    close(metrics["etr/eps_mean"], (EPS_POS + EPS_NEG) / 2)
    close(metrics["etr/eps_min"], EPS_NEG)
    close(metrics["etr/eps_max"], EPS_POS)
    close(metrics["etr/clamped_frac"], 0.0)
    close(metrics["clip/low_frac"], 0.25)


def test_macro_term_vanishes_for_solved_or_failed_groups():
    ratios, adv = [[1.0], [1.0], [1.0], [1.0]], [0.5, -0.5, 0.5, -0.5]
    rewards = torch.tensor([1.0, 1.0, 0.0, 0.0])
    _, metrics, _ = run("etr", ratios, adv, rewards=rewards, group_size=2)
    close(metrics["etr/eps_max"], 0.2 + 0.1 * math.tanh(0.5))
    close(metrics["etr/eps_min"], 0.2 - 0.1 * math.tanh(0.5))


def test_clamp_keeps_the_band_valid():
    ratios, adv = [[1.9], [0.985]], [3.0, -3.0]
    rewards = torch.tensor([1.0, 0.0])
    loss, metrics, grad = run("etr", ratios, adv, rewards=rewards, group_size=2, lam1=1.0)
    # raw widths 0.2 +- tanh(3) + 0.1: 1.295 -> 0.95, -0.695 -> 0.01
    close(metrics["etr/eps_max"], 0.95)
    close(metrics["etr/eps_min"], 0.01)
    close(metrics["etr/clamped_frac"], 1.0)
    close(loss, (-1.9 * 3 + 0.99 * 3) / 2)  # 1.9 < 1.95 unclipped; 0.985 < 0.99 clipped
    close(grad, [[-1.9 * 3 / 2], [0.0]])


def test_pass_threshold_reaches_the_statistics():
    ratios, adv = [[1.0], [1.0]], [1.0, -1.0]
    rewards = torch.tensor([0.3, 0.7])
    _, half, _ = run("etr", ratios, adv, rewards=rewards, group_size=2, pass_threshold=0.5)
    _, none, _ = run("etr", ratios, adv, rewards=rewards, group_size=2, pass_threshold=0.8)
    close(half["etr/eps_mean"], 0.2 + 0.1)
    close(none["etr/eps_mean"], 0.2)
    stats = group_stats_for("etr", rewards, 2, pass_threshold=0.5)
    assert stats.pass_rate.tolist() == [0.5, 0.5]


def test_precomputed_stats_for_a_partial_group():
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0])
    stats = group_stats(rewards, 4)
    logp, old, mask = inputs([[1.3], [0.75]])
    loss, metrics = policy_loss(
        "etr",
        logp=logp,
        old_logp=old,
        advantages=torch.tensor([1.0, -1.0]),
        mask=mask,
        group_stats=stats.rows(slice(0, 2)),
    )
    macro = 0.1 * 4 * 0.25 * 0.75
    close(metrics["etr/eps_max"], 0.2 + 0.1 * T1 + macro)
    # computing the statistics from the two rows alone would give p_g = 0.5 instead
    wrong, _ = policy_loss(
        "etr",
        logp=logp,
        old_logp=old,
        advantages=torch.tensor([1.0, -1.0]),
        mask=mask,
        rewards=rewards[:2],
        group_size=2,
    )
    assert not torch.isclose(loss, wrong)


def test_inverse_variant_widens_for_negative_and_narrows_for_positive():
    """ETR sec. 4.4 "Strategy Direction": the inverse variant is ``lam1 < 0``."""
    ratios, adv = [[1.35, 1.1], [0.7, 1.0]], [1.0, -1.0]
    rewards = torch.tensor([1.0, 0.0])
    loss, metrics, grad = run("etr", ratios, adv, rewards=rewards, group_size=2, lam1=-0.1)
    close(metrics["etr/eps_max"], EPS_NEG + 2 * 0.1 * T1)  # the A < 0 row: 0.2 + 0.1*tanh(1) + 0.1
    close(metrics["etr/eps_min"], EPS_NEG)  # the A > 0 row now gets the narrow band
    # row 0 band 1 +- 0.224: 1.35 clipped at 1.224 (no gradient); row 1 band 1 -+ 0.376: 0.7 kept
    close(loss, (-(1 + EPS_NEG) - 1.1) / 4 + (0.7 + 1.0) / 4)
    close(grad, [[0.0, -1.1 / 4], [0.7 / 4, 1.0 / 4]])
    close(metrics["clip/high_frac"], 0.25)
    close(metrics["clip/low_frac"], 0.0)


def test_negative_eps_base_is_an_error():
    # a negative base width would be clamped to eps_floor on every token, silently
    with pytest.raises(ValueError, match="eps_base must be >= 0, got -0.1"):
        make_config("etr", eps_base=-0.1)
    assert make_config("etr", eps_base=0.0).eps_base == 0.0
