"""Advantages and per-sample group statistics, computed once per rollout batch.

Rollouts are grouped contiguously: rows ``[g*G, (g+1)*G)`` of a ``[B]`` reward vector are
the ``G = group_size`` responses to prompt ``g`` (the order :func:`rlvr.generation.generate`
returns). Everything here runs on the whole rollout batch, before any mini- or micro-batch
split (``ALGORITHMS.md``, "Advantages"): the statistics some objectives need (ETR's pass rate,
APMPO's reward mean and std) are carried *per sample* in :class:`GroupStats`, so a
micro-batch that holds part of a group takes its rows with :meth:`GroupStats.rows` instead
of recomputing them from an incomplete group.

Modes (population std, i.e. divide by ``G``):

- ``group_std``: ``(R_i - mean_g) / (std_g + eps)`` (GRPO, ETR Alg. 1 l.11, Klear eq. 4,
  APMPO Alg. 1 l.10).
- ``group_mean``: ``R_i - mean_g`` (ABC-GRPO eq. 3, Dr.GRPO).
- ``batch_std``: ``(R_i - mean_g) / (std_batch + eps)`` (TRL ``scale_rewards="batch"``).

A group whose rewards are all equal gets advantages exactly 0 in every mode (not the
rounding residue of its float mean).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from numbers import Real
from typing import Any

import torch

ADVANTAGE_MODES = ("group_std", "group_mean", "batch_std")
STATS_SCOPES = ("batch", "group")


def _grouped(rewards: torch.Tensor, group_size: int, validate: bool = True) -> torch.Tensor:
    """Check ``rewards [B]`` (finite: ``validate``) and ``group_size``; return the rewards as
    ``[B/G, G]`` floats."""
    if not isinstance(rewards, torch.Tensor) or rewards.dim() != 1:
        shape = (
            tuple(rewards.shape) if isinstance(rewards, torch.Tensor) else type(rewards).__name__
        )
        raise ValueError(f"rewards must be a 1-D tensor [B], got {shape}")
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be a positive int, got {group_size!r}")
    if rewards.numel() == 0 or rewards.numel() % group_size:
        raise ValueError(
            f"group_size={group_size} does not divide the number of rewards B={rewards.numel()}"
        )
    if not rewards.is_floating_point() or torch.finfo(rewards.dtype).bits < 32:
        rewards = rewards.float()  # bfloat16/float16 statistics are off by ~1e-2
    if validate and not torch.isfinite(rewards).all():
        raise ValueError("rewards contain NaN or inf")
    return rewards.view(-1, group_size)


def compute_advantages(
    rewards: torch.Tensor, group_size: int, mode: str = "group_std", eps: float = 1e-6
) -> torch.Tensor:
    """``[B]`` sequence advantages from ``[B]`` rewards in contiguous groups of ``group_size``
    (float32 for integer, bfloat16 or float16 rewards, else the rewards' dtype).

    >>> compute_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), 4, "group_mean")
    tensor([ 0.7500, -0.2500, -0.2500, -0.2500])
    """
    if mode not in ADVANTAGE_MODES:
        raise ValueError(f"unknown advantage mode {mode!r}; valid: {', '.join(ADVANTAGE_MODES)}")
    grouped = _grouped(rewards, group_size)  # [B/G, G]
    # A group of equal rewards has advantage exactly 0: its float mean can miss the value
    # by a rounding step (e.g. eight 0.7s in float32), a residue group_std would amplify.
    centred = (grouped - grouped.mean(dim=1, keepdim=True)).masked_fill(_constant(grouped), 0.0)
    if mode == "group_std":
        centred = centred / (grouped.std(dim=1, unbiased=False, keepdim=True) + eps)
    elif mode == "batch_std":
        centred = centred / (grouped.std(unbiased=False) + eps)
    return centred.reshape(-1)


def zero_advantage_groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """``[B/G]`` bool: groups whose rewards are all equal, so every advantage is zero.

    Use ``.repeat_interleave(group_size)`` for a per-sample ``[B]`` mask (e.g. to filter
    the groups out before the update, as DAPO's dynamic sampling does).
    """
    return _constant(_grouped(rewards, group_size)).squeeze(1)


def _constant(grouped: torch.Tensor) -> torch.Tensor:
    """``[B/G, 1]`` bool: the rows of ``grouped [B/G, G]`` whose values are all equal."""
    return (grouped == grouped[:, :1]).all(dim=1, keepdim=True)


@dataclass(frozen=True)
class StatsOptions:
    """How :func:`group_stats` computes the statistics (objectives check they match)."""

    pass_threshold: float = 0.0
    """A response passes when its reward is strictly above this (ETR's ``p_g``)."""
    reward_range: tuple[float, float] | None = None
    """``(lo, hi)``: rewards are mapped to ``[0, 1]`` by it before mean/std; None: raw."""
    scope: str = "batch"
    """Mean/std over the whole ``batch`` or each ``group`` (APMPO ``stats_scope``)."""

    def __post_init__(self) -> None:
        if self.scope not in STATS_SCOPES:
            raise ValueError(
                f"unknown stats scope {self.scope!r}; valid: {', '.join(STATS_SCOPES)}"
            )
        if self.reward_range is not None:
            object.__setattr__(self, "reward_range", reward_range_pair(self.reward_range))


def reward_range_pair(value: Any) -> tuple[float, float]:
    """``value`` as ``(lo, hi)`` floats: two real numbers (not a string's characters), lo < hi."""
    pair = () if isinstance(value, str) or not isinstance(value, Iterable) else tuple(value)
    real = all(isinstance(x, Real) and not isinstance(x, bool) for x in pair)
    if len(pair) != 2 or not real or not float(pair[0]) < float(pair[1]):
        raise ValueError(f"reward_range must be (lo, hi) with lo < hi, got {value!r}")
    return float(pair[0]), float(pair[1])


@dataclass(frozen=True)
class GroupStats:
    """Per-sample group statistics of a rollout batch (rows follow the rewards' order)."""

    pass_rate: torch.Tensor
    """[B] fraction of the sample's group with reward > ``options.pass_threshold``."""
    reward_mean: torch.Tensor
    """[B] mean of the (mapped) rewards over the sample's scope (its group or the batch)."""
    reward_std: torch.Tensor
    """[B] population std of the (mapped) rewards over the same scope."""
    options: StatsOptions
    """The options they were computed with."""

    def __len__(self) -> int:
        return self.pass_rate.shape[0]

    def rows(self, index: slice | torch.Tensor | list[int]) -> GroupStats:
        """The statistics of the samples ``index`` selects (a micro-batch's rows)."""
        return GroupStats(
            self.pass_rate[index], self.reward_mean[index], self.reward_std[index], self.options
        )

    def to(self, device: torch.device | str) -> GroupStats:
        """The same statistics on ``device``."""
        return GroupStats(
            self.pass_rate.to(device),
            self.reward_mean.to(device),
            self.reward_std.to(device),
            self.options,
        )


def _mapped(
    rewards: torch.Tensor, reward_range: tuple[float, float] | None, validate: bool = True
) -> torch.Tensor:
    """Rewards mapped to ``[0, 1]`` by ``reward_range``; an out-of-range reward is an error
    (``validate``)."""
    if reward_range is None:
        return rewards
    lo, hi = reward_range
    if validate and (bool((rewards < lo).any()) or bool((rewards > hi).any())):
        raise ValueError(
            f"rewards span [{rewards.min().item():g}, {rewards.max().item():g}], outside "
            f"reward_range={reward_range}; set reward_range to the verifier's range "
            "(e.g. (-1, 1) for +1/-1 rewards)"
        )
    return (rewards - lo) / (hi - lo)


def group_stats(
    rewards: torch.Tensor,
    group_size: int,
    *,
    pass_threshold: float = 0.0,
    reward_range: tuple[float, float] | None = None,
    scope: str = "batch",
    validate: bool = True,
) -> GroupStats:
    """Per-sample statistics of ``rewards [B]`` (contiguous groups), for the whole batch.

    Computed in float64 (objectives cast to their compute dtype). ``pass_rate`` uses the
    raw rewards; ``reward_mean``/``reward_std`` use the rewards
    mapped to ``[0, 1]`` by ``reward_range`` (unmapped when None) over ``scope``.
    :func:`rlvr.objectives.group_stats_for` picks these options from an objective's
    hyperparameters. ``validate=False`` skips the checks of the rewards' values (finite,
    inside ``reward_range``), which read them on the host.
    """
    options = StatsOptions(pass_threshold, reward_range, scope)
    grouped = _grouped(
        rewards, group_size, validate
    ).double()  # [B/G, G], float64 whatever the input
    passed = (grouped > options.pass_threshold).to(grouped.dtype)
    pass_rate = passed.mean(dim=1, keepdim=True).expand_as(grouped)
    mapped = _mapped(grouped, options.reward_range, validate)
    if options.scope == "group":
        mean = mapped.mean(dim=1, keepdim=True).expand_as(grouped)
        std = mapped.std(dim=1, unbiased=False, keepdim=True).expand_as(grouped)
    else:
        mean = mapped.mean().expand_as(grouped)
        std = mapped.std(unbiased=False).expand_as(grouped)
    return GroupStats(
        pass_rate.reshape(-1).clone(), mean.reshape(-1).clone(), std.reshape(-1).clone(), options
    )
