"""Types shared by every objective: the validated batch and what an objective returns.

An objective is a pure function ``(PolicyBatch, Config) -> ObjectiveOutput``; it returns a
per-token loss (aggregated later by :func:`rlvr.objectives.aggregation.aggregate`), the
band its clipping uses (for the quadrant diagnostics) and any metrics of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from rlvr.advantages import GroupStats


@dataclass(frozen=True)
class PolicyBatch:
    """One micro-batch, validated and cast to the compute dtype (float32 or wider)."""

    logp: torch.Tensor
    """[B, T] current log-probs of the sampled tokens (carries the gradient)."""
    old_logp: torch.Tensor
    """[B, T] behaviour-policy log-probs (no gradient)."""
    log_ratio: torch.Tensor
    """[B, T] ``logp - old_logp`` on response tokens, exactly 0 on padding."""
    ratio: torch.Tensor
    """[B, T] ``exp(log_ratio)``: 1 on padding, never an exponentiated padding value."""
    advantages: torch.Tensor
    """[B, T] advantages (a ``[B]`` input broadcast over tokens), 0 on padding."""
    mask: torch.Tensor
    """[B, T] bool, True on response tokens."""
    stats: GroupStats | None = None
    """Per-sample group statistics of these rows (objectives that need them)."""


class ClipInfo(NamedTuple):
    """Where an objective's clipping acted, for the ``clip/*`` metrics."""

    ratio: torch.Tensor
    """[B, T] the ratio the band bounds (the token ratio; GSPO: its sequence ratio)."""
    lower: torch.Tensor | float
    """Lower edge of the nominal band, broadcastable to [B, T]."""
    upper: torch.Tensor | float
    """Upper edge of the nominal band, broadcastable to [B, T]."""
    low: torch.Tensor
    """[B, T] bool: the lower bound zeroed (or rescaled) this token's gradient."""
    high: torch.Tensor
    """[B, T] bool: the upper bound (or the dual clip) zeroed/rescaled it."""


