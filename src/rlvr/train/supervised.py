"""Supervised fine-tuning: token-mean NLL of the responses, prompt tokens masked.

``sft(cfg)`` is the library entry point (``rlvr sft`` and the ``tiny`` preset's warm
start call it). It runs an :class:`SFTRun` in the run harness shared with RL
(:mod:`rlvr.train.harness`): the same data loading, metric writers, progress bar, callbacks
and checkpoints, so ``--resume`` continues an interrupted SFT run exactly as well.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rlvr.models import context_length, device_notes
from rlvr.train.batch import SequenceBatch, length_sorted_chunks, pack
from rlvr.train.config import SFTConfig
from rlvr.train.harness import Callback, EvalRecord, RunResult, StepRecord, run_job, start_run
from rlvr.train.heap import before_backward
from rlvr.train.logprobs import response_stats
from rlvr.train.lora import adapter_notes
from rlvr.train.optim import build_optimizer, clip_and_step, warn_long_warmup
from rlvr.train.policy import load_policy
from rlvr.train.preflight import preflight
from rlvr.train.prompts import IndexSampler, SFTExample, load_sft_examples, warn_shared_pairs

SFTResult = RunResult
"""What :func:`sft` returns (run directory, final model, last metrics)."""


@dataclass(kw_only=True)
class SFTRun:
    """Everything the steps of one SFT run share (a :class:`~rlvr.train.harness.Job`)."""

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
    order: IndexSampler
    """Order of the training pairs (resumable)."""
    optimizer: torch.optim.Optimizer
    """AdamW over the model."""
    scheduler: Any
    """Learning-rate schedule (``LambdaLR``)."""
    steps_per_epoch: int
    """Optimiser steps per pass over the data (of a run of ``epochs``)."""
    ended_pass: bool = False
    """Whether the last step drew the last pair of a pass over the data."""
    title: str = "sft"
    """Progress-bar title."""
    shown: Sequence[tuple[str, str]] = (("sft/loss", "loss"),)
    """Headline metrics of the progress bar."""

    @property
    def total_steps(self) -> int:
        """Optimiser steps of the whole run."""
        return self.cfg.steps or self.cfg.epochs * self.steps_per_epoch

    @property
    def notes(self) -> list[str]:
        """Lines the harness prints once at the start."""
        return device_notes(self.model) + adapter_notes(self.model)

    def step(self, step: int) -> StepRecord:
        """One optimiser step on the next ``batch_size`` pairs.

        A run of ``epochs`` passes ends each pass with a shorter batch when ``batch_size``
        does not divide the data, so that each pass sees every pair exactly once; a run of
        ``steps`` takes full batches that wrap into the next pass.
        """
        t0 = time.perf_counter()
        take = self.order.take if self.cfg.steps else self.order.take_within_epoch
        passes = self._passes()
        picked = [self.examples[i] for i in take(self.cfg.batch_size)]
        self.ended_pass = self._passes() > passes
        pad_id = self.tokenizer.pad_token_id
        metrics = sft_step(
            self.model, self.optimizer, self.scheduler, _pack(picked, pad_id), self.cfg
        )
        metrics.update({"data/skipped": float(self.skipped), "data/epoch": float(self.order.epoch)})
        metrics["time/step"] = time.perf_counter() - t0
        metrics["perf/tokens_per_s"] = metrics["sft/tokens"] / metrics["time/step"]
        return StepRecord(metrics)

    def _passes(self) -> int:
        """Passes over the data finished so far (pairs drawn // pairs)."""
        drawn = self.order.epoch * self.order.size + self.order.position
        return drawn // self.order.size

    def evaluate(self, step: int) -> EvalRecord | None:
        """Held-out NLL before training (step 0, with ``eval.at_start``), after each step whose
        batch ends a pass over the data (with ``steps`` the batch may go on into the next pass)
        and after the run's last step."""
        if not self.held_out:
            return None
        if step == 0:  # before training, as rlvr train's eval.at_start
            if not self.cfg.eval.at_start:
                return None
        elif not self.ended_pass and step != self.total_steps:
            return None
        nll = eval_nll(self.model, _pack(self.held_out, self.tokenizer.pad_token_id), self.cfg)
        return EvalRecord({"sft/eval_loss": nll}, {"eval_loss": nll})

    def close(self) -> None:
        """Nothing to release."""


def build_sft_run(cfg: SFTConfig, run_dir: Path, checkpoint: Path | None) -> SFTRun:
    """Load model and data, build the optimiser (weights from ``checkpoint`` if given)."""
    model, tokenizer = load_policy(cfg.model, str(checkpoint) if checkpoint else None)
    data = cfg.data
    examples, skipped = load_sft_examples(data.train, tokenizer, data, limit=data.max_examples)
    held_out = (
        load_sft_examples(data.eval, tokenizer, data, limit=None, role="eval")[0]
        if data.eval
        else []
    )
    warn_shared_pairs(examples, held_out)
    for role, pairs in (("train", examples), ("eval", held_out)):
        warn_pairs_past_context(model, pairs, role, data.max_tokens)
    per_epoch = math.ceil(len(examples) / cfg.batch_size)
    total = cfg.steps or cfg.epochs * per_epoch
    warn_long_warmup(cfg.optim, total)
    optimizer, scheduler = build_optimizer(model, cfg.optim, total)
    return SFTRun(
        cfg=cfg,
        run_dir=run_dir,
        model=model,
        tokenizer=tokenizer,
        examples=examples,
        held_out=held_out,
        skipped=skipped,
        order=IndexSampler(len(examples), seed=cfg.seed, shuffle=True),
        optimizer=optimizer,
        scheduler=scheduler,
        steps_per_epoch=per_epoch,
    )


def warn_pairs_past_context(model, pairs: Sequence[SFTExample], role: str, max_tokens: int) -> int:
    """Warn when pairs of ``data.<role>`` are longer than the model's context
    (``max_position_embeddings``), which ``data.max_tokens`` let through; returns how many."""
    context = context_length(model)
    lengths = [len(e.prompt_ids) + len(e.response_ids) for e in pairs]
    over = [n for n in lengths if context is not None and n > context]
    if over:
        use = "they train on" if role == "train" else "their sft/eval_loss is on"
        warnings.warn(
            f"data.{role}: {len(over)} of {len(pairs)} pairs are longer than the model's "
            f"context (max_position_embeddings={context}; the longest {max(over)} tokens), "
            f"which data.max_tokens={max_tokens} lets through: {use} positions the model was "
            f"not built for; data.max_tokens={context} skips them",
            stacklevel=2,
        )
    return len(over)


def sft(cfg: SFTConfig, *, resume: bool = False, callbacks: Sequence[Callback] = ()) -> SFTResult:
    """Fine-tune ``cfg.model`` on ``cfg.data``; ``resume`` continues from the latest checkpoint."""
    preflight(cfg)
    cfg, run = start_run(cfg, resume=resume)
    return run_job(cfg, run, build_sft_run(cfg, run.path, run.checkpoint), callbacks=callbacks)


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
        before_backward(model, cfg.model.trim_heap)
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
