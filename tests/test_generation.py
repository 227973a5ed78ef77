import pytest
import torch

from rlvr.generation import SamplingConfig, generate, response_mask_from_ids


def test_response_mask_stops_after_first_eos():
    ids = torch.tensor([[5, 6, 2, 7, 2], [5, 5, 5, 5, 5], [2, 9, 9, 9, 9]])
    mask, truncated = response_mask_from_ids(ids, [2])
    assert mask.tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]]
    assert truncated.tolist() == [False, True, False]


def test_generate_groups_and_masks(tiny_model):
    model, tokenizer = tiny_model
    prompts = ["What is 12 + 7?", "Calculate 5 - 3"]
    torch.manual_seed(0)
    out = generate(model, tokenizer, prompts, n=3, sampling=SamplingConfig(max_new_tokens=8))
    assert out.prompt_index == [0, 0, 0, 1, 1, 1]
    assert out.response_ids.shape[0] == 6 and out.response_ids.shape[1] <= 8
    assert len(out.texts) == 6
    lengths = out.response_lengths
    assert torch.all((lengths == 8) | ~out.truncated)
    # padding after the mask is the pad token
    pad = tokenizer.pad_token_id
    assert torch.all(out.response_ids[out.response_mask == 0] == pad)
    # left padding: the last prompt column is real for every row
    assert torch.all(out.prompt_mask[:, -1] == 1)


@pytest.mark.parametrize("sampler", ["lean", "hf"])
def test_generate_is_reproducible_under_seed(tiny_model, sampler):
    model, tokenizer = tiny_model
    cfg = SamplingConfig(max_new_tokens=6, temperature=1.0, top_p=0.95)
    torch.manual_seed(3)
    a = generate(model, tokenizer, ["What is", "Calculate"], n=4, sampling=cfg, sampler=sampler)
    torch.manual_seed(3)
    b = generate(model, tokenizer, ["What is", "Calculate"], n=4, sampling=cfg, sampler=sampler)
    assert torch.equal(a.response_ids, b.response_ids)


