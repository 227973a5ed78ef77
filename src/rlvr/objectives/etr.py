"""``etr``: Elastic Trust Regions (papers/etr.txt eq. 6-9, Alg. 1).

``eps = eps_base + lam1*tanh(A) + lam2*4*p_g*(1-p_g)`` (eq. 6-8), then GRPO's clip with
``eps_low = eps_high = eps`` (eq. 9), ``seq-mean-token-mean``, ``group_std`` advantages
(Alg. 1 l.11). ``p_g`` is the fraction of the group whose reward exceeds
``pass_threshold`` (Alg. 1 l.8 uses ``r_i > 0``), taken from precomputed
:class:`rlvr.advantages.GroupStats` rows. ``A < 0`` narrows the band, ``A > 0`` widens it.

Departures (all from ``ALGORITHMS.md``):

1. ``eps`` is clamped to ``[eps_floor, eps_ceil] = [0.01, 0.95]`` so the band never
   inverts (the paper has no clamp; with its defaults ``eps`` stays in ``[0.1, 0.4]`` and
   the clamp never acts). ``etr/clamped_frac`` reports how often it does.
2. ``pass_threshold`` generalises Alg. 1's ``r_i > 0`` (default 0 reproduces it for both
   ``1/0`` and ``+1/-1`` rewards).
3. With per-token advantages ``A[i, t]`` the threshold is per token (eq. 6 writes
   ``A_t``); with ``[B]`` advantages it is per sequence, as in Alg. 1 l.15-16.

Metrics ``etr/eps_mean|min|max|clamped_frac`` are over response tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from rlvr.advantages import StatsOptions
from rlvr.objectives.base import (
    ClipInfo,
    ObjectiveOutput,
    PolicyBatch,
    masked_extreme,
    masked_mean,
    ppo_clip,
)
from rlvr.objectives.ppo_clip import check_number
from rlvr.objectives.registry import register_objective


@dataclass(frozen=True)
class EtrConfig:
    """Elastic Trust Regions hyperparameters (paper defaults)."""

    eps_base: float = 0.2
    """Base clip width (GRPO's eps)."""
    lam1: float = 0.1
    """Weight of the micro (advantage) term ``tanh(A)``."""
    lam2: float = 0.1
    """Weight of the macro (group variance) term ``4*p_g*(1-p_g)``."""
    pass_threshold: float = 0.0
    """A response counts as passed for ``p_g`` when its reward is > this."""
    eps_floor: float = 0.01
    """Smallest allowed clip width after the adjustments."""
    eps_ceil: float = 0.95
    """Largest allowed clip width (keeps ``1 - eps > 0``)."""

    def __post_init__(self) -> None:
        for name in ("eps_base", "lam1", "lam2", "pass_threshold", "eps_floor", "eps_ceil"):
            check_number(name, getattr(self, name))
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be finite, got {getattr(self, name)}")
        if not self.eps_base >= 0:
            raise ValueError(f"eps_base must be >= 0, got {self.eps_base}")
        if not 0 < self.eps_floor <= self.eps_ceil < 1:
            raise ValueError(
                f"need 0 < eps_floor <= eps_ceil < 1, got eps_floor={self.eps_floor}, "
                f"eps_ceil={self.eps_ceil}"
            )

    def stats_options(self) -> StatsOptions:
        """The group statistics this objective reads."""
        return StatsOptions(pass_threshold=self.pass_threshold)


def etr_eps(adv: torch.Tensor, pass_rate: torch.Tensor, cfg: EtrConfig) -> torch.Tensor:
    """Unclamped eq. 6: ``[B, T]`` widths from advantages ``[B, T]`` and ``p_g`` ``[B]``."""
    macro = 4.0 * pass_rate * (1.0 - pass_rate)  # [B]
    return cfg.eps_base + cfg.lam1 * torch.tanh(adv) + cfg.lam2 * macro[:, None]


@register_objective(
    "etr",
    config=EtrConfig,
    advantage="group_std",
    loss_agg="seq-mean-token-mean",
    paper="ETR eq. 6-9, Alg. 1",
    group_stats=True,
)
def etr_loss(batch: PolicyBatch, cfg: EtrConfig) -> ObjectiveOutput:
    """GRPO clip with the per-sequence (or per-token) elastic width."""
    if batch.stats.options.pass_threshold != cfg.pass_threshold:
        raise ValueError(
            f"group_stats were computed with pass_threshold={batch.stats.options.pass_threshold}, "
            f"etr has pass_threshold={cfg.pass_threshold}"
        )
    pass_rate = batch.stats.pass_rate.to(batch.ratio.dtype)
    raw = etr_eps(batch.advantages, pass_rate, cfg)
    eps = raw.clamp(cfg.eps_floor, cfg.eps_ceil)
    lower, upper = 1.0 - eps, 1.0 + eps
    loss, low, high = ppo_clip(batch.ratio, batch.advantages, lower, upper)
    mask = batch.mask
    metrics = {
        "etr/eps_mean": masked_mean(eps, mask),
        "etr/eps_min": masked_extreme(eps, mask, largest=False),
        "etr/eps_max": masked_extreme(eps, mask, largest=True),
        "etr/clamped_frac": masked_mean((raw != eps).to(eps.dtype), mask),
    }
    return ObjectiveOutput(loss, ClipInfo(batch.ratio, lower, upper, low, high), metrics)
