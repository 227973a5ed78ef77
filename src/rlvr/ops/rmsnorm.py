"""An RMSNorm that keeps one activation for the backward pass instead of two.

Llama-family RMSNorm computes ``w * (x * rsqrt(mean(x^2) + eps))`` in float32 (cast back
to the input's dtype before the weight). Autograd keeps, per position, the float32 input
(for ``pow`` and the product) and the normalised ``x * rsqrt(...)`` (for the weight's
product): two hidden-sized tensors per norm, two norms per decoder layer.
:class:`RMSNormFunction` runs the same forward operations and keeps only the input and
the per-position ``r = rsqrt(...)``; backward recomputes the normalised tensor (one
elementwise product) and then runs the steps autograd would run for those operations,
in the same order, which come to

    dx = r * (g_h - h * mean(g_h * h)),  g_h = g * w,  h = x * r,
    dw = sum over positions of g * h.

Values and, in float32, gradients are bit-identical to the module's (a test checks it).

:func:`lean_rmsnorm` swaps this forward into every RMSNorm module of a model whose own
forward it reproduces on a probe input; other modules are left alone.
"""

from __future__ import annotations

import torch
from torch import nn

from rlvr.ops.swap import probe_input, swap_forwards


class RMSNormFunction(torch.autograd.Function):
    """``weight * (x * rsqrt(mean(x^2) + eps))`` over the last dimension, saving ``x`` and
    the per-position ``rsqrt`` only."""

    @staticmethod
    def forward(
        ctx, x: torch.Tensor, x_again: torch.Tensor, weight: torch.Tensor, eps: float
    ) -> torch.Tensor:
        """``x_again`` is ``x`` itself: in float32 the module uses ``x`` twice (in ``pow``
        and in the product), and returning the two shares apart lets autograd add them to
        ``x``'s gradient in the order it adds the module's."""
        xf = x.to(torch.float32)
        rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)  # [..., 1]
        ctx.save_for_backward(x, rstd, weight)
        return weight * (xf * rstd).to(x.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        """Autograd's own backward of the forward's operations, step by step (the same
        floating-point operations in the same order), from ``x`` and ``rsqrt`` alone."""
        x, rstd, weight = ctx.saved_tensors
        xf = x.to(torch.float32)
        normed = xf * rstd  # [..., D], recomputed
        grad_w = None
        if ctx.needs_input_grad[2]:
            leading = tuple(range(grad.dim() - 1))
            grad_w = (grad * normed.to(x.dtype)).sum(leading).to(weight.dtype)
        if not ctx.needs_input_grad[0]:
            return None, None, grad_w, None
        grad_h = (grad * weight).to(x.dtype).to(torch.float32)  # through the product and the cast
        grad_r = (grad_h * xf).sum(-1, keepdim=True)  # xf * rstd -> rstd
        grad_v = -0.5 * grad_r * rstd.pow(3)  # rsqrt(v + eps) -> v
        grad_sq = grad_v.expand_as(xf) / xf.shape[-1]  # mean -> x^2
        product_share, pow_share = grad_h * rstd, grad_sq * (2.0 * xf)
        if x.dtype == torch.float32:  # xf is x: autograd adds each share to x's gradient
            return product_share, pow_share, grad_w, None
        return (product_share + pow_share).to(x.dtype), None, grad_w, None  # xf is a cast


def _lean_forward(self, x: torch.Tensor) -> torch.Tensor:
    return RMSNormFunction.apply(x, x, self.weight, self.variance_epsilon)


def is_rmsnorm(module: nn.Module) -> bool:
    """A module shaped like Llama's RMSNorm: a 1-D ``weight`` and a ``variance_epsilon``."""
    weight = getattr(module, "weight", None)
    return (
        isinstance(weight, nn.Parameter)
        and weight.dim() == 1
        and isinstance(getattr(module, "variance_epsilon", None), float)
        and not list(module.children())
    )


def _same_output(module: nn.Module) -> bool:
    """Whether the module's own forward gives :class:`RMSNormFunction`'s output, bit for bit,
    on a probe input (Gemma's RMSNorm, say, scales by ``1 + weight``)."""
    probe = probe_input(module.weight.shape[0], module.weight)
    with torch.no_grad():
        return torch.equal(module(probe), _lean_forward(module, probe))


def lean_rmsnorm(model: nn.Module) -> int:
    """Give every Llama-style RMSNorm of ``model`` :class:`RMSNormFunction`'s forward; how
    many were changed."""
    return swap_forwards(model, lambda m: is_rmsnorm(m) and _same_output(m), _lean_forward)
