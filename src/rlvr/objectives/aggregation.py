"""Loss aggregation: per-token losses ``[B, T]`` to one scalar (verl's mode names).

With ``m`` the response mask and ``l`` the per-token loss:

- ``token-mean``: ``sum_{i,t} m*l / num_tokens`` (DAPO, GPPO: Klear eq. 7, 11).
- ``seq-mean-token-mean``: ``sum_i (sum_t m*l / sum_t m) / num_seqs`` (GRPO, ABC-GRPO
  eq. 6, ETR eq. 9).
- ``seq-mean-token-sum``: ``sum_{i,t} m*l / num_seqs``.
- ``seq-mean-token-sum-norm``: ``sum_{i,t} m*l / (num_seqs * max_len)`` (Dr.GRPO).
- ``token-sum``: ``sum_{i,t} m*l``, no denominator (verl's ``token-sum``).

Gradient accumulation: every mode is a *sum* over rows divided by a step-level constant,
so when ``num_tokens`` / ``num_seqs`` / ``max_len`` are those of the whole optimizer step
(:func:`step_counts` over the step's full mask), summing the results over micro-batches
gives the full-batch value and gradient. Left as None, they are taken from this call's
``mask`` (right only when the call holds the whole step).

Decisions (documented in ``docs/objectives.md``):

- ``num_seqs`` counts rows with at least one response token; an empty row contributes 0.
- ``max_len`` (Dr.GRPO's constant ``L_max``) defaults to ``mask.shape[-1]``, which varies
  when micro-batches are padded separately: pass the generation budget
  (``SamplingConfig.max_new_tokens``) for a constant that does not. A row longer than
  ``max_len`` is an error (checked with ``validate=True``).
- Padding is selected away with ``torch.where``, never multiplied by 0, so a NaN or inf
  loss on a padding position cannot leak into the result.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

LOSS_AGG_MODES = (
    "token-mean",
    "seq-mean-token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
    "token-sum",
)

Count = int | float | torch.Tensor


class StepCounts(NamedTuple):
    """Denominators of one optimizer step, passed to every micro-batch's loss.

    A count left ``None`` is taken from the call's own mask (right only when the call
    holds the whole step).
    """

    num_tokens: Count | None = None
    """Response tokens in the step (``token-mean``)."""
    num_seqs: Count | None = None
    """Sequences with at least one response token (the ``seq-mean-*`` modes)."""
    num_sft_tokens: Count | None = None
    """Response tokens of the responses the SFT term trains on (None without rewards)."""
    max_len: int | None = None
    """Dr.GRPO's constant ``L_max`` (``seq-mean-token-sum-norm``), e.g. ``max_new_tokens``."""


def step_counts(
    mask: torch.Tensor,
    rewards: torch.Tensor | None = None,
    sft_threshold: float = 1.0,
    max_len: int | None = None,
) -> StepCounts:
    """Counts over the whole step's ``mask [B, T]`` (and ``rewards [B]`` for the SFT term).

    Passing them to the loss of each micro-batch makes the summed gradient equal the
    full-batch one (``policy_loss(..., **step_counts(mask, rewards)._asdict())``).
    """
    mask = _bool_mask(mask)
    row_tokens = mask.sum(dim=1)  # [B]
    num_sft = None
    if rewards is not None:
        if rewards.shape != row_tokens.shape:
            raise ValueError(
                f"rewards must have shape [B]={tuple(row_tokens.shape)}, got {tuple(rewards.shape)}"
            )
        num_sft = int(row_tokens[rewards >= sft_threshold].sum())
    return StepCounts(int(row_tokens.sum()), int((row_tokens > 0).sum()), num_sft, max_len)


def _bool_mask(mask: torch.Tensor) -> torch.Tensor:
    if mask.dim() != 2:
        raise ValueError(f"mask must be [B, T], got shape {tuple(mask.shape)}")
    return mask if mask.dtype == torch.bool else mask != 0


def _positive(value: Count, name: str, dtype: torch.dtype) -> Count:
    """A denominator: a positive number (checked), or a tensor (unchecked: reading it would be a
    host-device sync) cast to the loss's ``dtype``, so it divides the loss as a number would."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype)
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def aggregate(
    per_token_loss: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    num_tokens: Count | None = None,
    num_seqs: Count | None = None,
    max_len: int | None = None,
    validate: bool = False,
) -> torch.Tensor:
    """Scalar loss from ``per_token_loss [B, T]`` over ``mask [B, T]`` (see module doc).

    ``validate``: also check that no row is longer than ``max_len`` (reads the mask on the
    host: a host-device synchronisation).
    """
    if mode not in LOSS_AGG_MODES:
        raise ValueError(f"unknown loss_agg {mode!r}; valid: {', '.join(LOSS_AGG_MODES)}")
    mask = _bool_mask(mask)
    if per_token_loss.shape != mask.shape:
        raise ValueError(
            f"per_token_loss shape {tuple(per_token_loss.shape)} != mask shape {tuple(mask.shape)}"
        )
    masked = torch.where(mask, per_token_loss, torch.zeros_like(per_token_loss))
    row_tokens = mask.sum(dim=1)  # [B]
    if mode == "token-mean":
        denom = (
            row_tokens.sum()
            if num_tokens is None
            else _positive(num_tokens, "num_tokens", masked.dtype)
        )
        return masked.sum() / denom
    if mode == "token-sum":
        return masked.sum()
    seqs = (
        (row_tokens > 0).sum()
        if num_seqs is None
        else _positive(num_seqs, "num_seqs", masked.dtype)
    )
    if mode == "seq-mean-token-mean":
        per_seq = masked.sum(dim=1) / row_tokens.clamp(min=1).to(masked.dtype)
        return per_seq.sum() / seqs
    if mode == "seq-mean-token-sum":
        return masked.sum() / seqs
    length = mask.shape[1] if max_len is None else _positive(max_len, "max_len", masked.dtype)
    if validate and max_len is not None and bool((row_tokens > max_len).any()):
        raise ValueError(
            f"max_len={max_len} is shorter than a response ({int(row_tokens.max())} tokens)"
        )
    return masked.sum() / (seqs * length)
