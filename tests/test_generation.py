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
