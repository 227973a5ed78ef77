"""gspo: sequence-level ratio in token form."""

import math

import torch

from rlvr.objectives import policy_loss

from .helpers import close, inputs, run

ROW = [[math.exp(0.1), math.exp(-0.05), 1.0]]
S = math.exp(0.05 / 3)


def test_value_and_gradient_inside_the_band():
    loss, metrics, grad = run("gspo", ROW, [1.0], eps_low=0.2, eps_high=0.2)
    close(loss, -S)
    close(grad, [[-S / 3] * 3])
    close(metrics["clip/frac"], 0.0)


def test_default_tiny_band_clips_the_whole_sequence():
    loss, metrics, grad = run("gspo", ROW, [1.0])
    close(loss, -(1 + 4e-4))
    close(grad, [[0.0, 0.0, 0.0]])
    close(metrics["clip/frac"], 1.0)
    close(metrics["clip/q1_share"], 1.0)


def test_matches_the_sequence_level_objective():
    gen = torch.Generator().manual_seed(0)
    logp = (torch.randn(4, 5, generator=gen, dtype=torch.float64) * 0.2).requires_grad_()
    old = torch.randn(4, 5, generator=gen, dtype=torch.float64) * 0.2
    mask = torch.ones(4, 5, dtype=torch.float64)
    mask[0, 3:] = 0
    adv = torch.tensor([1.0, -0.5, 2.0, -1.5], dtype=torch.float64)
    loss, _ = policy_loss(
        "gspo", logp=logp, old_logp=old, advantages=adv, mask=mask, eps_low=0.1, eps_high=0.1
    )
    (grad,) = torch.autograd.grad(loss, logp)
    # reference: J_i = min(s_i*A_i, clip(s_i)*A_i), s_i = exp(mean over the sequence)
    ref = 0.0
    for i in range(4):
        n = int(mask[i].sum())
        s = torch.exp((logp[i, :n] - old[i, :n]).mean())
        ref = ref - torch.minimum(s * adv[i], s.clamp(0.9, 1.1) * adv[i]) / 4
    (ref_grad,) = torch.autograd.grad(ref, logp)
    close(loss, ref, 1e-12)
    close(grad, ref_grad, 1e-12)


def test_padding_log_probs_do_not_enter_the_sequence_ratio():
    logp, old, mask = inputs([[1.1, 5.0]], [[1, 0]])
    loss, _ = policy_loss(
        "gspo", logp=logp, old_logp=old, advantages=torch.tensor([1.0]), mask=mask, eps_high=1.0
    )
    close(loss, -1.1)