class ObjectiveOutput(NamedTuple):
    """What an objective function returns."""

    per_token_loss: torch.Tensor
    """[B, T] loss to aggregate (sequence-level objectives repeat ``loss_i`` on row i)."""
    clip: ClipInfo
    """Clipping diagnostics."""
    metrics: dict[str, torch.Tensor]
    """Objective-specific metrics (detached 0-dim tensors)."""


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` over ``mask`` (0 when the mask is empty), detached."""
    values = values.detach()
    total = torch.where(mask, values, torch.zeros_like(values)).sum()
    return total / mask.sum().clamp(min=1).to(values.dtype)


def masked_extreme(values: torch.Tensor, mask: torch.Tensor, largest: bool) -> torch.Tensor:
    """Max (``largest``) or min of ``values`` over a non-empty ``mask``, detached."""
    fill = float("-inf") if largest else float("inf")
    values = torch.where(mask, values.detach(), torch.full_like(values, fill))
    return values.max() if largest else values.min()


class ClippedLoss(NamedTuple):
    """The PPO-clip loss and where each bound held it constant."""

    loss: torch.Tensor
    """[B, T] ``-min(r*A, clip(r, lower, upper)*A)``."""
    low: torch.Tensor
    """[B, T] bool: ``A < 0`` and ``r < lower``."""
    high: torch.Tensor
    """[B, T] bool: ``A > 0`` and ``r > upper``."""


def ppo_clip(
    ratio: torch.Tensor,
    adv: torch.Tensor,
    lower: torch.Tensor | float,
    upper: torch.Tensor | float,
) -> ClippedLoss:
    """``-min(r*A, clip(r, lower, upper)*A)`` and its (low, high) clipped masks, [B, T] each.

    ``low``: ``A < 0`` and ``r < lower`` (the clip holds the loss constant);
    ``high``: ``A > 0`` and ``r > upper``.
    """
    lower, upper = as_bound(lower, ratio), as_bound(upper, ratio)
    clipped = torch.clamp(ratio, min=lower, max=upper)
    loss = -torch.minimum(ratio * adv, clipped * adv)
    low = (adv < 0) & (ratio < lower)
    high = (adv > 0) & (ratio > upper)
    return ClippedLoss(loss, low, high)


def as_bound(bound: torch.Tensor | float, like: torch.Tensor) -> torch.Tensor:
    """A clip bound as a tensor of ``like``'s dtype and device (``inf`` allowed); a number is
    filled in on the device (a host-to-device copy would synchronise the stream)."""
    if isinstance(bound, torch.Tensor):
        return bound.to(dtype=like.dtype, device=like.device)
    return torch.full((), bound, dtype=like.dtype, device=like.device)


def stop_unit(log_ratio: torch.Tensor) -> torch.Tensor:
    """``r / sg(r)`` computed as ``exp(lr - sg(lr))``: value exactly 1, gradient ``d lr``."""
    return torch.exp(log_ratio - log_ratio.detach())


P_GEOMETRIC = 1e-4
"""Below this exponent the power mean is replaced by its ``p -> 0`` limit, the geometric mean."""


def sequence_signs(adv: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B] ``sign(A_i)`` in {-1, 0, 1} from ``adv [B, T]`` on ``mask``; a row whose per-token
    advantages change sign gets 0 (``validate=True`` rejects it: ``inputs.check_signs``)."""
    pos = ((adv > 0) & mask).any(dim=1)
    neg = ((adv < 0) & mask).any(dim=1)
    return (pos & ~neg).to(adv.dtype) - (neg & ~pos).to(adv.dtype)


def log_magnitude(
    log_ratio: torch.Tensor,
    adv: torch.Tensor,
    log_lower: torch.Tensor | float,
    log_upper: torch.Tensor | float,
) -> torch.Tensor:
    """[B, T] ``log |min(r*A, clip(r, e^lower, e^upper)*A)|``, computed in log space.

    For ``A > 0`` the min keeps ``min(r, e^upper)``, for ``A < 0`` ``max(r, e^lower)``;
    ``-inf`` where ``A == 0``. A ratio exactly on a bound is inside the band and keeps its
    whole gradient, as with :func:`ppo_clip`'s clamp (``torch.minimum`` would halve it).
    """
    log_lower, log_upper = as_bound(log_lower, log_ratio), as_bound(log_upper, log_ratio)
    kept = torch.where(
        adv > 0,
        torch.where(log_ratio > log_upper, log_upper, log_ratio),
        torch.where(log_ratio < log_lower, log_lower, log_ratio),
    )
    return torch.log(adv.abs()) + kept


def signed_power_mean_loss(
    log_phi: torch.Tensor, sign: torch.Tensor, mask: torch.Tensor, p: torch.Tensor
) -> torch.Tensor:
    """[B] ``loss_i = -sign_i * (mean_t phi^p)^(1/p)`` from ``log_phi [B, T]``, ``p [B]``.

    Computed as ``exp(logmeanexp(p*log_phi)/p)``; rows with ``p < P_GEOMETRIC`` use the
    geometric mean ``exp(mean_t log_phi)``; rows with ``sign == 0`` give exactly 0 (and no
    NaN in the backward pass: every unused branch sees finite placeholders). The reduction
    runs in float64 (except on MPS): dividing a log-mean by a small ``p`` would amplify
    float32 rounding (relative error ~1e-5 at p = 0.05, ~4e-4 at p = 1e-3).
    """
    out_dtype = log_phi.dtype
    if log_phi.device.type != "mps":  # float64 keeps (.)^(1/p) accurate for small p
        log_phi, sign, p = log_phi.double(), sign.double(), p.double()
    skip = sign == 0  # [B]
    valid = mask & ~skip[:, None]
    safe = torch.where(valid, log_phi, torch.zeros_like(log_phi))
    tokens = mask.sum(dim=1).clamp(min=1).to(log_phi.dtype)  # [B]
    geometric = torch.exp(safe.sum(dim=1) / tokens)
    use_geo = p < P_GEOMETRIC
    p_safe = torch.where(use_geo, torch.ones_like(p), p)
    filler = torch.where(skip[:, None], 0.0, float("-inf")).to(log_phi.dtype)
    scaled = torch.where(valid, p_safe[:, None] * safe, filler)
    log_mean = torch.logsumexp(scaled, dim=1) - torch.log(tokens)
    power = torch.exp(log_mean / p_safe)
    magnitude = torch.where(use_geo, geometric, power)
    return torch.where(skip, torch.zeros_like(magnitude), -sign * magnitude).to(out_dtype)
