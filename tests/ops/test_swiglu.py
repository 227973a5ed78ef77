"""The lean SwiGLU MLP: the module's values and gradients, half its saved activations."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from rlvr.ops.rmsnorm import lean_rmsnorm
from rlvr.ops.swiglu import is_swiglu, lean_swiglu


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_same_values_and_gradients_fewer_saved(
    tiny_model, random_llama, arch, loss_and_grads, saved_numel
):
    original = (random_llama() if arch == "llama" else tiny_model[0]).double()
    lean = copy.deepcopy(original)
    assert lean_swiglu(lean) == 2  # both layers' MLPs
    ids = torch.randint(1, 90, (3, 9), generator=torch.Generator().manual_seed(2))
    loss_a, grads_a = loss_and_grads(original, ids)
    loss_b, grads_b = loss_and_grads(lean, ids)
    torch.testing.assert_close(loss_b, loss_a, rtol=1e-12, atol=0)
    for a, b in zip(grads_a, grads_b, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-12, atol=1e-12)
    inter, positions, layers = original.config.intermediate_size, 3 * 9, 2
    saved = saved_numel(original, ids) - saved_numel(lean, ids)
    assert saved == 2 * inter * positions * layers  # silu's output and the product


@pytest.mark.parametrize("adapters", [False, True], ids=["plain", "lora"])
def test_gradient_checkpointing_and_bf16_autocast(
    random_llama, checkpointed_bf16, adapters, adapted
):
    original = adapted(random_llama(3)) if adapters else random_llama(3)
    lean = copy.deepcopy(original)
    assert lean_swiglu(lean) == 2
    ids = torch.randint(1, 90, (2, 7), generator=torch.Generator().manual_seed(4))
    loss_a, grads_a, loss_b, grads_b = checkpointed_bf16(original, lean, ids)
    torch.testing.assert_close(loss_b, loss_a, rtol=1e-6, atol=1e-3)
    for a, b in zip(grads_a, grads_b, strict=True):
        assert b.dtype == a.dtype == torch.float32
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)


class _SwappedProduct(nn.Module):
    """Looks like a SwiGLU MLP but computes ``act(up) * gate``."""

    def __init__(self):
        super().__init__()
        self.gate_proj, self.up_proj = nn.Linear(4, 6, bias=False), nn.Linear(4, 6, bias=False)
        self.down_proj, self.act_fn = nn.Linear(6, 4, bias=False), nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.up_proj(x)) * self.gate_proj(x))


def test_only_mlps_that_compute_swiglu_change():
    other = _SwappedProduct()
    assert is_swiglu(other) and lean_swiglu(other) == 0  # the probe shows it differs
    biased = _SwappedProduct()
    biased.down_proj = nn.Linear(6, 4, bias=True)
    assert not is_swiglu(biased)
    gelu = _SwappedProduct()
    gelu.act_fn = nn.GELU()
    assert not is_swiglu(gelu)


@pytest.mark.parametrize("swap", [lean_swiglu, lean_rmsnorm])
def test_the_probes_leave_the_global_rng_alone(tiny_model, swap):
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    assert swap(tiny_model[0]) > 0
    assert torch.equal(torch.rand(3), expected)


def test_float32_gradients_are_bit_identical(random_llama, loss_and_grads):
    original = random_llama(5)
    lean = copy.deepcopy(original)
    lean_swiglu(lean)
    ids = torch.randint(1, 90, (3, 8), generator=torch.Generator().manual_seed(6))
    loss_a, grads_a = loss_and_grads(original, ids)
    loss_b, grads_b = loss_and_grads(lean, ids)
    assert torch.equal(loss_b, loss_a)
    for a, b in zip(grads_a, grads_b, strict=True):
        assert torch.equal(b, a)


def test_adapted_mlps_same_values_and_gradients_fewer_saved(
    tiny_model, loss_and_grads, saved_numel, adapted
):
    """A down projection with a LoRA adapter: the adapted layer's values and the adapters'
    gradients, without keeping the product its adapter would keep."""
    original = adapted(tiny_model[0].double())
    lean = copy.deepcopy(original)
    assert lean_swiglu(lean) == 2
    ids = torch.randint(1, 90, (3, 9), generator=torch.Generator().manual_seed(2))
    loss_a, grads_a = loss_and_grads(original, ids)
    loss_b, grads_b = loss_and_grads(lean, ids)
    torch.testing.assert_close(loss_b, loss_a, rtol=1e-12, atol=0)
    assert len(grads_a) == 2 * 2 * 7  # A and B of 7 projections in 2 layers: only they train
    for a, b in zip(grads_a, grads_b, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-12, atol=1e-12)
    inter, positions, layers = original.config.intermediate_size, 3 * 9, 2
    assert saved_numel(original, ids) - saved_numel(lean, ids) == 2 * inter * positions * layers
