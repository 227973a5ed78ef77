"""``gspo``: Group Sequence Policy Optimization, token form (Zheng et al. 2025, cited in
ABC-GRPO sec. 4.2).

``s_i = exp(mean_t (logp - old_logp))`` over the response tokens, ``s_it = sg(s_i) *
exp(logp - sg(logp))`` (value ``s_i``, gradient ``s_i * d logp_t``), then GRPO's clip on
``s_it``: ``l = -min(s_it*A, clip(s_it, 1-eps_low, 1+eps_high)*A)``, aggregated
``seq-mean-token-mean``; advantages ``group_std``. With a sequence-constant ``A`` the
gradient is GSPO's sequence-level one, ``s_i*A*mean_t d logp_t``; per-token ``A[i, t]``
is GSPO-token. Defaults ``eps_low = 3e-4, eps_high = 4e-4``.

Departures: none from ``ALGORITHMS.md``. The clip acts on whole sequences: ``clip/*``
and the quadrant events use ``s_i`` (every token of a clipped sequence counts).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr.objectives.base import ClipInfo, ObjectiveOutput, PolicyBatch, ppo_clip
from rlvr.objectives.ppo_clip import check_eps
from rlvr.objectives.registry import register_objective


@dataclass(frozen=True)
class GspoConfig:
    """GSPO's sequence-ratio clip widths (paper values)."""

    eps_low: float = 3e-4
    """Lower width of the sequence-ratio band."""
    eps_high: float = 4e-4
    """Upper width of the sequence-ratio band."""

    def __post_init__(self) -> None:
        check_eps(eps_low=self.eps_low, eps_high=self.eps_high)


def sequence_log_ratio(batch: PolicyBatch) -> torch.Tensor:
    """[B] ``mean_t (logp - old_logp)`` over each row's response tokens (0 for empty rows)."""
    tokens = batch.mask.sum(dim=1).clamp(min=1).to(batch.log_ratio.dtype)
    return batch.log_ratio.sum(dim=1) / tokens


@register_objective(
    "gspo",
    config=GspoConfig,
    advantage="group_std",
    loss_agg="seq-mean-token-mean",
    paper="GSPO-token (Zheng et al. 2025)",
)
def gspo_loss(batch: PolicyBatch, cfg: GspoConfig) -> ObjectiveOutput:
    """Per-token GSPO-token loss."""
    log_s = sequence_log_ratio(batch).detach()  # [B]
    own = torch.where(batch.mask, batch.logp - batch.logp.detach(), torch.zeros_like(batch.logp))
    seq_ratio = torch.exp(log_s[:, None] + own)  # [B, T]: value s_i, gradient s_i * d logp_t
    lower, upper = 1.0 - cfg.eps_low, 1.0 + cfg.eps_high
    loss, low, high = ppo_clip(seq_ratio, batch.advantages, lower, upper)
    info = ClipInfo(seq_ratio.detach(), lower, upper, low, high)
    return ObjectiveOutput(loss, info, {})
