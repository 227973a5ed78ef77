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

import torch

from rlvr.train import integrations
from rlvr.train.batch import SequenceBatch, chunk_rows, pack
from rlvr.train.checkpoint import TrainerState, load_trainer_state, save_checkpoint, seed_everything
from rlvr.train.config import CheckpointConfig, SFTConfig
from rlvr.train.metrics import METRICS_FILE, MetricsWriter, read_metrics
from rlvr.train.overrides import to_dict
from rlvr.train.plots import plot_runs
from rlvr.train.progress import ProgressReporter
from rlvr.train.prompts import IndexSampler, SFTExample, load_sft_examples
from rlvr.train.setup import (
    autocast,
    build_optimizer,
    clip_and_step,
    expand_output_dir,
    load_policy,
    prepare_run_dir,
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


def sft(cfg: SFTConfig, *, resume: bool = False) -> SFTResult:
    """Fine-tune ``cfg.model`` on ``cfg.data``; ``resume`` continues from the latest checkpoint."""
    cfg = expand_output_dir(cfg)
    run_dir, ckpt = prepare_run_dir(cfg, resume=resume)
    set_threads(cfg.threads)
    seed_everything(cfg.seed)
    model, tokenizer = load_policy(cfg.model, str(ckpt) if ckpt else None)
    examples, skipped = load_sft_examples(
        cfg.data.train, tokenizer, cfg.data, limit=cfg.data.max_examples
    )
    held_out = (
        load_sft_examples(cfg.data.eval, tokenizer, cfg.data, limit=None)[0]
        if cfg.data.eval
        else []
    )
    steps_per_epoch = math.ceil(len(examples) / cfg.batch_size)
    total = cfg.epochs * steps_per_epoch
    optimizer, scheduler = build_optimizer(model, cfg.optim, total)
    sampler = IndexSampler(len(examples), seed=cfg.seed, shuffle=True)
    start = 0
    if ckpt is not None:
        state = load_trainer_state(ckpt, optimizer, scheduler)
        sampler.load_state_dict(state.data)
        start = state.step
    writer = MetricsWriter(
        run_dir, cfg.log, resume_step=start if ckpt else None, config=to_dict(cfg)
    )
    progress = ProgressReporter(
        cfg.log, total=total, start=start, title="sft", shown=[("sft/loss", "loss")]
    )
    pad_id = tokenizer.pad_token_id
    row: dict[str, float | None] = {}
    model_dir = None
    try:
        for step in range(start + 1, total + 1):
            t0 = time.perf_counter()
            picked = [examples[i] for i in sampler.take(cfg.batch_size)]
            metrics = sft_step(model, optimizer, scheduler, _pack(picked, pad_id), cfg)
            metrics["data/skipped"] = float(skipped)
            metrics["data/epoch"] = float(sampler.epoch)
            if held_out and (step % steps_per_epoch == 0 or step == total):
                metrics["sft/eval_loss"] = eval_nll(model, _pack(held_out, pad_id), cfg)
            metrics["time/step"] = time.perf_counter() - t0
            metrics["perf/tokens_per_s"] = metrics["sft/tokens"] / metrics["time/step"]
            row = writer.write(step, metrics)
            progress.step(step, row)
            if due(step, total, cfg.checkpoint):
                state = TrainerState(step=step, data=sampler.state_dict())
                model_dir = save_checkpoint(
                    run_dir,
                    model,
                    tokenizer,
                    optimizer,
                    scheduler,
                    state,
                    keep_last=cfg.checkpoint.keep_last,
                )
    finally:
        writer.close()
        progress.close()
    if cfg.log.plots:
        plot_runs({run_dir.name: read_metrics(run_dir / METRICS_FILE)}, run_dir / "plots")
    return SFTResult(run_dir=run_dir, model_dir=model_dir, metrics=row)


def due(step: int, total: int, cfg: CheckpointConfig) -> bool:
    """Whether a checkpoint is written after ``step``."""
    return bool((cfg.every and step % cfg.every == 0) or (step == total and cfg.save_final))


def _pack(examples: Sequence[SFTExample], pad_id: int) -> SequenceBatch:
    return pack([e.prompt_ids for e in examples], [e.response_ids for e in examples], pad_id)


def _response_nll_sum(model, micro: SequenceBatch, cfg: SFTConfig) -> torch.Tensor:
    """Summed NLL of the response tokens of ``micro`` (prompt and padding masked)."""
    micro = micro.trim_responses()
    with autocast(cfg.model):
        stats = integrations.token_stats(
            model,
            micro.input_ids,
            micro.attention_mask,
            micro.response_width,
            temperature=1.0,
            chunk_size=cfg.model.chunk_size,
            compute_entropy=False,
        )
    return -(stats.logp.float() * micro.response_mask).sum()


def sft_step(model, optimizer, scheduler, batch: SequenceBatch, cfg: SFTConfig) -> dict[str, float]:
    """One optimiser step of token-mean NLL over ``batch`` (micro-batched, same gradient)."""
    num_tokens = int(batch.response_mask.sum())
    lr = scheduler.get_last_lr()[0]
    total = 0.0
    for index in chunk_rows(batch.size, cfg.optim.micro_batch_size):
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
    for index in chunk_rows(batch.size, cfg.optim.micro_batch_size or cfg.batch_size):
        total += float(_response_nll_sum(model, batch.rows(index), cfg))
    return total / int(batch.response_mask.sum())
