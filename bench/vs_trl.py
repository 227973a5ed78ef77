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
CPU computes it natively (AVX512-BF16 or AMX), since emulated bf16 is slower than fp32.
On a shared machine read the times as rough.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decode_gemm import product_rates
from floors import (
    ModelShape,
    Rates,
    StepWork,
    generation_floor,
    measure_rates,
    update_floor,
    update_flops,
)

PRESETS = ("tiny", "smollm2-135m")
# Measured steps per preset unless --steps is given: a tiny step takes ~0.1 s, so a
# handful would be mostly noise; a smollm2-135m step takes ~30-50 s per trainer on one core.
DEFAULT_STEPS = {"tiny": 20, "smollm2-135m": 3}  # a model directory: 3
TRAINERS = ("rlvr", "trl", "trl-defaults")
CHILD = Path(__file__).with_name("_vs_trl_child.py")
SETTINGS = ("equal", "best")


@dataclass(frozen=True)
class Targets:
    """What the comparison should show (``None``: not checked)."""

    speed: float = 2.5
    """rlvr's steps/s over TRL's, at least (every preset, every thread count)."""
    memory: float | None = 0.6
    """rlvr's peak RSS over TRL's on ``smollm2-135m``, at most."""
    generation_floor: float | None = 0.6
    """rlvr's generation floor over its generation time on ``smollm2-135m``, at least."""
    update_gemm: float | None = 0.8
    """rlvr's update FLOP rate over the measured GEMM rate on ``smollm2-135m``, at least."""


TARGETS = Targets()

# Our aggregation mode -> the TRL ``loss_type`` computing the same loss over an optimiser
# step when every micro-batch holds the same number of sequences:
#   grpo:    per-micro-batch mean over sequences of token means, divided by the accumulation steps;
#   dapo:    token sum divided by the tokens of the whole generation batch;
#   dr_grpo: token sum divided by (micro-batch sequences x max_completion_length x accumulation steps).
TRL_LOSS_TYPES = {
    "seq-mean-token-mean": "grpo",
    "token-mean": "dapo",
    "seq-mean-token-sum-norm": "dr_grpo",
}

# The task the prompts and the verifier come from (the demo's).
TASK = "chain_sum"
TASK_CONFIG = {"min_terms": 2, "max_terms": 5, "min_digits": 1, "max_digits": 1}


