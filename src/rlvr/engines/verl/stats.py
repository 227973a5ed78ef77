"""Advantages and group statistics over a verl batch, whose groups are labelled, not contiguous.

verl marks the responses to one prompt with a shared ``uid`` and reorders the batch across
data-parallel ranks (``trainer.balance_batch``), so rows of a group need not be adjacent;
it also appends padding rows (no response token, a uid of their own) to make the batch
divisible. These functions group by label, skip rows without response tokens (``valid``
False: they get advantage 0 and statistics 0 and never enter a batch-wide mean or std),
and otherwise compute exactly what :mod:`rlvr.advantages` computes on contiguous groups:
population std, ``eps = 1e-6``, statistics in float64.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from rlvr.advantages import ADVANTAGE_MODES, GroupStats, StatsOptions
from rlvr.advantages import _mapped as mapped_rewards


def group_ids(index: Sequence[Any] | np.ndarray) -> torch.Tensor:
    """``[B]`` int64 group number of each row from its label (verl's ``uid``)."""
    labels = [str(label) for label in np.asarray(index, dtype=object).reshape(-1)]
    numbers: dict[str, int] = {}
    return torch.tensor([numbers.setdefault(label, len(numbers)) for label in labels])


def _group_mean(values: torch.Tensor, groups: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """``[B]`` mean of ``values`` over the valid rows of each row's group (0 for empty groups)."""
    size = int(groups.max()) + 1 if groups.numel() else 0
    weight = valid.to(values.dtype)
    sums = values.new_zeros(size).index_add_(0, groups, values * weight)
    counts = values.new_zeros(size).index_add_(0, groups, weight)
    return (sums / counts.clamp(min=1))[groups]


def _checked(
    scores: torch.Tensor, groups: torch.Tensor, valid: torch.Tensor | None
) -> torch.Tensor:
    if scores.dim() != 1 or groups.shape != scores.shape:
        raise ValueError(
            f"scores must be [B] with one group label per row, got {tuple(scores.shape)} "
            f"scores and {tuple(groups.shape)} labels"
        )
    if not bool(torch.isfinite(scores).all()):
        raise ValueError("rewards contain NaN or inf")
    return torch.ones_like(scores, dtype=torch.bool) if valid is None else valid.bool()


def labelled_advantages(
    scores: torch.Tensor,
    index: Sequence[Any] | np.ndarray,
    mode: str,
    valid: torch.Tensor | None = None,
    eps: float = 1e-6,
) -> torch.Tensor:
    """``[B]`` advantages of ``scores [B]`` grouped by ``index`` labels (``rlvr.advantages`` modes)."""
    if mode not in ADVANTAGE_MODES:
        raise ValueError(f"unknown advantage mode {mode!r}; valid: {', '.join(ADVANTAGE_MODES)}")
    groups = group_ids(index).to(scores.device)
    scores = scores.detach().double()
    valid = _checked(scores, groups, valid)
    centred = scores - _group_mean(scores, groups, valid)
    if mode == "group_std":
        std = _group_mean(centred.square(), groups, valid).sqrt()
        centred = centred / (std + eps)
    elif mode == "batch_std":
        centred = centred / (scores[valid].std(unbiased=False) + eps)
    return torch.where(valid, centred, torch.zeros_like(centred))


def labelled_group_stats(
    rewards: torch.Tensor,
    index: Sequence[Any] | np.ndarray,
    options: StatsOptions,
    valid: torch.Tensor | None = None,
) -> GroupStats:
    """:class:`GroupStats` of ``rewards [B]`` grouped by ``index`` labels, over the valid rows.

    Equal, row for row, to :func:`rlvr.advantages.group_stats` on the same groups laid out
    contiguously (``tests/engines/verl/test_stats.py``).
    """
    groups = group_ids(index).to(rewards.device)
    rewards = rewards.detach().double()
    valid = _checked(rewards, groups, valid)
    passed = (rewards > options.pass_threshold).double()
    pass_rate = _group_mean(passed, groups, valid)
    mapped = torch.zeros_like(rewards)
    mapped[valid] = mapped_rewards(rewards[valid], options.reward_range)
    if options.scope == "group":
        mean = _group_mean(mapped, groups, valid)
        std = _group_mean((mapped - mean).square(), groups, valid).sqrt()
    else:
        mean = mapped[valid].mean().expand_as(mapped)
        std = mapped[valid].std(unbiased=False).expand_as(mapped)
    zero = torch.zeros_like(rewards)
    return GroupStats(
        torch.where(valid, pass_rate, zero),
        torch.where(valid, mean, zero),
        torch.where(valid, std, zero),
        options,
    )
