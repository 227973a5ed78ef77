"""A SwiGLU MLP that keeps half of its activations for the backward pass.

Llama-family MLPs compute ``down(silu(gate(x)) * up(x))``. Autograd keeps, per position,
four intermediate-sized tensors for the backward pass: ``gate(x)`` (for silu's
gradient), ``silu(gate(x))`` and ``up(x)`` (for the product's), and the product (for
``down``'s weight gradient). :class:`SwiGLUDown` fuses ``silu``, the product and
``down`` into one autograd function that keeps only ``gate(x)`` and ``up(x)`` and
recomputes the other two in backward: two elementwise passes against the half of the MLP
activation memory (about a quarter of a decoder layer's). The arithmetic is the same
operations in the same order, so values and gradients equal the module's own.

:func:`lean_swiglu` swaps this forward into every matching MLP of a model (SiLU, no
biases); other modules are left alone.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from rlvr.ops.swap import probe_input, swap_forwards


class SwiGLUDown(torch.autograd.Function):
    """``F.linear(silu(gate) * up, weight)``, saving ``gate`` and ``up`` only.

    Under autocast the product and its projection run in ``gate``'s dtype, as autocast
    would run ``down``; the weight's gradient comes back in the weight's dtype.
    """

    @staticmethod
    def forward(ctx, gate: torch.Tensor, up: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        with torch.autocast(gate.device.type, enabled=False):
            out = F.linear(F.silu(gate) * up, weight.to(gate.dtype))
        ctx.save_for_backward(gate, up, weight)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        gate, up, weight = ctx.saved_tensors
        need_gate, need_up, need_w = ctx.needs_input_grad
        with torch.autocast(gate.device.type, enabled=False):
            act = F.silu(gate)
            grad_w = None
            if need_w:
                product = (act * up).reshape(-1, up.shape[-1])  # [N, I]
                grad_w = (grad.reshape(-1, grad.shape[-1]).T @ product).to(weight.dtype)
            grad_product = grad @ weight.to(gate.dtype)  # [..., I]
            grad_gate = torch.ops.aten.silu_backward(grad_product * up, gate) if need_gate else None
            grad_up = grad_product * act if need_up else None
        return grad_gate, grad_up, grad_w


def _lean_forward(self, x: torch.Tensor) -> torch.Tensor:
    return SwiGLUDown.apply(self.gate_proj(x), self.up_proj(x), self.down_proj.weight)


def is_swiglu(module: nn.Module) -> bool:
    """A Llama-style MLP: ``gate_proj``, ``up_proj``, ``down_proj`` linear without bias, SiLU."""
    linears = [getattr(module, name, None) for name in ("gate_proj", "up_proj", "down_proj")]
    act = getattr(module, "act_fn", None)
    return (
        all(isinstance(m, nn.Linear) and m.bias is None for m in linears)
        and act is not None
        and type(act).__name__ in ("SiLU", "SiLUActivation")
    )


def _same_output(module: nn.Module) -> bool:
    """Whether the module's own forward gives :class:`SwiGLUDown`'s output on a probe input
    (a module named like a SwiGLU MLP could compute something else)."""
    weight = module.gate_proj.weight
    probe = probe_input(weight.shape[1], weight)
    with torch.no_grad():
        return torch.allclose(module(probe), _lean_forward(module, probe), rtol=1e-5, atol=1e-6)


def lean_swiglu(model: nn.Module) -> int:
    """Give every SwiGLU MLP of ``model`` :class:`SwiGLUDown`'s forward; how many were changed.

    Each candidate is checked once against its own forward on a probe input; one that
    differs keeps its forward.
    """
    return swap_forwards(model, lambda m: is_swiglu(m) and _same_output(m), _lean_forward)
