"""The lean RMSNorm: the module's values and gradients, one activation kept instead of two."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from rlvr.ops.rmsnorm import RMSNormFunction, is_rmsnorm, lean_rmsnorm
from rlvr.ops.swiglu import lean_swiglu


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_same_values_and_gradients_fewer_saved(
    tiny_model, random_llama, arch, loss_and_grads, saved_numel
):
    original = random_llama() if arch == "llama" else tiny_model[0]
    lean = copy.deepcopy(original)
    assert lean_rmsnorm(lean) == 2 * 2 + 1  # two per layer and the final norm
    ids = torch.randint(1, 90, (3, 9), generator=torch.Generator().manual_seed(2))
    loss_a, grads_a = loss_and_grads(original, ids)
    loss_b, grads_b = loss_and_grads(lean, ids)
    assert torch.equal(loss_b, loss_a)  # the same forward operations
    for a, b in zip(grads_a, grads_b, strict=True):
        assert torch.equal(b, a)  # and the same backward ones
    hidden, positions, norms = original.config.hidden_size, 3 * 9, 2 * 2 + 1
    saved = saved_numel(original, ids) - saved_numel(lean, ids)
    assert saved == hidden * positions * norms  # the normalised tensor of every norm


def test_float32_values_are_bit_identical(random_llama):
    original = random_llama(1)
    lean = copy.deepcopy(original)
    lean_rmsnorm(lean)
    lean_swiglu(lean)
    ids = torch.randint(1, 90, (2, 11), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert torch.equal(lean(input_ids=ids).logits, original(input_ids=ids).logits)


def test_gradient_against_float64_autograd():
    gen = torch.Generator().manual_seed(8)
    x = torch.randn(2, 3, 64, generator=gen).requires_grad_()
    w = (torch.rand(64, generator=gen) + 0.5).requires_grad_()
    g = torch.randn(2, 3, 64, generator=gen)
    RMSNormFunction.apply(x, x, w, 1e-6).backward(g)
    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    y64 = w64 * (x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6))
    y64.backward(g.double())
    torch.testing.assert_close(x.grad.double(), x64.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(w.grad.double(), w64.grad, rtol=1e-5, atol=1e-6)


def test_bf16_autocast_and_gradient_checkpointing(random_llama, checkpointed_bf16):
    original, lean = random_llama(3), random_llama(3)
    lean_rmsnorm(lean)
    ids = torch.randint(1, 90, (2, 7), generator=torch.Generator().manual_seed(4))
    loss_a, grads_a, loss_b, grads_b = checkpointed_bf16(original, lean, ids)
    torch.testing.assert_close(loss_b, loss_a, rtol=0, atol=0)
    for a, b in zip(grads_a, grads_b, strict=True):
        assert b.dtype == a.dtype == torch.float32
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-4)


def test_bf16_weights():
    norm = _LlamaStyleNorm(8).to(torch.bfloat16)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 1.5, 8))
    x = torch.randn(4, 8, dtype=torch.bfloat16, generator=torch.Generator().manual_seed(5))
    lean = copy.deepcopy(norm)
    assert lean_rmsnorm(lean) == 1
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = norm(xa), lean(xb)
    assert torch.equal(ya, yb) and ya.dtype == torch.bfloat16
    g = torch.randn(4, 8, dtype=torch.bfloat16, generator=torch.Generator().manual_seed(6))
    ya.backward(g)
    yb.backward(g)
    torch.testing.assert_close(xb.grad, xa.grad, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(lean.weight.grad, norm.weight.grad, rtol=2e-2, atol=2e-2)


class _LlamaStyleNorm(nn.Module):
    def __init__(self, size: int, eps: float = 1e-6, offset: float = 0.0):
        super().__init__()
        self.weight, self.variance_epsilon, self.offset = (
            nn.Parameter(torch.ones(size)),
            eps,
            offset,
        )

    def forward(self, x):
        xf = x.to(torch.float32)
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return (self.weight + self.offset) * xf.to(x.dtype)


def test_only_norms_that_compute_llama_rmsnorm_change():
    gemma_like = _LlamaStyleNorm(8, offset=1.0)  # scales by 1 + weight
    assert is_rmsnorm(gemma_like) and lean_rmsnorm(gemma_like) == 0
    assert not is_rmsnorm(nn.LayerNorm(8))
    assert not is_rmsnorm(nn.Linear(8, 8))
