"""``abc_grpo``: Adaptive-Boundary-Clipping GRPO (papers/abc-grpo.txt eq. 5-6, Alg. 1).

``rt = clip(r, 1-eps2, 1+eps1)`` if ``A > 0`` else ``clip(r, 1-eps4, 1+eps3)`` (eq. 5,
``A <= 0`` takes the second band); ``l = -rt*A`` (Alg. 1 l.9), no ``min``: the clip is
unconditional, so the gradient is exactly zero outside the band in all four quadrants
(eq. 11-13) and the per-token gradient is bounded by ``|A| * (1 + max(eps1, eps3))``
(eq. 15-16). Aggregated ``seq-mean-token-mean`` (eq. 6); advantages ``group_mean`` (eq. 3,
Alg. 1 l.4). With ``eps2 = eps3 = inf`` it is ``grpo`` with ``eps_high = eps1`` and
``eps_low = eps4`` (sec. 4.2).

Departures: none. The paper's eq. 5 leaves the ``A = 0`` band to the ``A <= 0`` case;
such tokens have zero loss and gradient either way.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr.objectives.base import ClipInfo, ObjectiveOutput, PolicyBatch, as_bound
from rlvr.objectives.ppo_clip import check_eps
from rlvr.objectives.registry import register_objective


@dataclass(frozen=True)
class AbcConfig:
    """ABC-GRPO's four clip widths (paper: all 0.2)."""

    eps1: float = 0.2
    """Upper width for ``A > 0`` (band edge ``1 + eps1``)."""
    eps2: float = 0.2
    """Lower width for ``A > 0`` (band edge ``1 - eps2``)."""
    eps3: float = 0.2
    """Upper width for ``A <= 0`` (band edge ``1 + eps3``; ``inf`` is GRPO's Q4)."""
    eps4: float = 0.2
    """Lower width for ``A <= 0`` (band edge ``1 - eps4``)."""

    def __post_init__(self) -> None:
        check_eps(eps1=self.eps1, eps2=self.eps2, eps3=self.eps3, eps4=self.eps4)


@register_objective(
    "abc_grpo",
    config=AbcConfig,
    advantage="group_mean",
    loss_agg="seq-mean-token-mean",
    paper="ABC-GRPO eq. 3, 5-6, Alg. 1",
)
def abc_loss(batch: PolicyBatch, cfg: AbcConfig) -> ObjectiveOutput:
    """Per-token ``-clip(r, band(A))*A`` with the sign-dependent band of eq. 5."""
    ratio, adv = batch.ratio, batch.advantages
    pos = adv > 0
    lower = torch.where(pos, as_bound(1.0 - cfg.eps2, ratio), as_bound(1.0 - cfg.eps4, ratio))
    upper = torch.where(pos, as_bound(1.0 + cfg.eps1, ratio), as_bound(1.0 + cfg.eps3, ratio))
    loss = -torch.clamp(ratio, min=lower, max=upper) * adv
    low, high = ratio < lower, ratio > upper
    return ObjectiveOutput(loss, ClipInfo(ratio, lower, upper, low, high), {})
