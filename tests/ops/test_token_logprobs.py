"""Chunked log-probs/entropy against a naive full-logits reference."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr.ops import TokenStats, logprobs_entropy_from_logits, token_logprobs_entropy

F64 = torch.float64


def naive_from_logits(
    logits: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0
) -> TokenStats:
    """Reference: full log_softmax over [..., V] in the input dtype."""
    logp_all = torch.log_softmax(logits / temperature, dim=-1)
    logp = logp_all.gather(-1, labels[..., None]).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    return TokenStats(logp, entropy)


def naive(hidden, weight, labels, bias=None, temperature=1.0) -> TokenStats:
    logits = hidden @ weight.T if bias is None else hidden @ weight.T + bias
    return naive_from_logits(logits, labels, temperature)


def make(n: int, h: int, v: int, dtype=F64, seed: int = 0, scale: float = 1.0):
    """Random leaf tensors (hidden [n, h], weight [v, h], bias [v]) and labels [n]."""
    g = torch.Generator().manual_seed(seed)
    hidden = (scale * torch.randn(n, h, generator=g, dtype=F64)).to(dtype).requires_grad_()
    weight = torch.randn(v, h, generator=g, dtype=F64).to(dtype).requires_grad_()
    bias = torch.randn(v, generator=g, dtype=F64).to(dtype).requires_grad_()
    labels = torch.randint(0, v, (n,), generator=g)
    return hidden, weight, bias, labels


def grads(stats: TokenStats, tensors, seed: int = 1) -> list[torch.Tensor]:
    """Gradients of a random linear combination of logp and entropy."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(stats.logp.shape, generator=g, dtype=F64).to(stats.logp.dtype)
    c = torch.randn(stats.logp.shape, generator=g, dtype=F64).to(stats.logp.dtype)
    loss = (a * stats.logp).sum() + (c * stats.entropy).sum()
    return list(torch.autograd.grad(loss, tensors))


@pytest.mark.parametrize("chunk_size", [1, 3, 4, 7, 100])
@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_values_and_grads_match_naive_float64(chunk_size, temperature):
    hidden, weight, bias, labels = make(7, 5, 13)
    got = token_logprobs_entropy(
        hidden, weight, labels, bias=bias, temperature=temperature, chunk_size=chunk_size
    )
    ref = naive(hidden, weight, labels, bias, temperature)
    assert got.logp.dtype == F64 and got.logp.shape == (7,)
    torch.testing.assert_close(got.logp, ref.logp, rtol=0, atol=1e-12)
    torch.testing.assert_close(got.entropy, ref.entropy, rtol=0, atol=1e-12)
    for mine, theirs in zip(
        grads(got, (hidden, weight, bias)), grads(ref, (hidden, weight, bias)), strict=True
    ):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-10)


def test_hand_worked_uniform_logits():
    """Zero weight: every token has prob 1/V, entropy log V, and the gradients are known."""
    v, h = 4, 2
    hidden = torch.tensor([[1.0, 2.0]], dtype=F64, requires_grad=True)
    weight = torch.zeros(v, h, dtype=F64, requires_grad=True)
    got = token_logprobs_entropy(hidden, weight, torch.tensor([2]))
    assert got.logp.item() == pytest.approx(-math.log(4), abs=1e-15)
    assert got.entropy.item() == pytest.approx(math.log(4), abs=1e-15)
    got.logp.sum().backward()
    # d logp / d logits = onehot - 1/4; d logits / d W[j] = hidden.
    expected = torch.tensor([-0.25, -0.25, 0.75, -0.25], dtype=F64)[:, None] * hidden.detach()
    torch.testing.assert_close(weight.grad, expected, rtol=0, atol=1e-15)
    # At uniform p, dH/dz = -p (log p + H) = 0.
    weight.grad = None
    token_logprobs_entropy(hidden, weight, torch.tensor([2])).entropy.sum().backward()
    torch.testing.assert_close(weight.grad, torch.zeros(v, h, dtype=F64), rtol=0, atol=1e-15)


