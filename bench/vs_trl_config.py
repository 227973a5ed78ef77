"""``bench/vs_trl.py``'s shared configuration (:class:`BenchSpec`) and its translation
into our ``TrainConfig`` and TRL's ``GRPOConfig`` arguments, at equal or each trainer's best
settings (bf16 only where this CPU computes it natively)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SETTINGS = ("equal", "best")

TRAINERS = ("rlvr", "rlvr-async", "trl", "trl-defaults")
"""The child's trainers; ``rlvr-async`` is ours at ``rollout.staleness=1`` (one-step off-policy)."""


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


def rlvr_config(spec: BenchSpec, output_dir: str, *, staleness: int = 0):
    """Our ``TrainConfig`` for ``spec``: no evaluation, checkpoints, plots or progress bar
    (``staleness``: ``rollout.staleness``, the generation worker's bound)."""
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
            staleness=staleness,
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


def model_dir_for(preset: str) -> str:
    """The local directory of ``preset`` (built and cached on first use)."""
    from rlvr.models import resolve_model_path

    path = resolve_model_path(preset)
    if not Path(path).is_dir():
        raise ValueError(f"preset {preset!r} did not resolve to a local directory ({path!r})")
    return path
