"""``gmpo``: Geometric-Mean Policy Optimization (papers/apmpo.txt eq. 14, appendix C.3).

In log space, with ``lr = logp - old_logp`` and ``y = clip(lr, -eps_low, eps_high)``:
``x = sign(A)*min(sign(A)*lr, sign(A)*y)``, ``u_i = mean_t x``, ``loss_i = -A_i*exp(u_i)``
averaged over sequences, i.e. ``J_i = sign(A_i) * (prod_t |min(r*A_i, clip(r)*A_i)|)^(1/|o_i|)``
(eq. 14 with ``eps1 = e^-0.4, eps2 = e^0.4``). Advantages ``group_std`` (eq. 2).

The per-sequence loss is repeated on every token of its row, so the default
``seq-mean-token-mean`` aggregation gives ``mean_i loss_i`` exactly; other modes weight
sequences by their length.

Departures: per-token advantages are allowed if they keep one sign per sequence (the
product then runs over ``|A_t|``). Sequences with ``A_i = 0`` give 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from rlvr.objectives.base import (
    ClipInfo,
    ObjectiveOutput,
    PolicyBatch,
    log_magnitude,
    sequence_signs,
    signed_power_mean_loss,
)
from rlvr.objectives.ppo_clip import check_eps
from rlvr.objectives.registry import register_objective


@dataclass(frozen=True)
class GmpoConfig:
    """GMPO's log-space clip widths (band ``[e^-eps_low, e^eps_high]``)."""

    eps_low: float = 0.4
    """Lower width in log space (ratio band edge ``e^-eps_low``)."""
    eps_high: float = 0.4
    """Upper width in log space (ratio band edge ``e^eps_high``)."""

    def __post_init__(self) -> None:
        check_eps(eps_low=self.eps_low, eps_high=self.eps_high)


@register_objective(
    "gmpo",
    config=GmpoConfig,
    advantage="group_std",
    loss_agg="seq-mean-token-mean",
    paper="GMPO (APMPO eq. 14, app. C.3)",
    sequence_level=True,
)
def gmpo_loss(batch: PolicyBatch, cfg: GmpoConfig) -> ObjectiveOutput:
    """Per-sequence geometric-mean loss, repeated over each row's tokens."""
    adv, lr = batch.advantages, batch.log_ratio
    sign = sequence_signs(adv, batch.mask)
    log_phi = log_magnitude(lr, adv, -cfg.eps_low, cfg.eps_high)
    p = torch.zeros_like(sign)  # the geometric mean
    per_seq = signed_power_mean_loss(log_phi, sign, batch.mask, p)  # [B]
    loss = per_seq[:, None].expand_as(lr)
    low = (adv < 0) & (lr < -cfg.eps_low)
    high = (adv > 0) & (lr > cfg.eps_high)
    lower, upper = math.exp(-cfg.eps_low), math.exp(cfg.eps_high)
    return ObjectiveOutput(loss, ClipInfo(batch.ratio, lower, upper, low, high), {})
