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


def test_generate_is_reproducible_under_seed(tiny_model):
    model, tokenizer = tiny_model
    cfg = SamplingConfig(max_new_tokens=6, temperature=1.0)
    torch.manual_seed(3)
    a = generate(model, tokenizer, ["What is"], n=4, sampling=cfg)
    torch.manual_seed(3)
    b = generate(model, tokenizer, ["What is"], n=4, sampling=cfg)
    assert torch.equal(a.response_ids, b.response_ids)


def test_sampling_config_rejects_bad_values():
    with pytest.raises(ValueError, match="top_p"):
        SamplingConfig(top_p=0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        SamplingConfig(max_new_tokens=0)


@pytest.mark.parametrize(
    "cfg",
    [
        SamplingConfig(max_new_tokens=12, temperature=0),
        SamplingConfig(max_new_tokens=12, temperature=1.0),
        SamplingConfig(max_new_tokens=12, temperature=0.7, top_k=20, top_p=0.9),
    ],
    ids=["greedy", "t1", "t0.7-k20-p0.9"],
)
@pytest.mark.parametrize("eos_boost", [0.0, 3.0], ids=["plain", "early-eos"])
def test_lean_engine_draws_the_same_tokens_as_hf_generate(tiny_model, cfg, eos_boost):
    model, tokenizer = tiny_model
    bias = torch.zeros(len(tokenizer))
    bias[tokenizer.eos_token_id] = eos_boost  # makes many rows stop early
    model.lm_head.register_forward_hook(lambda module, args, out: out + bias)
    prompts = [
        "What is 12 + 7?",
        "Calculate",
        "State the final answer: 40 + 2",
    ]  # unequal lengths: left padding
    out = {}
    for engine in ("hf", "lean"):
        torch.manual_seed(11)
        out[engine] = generate(model, tokenizer, prompts, n=3, sampling=cfg, engine=engine)
    hf, lean = out["hf"], out["lean"]
    width = min(hf.response_ids.shape[1], lean.response_ids.shape[1])
    assert torch.equal(hf.response_mask.sum(1), lean.response_mask.sum(1))
    assert torch.equal(hf.response_ids[:, :width], lean.response_ids[:, :width])
    assert hf.texts == lean.texts
    assert torch.equal(hf.truncated, lean.truncated)
    if eos_boost and cfg.temperature == 1.0:  # some rows stop early, some run to the budget
        assert 0 < int(lean.truncated.sum()) < len(lean.texts)
        assert int(lean.response_mask.sum(1).min()) < cfg.max_new_tokens


def test_warp_logits_keeps_top_k_and_nucleus():
    from rlvr.generation import warp_logits

    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    kept = warp_logits(logits, SamplingConfig(top_k=2)).isfinite()
    assert kept.tolist() == [[True, True, False, False]]
    kept = warp_logits(logits, SamplingConfig(top_p=0.8)).isfinite()  # 0.5 + 0.3 reaches 0.8
    assert kept.tolist() == [[True, True, False, False]]
    kept = warp_logits(logits, SamplingConfig(top_p=0.81)).isfinite()
    assert kept.tolist() == [[True, True, True, False]]


def test_generate_ids_rejects_empty_prompt(tiny_model):
    from rlvr.generation import generate_ids

    model, tokenizer = tiny_model
    with pytest.raises(ValueError, match="empty prompt"):
        generate_ids(model, tokenizer, [[5, 6], []], n=1)
    with pytest.raises(ValueError, match="engine"):
        generate_ids(model, tokenizer, [[5, 6]], engine="vllm")
