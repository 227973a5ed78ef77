"""Our RL trainer against TRL's ``GRPOTrainer`` on one identical configuration, in one run.

    PYTHONPATH=src python bench/vs_trl.py                         # both presets, 1 thread and all cores
    PYTHONPATH=src python bench/vs_trl.py --presets tiny --steps 8 --threads 1 --out results.json
    PYTHONPATH=src python bench/vs_trl.py --settings equal best   # also each trainer at its own best
    PYTHONPATH=src python bench/vs_trl.py --device cuda --sampler vllm   # GPU: vLLM on both sides

Both trainers get the same model directory (``rlvr.models.resolve_model_path``), the same
fixed list of reasoning-gym ``chain_sum`` prompts in the same order (chat-templated once
by ``rlvr``; the TRL run checks that its own tokenisation of the text gives the same
token ids, and the run stops unless both trainers sampled from the same prompts in the
same order), the same G, prompts per step, completion budget, sampling settings, the
``grpo`` objective (PPO clip, eps 0.2, no KL and so no reference model, one pass over
each rollout batch, group-std advantages) with TRL's ``loss_type`` chosen to give the same
aggregation, AdamW with the same hyperparameters and a constant learning rate, gradient
clipping at 1, float32 on CPU without gradient checkpointing, the same micro-batch size
(gradient accumulation), the same verifier (ours, wrapped as a TRL reward function),
no evaluation, no checkpoints, minimal logging, and the same torch thread count.

Each trainer runs in its own fresh Python process (``bench/_vs_trl_child.py``), so its
peak resident set (``VmHWM``) is its own. The first ``--warmup`` steps are excluded from
the timings; a step is timed from the end of the previous one to its own end (so the
trainer's per-step bookkeeping counts). Generated tokens are completion tokens up to and
including EOS, counted the same way for both. Sampling differs between the trainers (different
random streams), so the mean and the longest completion length are printed too, with the
time per generated token (generation runs until the batch's longest completion ends and
the update pads to it, so a step's time follows the longest more than the mean). Where each trainer's step goes (generation, scoring, update) is
printed under the table, with each phase's share of its floor (``bench/floors.py``: the
FLOPs it needs over the fp32 matrix-product rate measured in the same run, and for
decoding the weights read per step over the measured memory bandwidth); on
``smollm2-135m`` also the rate of one decoding step's matrix products at the step's rows
as a share of that GEMM rate (``bench/decode_gemm.py``), the most of the generation floor
a decoder built on them can reach. Every preset
runs at each ``--threads`` count (default: 1 and all cores). ``--settings best`` adds
each trainer at its own best settings: gradient checkpointing on, bf16 only where the
CPU computes it natively (AVX512-BF16 or AMX), since emulated bf16 is slower than fp32;
on the CPU that table also has ``rlvr-async``, rlvr at ``rollout.staleness=1`` (one-step
off-policy, so not the equal configuration), with the waits of both sides.
On a shared machine read the times as rough.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

from vs_trl_config import SETTINGS, TRL_LOSS_TYPES, BenchSpec, model_dir_for, with_settings
from vs_trl_machine import busy_cores_line, decode_ceiling, machine_line, preset_floors, rates_line
from vs_trl_report import report
from vs_trl_runs import bench_preset

PRESETS = ("tiny", "smollm2-135m")


# Measured steps per preset unless --steps is given: a tiny step takes ~0.1 s, so a
# handful would be mostly noise; a smollm2-135m step takes ~30-50 s per trainer on one core.
DEFAULT_STEPS = {"tiny": 20, "smollm2-135m": 3}  # a model directory: 3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--presets",
        nargs="+",
        default=list(PRESETS),
        help=f"presets ({', '.join(PRESETS)}) or local model directories (a GPU throughput model)",
    )
    p.add_argument(
        "--steps",
        type=int,
        help=f"measured steps per trainer (default per preset: {DEFAULT_STEPS})",
    )
    p.add_argument("--warmup", type=int, default=1, help="steps run first and not timed")
    p.add_argument("--prompts", type=int, default=4, help="prompts per step")
    p.add_argument("--group-size", type=int, default=4, help="completions per prompt (G)")
    p.add_argument("--max-new-tokens", type=int, default=64, help="completion budget")
    p.add_argument("--micro-batch", type=int, default=8, help="sequences per forward/backward")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--loss-agg", choices=list(TRL_LOSS_TYPES), default="seq-mean-token-mean")
    p.add_argument("--lr", type=float, default=1e-6, help="AdamW learning rate")
    p.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=sorted({1, os.cpu_count() or 1}),
        help="torch thread counts, each a separate comparison (default: 1 and all cores)",
    )
    p.add_argument(
        "--settings",
        nargs="+",
        choices=SETTINGS,
        default=["equal"],
        help="equal: the shared configuration; best: each trainer at its own best settings",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument(
        "--sampler",
        choices=("lean", "vllm"),
        default="lean",
        help="rlvr's sampler; vllm also makes TRL generate with vLLM (colocate mode)",
    )
    p.add_argument(
        "--trl-defaults",
        action="store_true",
        help="also run TRL with its default bf16=True and gradient_checkpointing=True",
    )
    p.add_argument("--out", type=Path, help="write every measurement to this JSON file")
    return p.parse_args(argv)


def steps_for(args: argparse.Namespace, preset: str) -> int:
    """``--steps`` if given, else the preset's :data:`DEFAULT_STEPS`."""
    return args.steps if args.steps is not None else DEFAULT_STEPS.get(preset, 3)