def test_gradcheck_entropy_only():
    hidden, weight, bias, labels = make(5, 3, 6, seed=3)

    def entropy(h, w, b):
        return token_logprobs_entropy(h, w, labels, bias=b, temperature=0.7, chunk_size=2).entropy

    assert torch.autograd.gradcheck(entropy, (hidden, weight, bias))


def test_gradcheck_both_outputs():
    hidden, weight, bias, labels = make(5, 3, 6, seed=4)

    def both(h, w, b):
        return tuple(token_logprobs_entropy(h, w, labels, bias=b, chunk_size=3))

    assert torch.autograd.gradcheck(both, (hidden, weight, bias))


@pytest.mark.parametrize("use", ["logp", "entropy"])
def test_one_output_used(use):
    """Backward when only one output reaches the loss (the other's grad is None)."""
    hidden, weight, _, labels = make(6, 4, 9, seed=5)
    got = getattr(token_logprobs_entropy(hidden, weight, labels, chunk_size=4), use)
    ref = getattr(naive(hidden, weight, labels), use)
    mine = torch.autograd.grad(got.sum(), (hidden, weight))
    theirs = torch.autograd.grad(ref.sum(), (hidden, weight))
    for a, b in zip(mine, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_compute_entropy_false():
    hidden, weight, _, labels = make(6, 4, 9, seed=6)
    got = token_logprobs_entropy(hidden, weight, labels, compute_entropy=False, chunk_size=5)
    assert got.entropy is None
    ref = naive(hidden, weight, labels)
    torch.testing.assert_close(got.logp, ref.logp, rtol=0, atol=1e-12)
    mine = torch.autograd.grad(got.logp.sum(), (hidden, weight))
    theirs = torch.autograd.grad(ref.logp.sum(), (hidden, weight))
    for a, b in zip(mine, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_float32_inputs_match_float64_reference():
    hidden, weight, bias, labels = make(9, 8, 50, dtype=torch.float32, seed=7)
    got = token_logprobs_entropy(hidden, weight, labels, bias=bias, chunk_size=4)
    assert got.logp.dtype == torch.float32
    ref = naive(hidden.double(), weight.double(), labels, bias.double())
    torch.testing.assert_close(got.logp.double(), ref.logp, rtol=0, atol=1e-5)
    torch.testing.assert_close(got.entropy.double(), ref.entropy, rtol=0, atol=1e-5)


def test_bf16_inputs_compute_in_float32_and_return_bf16_grads():
    hidden, weight, bias, labels = make(10, 8, 40, dtype=torch.bfloat16, seed=8)
    got = token_logprobs_entropy(hidden, weight, labels, bias=bias, chunk_size=3)
    assert got.logp.dtype == torch.float32 and got.entropy.dtype == torch.float32
    # Reference on the same bf16 values, upcast: float32 arithmetic stays close to it.
    h64, w64, b64 = (t.detach().double().requires_grad_() for t in (hidden, weight, bias))
    ref = naive(h64, w64, labels, b64)
    torch.testing.assert_close(got.logp.double(), ref.logp, rtol=0, atol=2e-5)
    torch.testing.assert_close(got.entropy.double(), ref.entropy, rtol=0, atol=2e-5)
    mine = grads(got, (hidden, weight, bias))
    theirs = grads(TokenStats(ref.logp.float(), ref.entropy.float()), (h64, w64, b64))
    for a, b in zip(mine, theirs, strict=True):
        assert a.dtype == torch.bfloat16
        torch.testing.assert_close(a.double(), b, rtol=1e-2, atol=1e-2)


def test_autocast_is_switched_off_inside():
    hidden, weight, _, labels = make(6, 8, 30, dtype=torch.float32, seed=9)
    plain = token_logprobs_entropy(hidden, weight, labels)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        under = token_logprobs_entropy(hidden, weight, labels)
    assert under.logp.dtype == torch.float32
    torch.testing.assert_close(under.logp, plain.logp, rtol=0, atol=0)
    torch.testing.assert_close(under.entropy, plain.entropy, rtol=0, atol=0)


def test_labels_at_vocab_edges():
    hidden, weight, bias, _ = make(4, 3, 7, seed=10)
    labels = torch.tensor([0, 6, 6, 0])
    got = token_logprobs_entropy(hidden, weight, labels, bias=bias, chunk_size=3)
    ref = naive(hidden, weight, labels, bias)
    torch.testing.assert_close(got.logp, ref.logp, rtol=0, atol=1e-12)
    for a, b in zip(
        grads(got, (hidden, weight, bias)), grads(ref, (hidden, weight, bias)), strict=True
    ):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


def test_large_logits_are_stable():
    hidden, weight, _, labels = make(5, 4, 11, seed=11, scale=200.0)
    got = token_logprobs_entropy(hidden, weight, labels, chunk_size=2)
    ref = naive(hidden, weight, labels)
    assert torch.isfinite(got.logp).all() and torch.isfinite(got.entropy).all()
    torch.testing.assert_close(got.logp, ref.logp, rtol=1e-12, atol=1e-9)
    torch.testing.assert_close(got.entropy, ref.entropy, rtol=0, atol=1e-9)


def test_label_range_check_reads_the_host_once(count_syncs):
    hidden, weight, _, labels = make(6, 4, 5)
    with count_syncs() as calls:
        token_logprobs_entropy(hidden, weight, labels)
    assert dict(calls) == {"tolist": 1}  # the smallest and largest label, in one copy


def test_empty_batch():
    hidden, weight, _, _ = make(0, 4, 5)
    got = token_logprobs_entropy(hidden, weight, torch.zeros(0, dtype=torch.long))
    assert got.logp.shape == (0,) and got.entropy.shape == (0,)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"labels": torch.tensor([0, 5, 1])}, "labels must lie in"),
        ({"labels": torch.tensor([0, -1, 1])}, "labels must lie in"),
        ({"labels": torch.tensor([0, 1])}, "labels must have shape"),
        ({"labels": torch.tensor([0.0, 1.0, 1.0])}, "int64"),
        ({"temperature": 0.0}, "temperature"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"bias": torch.zeros(4)}, "bias"),
        ({"weight": torch.zeros(5, 3)}, "hidden must be"),
    ],
)
def test_bad_input_raises(kwargs, match):
    args = {
        "hidden": torch.zeros(3, 2),
        "weight": torch.zeros(5, 2),
        "labels": torch.tensor([0, 1, 4]),
    }
    args.update(kwargs)
    hidden, weight, labels = args.pop("hidden"), args.pop("weight"), args.pop("labels")
    with pytest.raises(ValueError, match=match):
        token_logprobs_entropy(hidden, weight, labels, **args)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 12),
    v=st.integers(2, 20),
    chunk_size=st.integers(1, 15),
    temperature=st.floats(0.3, 2.0),
    seed=st.integers(0, 1000),
)
def test_property_matches_naive(n, v, chunk_size, temperature, seed):
    hidden, weight, bias, labels = make(n, 3, v, seed=seed)
    got = token_logprobs_entropy(
        hidden, weight, labels, bias=bias, temperature=temperature, chunk_size=chunk_size
    )
    ref = naive(hidden, weight, labels, bias, temperature)
    torch.testing.assert_close(got.logp, ref.logp, rtol=0, atol=1e-12)
    torch.testing.assert_close(got.entropy, ref.entropy, rtol=0, atol=1e-12)
    for a, b in zip(
        grads(got, (hidden, weight, bias)), grads(ref, (hidden, weight, bias)), strict=True
    ):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


