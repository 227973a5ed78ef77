"""The update's log-probs and entropy against the distribution the sampler drew each token from.

The lean sampler's logits are recorded at every step (``prune=False``: row i stays row i) and
compared with the trainer's log-prob pass over the finished batch, and with a float64 copy
of the model.
"""

import copy

import pytest
import torch

import rlvr.generation.lean as lean
from rlvr.generation import SamplingConfig, generate_ids, make_sampler, warp_logits
from rlvr.train.batch import from_generation
from rlvr.train.config import ModelConfig
from rlvr.train.logprobs import response_stats

PROMPTS = ["What is 12 + 7?", "Calculate", "State the final answer: 40 + 2"]  # left padding


def _peaked_with_eos(model, tokenizer, eos_bias=4.0, scale=8.0):
    """Sharper logits (so top-p cuts) and an EOS bias (so rows stop at varied steps)."""
    old = model.lm_head
    head = torch.nn.Linear(old.in_features, old.out_features, bias=True)
    with torch.no_grad():
        head.weight.copy_(old.weight * scale)
        head.bias.zero_()
        head.bias[tokenizer.eos_token_id] = eos_bias
    model.lm_head = head
    return model


def _sample(model, tokenizer, sampling, monkeypatch):
    """``(generation, [T, N, V] logits the sampler drew each column from)``."""
    seen = []

    def recording(logits, cfg, draw):
        seen.append(logits.double().clone())
        return draw_tokens(logits, cfg, draw)

    draw_tokens = lean.draw_tokens
    monkeypatch.setattr(lean, "draw_tokens", recording)
    prompts = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in PROMPTS]
    sampler = make_sampler("lean", model, tokenizer, prune=False)
    torch.manual_seed(5)
    gen = generate_ids(model, tokenizer, prompts, n=4, sampling=sampling, sampler=sampler)
    return gen, torch.stack(seen[: gen.response_ids.shape[1]])


def _trainer(model, gen, temperature, share_prompt):
    cfg = ModelConfig(share_prompt=share_prompt, device="cpu")
    with torch.no_grad():
        return response_stats(
            model, from_generation(gen), cfg, temperature=temperature, entropy=True
        )


def _picked(logits_tnv, gen):
    """[N, T] the entry of each sampled token in [T, N, V]."""
    return logits_tnv.gather(2, gen.response_ids.T[..., None]).squeeze(2).T


@pytest.mark.parametrize("share_prompt", [True, False], ids=["packed", "padded"])
def test_the_updates_logprobs_are_those_the_sampler_drew_with(
    tiny_model, share_prompt, monkeypatch
):
    model, tokenizer = tiny_model
    _peaked_with_eos(model, tokenizer)
    sampling = SamplingConfig(max_new_tokens=10, temperature=0.7)
    gen, logits = _sample(model, tokenizer, sampling, monkeypatch)
    mask = gen.response_mask.bool()
    lengths = mask.sum(1)
    assert 0 < int(gen.truncated.sum()) < len(lengths)  # some rows end with EOS, some at the cap
    for row, n in enumerate(lengths.tolist()):  # the EOS is the last token in the mask
        assert (
            bool(gen.truncated[row]) or int(gen.response_ids[row, n - 1]) == tokenizer.eos_token_id
        )
    drawn = _picked(torch.log_softmax(logits / 0.7, -1), gen)  # [N, T]
    stats = _trainer(model, gen, 0.7, share_prompt)
    assert (stats.logp.double() - drawn)[mask].abs().max() < 1e-5
    full = copy.deepcopy(model).double()
    seqs = from_generation(gen)
    positions = (seqs.attention_mask.cumsum(-1) - 1).clamp_min(0)
    with torch.no_grad():
        z = full(seqs.input_ids, seqs.attention_mask, positions).logits / 0.7
    t = gen.response_ids.shape[1]
    exact = torch.log_softmax(z[:, -t - 1 : -1], -1)  # [N, T, V]
    picked = exact.gather(2, gen.response_ids[..., None]).squeeze(2)
    assert (stats.logp.double() - picked)[mask].abs().max() < 1e-5
    entropy = -(exact.exp() * exact).sum(-1)
    assert (stats.entropy.double() - entropy)[mask].abs().max() < 1e-4


def test_under_top_p_the_behaviour_logprob_is_below_the_drawn_one_by_the_kept_mass(
    tiny_model, monkeypatch
):
    """What docs/training.md says: the update's log-probs are the whole softmax's, the sampler's
    the truncated one's; they differ by log(kept mass) at each position."""
    model, tokenizer = tiny_model
    _peaked_with_eos(model, tokenizer)
    sampling = SamplingConfig(max_new_tokens=10, temperature=0.7, top_k=20, top_p=0.9)
    gen, logits = _sample(model, tokenizer, sampling, monkeypatch)
    mask = gen.response_mask.bool()
    warped = torch.stack([warp_logits(step.float(), sampling).double() for step in logits])
    drawn = _picked(torch.log_softmax(warped, -1), gen)
    whole = torch.log_softmax(logits / 0.7, -1)
    kept = torch.logsumexp(whole.masked_fill(warped.isinf(), -torch.inf), -1).T  # [N, T]
    stats = _trainer(model, gen, 0.7, True)
    gap = stats.logp.double() - drawn
    assert (gap - kept)[mask].abs().max() < 1e-5
    assert float(gap[mask].mean()) < -0.1  # not a rounding matter
    entropy = -(whole.exp() * whole).sum(-1).T  # the whole softmax's entropy
    assert (stats.entropy.double() - entropy)[mask].abs().max() < 1e-4
