"""pmpo / apmpo: power mean of token magnitudes, adaptive exponent and clip (APMPO)."""

import math

import pytest
import torch

from rlvr.advantages import group_stats
from rlvr.objectives import group_stats_for, make_config, policy_loss

from .helpers import close, inputs

REWARDS = torch.tensor([1.0, 0.0, 1.0, 1.0], dtype=torch.float64)  # batch mean 0.75
MU, SIGMA = 0.75, math.sqrt(0.75 * 0.25)
RATIOS = [[1.5, 0.9], [0.7, 1.2], [1.3, 0.6], [1.0, 1.1]]
ADV = [1.0, -0.5, 0.0, 2.0]


def call(name, ratios=RATIOS, adv=ADV, mask=None, **kwargs):
    logp, old, mask = inputs(ratios, mask)
    kwargs.setdefault("rewards", REWARDS)
    kwargs.setdefault("group_size", 2)
    kwargs.setdefault("validate", True)
    loss, metrics = policy_loss(
        name,
        logp=logp,
        old_logp=old,
        advantages=torch.tensor(adv, dtype=torch.float64),
        mask=mask,
        **kwargs,
    )
    (grad,) = torch.autograd.grad(loss, logp)
    return loss.detach(), metrics, grad, logp


def reference(ratios, adv, p, eps_low, eps_up):
    """Plain-python J_i = sign(A) * (mean |min(rA, clip(r)A)|^p)^(1/p); loss = -mean J_i."""
    total = 0.0
    for row, a in zip(ratios, adv, strict=True):
        if a == 0:
            continue
        phi = [abs(min(r * a, min(max(r, 1 - eps_low), 1 + eps_up) * a)) for r in row]
        if p < 1e-4:
            mean = math.exp(sum(math.log(x) for x in phi) / len(phi))
        else:
            mean = (sum(x**p for x in phi) / len(phi)) ** (1 / p)
        total += math.copysign(mean, a)
    return -total / len(ratios)


def test_apmpo_hand_worked():
    loss, metrics, _, _ = call("apmpo")
    p = math.exp(-0.8 * MU)
    fss = MU / (SIGMA + 1e-6)
    eps_ada = 0.2 + 0.2 * math.tanh(fss)
    close(metrics["apmpo/p"], p)
    close(metrics["apmpo/fss"], fss)
    close(metrics["apmpo/eps_ada"], eps_ada)
    # by hand: row 0 phi = [min(1.5, 1+eps_ada), 0.9]; row 1 phi = 0.5*[0.8, 1.2]; row 2 skipped
    row0 = ((min(1.5, 1 + eps_ada) ** p + 0.9**p) / 2) ** (1 / p)
    row1 = -((((0.5 * 0.8) ** p + (0.5 * 1.2) ** p) / 2) ** (1 / p))
    row3 = (((2 * 1.0) ** p + (2 * 1.1) ** p) / 2) ** (1 / p)
    close(loss, -(row0 + row1 + row3) / 4)
    close(loss, reference(RATIOS, ADV, p, 0.2, eps_ada))


def test_pmpo_hand_worked():
    loss, metrics, _, _ = call("pmpo")
    p = math.exp(-0.8 * MU)
    close(metrics["pmpo/p"], p)
    row0 = ((1.2**p + 0.9**p) / 2) ** (1 / p)  # 1.5 clipped at 1 + eps_high
    row1 = -((((0.5 * 0.8) ** p + (0.5 * 1.2) ** p) / 2) ** (1 / p))
    row3 = (((2 * 1.0) ** p + (2 * 1.1) ** p) / 2) ** (1 / p)
    close(loss, -(row0 + row1 + row3) / 4)


def test_eps_ada_uses_tanh_of_fss():
    _, metrics, _, _ = call("apmpo", rewards=torch.tensor([1.0, 0.0, 0.0, 0.0]))
    fss = 0.25 / (math.sqrt(0.25 * 0.75) + 1e-6)
    close(metrics["apmpo/eps_ada"], 0.2 + 0.2 * math.tanh(fss))
    assert abs(float(metrics["apmpo/eps_ada"]) - (0.2 + 0.2 * fss)) > 1e-3  # not Alg. 1 l.18
    _, zero, _, _ = call("apmpo", rewards=torch.zeros(4))
    close(zero["apmpo/eps_ada"], 0.2)  # FSS = 0 gives eps_min, not the midpoint


