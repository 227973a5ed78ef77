"""Gradient accumulation: micro-batch losses sum to the full-batch loss and gradient."""

import pytest
import torch

from rlvr.objectives import LOSS_AGG_MODES, OBJECTIVES, group_stats_for, policy_loss, step_counts

B, T, G = 8, 7, 4
SPLITS = [slice(0, 3), slice(3, 5), slice(5, 8)]  # the first split cuts group 0 in the middle


def batch(seed=0):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([7, 3, 5, 1, 6, 2, 4, 7])
    mask = (torch.arange(T)[None, :] < lengths[:, None]).double()
    old = -torch.rand(B, T, generator=gen, dtype=torch.float64) * 2
    logp = old + torch.randn(B, T, generator=gen, dtype=torch.float64) * 0.3
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0], dtype=torch.float64)
    adv = torch.randn(B, generator=gen, dtype=torch.float64)
    ref = old + torch.randn(B, T, generator=gen, dtype=torch.float64) * 0.1
    entropy = torch.rand(B, T, generator=gen, dtype=torch.float64)
    return logp, old, mask, rewards, adv, ref, entropy


def loss_and_grads(name, mode, parts, regularise=False):
    logp, old, mask, rewards, adv, ref, entropy = batch()
    logp.requires_grad_()
    entropy.requires_grad_()
    stats = group_stats_for(name, rewards, G)
    counts = step_counts(mask, rewards, max_len=T)._asdict()
    reg = {"kl_coef": 0.05, "sft_coef": 0.1, "entropy_coef": 0.01} if regularise else {}
    total = 0.0
    for part in parts:
        width = int(mask[part].sum(dim=1).max())  # each micro-batch padded to its own length
        cols = slice(0, width)
        loss, _ = policy_loss(
            name,
            logp=logp[part, cols],
            old_logp=old[part, cols],
            advantages=adv[part],
            mask=mask[part, cols],
            rewards=rewards[part],
            group_stats=None if stats is None else stats.rows(part),
            ref_logp=ref[part, cols],
            entropy=entropy[part, cols],
            loss_agg=mode,
            **counts,
            **reg,
        )
        total = total + loss
    total.backward()
    return total.detach(), logp.grad, entropy.grad


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_micro_batches_equal_full_batch(name, mode):
    full, g_full, _ = loss_and_grads(name, mode, [slice(0, B)])
    split, g_split, _ = loss_and_grads(name, mode, SPLITS)
    assert torch.allclose(split, full, atol=1e-12, rtol=0)
    assert torch.allclose(g_split, g_full, atol=1e-12, rtol=0)
    assert g_full.abs().sum() > 0


@pytest.mark.parametrize("name", ["grpo", "gppo", "etr", "apmpo"])
def test_with_regularisers(name):
    full, g_full, e_full = loss_and_grads(name, None, [slice(0, B)], regularise=True)
    split, g_split, e_split = loss_and_grads(name, None, SPLITS, regularise=True)
    assert torch.allclose(split, full, atol=1e-12, rtol=0)
    assert torch.allclose(g_split, g_full, atol=1e-12, rtol=0)
    assert torch.allclose(e_split, e_full, atol=1e-12, rtol=0)


def test_local_counts_would_not_accumulate():
    """Guard that the test above can fail: without step counts the sums differ."""
    logp, old, mask, rewards, adv, _, _ = batch()
    full, _ = policy_loss("dapo", logp=logp, old_logp=old, advantages=adv, mask=mask)
    parts = sum(
        policy_loss("dapo", logp=logp[p], old_logp=old[p], advantages=adv[p], mask=mask[p])[0]
        for p in SPLITS
    )
    assert not torch.allclose(parts, full)
