"""The rollout/training log-prob mismatch and its truncated importance-sampling correction.

A sampler with an engine of its own (``vllm``) reports the log-probs of the tokens it
sampled, computed by its own kernels; the trainer's log-probs of the same tokens under the
same weights differ by numerical error. So the rollout policy ``mu`` is not exactly the
policy ``pi_old`` the objective's ratio assumes. With top-k/top-p set the sampler's
log-probs are of the truncated distribution and the trainer's of the whole softmax: the
difference is then the log of the mass kept at each position, which the metrics include
and which ``tis`` would turn into weights, so the configuration refuses ``tis`` there.

What is compared: ``train_logp`` is the trainer's log-prob of each token under the weights
the rollout was sampled with: the behaviour log-probs ``old_logp`` when the batch feeds
several optimiser steps (computed before the first), else the current log-probs of the
single step, detached (the weights have not moved since the rollout). ``rollout_logp`` is
the sampler's.

Truncated importance sampling (TIS; Yao et al. 2025, "Your efficient RL framework secretly
brings you off-policy RL training") multiplies each token's objective loss by

    w_t = min(exp(train_logp_t - rollout_logp_t), C),

the importance weight pi_old / mu capped at ``C`` (``rollout.importance_cap``), passed to
the objective as ``LossInputs.token_weights`` (regularisers are not weighted).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from rlvr.train.config import RolloutConfig


class Correction(NamedTuple):
    """Per-token weights for the loss (or ``None``) and the mismatch metrics."""

    weights: torch.Tensor | None
    """[B, T] truncated importance weights (0 on padding); ``None`` without correction."""
    metrics: dict[str, torch.Tensor]
    """``rollout/logp_diff_*`` and, under ``tis``, ``rollout/is_*`` (detached 0-dim tensors)."""


def rollout_correction(
    train_logp: torch.Tensor,
    rollout_logp: torch.Tensor | None,
    mask: torch.Tensor,
    cfg: RolloutConfig,
) -> Correction:
    """The mismatch of ``rollout_logp`` [B, T] against ``train_logp`` [B, T] on ``mask`` [B, T].

    ``rollout_logp`` is ``None`` when the sampler reports no log-probs: no metrics, and
    ``rollout.importance_correction=tis`` is an error.
    """
    if rollout_logp is None:
        if cfg.importance_correction != "none":
            raise ValueError(
                f"rollout.importance_correction={cfg.importance_correction} needs a sampler "
                f"that reports log-probs (rollout.sampler=vllm); {cfg.sampler!r} reports none"
            )
        return Correction(None, {})
    real = mask.bool()
    tokens = real.sum().clamp_min(1)
    with torch.no_grad():
        diff = (train_logp.detach().float() - rollout_logp.to(train_logp.device).float())[real]
        metrics = {
            "rollout/logp_diff_mean": diff.abs().sum() / tokens,
            "rollout/logp_diff_max": diff.abs().max() if diff.numel() else diff.new_zeros(()),
        }
        if cfg.importance_correction == "none":
            return Correction(None, metrics)
        ratio = diff.exp()  # [tokens]
        weights = torch.zeros(mask.shape, dtype=torch.float32, device=train_logp.device)
        weights[real] = ratio.clamp(max=cfg.importance_cap)
        metrics["rollout/is_weight_mean"] = weights[real].sum() / tokens
        metrics["rollout/is_capped_frac"] = (ratio > cfg.importance_cap).float().sum() / tokens
    return Correction(weights, metrics)
