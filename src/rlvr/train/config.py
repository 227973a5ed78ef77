"""Typed configuration of ``rlvr train`` and ``rlvr sft``: one small frozen dataclass per concern.

Every field has a one-line docstring; checks that involve one section live in its
``__post_init__``, checks across sections in :class:`TrainConfig`'s. Configs are built
from YAML plus ``key=value`` overrides by :mod:`rlvr.train.overrides`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

from rlvr.evaluation.harness import EvalConfig as HarnessConfig
from rlvr.generation import SamplingConfig
from rlvr.generation.registry import named_options, sampler_entry
from rlvr.objectives.config import ObjectiveConfig
from rlvr.objectives.contrast import Contrast, parse_contrast
from rlvr.rewards.scoring import ScoringConfig
from rlvr.seeds import check_seed

_FLOAT32_MAX = 3.4028234663852886e38
"""The largest float32 number: rewards, advantages and losses are float32 tensors."""


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def _one_of(name: str, value: str, valid: tuple[str, ...]) -> None:
    _check(value in valid, f"{name} must be one of {list(valid)}, got {value!r}")


@dataclass(frozen=True)
class LoraConfig:
    """Low-rank adapters (LoRA, Hu et al. 2021, eq. 3) trained instead of the model's weights."""

    rank: int = 0
    """Rank r of each adapter; 0 trains every weight of the model (no adapters)."""
    alpha: float = 32.0
    """Adapter scale numerator: a layer's weight becomes ``W + alpha / rank * B @ A``."""
    targets: tuple[str, ...] = ("all-linear",)
    """Layers given adapters: module names (``q_proj``, ``v_proj``) or ``all-linear`` (every linear layer but the output head)."""

    def __post_init__(self) -> None:
        _check(self.rank >= 0, f"model.lora.rank must be >= 0, got {self.rank}")
        _check(
            0 < self.alpha < math.inf, f"model.lora.alpha must be > 0 and finite, got {self.alpha}"
        )
        _check(
            bool(self.targets) and all(self.targets),
            f"model.lora.targets must name at least one layer, each by a name; got {list(self.targets)}",
        )
        _check(
            "all-linear" not in self.targets or len(self.targets) == 1,
            f"model.lora.targets: all-linear stands alone (every linear layer but the output "
            f"head); got [{', '.join(self.targets)}]",
        )


@dataclass(frozen=True)
class ModelConfig:
    """Which model is trained and how its forward passes run."""

    name: str = "tiny"
    """Preset (``tiny``, ``smollm2-135m``), local directory (model or PEFT adapters), hub name."""
    dtype: str = "float32"
    """Parameter dtype: ``float32``, ``bfloat16`` or ``float16``."""
    autocast: Literal["none", "bf16"] = "none"
    """Run forward passes (rollout and update) under bfloat16 autocast."""
    device: str = "auto"
    """Torch device for the policy (and the reference model): ``auto`` is the first CUDA GPU torch sees, else the CPU; or ``cpu``, ``cuda:1``, ``mps``, ..."""
    chunk_size: int = 1024
    """Positions per chunk when log-probs and entropy are computed from logits."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass to save memory."""
    share_prompt: bool = True
    """Log-prob passes compute each distinct prompt once, without padding (same result; models it cannot reproduce fall back with a warning)."""
    trim_heap: bool = True
    """On CPU, give the C heap's free pages back to the OS before each backward pass: lower peak memory, same results (:mod:`rlvr.train.heap`)."""
    lora: LoraConfig = field(default_factory=LoraConfig)
    """Train low-rank adapters only (``model.lora.rank=16``); checkpoints hold the merged model."""

    def __post_init__(self) -> None:
        _one_of("model.dtype", self.dtype, ("float32", "bfloat16", "float16"))
        _one_of("model.autocast", self.autocast, ("none", "bf16"))
        _check(self.chunk_size >= 1, f"model.chunk_size must be >= 1, got {self.chunk_size}")


