"""Every rlvr objective as a verl policy loss, ``rlvr_<name>`` in verl's registry.

verl calls a registered loss per micro-batch with ``old_log_prob, log_prob, advantages,
response_mask [B, T], loss_agg_mode, config, rollout_is_weights``; the loss here builds the
objective's config from ``config`` (:mod:`rlvr.engines.verl.config`), runs
:func:`rlvr.objectives.objective_loss` and returns ``(loss, metrics)`` as verl expects.

Aggregation honours verl's global batch info (``config.global_batch_info``, which verl sets
before each call) the way verl 0.9's ``agg_loss`` does: with ``dp_size = d``,
``batch_num_tokens = N`` and ``global_batch_size = S`` of the mini-batch over all ranks, a
rank's micro-batch loss is ``sum(m*l) / N * d`` (``token-mean``), ``sum_i seq_i / S * d``
(``seq-mean-*``; ``seq-mean-token-sum-norm`` also divides by ``loss_scale_factor`` or the
width) or ``sum(m*l) * d`` (``token-sum``). verl sums micro-batch losses on a rank and the
data-parallel all-reduce averages over ranks, so the step's gradient is the full
mini-batch's. Here that is :class:`~rlvr.objectives.StepCounts` with ``N/d`` tokens and
``S/d`` sequences (one rank's share), and ``token-sum`` scaled by ``d``.

:class:`PolicyLossConfig` (verl's ``policy_loss`` section with rlvr's own) registers, in each
process that builds it, the loss mode of an objective of your own (:func:`register_loss`).

``rollout_is_weights`` (verl's rollout correction) become the objective's per-token weights:
both multiply the per-token objective loss before aggregation.

Objectives that read group statistics (``etr``, ``pmpo``, ``apmpo``) cannot get them from
these arguments: only :mod:`rlvr.engines.verl.trainer` (``trainer.v1.trainer_mode=rlvr``)
computes them over the whole rollout batch and supplies each micro-batch's rows. Without it
they raise an error naming that route; they never approximate.

Metrics are rlvr's names under ``rlvr/`` (``rlvr/clip/q1_frac``...; ``docs/metrics.md``),
averaged over micro-batches and ranks by verl and logged as ``actor/rlvr/...``. Only metrics
that a mean of micro-batch values keeps are returned (:func:`survives_mean`): per-token
fractions and means, not the quadrant shares (a ratio of event counts: the share of the whole
step is ``q_k_frac / sum_j q_j_frac``) nor maxima and minima. verl takes them as
numbers (its ``Metric`` calls ``.item()`` on a tensor), so they reach the host in one copy per
micro-batch, together with the flag of a micro-batch that has no response token: that copy is
the loss's only host-device synchronisation (verl's own losses make one per metric).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import torch
from verl.trainer.ppo.core_algos import register_policy_loss
from verl.workers.config import PolicyLossConfig as VerlPolicyLossConfig

from rlvr.advantages import GroupStats
from rlvr.engines.verl.config import (
    PREFIX,
    check_policy_loss_keys,
    check_section,
    objective_config,
    objective_name,
)
from rlvr.objectives import OBJECTIVES, LossInputs, StepCounts, objective_loss, objective_spec

EXACT_ROUTE = "trainer.v1.trainer_mode=rlvr"
"""The verl override that selects the trainer supplying exact group statistics."""

_ROW_STATS: ContextVar[GroupStats | None] = ContextVar("rlvr_row_stats", default=None)


@contextlib.contextmanager
def row_stats(stats: GroupStats) -> Iterator[None]:
    """Make ``stats`` (the current micro-batch's rows) visible to the loss called inside."""
    token = _ROW_STATS.set(stats)
    try:
        yield
    finally:
        _ROW_STATS.reset(token)


def step_counts(mode: str, info: dict[str, Any]) -> tuple[StepCounts, int]:
    """``(counts, scale)`` reproducing verl's ``agg_loss`` for ``global_batch_info`` ``info``."""
    dp_size = int(info.get("dp_size") or 1)
    tokens, seqs = info.get("batch_num_tokens"), info.get("global_batch_size")
    if dp_size > 1 and tokens is None and mode == "token-mean":
        raise ValueError("(global) batch_num_tokens is required when dp_size > 1")
    if dp_size > 1 and seqs is None and mode.startswith("seq-mean"):
        raise ValueError("global_batch_size is required when dp_size > 1")
    counts = StepCounts(
        num_tokens=None if tokens is None else float(tokens) / dp_size,
        num_seqs=None if seqs is None else float(seqs) / dp_size,
        max_len=info.get("loss_scale_factor"),
    )
    return counts, dp_size if mode == "token-sum" else 1


def survives_mean(name: str) -> bool:
    """Whether verl's plain mean over micro-batches and ranks keeps metric ``name`` meaningful:
    not for a share of events (``clip/q1_share``) or an extreme (``ratio/max``, ``etr/eps_min``).

    >>> [survives_mean(n) for n in ("clip/q1_frac", "clip/q1_share", "ratio/max", "etr/eps_mean")]
    [True, False, False, True]
    """
    return not re.search(r"(_share|[/_]max|[/_]min)$", name)


def verl_policy_loss(
    name: str,
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str,
    config: Any,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """rlvr objective ``name`` on one verl micro-batch: ``(loss, {"rlvr/<metric>": value})``."""
    if config is None:
        raise ValueError(f"{PREFIX}{name}: verl passed no actor config")
    mask = response_mask.bool()
    cfg = objective_config(name, config, loss_agg=loss_agg_mode)
    counts, scale = step_counts(loss_agg_mode, dict(config.get("global_batch_info") or {}))
    stats = None
    if cfg.spec.needs_group_stats:
        stats = _ROW_STATS.get()
        if stats is None:
            raise ValueError(
                f"{PREFIX}{name} needs per-sample group statistics of whole groups, which a verl "
                f"policy loss does not receive; run verl's v1 trainer (trainer.use_v1=True, its "
                f"default: the legacy trainer has no rlvr mode) with {EXACT_ROUTE} "
                "(docs/engines.md)"
            )
    batch = LossInputs(
        log_prob,
        old_log_prob,
        advantages,
        mask,
        group_stats=stats,
        token_weights=rollout_is_weights,
    )
    out = objective_loss(batch, cfg, counts)
    names = [name for name in out.metrics if survives_mean(name)]
    values = [mask.any(), *(out.metrics[name] for name in names)]
    responses, *host = torch.stack([v.double() for v in values]).tolist()  # the one copy
    if not responses:  # a micro-batch of verl's padding rows only: no loss, no gradient
        return (log_prob * 0.0).sum(), {}
    metrics = {f"rlvr/{name}": value for name, value in zip(names, host, strict=True)}
    return out.loss * scale if scale != 1 else out.loss, metrics


def _loss_for(name: str) -> Callable[..., tuple[torch.Tensor, dict[str, float]]]:
    def loss(
        old_log_prob: torch.Tensor,
        log_prob: torch.Tensor,
        advantages: torch.Tensor,
        response_mask: torch.Tensor,
        loss_agg_mode: str = "token-mean",
        config: Any = None,
        rollout_is_weights: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        return verl_policy_loss(
            name,
            old_log_prob,
            log_prob,
            advantages,
            response_mask,
            loss_agg_mode,
            config,
            rollout_is_weights,
        )

    loss.__name__ = loss.__qualname__ = f"{PREFIX}{name}"
    loss.__doc__ = f"rlvr's ``{name}`` ({objective_spec(name).paper}) as a verl policy loss."
    return loss


LOSSES = {
    f"{PREFIX}{name}": register_policy_loss(f"{PREFIX}{name}")(_loss_for(name))
    for name in OBJECTIVES
}
"""The registered verl loss modes, ``rlvr_<objective>`` -> function."""


def register_loss(loss_mode: str) -> None:
    """Register ``loss_mode`` (``rlvr_<objective>``) in verl's registry when it is not there: an
    objective of your own (``rlvr_my_module.name``), which verl's import of this package, before
    your module was imported, could not know."""
    if loss_mode not in LOSSES:
        LOSSES[loss_mode] = register_policy_loss(loss_mode)(_loss_for(loss_mode[len(PREFIX) :]))


@dataclass
class PolicyLossConfig(VerlPolicyLossConfig):
    """verl's ``policy_loss`` section plus ``rlvr``: the objective's own hyperparameters.

    verl builds it on the driver (``validate_config``) and in each worker before the worker
    looks up its loss, so here the section is checked (:func:`check_section`) and an rlvr loss
    mode naming an objective of your own is registered (:func:`register_loss`)."""

    rlvr: dict = field(default_factory=dict)
    """Hyperparameters of the rlvr objective by their ``ALGORITHMS.md`` names (``eps3``, ``lam1``...)."""

    def __post_init__(self) -> None:
        check_section(self.loss_mode, self.rlvr)
        if objective_name(self.loss_mode) is not None:
            register_loss(self.loss_mode)


def _checked_init(init: Callable[..., None]) -> Callable[..., None]:
    """``PolicyLossConfig.__init__`` that refuses a key it has no field for with one line
    (:func:`check_policy_loss_keys`) instead of the dataclass's ``unexpected keyword argument``."""

    @functools.wraps(init)
    def __init__(self: PolicyLossConfig, *args: Any, **kwargs: Any) -> None:
        check_policy_loss_keys(set(kwargs), {f.name for f in dataclasses.fields(self)})
        init(self, *args, **kwargs)

    return __init__


PolicyLossConfig.__init__ = _checked_init(PolicyLossConfig.__init__)  # type: ignore[method-assign]
