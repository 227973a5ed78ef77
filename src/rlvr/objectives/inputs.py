"""Input checking for :func:`rlvr.objectives.policy_loss`: bad input is a ValueError that
names the argument. Builds the :class:`~rlvr.objectives.base.PolicyBatch` objectives see.

Two kinds of check. Types, shapes, dtypes and missing inputs are read from tensor metadata
and always checked: they cost nothing. Checks of *values* (a 0/1 mask with a response
token, no NaN/inf on response tokens, non-negative weights, one advantage sign per
sequence, counts that cover the call) must read the values on the host, a host-device
synchronisation that stalls a GPU step, so they run only with ``validate=True``.
"""

from __future__ import annotations

from typing import Any

import torch

from rlvr.advantages import GroupStats
from rlvr.objectives.base import ClipInfo, ObjectiveOutput, PolicyBatch


def check_mask(mask: Any, validate: bool = False) -> torch.Tensor:
    """``mask [B, T]`` as bool; values must be 0/1 and at least one must be 1 (``validate``)."""
    if not isinstance(mask, torch.Tensor) or mask.dim() != 2:
        raise ValueError(f"mask must be a 2-D tensor [B, T], got {_describe(mask)}")
    if mask.dtype != torch.bool:
        if validate and not bool(((mask == 0) | (mask == 1)).all()):
            raise ValueError("mask must hold only 0 and 1")
        mask = mask != 0
    if validate and not bool(mask.any()):
        raise ValueError("mask has no response tokens (all zero)")
    return mask


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"shape {tuple(value.shape)}"
    return type(value).__name__


def finite_on(values: torch.Tensor, mask: torch.Tensor) -> bool:
    """True when ``values`` is finite wherever ``mask`` is set (padding may hold anything)."""
    return bool(torch.where(mask, torch.isfinite(values.detach()), True).all())


def check_tensor(
    name: str, value: Any, shape: torch.Size, mask: torch.Tensor, validate: bool = False
) -> None:
    """``value`` is a floating tensor of ``shape``, finite on response tokens (``validate``)."""
    if not isinstance(value, torch.Tensor) or value.shape != shape:
        raise ValueError(
            f"{name} must be a tensor of shape {tuple(shape)} (the mask's), got {_describe(value)}"
        )
    if not value.is_floating_point():
        raise ValueError(f"{name} must be a floating tensor, got {value.dtype}")
    if validate and not finite_on(value, mask):
        raise ValueError(f"{name} contains NaN or inf on response tokens")


def check_advantages(
    adv: Any, mask: torch.Tensor, dtype: torch.dtype, validate: bool = False
) -> torch.Tensor:
    """``[B]`` or ``[B, T]`` advantages as a detached ``[B, T]`` tensor, 0 on padding."""
    if isinstance(adv, torch.Tensor) and adv.dim() == 1 and adv.shape[0] == mask.shape[0]:
        adv = adv[:, None].expand(mask.shape)
    if not isinstance(adv, torch.Tensor) or adv.shape != mask.shape:
        raise ValueError(
            f"advantages must have shape [B]=({mask.shape[0]},) or [B, T]={tuple(mask.shape)}, "
            f"got {_describe(adv)}"
        )
    adv = adv.detach().to(dtype)
    if validate and not finite_on(adv, mask):
        raise ValueError("advantages contain NaN or inf on response tokens")
    return torch.where(mask, adv, torch.zeros_like(adv))


def check_rewards(rewards: Any, batch_size: int, validate: bool = False) -> torch.Tensor:
    """``rewards [B]``, finite (``validate``)."""
    if not isinstance(rewards, torch.Tensor) or rewards.shape != (batch_size,):
        raise ValueError(
            f"rewards must be a tensor of shape [B]=({batch_size},), got {_describe(rewards)}"
        )
    if validate and not bool(torch.isfinite(rewards.float()).all()):
        raise ValueError("rewards contain NaN or inf")
    return rewards


