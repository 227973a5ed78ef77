"""The RL loop: rollout -> verify -> advantages -> objective -> optimiser step, logged.

Read :func:`train` top to bottom: it builds a :class:`Run` (everything the steps share),
then calls :func:`train_step` once per step, evaluating and checkpointing on schedule.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from rlvr.generation import SamplingConfig
from rlvr.train import integrations
from rlvr.train.checkpoint import (
    TrainerState,
    due,
    load_trainer_state,
    save_checkpoint,
    seed_everything,
)
from rlvr.train.config import DataConfig, TrainConfig
from rlvr.train.metrics import METRICS_FILE, MetricsWriter, read_metrics
from rlvr.train.overrides import to_dict
from rlvr.train.plots import plot_runs
from rlvr.train.progress import ProgressReporter
from rlvr.train.prompts import IndexSampler, PromptSet, load_prompt_set
from rlvr.train.rollout import assemble, behaviour_logp, collect_rounds, rollout_metrics, samples
from rlvr.train.setup import (
    autocast,
    build_optimizer,
    expand_output_dir,
    load_policy,
    peak_rss_mb,
    prepare_run_dir,
    set_threads,
)
from rlvr.train.update import update_policy


@dataclass
class Run:
    """Everything the steps of one run share."""

    cfg: TrainConfig
    """The run's configuration."""
    run_dir: Path
    """Where everything is written."""
    policy: Any
    """The model being trained."""
    reference: Any
    """Frozen initial policy for the KL term (``None`` when ``kl_coef = 0``)."""
    tokenizer: Any
    """The policy's tokenizer."""
    scorer: Any
    """``rlvr.rewards.Scorer`` of the configured verifier."""
    train_set: PromptSet
    """Training prompts, tokenised."""
    eval_set: PromptSet | None
    """Held-out prompts (``None``: no evaluation)."""
    sampler: IndexSampler
    """Order of the training prompts (resumable)."""
    optimizer: torch.optim.Optimizer
    """AdamW over the policy."""
    scheduler: Any
    """Learning-rate schedule (``LambdaLR``)."""
    advantage_mode: str
    """Advantage mode in use (the config's or the objective's default)."""
    start_step: int = 0
    """Last completed step before this process started (0: fresh run)."""
    evals: dict[int, dict[str, float]] = field(default_factory=dict)
    """Held-out ``avg@k``/``pass@k`` by step."""


@dataclass(frozen=True)
class TrainResult:
    """Where a run wrote its outputs, and its held-out scores."""

    run_dir: Path
    """Run directory (config, metrics.jsonl, samples.jsonl, tb/, checkpoints/)."""
    model_dir: Path | None
    """Final checkpoint (a plain HF model directory), if saved."""
    metrics: dict[str, float | None]
    """Metrics of the last step."""
    evals: dict[int, dict[str, float]]
    """Held-out ``avg@k``/``pass@k`` by step (step 0: before training)."""
    plots: list[Path] = field(default_factory=list)
    """PNG files written at the end."""

    def summary_lines(self) -> list[str]:
        """What the command line prints at the end."""
        lines = [
            f"{name:<18}" + "  ".join(f"{k} {v:.3f}" for k, v in m.items())
            for name, m in self._eval_rows()
        ]
        if change := self.change_points():
            lines.append(
                f"{'held-out change:':<18}"
                + "  ".join(f"{k} {v:+.1f} pts" for k, v in change.items())
            )
        lines.append(f"metrics:          {self.run_dir / 'metrics.jsonl'}")
        if self.plots:
            lines.append(f"plots:            {self.plots[0].parent}")
        if self.model_dir is not None:
            lines.append(f"model:            {self.model_dir}")
        return lines

    def _eval_rows(self):
        for step in sorted(self.evals):
            yield (f"held-out @ {step}:" if step else "held-out before:"), self.evals[step]

    def change_points(self) -> dict[str, float]:
        """Held-out gain of the run in points (last evaluation minus the one before training)."""
        steps = sorted(self.evals)
        if len(steps) < 2 or steps[0] != 0:
            return {}
        first, last = self.evals[0], self.evals[steps[-1]]
        return {k: 100 * (last[k] - first[k]) for k in first if k in last}


