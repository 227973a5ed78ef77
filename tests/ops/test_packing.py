"""The packed layout (each prompt once, no padding) against the padded one."""

from __future__ import annotations

import pytest
import torch

from rlvr.ops import sequence as seq_module
from rlvr.ops import sequence_token_stats
from rlvr.ops.packing import pack_by_prompt, packable, prompt_groups

F64 = torch.float64


def test_layout_hand_worked():
    # Rows 0 and 2 share the prompt [5, 6, 7]; row 1 has the prompt [9, 8] (left-padded).
    ids = torch.tensor(
        [
            [5, 6, 7, 11, 12, 13],
            [0, 9, 8, 21, 0, 0],
            [5, 6, 7, 31, 32, 0],
        ]
    )
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [0, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 0]])
    packed = pack_by_prompt(ids, mask, 3, pad_id=99)
    assert packed.input_ids.tolist() == [
        [5, 6, 7, 11, 12, 13, 31, 32],
        [9, 8, 21, 99, 99, 99, 99, 99],
    ]
    assert packed.position_ids.tolist() == [[0, 1, 2, 3, 4, 5, 3, 4], [0, 1, 2, 0, 0, 0, 0, 0]]
    # Token 11 is predicted at the last prompt position (2), 12 at 3, 13 at 4; 31 at 2
    # again (the shared prompt), 32 at 6; in row 1 (offset 8) 21 is predicted at 8 + 1.
    assert packed.source.tolist() == [2, 3, 4, 2, 6, 9]
    assert packed.labels.tolist() == [11, 12, 13, 31, 32, 21]
    assert packed.target.tolist() == [0, 1, 2, 6, 7, 3]  # flat index into [B=3, T=3]
    allowed = packed.allowed[0].int()
    assert allowed[6].tolist() == [1, 1, 1, 0, 0, 0, 1, 0]  # 31 sees the prompt and itself
    assert allowed[5].tolist() == [1, 1, 1, 1, 1, 1, 0, 0]  # 13 sees the prompt and 11, 12
    assert allowed[1].tolist() == [1, 1, 0, 0, 0, 0, 0, 0]  # the prompt is causal
    pad_row = packed.allowed[1, 5].int().tolist()
    assert pad_row == [1, 1, 0, 0, 0, 1, 0, 0]  # padding sees the prompt and itself
    values = torch.arange(6.0)
    assert packed.unpack(values).tolist() == [[0, 1, 2], [5, 0, 0], [3, 4, 0]]


def test_long_groups_start_another_row():
    ids = torch.tensor([[5, 6, 1, 2, 3], [5, 6, 4, 0, 0], [5, 6, 7, 8, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0]])
    packed = pack_by_prompt(ids, mask, 3, max_tokens=6)
    # prompt (2) + 3 + 1 = 6 fits; adding the third response (2) would not.
    assert packed.input_ids.tolist() == [[5, 6, 1, 2, 3, 4], [5, 6, 7, 8, 0, 0]]


def test_prompt_groups_compare_real_tokens_only():
    ids = torch.tensor([[0, 4, 5, 9], [3, 4, 5, 9], [7, 4, 5, 9], [4, 4, 5, 9]])
    mask = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1], [0, 1, 1, 1], [1, 1, 1, 1]])
    # rows 0 and 2 differ only under padding; rows 1 and 3 have different first tokens
    assert prompt_groups(ids, mask, 3).tolist() == [0, 1, 0, 2]


@pytest.mark.parametrize(
    ("mask", "ok"),
    [
        ([[0, 1, 1, 1, 0], [1, 1, 1, 1, 1]], True),
        ([[1, 0, 1, 1, 0], [1, 1, 1, 1, 1]], False),  # a hole in a prompt
        ([[0, 1, 0, 1, 0], [1, 1, 1, 1, 1]], False),  # the last prompt column is padding
        ([[0, 1, 1, 0, 1], [1, 1, 1, 1, 1]], False),  # a hole in a response
        ([[0, 1, 1, 0, 0], [1, 1, 1, 1, 1]], False),  # an empty response
    ],
)
def test_packable(mask, ok):
    assert packable(torch.tensor(mask), 2) is ok


# ------------------------------------------------------------------ models


