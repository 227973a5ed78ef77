"""A fingerprint of the weights a model computes with, as evaluation reports record it.

``rlvr eval`` and a run's held-out evaluations record :func:`weights_sha256` of the model
they sampled, so ``rlvr eval --against`` can tell two reports of the same weights (whatever
paths they were loaded from) from two reports of different models. It hashes the tensors in
memory, not the files: a folder of LoRA adapters is fingerprinted as the merged model that
is evaluated, a run's policy as the merged model its checkpoint holds, and a checkpoint
saved in bfloat16 and loaded in float32 as the same values (half precision is widened to
float32, exactly, before hashing; the dtype a model computes in is a setting of its own,
``loading.dtype``). Its cost is one pass over the weights (SmolLM2-135M on a CPU: under a
second, docs/evaluation.md).

What it does not see: anything outside the state dict. Two models with equal tensors but
another ``config.json`` (``rope_theta``, a norm's epsilon) or ``generation_config.json``
hash alike; the tokenizer and chat template are in the reports' prompt fingerprint instead
(:func:`rlvr.evaluation.harness.prompts_record`).
"""

from __future__ import annotations

import hashlib

import torch

from rlvr.ops.merged import plain_tensors

_WIDENED = (torch.float16, torch.bfloat16)
"""Dtypes hashed as float32 (exact): the same values hash alike in any precision they hold."""


@torch.no_grad()
def weights_sha256(model: torch.nn.Module) -> str:
    """sha256 (hex) of ``model``'s weights: each tensor of its state dict under the plain
    model's names (LoRA adapters merged, :func:`~rlvr.ops.merged.plain_tensors`), with its
    shape and values, in name order; half precision hashed as float32.

    >>> a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    >>> _ = b.load_state_dict(a.state_dict())
    >>> weights_sha256(a) == weights_sha256(b) != weights_sha256(torch.nn.Linear(2, 2))
    True
    """
    entries = [
        f"{name} {tensor_sha256(tensor)}"
        for name, tensor in plain_tensors(model, model.state_dict().items())
    ]
    return hashlib.sha256("\n".join(sorted(entries)).encode()).hexdigest()


def tensor_sha256(tensor: torch.Tensor) -> str:
    """sha256 (hex) of one tensor's dtype, shape and bytes, on the CPU; float16 and
    bfloat16 widened to float32 first."""
    t = tensor.detach()
    if t.dtype in _WIDENED:
        t = t.float()
    t = t.to("cpu").contiguous()
    digest = hashlib.sha256(f"{t.dtype} {tuple(t.shape)}\n".encode())
    digest.update(t.reshape(-1).view(torch.uint8).numpy())
    return digest.hexdigest()