def spec_for(
    args: argparse.Namespace, preset: str, *, threads: int = 1, settings: str = "equal"
) -> BenchSpec:
    """The :class:`BenchSpec` of ``preset`` from the command-line options."""
    spec = BenchSpec(
        preset=preset,
        model_dir=model_dir_for(preset),
        prompts_per_step=args.prompts,
        group_size=args.group_size,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        loss_agg=args.loss_agg,
        lr=args.lr,
        micro_batch=args.micro_batch,
        steps=steps_for(args, preset),
        warmup=args.warmup,
        threads=threads,
        seed=args.seed,
        device=args.device,
        sampler=args.sampler,
    )
    return with_settings(spec, settings)


def trainers_for(spec: BenchSpec, extra: list[str]) -> list[str]:
    """The trainers of ``spec``'s table: rlvr, and at best settings on the CPU also rlvr at
    ``rollout.staleness=1`` (its generation worker runs on the CPU only); then TRL."""
    asynchronous = ["rlvr-async"] if spec.settings == "best" and spec.device == "cpu" else []
    return ["rlvr", *asynchronous, "trl", *extra]


def main(argv: list[str] | None = None) -> int:
    """Benchmark every preset asked for; print (and optionally save) the results."""
    args = parse_args(argv)
    extra = ["trl-defaults"] if args.trl_defaults else []
    print(machine_line(), flush=True)
    out: dict[str, Any] = {"machine": machine_line(), "started": time.time(), "runs": []}
    for preset in args.presets:
        for threads in args.threads:
            for settings in args.settings:
                spec = spec_for(args, preset, threads=threads, settings=settings)
                floors = preset_floors(spec) if spec.device == "cpu" else None
                print(f"{preset}, {threads} thread(s), {settings}: {spec.model_dir}", flush=True)
                busy = None
                if floors is not None:
                    print(rates_line(floors, threads), flush=True)
                    busy = busy_cores_line(floors, threads)
                    if busy:
                        print(busy, flush=True)
                run = bench_preset(spec, trainers_for(spec, extra))
                run["rates"] = None if floors is None else dataclasses.asdict(floors.rates)
                run["busy_cores"] = busy
                out["runs"].append(run)
                print("\n".join(report(preset, spec, run["results"], floors)), flush=True)
                if floors is not None and preset == "smollm2-135m" and settings == "equal":
                    run["decode_ceiling"] = decode_ceiling(spec, floors)
                    print(run["decode_ceiling"], flush=True)
                print(machine_line(), flush=True)
    out["machine_after"] = machine_line()
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
