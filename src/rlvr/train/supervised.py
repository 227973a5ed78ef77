"""Supervised fine-tuning: token-mean NLL of the responses, prompt tokens masked.

``sft(cfg)`` is the library entry point (``rlvr sft`` and the ``tiny`` preset's warm
start call it); it shares the trainer's data loading, metric writers, progress bar and
checkpoints, so ``--resume`` continues an interrupted SFT run exactly as well.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rlvr.train.batch import SequenceBatch, length_sorted_chunks, pack
from rlvr.train.checkpoint import (
    TrainerState,
    due,
    load_trainer_state,
    save_checkpoint,
    seed_everything,
)
from rlvr.train.config import SFTConfig
from rlvr.train.metrics import METRICS_FILE, MetricsWriter, read_metrics
from rlvr.train.overrides import to_dict
from rlvr.train.plots import plot_runs
from rlvr.train.progress import ProgressReporter
from rlvr.train.prompts import IndexSampler, SFTExample, load_sft_examples
from rlvr.train.setup import (
    build_optimizer,
    clip_and_step,
    expand_output_dir,
    load_policy,
    prepare_run_dir,
    response_stats,
    set_threads,
)


@dataclass(frozen=True)
class SFTResult:
    """Where an SFT run wrote its outputs."""

    run_dir: Path
    """Run directory (metrics, config, checkpoints)."""
    model_dir: Path | None
    """Final checkpoint, a plain HF model directory (``None`` if not saved)."""
    metrics: dict[str, float | None]
    """Metrics of the last step."""


@dataclass
class SFTRun:
    """Everything the steps of one SFT run share."""

    cfg: SFTConfig
    """The run's configuration."""
    run_dir: Path
    """Where everything is written."""
    model: Any
    """The model being fine-tuned."""
    tokenizer: Any
    """Its tokenizer."""
    examples: list[SFTExample]
    """Training pairs, tokenised."""
    held_out: list[SFTExample]
    """Held-out pairs (may be empty)."""
    skipped: int
    """Training rows dropped for length."""
    sampler: IndexSampler
    """Order of the training pairs (resumable)."""
    optimizer: torch.optim.Optimizer
    """AdamW over the model."""
    scheduler: Any
    """Learning-rate schedule (``LambdaLR``)."""
    steps_per_epoch: int
    """Optimiser steps per pass over the data."""
    start_step: int = 0
    """Last completed step before this process started (0: fresh run)."""

    @property
    def total_steps(self) -> int:
        """Optimiser steps of the whole run."""
        return self.cfg.steps or self.cfg.epochs * self.steps_per_epoch


def build_sft_run(cfg: SFTConfig, run_dir: Path, checkpoint: Path | None) -> SFTRun:
    """Load model and data, build the optimiser; restore state from ``checkpoint`` if given."""
    set_threads(cfg.threads)
    seed_everything(cfg.seed)
    model, tokenizer = load_policy(cfg.model, str(checkpoint) if checkpoint else None)
    data = cfg.data
    examples, skipped = load_sft_examples(data.train, tokenizer, data, limit=data.max_examples)
    held_out = load_sft_examples(data.eval, tokenizer, data, limit=None)[0] if data.eval else []
    per_epoch = math.ceil(len(examples) / cfg.batch_size)
    optimizer, scheduler = build_optimizer(model, cfg.optim, cfg.steps or cfg.epochs * per_epoch)
    sampler = IndexSampler(len(examples), seed=cfg.seed, shuffle=True)
    run = SFTRun(
        cfg,
        run_dir,
        model,
        tokenizer,
        examples,
        held_out,
        skipped,
        sampler,
        optimizer,
        scheduler,
        per_epoch,
    )
    if checkpoint is not None:
        state = load_trainer_state(checkpoint, optimizer, scheduler)
        sampler.load_state_dict(state.data)
        run.start_step = state.step
    return run


