"""Model-level response-token statistics on the tiny random Qwen2."""

from __future__ import annotations

import pytest
import torch

from rlvr.generation import response_mask_from_ids
from rlvr.ops import TokenStats, head_path, position_ids_from_mask, sequence_token_stats

F64 = torch.float64


def rollout_batch(vocab: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``(input_ids [3, 12], attention_mask [3, 12], T = 5)``: left-padded prompts, right-padded responses."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (3, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[0, :3] = 0  # prompt padding
    mask[1, :1] = 0
    mask[2, -2:] = 0  # response padding
    return ids, mask, 5


def reference(model, ids, mask, t: int, temperature: float = 1.0) -> TokenStats:
    """The full-logits path: ``model(...).logits`` with generate's position ids."""
    pos = position_ids_from_mask(mask)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits[:, -t - 1 : -1]
    logp_all = torch.log_softmax(logits.double() / temperature, dim=-1)
    logp = logp_all.gather(-1, ids[:, -t:, None]).squeeze(-1)
    return TokenStats(logp, -(logp_all.exp() * logp_all).sum(-1))


def test_position_ids_from_mask_hand_worked():
    mask = torch.tensor([[0, 0, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
    expected = torch.tensor([[0, 0, 0, 1, 2, 0], [0, 1, 2, 3, 4, 5]])
    assert torch.equal(position_ids_from_mask(mask), expected)


def test_head_path_checks_logit_transforms(tiny_model):
    model, _ = tiny_model
    assert head_path(model) == "hidden"
    model.config.logit_scale = 1.0  # neutral value: still exact
    assert head_path(model) == "hidden"
    model.config.final_logit_softcapping = 30.0
    assert head_path(model) == "logits"
    model.config.final_logit_softcapping = None
    model.config.logits_scaling = 2.0
    assert head_path(model) == "logits"


@pytest.mark.parametrize("path", ["auto", "logits"])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_matches_full_logits_float64(tiny_model, path, temperature):
    model = tiny_model[0].double()
    ids, mask, t = rollout_batch(model.config.vocab_size)
    got = sequence_token_stats(
        model, ids, mask, t, temperature=temperature, chunk_size=4, path=path
    )
    ref = reference(model, ids, mask, t, temperature)
    assert got.logp.shape == (3, t) and got.entropy.shape == (3, t)
    torch.testing.assert_close(got.logp, ref.logp, rtol=0, atol=1e-12)
    torch.testing.assert_close(got.entropy, ref.entropy, rtol=0, atol=1e-12)


def test_gradients_match_full_logits_float64(tiny_model):
    model = tiny_model[0].double()
    ids, mask, t = rollout_batch(model.config.vocab_size, seed=1)
    weights = torch.randn(3, t, dtype=F64, generator=torch.Generator().manual_seed(2))
    params = [p for p in model.parameters() if p.requires_grad]

    def param_grads(stats: TokenStats) -> list[torch.Tensor]:
        loss = (weights * stats.logp).sum() + 0.3 * (weights * stats.entropy).sum()
        return list(torch.autograd.grad(loss, params))

    mine = param_grads(sequence_token_stats(model, ids, mask, t, temperature=0.9, chunk_size=4))
    theirs = param_grads(reference(model, ids, mask, t, temperature=0.9))
    for a, b in zip(mine, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


def test_float32_matches_full_logits(tiny_model):
    model, _ = tiny_model
    ids, mask, t = rollout_batch(model.config.vocab_size, seed=3)
    with torch.no_grad():
        got = sequence_token_stats(model, ids, mask, t)
        ref = reference(model, ids, mask, t)
    assert got.logp.dtype == torch.float32
    torch.testing.assert_close(got.logp.double(), ref.logp, rtol=0, atol=1e-5)
    torch.testing.assert_close(got.entropy.double(), ref.entropy, rtol=0, atol=1e-5)


def test_left_padding_does_not_change_logprobs(tiny_model):
    model, _ = tiny_model
    ids, mask, t = rollout_batch(model.config.vocab_size, seed=4)
    with torch.no_grad():
        padded = sequence_token_stats(model, ids, mask, t)
        alone = sequence_token_stats(
            model, ids[:1, 3:], mask[:1, 3:], t
        )  # row 0 without its 3 pads
        # The comparison is sensitive: attending to the pad columns changes the numbers.
        unmasked = sequence_token_stats(model, ids[:1], torch.ones_like(mask[:1]), t)
    torch.testing.assert_close(padded.logp[:1], alone.logp, rtol=0, atol=1e-5)
    torch.testing.assert_close(padded.entropy[:1], alone.entropy, rtol=0, atol=1e-5)
    assert (unmasked.logp - alone.logp).abs().max() > 1e-4


def test_matches_generate_scores(tiny_model):
    """Log-probs equal those of the sampler's own logits (KV cache, left padding)."""
    model, tokenizer = tiny_model
    model = model.double()
    tokenizer.padding_side = "left"
    enc = tokenizer(["What is 12 + 7?", "5 - 3"], return_tensors="pt", padding=True)
    assert (enc["attention_mask"] == 0).any()  # the batch really is left-padded
    out = model.generate(
        **enc,
        max_new_tokens=6,
        do_sample=False,
        output_logits=True,
        return_dict_in_generate=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    response = out.sequences[:, enc["input_ids"].shape[1] :]
    resp_mask, _ = response_mask_from_ids(response, [tokenizer.eos_token_id])
    sampler = torch.log_softmax(torch.stack(out.logits, 1).double(), -1)
    sampler_logp = sampler.gather(-1, response[..., None]).squeeze(-1)
    ids = torch.cat([enc["input_ids"], response], 1)
    mask = torch.cat([enc["attention_mask"], resp_mask], 1)
    got = sequence_token_stats(model, ids, mask, response.shape[1])
    on = resp_mask.bool()
    # generate hands back its logits cast to float32, hence a float32 tolerance.
    torch.testing.assert_close(got.logp[on], sampler_logp[on], rtol=0, atol=1e-6)


def test_no_grad_and_no_entropy(tiny_model):
    model, _ = tiny_model
    ids, mask, t = rollout_batch(model.config.vocab_size, seed=5)
    with torch.no_grad():
        got = sequence_token_stats(model, ids, mask, t, compute_entropy=False)
    assert got.entropy is None and not got.logp.requires_grad


@pytest.mark.parametrize(
    ("t", "mask_shape", "path", "match"),
    [
        (12, (3, 12), "auto", "num_response_tokens"),
        (0, (3, 12), "auto", "num_response_tokens"),
        (5, (3, 11), "auto", "attention_mask"),
        (5, (3, 12), "fast", "path"),
    ],
)
def test_bad_input_raises(tiny_model, t, mask_shape, path, match):
    model, _ = tiny_model
    ids = torch.zeros(3, 12, dtype=torch.long)
    with pytest.raises(ValueError, match=match):
        sequence_token_stats(model, ids, torch.ones(mask_shape, dtype=torch.long), t, path=path)


def test_hidden_path_saves_no_vocab_sized_activation(tiny_model):
    model, _ = tiny_model
    ids, mask, t = rollout_batch(model.config.vocab_size, seed=6)
    vocab = model.config.vocab_size

    def saved_shapes(fn) -> list[tuple[int, ...]]:
        shapes: list[tuple[int, ...]] = []
        with torch.autograd.graph.saved_tensors_hooks(
            lambda x: shapes.append(tuple(x.shape)) or x, lambda x: x
        ):
            fn()
        return shapes

    chunked = saved_shapes(lambda: sequence_token_stats(model, ids, mask, t, chunk_size=4))
    full = saved_shapes(lambda: reference(model, ids, mask, t))
    assert any(s[-1] == vocab for s in full if s)  # the reference does save [.., V] activations
    assert not [s for s in chunked if s and s[-1] == vocab]
