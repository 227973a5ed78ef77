"""AReaL's decoupled objective: the trust region around a proximal policy, the off-policy
correction to the behaviour policy.

Fu et al. 2025, "AReaL: A Large-Scale Asynchronous Reinforcement Learning System for
Language Reasoning" (arXiv:2505.24298), decoupled PPO objective::

    J(theta) = E_{a ~ pi_behav} [ sum_t  pi_prox(a_t|s_t) / pi_behav(a_t|s_t)
                                  * min(u_t A_t, clip(u_t, 1 - eps, 1 + eps) A_t) ],
    u_t = pi_theta(a_t|s_t) / pi_prox(a_t|s_t).

``pi_behav`` generated the tokens (under ``rollout.staleness = k``, weights up to k steps
old); ``pi_prox`` is the policy at the start of the step being trained (the trainer's
weights before this step's first optimiser step). The standard, coupled objective is the
case ``pi_prox = pi_behav``: the clip then sees the whole staleness.

How it is applied: the objective's ratio is taken against ``pi_prox`` (``LossInputs.old_logp``)
and the detached weight ``w_t = pi_prox / pi_behav`` multiplies its per-token loss
(``LossInputs.token_weights``) before aggregation; tokens keep their place in every
denominator.

Departures from the paper:

1. The bracket is any registered objective (ABC-GRPO's bounds, ETR's band, ...), not only
   PPO's clip; with ``grpo`` it is the paper's objective exactly.
2. ``cap``: a token whose ``w_t`` exceeds it gets weight 0 (it leaves the loss, not the
   denominator), as AReaL's code does with ``behav_imp_weight_cap``; the paper has no cap.
3. The regularisers (KL to the reference, SFT on positives, entropy bonus) are not weighted.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import torch

from rlvr.objectives.inputs import check_mask, check_tensor, check_weights
from rlvr.objectives.loss import LossInputs


class Decoupled(NamedTuple):
    """The loss inputs of the decoupled objective and its metrics."""

    inputs: LossInputs
    """``old_logp`` the proximal policy's; ``token_weights`` times ``pi_prox / pi_behav``."""
    metrics: dict[str, torch.Tensor]
    """``decoupled/weight_mean``, ``decoupled/weight_max``, ``decoupled/capped_frac`` (detached)."""


def decoupled_inputs(
    inputs: LossInputs,
    behaviour_logp: torch.Tensor,
    cap: float | None = None,
    validate: bool = False,
) -> Decoupled:
    """``inputs`` (whose ``old_logp`` [B, T] is the proximal policy's) with each token's loss
    weighted by ``pi_prox / pi_behav`` from ``behaviour_logp`` [B, T], 0 above ``cap``.

    ``validate``: also check the values (finite on response tokens; host-device syncs)."""
    if cap is not None and not cap > 1:
        raise ValueError(f"cap must be > 1 or None, got {cap}")
    mask = check_mask(inputs.mask, validate)
    check_tensor("behaviour_logp", behaviour_logp, mask.shape, mask, validate)
    check_tensor("old_logp", inputs.old_logp, mask.shape, mask, validate)
    with torch.no_grad():
        dtype = torch.promote_types(inputs.old_logp.dtype, torch.float32)
        prox = inputs.old_logp.detach().to(dtype)
        log_w = torch.where(mask, prox - behaviour_logp.to(prox.device, dtype), 0.0)
        weight = torch.where(mask, log_w.exp(), 0.0)  # [B, T]
        kept = mask if cap is None else mask & (weight <= cap)
        weight = torch.where(kept, weight, 0.0)
        tokens = mask.sum().clamp_min(1)
        metrics = {
            "decoupled/weight_mean": weight.sum() / tokens,
            "decoupled/weight_max": weight.max(),
            "decoupled/capped_frac": (mask & ~kept).sum() / tokens,
        }
        if inputs.token_weights is not None:
            weight = weight * check_weights(inputs.token_weights, mask, validate).to(dtype)
    return Decoupled(dataclasses.replace(inputs, token_weights=weight), metrics)