def build_run(cfg: TrainConfig, run_dir: Path, checkpoint: Path | None) -> Run:
    """Load models, data, verifier and optimiser; restore state from ``checkpoint`` if given."""
    set_threads(cfg.threads)
    seed_everything(cfg.seed)
    policy, tokenizer = load_policy(cfg.model, str(checkpoint) if checkpoint else None)
    reference = None
    if cfg.objective.kl_coef > 0:  # the reference model exists only when the KL term does
        reference, _ = load_policy(cfg.model)
        reference.requires_grad_(False).eval()
    data = fit_context(cfg, policy)
    train_set = load_prompt_set(tokenizer, data, role="train")
    eval_set = load_prompt_set(tokenizer, data, role="eval") if data.eval else None
    sampler = IndexSampler(len(train_set.prompts), seed=cfg.seed, shuffle=data.shuffle)
    updates = cfg.steps * cfg.rollout.minibatches * cfg.rollout.epochs
    optimizer, scheduler = build_optimizer(policy, cfg.optim, updates)
    mode = cfg.objective.advantage or integrations.objective_defaults(cfg.objective.name).advantage
    scorer = integrations.open_scorer(cfg.reward)
    run = Run(
        cfg,
        run_dir,
        policy,
        reference,
        tokenizer,
        scorer,
        train_set,
        eval_set,
        sampler,
        optimizer,
        scheduler,
        mode,
    )
    if checkpoint is not None:
        state = load_trainer_state(checkpoint, optimizer, scheduler)
        sampler.load_state_dict(state.data)
        run.start_step = state.step
        run.evals = {int(k): v for k, v in state.extra.get("evals", {}).items()}
    return run


def fit_context(cfg: TrainConfig, model) -> DataConfig:
    """``cfg.data`` with ``max_prompt_tokens`` lowered (and a warning) so prompt + completion fit the model's context."""
    context = getattr(model.config, "max_position_embeddings", None)
    data, budget = cfg.data, cfg.rollout.max_new_tokens
    if context is None or data.max_prompt_tokens + budget <= context:
        return data
    if context - budget < 1:
        raise ValueError(
            f"rollout.max_new_tokens={budget} leaves no room for a prompt in the model's context of {context} tokens"
        )
    warnings.warn(
        f"data.max_prompt_tokens={data.max_prompt_tokens} + rollout.max_new_tokens={budget} exceeds the model's context of {context}; prompts are limited to {context - budget} tokens",
        stacklevel=2,
    )
    return dataclasses.replace(data, max_prompt_tokens=context - budget)


def train_step(run: Run) -> tuple[dict[str, float], list[dict]]:
    """One step: rollout and verify, advantages and filters, update; its metrics and a few samples."""
    cfg, t0 = run.cfg, time.perf_counter()
    _mode(run, training=False)
    sampled, kept = collect_rounds(
        run.policy, run.tokenizer, run.scorer, run.train_set.prompts, run.sampler, cfg
    )
    batch, metrics = assemble(kept, run.tokenizer.pad_token_id, cfg, run.advantage_mode)
    metrics.update(rollout_metrics(sampled, cfg))
    # With nothing left to learn from (all filtered or masked) there is no optimiser step.
    metrics["update/skipped"] = float(batch is None)
    if batch is not None:
        metrics.update(_update(run, batch))
    metrics["time/step"] = time.perf_counter() - t0
    metrics["perf/tokens_per_s"] = metrics["perf/generated_tokens"] / metrics["time/step"]
    metrics["perf/peak_rss_mb"] = peak_rss_mb()
    metrics["data/epoch"] = float(run.sampler.epoch)
    metrics["data/prompts_skipped"] = float(run.train_set.skipped)
    metrics["data/prompts_truncated"] = float(run.train_set.truncated)
    return metrics, samples(sampled, cfg.log.samples_per_step)


def _update(run: Run, batch) -> dict[str, float]:
    """Behaviour/reference log-probs where needed, then the optimiser steps over ``batch``."""
    batch, seconds = behaviour_logp(batch, run.policy, run.reference, run.cfg)
    t0 = time.perf_counter()
    _mode(run, training=True)
    metrics = update_policy(run.policy, run.optimizer, run.scheduler, batch, run.cfg)
    metrics["time/logp"], metrics["time/update"] = seconds, time.perf_counter() - t0
    metrics["batch/sequences"] = float(batch.size)
    metrics["batch/tokens"] = float(batch.seqs.response_mask.sum())
    return metrics


