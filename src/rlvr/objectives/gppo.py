"""``gppo``: Gradient-Preserving Clipping (papers/klear-reasoner-gppo.txt eq. 11-12, 17-18).

Branch-wise, in the general beta form of eq. 17 (``sg`` = stop-gradient):

- ``A < 0`` and ``r < 1-eps_low``:  ``l = -b1*(1-eps_low) * r/sg(r) * A``;
- ``A > 0`` and ``r > 1+eps_high``: ``l = -b2*(1+eps_high) * r/sg(r) * A``;
- otherwise (the tokens GRPO does not clip): ``l = -r*A``.

The gradient wrt ``logp`` is ``-F*A`` with ``F = b1*(1-eps_low)``, ``b2*(1+eps_high)`` or
``r`` (eq. 12, 18): tokens GRPO clips keep a bounded gradient, ``|dl/dlogp| <=
max(b1*(1-eps_low), b2*(1+eps_high), r)*|A|``. With ``b1 = b2 = 1`` the forward value is
GRPO's exactly (eq. 11), only the gradient differs. Defaults ``eps_low = 0.2,
eps_high = 0.28``, ``token-mean`` (eq. 11), ``group_std`` advantages (eq. 4), no KL.

Departures: ``r/sg(r)`` is computed as ``exp(lr - sg(lr))`` (same value 1 and gradient,
no division). Optional dual clip ``clip_c`` as in Klear's public code (off by default,
not in the paper): ``A < 0`` tokens with ``r > clip_c`` get the constant ``-clip_c*A`` and
no gradient. ``gppo/preserved_frac`` is the share of response tokens GRPO would clip whose
gradient GPPO keeps (equal to ``clip/frac`` without the dual clip).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from rlvr.objectives.base import ClipInfo, ObjectiveOutput, PolicyBatch, masked_mean, stop_unit
from rlvr.objectives.ppo_clip import check_clip_c, check_eps, dual_clip
from rlvr.objectives.registry import register_objective


@dataclass(frozen=True)
class GppoConfig:
    """GPPO hyperparameters (Klear defaults; ``b1 = b2 = 1`` is eq. 11)."""

    eps_low: float = 0.2
    """Lower clip width (band edge ``1 - eps_low``)."""
    eps_high: float = 0.28
    """Upper clip width (band edge ``1 + eps_high``)."""
    b1: float = 1.0
    """Scale of the preserved gradient of ``A < 0, r < 1-eps_low`` tokens (eq. 17's beta1)."""
    b2: float = 1.0
    """Scale of the preserved gradient of ``A > 0, r > 1+eps_high`` tokens (beta2)."""
    clip_c: float | None = None
    """Dual-clip constant (> 1) for ``A < 0`` tokens as in Klear's code; None: off."""

    def __post_init__(self) -> None:
        check_eps(eps_low=self.eps_low, eps_high=self.eps_high, b1=self.b1, b2=self.b2)
        for name in ("eps_low", "eps_high", "b1", "b2"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be finite for gppo, got {getattr(self, name)}")
        check_clip_c(self.clip_c)


@register_objective(
    "gppo",
    config=GppoConfig,
    advantage="group_std",
    loss_agg="token-mean",
    paper="Klear GPPO eq. 11-12, 17-18",
)
def gppo_loss(batch: PolicyBatch, cfg: GppoConfig) -> ObjectiveOutput:
    """Per-token GPPO loss (eq. 17), optional dual clip."""
    ratio, adv = batch.ratio, batch.advantages
    lower, upper = 1.0 - cfg.eps_low, 1.0 + cfg.eps_high
    low = (adv < 0) & (ratio < lower)
    high = (adv > 0) & (ratio > upper)
    unit = stop_unit(batch.log_ratio)  # value 1, gradient d logp
    loss = torch.where(
        low,
        -cfg.b1 * lower * unit * adv,
        torch.where(high, -cfg.b2 * upper * unit * adv, -ratio * adv),
    )
    loss, dual = dual_clip(loss, ratio, adv, cfg.clip_c)
    preserved = (low | high) & (adv != 0) & ~dual
    metrics = {"gppo/preserved_frac": masked_mean(preserved.to(ratio.dtype), batch.mask)}
    if cfg.clip_c is not None:
        metrics["clip/dual_frac"] = masked_mean(dual.to(ratio.dtype), batch.mask)
    return ObjectiveOutput(loss, ClipInfo(ratio, lower, upper, low, high | dual), metrics)