@dataclass(frozen=True)
class BenchSpec:
    """Everything both trainers are configured from (written to JSON for the child processes)."""

    preset: str
    """Preset name shown in the table."""
    model_dir: str
    """Local Hugging Face directory both trainers load."""
    prompts_per_step: int = 4
    """Prompts (groups) per step."""
    group_size: int = 4
    """Completions per prompt (G, TRL ``num_generations``)."""
    max_new_tokens: int = 64
    """Completion budget (TRL ``max_completion_length``)."""
    temperature: float = 1.0
    """Sampling temperature."""
    top_p: float = 1.0
    """Nucleus mass."""
    top_k: int = 0
    """Top-k (0: off)."""
    loss_agg: str = "seq-mean-token-mean"
    """Our aggregation mode; TRL's ``loss_type`` follows from :data:`TRL_LOSS_TYPES`."""
    lr: float = 1e-6
    """AdamW learning rate (constant)."""
    micro_batch: int = 8
    """Sequences per forward/backward pass (TRL ``per_device_train_batch_size``)."""
    steps: int = 3
    """Measured steps."""
    warmup: int = 1
    """Steps run first and left out of the timings."""
    threads: int = 1
    """torch threads in each child."""
    seed: int = 0
    """Seed of both runs."""
    gym_config: dict[str, int] = field(default_factory=lambda: dict(TASK_CONFIG))
    """reasoning-gym options of the prompt set."""
    settings: str = "equal"
    """``equal``: the configuration above for both; ``best``: each at its own best settings."""
    gradient_checkpointing: bool = False
    """Recompute activations in backward (both trainers)."""
    bf16: bool = False
    """bf16 autocast for rlvr, ``bf16=True`` for TRL."""
    device: str = "cpu"
    """``cpu`` or ``cuda``."""
    sampler: str = "lean"
    """rlvr's sampler; ``vllm`` also switches TRL to vLLM (colocated)."""

    def __post_init__(self) -> None:
        batch = self.prompts_per_step * self.group_size
        for name in ("prompts_per_step", "micro_batch", "steps", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 (TRL needs it), got {self.group_size}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")
        if batch % self.micro_batch:
            raise ValueError(
                f"micro_batch ({self.micro_batch}) must divide the rollout batch "
                f"({self.prompts_per_step} prompts x {self.group_size} = {batch}) for the losses to match"
            )
        if self.settings not in SETTINGS:
            raise ValueError(f"settings must be one of {list(SETTINGS)}, got {self.settings!r}")
        if self.loss_agg not in TRL_LOSS_TYPES:
            raise ValueError(
                f"loss_agg must be one of {list(TRL_LOSS_TYPES)}, got {self.loss_agg!r}"
            )

    @property
    def batch(self) -> int:
        """Sequences per step."""
        return self.prompts_per_step * self.group_size

    @property
    def total_steps(self) -> int:
        """Warm-up plus measured steps."""
        return self.warmup + self.steps

    @property
    def num_prompts(self) -> int:
        """Size of the fixed prompt list: each step takes the next ``prompts_per_step``."""
        return self.total_steps * self.prompts_per_step


# ---------------------------------------------------------------- configuration mapping


def data_config(spec: BenchSpec):
    """The prompt set: the first ``num_prompts`` generated ``chain_sum`` problems, in order."""
    from rlvr.train.config import DataConfig, GymConfig

    return DataConfig(
        train=f"reasoning_gym:{TASK}",
        gym=GymConfig(train_size=spec.num_prompts, seed=spec.seed, config=dict(spec.gym_config)),
        max_prompt_tokens=128,
        shuffle=False,
    )


def reward_config():
    """Our verifier for the task (1 correct / 0 wrong), scored in-process."""
    from rlvr.train.config import RewardConfig

    return RewardConfig(verifier=f"reasoning_gym:{TASK}")


def rlvr_config(spec: BenchSpec, output_dir: str):
    """Our ``TrainConfig`` for ``spec``: no evaluation, checkpoints, plots or progress bar."""
    from rlvr.train.config import (
        CheckpointConfig,
        LogConfig,
        ModelConfig,
        ObjectiveConfig,
        OptimConfig,
        RolloutConfig,
        TrainConfig,
    )

    return TrainConfig(
        steps=spec.total_steps,
        seed=spec.seed,
        threads=spec.threads,
        model=ModelConfig(
            name=spec.model_dir,
            dtype="float32",
            autocast="bf16" if spec.bf16 else "none",
            device=spec.device,
            gradient_checkpointing=spec.gradient_checkpointing,
        ),
        data=data_config(spec),
        reward=reward_config(),
        rollout=RolloutConfig(
            prompts_per_step=spec.prompts_per_step,
            group_size=spec.group_size,
            max_new_tokens=spec.max_new_tokens,
            temperature=spec.temperature,
            top_p=spec.top_p,
            top_k=spec.top_k,
            sampler=spec.sampler,
        ),
        objective=ObjectiveConfig(name="grpo", advantage="group_std", loss_agg=spec.loss_agg),
        optim=OptimConfig(
            lr=spec.lr,
            betas=(0.9, 0.999),
            eps=1e-8,
            weight_decay=0.0,
            max_grad_norm=1.0,
            micro_batch_size=spec.micro_batch,
        ),
        log=LogConfig(
            output_dir=output_dir,
            tensorboard=False,
            progress="off",
            samples_per_step=0,
            plots=False,
        ),
        checkpoint=CheckpointConfig(every=0, save_final=False),
    )


def trl_kwargs(spec: BenchSpec, output_dir: str, *, trl_defaults: bool = False) -> dict[str, Any]:
    """``GRPOConfig`` keyword arguments matching :func:`rlvr_config`.

    ``trl_defaults`` leaves precision and gradient checkpointing at TRL's own defaults
    (``bf16=True``, ``gradient_checkpointing=True``) instead of ``spec``'s. With
    ``spec.sampler == "vllm"`` TRL generates with vLLM too, colocated on the GPU.
    """
    accumulation = spec.batch // spec.micro_batch
    kwargs: dict[str, Any] = {
        "output_dir": output_dir,
        "max_steps": spec.total_steps,
        "seed": spec.seed,
        "use_cpu": spec.device == "cpu",
        "model_init_kwargs": {"dtype": "float32"},
        "disable_dropout": True,
        "shuffle_dataset": False,
        # One generation of prompts_per_step x G completions per optimiser step, split
        # into micro-batches of the same size as ours.
        "per_device_train_batch_size": spec.micro_batch,
        "gradient_accumulation_steps": accumulation,
        "steps_per_generation": accumulation,
        "num_generations": spec.group_size,
        "max_completion_length": spec.max_new_tokens,
        "temperature": spec.temperature,
        "top_p": spec.top_p,
        "top_k": spec.top_k,
        "use_vllm": spec.sampler == "vllm",
        # The objective: PPO clip at 0.2 both sides, no KL, one pass, group-std advantages.
        "loss_type": TRL_LOSS_TYPES[spec.loss_agg],
        "epsilon": 0.2,
        "beta": 0.0,
        "num_iterations": 1,
        "scale_rewards": "group",
        "mask_truncated_completions": False,
        # The optimiser: fused AdamW, constant learning rate, clipping at 1.
        "optim": "adamw_torch_fused",
        "learning_rate": spec.lr,
        "adam_beta1": 0.9,
        "adam_beta2": 0.999,
        "adam_epsilon": 1e-8,
        "weight_decay": 0.0,
        "max_grad_norm": 1.0,
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        # No evaluation, checkpoints or logging beyond what the trainer always does.
        "eval_strategy": "no",
        "save_strategy": "no",
        "logging_strategy": "no",
        "report_to": "none",
        "disable_tqdm": True,
        "log_completions": False,
        "dataloader_num_workers": 0,
    }
    if spec.sampler == "vllm":
        kwargs.update(vllm_mode="colocate")
    if not trl_defaults:
        kwargs.update(
            bf16=spec.bf16, fp16=False, gradient_checkpointing=spec.gradient_checkpointing
        )
    return kwargs


def native_bf16() -> bool:
    """Whether this CPU computes bf16 in hardware (AVX512-BF16 or AMX); else torch emulates it."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(f in flags.split() for f in ("avx512_bf16", "amx_bf16"))


def with_settings(spec: BenchSpec, settings: str) -> BenchSpec:
    """``spec`` at ``equal`` settings (fp32, no checkpointing) or each trainer's ``best``.

    Best: gradient checkpointing on (TRL's default; both trainers then hold the least
    activations), bf16 where the CPU has it natively (on a GPU always).
    """
    if settings == "equal":
        return dataclasses.replace(spec, settings="equal", gradient_checkpointing=False, bf16=False)
    bf16 = spec.device != "cpu" or native_bf16()
    return dataclasses.replace(spec, settings="best", gradient_checkpointing=True, bf16=bf16)


# ---------------------------------------------------------------- model


def model_dir_for(preset: str) -> str:
    """The local directory of ``preset`` (built and cached on first use)."""
    from rlvr.models import resolve_model_path

    path = resolve_model_path(preset)
    if not Path(path).is_dir():
        raise ValueError(f"preset {preset!r} did not resolve to a local directory ({path!r})")
    return path


# ---------------------------------------------------------------- summary and table


@dataclass(frozen=True)
class Summary:
    """One trainer's numbers over the measured steps."""

    trainer: str
    """``rlvr``, ``trl`` or ``trl-defaults``."""
    seconds_per_step: float
    """Median step time."""
    tokens_per_s: float
    """Generated completion tokens / time."""
    length_mean: float
    """Mean completion length in tokens (EOS included)."""
    longest_mean: float
    """Mean over steps of the step's longest completion: the decode steps generation runs."""
    ms_per_token: float
    """Time per generated completion token."""
    peak_rss_mb: float
    """Peak resident set of the whole process (MiB)."""
    setup_rss_mb: float
    """Resident set when the first step started (model, optimiser state not yet allocated)."""
    phases: dict[str, float]
    """Median seconds per step of ``generate``, ``score``, ``update``, ``other``."""
    peak_gpu_mb: float | None = None
    """Peak GPU memory torch allocated (``None`` on CPU)."""
    floor_shares: dict[str, float] = field(default_factory=dict)
    """``generate`` / ``update``: the phase's floor over its time, summed over the measured
    steps; ``update_gemm``: the update's FLOP rate over the GEMM rate (empty: not measured)."""

    @property
    def steps_per_s(self) -> float:
        """Steps per second (from the median step time)."""
        return 1.0 / self.seconds_per_step


@dataclass(frozen=True)
class Floors:
    """What the floors of a preset need: the model's shape and the machine's rates."""

    shape: ModelShape
    """The model."""
    rates: Rates
    """Measured at the run's thread count."""

    def shares(self, steps: list[dict[str, Any]]) -> dict[str, float]:
        """Floor / time of generation and update, and the update's FLOP rate / GEMM rate."""
        works = [
            StepWork(
                tuple(s["prompt_lengths"]), s["completions"], int(s["tokens"]), int(s["longest"])
            )
            for s in steps
        ]
        gen = sum(s["phases"]["generate"] for s in steps)
        upd = sum(s["phases"]["update"] for s in steps)
        gen_floor = sum(generation_floor(self.shape, w, self.rates) for w in works)
        upd_floor = sum(update_floor(self.shape, w, self.rates) for w in works)
        upd_flops = sum(update_flops(self.shape, w) for w in works)
        return {
            "generate": gen_floor / gen if gen else 0.0,
            "update": upd_floor / upd if upd else 0.0,
            "update_gemm": upd_flops / upd / self.rates.gemm_flops if upd else 0.0,
        }


def summarize(result: dict[str, Any], warmup: int, floors: Floors | None = None) -> Summary:
    """:class:`Summary` of a child's result, leaving out the first ``warmup`` steps.

    ``floors``: also each phase's share of its floor (steps must carry ``prompt_lengths``).
    """
    steps = result["steps"][warmup:]
    if not steps:
        raise ValueError(f"{result['trainer']}: no measured steps after {warmup} warm-up step(s)")
    seconds = [s["seconds"] for s in steps]
    tokens = sum(s["tokens"] for s in steps)
    completions = sum(s["completions"] for s in steps)
    phases = {
        name: statistics.median(s["phases"][name] for s in steps)
        for name in ("generate", "score", "update", "other")
    }
    return Summary(
        trainer=result["trainer"],
        seconds_per_step=statistics.median(seconds),
        tokens_per_s=tokens / sum(seconds),
        length_mean=tokens / completions,
        longest_mean=statistics.fmean(s["longest"] for s in steps),
        ms_per_token=1000 * sum(seconds) / tokens,
        peak_rss_mb=result["peak_rss_mb"],
        setup_rss_mb=result["setup_rss_mb"],
        peak_gpu_mb=result.get("peak_gpu_mb"),
        phases=phases,
        floor_shares={} if floors is None else floors.shares(steps),
    )


ROWS = (
    ("seconds / step (median)", "seconds_per_step", "{:.2f}"),
    ("steps / s", "steps_per_s", "{:.3f}"),
    ("tokens / s (generated)", "tokens_per_s", "{:.0f}"),
    ("mean completion length", "length_mean", "{:.1f}"),
    ("longest completion / step (mean)", "longest_mean", "{:.1f}"),
    ("ms / generated token", "ms_per_token", "{:.2f}"),
    ("peak RSS (MiB)", "peak_rss_mb", "{:.0f}"),
    ("RSS at first step (MiB)", "setup_rss_mb", "{:.0f}"),
)


def _ratio(ours: float, theirs: float) -> str:
    """``ours / theirs`` as ``1.23x``; ``n/a`` when ``theirs`` is zero."""
    return f"{ours / theirs:.2f}x" if theirs else "n/a"


FLOOR_ROWS = (
    ("  generate: floor / time", "generate"),
    ("  update: floor / time", "update"),
    ("  update: FLOP rate / GEMM rate", "update_gemm"),
)


def format_table(summaries: list[Summary]) -> list[str]:
    """Markdown table: one column per trainer, then ``rlvr / <trainer>`` for each other one."""
    others = summaries[1:]
    head = ["", *(s.trainer for s in summaries), *(f"rlvr / {s.trainer}" for s in others)]
    rows = [(label, fmt, [getattr(s, attr) for s in summaries]) for label, attr, fmt in ROWS] + [
        (f"  {phase} s / step", "{:.2f}", [s.phases[phase] for s in summaries])
        for phase in ("generate", "score", "update", "other")
    ]
    if all(s.peak_gpu_mb is not None for s in summaries):
        rows.append(("peak GPU memory (MiB)", "{:.0f}", [s.peak_gpu_mb for s in summaries]))
    if all(s.floor_shares for s in summaries):
        rows += [
            (label, "{:.0%}", [s.floor_shares[key] for s in summaries]) for label, key in FLOOR_ROWS
        ]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for label, fmt, values in rows:
        ratios = [_ratio(values[0], v) for v in values[1:]]
        lines.append("| " + " | ".join([label, *(fmt.format(v) for v in values), *ratios]) + " |")
    return lines


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def target_lines(preset: str, ours: Summary, trl: Summary, targets: Targets = TARGETS) -> list[str]:
    """Whether ``targets`` are met against the matched TRL run (memory and floors on ``smollm2-135m``)."""
    speed = ours.steps_per_s / trl.steps_per_s
    memory = ours.peak_rss_mb / trl.peak_rss_mb
    per_token = trl.ms_per_token / ours.ms_per_token
    lines = [
        f"steps/s rlvr / TRL = {speed:.2f}x (target >= {targets.speed:g}x): "
        f"{_verdict(speed >= targets.speed)}",
        # Sampling differs, so the completions (and the work per step) differ in length.
        f"  per generated token: {per_token:.2f}x as fast "
        f"(mean completion length {ours.length_mean:.1f} vs {trl.length_mean:.1f} tokens, "
        f"longest per step {ours.longest_mean:.1f} vs {trl.longest_mean:.1f})",
    ]
    if preset != "smollm2-135m":
        return lines
    if targets.memory is not None:
        lines.append(
            f"peak RSS rlvr / TRL = {memory:.2f}x (target <= {targets.memory:g}x): "
            f"{_verdict(memory <= targets.memory)}"
        )
    shares = ours.floor_shares
    if shares and targets.generation_floor is not None:
        lines.append(
            f"generation at {shares['generate']:.0%} of its floor "
            f"(target >= {targets.generation_floor:.0%}): "
            f"{_verdict(shares['generate'] >= targets.generation_floor)}"
        )
    if shares and targets.update_gemm is not None:
        lines.append(
            f"update at {shares['update_gemm']:.0%} of the GEMM rate "
            f"(target >= {targets.update_gemm:.0%}): "
            f"{_verdict(shares['update_gemm'] >= targets.update_gemm)}"
        )
    return lines


# ---------------------------------------------------------------- running


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


def child_env(threads: int) -> dict[str, str]:
    """Environment of both children: offline, ``src`` importable, thread pools pinned."""
    src = str(Path(__file__).resolve().parents[1] / "src")
    path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
    return {
        **os.environ,
        "PYTHONPATH": path,
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
    }


def run_child(spec: BenchSpec, trainer: str, work: Path) -> dict[str, Any]:
    """Run one trainer in a fresh interpreter; its result dict."""
    spec_file, out_file = work / f"{trainer}-spec.json", work / f"{trainer}-result.json"
    spec_file.write_text(json.dumps(dataclasses.asdict(spec)))
    cmd = [sys.executable, str(CHILD), str(spec_file), trainer, str(out_file), str(work / trainer)]
    proc = subprocess.run(cmd, env=child_env(spec.threads), capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise RuntimeError(f"{trainer} run for {spec.preset} failed:\n{tail}")
    return json.loads(out_file.read_text())


def bench_preset(spec: BenchSpec, trainers: list[str]) -> dict[str, Any]:
    """Run every trainer on ``spec``; the raw results and their summaries."""
    results = {}
    with tempfile.TemporaryDirectory(prefix=f"vs_trl-{Path(spec.preset).name}-") as tmp:
        for trainer in trainers:
            print(f"  running {trainer} ...", flush=True)
            results[trainer] = run_child(spec, trainer, Path(tmp))
    check_same_prompts(spec, results)
    return {"spec": dataclasses.asdict(spec), "results": results}


def check_same_prompts(spec: BenchSpec, results: dict[str, Any]) -> None:
    """Every trainer sampled from the same ``num_prompts`` prompt token ids, in the same order."""
    used = {t: (r["prompts_used"], r["prompt_hash"]) for t, r in results.items()}
    if any(n != spec.num_prompts for n, _ in used.values()):
        raise RuntimeError(f"expected {spec.num_prompts} prompts per trainer, got {used}")
    if len({h for _, h in used.values()}) != 1:
        raise RuntimeError(f"the trainers sampled from different prompts: {used}")


def heading(preset: str, spec: BenchSpec) -> str:
    """The table's heading: the shared configuration, and the settings when not equal."""
    line = (
        f"## {preset}: {spec.prompts_per_step} prompts x G={spec.group_size}, "
        f"{spec.max_new_tokens} new tokens, micro-batch {spec.micro_batch}, "
        f"{spec.threads} thread(s), {spec.steps} measured step(s) after {spec.warmup} warm-up"
    )
    if spec.settings == "best":
        precision = "bf16" if spec.bf16 else "fp32 (no native bf16)"
        line += f"; each trainer at its best: gradient checkpointing, {precision}"
    if spec.device != "cpu" or spec.sampler != "lean":
        line += f"; {spec.device}, sampler {spec.sampler}"
    return line


def report(
    preset: str,
    spec: BenchSpec,
    results: dict[str, Any],
    floors: Floors | None = None,
    targets: Targets = TARGETS,
) -> list[str]:
    """The preset's heading, table and target verdicts (targets at equal settings only)."""
    summaries = [summarize(results[t], spec.warmup, floors) for t in results]
    lines = [heading(preset, spec), "", *format_table(summaries), ""]
    if spec.settings == "equal":
        lines += target_lines(preset, summaries[0], summaries[1], targets)
    return lines


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo``."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown CPU"
    return next(
        (
            line.split(":", 1)[1].strip()
            for line in text.splitlines()
            if line.startswith("model name")
        ),
        "unknown CPU",
    )


def machine_line() -> str:
    """CPU model, core count, native bf16 and the 1/5/15-minute load averages."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    bf16 = "native bf16" if native_bf16() else "no native bf16"
    return f"machine: {cpu_model()}, {os.cpu_count()} cores (nproc), {bf16}, load average {load}"


def preset_floors(spec: BenchSpec) -> Floors:
    """The model's shape and the machine's rates at ``spec.threads``, measured now."""
    from safetensors import safe_open
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(spec.model_dir)
    params = 0
    with safe_open(str(Path(spec.model_dir) / "model.safetensors"), "pt") as f:
        for key in f.keys():  # noqa: SIM118 - safe_open has keys(), not iteration
            params += math.prod(f.get_slice(key).get_shape())
    shape = ModelShape.from_config(config, params)
    return Floors(shape, measure_rates(shape, spec.threads))


def rates_line(floors: Floors, threads: int) -> str:
    """The measured rates the floors use."""
    r = floors.rates
    return (
        f"measured at {threads} thread(s): fp32 GEMM {r.gemm_flops / 1e9:.1f} GFLOP/s on the "
        f"model's layer shapes, memory read {r.read_bytes / 1e9:.1f} GB/s"
    )


BUSY_SCALING = 1.3
"""Below this GEMM rate at N threads over the rate at 1 thread, the cores were not free."""


def busy_cores_line(floors: Floors, threads: int) -> str | None:
    """A warning when the GEMM rate at ``threads`` barely exceeds the 1-thread rate measured
    now (other work held the cores, so this thread count's timings are suspect)."""
    if threads <= 1:
        return None
    single = measure_rates(floors.shape, 1).gemm_flops
    scaling = floors.rates.gemm_flops / single
    if scaling >= BUSY_SCALING:
        return None
    return (
        f"WARNING: the GEMM rate at {threads} threads is {scaling:.2f}x the 1-thread rate "
        f"({single / 1e9:.1f} GFLOP/s): the cores were not free, so the timings at "
        f"{threads} threads are suspect; run again on an idle machine"
    )


def decode_ceiling_line(rows: int, decode_flops: float, gemm_flops: float) -> str:
    """The rate of decoding's products at ``rows`` rows as a share of the floor's GEMM rate."""
    return (
        f"  decoding's matrix products at {rows} rows run at {decode_flops / 1e9:.1f} GFLOP/s, "
        f"{decode_flops / gemm_flops:.0%} of that GEMM rate (all weights streamed; "
        "bench/decode_gemm.py): the most of the generation floor a decoder built on them reaches"
    )


def decode_ceiling(spec: BenchSpec, floors: Floors) -> str:
    """:func:`decode_ceiling_line` measured now, at the step's completions as rows."""
    rows = spec.prompts_per_step * spec.group_size
    streamed = product_rates(floors.shape, rows, spec.threads)["streamed"]
    return decode_ceiling_line(rows, streamed, floors.rates.gemm_flops)


def main(argv: list[str] | None = None) -> int:
    """Benchmark every preset asked for; print (and optionally save) the results."""
    args = parse_args(argv)
    trainers = ["rlvr", "trl"] + (["trl-defaults"] if args.trl_defaults else [])
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
                run = bench_preset(spec, trainers)
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
