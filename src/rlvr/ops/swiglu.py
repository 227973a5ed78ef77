"""A SwiGLU MLP that keeps half of its activations for the backward pass.

Llama-family MLPs compute ``down(silu(gate(x)) * up(x))``. Autograd keeps, per position,
four intermediate-sized tensors for the backward pass: ``gate(x)`` (for silu's
gradient), ``silu(gate(x))`` and ``up(x)`` (for the product's), and the product (for
``down``'s weight gradient). :class:`SwiGLUDown` fuses ``silu``, the product and
``down`` into one autograd function that keeps only ``gate(x)`` and ``up(x)`` and
recomputes the other two in backward: two elementwise passes against the half of the MLP
activation memory (about a quarter of a decoder layer's). The arithmetic is the same
operations in the same order, so values and gradients equal the module's own.

A ``down`` carrying a LoRA adapter (peft's; Hu et al. 2021, eq. 3) computes
``down(p) + s * B A p`` of the product ``p``, whose adapter would keep ``p`` itself for
``A``'s gradient. :class:`SwiGLUDownLora` computes both terms in one function that keeps
``gate(x)``, ``up(x)`` and the rank-sized ``A p``, and recomputes ``p`` in backward.

:func:`lean_swiglu` swaps this forward into every matching MLP of a model (SiLU, no
biases, projections plain or with one plain adapter); other modules are left alone.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from rlvr.ops.merged import active_adapter, is_adapted, plain_adapter
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


class SwiGLUDownLora(torch.autograd.Function):
    """``F.linear(p, weight) + scale * F.linear(F.linear(p, a), b)`` with
    ``p = silu(gate) * up``, saving ``gate``, ``up`` and ``F.linear(p, a)`` (rank-sized).

    The same operations in the same order as the adapted layer's own forward (base, then
    ``B (A p)`` times the scale, added), in ``gate``'s dtype under autocast as for
    :class:`SwiGLUDown`; each weight's gradient comes back in that weight's dtype.
    """

    @staticmethod
    def forward(ctx, gate, up, weight, a, b, scale: float) -> torch.Tensor:
        dtype = gate.dtype
        with torch.autocast(gate.device.type, enabled=False):
            product = F.silu(gate) * up
            low = F.linear(product, a.to(dtype))
            out = F.linear(product, weight.to(dtype)) + F.linear(low, b.to(dtype)) * scale
        ctx.save_for_backward(gate, up, weight, a, b, low)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        gate, up, weight, a, b, low = ctx.saved_tensors
        need_gate, need_up, need_w, need_a, need_b, _ = ctx.needs_input_grad
        dtype = gate.dtype

        def rows(t: torch.Tensor) -> torch.Tensor:  # [..., D] -> [N, D]
            return t.reshape(-1, t.shape[-1])

        with torch.autocast(gate.device.type, enabled=False):
            act = F.silu(gate)
            product = rows(act * up)  # [N, I]
            scaled = grad * ctx.scale  # what reaches B's output
            grad_low = scaled @ b.to(dtype)  # [..., r]
            grad_w = (rows(grad).T @ product).to(weight.dtype) if need_w else None
            grad_a = (rows(grad_low).T @ product).to(a.dtype) if need_a else None
            grad_b = (rows(scaled).T @ rows(low)).to(b.dtype) if need_b else None
            grad_product = grad @ weight.to(dtype) + grad_low @ a.to(dtype)
            grad_gate = torch.ops.aten.silu_backward(grad_product * up, gate) if need_gate else None
            grad_up = grad_product * act if need_up else None
        return grad_gate, grad_up, grad_w, grad_a, grad_b, None


def _weight(linear: nn.Module) -> torch.Tensor:
    """A linear layer's own weight (an adapted layer's base weight)."""
    return linear.base_layer.weight if is_adapted(linear) else linear.weight


def _lean_forward(self, x: torch.Tensor) -> torch.Tensor:
    gate, up, down = self.gate_proj(x), self.up_proj(x), self.down_proj
    adapter = active_adapter(down)
    if adapter is None:
        return SwiGLUDown.apply(gate, up, _weight(down))
    return SwiGLUDownLora.apply(gate, up, _weight(down), *adapter)


def _plain_linear(module: nn.Module | None) -> bool:
    """A linear layer without bias, or one carrying one plain LoRA adapter (no dropout, no
    bias, no variant such as DoRA)."""
    if isinstance(module, nn.Linear):
        return module.bias is None
    return module is not None and plain_adapter(module) and module.base_layer.bias is None


def is_swiglu(module: nn.Module) -> bool:
    """A Llama-style MLP: ``gate_proj``, ``up_proj``, ``down_proj`` linear without bias
    (each plain or with one plain LoRA adapter), SiLU."""
    linears = [getattr(module, name, None) for name in ("gate_proj", "up_proj", "down_proj")]
    act = getattr(module, "act_fn", None)
    return (
        all(_plain_linear(m) for m in linears)
        and act is not None
        and type(act).__name__ in ("SiLU", "SiLUActivation")
    )


def _same_output(module: nn.Module) -> bool:
    """Whether the module's own forward gives :class:`SwiGLUDown`'s output on a probe input
    (a module named like a SwiGLU MLP could compute something else)."""
    weight = _weight(module.gate_proj)
    probe = probe_input(weight.shape[1], weight)
    with torch.no_grad():
        return torch.allclose(module(probe), _lean_forward(module, probe), rtol=1e-5, atol=1e-6)


def lean_swiglu(model: nn.Module) -> int:
    """Give every SwiGLU MLP of ``model`` :class:`SwiGLUDown`'s forward; how many were changed.

    Each candidate is checked once against its own forward on a probe input; one that
    differs keeps its forward.
    """
    return swap_forwards(model, lambda m: is_swiglu(m) and _same_output(m), _lean_forward)
