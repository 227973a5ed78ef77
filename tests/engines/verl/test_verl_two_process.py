"""The registered ``rlvr_<name>`` losses on verl's data-parallel halves, in two real processes
(gloo on CPU): each rank sums the losses of its two micro-batches (rows reordered first, as
``trainer.balance_batch`` does) under verl's global batch info, the gradients are averaged
with an all-reduce as DDP/FSDP does, and the result is the loss and gradient of the whole
batch on one rank. ``test_verl_losses.py`` checks the same rule with the collective simulated."""

from __future__ import annotations

import os
import socket

import pytest

pytest.importorskip("verl")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from rlvr.objectives import group_stats_for  # noqa: E402

from .helpers import B, G, batch  # noqa: E402

CASES = [("grpo", "token-mean"), ("etr", "seq-mean-token-mean"), ("apmpo", "seq-mean-token-sum")]


def loss_and_grad(name, agg, rows, dp_size):
    """This rank's summed loss and its gradient wrt the whole batch's log-probs."""
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    from rlvr.engines.verl import objective_config, row_stats

    from .helpers import actor

    old, logp, adv, mask, rewards = batch(seed=1)
    config = actor(f"rlvr_{name}", agg)
    config.global_batch_info.update(
        {"dp_size": dp_size, "batch_num_tokens": int(mask.sum()), "global_batch_size": B}
    )
    params = objective_config(name, config).params
    stats = group_stats_for(name, rewards, G, config=params)  # the whole batch's (exact route)
    fn = get_policy_loss_fn(f"rlvr_{name}")
    total = torch.zeros((), dtype=logp.dtype)
    for micro in rows.chunk(2):
        with row_stats(None if stats is None else stats.rows(micro)):
            loss, _ = fn(old[micro], logp[micro], adv[micro], mask[micro], agg, config, None)
        total = total + loss
    (grad,) = torch.autograd.grad(total, logp)
    return total.detach(), grad


def worker(rank, port, out_dir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    order = torch.randperm(B, generator=torch.Generator().manual_seed(5))
    results = {}
    for name, agg in CASES:
        loss, grad = loss_and_grad(name, agg, order.chunk(2)[rank], dp_size=2)
        for value in (loss, grad):  # DDP averages over the data-parallel ranks
            dist.all_reduce(value)
            value /= 2
        results[name] = (loss, grad)
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def two_process_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("verl-two-process")
    mp.start_processes(worker, args=(free_port(), str(out)), nprocs=2, start_method="spawn")
    return [torch.load(out / f"rank{rank}.pt") for rank in (0, 1)]


@pytest.mark.parametrize(("name", "agg"), CASES)
def test_two_process_halves_equal_the_whole_batch(name, agg, two_process_results):
    loss, grad = loss_and_grad(name, agg, torch.arange(B), dp_size=1)
    assert grad.abs().sum() > 0
    for results in two_process_results:
        split_loss, split_grad = results[name]
        torch.testing.assert_close(split_loss, loss, rtol=1e-7, atol=1e-10)
        torch.testing.assert_close(split_grad, grad, rtol=1e-7, atol=1e-10)
