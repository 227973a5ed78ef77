"""``cispo``: clipped importance-sampling weights (MiniMax-M1; Klear appendix A.1 eq. 15-16).

``l = -sg(clip(r, 1-eps_low, 1+eps_high)) * A * logp``, ``token-mean``, ``group_std``
advantages. The gradient wrt ``logp`` is ``-clip(r)*A`` in all four quadrants (Klear eq.
16's ``F``), so ``|dl/dlogp| <= (1+eps_high)*|A|``; no token's gradient is zeroed, the
out-of-band ones are rescaled (counted in ``clip/frac``). ``eps_low = inf`` reproduces
MiniMax-M1's "no lower bound".

Departures: the loss *value* is ``-w*A*logp`` (a REINFORCE surrogate), not a ratio
objective: compare CISPO's gradient, not its loss value, with the others. MiniMax-M1's
token mask for the IS weight is not implemented.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr.objectives.base import ClipInfo, ObjectiveOutput, PolicyBatch, as_bound
from rlvr.objectives.ppo_clip import check_eps
from rlvr.objectives.registry import register_objective


@dataclass(frozen=True)
class CispoConfig:
    """CISPO clip widths of the (detached) importance weight."""

    eps_low: float = 0.2
    """Lower width of the weight clip (``inf``: no lower bound, as in MiniMax-M1)."""
    eps_high: float = 0.28
    """Upper width of the weight clip."""

    def __post_init__(self) -> None:
        check_eps(eps_low=self.eps_low, eps_high=self.eps_high)


@register_objective(
    "cispo",
    config=CispoConfig,
    advantage="group_std",
    loss_agg="token-mean",
    paper="CISPO (Klear app. A.1 eq. 15-16)",
)
def cispo_loss(batch: PolicyBatch, cfg: CispoConfig) -> ObjectiveOutput:
    """Per-token ``-sg(clip(r))*A*logp``."""
    ratio = batch.ratio
    lower, upper = 1.0 - cfg.eps_low, 1.0 + cfg.eps_high
    weight = torch.clamp(ratio.detach(), min=as_bound(lower, ratio), max=as_bound(upper, ratio))
    logp = torch.where(batch.mask, batch.logp, torch.zeros_like(batch.logp))
    loss = -weight * batch.advantages * logp
    low, high = ratio < lower, ratio > upper
    return ObjectiveOutput(loss, ClipInfo(ratio, lower, upper, low, high), {})