def test_gradient_matches_reference_autograd():
    _, metrics, grad, logp = call("apmpo", eps_max=0.3)
    p, eps_ada = float(metrics["apmpo/p"]), float(metrics["apmpo/eps_ada"])
    ratios = torch.exp(logp.detach() + 1.0).requires_grad_()
    log_r = torch.log(ratios)
    total = 0.0
    for i, a in enumerate(ADV):
        if a == 0:
            continue
        r = torch.exp(log_r[i])
        clipped = torch.clamp(r, 1 - 0.2, 1 + eps_ada)
        phi = torch.abs(torch.minimum(r * a, clipped * a))
        total = total + math.copysign(1.0, a) * phi.pow(p).mean().pow(1 / p)
    ref_loss = -total / 4
    (ref_grad,) = torch.autograd.grad(ref_loss, ratios)
    close(grad, ref_grad * ratios.detach(), 1e-12)  # d/dlogp = r * d/dr
    assert grad[2].abs().sum() == 0  # A = 0 row


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_p_equal_one_is_grpo_with_eps_high_eps_ada(seed):
    gen = torch.Generator().manual_seed(seed)
    logp = (torch.randn(6, 8, generator=gen, dtype=torch.float64) * 0.4).requires_grad_()
    old = torch.randn(6, 8, generator=gen, dtype=torch.float64) * 0.4
    mask = (torch.rand(6, 8, generator=gen) > 0.25).double()
    mask[:, 0] = 1
    adv = torch.randn(6, generator=gen, dtype=torch.float64)
    adv[3] = 0.0
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    common = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask}
    loss, metrics = policy_loss("apmpo", **common, rewards=rewards, group_size=3, gamma=0.0)
    (grad,) = torch.autograd.grad(loss, logp)
    close(metrics["apmpo/p"], 1.0)
    eps_ada = float(metrics["apmpo/eps_ada"])
    assert eps_ada > 0.2 + 1e-3
    ref, _ = policy_loss(
        "grpo", **common, eps_low=0.2, eps_high=eps_ada, loss_agg="seq-mean-token-mean"
    )
    (ref_grad,) = torch.autograd.grad(ref, logp)
    close(loss, ref, 1e-12)
    close(grad, ref_grad, 1e-12)


def test_pmpo_at_p_one_is_grpo():
    a, _, ga, _ = call("pmpo", gamma=0.0)
    logp, old, mask = inputs(RATIOS)
    b, _ = policy_loss(
        "grpo",
        logp=logp,
        old_logp=old,
        advantages=torch.tensor(ADV, dtype=torch.float64),
        mask=mask,
    )
    (gb,) = torch.autograd.grad(b, logp)
    close(a, b, 1e-12)
    close(ga, gb, 1e-12)


def test_small_p_tends_to_the_geometric_mean():
    geometric = reference(RATIOS, ADV, 0.0, 0.2, 0.2)
    # p = exp(-gamma * 0.75): gamma = 40 gives p ~ 9e-14 < 1e-4 -> exactly the geometric mean
    tiny, metrics, grad, _ = call("pmpo", gamma=40.0)
    assert float(metrics["pmpo/p"]) < 1e-4
    close(tiny, geometric, 1e-12)
    assert torch.isfinite(grad).all()
    errors = []
    for p in (1e-1, 1e-2, 1e-3):
        loss, metrics, _, _ = call("pmpo", gamma=-math.log(p) / MU)
        close(metrics["pmpo/p"], p, 1e-12)
        close(loss, reference(RATIOS, ADV, p, 0.2, 0.2), 1e-10)
        errors.append(abs(float(loss) - geometric))
    assert errors[0] > errors[1] > errors[2] and errors[2] < 1e-3


