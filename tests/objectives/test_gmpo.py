"""gmpo: geometric mean of the clipped token terms (APMPO eq. 14)."""

import math

import torch

from rlvr.objectives import policy_loss

from .helpers import close, run

# log-ratios: row 0 [0.5, -0.1] with A = 1, row 1 [-0.6, 0.2] with A = -2
RATIOS = [[math.exp(0.5), math.exp(-0.1)], [math.exp(-0.6), math.exp(0.2)]]
ADV = [1.0, -2.0]


def test_hand_worked_value_and_gradient():
    loss, metrics, grad = run("gmpo", RATIOS, ADV)
    # x = [0.4 (clipped), -0.1] -> u = 0.15;  x = [-0.4 (clipped), 0.2] -> u = -0.1
    close(loss, (-math.exp(0.15) + 2 * math.exp(-0.1)) / 2)
    close(grad, [[0.0, -math.exp(0.15) / 4], [0.0, 2 * math.exp(-0.1) / 4]])
    close(metrics["clip/frac"], 0.5)
    close(metrics["clip/q1_share"], 0.5)
    close(metrics["clip/q3_share"], 0.5)


def test_zero_advantage_sequence_gives_zero():
    loss, _, grad = run("gmpo", [[1.5, 0.5], [1.0, 1.0]], [0.0, 1.0])
    close(loss, -1.0 / 2)
    close(grad[0], [0.0, 0.0])
    assert torch.isfinite(grad).all()


def test_unclipped_gmpo_is_product_of_ratios_to_one_over_n():
    ratios = [[1.1, 0.95, 1.2]]
    loss, _, _ = run("gmpo", ratios, [1.5])
    close(loss, -1.5 * (1.1 * 0.95 * 1.2) ** (1 / 3))


def test_log_ratio_exactly_on_a_bound_keeps_its_whole_gradient():
    # lr = 0.4 = eps_high exactly (A > 0) and lr = -0.4 = -eps_low exactly (A < 0): on the
    # band's edge, not outside it (clip/frac counts neither), so y = clip(lr) = lr and
    # x = lr with gradient 1, as for a token inside the band (not half of it).
    logp = torch.tensor([[0.4, 0.1], [-0.4, 0.2]], dtype=torch.float64, requires_grad=True)
    loss, metrics = policy_loss(
        "gmpo",
        logp=logp,
        old_logp=torch.zeros_like(logp),
        advantages=torch.tensor([1.0, -2.0], dtype=torch.float64),
        mask=torch.ones_like(logp),
    )
    (grad,) = torch.autograd.grad(loss, logp)
    u0, u1 = (0.4 + 0.1) / 2, (-0.4 + 0.2) / 2
    close(loss, (-math.exp(u0) + 2 * math.exp(u1)) / 2)
    close(grad, [[-math.exp(u0) / 4] * 2, [2 * math.exp(u1) / 4] * 2])
    close(metrics["clip/frac"], 0.0)