def check_stats(name: str, stats: Any, batch_size: int) -> GroupStats:
    """The rows' group statistics, which objective ``name`` needs: present and ``batch_size`` long."""
    if stats is None:
        raise ValueError(
            f"group_stats: objective {name!r} needs per-row statistics of whole groups "
            "(ObjectiveConfig.group_stats over the whole rollout batch, then .rows(index))"
        )
    if not isinstance(stats, GroupStats) or len(stats) != batch_size:
        raise ValueError(
            f"group_stats must be GroupStats with {batch_size} rows, got {_describe(stats)}"
        )
    return stats


def check_weights(weights: Any, mask: torch.Tensor, validate: bool = False) -> torch.Tensor:
    """``token_weights [B, T]``: floating, finite and >= 0 on response tokens (``validate``);
    detached, 0 on padding."""
    check_tensor("token_weights", weights, mask.shape, mask, validate)
    weights = torch.where(mask, weights.detach(), torch.zeros_like(weights))
    if validate and bool((weights < 0).any()):
        raise ValueError("token_weights must be >= 0 on response tokens")
    return weights


def check_output(name: str, out: Any, mask: torch.Tensor, validate: bool = False) -> None:
    """What objective ``name`` returned: an ``ObjectiveOutput`` with a floating ``[B, T]``
    per-token loss, a ``ClipInfo`` and metrics of detached 0-dim tensors; with ``validate``,
    a loss finite on response tokens. A loss of your own that breaks this failed deep in
    the trainer, or (NaN) skipped every update."""
    where = f"objective {name!r} returned"
    if not isinstance(out, ObjectiveOutput):
        raise ValueError(f"{where} a {type(out).__name__}, not an ObjectiveOutput")
    loss = out.per_token_loss
    if not isinstance(loss, torch.Tensor) or loss.shape != mask.shape:
        raise ValueError(
            f"{where} a per-token loss of {_describe(loss)}; needs the mask's [B, T] "
            f"{tuple(mask.shape)}"
        )
    if not loss.is_floating_point():
        raise ValueError(f"{where} a per-token loss of dtype {loss.dtype}; needs a float one")
    if not isinstance(out.clip, ClipInfo):
        raise ValueError(f"{where} clip as a {type(out.clip).__name__}, not a ClipInfo")
    if not isinstance(out.metrics, dict):
        raise ValueError(f"{where} metrics as a {type(out.metrics).__name__}, not a dict")
    for key, value in out.metrics.items():
        if not isinstance(value, torch.Tensor) or value.dim() != 0:
            raise ValueError(f"{where} metric {key!r} as {_describe(value)}; needs a 0-dim tensor")
    if validate and not finite_on(loss, mask):
        raise ValueError(f"{where} a per-token loss with NaN or inf on response tokens")


def check_signs(adv: torch.Tensor, mask: torch.Tensor, objective: str) -> None:
    """Per-token advantages ``adv [B, T]`` keep one sign on each row's response tokens
    (sequence-level objectives; a row that changes sign would get sign 0, i.e. no loss)."""
    pos = ((adv > 0) & mask).any(dim=1)
    neg = ((adv < 0) & mask).any(dim=1)
    if bool((pos & neg).any()):
        raise ValueError(
            f"advantages: {objective} is a sequence-level objective; per-token advantages "
            "must not change sign within a sequence"
        )


def build_batch(
    logp: Any, old_logp: Any, advantages: Any, mask: Any, validate: bool = False
) -> PolicyBatch:
    """Checked :class:`PolicyBatch`; ratios in float32 (or wider), padding never exponentiated."""
    mask = check_mask(mask, validate)
    check_tensor("logp", logp, mask.shape, mask, validate)
    check_tensor("old_logp", old_logp, mask.shape, mask, validate)
    dtype = torch.promote_types(logp.dtype, torch.float32)
    logp = logp.to(dtype)
    old_logp = old_logp.detach().to(dtype)
    log_ratio = torch.where(mask, logp - old_logp, torch.zeros_like(logp))
    adv = check_advantages(advantages, mask, dtype, validate)
    return PolicyBatch(logp, old_logp, log_ratio, torch.exp(log_ratio), adv, mask)
