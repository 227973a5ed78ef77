"""The policy update: mini-batches x epochs optimiser steps, each over micro-batches.

Each optimiser step passes the whole step's response-token and sequence counts to the
objective, so the micro-batch losses sum to the loss of the full mini-batch and the
accumulated gradient equals the full-batch gradient. When the batch feeds a single
optimiser step, the behaviour log-probs are the current ones, detached: no extra pass.
When the sampler reported its own log-probs, the behaviour log-probs are compared with
them and, optionally, each token's loss is importance-weighted (:mod:`rlvr.train.correction`).
Under ``rollout.staleness >= 1`` the behaviour log-probs are the generation worker's (the
weights that sampled the batch), so the objective's ratio sees the staleness; with
``rollout.decoupled`` the ratio is against the proximal policy instead and each token is
weighted by ``pi_prox / pi_behav`` (:mod:`rlvr.objectives.decoupled`).
"""

from __future__ import annotations

import math
import warnings

import torch

from rlvr.objectives import (
    LossInputs,
    LossOutput,
    ObjectiveConfig,
    StepCounts,
    metric_weight_tensors,
    objective_loss,
    step_counts,
)
from rlvr.objectives import contrast as contrast_lib
from rlvr.objectives.decoupled import decoupled_inputs
from rlvr.train.batch import RolloutBatch, micro_batches, split_rows
from rlvr.train.config import TrainConfig
from rlvr.train.correction import rollout_correction
from rlvr.train.heap import before_backward
from rlvr.train.logprobs import response_stats
from rlvr.train.metrics import StepMetrics, to_host
from rlvr.train.optim import clip_and_step


def micro_loss(
    model,
    micro: RolloutBatch,
    cfg: TrainConfig,
    objective: ObjectiveConfig,
    counts: StepCounts,
    contrasts: tuple[contrast_lib.Contrast, ...] = (),
    validate: bool = False,
) -> LossOutput:
    """This micro-batch's share of the step loss, and its metrics (objective's plus entropy,
    and the ``contrasts``' ``contrast/*`` metrics on the same inputs); ``validate``: check the
    loss inputs' values too (host-device syncs: the first step only)."""
    device = next(model.parameters()).device
    micro = micro.trim_responses().to(device)  # all-padding response columns change nothing
    seqs = micro.seqs
    stats = response_stats(
        model, seqs, cfg.model, temperature=cfg.rollout.temperature, entropy=True
    )
    logp = stats.logp.float()  # [b, T]
    entropy = None if stats.entropy is None else stats.entropy.float()  # [b, T]
    mask = seqs.response_mask.to(logp.dtype)  # [b, T]
    old_logp = micro.old_logp if micro.old_logp is not None else logp.detach()
    correction = rollout_correction(old_logp, micro.rollout_logp, mask, cfg.rollout)
    inputs = LossInputs(
        logp=logp,
        old_logp=_proximal(micro, logp) if cfg.rollout.decoupled else old_logp,
        advantages=micro.advantages,
        mask=mask,
        rewards=micro.rewards,
        group_stats=micro.group_stats,
        ref_logp=micro.ref_logp,
        entropy=entropy,
        token_weights=correction.weights,
    )
    decoupled = {}
    if cfg.rollout.decoupled:  # ratio against pi_prox, each token weighted by pi_prox / pi_behav
        cap = cfg.rollout.decoupled_cap
        inputs, decoupled = decoupled_inputs(inputs, old_logp, cap, validate)
    loss, metrics = objective_loss(inputs, objective, counts, validate=validate)
    metrics.update(correction.metrics)
    metrics.update(decoupled)
    metrics.update(
        contrast_lib.contrast_metrics(inputs, objective, contrasts, counts, micro.contrast_stats)
    )
    if entropy is not None and "policy/entropy" not in metrics:
        metrics["policy/entropy"] = (entropy.detach() * mask).sum() / mask.sum().clamp_min(1)
    return LossOutput(loss, metrics)


def _proximal(micro: RolloutBatch, logp: torch.Tensor) -> torch.Tensor:
    """[b, T] the proximal policy's log-probs: the weights at the start of the step (the current
    ones, detached, when the batch feeds a single optimiser step)."""
    return micro.prox_logp if micro.prox_logp is not None else logp.detach()