# ---- memory: what autograd keeps between forward and backward ----------------------


def saved_numels(fn) -> list[int]:
    """Sizes of every tensor autograd saves while ``fn()`` runs."""
    sizes: list[int] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        sizes.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sizes


def test_no_n_by_v_tensor_is_saved():
    n, h, v = 64, 8, 500
    hidden, weight, bias, labels = make(n, h, v, dtype=torch.float32, seed=12)
    chunked = saved_numels(
        lambda: token_logprobs_entropy(hidden, weight, labels, bias=bias, chunk_size=16)
    )
    reference = saved_numels(lambda: naive(hidden, weight, labels, bias))
    assert max(reference) >= n * v  # the hook does see a full-logits copy when one is saved
    assert max(chunked) == v * h  # the largest saved tensor is the weight itself
    assert sum(chunked) <= n * h + v * h + v + 3 * n


# ---- the plain-logits variant -------------------------------------------------------


@pytest.mark.parametrize("chunk_size", [1, 4, 6, 50])
def test_from_logits_matches_naive(chunk_size):
    g = torch.Generator().manual_seed(13)
    logits = torch.randn(2, 3, 17, generator=g, dtype=F64).requires_grad_()
    labels = torch.tensor([[0, 16, 3], [16, 0, 9]])
    got = logprobs_entropy_from_logits(logits, labels, chunk_size, temperature=0.8)
    ref = naive_from_logits(logits, labels, 0.8)
    assert got.logp.shape == (2, 3)
    torch.testing.assert_close(got.logp, ref.logp, rtol=0, atol=1e-12)
    torch.testing.assert_close(got.entropy, ref.entropy, rtol=0, atol=1e-12)
    mine = grads(got, (logits,))
    theirs = grads(ref, (logits,))
    torch.testing.assert_close(mine[0], theirs[0], rtol=0, atol=1e-12)


