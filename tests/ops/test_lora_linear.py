"""The lean forward of LoRA-adapted linear layers: peft's values and gradients up to
rounding, the adapters' switch honoured."""

from __future__ import annotations

import copy

import pytest
import torch

pytest.importorskip("peft")

from rlvr.ops.lora_linear import lean_lora  # noqa: E402
from rlvr.ops.swiglu import lean_swiglu  # noqa: E402
from rlvr.train.lora import adapters_off  # noqa: E402

LAYERS = 14  # q, k, v, o, gate, up, down in each of the test models' 2 layers


def test_peft_values_and_gradients_to_rounding(tiny_model, loss_and_grads, adapted):
    original = adapted(tiny_model[0].double())  # Qwen2: q, k and v have biases
    lean = copy.deepcopy(original)
    assert lean_lora(lean) == LAYERS
    ids = torch.randint(1, 90, (3, 9), generator=torch.Generator().manual_seed(2))
    loss_a, grads_a = loss_and_grads(original, ids)
    loss_b, grads_b = loss_and_grads(lean, ids)
    torch.testing.assert_close(loss_b, loss_a, rtol=1e-12, atol=1e-12)
    assert len(grads_a) == 2 * LAYERS  # A and B: only the adapters train
    for a, b in zip(grads_a, grads_b, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("swap", [lean_lora, lean_swiglu])
def test_the_adapters_switch_is_honoured(tiny_model, adapted, swap):
    """With the adapters off (the KL reference) a lean layer computes the base model."""
    base = copy.deepcopy(tiny_model[0])
    lean = adapted(tiny_model[0])
    assert swap(lean) > 0
    ids = torch.randint(1, 90, (2, 7), generator=torch.Generator().manual_seed(3))
    with torch.no_grad(), adapters_off(lean):
        torch.testing.assert_close(lean(input_ids=ids).logits, base(input_ids=ids).logits)
    with torch.no_grad():
        assert (lean(input_ids=ids).logits - base(input_ids=ids).logits).abs().max() > 1e-3


@pytest.mark.parametrize("seed", [3, 5, 7, 11])
def test_bf16_autocast_as_close_to_float32_as_peft(random_llama, loss_and_grads, adapted, seed):
    """Both round differently in bf16: the lean gradients' error against float32 is within
    twice peft's own (mean relative error over the adapters' tensors)."""
    original = adapted(random_llama(seed), seed)
    lean = copy.deepcopy(original)
    lean_lora(lean)
    ids = torch.randint(1, 90, (2, 7), generator=torch.Generator().manual_seed(seed))
    _, exact = loss_and_grads(copy.deepcopy(original), ids, torch.float32)
    errors = []
    for model in (original, lean):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            _, grads = loss_and_grads(model, ids, torch.float32)
        pairs = zip(grads, exact, strict=True)
        errors.append(sum(((g - e).norm() / e.norm()).item() for g, e in pairs))
    assert errors[1] < 2 * errors[0] and errors[1] < 0.1 * len(exact)


def test_plain_models_and_mixed_dtypes_keep_their_forward(tiny_model, adapted):
    model = tiny_model[0]
    assert lean_lora(copy.deepcopy(model)) == 0  # no adapters
    mixed = adapted(model)
    for name, p in mixed.named_parameters():
        if ".lora_" in name:
            p.data = p.data.double()
    assert lean_lora(mixed) == 0  # addmm takes one dtype: peft's forward casts
