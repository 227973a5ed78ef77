"""Random verl-shaped batches and actor configs for the verl adapter tests."""

from __future__ import annotations

import torch
from verl.workers.config import FSDPActorConfig

from rlvr.advantages import compute_advantages
from rlvr.engines.verl import PolicyLossConfig

G, PROMPTS, T = 4, 3, 7
B = G * PROMPTS
VERL_AGG_MODES = (
    "token-mean",
    "token-sum",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
)


def actor(loss_mode: str, agg: str = "token-mean", rlvr: dict | None = None, **fields):
    """verl's FSDP actor config with ``loss_mode``, ``agg`` and an optional rlvr section."""
    policy_loss = PolicyLossConfig(loss_mode=loss_mode, rlvr=dict(rlvr or {}))
    return FSDPActorConfig(
        strategy="fsdp",
        rollout_n=G,
        ppo_micro_batch_size_per_gpu=2,
        loss_agg_mode=agg,
        policy_loss=policy_loss,
        **fields,
    )


def batch(seed: int = 0, spread: float = 0.7, dtype=torch.float64):
    """``(old, logp, adv [B, T], mask, rewards [B])``: G responses per prompt, ragged lengths.

    ``logp`` is a leaf with gradient; the log-ratios are wide enough that every clip binds.
    """
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=gen)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(dtype)
    old = -torch.rand(B, T, generator=gen, dtype=dtype) * 3.0
    logp = (old + spread * torch.randn(B, T, generator=gen, dtype=dtype)).requires_grad_()
    rewards = torch.randint(0, 2, (B,), generator=gen).to(dtype)
    rewards[:G] = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=dtype)  # one mixed group for sure
    adv = compute_advantages(rewards, G, "group_std")[:, None] * mask
    return old, logp, adv, mask, rewards