def grouped_batch(vocab: int, prompt_lengths, response_lengths, group: int, seed: int = 0):
    """``(ids, mask, T)``: one prompt per length in ``prompt_lengths`` (left-padded), each
    repeated ``group`` times with its own right-padded responses."""
    g = torch.Generator().manual_seed(seed)
    p, t = max(prompt_lengths), max(response_lengths)
    rows = len(prompt_lengths) * group
    ids = torch.randint(1, vocab, (rows, p + t), generator=g)
    mask = torch.ones_like(ids)
    for k, plen in enumerate(prompt_lengths):
        block = slice(k * group, (k + 1) * group)
        ids[block, :p] = ids[k * group, :p]
        mask[block, : p - plen] = 0
        ids[block, : p - plen] = 0
    for row in range(rows):
        mask[row, p + response_lengths[row % len(response_lengths)] :] = 0
    return ids, mask, t


def both_layouts(model, ids, mask, t, weights, *, entropy=True):
    """``[(logp, entropy, grads)]`` of the padded then the packed layout for one loss."""
    params = [p for p in model.parameters() if p.requires_grad]
    out = []
    for share in (False, True):
        seq_module._VERIFIED.clear()
        stats = sequence_token_stats(
            model, ids, mask, t, share_prompt=share, chunk_size=5, compute_entropy=entropy
        )
        loss = (weights * stats.logp).sum()
        if entropy:
            loss = loss + 0.3 * (weights * stats.entropy).sum()
        grads = torch.autograd.grad(loss, params)
        assert seq_module._VERIFIED.get(model, False) is share  # no silent fallback
        out.append((stats.logp.detach(), None if not entropy else stats.entropy.detach(), grads))
    return out


def assert_grads_close(mine, theirs, rtol):
    """Every parameter gradient within ``rtol`` of the largest entry of its reference."""
    for a, b in zip(mine, theirs, strict=True):
        scale = float(b.abs().max()) or 1.0
        torch.testing.assert_close(a, b, rtol=0, atol=rtol * scale)


