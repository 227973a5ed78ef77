"""What RL and SFT runs share: run directory, model loading, optimiser and schedule, autocast."""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import math
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import torch

from rlvr.ops import TokenStats, sequence_token_stats
from rlvr.ops.rmsnorm import lean_rmsnorm
from rlvr.ops.swiglu import lean_swiglu
from rlvr.rewards import Scorer, ScoringConfig, get_verifier
from rlvr.train.checkpoint import latest_checkpoint, quiet_hf_progress
from rlvr.train.config import LogConfig, ModelConfig, OptimConfig, RewardConfig
from rlvr.train.metrics import METRICS_FILE, SAMPLES_FILE, truncate_after
from rlvr.train.overrides import dump_yaml

CONFIG_FILE = "config.yaml"


TIME_FORMAT = "%Y%m%d-%H%M%S"
"""How ``{time}`` in ``log.output_dir`` expands (so the names sort by start time)."""
_TIME_GLOB = "[0-9]" * 8 + "-" + "[0-9]" * 6


def expand_output_dir(config: Any, *, resume: bool = False) -> Any:
    """``config`` with ``{time}`` in ``log.output_dir`` replaced by the current time, or, when
    resuming, by the time of the newest existing run it names (``rlvr train --resume`` on
    the demo continues the last demo run instead of starting a new one)."""
    out = config.log.output_dir
    if "{time}" not in out:
        return config
    runs = sorted(glob.glob(glob.escape(out).replace("{time}", _TIME_GLOB))) if resume else []
    if runs:
        print(f"--resume: continuing {runs[-1]}", file=sys.stderr)
    expanded = runs[-1] if runs else out.replace("{time}", time.strftime(TIME_FORMAT))
    return dataclasses.replace(config, log=dataclasses.replace(config.log, output_dir=expanded))


class RunDir(NamedTuple):
    """A run's directory and the checkpoint it resumes from."""

    path: Path
    """The run directory (``log.output_dir``)."""
    checkpoint: Path | None
    """Latest complete checkpoint when resuming, else ``None``."""


def locate_run_dir(config: Any, *, resume: bool) -> RunDir:
    """The run directory and the checkpoint to resume from (or None); writes nothing.

    A fresh run refuses a directory that already holds metrics or checkpoints; a resumed
    run with no checkpoint yet starts from scratch.
    """
    log: LogConfig = config.log
    run_dir = Path(log.output_dir)
    problem = why_not_creatable(run_dir)
    if problem:  # refused before anything loads
        raise ValueError(f"log.output_dir={str(run_dir)!r}: {problem}")
    checkpoint = latest_checkpoint(run_dir) if resume else None
    if not resume and ((run_dir / METRICS_FILE).exists() or (run_dir / "checkpoints").exists()):
        raise ValueError(
            f"log.output_dir={str(run_dir)!r} already holds a run: continue it with --resume, "
            "or choose another directory (log.output_dir=...; '{time}' in it expands to the start time)"
        )
    if resume and checkpoint is None:
        warnings.warn(f"--resume: no checkpoint in {run_dir}; starting from scratch", stacklevel=2)
    return RunDir(run_dir, checkpoint)


def why_not_creatable(folder: Path) -> str | None:
    """Why the directory ``folder`` could not be made (or written into), else ``None``;
    checked on the nearest existing part of the path, without creating anything."""
    existing = next(p for p in (folder, *folder.absolute().parents) if p.exists())
    if not existing.is_dir():
        return f"{existing} is a file, not a directory"
    if not os.access(existing, os.W_OK):
        return f"{existing} is not writable"
    return None


def open_run_dir(config: Any, run: RunDir, *, resume: bool) -> None:
    """Create the run directory and write ``config.yaml``; a resume with no checkpoint drops
    the rows of a run killed before its first one. Called once the job is built, so a start
    that fails (bad data, a model that does not load) leaves an earlier run as it was."""
    if resume and run.checkpoint is None:
        for name in (METRICS_FILE, SAMPLES_FILE):
            truncate_after(run.path / name, -1)
    run.path.mkdir(parents=True, exist_ok=True)
    (run.path / CONFIG_FILE).write_text(dump_yaml(config))


def prepare_run_dir(config: Any, *, resume: bool) -> RunDir:
    """:func:`locate_run_dir`, then :func:`open_run_dir`."""
    run = locate_run_dir(config, resume=resume)
    open_run_dir(config, run, resume=resume)
    return run


def set_threads(threads: int | None) -> None:
    """Limit torch's CPU threads (``None`` leaves torch's default)."""
    if threads is not None:
        torch.set_num_threads(threads)


def load_policy(cfg: ModelConfig, path: str | None = None):
    """``(model, tokenizer)`` ready to train: dropout off, SwiGLU MLPs that keep half their
    activations (:mod:`rlvr.ops.swiglu`), RMSNorms that keep one of their two
    (:mod:`rlvr.ops.rmsnorm`), optional gradient checkpointing."""
    from rlvr.models import load_model

    with quiet_hf_progress():  # a preset's own build progress still shows
        model, tokenizer = load_model(path or cfg.name, dtype=cfg.dtype, device=cfg.device)
    disable_dropout(model)
    lean_swiglu(model)  # same values and gradients, half the MLP activations kept for backward
    lean_rmsnorm(model)  # same values, one activation per norm kept instead of two
    if cfg.gradient_checkpointing:
        enable = (
            getattr(model, "activation_checkpointing_enable", None)
            or model.gradient_checkpointing_enable
        )
        enable()
        model.train()  # HF models checkpoint only in training mode; dropout is off anyway
    return model, tokenizer