def test_from_logits_gradcheck():
    g = torch.Generator().manual_seed(14)
    logits = torch.randn(5, 6, generator=g, dtype=F64).requires_grad_()
    labels = torch.tensor([0, 5, 2, 2, 1])

    def both(z):
        return tuple(logprobs_entropy_from_logits(z, labels, 2, temperature=1.5))

    assert torch.autograd.gradcheck(both, (logits,))


def test_from_logits_bf16_and_saved_tensors():
    g = torch.Generator().manual_seed(15)
    logits = torch.randn(32, 100, generator=g).to(torch.bfloat16).requires_grad_()
    labels = torch.randint(0, 100, (32,), generator=g)
    sizes: list[int] = []
    with torch.autograd.graph.saved_tensors_hooks(
        lambda t: sizes.append(t.numel()) or t, lambda t: t
    ):
        got = logprobs_entropy_from_logits(logits, labels, 8)
    ref = naive_from_logits(logits.detach().double(), labels)
    torch.testing.assert_close(got.logp.double(), ref.logp, rtol=0, atol=1e-5)
    (grad,) = torch.autograd.grad(got.logp.sum() + got.entropy.sum(), (logits,))
    assert grad.dtype == torch.bfloat16
    # Saved: the bf16 logits themselves (no float32 copy), labels and two [N] statistics.
    assert sorted(sizes) == [32, 32, 32, 3200]


def test_from_logits_bad_labels_shape():
    with pytest.raises(ValueError, match="labels must have shape"):
        logprobs_entropy_from_logits(torch.zeros(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))


def test_one_chunk_keeps_its_logits_and_a_second_backward_recomputes_them():
    """With every row in one chunk, backward reuses the forward's logits (used once)."""
    hidden, weight, bias, labels = make(6, 4, 11, seed=13)
    tensors = [hidden, weight, bias]
    one = token_logprobs_entropy(hidden, weight, labels, bias=bias, temperature=0.8, chunk_size=6)
    loss = (one.logp * torch.arange(6.0, dtype=F64)).sum() + one.entropy.sum()
    first = torch.autograd.grad(loss, tensors, retain_graph=True)
    second = torch.autograd.grad(loss, tensors)  # the kept buffer now holds a gradient
    many = token_logprobs_entropy(hidden, weight, labels, bias=bias, temperature=0.8, chunk_size=2)
    loss = (many.logp * torch.arange(6.0, dtype=F64)).sum() + many.entropy.sum()
    reference = torch.autograd.grad(loss, tensors)
    for a, b, c in zip(first, second, reference, strict=True):
        torch.testing.assert_close(a, c, rtol=0, atol=1e-12)
        torch.testing.assert_close(b, c, rtol=0, atol=1e-12)
