"""Small builders shared by the objective tests (float64 throughout)."""

from __future__ import annotations

import math

import torch

from rlvr.objectives import policy_loss

OLD = -1.0  # old log-prob of every token; logp = OLD + log(r)


def inputs(ratios, mask=None, dtype=torch.float64):
    """``(logp [B, T] leaf with grad, old_logp, mask)`` realising the given ratios."""
    ratios = torch.tensor(ratios, dtype=dtype)
    mask = torch.ones_like(ratios) if mask is None else torch.tensor(mask, dtype=dtype)
    old = torch.full_like(ratios, OLD)
    logp = (old + torch.log(ratios)).detach().requires_grad_()
    return logp, old, mask


def run(name, ratios, adv, mask=None, **kwargs):
    """``(loss, metrics, grad of loss wrt logp)`` for objective ``name`` (inputs validated)."""
    logp, old, mask = inputs(ratios, mask)
    adv = torch.tensor(adv, dtype=torch.float64)
    kwargs.setdefault("validate", True)
    loss, metrics = policy_loss(name, logp=logp, old_logp=old, advantages=adv, mask=mask, **kwargs)
    loss.backward()
    return loss.detach(), metrics, logp.grad


def per_token_grad(name, ratios, adv, mask=None, **kwargs):
    """Gradient of the *summed* per-token loss (token-mean over 1 token): ``dl_t/dlogp_t``."""
    return run(name, ratios, adv, mask, loss_agg="token-mean", num_tokens=1, **kwargs)[2]


def close(actual, expected, tol=1e-9):
    """Assert a tensor (or float) matches ``expected`` elementwise within ``tol``."""
    expected = torch.as_tensor(expected, dtype=torch.float64)
    actual = torch.as_tensor(actual, dtype=torch.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert torch.allclose(actual, expected, rtol=0, atol=tol), (actual, expected)


def log(x):
    return math.log(x)
