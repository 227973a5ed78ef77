"""The fast Llama-family decoder reproduces the Hugging Face forward exactly."""

import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from rlvr.generation import left_pad, position_ids_from_mask
from rlvr.generation.base import product_dtype
from rlvr.generation.fast_decode import FastDecoder, supports


def _hf_logits(model, ids, mask):
    with torch.no_grad():
        return model(
            input_ids=ids, attention_mask=mask, position_ids=position_ids_from_mask(mask)
        ).logits.float()


def _check(model, vocab: int, tol: float = 1e-5) -> None:
    """The decoder's logits against the Hugging Face forward's, on the model's device."""
    device = model.device
    prompts = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]]  # left padding
    ids, mask = (t.to(device) for t in left_pad(prompts, 0))
    cont = torch.randint(1, vocab, (3, 4)).to(device)  # four decoded tokens per row
    dec = FastDecoder(model)
    with torch.no_grad():
        logits = [dec.prefill(ids, mask)]
        for t in range(3):
            logits.append(dec.decode(cont[:, t]))
        dec.keep(torch.tensor([0, 2], device=device))  # a row finished: the others continue
        last = dec.decode(cont[[0, 2], 3])
    full_ids = torch.cat([ids, cont], 1)
    full_mask = torch.cat([mask, torch.ones_like(cont)], 1)
    ref = _hf_logits(model, full_ids, full_mask)  # [3, P + 4, V]
    p = ids.shape[1]
    for t, got in enumerate(logits):
        torch.testing.assert_close(got, ref[:, p - 1 + t], rtol=tol, atol=tol)
    torch.testing.assert_close(last, ref[[0, 2], p + 3], rtol=tol, atol=tol)


def test_qwen2_logits_match_hf(tiny_model):
    model, tokenizer = tiny_model
    assert supports(model)
    _check(model, len(tokenizer))


@pytest.mark.parametrize("gqa", [False, True], ids=["mha", "gqa"])
def test_llama_logits_match_hf(random_llama, gqa):
    model = random_llama(kv_heads=2 if gqa else 4)
    assert supports(model)
    _check(model, 97)


def test_qwen3_logits_match_hf(random_llama):
    """Qwen3 normalises each query and key head before the rotation; its heads are wider than
    hidden / heads here, as in the released models."""
    model = random_llama(family="Qwen3", head_dim=16)
    with torch.no_grad():
        for layer in model.model.layers:  # the norms start at one: make them matter
            layer.self_attn.q_norm.weight.uniform_(0.5, 1.5)
            layer.self_attn.k_norm.weight.uniform_(0.5, 1.5)
    assert supports(model)
    _check(model, 97)


def test_mistral_logits_match_hf_and_its_sliding_window_falls_back(random_llama):
    model = random_llama(family="Mistral", head_dim=16, sliding_window=None)  # as v0.3
    assert supports(model)
    _check(model, 97)
    model.config.sliding_window = 4
    assert not supports(model)


def test_unsupported_configurations_fall_back(random_llama):
    model = random_llama(kv_heads=4)
    model.train()
    assert not supports(model)
    model.eval()
    model.model.rotary_emb.rope_type = "linear"
    assert not supports(model)
    model.model.rotary_emb.rope_type = "default"
    model.config.hidden_act = "gelu"
    assert not supports(model)


def test_a_hook_the_fast_decoder_would_skip_falls_back(random_llama):
    """A hook on a norm, an attention block or a layer runs only when the module is called."""
    model = random_llama(kv_heads=2)
    layer = model.model.layers[0]
    for module in (layer.input_layernorm, layer.self_attn, layer, model.model.norm):
        handle = module.register_forward_hook(lambda mod, args, out: out)
        assert not supports(model), type(module).__name__
        handle.remove()
    pre = model.model.embed_tokens.register_forward_pre_hook(lambda mod, args: None)
    assert not supports(model)
    pre.remove()
    model.model.layers[0].self_attn.q_proj.register_forward_hook(lambda mod, args, out: out)
    assert supports(model)  # a projection is called as a module: its hook runs


def test_adapted_projections_decode_with_their_adapters_merged(tiny_model):
    """A LoRA adapter wraps a projection, whose own weight is then not what calling it
    computes: the decoder merges each adapter once (and leaves it out while it is off)."""
    pytest.importorskip("peft")
    from rlvr.train.config import LoraConfig
    from rlvr.train.lora import adapters_off, add_adapters

    model, tokenizer = tiny_model
    add_adapters(model, LoraConfig(rank=4))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".lora_B." in name:
                p.normal_(std=0.1)  # B starts at zero: make the adapters change the output
    assert supports(model)
    _check(model, len(tokenizer))
    with adapters_off(model):
        _check(model, len(tokenizer))