def optimizer_step(
    model,
    optimizer,
    scheduler,
    batch: RolloutBatch,
    cfg: TrainConfig,
    objective: ObjectiveConfig,
    acc: StepMetrics,
    contrasts: tuple[contrast_lib.Contrast, ...] = (),
) -> dict[str, float]:
    """Accumulate gradients over micro-batches of ``batch``, then one optimiser step."""
    counts = step_counts(
        batch.seqs.response_mask,
        batch.rewards,
        objective.regularizers.sft_threshold,
        max_len=cfg.rollout.max_new_tokens,
    )
    lr = scheduler.get_last_lr()[0]
    total, nonfinite = 0.0, 0
    chunk, by_prompt = cfg.optim.micro_batch_size, cfg.model.share_prompt
    chunks = micro_batches(batch.seqs, chunk, by_prompt=by_prompt)
    for index in chunks:
        micro = batch.rows(index)
        first = scheduler.last_epoch == 0  # the run's first optimiser step
        loss, metrics = micro_loss(model, micro, cfg, objective, counts, contrasts, validate=first)
        mask, threshold = micro.seqs.response_mask, objective.regularizers.sft_threshold
        sums = {k: metrics.pop(k) for k in [k for k in metrics if contrast_lib.is_sum(k)]}
        weights = metric_weight_tensors(mask, micro.rewards, threshold)
        head, metrics, sums, weights = to_host(  # the micro-batch's one host-device sync
            {"loss": loss, "tokens": mask.sum()}, metrics, sums, weights
        )
        if not math.isfinite(head["loss"]):
            nonfinite += 1  # leave this micro-batch's gradient out rather than poison the weights
            continue
        before_backward(model, cfg.model.trim_heap)
        loss.backward()
        total += head["loss"]
        for name, value in sums.items():
            acc.add_sum(name, value)
        acc.add(metrics, head["tokens"], weights)
    if nonfinite:
        warnings.warn(
            "non-finite micro-batch loss left out of the update (counted in update/nonfinite_losses)",
            stacklevel=2,
        )
    grad_norm, stepped = clip_and_step(model, optimizer, scheduler, cfg.optim)
    acc.add_sum("optim/skipped_steps", float(not stepped))
    acc.add_sum("update/nonfinite_losses", float(nonfinite))
    # A skipped step's non-finite norm, and the loss of a step whose every micro-batch loss
    # was non-finite, are left out of the step's mean (see update_policy).
    norm = {"optim/grad_norm": grad_norm} if math.isfinite(grad_norm) else {}
    loss = {"loss/policy": total} if nonfinite < len(chunks) else {}
    return {**loss, **norm, "optim/lr": lr}


def update_policy(
    model,
    optimizer,
    scheduler,
    batch: RolloutBatch,
    cfg: TrainConfig,
    objective: ObjectiveConfig | None = None,
) -> dict[str, float]:
    """``rollout.epochs`` passes of ``rollout.minibatches`` optimiser steps over ``batch``.

    ``objective``: the loss (default ``cfg.loss_config``, built here once).
    """
    objective = objective or cfg.loss_config
    contrasts = cfg.contrasts
    acc, per_step = StepMetrics(), StepMetrics()
    steps = 0
    for _ in range(cfg.rollout.epochs):
        for rows in split_rows(batch.size, cfg.rollout.minibatches):
            minibatch = batch.rows(rows)
            step = optimizer_step(
                model, optimizer, scheduler, minibatch, cfg, objective, acc, contrasts
            )
            per_step.add(step, weight=1.0)
            steps += 1
    return {
        **contrast_lib.finish(exact_shares(acc.result())),
        "optim/grad_norm": math.nan,  # every step skipped: written as null, counted non-finite
        "loss/policy": math.nan,  # no finite micro-batch loss in any step: likewise
        **per_step.result(),
        "update/optimizer_steps": float(steps),
    }


def exact_shares(metrics: dict[str, float]) -> dict[str, float]:
    """Quadrant shares recomputed from the token-weighted per-token fractions of the whole step.

    Averaging each micro-batch's shares would weight them by tokens, not by events; the
    fractions ``clip/q{k}_frac`` average exactly, and the shares are their ratios.
    """
    fracs = [metrics.get(f"clip/q{k}_frac") for k in (1, 2, 3, 4)]
    if any(f is None for f in fracs):
        return metrics
    events = sum(fracs)
    return {
        **metrics,
        **{
            f"clip/q{k}_share": (f / events if events > 0 else 0.0)
            for k, f in zip((1, 2, 3, 4), fracs, strict=True)
        },
    }
