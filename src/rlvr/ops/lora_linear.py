"""A linear layer with a LoRA adapter, computed with fewer output-sized tensors.

peft's forward of an adapted layer computes ``base(x) + B(A(x)) * s`` (Hu et al. 2021,
eq. 3) in four operations, three of which make a tensor of the layer's output size: ``B``'s
output, its scaled copy and the sum. :func:`lean_lora` gives each adapted layer a forward
that makes one: ``addmm(base(x), A(x), B^T, alpha=s)``, the scale applied inside the
product. The values equal peft's up to rounding (tests: 1e-12 in float64; in bf16 autocast
as far from float32 as peft's own), the autograd graph is torch's own, and the adapters'
switch (``disable_adapters``, the KL reference) and a merged weight are honoured at each call.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from rlvr.ops.merged import active_adapter, plain_adapter
from rlvr.ops.swap import swap_forwards


def _lean_forward(self, x: torch.Tensor) -> torch.Tensor:
    base, adapter = self.base_layer, active_adapter(self)
    if adapter is None:
        return base(x)
    a, b, scale = adapter
    out = F.linear(x, base.weight, base.bias)
    low = F.linear(x, a)
    rows = torch.addmm(
        out.reshape(-1, out.shape[-1]), low.reshape(-1, low.shape[-1]), b.T, alpha=scale
    )
    return rows.view(out.shape)


def _accepts(module: nn.Module) -> bool:
    """A :func:`~rlvr.ops.merged.plain_adapter` layer whose adapter weights have its base
    weight's dtype (``addmm`` takes one dtype; peft casts mixed ones itself)."""
    if not plain_adapter(module):
        return False
    (name,) = module.active_adapters
    dtype = module.base_layer.weight.dtype
    return module.lora_A[name].weight.dtype == dtype == module.lora_B[name].weight.dtype


def lean_lora(model: nn.Module) -> int:
    """Give every linear layer of ``model`` that carries one plain LoRA adapter the lean
    forward; how many were changed."""
    return swap_forwards(model, _accepts, _lean_forward)
