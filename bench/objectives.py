"""Forward + backward time of every objective relative to ``grpo``, in one run.

    PYTHONPATH=src python bench/objectives.py                        # 64 x 2048, float32, CPU
    PYTHONPATH=src python bench/objectives.py --batch 16 --tokens 512 # a quick one

The inputs are a realistic rollout micro-batch: ``B`` responses of random length in
``[T/4, T]`` (right-padded), log-ratios ~ N(0, 0.1^2) (a few tokens far out of band),
``+1/0`` rewards in groups of ``--group`` with ``group_std`` advantages (``group_mean`` for
the objectives that default to it). Each timed call is ``policy_loss(...)`` (input checks,
objective, aggregation, every metric) plus ``loss.backward()`` to a ``logp`` leaf; the
model's own forward/backward is not included, so the numbers are the objective's overhead
alone. Objectives are measured round-robin (each repeat runs every objective once, in a
shuffled order) so drift on a shared machine hits all of them alike; the table reports the
median and the minimum time, each with its ratio to ``grpo``'s (the minimum is the
steadier of the two when other processes compete for the cores). ``--kl`` adds the k3 KL term to every
objective. One torch thread by default: on a loaded machine every multi-threaded kernel
launch can stall for milliseconds waiting on busy cores, which swamps the objective
itself (``--threads 0`` for torch's default). On a shared machine read the times as rough.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

from rlvr.advantages import compute_advantages
from rlvr.objectives import OBJECTIVES, group_stats_for, objective_spec, policy_loss


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--batch", type=int, default=64, help="sequences B")
    p.add_argument("--tokens", type=int, default=2048, help="positions T")
    p.add_argument("--group", type=int, default=8, help="group size G (must divide B)")
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float64"], default="float32")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--repeats", type=int, default=15, help="timed rounds")
    p.add_argument("--warmup", type=int, default=2, help="untimed rounds first")
    p.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    p.add_argument("--kl", action="store_true", help="add kl_coef=0.001 (k3) to every objective")
    return p.parse_args(argv)


def make_inputs(args: argparse.Namespace) -> dict:
    """Tensors of one realistic micro-batch (see module doc)."""
    gen = torch.Generator().manual_seed(0)
    b, t = args.batch, args.tokens
    lengths = torch.randint(t // 4, t + 1, (b,), generator=gen)
    mask = torch.arange(t)[None, :] < lengths[:, None]
    old = -torch.rand(b, t, generator=gen) * 3
    log_ratio = torch.randn(b, t, generator=gen) * 0.1
    log_ratio[torch.rand(b, t, generator=gen) < 0.01] *= 10  # a few far out of band
    rewards = (torch.rand(b, generator=gen) < 0.4).float()
    dtype, device = getattr(torch, args.dtype), torch.device(args.device)
    return {
        "logp": (old + log_ratio).to(device, dtype),
        "old_logp": old.to(device, dtype),
        "ref_logp": (old + torch.randn(b, t, generator=gen) * 0.05).to(device, dtype),
        "mask": mask.to(device),
        "rewards": rewards,
    }


def make_call(name: str, data: dict, args: argparse.Namespace):
    """A closure running one forward + backward of objective ``name``."""
    spec = objective_spec(name)
    adv = compute_advantages(data["rewards"], args.group, spec.advantage_mode).to(
        data["logp"].device
    )
    stats = group_stats_for(name, data["rewards"], args.group)
    kl = {"ref_logp": data["ref_logp"], "kl_coef": 0.001} if args.kl else {}

    def call() -> None:
        logp = data["logp"].detach().requires_grad_()
        loss, _ = policy_loss(
            name,
            logp=logp,
            old_logp=data["old_logp"],
            advantages=adv,
            mask=data["mask"],
            group_stats=stats,
            **kl,
        )
        loss.backward()

    return call


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure(calls: dict, args: argparse.Namespace) -> dict[str, list[float]]:
    """Seconds per call for each objective, round-robin over shuffled orders."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    order = list(calls)
    rng = random.Random(0)
    for round_ in range(args.warmup + args.repeats):
        rng.shuffle(order)
        for name in order:
            sync(args.device)
            start = time.perf_counter()
            calls[name]()
            sync(args.device)
            if round_ >= args.warmup:
                times[name].append(time.perf_counter() - start)
    return times


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    data = make_inputs(args)
    calls = {name: make_call(name, data, args) for name in OBJECTIVES}
    times = measure(calls, args)
    base, base_min = statistics.median(times["grpo"]), min(times["grpo"])
    tokens = int(data["mask"].sum())
    print(
        f"B={args.batch} T={args.tokens} ({tokens} response tokens) {args.dtype} {args.device}, "
        f"{torch.get_num_threads()} threads, {args.repeats} rounds{', +KL k3' if args.kl else ''}"
    )
    print(f"{'objective':<10} {'median ms':>10} {'x grpo':>7} {'min ms':>8} {'x grpo':>7}")
    for name in OBJECTIVES:
        med, low = statistics.median(times[name]), min(times[name])
        print(
            f"{name:<10} {med * 1e3:>10.1f} {med / base:>7.2f} {low * 1e3:>8.1f} {low / base_min:>7.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
