"""The exact route for objectives that read group statistics: ``trainer.v1.trainer_mode=rlvr``.

ETR's per-sample pass rate and PMPO/APMPO's reward mean and std are statistics of whole
groups (or of the whole batch). A verl policy loss sees one micro-batch of one rank, after
``trainer.balance_batch`` has spread groups over ranks, so it cannot compute them. This
module registers, in verl 0.9's v1 trainer registry, :class:`RlvrTrainer`: verl's
synchronous trainer (``sync``) plus two things, only when the loss mode is an rlvr
objective that needs statistics:

1. After verl's advantages (rewards known, the whole rollout batch on the driver), it
   computes the statistics over the whole batch, grouped by ``uid`` and from the verifier
   scores ``rm_scores`` (:func:`~rlvr.engines.verl.stats.labelled_group_stats`), and writes
   them per sample (:data:`STATS_FIELDS`) next to the other per-sample fields, so they follow
   every reorder and split.
2. It gives the actor workers :class:`StatsLoss`, verl's own ``ppo_loss`` (KL and entropy
   terms unchanged) run with each micro-batch's statistics rows in scope for the
   registered ``rlvr_<name>`` loss.

With any other loss mode it is verl's ``sync`` trainer unchanged. In both cases verl's base
trainer reads its mode as ``sync`` (:attr:`RlvrTrainer.trainer_mode`): it switches to its
asynchronous code paths for any other name, and reads ``trainer.v1.sync.*`` options.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import transfer_queue as tq
from tensordict import TensorDict
from verl.trainer.distillation import is_distillation_enabled
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.utils.losses import ppo_loss

from rlvr.advantages import GroupStats, StatsOptions
from rlvr.engines.verl.config import objective_config, objective_name
from rlvr.engines.verl.losses import row_stats
from rlvr.engines.verl.stats import labelled_group_stats
from rlvr.objectives import ObjectiveConfig

TRAINER_MODE = "rlvr"
"""The name under which :class:`RlvrTrainer` is registered (``trainer.v1.trainer_mode``)."""

SYNC_MODE = "sync"
"""verl's synchronous mode: the one verl's base trainer treats as on-policy (see :class:`RlvrTrainer`)."""

STATS_FIELDS = ("rlvr_pass_rate", "rlvr_reward_mean", "rlvr_reward_std")
"""Per-sample fields carrying :class:`~rlvr.advantages.GroupStats` through verl's batch."""


def stats_objective(actor: Any) -> ObjectiveConfig | None:
    """The rlvr objective of verl's ``actor`` config when it reads group statistics, else None."""
    loss_mode = actor.get("policy_loss", {}).get("loss_mode", "vanilla")
    name = objective_name(loss_mode)
    if name is None:
        return None
    cfg = objective_config(name, actor)
    return cfg if cfg.spec.needs_group_stats else None


def stats_fields(
    scores: torch.Tensor, uids: Any, valid: torch.Tensor, options: StatsOptions
) -> dict[str, torch.Tensor]:
    """:data:`STATS_FIELDS` -> ``[B]`` float64 statistics of the whole batch's ``scores [B]``."""
    stats = labelled_group_stats(scores, uids, options, valid)
    return dict(
        zip(STATS_FIELDS, (stats.pass_rate, stats.reward_mean, stats.reward_std), strict=True)
    )


def rows_of(data: Any, options: StatsOptions) -> GroupStats:
    """The :class:`GroupStats` of a micro-batch (a TensorDict holding :data:`STATS_FIELDS`)."""
    missing = [name for name in STATS_FIELDS if name not in data]
    if missing:
        raise ValueError(
            f"the micro-batch has no {', '.join(missing)}: the rlvr trainer mode writes them "
            "after the advantages; was the batch built by another trainer?"
        )
    rows = [data[name].reshape(-1).double() for name in STATS_FIELDS]
    return GroupStats(*rows, options)


@dataclass
class StatsLoss:
    """verl's ``ppo_loss`` for the actor, with each micro-batch's group statistics in scope."""

    config: Any
    """verl's actor config (``ActorConfig``), as the workers' own loss function holds it."""
    options: StatsOptions
    """The statistics' options (the objective's), checked by the objective against its own."""

    def __call__(self, model_output: Any, data: Any, dp_group: Any = None) -> Any:
        with row_stats(rows_of(data, self.options)):
            return ppo_loss(self.config, model_output, data, dp_group=dp_group)


def put_group_stats(batch: Any, objective: ObjectiveConfig) -> Any:
    """Compute the statistics over the whole batch ``batch`` (a KVBatchMeta) and store them per
    sample; the KVBatchMeta that lists them, which the actor update must be given: verl's
    workers fetch only the fields a KVBatchMeta lists."""
    data = tq.kv_batch_get(
        keys=batch.keys,
        partition_id=batch.partition_id,
        select_fields=["uid", "rm_scores", "response_mask"],
    )
    padded = data.select("rm_scores", "response_mask").to_padded_tensor()
    scores = padded["rm_scores"].sum(dim=-1)  # [B] verifier score, before any KL-in-reward
    valid = padded["response_mask"].sum(dim=-1) > 0  # verl's padding rows have no response
    uids = data["uid"]
    uids = uids.tolist() if hasattr(uids, "tolist") else list(uids)
    fields = stats_fields(scores, uids, valid, objective.params.stats_options())
    return tq.kv_batch_put(
        keys=batch.keys,
        partition_id=batch.partition_id,
        fields=TensorDict(fields, batch_size=len(batch)),
    )


@register_trainer(TRAINER_MODE)
class RlvrTrainer(PPOTrainerSync):
    """verl's synchronous PPO trainer that supplies exact group statistics to rlvr's objectives."""

    @property
    def trainer_mode(self) -> str:
        """``"sync"``: verl's base trainer takes its asynchronous paths (an async replay buffer
        that evicts stale and failed groups, single-prompt fetches, TransferQueue checkpoints,
        ``trainer.v1.<mode>`` options) for any other value, and this trainer is the sync one."""
        return SYNC_MODE

    @trainer_mode.setter
    def trainer_mode(self, _: str) -> None:
        """verl's ``__init__`` assigns ``config.trainer.v1.trainer_mode`` (``rlvr``); kept ``sync``."""

    def _setup(self) -> None:
        super()._setup()
        actor = self.config.actor_rollout_ref.actor
        self.rlvr_objective = stats_objective(actor)
        if self.rlvr_objective is None:
            return
        if is_distillation_enabled(self.config.get("distillation")):
            raise ValueError("trainer.v1.trainer_mode=rlvr does not support distillation")
        options = self.rlvr_objective.params.stats_options()
        loss = StatsLoss(omega_conf_to_dataclass(actor), options)
        self.actor_rollout_wg.set_loss_fn(loss)

    def _compute_advantage(self, batch: Any, metrics: dict) -> Any:
        batch = super()._compute_advantage(batch, metrics)
        if self.rlvr_objective is not None:
            batch = put_group_stats(batch, self.rlvr_objective)
        return batch
