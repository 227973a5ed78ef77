"""The entry points: the typed core :func:`objective_loss` and the keyword wrapper :func:`policy_loss`.

A trainer builds an :class:`~rlvr.objectives.config.ObjectiveConfig` once, the step's
:class:`~rlvr.objectives.aggregation.StepCounts` once per optimiser step, and calls
``objective_loss(LossInputs(...), cfg, counts)`` per micro-batch. Outside callers (a
notebook, another trainer) use ``policy_loss(name, logp=..., ..., **hparams)``, which builds
the same three things from keywords.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from rlvr.advantages import GroupStats
from rlvr.objectives.aggregation import Count, StepCounts, aggregate
from rlvr.objectives.base import PolicyBatch, masked_mean
from rlvr.objectives.config import ObjectiveConfig
from rlvr.objectives.inputs import (
    build_batch,
    check_output,
    check_rewards,
    check_signs,
    check_stats,
    check_tensor,
    check_weights,
)
from rlvr.objectives.metrics import clip_metrics, ratio_metrics
from rlvr.objectives.registry import objective_spec, resolve_config
from rlvr.objectives.regularizers import RegularizerConfig, kl_penalty, sft_nll


@dataclass(frozen=True)
class LossInputs:
    """One (micro-)batch of ``B`` sequences and ``T`` response positions, as the loss reads it.

    Any float dtype; ratios are computed in float32 or wider. ``logp`` carries the gradient
    (and ``entropy`` when the entropy bonus is on).
    """

    logp: torch.Tensor
    """[B, T] current log-probs of the sampled tokens."""
    old_logp: torch.Tensor
    """[B, T] behaviour-policy log-probs (detached)."""
    advantages: torch.Tensor
    """[B] sequence advantages, or [B, T] per-token ones."""
    mask: torch.Tensor
    """[B, T] 1 on response tokens, 0 on padding."""
    rewards: torch.Tensor | None = None
    """[B] rewards (the SFT-on-positives term reads them)."""
    group_stats: GroupStats | None = None
    """Per-row group statistics over whole groups (``etr``, ``pmpo``, ``apmpo``)."""
    ref_logp: torch.Tensor | None = None
    """[B, T] reference-model log-probs (the KL term)."""
    entropy: torch.Tensor | None = None
    """[B, T] policy entropy at each position (metric; the bonus when ``entropy_coef > 0``)."""
    token_weights: torch.Tensor | None = None
    """[B, T] non-negative weights multiplying the objective's per-token loss before aggregation
    (e.g. truncated importance weights correcting a rollout engine's log-prob mismatch)."""


class LossOutput(NamedTuple):
    """What the loss returns."""

    loss: torch.Tensor
    """Scalar loss with gradient: objective + ``kl_coef*KL + sft_coef*NLL - entropy_coef*H``."""
    metrics: dict[str, torch.Tensor]
    """Metric name -> detached 0-dim tensor (names in ``docs/metrics.md``)."""


def objective_loss(
    batch: LossInputs,
    cfg: ObjectiveConfig,
    counts: StepCounts | None = None,
    *,
    validate: bool = False,
) -> LossOutput:
    """The loss of objective ``cfg`` on one (micro-)batch.

    ``counts`` are the whole optimiser step's denominators (:func:`step_counts` over the
    step's mask and rewards): with them the micro-batch losses sum to the full-batch loss
    and gradient. ``None``: this call's own counts. Objectives that read group statistics
    need ``batch.group_stats`` (``cfg.group_stats(rewards, G)`` over the whole rollout
    batch, then ``.rows(index)`` per micro-batch).

    No host-device synchronisation: the loss and the metrics stay tensors on the inputs'
    device. Raises ValueError naming the argument for a shape, dtype or type mismatch, or a
    missing input the configuration needs; with ``validate=True`` also for what only the
    values show (reading them is a synchronisation): NaN/inf on response tokens, a mask
    that is not 0/1 or has no response token, negative ``token_weights``, per-token
    advantages that change sign within a row (sequence-level objectives), ``counts`` below
    this call's own (``max_len``, ``num_sft_tokens``). Without it such input gives NaN or
    a wrong loss, not an error: validate a run's first step, and in tests.
    """
    spec, counts = cfg.spec, counts or StepCounts()
    policy = build_batch(batch.logp, batch.old_logp, batch.advantages, batch.mask, validate)
    size = policy.mask.shape[0]
    if batch.rewards is not None:
        check_rewards(batch.rewards, size, validate)
    if validate and spec.sequence_level:
        check_signs(policy.advantages, policy.mask, spec.name)
    if spec.needs_group_stats:
        stats = check_stats(spec.name, batch.group_stats, size)
        policy = dataclasses.replace(policy, stats=stats.to(policy.mask.device))
    out = spec.loss_fn(policy, cfg.params)
    check_output(cfg.name, out, policy.mask, validate)
    per_token = out.per_token_loss
    if batch.token_weights is not None:
        weights = check_weights(batch.token_weights, policy.mask, validate)
        per_token = per_token * weights.to(per_token.dtype)
    denominators = _denominators(counts)
    loss = aggregate(per_token, policy.mask, cfg.agg_mode, **denominators, validate=validate)
    with torch.no_grad():
        metrics = {
            **ratio_metrics(policy),
            **clip_metrics(out.clip, policy.advantages, policy.mask),
        }
        if shadowed := sorted(metrics.keys() & out.metrics.keys()):
            raise ValueError(
                f"objective {cfg.name!r} returned metric(s) {', '.join(shadowed)}, which rlvr "
                "computes from its ratio and ClipInfo: give yours a name of its own"
            )
        metrics.update(out.metrics)
    extra, reg_metrics = regularization(
        cfg.regularizers, policy, cfg.agg_mode, counts, batch, validate
    )
    metrics.update(reg_metrics)
    return LossOutput(loss if extra is None else loss + extra, metrics)


def _denominators(counts: StepCounts) -> dict[str, Any]:
    return {"num_tokens": counts.num_tokens, "num_seqs": counts.num_seqs, "max_len": counts.max_len}


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
    token_weights: torch.Tensor | None = None,
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
    validate: bool = False,
    **hparams: Any,
) -> LossOutput:
    """``(loss, metrics)`` of objective ``name`` on one (micro-)batch, from keywords.

    A thin wrapper over :func:`objective_loss`: the tensors become :class:`LossInputs`,
    ``name`` with ``hparams`` (the objective's hyperparameters named as in
    ``ALGORITHMS.md``, ``eps1=0.3``...) or a ready ``config`` (``make_config(name, ...)``)
    and the regulariser coefficients become an :class:`ObjectiveConfig`, and
    ``num_tokens``/``num_seqs``/``num_sft_tokens``/``max_len`` the :class:`StepCounts`.

    Tensors (``B`` sequences, ``T`` positions; ``mask`` is 1 on response tokens):
    ``logp``/``old_logp``/``ref_logp``/``entropy``/``token_weights`` ``[B, T]`` float,
    ``advantages`` ``[B]`` or ``[B, T]``, ``rewards [B]``.

    Gradient accumulation: pass the WHOLE optimizer step's ``num_tokens``, ``num_seqs``,
    ``num_sft_tokens`` (:func:`~rlvr.objectives.aggregation.step_counts` over the step's
    mask and rewards) and a constant ``max_len`` (e.g. ``max_new_tokens``, for
    ``seq-mean-token-sum-norm``); the losses of the micro-batches then sum to the
    full-batch loss and gradient. Left None, they are this call's own counts.

    Group statistics (``etr``, ``pmpo``, ``apmpo``): compute them ONCE over the whole
    rollout batch, ``stats = group_stats_for(name, rewards, group_size, **hparams)``,
    and pass ``group_stats=stats.rows(index)`` with each micro-batch's row ``index``, so
    no statistic comes from a partial group. Without ``group_stats`` they are computed
    from this call's ``rewards``/``group_size``, which is right only when the call holds
    whole groups (and, for ``stats_scope="batch"``, the whole batch). Stats computed with
    other options than the objective's are rejected.

    No host-device synchronisation unless ``validate=True``, which also checks the values
    (:func:`objective_loss`). Raises ValueError naming the argument for: unknown
    objective, hyperparameter or mode; shape mismatch; rewards or group statistics
    missing where needed; ``group_size`` not dividing ``B`` when the group statistics are
    computed here; with ``validate``, NaN/inf on response tokens, an all-zero mask and the
    other value checks.
    """
    spec = objective_spec(name)
    if config is None and (clash := sorted(set(spec.hyperparameters) & _KEYWORDS)):
        raise ValueError(  # policy_loss(validate=0.3) cannot tell whose it is
            f"objective {name!r}: hyperparameter(s) {', '.join(clash)} share a name with "
            f"policy_loss's own arguments: pass config=make_config({name!r}, ...) instead"
        )
    cfg = ObjectiveConfig(
        name,
        params=resolve_config(spec, config, hparams),
        loss_agg=loss_agg,
        kl_coef=kl_coef,
        kl_estimator=kl_estimator,
        sft_coef=sft_coef,
        sft_threshold=sft_threshold,
        entropy_coef=entropy_coef,
    )
    if spec.needs_group_stats and group_stats is None:
        if rewards is None or group_size is None:
            raise ValueError(
                f"rewards and group_size: objective {name!r} needs them (or precomputed group_stats)"
            )
        rewards = check_rewards(rewards, _rows(mask), validate)
        group_stats = cfg.group_stats(rewards, group_size, validate=validate)
    batch = LossInputs(
        logp, old_logp, advantages, mask, rewards, group_stats, ref_logp, entropy, token_weights
    )
    counts = StepCounts(num_tokens, num_seqs, num_sft_tokens, max_len)
    return objective_loss(batch, cfg, counts, validate=validate)


