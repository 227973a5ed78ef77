"""gppo: forward equals GRPO's, gradient factor F of Klear eq. 12 / 18."""

import pytest
import torch

from rlvr.objectives import make_config, policy_loss

from .helpers import close, per_token_grad, run

# row 0 (A = 1): 1.5 > 1.28 (GRPO clips, GPPO keeps F = b2*1.28), 0.5 (unclipped), 1.0
# row 1 (A = -1): 0.5 < 0.8 (GRPO clips, GPPO keeps F = b1*0.8), 1.5 (Q4, F = r), 1.0
RATIOS = [[1.5, 0.5, 1.0], [0.5, 1.5, 1.0]]
ADV = [1.0, -1.0]


def test_gradient_factor_default_betas():
    close(per_token_grad("gppo", RATIOS, ADV), [[-1.28, -0.5, -1.0], [0.8, 1.5, 1.0]])
    close(per_token_grad("grpo", RATIOS, ADV, eps_high=0.28), [[0.0, -0.5, -1.0], [0.0, 1.5, 1.0]])


def test_general_beta_form_value_and_gradient():
    loss, metrics, grad = run(
        "gppo", RATIOS, ADV, b1=0.5, b2=0.25, loss_agg="token-mean", num_tokens=1
    )
    # eq. 17: clipped tokens are -beta*(bound)*A; the rest -r*A
    close(loss, (-0.25 * 1.28) + (-0.5) + (-1.0) + (0.5 * 0.8) + 1.5 + 1.0)
    close(grad, [[-0.32, -0.5, -1.0], [0.4, 1.5, 1.0]])
    close(metrics["gppo/preserved_frac"], 2 / 6)
    close(metrics["clip/frac"], 2 / 6)


@pytest.mark.parametrize("seed", [0, 1])
def test_forward_equals_grpo_gradients_differ_only_on_clipped_tokens(seed):
    gen = torch.Generator().manual_seed(seed)
    logp = (torch.randn(5, 7, generator=gen, dtype=torch.float64) * 0.5).requires_grad_()
    old = torch.randn(5, 7, generator=gen, dtype=torch.float64) * 0.5
    mask = torch.ones(5, 7, dtype=torch.float64)
    mask[1, 4:] = 0
    adv = torch.randn(5, generator=gen, dtype=torch.float64)
    common = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask}
    gppo, _ = policy_loss("gppo", **common)
    (g_gppo,) = torch.autograd.grad(gppo, logp)
    grpo, _ = policy_loss("grpo", **common, eps_high=0.28, loss_agg="token-mean")
    (g_grpo,) = torch.autograd.grad(grpo, logp)
    close(gppo, grpo, 1e-12)
    r = torch.exp(logp.detach() - old)
    a = adv[:, None].expand_as(r)
    low, high = (a < 0) & (r < 0.8), (a > 0) & (r > 1.28)
    clipped = (low | high) & (mask > 0)
    assert clipped.any()
    factor = torch.where(low, torch.tensor(0.8, dtype=torch.float64), torch.where(high, 1.28, r))
    n = mask.sum()
    close(g_gppo, torch.where(mask > 0, -factor * a / n, 0.0), 1e-12)
    close(g_grpo[~clipped], g_gppo[~clipped], 1e-12)
    assert torch.all(g_grpo[clipped] == 0) and torch.all(g_gppo[clipped] != 0)


def test_dual_clip_zeroes_large_ratio_negative_tokens():
    ratios, adv = [[4.0, 2.0, 0.5]], [-1.0]
    loss, metrics, grad = run("gppo", ratios, adv, clip_c=3.0, loss_agg="token-mean", num_tokens=1)
    close(loss, 3.0 + 2.0 + 0.8)
    close(grad, [[0.0, 2.0, 0.8]])
    close(metrics["clip/dual_frac"], 1 / 3)
    close(metrics["gppo/preserved_frac"], 1 / 3)


@pytest.mark.parametrize("name", ["b1", "b2"])
def test_infinite_beta_is_an_error(name):
    # b1 = inf gave an infinite loss and a NaN gradient on the tokens it scales
    with pytest.raises(ValueError, match=f"{name} must be finite for gppo, got inf"):
        make_config("gppo", **{name: float("inf")})