def test_linear_schedule():
    _, metrics, _, _ = call("pmpo", p_schedule="linear")
    close(metrics["pmpo/p"], 1 - 0.8 * MU)
    _, metrics, _, _ = call("pmpo", p_schedule="linear", gamma=2.0)
    close(metrics["pmpo/p"], 0.05)


def test_plus_minus_one_rewards_never_give_p_above_one():
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        rewards = torch.where(torch.rand(4, generator=gen) > 0.5, 1.0, -1.0).double()
        _, metrics, _, _ = call("apmpo", rewards=rewards, reward_range=(-1, 1))
        assert 0 < float(metrics["apmpo/p"]) <= 1
    with pytest.raises(ValueError, match="reward_range"):
        call("apmpo", rewards=torch.tensor([1.0, -1.0, 1.0, -1.0]))


def test_group_scope_gives_per_sequence_exponents():
    _, metrics, _, _ = call("apmpo", stats_scope="group")
    # groups: [1, 0] (mu 0.5) and [1, 1] (mu 1): mean of the per-row exponents
    close(metrics["apmpo/p"], (2 * math.exp(-0.4) + 2 * math.exp(-0.8)) / 4)
    stats = group_stats_for("apmpo", REWARDS, 2, stats_scope="group")
    assert stats.reward_mean.tolist() == [0.5, 0.5, 1.0, 1.0]


def test_precomputed_stats_split_mid_group():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0], dtype=torch.float64)
    stats = group_stats_for("apmpo", rewards, 3)
    _, metrics, _, _ = call(
        "apmpo",
        ratios=RATIOS[:2],
        adv=ADV[:2],
        rewards=None,
        group_size=None,
        group_stats=stats.rows(slice(2, 4)),
    )
    close(metrics["apmpo/p"], math.exp(-0.8 * 4 / 6))
    assert (
        group_stats(rewards, 3, reward_range=(0, 1)).reward_mean.tolist()
        == stats.reward_mean.tolist()
    )


def test_per_token_advantages_of_one_sign():
    a, _, ga, _ = call("apmpo")
    per_token = [[x, x] for x in ADV]
    b, _, gb, _ = call("apmpo", adv=per_token)
    close(a, b, 1e-12)
    close(ga, gb, 1e-12)


def test_float32_power_mean_stays_accurate_for_small_p():
    gen = torch.Generator().manual_seed(1)
    log_ratio = torch.randn(4, 512, generator=gen, dtype=torch.float64) * 0.3
    rewards = torch.tensor([1.0, 1.0, 1.0, 0.0], dtype=torch.float64)  # mu = 0.75
    adv = torch.tensor([1.0, -1.0, 0.5, -2.0], dtype=torch.float64)
    gamma = -math.log(1e-3) / 0.75  # p = 1e-3
    out = []
    for dtype in (torch.float64, torch.float32):
        logp = (log_ratio - 1.0).to(dtype)
        loss, _ = policy_loss(
            "pmpo",
            logp=logp,
            old_logp=torch.full_like(logp, -1.0),
            advantages=adv.to(dtype),
            mask=torch.ones(4, 512),
            rewards=rewards,
            group_size=4,
            gamma=gamma,
        )
        out.append(float(loss))
    assert abs(out[1] - out[0]) <= 1e-5 * abs(out[0])


# ---------------------------------------------------------------- APMPO ablation switches


def test_fss_from_the_mean_only():
    loss, metrics, _, _ = call("apmpo", fss_form="mean")
    p, eps_ada = math.exp(-0.8 * MU), 0.2 + 0.2 * math.tanh(MU)  # FSS = mu (tab. 7 "only mu")
    close(metrics["apmpo/fss"], MU)
    close(metrics["apmpo/eps_ada"], eps_ada)
    close(loss, reference(RATIOS, ADV, p, 0.2, eps_ada))


