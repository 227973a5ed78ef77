"""Regularisers any objective can add: KL to the reference, SFT on positives, entropy bonus.

- KL (``ALGORITHMS.md``): per token, with ``d = ref_logp - logp``: ``k1 = -d`` (i.e.
  ``logp - ref``), ``k2 = d**2 / 2``, ``k3 = exp(d) - d - 1`` (default, as in GRPO).
  ``d`` is set to 0 on padding *before* the exponential. The penalty is aggregated with
  the objective's ``loss_agg`` and the same step denominators, and skipped entirely when
  ``kl_coef == 0`` (the trainer then never needs a reference model). No clamping
  (verl clamps k3 to [-10, 10]; we do not).
- SFT on positives (Klear eq. 13-14): ``sft_coef * NLL``, token-mean over the response
  tokens of responses with ``reward >= sft_threshold``. Departure from the paper: Klear's
  eq. 8/13 write ``-pi`` where an NLL needs ``-log pi``; we use the log-likelihood. For
  gradient accumulation the token-mean divides by ``num_sft_tokens``, the count over the
  whole step (:func:`rlvr.objectives.aggregation.step_counts`).
- Entropy bonus: ``- entropy_coef * H``, ``H`` the per-token entropy the caller computed
  (with gradient), aggregated with ``loss_agg``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch

KL_ESTIMATORS = ("k1", "k2", "k3")


@dataclass(frozen=True)
class RegularizerConfig:
    """Coefficients of the terms added to any objective's loss."""

    kl_coef: float = 0.0
    """Weight of the KL penalty to the reference policy (0: off, no reference needed)."""
    kl_estimator: str = "k3"
    """Per-token KL estimator: ``k1``, ``k2`` or ``k3``."""
    sft_coef: float = 0.0
    """Weight of the NLL on positive responses (Klear's alpha, 0.1 there; 0: off)."""
    sft_threshold: float = 1.0
    """A response is positive for the SFT term when its reward is >= this."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus (subtracted from the loss; 0: off)."""

    def __post_init__(self) -> None:
        if self.kl_estimator not in KL_ESTIMATORS:
            raise ValueError(
                f"unknown kl_estimator {self.kl_estimator!r}; valid: {', '.join(KL_ESTIMATORS)}"
            )
        for name in ("kl_coef", "sft_coef", "entropy_coef", "sft_threshold"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ValueError(f"{name} must be a number, got {value!r}")
        for name in ("kl_coef", "sft_coef", "entropy_coef"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")
        if not math.isfinite(self.sft_threshold):
            raise ValueError(f"sft_threshold must be finite, got {self.sft_threshold}")


def kl_penalty(
    logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, estimator: str = "k3"
) -> torch.Tensor:
    """[B, T] per-token KL estimate of ``pi || pi_ref``, 0 on padding."""
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"unknown kl_estimator {estimator!r}; valid: {', '.join(KL_ESTIMATORS)}")
    diff = torch.where(mask, ref_logp - logp, torch.zeros_like(logp))  # log(pi_ref / pi)
    if estimator == "k1":
        return -diff
    if estimator == "k2":
        return 0.5 * diff.square()
    return torch.exp(diff) - diff - 1.0


def sft_nll(
    logp: torch.Tensor,
    mask: torch.Tensor,
    positive: torch.Tensor,
    num_sft_tokens: int | torch.Tensor | None = None,
    validate: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, nll_mean)``: NLL summed over positive rows' tokens / ``num_sft_tokens``.

    ``positive [B]`` bool marks the responses to imitate. ``loss`` is this call's share of
    the step's token-mean (exactly it when ``num_sft_tokens`` is None); ``nll_mean`` is the
    detached token-mean NLL of this call's positive tokens (0 when there are none).
    ``validate``: also check that ``num_sft_tokens`` covers this call's positive tokens.
    """
    selected = mask & positive[:, None]  # [B, T]
    nll = torch.where(selected, -logp, torch.zeros_like(logp))
    local = selected.sum()
    if num_sft_tokens is None:
        denom = local.clamp(min=1).to(logp.dtype)
    else:
        if validate and bool(local > num_sft_tokens):
            raise ValueError(
                f"num_sft_tokens={int(num_sft_tokens)} is below this call's {int(local)} positive tokens"
            )
        denom = _at_least_one(num_sft_tokens, logp.dtype)
    total = nll.sum()
    return total / denom, total.detach() / local.clamp(min=1).to(logp.dtype)


def _at_least_one(
    count: int | float | torch.Tensor, dtype: torch.dtype
) -> int | float | torch.Tensor:
    """``count`` where it is > 0, else 1; a tensor count in ``dtype``, never read on the host."""
    if isinstance(count, torch.Tensor):
        count = count.to(dtype)
        return torch.where(count > 0, count, torch.ones_like(count))
    return count if count > 0 else 1
