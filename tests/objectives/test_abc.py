"""abc_grpo: unconditional four-boundary clipping (ABC-GRPO eq. 5-6, 11-13)."""

import math

import pytest
import torch

from rlvr.objectives import policy_loss

from .helpers import close, per_token_grad, run

INF = math.inf


def test_zero_gradient_in_all_four_out_of_band_quadrants():
    # Q1: A>0, r>1+eps1   Q2: A>0, r<1-eps2   Q3: A<0, r<1-eps4   Q4: A<0, r>1+eps3
    ratios, adv = [[1.5, 0.5], [0.5, 1.5]], [1.0, -1.0]
    loss, metrics, grad = run("abc_grpo", ratios, adv)
    close(loss, ((-1.2 - 0.8) / 2 + (0.8 + 1.2) / 2) / 2)
    close(grad, [[0.0, 0.0], [0.0, 0.0]])
    close(metrics["clip/frac"], 1.0)
    close(metrics["clip/low_frac"], 0.5)
    close(metrics["clip/high_frac"], 0.5)
    for q in ("q1", "q2", "q3", "q4"):
        close(metrics[f"clip/{q}_share"], 0.25)
        close(metrics[f"clip/{q}_frac"], 0.25)
    # GRPO, by contrast, leaves Q2 and Q4 unclipped
    close(per_token_grad("grpo", ratios, adv), [[0.0, -0.5], [0.0, 1.5]])


def test_four_independent_widths():
    ratios, adv = [[1.15, 0.75], [1.3, 0.9]], [2.0, -1.0]
    cfg = {"eps1": 0.1, "eps2": 0.3, "eps3": 0.4, "eps4": 0.05}
    loss, _, grad = run("abc_grpo", ratios, adv, **cfg)
    # row 0 band [0.7, 1.1]: 1.15 -> 1.1 (clipped), 0.75 inside; row 1 band [0.95, 1.4]
    close(loss, ((-2.2 - 1.5) / 2 + (1.3 + 0.95) / 2) / 2)
    close(grad, [[0.0, -2 * 0.75 / 4], [1.3 / 4, 0.0]])


def test_in_band_gradient_is_minus_r_times_a():
    close(per_token_grad("abc_grpo", [[1.1, 0.9]], [[0.5, -2.0]]), [[-0.55, 1.8]])


def test_zero_advantage_gives_zero_loss():
    loss, metrics, grad = run("abc_grpo", [[1.5, 0.5]], [0.0])
    close(loss, 0.0)
    close(grad, [[0.0, 0.0]])
    close(metrics["clip/frac"], 0.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_infinite_eps2_eps3_is_grpo(seed):
    gen = torch.Generator().manual_seed(seed)
    logp = (torch.randn(6, 9, generator=gen, dtype=torch.float64) * 0.4).requires_grad_()
    old = torch.randn(6, 9, generator=gen, dtype=torch.float64) * 0.4
    mask = (torch.rand(6, 9, generator=gen) > 0.3).double()
    mask[:, 0] = 1
    adv = torch.randn(6, generator=gen, dtype=torch.float64)
    adv[2] = 0.0
    common = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask}
    abc, m_abc = policy_loss("abc_grpo", **common, eps1=0.28, eps2=INF, eps3=INF, eps4=0.15)
    (g_abc,) = torch.autograd.grad(abc, logp)
    grpo, m_grpo = policy_loss("grpo", **common, eps_low=0.15, eps_high=0.28)
    (g_grpo,) = torch.autograd.grad(grpo, logp)
    close(abc, grpo, 1e-12)
    close(g_abc, g_grpo, 1e-12)
    for key in ("clip/frac", "clip/low_frac", "clip/high_frac"):
        close(m_abc[key], m_grpo[key], 1e-12)
