"""The loss makes no host-device synchronisation: one ``policy_loss`` call plus its backward
reads no tensor value on the host, for every objective, with every optional input; the
opt-in ``validate=True`` checks change nothing in the numbers."""

from __future__ import annotations

import pytest
import torch

from rlvr.objectives import OBJECTIVES, group_stats_for, policy_loss

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
B, T, G = 4, 5, 2


def make_inputs(device, full):
    """Keyword inputs of ``policy_loss`` on ``device``: the plain ones, or (``full``) with
    every optional input, step counts as device tensors and per-token advantages."""
    gen = torch.Generator().manual_seed(0)
    logp = torch.randn(B, T, generator=gen, dtype=torch.float64) * 0.2 - 1.0
    mask = torch.ones(B, T)
    mask[0, 3:] = 0
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0])
    adv = torch.tensor([0.5, -0.5, 1.0, -1.0], dtype=torch.float64)
    kwargs = {
        "logp": logp.to(device).requires_grad_(),
        "old_logp": (logp + torch.randn(B, T, generator=gen, dtype=torch.float64) * 0.2).to(device),
        "advantages": adv.to(device),
        "mask": mask.to(device),
        "rewards": rewards.to(device),
        "group_size": G,
    }
    if full:
        entropy = torch.rand(B, T, generator=gen, dtype=torch.float64).to(device)
        kwargs |= {
            "advantages": (adv[:, None] * torch.linspace(0.5, 1.5, T, dtype=torch.float64)).to(
                device
            ),
            "ref_logp": (logp - 0.1).to(device),
            "entropy": entropy.requires_grad_(),
            "token_weights": torch.rand(B, T, generator=gen, dtype=torch.float64).to(device),
            "kl_coef": 0.05,
            "sft_coef": 0.1,
            "entropy_coef": 0.01,
            "num_tokens": torch.tensor(40.0, device=device),
            "num_seqs": torch.tensor(8.0, device=device),
            "num_sft_tokens": torch.tensor(25.0, device=device),
            "max_len": T + 2,
        }
    return kwargs


def loss_and_grads(name, kwargs, **extra):
    loss, metrics = policy_loss(name, **kwargs, **extra)
    loss.backward()
    grads = [kwargs[k].grad.clone() for k in ("logp", "entropy") if k in kwargs]
    for key in ("logp", "entropy"):
        if key in kwargs:
            kwargs[key].grad = None
    return loss.detach(), metrics, grads


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("full", [False, True], ids=["plain", "every_input"])
@pytest.mark.parametrize("name", list(OBJECTIVES))
def test_no_host_sync_in_policy_loss_and_backward(name, full, device, count_syncs):
    kwargs = make_inputs(device, full)
    debug = device == "cuda"
    if debug:
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
    try:
        with count_syncs() as calls:
            loss, metrics = policy_loss(name, **kwargs)
            loss.backward()
    finally:
        if debug:
            torch.cuda.set_sync_debug_mode("default")
    assert dict(calls) == {}
    assert all(isinstance(v, torch.Tensor) and v.dim() == 0 for v in metrics.values())


@pytest.mark.parametrize("full", [False, True], ids=["plain", "every_input"])
@pytest.mark.parametrize("name", list(OBJECTIVES))
def test_validate_checks_without_changing_a_bit(name, full, count_syncs):
    checked = loss_and_grads(name, make_inputs("cpu", full), validate=True)
    fast = loss_and_grads(name, make_inputs("cpu", full))
    assert torch.equal(checked[0], fast[0])
    assert checked[1].keys() == fast[1].keys()
    assert all(torch.equal(checked[1][k], fast[1][k]) for k in fast[1])
    assert all(torch.equal(a, b) for a, b in zip(checked[2], fast[2], strict=True))
    with count_syncs() as calls:
        policy_loss(name, **make_inputs("cpu", full), validate=True)
    assert sum(calls.values()) > 0  # the checks read values: what validate=False saves


def test_precomputed_group_stats_make_no_sync_either(count_syncs):
    kwargs = make_inputs("cpu", full=False)
    stats = group_stats_for("apmpo", kwargs.pop("rewards"), kwargs.pop("group_size"))
    with count_syncs() as calls:
        loss, _ = policy_loss("apmpo", **kwargs, group_stats=stats)
        loss.backward()
    assert dict(calls) == {}
