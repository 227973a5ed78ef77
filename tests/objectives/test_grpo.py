"""grpo, dapo, dr_grpo: hand-worked values, gradients, dual clip, metrics."""

import math

import pytest
import torch

from rlvr.objectives import policy_loss

from .helpers import close, inputs, per_token_grad, run

# Two sequences; ratios chosen to hit every GRPO case with eps = 0.2:
# row 0 (A = 2):  1.5 clipped high (Q1), 0.9 inside, 0.5 below band but unclipped (Q2)
# row 1 (A = -1): 1.1 inside, 0.7 clipped low (Q3), 1.3 is padding
RATIOS = [[1.5, 0.9, 0.5], [1.1, 0.7, 1.3]]
MASK = [[1, 1, 1], [1, 1, 0]]
ADV = [2.0, -1.0]


def test_grpo_value_gradient_and_metrics():
    loss, metrics, grad = run("grpo", RATIOS, ADV, MASK)
    # per-token losses: row 0 [-2.4, -1.8, -1.0], row 1 [1.1, 0.8]
    close(loss, ((-2.4 - 1.8 - 1.0) / 3 + (1.1 + 0.8) / 2) / 2)
    # d l/d logp = -A*r where unclipped, 0 where clipped; weights 1/(n_i * B)
    close(grad, [[0.0, -2 * 0.9 / 6, -2 * 0.5 / 6], [1.1 / 4, 0.0, 0.0]])
    close(metrics["clip/frac"], 0.4)
    close(metrics["clip/low_frac"], 0.2)
    close(metrics["clip/high_frac"], 0.2)
    for q, frac in zip(("q1", "q2", "q3", "q4"), (0.2, 0.2, 0.2, 0.0), strict=True):
        close(metrics[f"clip/{q}_frac"], frac)
        close(metrics[f"clip/{q}_share"], frac / 0.6)
    close(metrics["ratio/mean"], 4.7 / 5)
    close(metrics["ratio/max"], 1.5)
    close(metrics["ratio/min"], 0.5)
    close(metrics["kl/old_approx"], -sum(math.log(r) for r in (1.5, 0.9, 0.5, 1.1, 0.7)) / 5)


def test_dapo_is_clip_higher_token_mean():
    loss, metrics, _ = run("dapo", RATIOS, ADV, MASK)
    close(loss, (-2.56 - 1.8 - 1.0 + 1.1 + 0.8) / 5)
    same, _, _ = run("grpo", RATIOS, ADV, MASK, eps_high=0.28, loss_agg="token-mean")
    close(loss, same)


def test_dr_grpo_divides_by_sequences_times_max_len():
    loss, _, _ = run("dr_grpo", RATIOS, ADV, MASK)
    close(loss, -3.3 / (2 * 3))
    loss, _, _ = run("dr_grpo", RATIOS, ADV, MASK, max_len=10)
    close(loss, -3.3 / 20)


def test_grpo_asymmetric_band():
    loss, metrics, _ = run("grpo", [[1.25, 0.75]], [1.0], eps_low=0.3, eps_high=0.2)
    close(loss, (-1.2 - 0.75) / 2)  # 1.25 clipped at 1.2; 0.75 unclipped for A > 0
    close(metrics["clip/high_frac"], 0.5)


def test_dual_clip_caps_negative_advantage_loss():
    ratios, adv = [[4.0, 2.0, 0.5]], [-1.0]
    loss, metrics, _ = run("grpo", ratios, adv, clip_c=3.0, loss_agg="token-mean")
    close(loss, (3.0 + 2.0 + 0.8) / 3)  # 4.0 capped at clip_c, 2.0 in Q4, 0.5 clipped low
    close(per_token_grad("grpo", ratios, adv, clip_c=3.0), [[0.0, 2.0, 0.0]])
    close(metrics["clip/dual_frac"], 1 / 3)
    close(metrics["clip/high_frac"], 1 / 3)
    close(metrics["clip/low_frac"], 1 / 3)
    # without the dual clip the Q4 token keeps its unbounded gradient -A*r
    close(per_token_grad("grpo", ratios, adv), [[4.0, 2.0, 0.0]])


def test_dual_clip_leaves_positive_advantages_alone():
    a = per_token_grad("grpo", [[4.0, 1.1]], [1.0], clip_c=3.0)
    b = per_token_grad("grpo", [[4.0, 1.1]], [1.0])
    close(a, b)


def test_zero_advantage_tokens_count_in_denominator_not_in_clip_metrics():
    loss, metrics, grad = run("grpo", [[1.5, 1.5]], [[0.0, 1.0]], loss_agg="token-mean")
    close(loss, -1.2 / 2)
    close(metrics["clip/frac"], 0.5)
    close(grad, [[0.0, 0.0]])


def test_per_token_advantages_match_broadcast():
    a = run("grpo", RATIOS, ADV, MASK)
    b = run("grpo", RATIOS, [[2.0, 2.0, 2.0], [-1.0, -1.0, 5.0]], MASK)  # padding value ignored
    close(a[0], b[0])
    close(a[2], b[2])


def test_padding_is_never_exponentiated():
    logp, old, mask = inputs(RATIOS, MASK)
    logp = logp.detach()
    logp[1, 2] = 1000.0  # exp(1000) overflows; must be masked before exp
    old[1, 2] = float("-inf")
    logp.requires_grad_()
    for name in ("grpo", "gppo", "cispo", "gspo", "gmpo", "abc_grpo"):
        loss, metrics = policy_loss(
            name, logp=logp, old_logp=old, advantages=torch.tensor(ADV), mask=mask
        )
        (grad,) = torch.autograd.grad(loss, logp)
        assert torch.isfinite(loss), name
        assert torch.isfinite(grad).all() and grad[1, 2] == 0, name
        assert all(torch.isfinite(v) for v in metrics.values()), name


def test_bf16_logp_computes_ratios_in_float32():
    logp, old, mask = inputs(RATIOS, MASK)
    low = logp.detach().to(torch.bfloat16).requires_grad_()
    loss, metrics = policy_loss(
        "grpo", logp=low, old_logp=old.to(torch.bfloat16), advantages=torch.tensor(ADV), mask=mask
    )
    assert loss.dtype == torch.float32 and metrics["ratio/mean"].dtype == torch.float32
    ref, _ = policy_loss(
        "grpo",
        logp=low.detach().float(),
        old_logp=old.to(torch.bfloat16).float(),
        advantages=torch.tensor(ADV),
        mask=mask,
    )
    assert loss.item() == pytest.approx(ref.item(), abs=1e-6)
    loss.backward()
    assert low.grad.dtype == torch.bfloat16


def test_metrics_are_detached_scalars():
    _, metrics, _ = run("grpo", RATIOS, ADV, MASK, clip_c=3.0)
    for name, value in metrics.items():
        assert isinstance(value, torch.Tensor) and value.dim() == 0 and not value.requires_grad, (
            name
        )