def evaluate(run: Run) -> dict[str, float]:
    """Held-out metrics (``eval/avg@k``, ``eval/pass@k``, ...) through the evaluation harness."""
    ev, cfg = run.cfg.eval, run.cfg
    sampling = SamplingConfig(
        max_new_tokens=ev.max_new_tokens or cfg.rollout.max_new_tokens,
        temperature=ev.temperature,
        top_p=ev.top_p,
    )
    _mode(run, training=False)
    t0 = time.perf_counter()
    with autocast(cfg.model):
        scores = integrations.evaluate(
            run.policy,
            run.tokenizer,
            [p.example for p in run.eval_set.prompts],
            run.scorer,
            ev,
            sampling=sampling,
            system_prompt=cfg.data.system_prompt,
        )
    out = {f"eval/{k}": v for k, v in scores.items()}
    out["time/eval"] = time.perf_counter() - t0
    return out


def _eval_due(run: Run, step: int) -> bool:
    ev = run.cfg.eval
    if run.eval_set is None:
        return False
    return bool(
        (ev.every and step % ev.every == 0)
        or (step == run.cfg.steps and ev.at_end)
        or (step == 0 and ev.at_start)
    )


def _mode(run: Run, *, training: bool) -> None:
    """Train mode only where gradient checkpointing needs it (dropout is disabled at load)."""
    if run.cfg.model.gradient_checkpointing:
        run.policy.train(training)


def train(cfg: TrainConfig, *, resume: bool = False) -> TrainResult:
    """Run RL training; ``resume`` continues from the latest checkpoint in ``log.output_dir``."""
    cfg = expand_output_dir(cfg)
    integrations.validate_objective(cfg.objective, cfg.reward)
    run_dir, checkpoint = prepare_run_dir(cfg, resume=resume)
    run = build_run(cfg, run_dir, checkpoint)
    writer = MetricsWriter(
        run_dir, cfg.log, resume_step=run.start_step if checkpoint else None, config=to_dict(cfg)
    )
    shown = [("reward/mean", "reward"), ("reward/accuracy", "acc"), ("policy/entropy", "entropy")]
    progress = ProgressReporter(
        cfg.log, total=cfg.steps, start=run.start_step, title="train", shown=shown
    )
    try:
        with run.scorer:
            row, model_dir = _run_steps(run, writer, progress)
    finally:
        writer.close()
        progress.close()
    plots = (
        plot_runs({run_dir.name: read_metrics(run_dir / METRICS_FILE)}, run_dir / "plots")
        if cfg.log.plots
        else []
    )
    return TrainResult(
        run_dir=run_dir, model_dir=model_dir, metrics=row, evals=run.evals, plots=plots
    )


def _run_steps(
    run: Run, writer: MetricsWriter, progress: ProgressReporter
) -> tuple[dict, Path | None]:
    """Steps ``start + 1 .. steps`` with evaluation and checkpoints on schedule."""
    cfg, row, model_dir = run.cfg, {}, None
    if run.start_step == 0 and _eval_due(run, 0):
        run.evals[0] = _log_eval(run, writer, progress)
    for step in range(run.start_step + 1, cfg.steps + 1):
        metrics, examples = train_step(run)
        if _eval_due(run, step):
            metrics.update(evaluate(run))
            run.evals[step] = {
                k[5:]: v for k, v in metrics.items() if k.startswith("eval/") and "@" in k
            }
        row = writer.write(step, metrics)
        writer.write_samples(step, examples)
        progress.step(step, row)
        if due(step, cfg.steps, cfg.checkpoint):
            state = TrainerState(
                step=step, data=run.sampler.state_dict(), extra={"evals": run.evals}
            )
            model_dir = save_checkpoint(
                run.run_dir,
                run.policy,
                run.tokenizer,
                run.optimizer,
                run.scheduler,
                state,
                keep_last=cfg.checkpoint.keep_last,
            )
    return row, model_dir


def _log_eval(run: Run, writer: MetricsWriter, progress: ProgressReporter) -> dict[str, float]:
    """The evaluation before the first step, written as step 0."""
    metrics = evaluate(run)
    writer.write(0, metrics)
    scores = {k[5:]: v for k, v in metrics.items() if k.startswith("eval/") and "@" in k}
    progress.message(
        "held-out before training: " + "  ".join(f"{k} {v:.3f}" for k, v in scores.items())
    )
    return scores
