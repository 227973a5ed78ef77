"""The exact route (``trainer.v1.trainer_mode=rlvr``): statistics over the whole rollout batch,
carried per sample through verl's batch to verl's own ``ppo_loss``, equal ``policy_loss`` on the
whole batch. TransferQueue is replaced by an in-memory store with the same two calls."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402

from rlvr.engines.verl import objective_config  # noqa: E402
from rlvr.engines.verl import trainer as trainer_module  # noqa: E402
from rlvr.engines.verl.trainer import (  # noqa: E402
    STATS_FIELDS,
    RlvrTrainer,
    StatsLoss,
    put_group_stats,
    stats_objective,
)
from rlvr.objectives import policy_loss  # noqa: E402

from .helpers import B, G, T, actor, batch  # noqa: E402

PROMPT = 3


class FakeQueue:
    """TransferQueue's ``kv_batch_get``/``kv_batch_put`` over per-sample values in a dict.

    As TransferQueue's, ``kv_batch_put`` returns the batch's meta listing every field stored
    for its keys: verl's workers fetch only the fields the meta they are given lists."""

    def __init__(self):
        self.rows: dict[str, dict] = {}

    def kv_batch_put(self, keys, partition_id, fields):
        for i, key in enumerate(keys):
            row = self.rows.setdefault(key, {})
            for name in fields.keys():  # noqa: SIM118 - a TensorDict iterates over rows
                row[name] = fields[name][i]
        return Meta(keys, sorted(set.intersection(*(set(self.rows[key]) for key in keys))))

    def kv_batch_get(self, keys, partition_id, select_fields=None):
        names = select_fields or list(self.rows[keys[0]])
        tensors, others = {}, {}
        for name in names:
            values = [self.rows[key][name] for key in keys]
            if isinstance(values[0], str):
                others[name] = values
            elif values[0].dim() == 1:
                tensors[name] = torch.nested.as_nested_tensor(values, layout=torch.jagged)
            else:
                tensors[name] = torch.stack(values)
        data = TensorDict(tensors, batch_size=len(keys))
        if others:
            data.update(tu.get_tensordict(others))
        return data


class Meta:
    """The part of TransferQueue's KVBatchMeta the trainer reads."""

    def __init__(self, keys, fields=None):
        self.keys, self.partition_id, self.fields = list(keys), "train", fields

    def __len__(self):
        return len(self.keys)


def rollout(queue, seed=0):
    """A rollout batch in verl's order (groups spread by balance_batch) plus one padding row."""
    old, logp, adv, mask, rewards = batch(seed=seed)
    order = torch.randperm(B, generator=torch.Generator().manual_seed(seed + 7)).tolist()
    keys = []
    for row in order:
        length = int(mask[row].sum())
        scores = torch.zeros(length)
        scores[-1] = rewards[row]
        keys.append(f"k{row}")
        queue.rows[f"k{row}"] = {
            "uid": f"prompt{row // G}",
            "rm_scores": scores,
            "response_mask": torch.ones(length, dtype=torch.int64),
        }
    queue.rows["pad"] = {
        "uid": "pad-uid",
        "rm_scores": torch.zeros(1),
        "response_mask": torch.zeros(1, dtype=torch.int64),
    }
    return (old, logp, adv, mask, rewards), order, keys + ["pad"]


def micro_batch(rows, data, stats, info):
    """verl's padded micro-batch of ``rows`` (original row numbers) and the model's log-probs."""
    old, logp, adv, mask, _ = data
    lengths = mask[rows].sum(dim=1).long()
    values = []
    for row, length in zip(rows, lengths.tolist(), strict=True):
        values += [torch.zeros(PROMPT - 1, dtype=logp.dtype), logp[row, :length]]
        values += [torch.zeros(1, dtype=logp.dtype)]
    response = mask[rows].long()
    td = TensorDict(
        {
            "prompts": torch.ones(len(rows), PROMPT, dtype=torch.long),
            "responses": torch.ones(len(rows), T, dtype=torch.long),
            "attention_mask": torch.cat(
                [torch.ones(len(rows), PROMPT, dtype=torch.long), response], 1
            ),
            "response_mask": response,
            "old_log_probs": old[rows],
            "advantages": adv[rows],
            **{name: stats[name][rows] for name in STATS_FIELDS},
        },
        batch_size=len(rows),
    )
    tu.assign_non_tensor(td, **info)
    return {"log_probs": torch.cat(values)}, td


