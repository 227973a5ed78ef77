"""The stable entry point: :func:`policy_loss`."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from rlvr.advantages import GroupStats
from rlvr.objectives.aggregation import LOSS_AGG_MODES, Count, aggregate
from rlvr.objectives.base import PolicyBatch, masked_mean
from rlvr.objectives.inputs import build_batch, check_rewards, check_tensor, resolve_stats
from rlvr.objectives.metrics import clip_metrics, ratio_metrics
from rlvr.objectives.registry import objective_spec, resolve_config
from rlvr.objectives.regularizers import RegularizerConfig, kl_penalty, sft_nll


def policy_loss(
    name: str,
    *,
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    rewards: torch.Tensor | None = None,
    group_size: int | None = None,
    group_stats: GroupStats | None = None,
    ref_logp: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    loss_agg: str | None = None,
    num_tokens: Count | None = None,
    num_seqs: Count | None = None,
    max_len: int | None = None,
    num_sft_tokens: Count | None = None,
    config: Any = None,
    kl_coef: float = 0.0,
    kl_estimator: str = "k3",
    sft_coef: float = 0.0,
    sft_threshold: float = 1.0,
    entropy_coef: float = 0.0,
    **hparams: Any,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``(loss, metrics)`` of objective ``name`` on one (micro-)batch.

    Tensors (``B`` sequences, ``T`` positions; ``mask`` is 1 on response tokens):
    ``logp``/``old_logp``/``ref_logp``/``entropy`` ``[B, T]`` float (``logp`` and, when
    ``entropy_coef > 0``, ``entropy`` carry the gradient; any float dtype, ratios are
    computed in float32 or wider), ``advantages`` ``[B]`` or ``[B, T]``, ``rewards [B]``.
    ``hparams`` are the objective's hyperparameters named as in ``ALGORITHMS.md``
    (``eps1=0.3``...), or pass a ready ``config`` (``make_config(name, ...)``).

    Returns a scalar ``loss`` with gradient (the objective aggregated by ``loss_agg``,
    default the objective's own, plus ``kl_coef*KL + sft_coef*NLL - entropy_coef*H``) and
    ``metrics``: name -> detached 0-dim tensor (names in ``docs/objectives.md``).

    Gradient accumulation: pass the WHOLE optimizer step's ``num_tokens``, ``num_seqs``,
    ``num_sft_tokens`` (:func:`~rlvr.objectives.aggregation.step_counts` over the step's
    mask and rewards) and a constant ``max_len`` (e.g. ``max_new_tokens``, for
    ``seq-mean-token-sum-norm``); the losses of the micro-batches then sum to the
    full-batch loss and gradient. Left None, they are this call's own counts.

    Group statistics (``etr``, ``pmpo``, ``apmpo``): compute them ONCE over the whole
    rollout batch, ``stats = group_stats_for(name, rewards, group_size, **hparams)``,
    and pass ``group_stats=stats.rows(index)`` with each micro-batch's row ``index``
    (a slice or index tensor), so no statistic comes from a partial group. Without
    ``group_stats`` they are computed from this call's ``rewards``/``group_size``, which
    is right only when the call holds whole groups (and, for ``stats_scope="batch"``,
    the whole batch). Stats computed with other options than the objective's
    (``pass_threshold``, ``reward_range``, ``stats_scope``) are rejected.

    Raises ValueError naming the argument for: unknown objective, hyperparameter or
    mode; shape mismatch; NaN/inf on response tokens; an all-zero mask; rewards or
    group statistics missing where needed; ``group_size`` not dividing ``B``.
    """
    spec = objective_spec(name)
    cfg = resolve_config(spec, config, hparams)
    reg = RegularizerConfig(kl_coef, kl_estimator, sft_coef, sft_threshold, entropy_coef)
    mode = spec.loss_agg if loss_agg is None else loss_agg
    if mode not in LOSS_AGG_MODES:
        raise ValueError(f"unknown loss_agg {mode!r}; valid: {', '.join(LOSS_AGG_MODES)}")
    batch = build_batch(logp, old_logp, advantages, mask)
    if rewards is not None:
        rewards = check_rewards(rewards, batch.mask.shape[0])
    stats = resolve_stats(spec, cfg, group_stats, rewards, group_size, batch.mask.shape[0])
    if stats is not None:
        batch = dataclasses.replace(batch, stats=stats.to(batch.mask.device))
    out = spec.loss_fn(batch, cfg)
    counts = {"num_tokens": num_tokens, "num_seqs": num_seqs, "max_len": max_len}
    loss = aggregate(out.per_token_loss, batch.mask, mode, **counts)
    with torch.no_grad():
        metrics = {**ratio_metrics(batch), **clip_metrics(out.clip, batch.advantages, batch.mask)}
        metrics.update(out.metrics)
    extra, reg_metrics = regularization(
        reg, batch, mode, counts, ref_logp, entropy, rewards, num_sft_tokens
    )
    metrics.update(reg_metrics)
    return (loss if extra is None else loss + extra), metrics


def regularization(
    reg: RegularizerConfig,
    batch: PolicyBatch,
    mode: str,
    counts: dict[str, Any],
    ref_logp: torch.Tensor | None,
    entropy: torch.Tensor | None,
    rewards: torch.Tensor | None,
    num_sft_tokens: Count | None,
) -> tuple[torch.Tensor | None, dict[str, torch.Tensor]]:
    """``(kl_coef*KL + sft_coef*NLL - entropy_coef*H or None, metrics)``."""
    total, metrics, mask = None, {}, batch.mask
    if reg.kl_coef > 0 and ref_logp is None:
        raise ValueError("ref_logp is required when kl_coef > 0")
    if ref_logp is not None:
        check_tensor("ref_logp", ref_logp, mask.shape, mask)
        kl = kl_penalty(batch.logp, ref_logp.detach().to(batch.logp.dtype), mask, reg.kl_estimator)
        metrics[f"kl/ref_{reg.kl_estimator}"] = masked_mean(kl, mask)
        if reg.kl_coef > 0:
            total = _add(total, reg.kl_coef * aggregate(kl, mask, mode, **counts))
    if reg.sft_coef > 0:
        if rewards is None:
            raise ValueError(
                "rewards are required when sft_coef > 0 (to find the positive responses)"
            )
        positive = (rewards >= reg.sft_threshold).to(mask.device)
        sft, nll = sft_nll(batch.logp, mask, positive, num_sft_tokens)
        metrics["sft/loss"] = nll
        total = _add(total, reg.sft_coef * sft)
    if reg.entropy_coef > 0 and entropy is None:
        raise ValueError("entropy is required when entropy_coef > 0")
    if entropy is not None:
        check_tensor("entropy", entropy, mask.shape, mask)
        metrics["policy/entropy"] = masked_mean(entropy, mask)
        if reg.entropy_coef > 0:
            if batch.logp.requires_grad and torch.is_grad_enabled() and not entropy.requires_grad:
                raise ValueError("entropy must carry a gradient when entropy_coef > 0")
            total = _add(
                total,
                -reg.entropy_coef * aggregate(entropy.to(batch.logp.dtype), mask, mode, **counts),
            )
    return total, metrics


def _add(total: torch.Tensor | None, term: torch.Tensor) -> torch.Tensor:
    return term if total is None else total + term
