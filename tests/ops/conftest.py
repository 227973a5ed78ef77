"""Helpers shared by the tests of the lean layers (SwiGLU MLP, RMSNorm)."""

from __future__ import annotations

import pytest
import torch


def _loss_and_grads(model, ids, dtype=torch.float64):
    """A random linear function of ``model``'s logits and its gradients to every parameter."""
    params = [p for p in model.parameters() if p.requires_grad]
    logits = model(input_ids=ids).logits
    weights = torch.randn(logits.shape, generator=torch.Generator().manual_seed(1), dtype=dtype)
    loss = (logits.to(dtype) * weights).sum()
    return loss.detach(), torch.autograd.grad(loss, params)


def _saved_numel(model, ids) -> int:
    """Elements of the distinct tensors autograd keeps for backward in ``model``'s forward on
    ``ids`` (a tensor saved by two operations counts once)."""
    storages = {}

    def pack(t):
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes() // t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids).logits.sum()
    return sum(storages.values())


@pytest.fixture
def loss_and_grads():
    """``(model, ids, dtype=float64) -> (loss, grads)``."""
    return _loss_and_grads


@pytest.fixture
def saved_numel():
    """``(model, ids) -> elements saved for backward``."""
    return _saved_numel


def _checkpointed_bf16(original, lean, ids):
    """``(loss_a, grads_a, loss_b, grads_b)`` of both models with gradient checkpointing,
    in training mode, under bf16 autocast, against float32 weights."""
    for model in (original, lean):
        model.gradient_checkpointing_enable()
        model.train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return (
            *_loss_and_grads(original, ids, torch.float32),
            *_loss_and_grads(lean, ids, torch.float32),
        )


@pytest.fixture
def checkpointed_bf16():
    """``(original, lean, ids) -> (loss_a, grads_a, loss_b, grads_b)``."""
    return _checkpointed_bf16


def _adapted(model, seed=0):
    """``model`` with rank-4 LoRA adapters on every linear layer, their B random (not 0)."""
    pytest.importorskip("peft")
    from rlvr.train.config import LoraConfig
    from rlvr.train.lora import add_adapters

    add_adapters(model, LoraConfig(rank=4))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".lora_B." in name:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return model


@pytest.fixture
def adapted():
    """``(model, seed=0) -> model`` with random rank-4 LoRA adapters on every linear layer."""
    return _adapted
