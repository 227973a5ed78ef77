"""The optimiser: AdamW, its learning-rate schedule, and one clipped step."""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import NamedTuple

import torch

from rlvr.train.config import OptimConfig


@dataclasses.dataclass(frozen=True)
class LRSchedule:
    """Multiplier of the peak learning rate at optimiser step ``s`` (0-based)."""

    warmup_steps: int
    """Linear warm-up length."""
    total_steps: int
    """Optimiser steps in the run (the cosine reaches 0 after the last one)."""
    kind: str
    """``constant`` or ``cosine``."""
    floor: float = 0.0
    """Where the cosine ends, as a fraction of the peak (``optim.min_lr / optim.lr``)."""

    def __call__(self, s: int) -> float:
        if s < self.warmup_steps:
            return (s + 1) / self.warmup_steps
        if self.kind == "constant":
            return 1.0
        span = max(1, self.total_steps - self.warmup_steps)
        progress = min(1.0, (s - self.warmup_steps) / span)
        return self.floor + (1.0 - self.floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def adamw(params: list[torch.nn.Parameter], cfg: OptimConfig) -> torch.optim.AdamW:
    """AdamW, fused where torch has a fused kernel for the parameters (CPU and CUDA floats).

    The fused step updates each tensor in one pass: no temporary copy of all parameters
    (the multi-tensor path holds one, about the model's size), and on CPU it is several
    times faster. Elsewhere the per-tensor loop is used, for the same reason.
    """
    kwargs = {"lr": cfg.lr, "betas": cfg.betas, "eps": cfg.eps, "weight_decay": cfg.weight_decay}
    try:
        return torch.optim.AdamW(params, fused=True, **kwargs)
    except (RuntimeError, ValueError):
        return torch.optim.AdamW(params, foreach=False, **kwargs)


def build_optimizer(model: torch.nn.Module, cfg: OptimConfig, total_steps: int):
    """``(AdamW, LambdaLR)`` over the trainable parameters."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = adamw(params, cfg)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, LRSchedule(cfg.warmup_steps, total_steps, cfg.schedule, cfg.min_lr / cfg.lr)
    )
    return optimizer, scheduler


def warn_long_warmup(cfg: OptimConfig, total_steps: int) -> bool:
    """Warn when the linear warm-up lasts the whole run (``optim.warmup_steps`` not below its
    ``total_steps`` optimiser steps; in ``rlvr train``, ``steps * rollout.minibatches *
    rollout.epochs``): the learning rate then peaks below ``optim.lr`` (or only at the last
    step) and a cosine never decays. Returns whether it warned."""
    long = cfg.warmup_steps >= total_steps
    if long:
        peak = cfg.lr * total_steps / cfg.warmup_steps
        decay = "; the cosine decay never starts" if cfg.schedule == "cosine" else ""
        warnings.warn(
            f"optim.warmup_steps={cfg.warmup_steps} is not below the run's {total_steps} "
            f"optimiser steps: the learning rate rises to {peak:.3g} at the last step (optim.lr="
            f"{cfg.lr:.3g}){decay}; lower optim.warmup_steps or run more steps",
            stacklevel=2,
        )
    return long


class Stepped(NamedTuple):
    """What an optimiser step did."""

    grad_norm: float
    """Global gradient norm before clipping."""
    stepped: bool
    """False when a non-finite norm skipped the update."""


def clip_and_step(model: torch.nn.Module, optimizer, scheduler, cfg: OptimConfig) -> Stepped:
    """Clip gradients, step optimiser and schedule.

    A non-finite gradient norm skips the update (gradients are dropped) instead of
    writing NaN into the weights.
    """
    params = [p for p in model.parameters() if p.grad is not None]
    max_norm = cfg.max_grad_norm if cfg.max_grad_norm is not None else float("inf")
    norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm)) if params else 0.0
    stepped = math.isfinite(norm)
    if stepped:
        optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return Stepped(norm, stepped)