@dataclass(frozen=True)
class GymConfig:
    """Task sets generated when a source reads ``reasoning_gym:<task>`` or ``code_tasks:<family|all>``."""

    train_size: int = 2000
    """Training problems to generate."""
    eval_size: int = 200
    """Held-out problems to generate (the training set never contains their questions)."""
    seed: int = 0
    """Seed of the training set (reasoning-gym seeds entry ``i`` with ``seed + i``)."""
    eval_seed: int | None = None
    """Seed of the held-out set (``None``: ``seed + 1_000_000``, far from the training entries)."""
    config: dict[str, Any] = field(default_factory=dict)
    """Task options: of ``reasoning_gym.create_dataset`` (e.g. ``max_terms``) or of the code task generator (``max_level``, ``tests``)."""

    def __post_init__(self) -> None:
        _check(self.train_size >= 1 and self.eval_size >= 1, "data.gym sizes must be >= 1")
        check_seed("data.gym.seed", self.seed)
        if self.eval_seed is not None:
            check_seed("data.gym.eval_seed", self.eval_seed)

    @property
    def held_out_seed(self) -> int:
        """The seed the held-out set is generated with."""
        return self.seed + 1_000_000 if self.eval_seed is None else self.eval_seed


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Where the prompts come from and how they are turned into model input."""

    train: str
    """Training prompts: a JSONL/Parquet file, a named dataset, a hub name, ``reasoning_gym:<task>`` or ``code_tasks:<family|all>``."""
    eval: str | None = None
    """Held-out prompts for periodic evaluation (``None``: no evaluation)."""
    gym: GymConfig = field(default_factory=GymConfig)
    """Sizes and seed of generated ``reasoning_gym:`` / ``code_tasks:`` sets (cached under ``$RLVR_CACHE/data``)."""
    fields: str | None = None
    """Named field mapping (``reasoning_gym``, ``dapo-math``, ...); ``None``: ``prompt_field``/``answer_field`` (a file of rows as ``rlvr data gen`` writes them, with those at their defaults: its rows' own mapping)."""
    prompt_field: str = "prompt"
    """Column holding the question (when ``fields`` is ``None``)."""
    answer_field: str = "answer"
    """Column holding the reference answer (when ``fields`` is ``None``)."""
    split: str | None = None
    """Split of hub datasets and dataset directories (``None``: a named dataset's own split, else ``train``); ``data.eval``'s too unless ``eval_split`` is set."""
    eval_split: str | None = None
    """Split of ``data.eval`` (``None``: ``split``; a local folder or hub dataset of several splits then needs one)."""
    eval_fields: str | None = None
    """Named field mapping of ``data.eval`` (``None``: as ``data.train``'s, unless ``eval_prompt_field``/``eval_answer_field`` are set)."""
    eval_prompt_field: str | None = None
    """Column holding ``data.eval``'s question (``None``: ``prompt_field``); with this or ``eval_answer_field`` set, ``fields`` maps only ``data.train``."""
    eval_answer_field: str | None = None
    """Column holding ``data.eval``'s reference answer (``None``: ``answer_field``)."""
    template: str | None = None
    """Wraps each prompt; ``{prompt}`` marks where (``None``: the dataset's own or none)."""
    system_prompt: str | None = None
    """System message before each prompt: through the chat template, or without one its text and a blank line."""
    max_prompt_tokens: int = 512
    """Longest prompt in tokens; longer ones are skipped or truncated (see ``long_prompts``)."""
    long_prompts: Literal["skip", "truncate"] = "skip"
    """``skip`` drops over-long prompts, ``truncate`` keeps their last ``max_prompt_tokens``."""
    max_train_examples: int | None = None
    """Use only the first N training rows (``None``: all)."""
    max_eval_examples: int | None = None
    """Use only the first N held-out rows (``None``: all)."""
    shuffle: bool = True
    """Reshuffle the training prompts every epoch (seeded by ``seed`` and the epoch)."""

    def __post_init__(self) -> None:
        _check(bool(self.train), "data.train must name the training prompts (a file or dataset)")
        _check(
            self.max_prompt_tokens >= 1,
            f"data.max_prompt_tokens must be >= 1, got {self.max_prompt_tokens}",
        )
        _one_of("data.long_prompts", self.long_prompts, ("skip", "truncate"))
        _check(
            self.template is None or "{prompt}" in self.template,
            f"data.template must contain '{{prompt}}', got {self.template!r}",
        )
        for name in ("max_train_examples", "max_eval_examples"):
            value = getattr(self, name)
            _check(value is None or value >= 1, f"data.{name} must be >= 1 or null, got {value}")
        _check(
            self.eval_fields is None
            or (self.eval_prompt_field is None and self.eval_answer_field is None),
            "give data.eval_fields or data.eval_prompt_field / data.eval_answer_field, not both",
        )

    def held_out(self) -> DataConfig:
        """This config with ``data.eval``'s own field keys in place of ``data.train``'s (itself
        when none is set), as ``data.eval`` is read."""
        if self.eval_fields is not None:
            return dataclasses.replace(self, fields=self.eval_fields)
        if self.eval_prompt_field is None and self.eval_answer_field is None:
            return self
        prompt = self.eval_prompt_field or self.prompt_field
        return dataclasses.replace(
            self,
            fields=None,
            prompt_field=prompt,
            answer_field=self.eval_answer_field or self.answer_field,
        )


@dataclass(frozen=True)
class RewardConfig:
    """How completions are scored."""

    verifier: str = "math"
    """Verifier spec ``name[:argument][+format]``, e.g. ``math``, ``reasoning_gym:chain_sum``, ``math+format``; ``my_module.name`` for one your module registers."""
    correct: float = 1.0
    """Reward of a correct completion."""
    wrong: float = 0.0
    """Reward of a wrong completion and of a failed verification (``-1`` gives ETR's ``+1/-1``)."""
    options: dict[str, Any] = field(default_factory=dict)
    """Further verifier options (e.g. ``format_penalty``; ``extract: flexible`` scores the last number)."""
    timeout_s: float | None = 10.0
    """Time limit per completion (``None``: none)."""
    workers: int = 0
    """Verifier worker processes (0: score in the training process)."""
    allow_unconfined: bool = False
    """Train with the ``code`` verifier even where its programs can read your files (``fallback-uid``, ``fallback-minimal``)."""
    overlong_buffer: int = 0
    """DAPO's soft overlong punishment (eq. 13, L_cache): a completion longer than ``rollout.max_new_tokens - overlong_buffer`` tokens (EOS included) loses reward linearly in its length, ``overlong_penalty`` at ``rollout.max_new_tokens`` (0: off)."""
    overlong_penalty: float = 1.0
    """Reward a completion of ``rollout.max_new_tokens`` tokens loses under ``overlong_buffer`` (DAPO's 1; verl's ``penalty_factor``)."""

    def __post_init__(self) -> None:
        _check(
            math.isfinite(self.correct) and math.isfinite(self.wrong),
            f"reward.correct and reward.wrong must be finite, got {self.correct} and {self.wrong}",
        )
        _check(
            self.correct > self.wrong,
            f"reward.correct ({self.correct}) must exceed reward.wrong ({self.wrong})",
        )
        _check(
            self.timeout_s is None or self.timeout_s > 0,
            f"reward.timeout_s must be > 0 or null, got {self.timeout_s}",
        )
        _check(self.workers >= 0, f"reward.workers must be >= 0, got {self.workers}")
        _check(
            self.overlong_buffer >= 0,
            f"reward.overlong_buffer must be >= 0 (0: off), got {self.overlong_buffer}",
        )
        _check(
            0 <= self.overlong_penalty < math.inf,
            f"reward.overlong_penalty must be >= 0 and finite, got {self.overlong_penalty}",
        )

    @property
    def score_range(self) -> tuple[float, float]:
        """The scores a completion may get: ``wrong`` (or a lower ``format_penalty``) to ``correct``."""
        penalty = self.options.get("format_penalty")
        number = isinstance(penalty, (int, float)) and not isinstance(penalty, bool)
        return (min(self.wrong, penalty) if number else self.wrong), self.correct


@dataclass(frozen=True)
class RolloutConfig:
    """How each step's batch of completions is sampled, filtered and reused."""

    RENAMED: ClassVar[dict[str, str]] = {"engine": "sampler"}
    """Keys of earlier versions, read under their new names."""

    prompts_per_step: int = 8
    """Groups (prompts) in one rollout batch."""
    group_size: int = 8
    """Completions sampled per prompt (G)."""
    max_new_tokens: int = 256
    """Longest completion; one that reaches it without EOS is truncated."""
    temperature: float = 1.0
    """Sampling temperature (> 0); log-probs in the update use the same temperature."""
    top_p: float = 1.0
    """Nucleus sampling mass (1 disables it); the update's log-probs and entropy stay those of the whole softmax (warned)."""
    top_k: int = 0
    """Top-k sampling (0 disables it); the update's log-probs and entropy stay those of the whole softmax (warned)."""
    sampler: str = "lean"
    """Sampler by name: ``lean`` (the KV-cached loop of ``rlvr.generation.lean``), ``hf`` (Hugging Face ``generate``), ``vllm``."""
    sampler_options: dict[str, Any] = field(default_factory=dict)
    """The sampler's own options (e.g. ``lean``: ``fast``, ``prune``, ``share_prefill``, ``draw``), checked against its options class."""
    importance_correction: Literal["none", "tis"] = "none"
    """``tis``: weight each token's loss by ``min(exp(train_logp - rollout_logp), importance_cap)`` (a sampler that reports log-probs, e.g. ``vllm``; refused with ``top_p < 1`` or ``top_k > 0``)."""
    importance_cap: float = 2.0
    """Cap C of the truncated importance weight of ``importance_correction=tis``."""
    generation_batch_size: int | None = None
    """Sequences per generation call, a multiple of ``group_size`` (``None``: the whole round at once); the tokens a seed draws depend on it."""
    overlap_scoring: bool = True
    """Score each generation call's completions while the next call generates (when ``generation_batch_size`` splits a round)."""
    filter_zero_advantage: bool = False
    """Drop groups whose advantages are all zero before the update (Klear)."""
    dynamic_sampling: bool = False
    """Resample until ``prompts_per_step`` groups whose verifier scores differ are found (DAPO eq. 11)."""
    max_sampling_rounds: int = 3
    """Cap on generation rounds per step under dynamic sampling."""
    mask_truncated: bool = False
    """Leave truncated completions out of the loss (DAPO overlong filtering)."""
    minibatches: int = 1
    """Optimiser steps per rollout batch per epoch (ABC-GRPO uses 4)."""
    epochs: int = 1
    """Passes over each rollout batch."""
    staleness: int = 0
    """Bound k on off-policyness: a generation worker samples the next k batches while the trainer updates, batch s from the weights of step s - 1 - k (0: generate, then update, in one process)."""
    generation_threads: int | None = None
    """Torch threads of the generation worker when ``staleness >= 1``; the trainer keeps the rest of ``threads`` (``None``: half, at least 1)."""
    decoupled: bool = False
    """AReaL's decoupled objective: clip the ratio against the proximal policy (the weights at the start of the step), weight each token by pi_prox / pi_behav."""
    decoupled_cap: float | None = None
    """Under ``decoupled``: tokens whose weight pi_prox / pi_behav exceeds this leave the loss (weight 0), as AReaL's ``behav_imp_weight_cap`` (``None``: no cap)."""

    def __post_init__(self) -> None:
        _check(self.staleness >= 0, f"rollout.staleness must be >= 0, got {self.staleness}")
        _check(
            self.generation_threads is None or self.generation_threads >= 1,
            f"rollout.generation_threads must be >= 1 or null, got {self.generation_threads}",
        )
        _check(
            self.decoupled_cap is None or self.decoupled_cap > 1,
            f"rollout.decoupled_cap must be > 1 or null, got {self.decoupled_cap}",
        )
        for name in (
            "prompts_per_step",
            "group_size",
            "max_sampling_rounds",
            "minibatches",
            "epochs",
        ):
            value = getattr(self, name)
            _check(value >= 1, f"rollout.{name} must be >= 1, got {value}")
        self._check_correction()
        _check(
            0 < self.temperature < math.inf,
            f"rollout.temperature must be > 0 and finite (log-probs divide by it), got "
            f"{self.temperature}",
        )
        _check(
            self.generation_batch_size is None or self.generation_batch_size >= 1,
            f"rollout.generation_batch_size must be >= 1 or null, got {self.generation_batch_size}",
        )
        _check(
            self.generation_batch_size is None or self.generation_batch_size % self.group_size == 0,
            f"rollout.generation_batch_size ({self.generation_batch_size}) must be a multiple of "
            f"rollout.group_size ({self.group_size}): each generation call samples whole groups",
        )
        _check(
            self.prompts_per_step * self.group_size >= self.minibatches,
            f"rollout.minibatches ({self.minibatches}) exceeds the rollout batch "
            f"({self.prompts_per_step} prompts x {self.group_size})",
        )
        self.sampling  # noqa: B018 - validates temperature/top_p/top_k/max_new_tokens

    def _check_correction(self) -> None:
        """The sampler and its options, and ``importance_correction`` against them: it needs
        log-probs from the sampler, and nothing truncating the distribution they are of."""
        _one_of("rollout.importance_correction", self.importance_correction, ("none", "tis"))
        _check(
            self.importance_cap > 0,
            f"rollout.importance_cap must be > 0, got {self.importance_cap}",
        )
        named_options(
            self.sampler, self.sampler_options, ("rollout.sampler", "rollout.sampler_options")
        )
        _check(
            self.importance_correction == "none"
            or sampler_entry(self.sampler).logprobs is not False,
            f"rollout.importance_correction={self.importance_correction} needs a sampler that "
            f"reports log-probs (rollout.sampler=vllm); {self.sampler!r} reports none",
        )
        truncating = self.truncating_keys
        _check(
            self.importance_correction == "none" or not truncating,
            f"rollout.importance_correction={self.importance_correction} with "
            f"{' and '.join(truncating)}: the sampler reports the log-probs of the truncated "
            "distribution it drew from and the trainer those of the whole softmax, so each "
            "token's weight would be the probability mass kept at its position, not a "
            "correction of the engine's mismatch; set rollout.top_p=1 and rollout.top_k=0, or "
            "rollout.importance_correction=none (docs/training.md, 'What the update's "
            "log-probs are of')",
        )

    @property
    def truncating_keys(self) -> list[str]:
        """``rollout.top_p=...`` and ``rollout.top_k=...`` where they truncate the sampling
        distribution (``top_p < 1``, ``top_k > 0``); empty when nothing truncates."""
        keys = [f"rollout.top_p={self.top_p}"] if self.top_p < 1 else []
        return keys + ([f"rollout.top_k={self.top_k}"] if self.top_k else [])

    @property
    def sampling(self) -> SamplingConfig:
        """The sampler settings of the rollouts."""
        return SamplingConfig(
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
        )

    @property
    def reuses_rollout(self) -> bool:
        """True when the policy changes before the batch's last update (old log-probs needed)."""
        return self.minibatches > 1 or self.epochs > 1

    def thread_split(self, threads: int) -> tuple[int, int]:
        """``(generation, update)`` torch threads out of ``threads`` when ``staleness >= 1``."""
        generation = self.generation_threads or max(1, threads // 2)
        return generation, max(1, threads - generation)


@dataclass(frozen=True)
class OptimConfig:
    """AdamW, its learning-rate schedule, clipping and gradient accumulation."""

    lr: float = 1e-6
    """Peak learning rate."""
    weight_decay: float = 0.0
    """AdamW decoupled weight decay."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW moment coefficients."""
    eps: float = 1e-8
    """AdamW denominator epsilon."""
    max_grad_norm: float | None = 1.0
    """Clip the global gradient norm to this value (``None``: no clipping)."""
    warmup_steps: int = 0
    """Optimiser steps of linear warm-up to ``lr``: step ``s`` (from 0) at ``lr * (s + 1) / warmup_steps``."""
    schedule: Literal["constant", "cosine"] = "constant"
    """After warm-up: constant, or cosine decay to ``min_lr``, reached just after the last planned step (that step trains at ``min_lr + (lr - min_lr) * (1 - cos(pi / n)) / 2``, ``n`` the steps after warm-up; an RL update the filters skip leaves it above)."""
    min_lr: float = 0.0
    """Floor of the cosine schedule, reached just after the last planned step (Klear's SFT: 8e-5 -> 4e-5)."""
    micro_batch_size: int | None = None
    """Sequences per forward/backward; gradients accumulate (``None`` or >= the batch: one pass)."""

    def __post_init__(self) -> None:
        _check(0 < self.lr < math.inf, f"optim.lr must be > 0 and finite, got {self.lr}")
        _check(
            0 <= self.weight_decay < math.inf,
            f"optim.weight_decay must be >= 0 and finite, got {self.weight_decay}",
        )
        _check(0 <= self.eps < math.inf, f"optim.eps must be >= 0 and finite, got {self.eps}")
        _check(
            len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas),
            f"optim.betas must be two numbers in [0, 1), got {self.betas}",
        )
        _check(
            self.max_grad_norm is None or self.max_grad_norm > 0,
            f"optim.max_grad_norm must be > 0 or null, got {self.max_grad_norm}",
        )
        _check(self.warmup_steps >= 0, f"optim.warmup_steps must be >= 0, got {self.warmup_steps}")
        _one_of("optim.schedule", self.schedule, ("constant", "cosine"))
        _check(
            0 <= self.min_lr <= self.lr,
            f"optim.min_lr must be in [0, optim.lr={self.lr}], got {self.min_lr}",
        )
        _check(
            self.micro_batch_size is None or self.micro_batch_size >= 1,
            f"optim.micro_batch_size must be >= 1 or null, got {self.micro_batch_size}",
        )


@dataclass(frozen=True)
class LogConfig:
    """Where and how metrics are written."""

    output_dir: str = "runs/default"
    """Run directory: metrics.jsonl, TensorBoard events, checkpoints, samples, plots."""
    tensorboard: bool = True
    """Write TensorBoard event files under ``output_dir/tb``."""
    wandb: bool = False
    """Also log to Weights & Biases (only if ``wandb`` is installed)."""
    wandb_project: str = "rlvr"
    """W&B project name."""
    progress: Literal["auto", "on", "off"] = "auto"
    """Live progress bar: ``auto`` shows it on a terminal."""
    samples_per_step: int = 2
    """Completions per step written to ``samples.jsonl`` (0: none)."""
    plots: bool = True
    """Write PNG plots of the metrics to ``output_dir/plots`` at the end."""
    contrast: tuple[str, ...] = ()
    """Objectives whose per-token gradient is compared with the run's on every micro-batch (``grpo``, ``apmpo:fss_form=mean``): ``contrast/<name>/*`` metrics (RL only; a few loss evaluations per micro-batch, no model pass)."""

    def __post_init__(self) -> None:
        _one_of("log.progress", self.progress, ("auto", "on", "off"))
        _check(
            self.samples_per_step >= 0,
            f"log.samples_per_step must be >= 0, got {self.samples_per_step}",
        )


@dataclass(frozen=True)
class EvalConfig:
    """Periodic held-out evaluation through the evaluation harness."""

    every: int = 0
    """Evaluate every N steps (0: only at the start and the end)."""
    at_start: bool = True
    """Evaluate before the first step."""
    at_end: bool = True
    """Evaluate after the last step."""
    n: int = 4
    """Samples per problem."""
    ks: tuple[int, ...] = (1,)
    """k values of ``avg@k``, ``pass@k`` and ``maj@k`` (each <= n)."""
    temperature: float = 0.6
    """Sampling temperature of the evaluation (0: greedy)."""
    top_p: float = 1.0
    """Nucleus mass of the evaluation."""
    max_new_tokens: int | None = None
    """Completion budget (``None``: the rollout's)."""
    batch_size: int = 8
    """Problems per generation call."""
    seed: int = 1234
    """Seed of the evaluation's own RNG; training randomness is left untouched."""
    reports: bool = True
    """Write each evaluation's per-problem report to ``eval_reports/`` (false: none; the held-out change then has no interval)."""

    def harness(
        self,
        sampling: SamplingConfig,
        *,
        system_prompt: str | None,
        scoring: ScoringConfig | None = None,
    ) -> HarnessConfig:
        """The evaluation harness's settings for these (completions are not kept); ``scoring``:
        the time limit and workers of the scorer the run scores with, as its reports record."""
        return HarnessConfig(
            n=self.n,
            ks=tuple(self.ks),
            sampling=sampling,
            batch_size=self.batch_size,
            seed=self.seed,
            system_prompt=system_prompt,
            scoring=scoring or ScoringConfig(),
            keep_completions=False,
        )

    def __post_init__(self) -> None:
        _check(self.every >= 0, f"eval.every must be >= 0, got {self.every}")
        check_seed("eval.seed", self.seed)
        _check(self.n >= 1, f"eval.n must be >= 1, got {self.n}")
        _check(
            0 <= self.temperature < math.inf,
            f"eval.temperature must be >= 0 and finite (0: greedy), got {self.temperature}",
        )
        _check(0 < self.top_p <= 1, f"eval.top_p must be in (0, 1], got {self.top_p}")
        _check(
            self.max_new_tokens is None or self.max_new_tokens >= 1,
            f"eval.max_new_tokens must be >= 1 or null, got {self.max_new_tokens}",
        )
        _check(self.batch_size >= 1, f"eval.batch_size must be >= 1, got {self.batch_size}")
        _check(
            len(self.ks) > 0 and all(1 <= k <= self.n for k in self.ks),
            f"eval.ks must be in [1, eval.n={self.n}], got {list(self.ks)}",
        )


@dataclass(frozen=True)
class CheckpointConfig:
    """When checkpoints are written and how many are kept."""

    every: int = 0
    """Save every N steps (0: only at the end)."""
    keep_last: int = 2
    """Keep the N most recent checkpoints (0: keep all)."""
    save_final: bool = True
    """Save after the last step."""

    def __post_init__(self) -> None:
        _check(self.every >= 0, f"checkpoint.every must be >= 0, got {self.every}")
        _check(self.keep_last >= 0, f"checkpoint.keep_last must be >= 0, got {self.keep_last}")


class RunConfig(Protocol):
    """What the run harness reads of a run's configuration (:class:`TrainConfig` and
    :class:`SFTConfig` both have it)."""

    @property
    def seed(self) -> int:
        """Seeds torch, Python and NumPy before the job is built."""
        ...

    @property
    def threads(self) -> int | None:
        """CPU threads torch may use (``None``: torch's default)."""
        ...

    @property
    def log(self) -> LogConfig:
        """Run directory and metric sinks."""
        ...

    @property
    def checkpoint(self) -> CheckpointConfig:
        """Checkpoint schedule."""
        ...


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """A whole RL run."""

    steps: int = 100
    """Rollout steps (each runs ``rollout.minibatches * rollout.epochs`` optimiser steps)."""
    seed: int = 0
    """Seeds torch, Python, NumPy and the data order (0 to 2**32 - 1)."""
    threads: int | None = None
    """CPU threads torch may use (``None``: torch's default; 1 is often fastest for small models)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """Policy model."""
    data: DataConfig
    """Prompts."""
    reward: RewardConfig = field(default_factory=RewardConfig)
    """Verifier and reward values."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """Sampling and batch reuse."""
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    """Policy loss and regularisers."""
    optim: OptimConfig = field(default_factory=OptimConfig)
    """Optimiser."""
    log: LogConfig = field(default_factory=LogConfig)
    """Metrics output."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    """Held-out evaluation."""
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    """Checkpointing."""

    def __post_init__(self) -> None:
        _check(self.steps >= 1, f"steps must be >= 1, got {self.steps}")
        check_seed("seed", self.seed)
        _check(
            self.threads is None or self.threads >= 1,
            f"threads must be >= 1 or null, got {self.threads}",
        )
        if self.rollout.dynamic_sampling or self.rollout.filter_zero_advantage:
            _check(
                self.rollout.group_size >= 2,
                "dynamic sampling / zero-advantage filtering need rollout.group_size >= 2",
            )
        _check(
            self.rollout.group_size >= 2 or self.objective.sft_coef > 0,
            "rollout.group_size=1: every advantage mode subtracts the group's mean reward, so "
            "each advantage is 0 and the policy loss has no gradient; use rollout.group_size >= 2",
        )
        self._check_reward_range()
        _check(
            self.reward.overlong_buffer <= self.rollout.max_new_tokens,
            f"reward.overlong_buffer ({self.reward.overlong_buffer}) must not exceed "
            f"rollout.max_new_tokens ({self.rollout.max_new_tokens}), the length it counts back from",
        )
        self._check_overlong_scale()
        if self.rollout.staleness:
            from rlvr.models import resolve_device

            device = resolve_device(self.model.device)
            here = f" ({device} here)" if self.model.device == "auto" else ""
            _check(
                device.partition(":")[0] == "cpu" and self.rollout.sampler != "vllm",
                f"rollout.staleness={self.rollout.staleness} runs the generation worker as a CPU "
                f"process sampling from its own copy of the model (lean, hf); got "
                f"model.device={self.model.device!r}{here}, rollout.sampler={self.rollout.sampler!r} "
                "(use rollout.staleness=0, or model.device=cpu with lean or hf)",
            )
        for contrast in self.contrasts:  # each log.contrast entry must name an objective
            self._check_reward_range(contrast)

    def _check_overlong_scale(self) -> None:
        """``reward.overlong_penalty`` small enough that a group's shaped rewards (float32)
        sum without overflow in its advantages: ``(penalty + largest |score|) * group_size``
        at most half float32's largest number (a larger one gave NaN advantages)."""
        g, reward = self.rollout.group_size, self.reward
        largest = max(abs(v) for v in reward.score_range) + reward.overlong_penalty
        limit = _FLOAT32_MAX / 2
        _check(
            not reward.overlong_buffer or largest * g <= limit,
            f"reward.overlong_penalty={reward.overlong_penalty:g} is too large for float32 "
            f"rewards: with the largest score it must stay under {limit / g:.3g} "
            f"(half float32's largest number over rollout.group_size={g}), or the "
            "advantages overflow to NaN",
        )

    @property
    def contrasts(self) -> tuple[Contrast, ...]:
        """The objectives of ``log.contrast``, each with this run's regularisers."""
        return tuple(parse_contrast(spec, self.loss_config) for spec in self.log.contrast)

    def _check_reward_range(self, contrast: Contrast | None = None) -> None:
        """An objective that maps rewards through ``reward_range`` (the run's, or one of
        ``log.contrast``) must see every reward in it."""
        objective = self.objective if contrast is None else contrast.objective
        span, (low, high) = (
            getattr(objective.params, "reward_range", None),
            self.reward.score_range,
        )
        if span is not None and not span[0] <= low < high <= span[1]:
            lowest = "reward.wrong" if low == self.reward.wrong else "reward.options.format_penalty"
            fix = f"reward_range=[{low}, {high}]"
            where, example = (
                ("objective.", f"objective.{fix}")
                if contrast is None
                else (f"log.contrast {contrast.label!r}: ", f"'{objective.name}:{fix}'")
            )
            raise ValueError(
                f"{where}reward_range={list(span)} must hold {lowest}={low} and "
                f"reward.correct={high} (e.g. {example})"
            )

    @property
    def loss_config(self) -> ObjectiveConfig:
        """The objective section with the SFT threshold resolved (``None``: ``reward.correct``)."""
        if self.objective.sft_threshold is not None:
            return self.objective
        return dataclasses.replace(self.objective, sft_threshold=self.reward.correct)


@dataclass(frozen=True, kw_only=True)
class SFTDataConfig:
    """Prompt/response pairs for supervised fine-tuning."""

    train: str
    """JSONL/Parquet file or dataset with one prompt and one response per row."""
    eval: str | None = None
    """Held-out pairs whose NLL is reported before training (``eval.at_start``), after each pass and after the last step (``None``: none)."""
    prompt_field: str = "prompt"
    """Column holding the prompt."""
    response_field: str = "response"
    """Column holding the target response."""
    split: str | None = None
    """Split of dataset directories and hub datasets (``None``: ``train``); ``data.eval``'s too unless ``eval_split`` is set."""
    eval_split: str | None = None
    """Split of ``data.eval`` (``None``: ``split``; a local folder or hub dataset of several splits then needs one)."""
    eval_prompt_field: str | None = None
    """Column holding ``data.eval``'s prompt (``None``: ``prompt_field``)."""
    eval_response_field: str | None = None
    """Column holding ``data.eval``'s target response (``None``: ``response_field``)."""
    system_prompt: str | None = None
    """System message before each prompt: through the chat template, or without one its text and a blank line."""
    max_tokens: int = 1024
    """Longest prompt + response (with its end-of-turn token) in tokens; longer rows are skipped whole, not cut (counted in ``data/skipped``, warned)."""
    max_examples: int | None = None
    """Use only the first N rows (``None``: all)."""

    def __post_init__(self) -> None:
        _check(bool(self.train), "data.train must name the SFT data (a file or dataset)")
        _check(self.max_tokens >= 2, f"data.max_tokens must be >= 2, got {self.max_tokens}")
        _check(
            self.max_examples is None or self.max_examples >= 1,
            f"data.max_examples must be >= 1 or null, got {self.max_examples}",
        )

    def held_out(self) -> SFTDataConfig:
        """This config with ``data.eval``'s own field keys in place of ``data.train``'s."""
        return dataclasses.replace(
            self,
            prompt_field=self.eval_prompt_field or self.prompt_field,
            response_field=self.eval_response_field or self.response_field,
        )


@dataclass(frozen=True)
class SFTEvalConfig:
    """When the held-out NLL (of data.eval) is measured, besides after each pass and the last step."""

    at_start: bool = True
    """Measure the held-out NLL before the first step too (step 0 of ``metrics.jsonl``)."""


@dataclass(frozen=True, kw_only=True)
class SFTConfig:
    """A supervised fine-tuning run (token-mean NLL on responses, prompt tokens masked)."""

    epochs: int = 1
    """Passes over the data."""
    steps: int | None = None
    """Optimiser steps of the run (``None``: ``epochs`` passes); batches wrap into the next epoch."""
    batch_size: int = 16
    """Sequences per optimiser step."""
    seed: int = 0
    """Seeds torch, Python, NumPy and the data order (0 to 2**32 - 1)."""
    threads: int | None = None
    """CPU threads torch may use (``None``: torch's default; 1 is often fastest for small models)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """Model to fine-tune."""
    data: SFTDataConfig
    """Prompt/response pairs."""
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=1e-4))
    """Optimiser."""
    log: LogConfig = field(
        default_factory=lambda: LogConfig(output_dir="runs/sft-{time}", samples_per_step=0)
    )
    """Metrics output."""
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    """Checkpointing."""
    eval: SFTEvalConfig = field(default_factory=SFTEvalConfig)
    """Held-out NLL (of ``data.eval``)."""

    def __post_init__(self) -> None:
        _check(self.epochs >= 1, f"epochs must be >= 1, got {self.epochs}")
        check_seed("seed", self.seed)
        _check(
            self.steps is None or self.steps >= 1, f"steps must be >= 1 or null, got {self.steps}"
        )
        _check(
            self.threads is None or self.threads >= 1,
            f"threads must be >= 1 or null, got {self.threads}",
        )
        _check(self.batch_size >= 1, f"batch_size must be >= 1, got {self.batch_size}")
