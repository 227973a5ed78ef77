"""Give matching modules of a model another forward, checked on a probe input (the lean layers)."""

from __future__ import annotations

import types
from collections.abc import Callable

import torch
from torch import nn


def probe_input(width: int, like: torch.Tensor) -> torch.Tensor:
    """A fixed ``[3, width]`` random input on ``like``'s device and dtype (its own generator,
    so the global RNG is untouched), to check a swapped forward against the module's own."""
    gen = torch.Generator().manual_seed(0)
    probe = torch.randn(3, width, generator=gen, dtype=torch.float64)
    return probe.to(device=like.device, dtype=like.dtype)


def swap_forwards(model: nn.Module, accepts: Callable[[nn.Module], bool], forward: Callable) -> int:
    """Bind ``forward(module, *inputs)`` as the forward of every module of ``model`` that
    ``accepts``; how many were changed."""
    count = 0
    for module in model.modules():
        if accepts(module):
            module.forward = types.MethodType(forward, module)
            count += 1
    return count
