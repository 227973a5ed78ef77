import pytest
import torch

from rlvr.objectives import LOSS_AGG_MODES, aggregate, step_counts

LOSS = torch.tensor(
    [[1.0, 2.0, 3.0, 9.0], [4.0, 5.0, 7.0, 7.0], [6.0, 8.0, 8.0, 8.0]], dtype=torch.float64
)
MASK = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]])


def test_token_mean():
    assert aggregate(LOSS, MASK, "token-mean").item() == pytest.approx(
        (1 + 2 + 3 + 4 + 5 + 6) / 6, abs=1e-12
    )
    assert aggregate(LOSS, MASK, "token-mean", num_tokens=10).item() == pytest.approx(
        21 / 10, abs=1e-12
    )


def test_seq_mean_token_mean():
    expected = (6 / 3 + 9 / 2 + 6 / 1) / 3
    assert aggregate(LOSS, MASK, "seq-mean-token-mean").item() == pytest.approx(expected, abs=1e-12)
    assert aggregate(LOSS, MASK, "seq-mean-token-mean", num_seqs=6).item() == pytest.approx(
        expected / 2, abs=1e-12
    )


def test_seq_mean_token_sum():
    assert aggregate(LOSS, MASK, "seq-mean-token-sum").item() == pytest.approx(21 / 3, abs=1e-12)


def test_token_sum_has_no_denominator():
    assert aggregate(LOSS, MASK, "token-sum").item() == pytest.approx(21.0, abs=1e-12)
    # the step counts do not enter: a micro-batch's sum is its share of the step's sum
    assert aggregate(LOSS, MASK, "token-sum", num_tokens=10, num_seqs=6).item() == 21.0


def test_seq_mean_token_sum_norm_uses_max_len():
    assert aggregate(LOSS, MASK, "seq-mean-token-sum-norm").item() == pytest.approx(
        21 / (3 * 4), abs=1e-12
    )
    value = aggregate(LOSS, MASK, "seq-mean-token-sum-norm", max_len=7).item()
    assert value == pytest.approx(21 / (3 * 7), abs=1e-12)
    with pytest.raises(ValueError, match="max_len"):
        aggregate(LOSS, MASK, "seq-mean-token-sum-norm", max_len=2, validate=True)


def test_empty_rows_do_not_count_as_sequences():
    mask = MASK.clone()
    mask[2] = 0
    assert aggregate(LOSS, mask, "seq-mean-token-mean").item() == pytest.approx(
        (2 + 4.5) / 2, abs=1e-12
    )


def test_padding_nan_does_not_leak():
    loss = LOSS.clone()
    loss[0, 3] = float("nan")
    loss[1, 2] = float("inf")
    for mode in LOSS_AGG_MODES:
        assert torch.isfinite(aggregate(loss, MASK, mode))


def test_unknown_mode_and_bad_counts():
    with pytest.raises(ValueError, match="token-mean, seq-mean-token-mean"):
        aggregate(LOSS, MASK, "sum")
    with pytest.raises(ValueError, match="num_tokens"):
        aggregate(LOSS, MASK, "token-mean", num_tokens=0)
    with pytest.raises(ValueError, match="shape"):
        aggregate(LOSS[:, :3], MASK, "token-mean")


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_micro_batches_sum_to_full_batch(mode):
    torch.manual_seed(0)
    weights = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    counts = step_counts(MASK)
    full = aggregate(weights * LOSS, MASK, mode, max_len=4)
    (grad_full,) = torch.autograd.grad(full, weights)
    parts = [slice(0, 1), slice(1, 3)]
    total = sum(
        aggregate(
            (weights * LOSS)[p][:, :3],
            MASK[p][:, :3],
            mode,
            counts.num_tokens,
            counts.num_seqs,
            max_len=4,
        )
        for p in parts
    )
    (grad_parts,) = torch.autograd.grad(total, weights)
    assert total.item() == pytest.approx(full.item(), abs=1e-12)
    assert torch.allclose(grad_parts, grad_full, atol=1e-12)


def test_step_counts():
    rewards = torch.tensor([1.0, 0.0, 1.0])
    counts = step_counts(MASK, rewards, sft_threshold=1.0)
    assert counts == (6, 3, 4, None)
    assert step_counts(MASK).num_sft_tokens is None
