import math

import pytest
import torch

from rlvr.models.tiny import TinySize, build_task_tokenizer, random_model
from rlvr.models.tiny_sft import (
    IGNORE_INDEX,
    SftSettings,
    _warm_start,
    collate,
    encode_pairs,
    lr_at,
    response_nll,
)

PAIRS = [
    (f"What is {a} + {b}?", f"<think>\n{a} + {b} = {a + b}\n</think>\n\\boxed{{{a + b}}}")
    for a in range(6)
    for b in range(5)
]
SMALL = TinySize(
    hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_position_embeddings=128
)


@pytest.fixture(scope="module")
def tokenizer():
    return build_task_tokenizer(PAIRS, vocab_size=300)


def test_collate_masks_prompt_and_padding():
    batch = collate([([5, 6], [7, 8, 2]), ([5], [9, 2])], pad_id=0)
    assert batch.input_ids.tolist() == [[5, 6, 7, 8, 2], [5, 9, 2, 0, 0]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    m = IGNORE_INDEX
    assert batch.labels.tolist() == [[m, m, 7, 8, 2], [m, 9, 2, m, m]]


def test_encode_pairs_applies_chat_template_and_appends_eos(tokenizer):
    (prompt_ids, response_ids), *_ = encode_pairs(tokenizer, PAIRS[:1])
    assert (
        tokenizer.decode(prompt_ids)
        == "<|im_start|>user\nWhat is 0 + 0?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert response_ids[-1] == tokenizer.eos_token_id
    assert tokenizer.decode(response_ids[:-1]) == PAIRS[0][1]


def test_response_nll_counts_only_response_tokens(tokenizer):
    torch.manual_seed(0)
    model = random_model(tokenizer, SMALL)
    encoded = encode_pairs(tokenizer, PAIRS[:3])
    batch = collate(encoded, tokenizer.pad_token_id)
    got = response_nll(model, batch)
    # by hand: each sequence alone, log-softmax at the positions before its response tokens
    total, count = 0.0, 0
    for prompt, response in encoded:
        ids = torch.tensor([prompt + response])
        logp = torch.log_softmax(model(input_ids=ids).logits[0].double(), dim=-1)
        for offset, token in enumerate(response):
            total -= logp[len(prompt) + offset - 1, token].item()
            count += 1
    assert got.item() == pytest.approx(total / count, abs=1e-5)


def test_lr_schedule_warms_up_then_decays_to_zero():
    settings = SftSettings(steps=6, lr=1.0, warmup_steps=2)
    expected = [
        0.5,
        1.0,
        1.0,
        0.5 * (1 + math.cos(math.pi / 4)),
        0.5,
        0.5 * (1 + math.cos(3 * math.pi / 4)),
    ]
    assert [lr_at(step, settings) for step in range(6)] == pytest.approx(expected, abs=1e-12)


def test_warm_start_lowers_the_loss(tokenizer):
    model = random_model(tokenizer, SMALL, seed=0)
    settings = SftSettings(steps=40, batch_size=8, lr=1e-2, warmup_steps=5, seed=0)
    losses = _warm_start(model, tokenizer, PAIRS, settings)
    assert len(losses) == 40
    assert sum(losses[-5:]) / 5 < 0.4 * losses[0]  # 5.75 -> 1.65 when measured
    assert not model.training


def test_warm_start_reports_each_step(tokenizer):
    model = random_model(tokenizer, SMALL, seed=0)
    seen = []
    losses = _warm_start(
        model,
        tokenizer,
        PAIRS,
        SftSettings(steps=3, batch_size=4),
        on_step=lambda step, loss: seen.append((step, loss)),
    )
    assert seen == list(enumerate(losses))


def test_bad_settings_and_empty_data_are_rejected(tokenizer):
    with pytest.raises(ValueError, match="lr"):
        SftSettings(lr=0.0)
    with pytest.raises(ValueError, match="steps"):
        SftSettings(steps=0)
    with pytest.raises(ValueError, match="pairs is empty"):
        _warm_start(random_model(tokenizer, SMALL), tokenizer, [], SftSettings(steps=1))
