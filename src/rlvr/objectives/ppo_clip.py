"""PPO-clip family: ``grpo``, ``dapo`` (clip-higher) and ``dr_grpo``.

GRPO (Shao et al. 2024; as written in ABC-GRPO eq. 4 and Klear eq. 3, 6-7):
``l = -min(r*A, clip(r, 1-eps_low, 1+eps_high)*A)``, aggregated ``seq-mean-token-mean``,
advantages ``group_std``. Optional dual clip (Ye et al. 2020, as in verl): for ``A < 0``,
``l = min(l, -clip_c*A)``, i.e. tokens with ``r > clip_c`` get the constant ``-clip_c*A``
and no gradient.

- ``dapo``: the same loss with ``eps_high = 0.28`` and ``token-mean`` (DAPO clip-higher;
  Klear eq. 6-7). Only the objective part of DAPO: dynamic sampling (``rollout.dynamic_sampling``),
  overlong filtering (``rollout.mask_truncated``) and the soft overlong punishment
  (``reward.overlong_buffer``, :mod:`rlvr.train.overlong`) belong to the trainer.
- ``dr_grpo``: the same loss with ``group_mean`` advantages and ``seq-mean-token-sum-norm``
  (Dr.GRPO); its ``L_max`` constant is the ``max_len`` argument of ``policy_loss``.

Departures: none from ``ALGORITHMS.md``. The dual clip is off by default (``clip_c=None``);
verl turns it on with ``clip_ratio_c = 3``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr.objectives.base import ClipInfo, ObjectiveOutput, PolicyBatch, masked_mean, ppo_clip
from rlvr.objectives.registry import register_objective


def check_number(name: str, value: object) -> None:
    """``value`` must be a real number (not a bool or a string)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")


def check_eps(**values: float) -> None:
    """Each named clip width must be a number >= 0 (``inf`` allowed: no bound)."""
    for name, value in values.items():
        check_number(name, value)
        if not value >= 0:
            raise ValueError(f"{name} must be >= 0, got {value}")


def check_clip_c(clip_c: object) -> None:
    """The dual-clip constant must be None (off) or a number > 1."""
    if clip_c is None:
        return
    check_number("clip_c", clip_c)
    if not clip_c > 1:
        raise ValueError(f"clip_c must be > 1 (or None), got {clip_c}")


@dataclass(frozen=True)
class GrpoConfig:
    """GRPO / PPO-clip hyperparameters."""

    eps_low: float = 0.2
    """Lower clip width: the band's lower edge is ``1 - eps_low``."""
    eps_high: float = 0.2
    """Upper clip width: the band's upper edge is ``1 + eps_high``."""
    clip_c: float | None = None
    """Dual-clip constant (> 1) for ``A < 0`` tokens; None disables the dual clip."""

    def __post_init__(self) -> None:
        check_eps(eps_low=self.eps_low, eps_high=self.eps_high)
        check_clip_c(self.clip_c)


@dataclass(frozen=True)
class DapoConfig(GrpoConfig):
    """DAPO clip-higher: GRPO with a wider upper band."""

    eps_high: float = 0.28
    """Upper clip width (DAPO's clip-higher value)."""


@dataclass(frozen=True)
class DrGrpoConfig(GrpoConfig):
    """Dr.GRPO: GRPO's clip with unnormalised advantages and a constant-length sum."""


def dual_clip(
    loss: torch.Tensor, ratio: torch.Tensor, adv: torch.Tensor, clip_c: float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Apply the dual clip; return the loss and the [B, T] mask of dual-clipped tokens."""
    if clip_c is None:
        return loss, torch.zeros_like(ratio, dtype=torch.bool)
    dual = (adv < 0) & (ratio > clip_c)
    return torch.where(dual, -clip_c * adv, loss), dual


# One loss, three names; decorators apply bottom-up, so grpo is registered (and listed) first.
@register_objective(
    "dr_grpo",
    config=DrGrpoConfig,
    advantage="group_mean",
    loss_agg="seq-mean-token-sum-norm",
    paper="Dr.GRPO",
)
@register_objective(
    "dapo",
    config=DapoConfig,
    advantage="group_std",
    loss_agg="token-mean",
    paper="DAPO clip-higher (Klear eq. 6-7)",
)
@register_objective(
    "grpo",
    config=GrpoConfig,
    advantage="group_std",
    loss_agg="seq-mean-token-mean",
    paper="GRPO (ABC-GRPO eq. 4; Klear eq. 3)",
)
def grpo_loss(batch: PolicyBatch, cfg: GrpoConfig) -> ObjectiveOutput:
    """Per-token PPO-clip loss (with the optional dual clip)."""
    lower, upper = 1.0 - cfg.eps_low, 1.0 + cfg.eps_high
    loss, low, high = ppo_clip(batch.ratio, batch.advantages, lower, upper)
    loss, dual = dual_clip(loss, batch.ratio, batch.advantages, cfg.clip_c)
    metrics = {}
    if cfg.clip_c is not None:
        metrics["clip/dual_frac"] = masked_mean(dual.to(batch.ratio.dtype), batch.mask)
    return ObjectiveOutput(loss, ClipInfo(batch.ratio, lower, upper, low, high | dual), metrics)