def test_sampling_config_rejects_bad_values():
    with pytest.raises(ValueError, match="top_p"):
        SamplingConfig(top_p=0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        SamplingConfig(max_new_tokens=0)


CONFIGS = [
    SamplingConfig(max_new_tokens=12, temperature=0),
    SamplingConfig(max_new_tokens=12, temperature=1.0),
    SamplingConfig(max_new_tokens=12, temperature=0.7, top_k=20, top_p=0.9),
]
IDS = ["greedy", "t1", "t0.7-k20-p0.9"]
PROMPTS = [
    "What is 12 + 7?",
    "Calculate",
    "State the final answer: 40 + 2",
]  # unequal: left padding


def _boost_eos(model, tokenizer, boost):
    """Raise the EOS logit where the final hidden state sums above 0: rows stop at varied steps.

    A hook on the LM head applies in every engine (the fast decoder calls the same head).
    """
    eos = torch.arange(len(tokenizer)) == tokenizer.eos_token_id

    def hook(module, args, out):
        return out + boost * (args[0].sum(-1, keepdim=True) > 0) * eos

    model.lm_head.register_forward_hook(hook)


def _both(model, tokenizer, cfg, samplers, prompts=PROMPTS):
    out = {}
    for name, sampler in samplers.items():
        torch.manual_seed(11)
        out[name] = generate(model, tokenizer, prompts, n=3, sampling=cfg, sampler=sampler)
    return out


@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
@pytest.mark.parametrize("eos_boost", [3.0], ids=["early-eos"])
@pytest.mark.parametrize("fast", [True, False], ids=["fast-decoder", "hf-forward"])
def test_lean_loop_without_pruning_draws_the_same_tokens_as_hf_generate(
    tiny_model, cfg, eos_boost, fast
):
    from rlvr.generation import make_sampler

    model, tokenizer = tiny_model
    _boost_eos(model, tokenizer, eos_boost)
    lean = make_sampler("lean", model, tokenizer, prune=False, fast=fast, draw="multinomial")
    out = _both(model, tokenizer, cfg, {"hf": "hf", "lean": lean})
    hf, lean = out["hf"], out["lean"]
    width = min(hf.response_ids.shape[1], lean.response_ids.shape[1])
    assert torch.equal(hf.response_mask.sum(1), lean.response_mask.sum(1))
    assert torch.equal(hf.response_ids[:, :width], lean.response_ids[:, :width])
    assert hf.texts == lean.texts
    assert torch.equal(hf.truncated, lean.truncated)
    if eos_boost and cfg.temperature == 1.0:  # some rows stop early, some run to the budget
        assert 0 < int(lean.truncated.sum()) < len(lean.texts)
        assert int(lean.response_mask.sum(1).min()) < cfg.max_new_tokens


@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_pruning_finished_rows_keeps_each_rows_distribution(tiny_model, cfg):
    """Greedy: identical to HF. Sampling: identical until the first row stops, then every
    token is still inside the row's own top-k / top-p support."""
    from rlvr.generation import make_sampler, warp_logits

    model, tokenizer = tiny_model
    _boost_eos(model, tokenizer, 6.0)
    prompts = [*PROMPTS, "12", "5 - 3 - 6", "times 4 is", "<think>", "Answer: 19", "The answer is"]
    lean = make_sampler("lean", model, tokenizer, draw="multinomial")  # HF's draws
    out = _both(model, tokenizer, cfg, {"hf": "hf", "lean": lean}, prompts)
    hf, lean = out["hf"], out["lean"]
    first_stop = int(hf.response_mask.sum(1).min())
    assert first_stop < cfg.max_new_tokens
    lengths = lean.response_mask.sum(1)
    assert int(lengths.min()) < int(lengths.max())  # rows stop at different steps: pruning happens
    if cfg.temperature == 0:
        assert torch.equal(hf.response_ids, lean.response_ids[:, : hf.response_ids.shape[1]])
        return
    assert torch.equal(hf.response_ids[:, :first_stop], lean.response_ids[:, :first_stop])
    ids = torch.cat([lean.prompt_ids, lean.response_ids], 1)
    attn = torch.cat([lean.prompt_mask, lean.response_mask], 1)
    positions = (attn.cumsum(-1) - 1).clamp_min(0)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=attn, position_ids=positions).logits.float()
    p, t = lean.prompt_ids.shape[1], lean.response_ids.shape[1]
    warped = warp_logits(logits[:, p - 1 : p + t - 1].reshape(-1, logits.shape[-1]), cfg)
    chosen = warped.gather(1, lean.response_ids.reshape(-1, 1)).view(-1, t)
    assert torch.isfinite(chosen[lean.response_mask.bool()]).all()


def test_warp_logits_keeps_top_k_and_nucleus():
    from rlvr.generation import warp_logits

    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    kept = warp_logits(logits, SamplingConfig(top_k=2)).isfinite()
    assert kept.tolist() == [[True, True, False, False]]
    kept = warp_logits(logits, SamplingConfig(top_p=0.8)).isfinite()  # 0.5 + 0.3 reaches 0.8
    assert kept.tolist() == [[True, True, False, False]]
    kept = warp_logits(logits, SamplingConfig(top_p=0.81)).isfinite()
    assert kept.tolist() == [[True, True, True, False]]


