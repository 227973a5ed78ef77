"""A model's weights as the plain model names them, with LoRA adapters merged.

A linear layer carrying peft's LoRA adapters (Hu et al. 2021, eq. 3) computes
``W x + alpha / r * B A x``; merged, that is one weight ``W + alpha / r * B A``. The fast
decoder samples with these weights, a checkpoint holds them, and the vLLM sampler sends
them to its engine, which knows the plain model's names only. The lean layers ask here
whether a layer carries one plain adapter and which one it computes with now. Nothing here
imports peft: an adapted layer is recognised by its ``base_layer`` and ``get_delta_weight``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch

BASE = ".base_layer"
"""The name peft gives the wrapped linear layer inside an adapted one."""


def is_adapted(module: torch.nn.Module) -> bool:
    """Whether ``module`` is a linear layer wrapped with LoRA adapters."""
    base = getattr(module, "base_layer", None)
    return type(base) is torch.nn.Linear and hasattr(module, "get_delta_weight")


def plain_adapter(module: torch.nn.Module) -> bool:
    """Whether ``module`` is an adapted linear layer with one plain LoRA adapter: no
    dropout, no bias of its own, no variant such as DoRA."""
    if not is_adapted(module) or len(module.active_adapters) != 1:
        return False
    (name,) = module.active_adapters
    return (
        isinstance(module.lora_dropout[name], torch.nn.Identity)
        and module.lora_B[name].bias is None
        and name not in getattr(module, "lora_variant", {})
    )


def active_adapter(layer: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor, float] | None:
    """``(A, B, scale)`` of the one adapter a :func:`plain_adapter` layer computes with now;
    None for a plain layer, or while its adapters are switched off or merged into its weight."""
    if not is_adapted(layer) or layer.disable_adapters or layer.merged:
        return None
    (name,) = layer.active_adapters
    return layer.lora_A[name].weight, layer.lora_B[name].weight, layer.scaling[name]


@torch.no_grad()
def merged_weight(layer: torch.nn.Module) -> torch.Tensor:
    """The one weight an adapted linear layer computes with: ``W + alpha / r * B A`` summed
    in float32 (autocast or not) and rounded once to ``W``'s dtype; ``W`` itself while its
    adapters are off or already merged into it."""
    weight = layer.base_layer.weight
    if layer.disable_adapters or layer.merged:
        return weight
    with torch.autocast(weight.device.type, enabled=False):
        delta = sum(layer.get_delta_weight(name).float() for name in layer.active_adapters)
    return (weight.float() + delta).to(weight.dtype)


def plain_tensors(
    model: torch.nn.Module,
    named: Iterable[tuple[str, torch.Tensor]],
    device: str | torch.device | None = None,
) -> Iterator[tuple[str, torch.Tensor]]:
    """``named`` (``model``'s state-dict items or named parameters) under the plain model's
    names: each adapted layer's weight merged (:func:`merged_weight`, moved to ``device``
    when given, one layer at a time), its bias renamed, the adapters' own tensors left out.
    A model without adapters passes through unchanged."""
    for key, tensor in named:
        if ".lora_" in key:
            continue
        module, _, leaf = key.rpartition(".")
        if module.endswith(BASE):
            owner = module.removesuffix(BASE)
            if leaf == "weight":
                tensor = merged_weight(model.get_submodule(owner))
                tensor = tensor if device is None else tensor.to(device)
            key = f"{owner}.{leaf}"
        yield key, tensor