def sft(cfg: SFTConfig, *, resume: bool = False) -> SFTResult:
    """Fine-tune ``cfg.model`` on ``cfg.data``; ``resume`` continues from the latest checkpoint."""
    cfg = expand_output_dir(cfg)
    run_dir, checkpoint = prepare_run_dir(cfg, resume=resume)
    run = build_sft_run(cfg, run_dir, checkpoint)
    writer = MetricsWriter(
        run_dir, cfg.log, resume_step=run.start_step if checkpoint else None, config=to_dict(cfg)
    )
    progress = ProgressReporter(
        cfg.log,
        total=run.total_steps,
        start=run.start_step,
        title="sft",
        shown=[("sft/loss", "loss")],
    )
    try:
        row, model_dir = _sft_steps(run, writer, progress)
    finally:
        writer.close()
        progress.close()
    if cfg.log.plots:
        plot_runs({run_dir.name: read_metrics(run_dir / METRICS_FILE)}, run_dir / "plots")
    return SFTResult(run_dir=run_dir, model_dir=model_dir, metrics=row)


def _sft_steps(
    run: SFTRun, writer: MetricsWriter, progress: ProgressReporter
) -> tuple[dict, Path | None]:
    """Steps ``start + 1 .. total`` with held-out NLL per epoch and checkpoints on schedule."""
    cfg, total, pad_id = run.cfg, run.total_steps, run.tokenizer.pad_token_id
    row, model_dir = {}, None
    for step in range(run.start_step + 1, total + 1):
        t0 = time.perf_counter()
        picked = [run.examples[i] for i in run.sampler.take(cfg.batch_size)]
        metrics = sft_step(run.model, run.optimizer, run.scheduler, _pack(picked, pad_id), cfg)
        metrics.update({"data/skipped": float(run.skipped), "data/epoch": float(run.sampler.epoch)})
        if run.held_out and (step % run.steps_per_epoch == 0 or step == total):
            metrics["sft/eval_loss"] = eval_nll(run.model, _pack(run.held_out, pad_id), cfg)
        metrics["time/step"] = time.perf_counter() - t0
        metrics["perf/tokens_per_s"] = metrics["sft/tokens"] / metrics["time/step"]
        row = writer.write(step, metrics)
        progress.step(step, row)
        if due(step, total, cfg.checkpoint):
            state = TrainerState(step=step, data=run.sampler.state_dict())
            model_dir = save_checkpoint(
                run.run_dir,
                run.model,
                run.tokenizer,
                run.optimizer,
                run.scheduler,
                state,
                keep_last=cfg.checkpoint.keep_last,
            )
    return row, model_dir


def _pack(examples: Sequence[SFTExample], pad_id: int) -> SequenceBatch:
    return pack([e.prompt_ids for e in examples], [e.response_ids for e in examples], pad_id)


def _response_nll_sum(model, micro: SequenceBatch, cfg: SFTConfig) -> torch.Tensor:
    """Summed NLL of the response tokens of ``micro`` (prompt and padding masked)."""
    micro = micro.trim_responses().to(next(model.parameters()).device)
    stats = response_stats(model, micro, cfg.model, temperature=1.0, entropy=False)
    return -(stats.logp.float() * micro.response_mask).sum()


def sft_step(model, optimizer, scheduler, batch: SequenceBatch, cfg: SFTConfig) -> dict[str, float]:
    """One optimiser step of token-mean NLL over ``batch`` (micro-batched, same gradient)."""
    num_tokens = int(batch.response_mask.sum())
    lr = scheduler.get_last_lr()[0]
    total = 0.0
    for index in length_sorted_chunks(batch, cfg.optim.micro_batch_size):
        loss = _response_nll_sum(model, batch.rows(index), cfg) / num_tokens
        loss.backward()
        total += float(loss.detach())
    grad_norm, stepped = clip_and_step(model, optimizer, scheduler, cfg.optim)
    return {
        "sft/loss": total,
        "sft/tokens": float(num_tokens),
        "optim/lr": lr,
        "optim/grad_norm": grad_norm,
        "optim/skipped_steps": float(not stepped),
    }


@torch.no_grad()
def eval_nll(model, batch: SequenceBatch, cfg: SFTConfig) -> float:
    """Token-mean NLL of ``batch`` without gradients."""
    total = 0.0
    for index in length_sorted_chunks(batch, cfg.optim.micro_batch_size or cfg.batch_size):
        total += float(_response_nll_sum(model, batch.rows(index), cfg))
    return total / int(batch.response_mask.sum())