def loss_weights(mask, t, seed=3, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(mask.shape[0], t, generator=g, dtype=dtype) * mask[:, -t:].to(dtype)


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize(
    ("prompt_lengths", "response_lengths", "group"),
    [
        ([6, 3], [5, 2, 4], 3),  # two prompts, one left-padded, uneven responses
        ([1, 7, 4], [3, 3], 2),  # a one-token prompt
        ([5], [1, 6, 2, 5], 4),  # one group
    ],
)
def test_packed_equals_padded(
    tiny_model, random_llama, arch, attn, prompt_lengths, response_lengths, group
):
    # sdpa in float64; the models' RMSNorm computes in float32 though, so values agree
    # to float32 rounding and gradients to ~1e-7 of their scale (a layout error moves
    # them by 1e-2). eager in float32: Hugging Face's own float64 eager path turns
    # left padding into NaN.
    dtype, tol = (F64, 1e-6) if attn == "sdpa" else (torch.float32, 1e-4)
    model = (tiny_model[0] if arch == "qwen2" else random_llama()).to(dtype)
    model.set_attn_implementation(attn)
    ids, mask, t = grouped_batch(model.config.vocab_size, prompt_lengths, response_lengths, group)
    on = mask[:, -t:].bool()
    weights = loss_weights(mask, t, dtype=dtype)
    (lp_a, en_a, g_a), (lp_b, en_b, g_b) = both_layouts(model, ids, mask, t, weights)
    torch.testing.assert_close(lp_b[on], lp_a[on], rtol=0, atol=tol)
    torch.testing.assert_close(en_b[on], en_a[on], rtol=0, atol=tol)
    assert (lp_b[~on] == 0).all() and (en_b[~on] == 0).all()
    assert_grads_close(g_b, g_a, rtol=10 * tol)


def _responses_see_each_other(monkeypatch) -> None:
    """A wrong packed mask: plain causal, so each response also attends to those before it."""
    causal = torch.ones(64, 64, dtype=torch.bool).tril()
    monkeypatch.setattr(
        seq_module,
        "packed_attention_mask",
        lambda m, a: causal[: a.shape[1], : a.shape[1]][None, None].expand(a.shape[0], 1, -1, -1),
    )


def test_a_wrong_layout_would_be_caught(tiny_model, monkeypatch):
    """The tolerances above are tight: letting responses see each other fails them."""
    model = tiny_model[0].double()
    ids, mask, t = grouped_batch(model.config.vocab_size, [6, 3], [5, 2, 4], 3)
    _responses_see_each_other(monkeypatch)
    seq_module._VERIFIED[model] = True  # skip the one-time check, to see the wrong numbers
    on = mask[:, -t:].bool()
    padded = sequence_token_stats(model, ids, mask, t).logp
    packed = sequence_token_stats(model, ids, mask, t, share_prompt=True).logp
    assert (padded - packed)[on].abs().max() > 1e-3


def test_gradient_checkpointing(tiny_model):
    model = tiny_model[0].double()
    model.gradient_checkpointing_enable()
    model.train()
    ids, mask, t = grouped_batch(model.config.vocab_size, [6, 2], [4, 1, 3], 3)
    (lp_a, _, g_a), (lp_b, _, g_b) = both_layouts(model, ids, mask, t, loss_weights(mask, t))
    on = mask[:, -t:].bool()
    torch.testing.assert_close(lp_b[on], lp_a[on], rtol=0, atol=1e-6)
    assert_grads_close(g_b, g_a, rtol=1e-5)


def test_bf16_autocast(random_llama):
    model = random_llama(seed=1)
    ids, mask, t = grouped_batch(model.config.vocab_size, [6, 3], [5, 2, 4], 3, seed=2)
    on = mask[:, -t:].bool()
    weights = loss_weights(mask, t, dtype=torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        (lp_a, _, g_a), (lp_b, _, g_b) = both_layouts(model, ids, mask, t, weights)
    # bf16 matrix products round each sum to 8 bits of mantissa: the layouts agree to
    # that precision (the float32 padded layout is the yardstick of the scale).
    full = both_layouts(model, ids, mask, t, weights)[0]
    noise = float((lp_a - full[0])[on].abs().max())
    assert float((lp_b - lp_a)[on].abs().max()) <= max(4 * noise, 1e-2)
    assert_grads_close(g_b, g_a, rtol=0.1)


def test_micro_batches_that_split_groups(tiny_model):
    """Each micro-batch computes its own prompts: rows of a group in two micro-batches."""
    model = tiny_model[0].double()
    ids, mask, t = grouped_batch(model.config.vocab_size, [6, 3], [5, 2, 4, 3], 4)
    weights = loss_weights(mask, t)
    params = list(model.parameters())

    def grads(share, parts):
        seq_module._VERIFIED.clear()
        loss = 0
        for rows in parts:
            stats = sequence_token_stats(model, ids[rows], mask[rows], t, share_prompt=share)
            loss = loss + (weights[rows] * stats.logp).sum()
        return torch.autograd.grad(loss, params)

    whole = grads(False, [torch.arange(8)])
    split = grads(True, [torch.tensor([0, 1, 4]), torch.tensor([2, 3, 5, 6, 7])])
    assert seq_module._VERIFIED[model]
    assert_grads_close(split, whole, rtol=1e-5)


# ------------------------------------------------------------------ fallback


def test_logit_transforming_model_falls_back_with_one_warning(tiny_model):
    model = tiny_model[0].double()
    model.config.final_logit_softcapping = 30.0
    seq_module._VERIFIED.clear()
    ids, mask, t = grouped_batch(model.config.vocab_size, [4], [3, 2], 2)
    padded = sequence_token_stats(model, ids, mask, t)
    with pytest.warns(UserWarning, match="share_prompt.*logits are not lm_head"):
        shared = sequence_token_stats(model, ids, mask, t, share_prompt=True)
    torch.testing.assert_close(shared.logp, padded.logp, rtol=0, atol=0)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sequence_token_stats(model, ids, mask, t, share_prompt=True)  # no second warning


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"layer_types": ["sliding_attention", "full_attention"]}, "full attention"),
        ({"use_sliding_window": True, "sliding_window": 4, "layer_types": None}, "sliding"),
    ],
)
def test_sliding_windows_fall_back(tiny_model, change, match):
    model = tiny_model[0]
    for key, value in change.items():
        setattr(model.config, key, value)
    assert match in seq_module.share_prompt_blocker(model)


def test_unsupported_attention_falls_back(tiny_model):
    model = tiny_model[0]
    model.config._attn_implementation = "flash_attention_2"
    assert "flash_attention_2" in seq_module.share_prompt_blocker(model)


def test_the_one_time_check_catches_a_layout_the_model_does_not_follow(tiny_model, monkeypatch):
    model = tiny_model[0]
    ids, mask, t = grouped_batch(model.config.vocab_size, [6, 3], [5, 2, 4], 3)
    _responses_see_each_other(monkeypatch)
    seq_module._VERIFIED.clear()
    with torch.no_grad():
        padded = sequence_token_stats(model, ids, mask, t)
        with pytest.warns(UserWarning, match="log-probs differ"):
            shared = sequence_token_stats(model, ids, mask, t, share_prompt=True)
    torch.testing.assert_close(shared.logp, padded.logp, rtol=0, atol=0)