def test_an_adapted_embedding_leaves_decoding_to_the_model(tiny_model):
    """An embedding carrying LoRA adapters (``model.lora.targets=[embed_tokens]``) looks tokens
    up in more than its weight, which the decoder reads: the sampler then steps with the
    model's own forward, so it samples from the adapted policy the update trains."""
    pytest.importorskip("peft")
    from rlvr.generation.lean import stepper
    from rlvr.train.config import LoraConfig
    from rlvr.train.lora import add_adapters

    model, _ = tiny_model
    add_adapters(model, LoraConfig(rank=4, targets=("embed_tokens", "q_proj")))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".lora_" in name:
                p.normal_(std=0.5)  # peft starts one factor of each adapter at zero
    assert not supports(model)
    ids, mask = left_pad([[5, 6, 7, 8, 9], [10, 11]], 0)
    with torch.no_grad():
        got = stepper(model, fast=True).prefill(ids, mask)
    torch.testing.assert_close(got.float(), _hf_logits(model, ids, mask)[:, -1])


_CASTS = (torch.ops.aten._to_copy.default, torch.ops.aten.to.dtype, torch.ops.aten.to.dtype_layout)


class _Casts(TorchDispatchMode):
    """Records the shape of every tensor cast to another dtype (autocast's casts included)."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in _CASTS:
            self.shapes.append(tuple(args[0].shape))
        return func(*args, **(kwargs or {}))


def _autocast_decoding(model, built_under_autocast: bool):
    """Logits of a prefill and three decoding steps of two rows under bf16 autocast in
    inference mode (where autocast keeps no cast), the shapes of the model's parameters cast
    during the decoding steps, the largest tensor cast in them (elements), and how many
    hidden states (``[2, 1, hidden]``) they cast."""
    device = model.device
    ids, mask = (t.to(device) for t in left_pad([[5, 6, 7, 8], [9, 10]], 0))
    cast = torch.autocast(device.type, dtype=torch.bfloat16)
    with torch.inference_mode():
        if built_under_autocast:
            with cast:
                dec = FastDecoder(model)
        else:
            dec = FastDecoder(model)
        with cast:
            logits = [dec.prefill(ids, mask)]
            with _Casts() as casts:
                logits += [
                    dec.decode(torch.tensor([11 + t, 12 + t], device=device)) for t in range(3)
                ]
    weights = {tuple(p.shape) for p in model.parameters()}
    largest = max(math.prod(shape) for shape in casts.shapes)
    hidden = casts.shapes.count((2, 1, model.config.hidden_size))
    return torch.stack(logits), [s for s in casts.shapes if s in weights], largest, hidden


@pytest.mark.parametrize("weights", ["trainable", "frozen", "lora"])
def test_under_autocast_the_decoder_casts_its_weights_once(tiny_model, weights, device="cpu"):
    """In inference mode autocast keeps no cast (and elsewhere only of weights that train), so
    it would cast every weight again at every decoding step, frozen and merged ones included.
    The decoder casts them once, to the same values: its logits equal those of casting at
    every step, bit for bit. Nothing else it casts in a decoding step grows with the
    sequence (the KV cache is kept in autocast's dtype, not cast whole at every step), and
    each block's normed input is cast once, not once per projection."""
    model, _ = tiny_model
    if weights == "lora":
        pytest.importorskip("peft")
        from rlvr.train.config import LoraConfig
        from rlvr.train.lora import add_adapters

        add_adapters(model, LoraConfig(rank=4))
        with torch.no_grad():
            for name, p in model.named_parameters():
                if ".lora_B." in name:
                    p.normal_(std=0.1)
    model.requires_grad_(weights == "trainable")
    model.to(device)
    every_step, recast, before, _ = _autocast_decoding(model, built_under_autocast=False)
    once, none, after, hidden = _autocast_decoding(model, built_under_autocast=True)
    assert len(recast) >= 3 * 7 * 2  # the test sees them: 7 projections x 2 layers x 3 steps
    assert none == []
    one_position = 2 * max(model.config.hidden_size, model.config.intermediate_size)
    assert before > one_position >= after
    assert hidden == 3 * 2 * model.config.num_hidden_layers  # 3 steps, 2 blocks a layer
    assert torch.equal(once, every_step)


def test_without_autocast_the_decoder_reads_the_models_own_weights(tiny_model):
    model, _ = tiny_model
    dec = FastDecoder(model)
    assert product_dtype(torch.device("cpu")) == torch.float32
    assert dec.layers[0].q is model.model.layers[0].self_attn.q_proj
    assert dec.head is model.lm_head