@pytest.mark.parametrize(
    ("name", "rlvr", "agg"),
    [
        ("etr", {"lam1": 0.3, "lam2": 0.2}, "seq-mean-token-mean"),
        ("apmpo", {"stats_scope": "batch"}, "seq-mean-token-mean"),
        ("pmpo", {"stats_scope": "group", "gamma": 1.5}, "token-mean"),
    ],
)
def test_exact_route_equals_policy_loss_on_the_whole_batch(monkeypatch, name, rlvr, agg):
    queue = FakeQueue()
    data, order, keys = rollout(queue)
    old, logp, adv, mask, rewards = data
    config = actor(f"rlvr_{name}", agg, rlvr=rlvr)
    objective = stats_objective(config)
    assert objective is not None and objective.name == name

    monkeypatch.setattr(trainer_module, "tq", queue)
    put_group_stats(Meta(keys), objective)
    stored = queue.kv_batch_get(keys[:-1], "train", list(STATS_FIELDS))
    stats = {f: torch.zeros(B, dtype=torch.float64) for f in STATS_FIELDS}
    for f in STATS_FIELDS:
        stats[f][torch.tensor(order)] = stored[f]
    assert bool((queue.rows["pad"]["rlvr_reward_mean"] == 0).all())

    loss_fn = StatsLoss(config, objective.params.stats_options())
    info = {"dp_size": 2, "batch_num_tokens": int(mask.sum()), "global_batch_size": B}
    ranks = [order[: B // 2], order[B // 2 :]]  # balance_batch's split of the reordered batch
    total = 0.0
    for rank in ranks:
        for rows in (rank[: B // 4], rank[B // 4 :]):
            output, td = micro_batch(rows, data, stats, info)
            loss, metrics = loss_fn(output, td)
            total = total + loss / 2  # DDP averages the two ranks
    (grad,) = torch.autograd.grad(total, logp)

    cfg = objective_config(name, config)
    ref, _ = policy_loss(
        name,
        logp=logp,
        old_logp=old,
        advantages=adv,
        mask=mask,
        rewards=rewards,
        group_size=G,
        config=cfg.params,
        loss_agg=agg,
    )
    (ref_grad,) = torch.autograd.grad(ref, logp)
    torch.testing.assert_close(total.detach(), ref.detach(), rtol=1e-7, atol=1e-10)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-7, atol=1e-10)
    assert ref_grad.abs().sum() > 0
    assert "rlvr/clip/frac" in metrics


def test_statistics_from_one_micro_batch_would_differ(monkeypatch):
    """Guard that the test above can fail: a micro-batch's own statistics are not the batch's."""
    queue = FakeQueue()
    data, order, keys = rollout(queue)
    _, _, _, _, rewards = data
    monkeypatch.setattr(trainer_module, "tq", queue)
    objective = stats_objective(actor("rlvr_apmpo"))
    put_group_stats(Meta(keys), objective)
    whole = queue.rows[keys[0]]["rlvr_reward_mean"]
    first = torch.tensor(order[:3])
    assert not torch.isclose(whole, rewards[first].mean().double())


def test_micro_batch_without_statistics_names_the_fields():
    config = actor("rlvr_etr")
    loss_fn = StatsLoss(config, stats_objective(config).params.stats_options())
    with pytest.raises(ValueError, match="rlvr_pass_rate"):
        loss_fn({}, TensorDict({"x": torch.zeros(2)}, batch_size=2))


def test_other_loss_modes_need_no_statistics():
    assert stats_objective(actor("vanilla")) is None
    assert stats_objective(actor("rlvr_abc_grpo")) is None


def verl_config(loss_mode):
    return OmegaConf.create(
        {
            "actor_rollout_ref": {
                "actor": {
                    "_target_": "verl.workers.config.FSDPActorConfig",
                    "strategy": "fsdp",
                    "rollout_n": G,
                    "ppo_micro_batch_size_per_gpu": 2,
                    "policy_loss": {
                        "_target_": "rlvr.engines.verl.PolicyLossConfig",
                        "loss_mode": loss_mode,
                        "rlvr": {},
                    },
                }
            }
        }
    )


class Workers:
    def __init__(self):
        self.loss_fn = None

    def set_loss_fn(self, loss_fn):
        self.loss_fn = loss_fn


@pytest.mark.parametrize(("loss_mode", "replaced"), [("rlvr_etr", True), ("rlvr_grpo", False)])
def test_trainer_gives_the_workers_the_stats_loss(monkeypatch, loss_mode, replaced):
    monkeypatch.setattr(PPOTrainerSync, "_setup", lambda self: None)
    trainer = object.__new__(RlvrTrainer)
    trainer.config, trainer.actor_rollout_wg = verl_config(loss_mode), Workers()
    trainer._setup()
    assert isinstance(trainer.actor_rollout_wg.loss_fn, StatsLoss) is replaced
    if replaced:
        assert trainer.actor_rollout_wg.loss_fn.config.policy_loss.loss_mode == loss_mode


def test_trainer_writes_statistics_after_the_advantages(monkeypatch):
    """The meta handed on to the actor update lists the statistics: verl's workers fetch only
    the fields of the meta they are given (``select_fields(meta.fields)``)."""
    queue = FakeQueue()
    _, _, keys = rollout(queue)
    monkeypatch.setattr(trainer_module, "tq", queue)
    before = Meta(keys, sorted(queue.rows[keys[0]]))  # what verl's advantage step returns
    monkeypatch.setattr(PPOTrainerSync, "_compute_advantage", lambda self, b, m: before)
    trainer = object.__new__(RlvrTrainer)
    trainer.rlvr_objective = stats_objective(actor("rlvr_etr"))
    meta = trainer._compute_advantage(Meta(keys), {})
    assert meta.keys == keys and set(STATS_FIELDS) <= set(meta.fields)
    assert set(before.fields) <= set(meta.fields)
    assert all(set(STATS_FIELDS) <= set(queue.rows[key]) for key in keys)
    pass_rates = np.array([float(queue.rows[k]["rlvr_pass_rate"]) for k in keys[:-1]])
    assert set(np.round(pass_rates * G).astype(int)) <= set(range(G + 1))


def composed_config(mode, loss_mode="rlvr_apmpo"):
    """verl's own ``ppo_trainer`` config with ``trainer.v1.trainer_mode=mode``."""
    from rlvr.engines.verl.check import compose

    overrides = [
        f"trainer.v1.trainer_mode={mode}",
        f"actor_rollout_ref.actor.policy_loss.loss_mode={loss_mode}",
        "actor_rollout_ref.actor.policy_loss._target_=rlvr.engines.verl.PolicyLossConfig",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.rollout.n=4",
        "+trainer.v1.sync.parameter_sync_step=2",
    ]
    return compose(overrides)


def test_the_rlvr_mode_runs_verl_sync_code_paths():
    """verl's base trainer takes its asynchronous paths (async replay buffer that evicts stale and
    failed groups, single-prompt fetches, TransferQueue checkpoints) whenever its trainer_mode is
    not ``"sync"``; the rlvr mode must be the sync trainer in all of them."""
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    sync = PPOTrainerSync(composed_config("sync"))
    ours = RlvrTrainer(composed_config("rlvr"))
    assert ours.trainer_mode == sync.trainer_mode == "sync"
    assert type(ours.replay_buffer) is type(sync.replay_buffer) is ReplayBuffer
    assert ours.parameter_sync_step == sync.parameter_sync_step == 2
    assert ours.replay_buffer.trainer_config == sync.replay_buffer.trainer_config
