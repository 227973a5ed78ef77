"""ObjectiveConfig (built once, validated) and the typed core objective_loss."""

import pytest
import torch

from rlvr.objectives import (
    OBJECTIVES,
    AbcConfig,
    LossInputs,
    ObjectiveConfig,
    StepCounts,
    group_stats_for,
    make_config,
    objective_loss,
    policy_loss,
    step_counts,
)

G = 4


def batch(seed=0, b=8, t=5):
    gen = torch.Generator().manual_seed(seed)
    mask = (torch.rand(b, t, generator=gen) > 0.2).double()
    mask[:, 0] = 1
    old = torch.randn(b, t, generator=gen, dtype=torch.float64) * 0.3 - 1.5
    logp = (old + torch.randn(b, t, generator=gen, dtype=torch.float64) * 0.4).requires_grad_()
    rewards = (torch.rand(b, generator=gen) > 0.5).double()
    adv = torch.randn(b, generator=gen, dtype=torch.float64)
    return logp, old, mask, rewards, adv


def test_defaults_and_resolved_modes():
    cfg = ObjectiveConfig("abc_grpo")
    assert cfg.params == AbcConfig() and cfg.agg_mode == "seq-mean-token-mean"
    assert cfg.advantage_mode == "group_mean"
    custom = ObjectiveConfig("abc_grpo", advantage="group_std", loss_agg="token-mean")
    assert (custom.advantage_mode, custom.agg_mode) == ("group_std", "token-mean")
    assert ObjectiveConfig.of("abc_grpo", eps3=0.5).params.eps3 == 0.5
    assert ObjectiveConfig().regularizers.sft_threshold == 1.0
    assert ObjectiveConfig(sft_threshold=0.5).regularizers.sft_threshold == 0.5


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": "ppo"}, "unknown objective 'ppo'; valid: grpo"),
        ({"name": "abc_grpo", "params": make_config("grpo")}, "needs AbcConfig"),
        ({"advantage": "mean"}, "unknown advantage mode 'mean'; valid: group_std"),
        ({"loss_agg": "sum"}, "unknown loss_agg 'sum'; valid: token-mean"),
        ({"kl_estimator": "k9"}, "unknown kl_estimator 'k9'"),
        ({"kl_coef": -0.1}, "kl_coef must be a finite number >= 0"),
        ({"sft_coef": "0.1"}, "sft_coef must be a number, got '0.1'"),
        ({"entropy_coef": None}, "entropy_coef must be a number, got None"),
        ({"sft_threshold": "1"}, "sft_threshold must be a number, got '1'"),
    ],
)
def test_invalid_configs_name_the_field(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ObjectiveConfig(**kwargs)


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_core_equals_keyword_wrapper(name):
    logp, old, mask, rewards, adv = batch()
    cfg = ObjectiveConfig(name, kl_coef=0.05, sft_coef=0.1)
    ref = old + 0.1
    stats = cfg.group_stats(rewards, G)
    counts = step_counts(mask, rewards, max_len=5)
    core, core_metrics = objective_loss(
        LossInputs(logp, old, adv, mask, rewards, stats, ref_logp=ref), cfg, counts
    )
    (g_core,) = torch.autograd.grad(core, logp)
    wrapped, wrapped_metrics = policy_loss(
        name,
        logp=logp,
        old_logp=old,
        advantages=adv,
        mask=mask,
        rewards=rewards,
        group_size=G,
        ref_logp=ref,
        kl_coef=0.05,
        sft_coef=0.1,
        **counts._asdict(),
    )
    (g_wrapped,) = torch.autograd.grad(wrapped, logp)
    assert torch.equal(core, wrapped) and torch.equal(g_core, g_wrapped)
    assert core_metrics.keys() == wrapped_metrics.keys()
    if stats is not None:
        again = group_stats_for(name, rewards, G)
        assert torch.equal(again.reward_mean, stats.reward_mean)


def test_group_objective_without_stats_names_the_route():
    logp, old, mask, rewards, adv = batch()
    with pytest.raises(ValueError, match="group_stats: objective 'etr' needs per-row statistics"):
        objective_loss(LossInputs(logp, old, adv, mask, rewards), ObjectiveConfig("etr"))


def test_token_weights_scale_the_per_token_loss_by_hand():
    # grpo at ratio 1: per-token loss -A; token-mean over 3 tokens with weights (2, 0, 1)
    logp = torch.zeros(1, 3, requires_grad=True)
    adv = torch.tensor([1.5])
    w = torch.tensor([[2.0, 0.0, 1.0]])
    cfg = ObjectiveConfig("grpo", loss_agg="token-mean")
    loss, _ = objective_loss(
        LossInputs(logp, logp.detach(), adv, torch.ones(1, 3), token_weights=w), cfg
    )
    assert float(loss.detach()) == pytest.approx(-(2 * 1.5 + 0 + 1.5) / 3, abs=1e-7)
    (grad,) = torch.autograd.grad(loss, logp)
    torch.testing.assert_close(grad, -1.5 * w / 3)  # d(-r*A*w)/dlogp = -A*w at r = 1


def test_unit_token_weights_change_nothing_and_bad_weights_are_rejected():
    logp, old, mask, rewards, adv = batch(seed=3)
    cfg = ObjectiveConfig("gppo")
    counts = StepCounts()
    plain, _ = objective_loss(LossInputs(logp, old, adv, mask), cfg, counts)
    ones = torch.ones_like(mask)
    weighted, _ = objective_loss(LossInputs(logp, old, adv, mask, token_weights=ones), cfg)
    assert torch.equal(plain, weighted)
    with pytest.raises(ValueError, match="token_weights must be >= 0"):
        objective_loss(LossInputs(logp, old, adv, mask, token_weights=-ones), cfg, validate=True)
    with pytest.raises(ValueError, match="token_weights must be a tensor of shape"):
        objective_loss(LossInputs(logp, old, adv, mask, token_weights=ones[:, :2]), cfg)
    nan = ones.clone()
    nan[0, 0] = float("nan")
    with pytest.raises(ValueError, match="token_weights contains NaN"):
        objective_loss(LossInputs(logp, old, adv, mask, token_weights=nan), cfg, validate=True)


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_at_ratio_one_every_objective_has_grpos_gradient(name):
    """What ``at_ratio_one`` (the on-policy warnings of rlvr train and RlvrGRPOTrainer)
    claims: old = new log-probs, the same advantages and aggregation give grpo's gradient."""
    from rlvr.advantages import compute_advantages

    cfg = ObjectiveConfig(name, params=make_config(name))
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    advantages = compute_advantages(rewards.double(), 4, cfg.advantage_mode).float()
    mask = (torch.rand(8, 6, generator=torch.Generator().manual_seed(0)) > 0.2).float()
    mask[:, 0] = 1

    def grad(objective):
        logp = torch.randn(8, 6, generator=torch.Generator().manual_seed(1)) * 0.1 - 1
        logp.requires_grad_()
        loss, _ = policy_loss(
            objective,
            logp=logp,
            old_logp=logp.detach(),
            advantages=advantages,
            mask=mask,
            rewards=rewards,
            group_size=4,
            loss_agg=cfg.agg_mode,
        )
        loss.backward()
        return logp.grad

    ours = grad(name)
    assert ours.abs().max() > 0
    torch.testing.assert_close(ours, grad("grpo"), rtol=1e-6, atol=1e-9)


def test_at_ratio_one_names_what_is_left_of_the_objective():
    assert ObjectiveConfig("grpo").at_ratio_one() is None
    said = ObjectiveConfig("abc_grpo", loss_agg="token-mean").at_ratio_one()
    assert said == (
        "abc_grpo's clipping never acts and its gradient is grpo's with advantage 'group_mean' "
        "and aggregation 'token-mean'"
    )