def test_warp_logits_at_temperature_0_is_the_greedy_choice():
    """Greedy draws the argmax (the first of tied maxima): the warped distribution is that
    point mass, not the NaN of dividing by 0."""
    from rlvr.generation import next_tokens, warp_logits

    logits = torch.tensor([[1.0, 3.0, 0.0, -2.0], [2.0, -1.0, 0.0, 2.0]])
    for cfg in (SamplingConfig(temperature=0), SamplingConfig(temperature=0, top_k=3, top_p=0.5)):
        probs = warp_logits(logits, cfg).softmax(-1)
        assert probs.tolist() == [[0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]
        assert next_tokens(logits, cfg).tolist() == [1, 0]


def test_generate_ids_rejects_empty_prompt(tiny_model):
    from rlvr.generation import generate_ids

    model, tokenizer = tiny_model
    with pytest.raises(ValueError, match="empty prompt"):
        generate_ids(model, tokenizer, [[5, 6], []], n=1)
    with pytest.raises(ValueError, match="unknown sampler 'nope'; valid: .*hf, lean"):
        generate_ids(model, tokenizer, [[5, 6]], sampler="nope")


@pytest.mark.parametrize("fast", [True, False], ids=["fast-decoder", "hf-forward"])
def test_shared_prefill_gives_every_copy_the_logits_and_cache_of_its_prompt(tiny_model, fast):
    """Prefilling each distinct prompt once and copying its cache to the group's rows gives
    the same logits, at prefill and at every later step, as prefilling every row."""
    from rlvr.generation import left_pad
    from rlvr.generation.lean import prefill as _prefill
    from rlvr.generation.lean import stepper as _stepper

    model, tokenizer = tiny_model
    ids, mask = left_pad([[5, 6, 7, 8], [9, 10], [11, 12, 13]], tokenizer.pad_token_id)
    ids, mask = ids.repeat_interleave(2, 0), mask.repeat_interleave(2, 0)  # groups of 2
    tokens = torch.randint(3, len(tokenizer), (3, 6), generator=torch.Generator().manual_seed(0))
    out = {}
    with torch.inference_mode():
        for group in (1, 2):
            step = _stepper(model, fast)
            logits = [_prefill(step, ids, mask, group)]
            logits += [step.decode(tokens[t]) for t in range(3)]
            out[group] = torch.stack(logits)  # [4, 6, V]
    torch.testing.assert_close(out[2], out[1], rtol=1e-5, atol=1e-5)
    assert out[2].shape == (4, 6, len(tokenizer))
    # the two copies of a prompt share its prefill logits exactly
    assert torch.equal(out[2][0, 0], out[2][0, 1])


def test_shared_prefill_rejects_rows_that_are_not_whole_groups(tiny_model):
    from rlvr.generation import left_pad
    from rlvr.generation.lean import prefill as _prefill
    from rlvr.generation.lean import stepper as _stepper

    model, tokenizer = tiny_model
    ids, mask = left_pad([[5, 6], [5, 6], [7, 8]], tokenizer.pad_token_id)
    with torch.inference_mode(), pytest.raises(ValueError, match="groups of 2"):
        _prefill(_stepper(model, True), ids, mask, 2)


@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_shared_prefill_draws_the_same_tokens(tiny_model, cfg):
    from rlvr.generation import make_sampler

    model, tokenizer = tiny_model
    _boost_eos(model, tokenizer, 3.0)
    torch.manual_seed(5)
    shared = generate(model, tokenizer, PROMPTS, n=4, sampling=cfg)
    per_row = make_sampler("lean", model, tokenizer, share_prefill=False)
    torch.manual_seed(5)
    every_row = generate(model, tokenizer, PROMPTS, n=4, sampling=cfg, sampler=per_row)
    assert torch.equal(shared.response_ids, every_row.response_ids)
    assert shared.texts == every_row.texts


@pytest.mark.parametrize("temperature", [0.0, 1.0], ids=["greedy", "sampled"])
def test_hf_shared_prefill_draws_the_same_tokens(tiny_model, temperature, monkeypatch):
    """``hf`` with each prompt prefilled once draws what ``generate`` draws from scratch."""
    from rlvr.generation import hf, make_sampler

    model, tokenizer = tiny_model
    prompts = [tokenizer("What is 12 + 7?")["input_ids"], tokenizer("5 - 3")["input_ids"]]
    cfg = SamplingConfig(max_new_tokens=10, temperature=temperature)
    calls = []
    original = hf.shared_prefix
    monkeypatch.setattr(hf, "shared_prefix", lambda *a: calls.append(a[1].shape) or original(*a))
    out = {}
    for share in (False, True):
        sampler = make_sampler("hf", model, tokenizer, share_prefill=share)
        torch.manual_seed(3)
        out[share] = sampler.generate(prompts, n=3, sampling=cfg)
    assert len(calls) == 1 and calls[0][0] == 6  # only the shared run, over 2 prompts x 3
    assert torch.equal(out[False].response_ids, out[True].response_ids)
    assert out[False].texts == out[True].texts


def test_inverse_cdf_draws_each_token_with_its_probability():
    """200k draws from a fixed distribution: every frequency within 5 standard errors, and
    tokens of probability 0 (as top-k / top-p leave them) never drawn."""
    from rlvr.generation.lean import inverse_cdf

    probs = torch.tensor([0.0, 0.5, 0.25, 0.0, 0.125, 0.0625, 0.0625, 0.0])
    draws = 200_000
    torch.manual_seed(0)
    tokens = inverse_cdf(probs.expand(draws, -1))
    freq = torch.bincount(tokens, minlength=8).double() / draws
    stderr = (probs.double() * (1 - probs.double()) / draws).sqrt()
    assert (freq[probs == 0] == 0).all()
    assert ((freq - probs.double()).abs() <= 5 * stderr + 1e-12).all(), freq
    # unnormalised rows and a row with its mass on the last token
    rows = torch.tensor([[0.0, 2.0, 0.0], [0.0, 0.0, 3.0]])
    assert inverse_cdf(rows).tolist() == [1, 2]


@pytest.mark.parametrize("cfg", CONFIGS, ids=IDS)
def test_cdf_draws_stay_inside_each_rows_support(tiny_model, cfg):
    """The default draw: greedy is unaffected; sampled tokens lie in the top-k / top-p set."""
    from rlvr.generation import make_sampler, warp_logits

    model, tokenizer = tiny_model
    assert make_sampler("lean", model, tokenizer).options.draw == "cdf"
    torch.manual_seed(2)
    out = generate(model, tokenizer, PROMPTS, n=3, sampling=cfg)
    if cfg.temperature == 0:
        hf = generate(model, tokenizer, PROMPTS, n=3, sampling=cfg, sampler="hf")
        assert torch.equal(hf.response_ids, out.response_ids[:, : hf.response_ids.shape[1]])
        return
    ids = torch.cat([out.prompt_ids, out.response_ids], 1)
    attn = torch.cat([out.prompt_mask, out.response_mask], 1)
    with torch.no_grad():
        logits = model(
            input_ids=ids, attention_mask=attn, position_ids=(attn.cumsum(-1) - 1).clamp_min(0)
        ).logits.float()
    p, t = out.prompt_ids.shape[1], out.response_ids.shape[1]
    warped = warp_logits(logits[:, p - 1 : p + t - 1].reshape(-1, logits.shape[-1]), cfg)
    chosen = warped.gather(1, out.response_ids.reshape(-1, 1)).view(-1, t)
    assert torch.isfinite(chosen[out.response_mask.bool()]).all()


def test_hf_sampler_ignores_the_models_own_logits_processors(tiny_model):
    """Settings a checkpoint's generation_config may carry (Qwen2.5-Instruct ships
    ``repetition_penalty``) change nothing: ``hf`` samples what ``lean`` and ``vllm`` do."""
    from rlvr.generation import make_sampler

    model, tokenizer = tiny_model
    prompts = [tokenizer("What is 12 + 7?")["input_ids"], tokenizer("5 - 3")["input_ids"]]
    cfg = SamplingConfig(max_new_tokens=10, temperature=0.7, top_k=20, top_p=0.9)
    out = {}
    for extra in (False, True):
        if extra:
            settings = {"repetition_penalty": 5.0, "no_repeat_ngram_size": 1, "min_new_tokens": 3}
            for name, value in settings.items():
                setattr(model.generation_config, name, value)
            model.generation_config.suppress_tokens = list(range(3, 200))
        torch.manual_seed(4)
        out[extra] = make_sampler("hf", model, tokenizer).generate(prompts, n=2, sampling=cfg)
    assert model.generation_config.repetition_penalty == 5.0  # the model's config is left as it was
    assert torch.equal(out[False].response_ids, out[True].response_ids)
    torch.manual_seed(4)
    lean = make_sampler("lean", model, tokenizer, prune=False, draw="multinomial")
    same = lean.generate(prompts, n=2, sampling=cfg)
    assert torch.equal(same.response_ids, out[True].response_ids)


def test_the_kv_cache_goes_under_the_name_the_model_takes():
    """transformers 5.24 renamed ``past_key_values`` to ``cache`` (the old name warns, and goes
    in 5.40); the samplers pass it under whichever name ``forward`` declares."""
    from rlvr.generation.lean import cache_keyword

    class New(torch.nn.Module):
        def forward(self, input_ids, cache=None, **kwargs): ...

    class Old(torch.nn.Module):
        def forward(self, input_ids, past_key_values=None, **kwargs): ...

    assert (cache_keyword(New()), cache_keyword(Old())) == ("cache", "past_key_values")