def test_fss_from_the_std_only():
    loss, metrics, _, _ = call("apmpo", fss_form="inv_std")
    fss = 1 / (SIGMA + 1e-6)  # tab. 7 "only sigma": FSS = 1/(sigma + delta)
    p, eps_ada = math.exp(-0.8 * MU), 0.2 + 0.2 * math.tanh(fss)
    close(metrics["apmpo/fss"], fss)
    close(metrics["apmpo/eps_ada"], eps_ada)
    close(loss, reference(RATIOS, ADV, p, 0.2, eps_ada))
    # identical rewards: sigma = 0, FSS = 1/delta and the band opens to eps_max
    _, same, _, _ = call("apmpo", fss_form="inv_std", rewards=torch.ones(4))
    close(same["apmpo/eps_ada"], 0.4)


def test_adaptive_lower_bound_is_eq_81():
    loss, metrics, grad, _ = call("apmpo", adaptive_lower=True)
    p = math.exp(-0.8 * MU)
    eps_ada = 0.2 + 0.2 * math.tanh(MU / (SIGMA + 1e-6))
    close(metrics["apmpo/eps_ada"], eps_ada)
    close(loss, reference(RATIOS, ADV, p, eps_ada, eps_ada))
    # the A < 0 token at r = 0.7 lies inside [1 - eps_ada, 1 + eps_ada] (eps_ada ~ 0.36):
    # no longer clipped, so it keeps a gradient that the fixed lower bound 0.8 removes
    assert 1 - eps_ada < 0.7
    close(metrics["clip/low_frac"], 0.0)
    _, fixed, fixed_grad, _ = call("apmpo")
    close(fixed["clip/low_frac"], 1 / 8)
    assert fixed_grad[1, 0] == 0 and grad[1, 0] != 0


def test_fac_alone_is_apmpo_with_gamma_zero():
    _, metrics, _, _ = call("apmpo", gamma=0.0)
    close(metrics["apmpo/p"], 1.0)


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"fss_form": "median"}, "fss_form"),
        ({"adaptive_lower": True, "eps_max": 1.5}, "eps_max < 1"),
        ({"adaptive_lower": "yes"}, "adaptive_lower"),
        ({"eps_high": 0.28}, "apmpo does not read eps_high"),
        ({"adaptive_lower": True, "eps_low": 0.1}, "adaptive_lower does not read eps_low"),
    ],
)
def test_ablation_switches_are_checked(bad, message):
    from rlvr.objectives import make_config

    with pytest.raises(ValueError, match=message):
        make_config("apmpo", **bad)


def test_ratio_exactly_on_a_bound_matches_grpo_at_p_one():
    # On-policy (logp == old_logp, r = 1 exactly) with eps_low = eps_high = 0: every token
    # sits on both edges of the band [1, 1]. GRPO's clamp keeps the whole gradient -A*r/n
    # there; the power mean at p = 1 must equal it (not give half of it).
    logp = torch.tensor([[-1.0, -2.0], [-0.5, -1.5]], dtype=torch.float64, requires_grad=True)
    common = dict(
        logp=logp,
        old_logp=logp.detach().clone(),
        advantages=torch.tensor([1.5, -0.5], dtype=torch.float64),
        mask=torch.ones_like(logp),
        rewards=torch.tensor([1.0, 0.0], dtype=torch.float64),
        group_size=2,
    )
    loss, _ = policy_loss("pmpo", **common, gamma=0.0, eps_low=0.0, eps_high=0.0)
    (grad,) = torch.autograd.grad(loss, logp)
    # loss = -mean_i A_i * mean_t r = -(1.5 - 0.5) / 2; d/dlogp = -A_i / (2 tokens * 2 rows)
    close(loss, -0.5)
    close(grad, [[-1.5 / 4, -1.5 / 4], [0.5 / 4, 0.5 / 4]])
    ref, _ = policy_loss("grpo", **common, eps_low=0.0, eps_high=0.0)
    (ref_grad,) = torch.autograd.grad(ref, logp)
    close(grad, ref_grad)


@pytest.mark.parametrize("delta", [0.0, float("inf")])
def test_delta_must_be_finite_and_positive(delta):
    # delta = inf was accepted and made FSS 0, so eps_ada was eps_min whatever the rewards
    with pytest.raises(ValueError, match="delta must be finite and > 0"):
        make_config("apmpo", delta=delta)
