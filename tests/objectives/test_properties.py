"""Hypothesis properties over random shapes, masks, ratios and advantages."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr.objectives import OBJECTIVES, policy_loss

SETTINGS = settings(max_examples=40, deadline=None)


@st.composite
def batches(draw, per_token=None):
    groups = draw(st.integers(1, 3))
    group = draw(st.integers(1, 3))
    b, t = groups * group, draw(st.integers(1, 6))
    flat = st.lists(st.floats(-3, 3), min_size=b * t, max_size=b * t)
    log_ratio = torch.tensor(draw(flat), dtype=torch.float64).view(b, t)
    bits = draw(st.lists(st.booleans(), min_size=b * t, max_size=b * t))
    mask = torch.tensor(bits).view(b, t)
    mask[draw(st.integers(0, b - 1)), draw(st.integers(0, t - 1))] = True
    adv_values = st.one_of(st.just(0.0), st.floats(-3, 3))
    if per_token if per_token is not None else draw(st.booleans()):
        adv = torch.tensor(
            draw(st.lists(adv_values, min_size=b * t, max_size=b * t)), dtype=torch.float64
        )
        adv = adv.view(b, t)
    else:
        adv = torch.tensor(draw(st.lists(adv_values, min_size=b, max_size=b)), dtype=torch.float64)
    rewards = torch.tensor(draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=b, max_size=b)))
    return log_ratio, mask, adv, rewards, group


def run(name, data, **kwargs):
    log_ratio, mask, adv, rewards, group = data
    old = torch.full_like(log_ratio, -1.0)
    logp = (old + log_ratio).requires_grad_()
    loss, metrics = policy_loss(
        name,
        logp=logp,
        old_logp=old,
        advantages=adv,
        mask=mask,
        rewards=rewards,
        group_size=group,
        **kwargs,
    )
    (grad,) = torch.autograd.grad(loss, logp)
    return loss, metrics, grad


SEQUENCE_LEVEL = {name for name, spec in OBJECTIVES.items() if spec.sequence_level}


@SETTINGS
@given(batches(), st.sampled_from(sorted(OBJECTIVES)))
def test_finite_loss_gradient_and_metrics(data, name):
    if name in SEQUENCE_LEVEL and data[2].dim() == 2:
        data = (data[0], data[1], data[2].abs(), data[3], data[4])  # one sign per sequence
    loss, metrics, grad = run(name, data)
    mask = data[1]
    assert torch.isfinite(loss)
    assert torch.isfinite(grad).all()
    assert torch.all(grad[~mask] == 0)
    for key, value in metrics.items():
        assert torch.isfinite(value), key
    shares = sum(metrics[f"clip/q{k}_share"] for k in range(1, 5))
    fracs = sum(metrics[f"clip/q{k}_frac"] for k in range(1, 5))
    if fracs > 0:
        assert abs(float(shares) - 1.0) < 1e-12
    else:
        assert float(shares) == 0.0
    assert 0 <= float(metrics["clip/frac"]) <= 1


def token_grads(name, data, **kwargs):
    """``dl_t/dlogp_t`` of the summed per-token loss, with ratios and |A| per token."""
    _, _, grad = run(name, data, loss_agg="token-mean", num_tokens=1, **kwargs)
    log_ratio, mask, adv, _, _ = data
    adv = adv if adv.dim() == 2 else adv[:, None].expand_as(log_ratio)
    return grad, torch.exp(log_ratio), adv, mask


@SETTINGS
@given(batches(), st.floats(0.0, 0.5), st.floats(0.0, 0.5))
def test_abc_gradient_bounded_and_zero_outside_the_band(data, eps1, eps3):
    grad, r, adv, mask = token_grads("abc_grpo", data, eps1=eps1, eps3=eps3)
    assert torch.all(grad.abs() <= (1 + max(eps1, eps3)) * adv.abs() + 1e-12)
    # float64 bounds: two Python scalars in torch.where would make a float32 tensor
    upper = torch.where(adv > 0, torch.full_like(r, 1 + eps1), torch.full_like(r, 1 + eps3))
    outside = mask & ((r > upper) | (r < 0.8))
    assert torch.all(grad[outside] == 0)


@SETTINGS
@given(batches(), st.floats(0.0, 0.9), st.floats(0.0, 0.5))
def test_cispo_gradient_is_the_clipped_weight(data, eps_low, eps_high):
    grad, r, adv, mask = token_grads("cispo", data, eps_low=eps_low, eps_high=eps_high)
    expected = torch.where(mask, -r.clamp(1 - eps_low, 1 + eps_high) * adv, 0.0)
    assert torch.allclose(grad, expected, atol=1e-12, rtol=1e-12)
    assert torch.all(grad.abs() <= (1 + eps_high) * adv.abs() + 1e-12)


@SETTINGS
@given(batches(), st.floats(0.0, 2.0), st.floats(0.0, 2.0))
def test_gppo_gradient_is_minus_f_times_a(data, b1, b2):
    grad, r, adv, mask = token_grads("gppo", data, b1=b1, b2=b2)
    low, high = (adv < 0) & (r < 0.8), (adv > 0) & (r > 1.28)
    factor = torch.where(low, 0.8 * b1, torch.where(high, 1.28 * b2, r))
    expected = torch.where(mask, -factor * adv, 0.0)
    assert torch.allclose(grad, expected, atol=1e-12, rtol=1e-12)
    positive = mask & (adv > 0)  # the bound GPPO proves for positive advantages
    assert torch.all(grad[positive].abs() <= max(1.0, b2) * 1.28 * adv[positive] + 1e-12)


@SETTINGS
@given(batches(), st.floats(1.5, 5.0))
def test_grpo_dual_clip_bounds_negative_tokens(data, clip_c):
    grad, r, adv, mask = token_grads("grpo", data, clip_c=clip_c)
    negative = mask & (adv < 0)
    assert torch.all(grad[negative].abs() <= clip_c * adv[negative].abs() + 1e-12)
    assert torch.all(grad[negative & (r > clip_c)] == 0)


@SETTINGS
@given(batches(per_token=False))
def test_apmpo_p_in_unit_interval_and_eps_ada_in_range(data):
    _, metrics, _ = run("apmpo", data)
    assert 0 < float(metrics["apmpo/p"]) <= 1
    assert 0.2 - 1e-12 <= float(metrics["apmpo/eps_ada"]) <= 0.4 + 1e-12