def disable_dropout(model: torch.nn.Module) -> None:
    """Set every dropout probability to 0 (log-probs must not depend on the module's mode)."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    for name in ("attention_dropout", "hidden_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop"):
        if hasattr(model.config, name):
            setattr(model.config, name, 0.0)


def autocast(cfg: ModelConfig):
    """The forward-pass autocast context of ``cfg`` (a no-op unless ``autocast=bf16``)."""
    if cfg.autocast == "bf16":
        return torch.autocast(device_type=torch.device(cfg.device).type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def response_stats(
    model, seqs, cfg: ModelConfig, *, temperature: float, entropy: bool
) -> TokenStats:
    """Chunked log-probs (and entropy) of the response columns of ``seqs`` (a
    :class:`rlvr.train.batch.SequenceBatch` on the model's device), under ``cfg``'s autocast."""
    with autocast(cfg):
        return sequence_token_stats(
            model,
            seqs.input_ids,
            seqs.attention_mask,
            seqs.response_width,
            temperature=temperature,
            chunk_size=cfg.chunk_size,
            compute_entropy=entropy,
            share_prompt=cfg.share_prompt,
        )


def open_scorer(cfg: RewardConfig) -> Scorer:
    """The run's scorer (a context manager; owns worker processes when ``workers >= 1``)."""
    verifier = get_verifier(cfg.verifier, correct=cfg.correct, wrong=cfg.wrong, **cfg.options)
    return Scorer(verifier, ScoringConfig(timeout_s=cfg.timeout_s, workers=cfg.workers))


@dataclasses.dataclass(frozen=True)
class LRSchedule:
    """Multiplier of the peak learning rate at optimiser step ``s`` (0-based)."""

    warmup_steps: int
    """Linear warm-up length."""
    total_steps: int
    """Optimiser steps in the run (the cosine reaches 0 after the last one)."""
    kind: str
    """``constant`` or ``cosine``."""

    def __call__(self, s: int) -> float:
        if s < self.warmup_steps:
            return (s + 1) / self.warmup_steps
        if self.kind == "constant":
            return 1.0
        span = max(1, self.total_steps - self.warmup_steps)
        progress = min(1.0, (s - self.warmup_steps) / span)
        return 0.5 * (1.0 + math.cos(math.pi * progress))


def adamw(params: list[torch.nn.Parameter], cfg: OptimConfig) -> torch.optim.AdamW:
    """AdamW, fused where torch has a fused kernel for the parameters (CPU and CUDA floats).

    The fused step updates each tensor in one pass: no temporary copy of all parameters
    (the multi-tensor path holds one, about the model's size), and on CPU it is several
    times faster. Elsewhere the per-tensor loop is used, for the same reason.
    """
    kwargs = {"lr": cfg.lr, "betas": cfg.betas, "eps": cfg.eps, "weight_decay": cfg.weight_decay}
    try:
        return torch.optim.AdamW(params, fused=True, **kwargs)
    except (RuntimeError, ValueError):
        return torch.optim.AdamW(params, foreach=False, **kwargs)


def build_optimizer(model: torch.nn.Module, cfg: OptimConfig, total_steps: int):
    """``(AdamW, LambdaLR)`` over the trainable parameters."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = adamw(params, cfg)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, LRSchedule(cfg.warmup_steps, total_steps, cfg.schedule)
    )
    return optimizer, scheduler


class Stepped(NamedTuple):
    """What an optimiser step did."""

    grad_norm: float
    """Global gradient norm before clipping."""
    stepped: bool
    """False when a non-finite norm skipped the update."""


def clip_and_step(model: torch.nn.Module, optimizer, scheduler, cfg: OptimConfig) -> Stepped:
    """Clip gradients, step optimiser and schedule.

    A non-finite gradient norm skips the update (gradients are dropped) instead of
    writing NaN into the weights.
    """
    params = [p for p in model.parameters() if p.grad is not None]
    max_norm = cfg.max_grad_norm if cfg.max_grad_norm is not None else float("inf")
    norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm)) if params else 0.0
    stepped = math.isfinite(norm)
    if stepped:
        optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return Stepped(norm, stepped)


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MiB."""
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def preflight(config: Any, *, device: bool = True) -> None:
    """What can be checked before anything loads (a preset build can take minutes).

    Missing local data files or model directories, a device this machine lacks (unless
    ``device`` is false: a dry run written for another machine) and an unknown verifier are
    reported first, each naming its key.
    """
    from rlvr.data import check_source
    from rlvr.models import looks_like_path, preset_names, torch_device
    from rlvr.train.prompts import GENERATED

    for key in ("train", "eval"):
        source = getattr(config.data, key, None)
        if source and not source.startswith(tuple(GENERATED)):
            try:
                check_source(source)
            except ValueError as err:
                raise ValueError(f"data.{key}: {err}") from None
    try:
        if device:
            torch_device(config.model.device)
    except ValueError as err:
        raise ValueError(f"model.device: {err}") from None
    name = config.model.name
    if (
        name not in preset_names()
        and looks_like_path(name)
        and not Path(name).expanduser().is_dir()
    ):
        raise ValueError(f"model.name: {name}: no such directory")
    reward = getattr(config, "reward", None)
    if reward is not None:
        try:
            get_verifier(
                reward.verifier, correct=reward.correct, wrong=reward.wrong, **reward.options
            )
        except (TypeError, ValueError) as err:
            raise ValueError(f"reward.verifier: {err}") from None