_KEYWORDS = frozenset(inspect.signature(policy_loss).parameters) - {
    "hparams",
    *(f.name for f in dataclasses.fields(ObjectiveConfig)),  # refused by ObjectiveConfig itself
}
"""``policy_loss``'s own arguments, which an objective's hyperparameters given as keywords may
not share."""


def _rows(mask: Any) -> int:
    """``B`` of a ``[B, T]`` mask (shape errors are reported by the batch checks)."""
    return mask.shape[0] if isinstance(mask, torch.Tensor) and mask.dim() == 2 else -1


def regularization(
    reg: RegularizerConfig,
    batch: PolicyBatch,
    mode: str,
    counts: StepCounts,
    inputs: LossInputs,
    validate: bool = False,
) -> tuple[torch.Tensor | None, dict[str, torch.Tensor]]:
    """``(kl_coef*KL + sft_coef*NLL - entropy_coef*H or None, metrics)``."""
    total, metrics, mask = None, {}, batch.mask
    denominators = _denominators(counts)
    ref_logp, entropy, rewards = inputs.ref_logp, inputs.entropy, inputs.rewards
    if reg.kl_coef > 0 and ref_logp is None:
        raise ValueError("ref_logp is required when kl_coef > 0")
    if ref_logp is not None:
        check_tensor("ref_logp", ref_logp, mask.shape, mask, validate)
        kl = kl_penalty(batch.logp, ref_logp.detach().to(batch.logp.dtype), mask, reg.kl_estimator)
        metrics[f"kl/ref_{reg.kl_estimator}"] = masked_mean(kl, mask)
        if reg.kl_coef > 0:
            total = _add(total, reg.kl_coef * aggregate(kl, mask, mode, **denominators))
    if reg.sft_coef > 0:
        if rewards is None:
            raise ValueError(
                "rewards are required when sft_coef > 0 (to find the positive responses)"
            )
        positive = (rewards >= reg.sft_threshold).to(mask.device)
        sft, nll = sft_nll(batch.logp, mask, positive, counts.num_sft_tokens, validate)
        metrics["sft/loss"] = nll
        total = _add(total, reg.sft_coef * sft)
    if reg.entropy_coef > 0 and entropy is None:
        raise ValueError("entropy is required when entropy_coef > 0")
    if entropy is not None:
        check_tensor("entropy", entropy, mask.shape, mask, validate)
        metrics["policy/entropy"] = masked_mean(entropy, mask)
        if reg.entropy_coef > 0:
            if batch.logp.requires_grad and torch.is_grad_enabled() and not entropy.requires_grad:
                raise ValueError("entropy must carry a gradient when entropy_coef > 0")
            bonus = aggregate(entropy.to(batch.logp.dtype), mask, mode, **denominators)
            total = _add(total, -reg.entropy_coef * bonus)
    return total, metrics


def _add(total: torch.Tensor | None, term: torch.Tensor) -> torch.Tensor:
    return term if total is None else total + term
