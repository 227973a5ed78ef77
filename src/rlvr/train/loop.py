"""The RL job: rollout -> verify -> advantages -> objective -> optimiser step, logged.

Read :func:`train` for a whole run and :func:`train_step` top to bottom for one step.
:func:`build_run` loads everything the steps share into an :class:`RLRun`; :func:`train`
hands it to the run harness (:mod:`rlvr.train.harness`), which owns the loop, evaluation
and checkpoint schedule, logging and resuming.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rlvr.evaluation import evaluate as evaluate_examples
from rlvr.evaluation.harness import EvalReport, report_document, warn_repeated_problems
from rlvr.generation import Sampler, SamplingConfig, make_sampler
from rlvr.models import context_length, device_notes
from rlvr.objectives import ObjectiveConfig
from rlvr.objectives.contrast import PREFIX as CONTRAST_PREFIX
from rlvr.rewards import Scorer, Scores, ScoringConfig
from rlvr.rewards.registry import sandbox_isolation
from rlvr.sandbox import isolation_level
from rlvr.train.async_rollout import RolloutStream
from rlvr.train.config import DataConfig, RewardConfig, TrainConfig
from rlvr.train.harness import Callback, EvalRecord, RunResult, StepRecord, run_job, start_run
from rlvr.train.logprobs import forward_context
from rlvr.train.lora import adapter_notes, has_adapters
from rlvr.train.metrics import peak_gpu_mb, peak_rss_mb
from rlvr.train.optim import build_optimizer, warn_long_warmup
from rlvr.train.policy import load_policy
from rlvr.train.preflight import UNCONFINED, preflight, run_verifier, verifier_options
from rlvr.train.progress import Headline
from rlvr.train.prompts import (
    IndexSampler,
    PromptSet,
    load_prompt_set,
    named_by_source,
    warn_few_prompts,
    warn_generated_held_out,
    warn_shared_prompts,
    warn_task_verifier,
)
from rlvr.train.rollout import (
    Rounds,
    assemble,
    behaviour_logp,
    check_scores,
    collect_rounds,
    rollout_metrics,
    samples,
)
from rlvr.train.update import update_policy

TrainResult = RunResult
"""What :func:`train` returns (run directory, final model, last metrics, held-out scores, plots)."""

SHOWN = (("reward/mean", "reward"), ("reward/accuracy", "acc"), ("policy/entropy", "entropy"))


@dataclass(kw_only=True)
class RLRun:
    """Everything the steps of one RL run share (a :class:`~rlvr.train.harness.Job`)."""

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
    generator: Sampler
    """Samples the rollouts and the evaluations (``rollout.sampler``)."""
    scorer: Scorer
    """The configured verifier with its time limit and worker processes."""
    train_set: PromptSet
    """Training prompts, tokenised."""
    eval_set: PromptSet | None
    """Held-out prompts (``None``: no evaluation)."""
    order: IndexSampler | RolloutStream
    """Order of the training prompts (resumable); under ``rollout.staleness >= 1`` the stream
    of the generation worker, whose state also holds the batches sampled ahead."""
    optimizer: torch.optim.Optimizer
    """AdamW over the policy."""
    scheduler: Any
    """Learning-rate schedule (``LambdaLR``)."""
    objective: ObjectiveConfig
    """The policy loss, built once (SFT threshold resolved against ``reward.correct``)."""
    sandbox: str | None = None
    """Isolation mode of the code sandbox when the verifier runs programs, else ``None``."""
    stream: RolloutStream | None = None
    """The generation worker's batches under ``rollout.staleness >= 1`` (``None``: synchronous)."""
    title: str = "train"
    """Progress-bar title."""
    shown: Sequence[tuple[str, str] | Headline] = SHOWN
    """Headline metrics of the progress bar."""

    @property
    def model(self) -> Any:
        """The policy (what the harness checkpoints)."""
        return self.policy

    @property
    def notes(self) -> list[str]:
        """Lines the harness prints once at the start."""
        return device_notes(self.policy) + sandbox_notes(self.sandbox) + adapter_notes(self.policy)

    @property
    def total_steps(self) -> int:
        """Rollout steps of the run."""
        return self.cfg.steps

    def step(self, step: int) -> StepRecord:
        """One RL step (:func:`train_step`)."""
        return train_step(self, step)

    def evaluate(self, step: int) -> EvalRecord | None:
        """Held-out ``avg@k``/``pass@k`` when the schedule says so."""
        return evaluate(self, step) if _eval_due(self, step) else None

    def close(self) -> None:
        """Stop the generation worker and the verifier workers, release the sampler."""
        with contextlib.ExitStack() as stack:  # each is closed even if one before fails
            stack.callback(self.generator.close)
            stack.callback(self.scorer.close)
            if self.stream is not None:
                stack.callback(self.stream.close)


def build_run(cfg: TrainConfig, run_dir: Path, checkpoint: Path | None) -> RLRun:
    """Load models, data, verifier, sampler and optimiser (weights from ``checkpoint`` if given)."""
    policy, tokenizer = load_policy(cfg.model, str(checkpoint) if checkpoint else None)
    reference = None
    if cfg.objective.kl_coef > 0:  # the reference model exists only when the KL term does
        if has_adapters(policy):  # the policy itself, with its adapters off (rlvr.train.lora)
            reference = policy
        else:
            reference, _ = load_policy(cfg.model)
            reference.requires_grad_(False).eval()
    data = fit_context(cfg, policy.config)
    train_set = load_prompt_set(tokenizer, data, role="train")
    warn_task_verifier(data, cfg.reward.verifier)
    warn_few_prompts(len(train_set.prompts), cfg.rollout.prompts_per_step)
    eval_set = None
    if data.eval:  # named as rlvr eval names them, so its reports pair with the run's
        eval_set = named_by_source(load_prompt_set(tokenizer, data, role="eval"), data.eval)
    if eval_set is not None:
        warn_generated_held_out(data)
        warn_shared_prompts(train_set, eval_set)
        warn_repeated_problems([p.example for p in eval_set.prompts])
    order = IndexSampler(len(train_set.prompts), seed=cfg.seed, shuffle=data.shuffle)
    updates = cfg.steps * cfg.rollout.minibatches * cfg.rollout.epochs
    warn_long_warmup(cfg.optim, updates)
    optimizer, scheduler = build_optimizer(policy, cfg.optim, updates)
    ro = cfg.rollout
    generator = make_sampler(ro.sampler, policy, tokenizer, **ro.sampler_options)
    scorer = open_scorer(cfg.reward)
    stream = None
    if ro.staleness:  # forks the generation worker, which inherits the model and prompts
        opener = functools.partial(open_scorer, cfg.reward)
        stream = RolloutStream(cfg, policy, tokenizer, generator, train_set.prompts, opener)
    return RLRun(
        cfg=cfg,
        run_dir=run_dir,
        policy=policy,
        reference=reference,
        tokenizer=tokenizer,
        generator=generator,
        scorer=scorer,
        train_set=train_set,
        eval_set=eval_set,
        order=order if stream is None else stream,
        optimizer=optimizer,
        scheduler=scheduler,
        objective=cfg.loss_config,
        sandbox=sandbox_isolation(cfg.reward.verifier),
        stream=stream,
        shown=(*SHOWN, *contrast_shown(cfg.log.contrast)),
    )


def contrast_shown(names: Sequence[str]) -> list[Headline]:
    """Progress-line entries of ``log.contrast``: each name's share of tokens whose update
    differs from the run's (``contrast/<name>/token_frac``)."""
    return [Headline(f"{CONTRAST_PREFIX}{n}/token_frac", f"differs vs {n}", True) for n in names]


def sandbox_notes(mode: str | None) -> list[str]:
    """What a run prints about the code sandbox: its isolation mode, and where programs can
    read files outside their box (:data:`~rlvr.train.preflight.UNCONFINED`), that the
    references may be among them (docs/sandbox.md)."""
    if mode is None:
        return []
    notes = [f"code sandbox isolation: {mode}"]
    if mode in UNCONFINED:
        notes.append(
            "warning: programs can read files outside their box, the references included, so "
            "a policy can be paid for reading the answers: install bubblewrap (docs/sandbox.md)"
        )
    return notes


def open_scorer(cfg: RewardConfig) -> Scorer:
    """The run's scorer (a context manager; owns worker processes when ``workers >= 1``)."""
    return Scorer(run_verifier(cfg), ScoringConfig(timeout_s=cfg.timeout_s, workers=cfg.workers))


def fit_context(cfg: TrainConfig, model_config) -> DataConfig:
    """``cfg.data`` with ``max_prompt_tokens`` lowered (and a warning) so prompt + completion
    fit the context of the model (``model_config``: its ``config``), for the rollout's budget
    and, with held-out data, the evaluation's."""
    context = context_length(model_config)
    data, (key, budget) = cfg.data, _largest_budget(cfg)
    if context is None or data.max_prompt_tokens + budget <= context:
        return data
    if context - budget < 1:
        raise ValueError(
            f"{key}={budget} leaves no room for a prompt in the model's context of {context} tokens"
        )
    warnings.warn(
        f"data.max_prompt_tokens={data.max_prompt_tokens} + {key}={budget} exceeds the model's context of {context}; prompts are limited to {context - budget} tokens",
        stacklevel=2,
    )
    return dataclasses.replace(data, max_prompt_tokens=context - budget)


def _largest_budget(cfg: TrainConfig) -> tuple[str, int]:
    """The completion budget prompts must leave room for, and the key that sets it."""
    rollout = ("rollout.max_new_tokens", cfg.rollout.max_new_tokens)
    evaluation = cfg.eval.max_new_tokens if cfg.data.eval else None
    return ("eval.max_new_tokens", evaluation) if (evaluation or 0) > rollout[1] else rollout


def train_step(run: RLRun, step: int) -> StepRecord:
    """One step: rollout and verify, advantages and filters, update; its metrics and a few samples."""
    cfg, t0 = run.cfg, time.perf_counter()
    _mode(run, training=False)
    rounds, lag = _rollout(run, step)
    check_scores(torch.cat([r.rewards for r in rounds.sampled]).tolist(), cfg.reward)
    batch, metrics = assemble(rounds.kept, run.tokenizer.pad_token_id, cfg)
    metrics.update(rollout_metrics(rounds.sampled, cfg))
    metrics.update(lag)
    # With nothing left to learn from (all filtered or masked) there is no optimiser step.
    metrics["update/skipped"] = float(batch is None)
    if batch is not None:
        metrics.update(_update(run, batch))
    if run.stream is not None:
        run.stream.publish()  # the worker samples step + k from these weights
    metrics["time/step"] = time.perf_counter() - t0
    metrics["perf/tokens_per_s"] = metrics["perf/generated_tokens"] / metrics["time/step"]
    metrics["perf/peak_rss_mb"] = peak_rss_mb()
    gpu = peak_gpu_mb(next(run.policy.parameters()).device)
    if gpu is not None:
        metrics["perf/peak_gpu_mb"] = gpu
    metrics["data/epoch"] = float(run.order.epoch)
    metrics["data/prompts_skipped"] = float(run.train_set.skipped)
    metrics["data/prompts_truncated"] = float(run.train_set.truncated)
    if run.sandbox is not None:
        metrics["sandbox/isolation_level"] = float(isolation_level(run.sandbox))
    prompts = [p for rnd in rounds.sampled for p in rnd.prompts]
    return StepRecord(metrics, samples(rounds.sampled, cfg.log.samples_per_step, cfg), prompts)


def _rollout(run: RLRun, step: int) -> tuple[Rounds, dict[str, float]]:
    """The step's rounds, sampled now or (``rollout.staleness >= 1``) by the generation worker,
    with the staleness and wait metrics of the latter."""
    if run.stream is not None:
        return run.stream.next(step)
    run.generator.sync_weights()  # the policy changed since the last rollout
    rounds = collect_rounds(
        run.generator, run.tokenizer, run.scorer, run.train_set.prompts, run.order, run.cfg
    )
    return rounds, {}


def _update(run: RLRun, batch) -> dict[str, float]:
    """Behaviour/reference log-probs where needed, then the optimiser steps over ``batch``."""
    batch, seconds = behaviour_logp(batch, run.policy, run.reference, run.cfg)
    t0 = time.perf_counter()
    _mode(run, training=True)
    metrics = update_policy(run.policy, run.optimizer, run.scheduler, batch, run.cfg, run.objective)
    metrics["time/logp"], metrics["time/update"] = seconds, time.perf_counter() - t0
    metrics["batch/sequences"] = float(batch.size)
    metrics["batch/tokens"] = float(batch.seqs.response_mask.sum())
    return metrics


def evaluate(run: RLRun, step: int | None = None) -> EvalRecord:
    """Held-out metrics (``eval/avg@k``, ``eval/pass@k``, ...) through the evaluation harness,
    and the report ``rlvr eval`` would write of them (the evaluation after ``step``; with
    ``eval.reports`` false, none)."""
    ev, cfg = run.cfg.eval, run.cfg
    sampling = SamplingConfig(
        max_new_tokens=ev.max_new_tokens or cfg.rollout.max_new_tokens,
        temperature=ev.temperature,
        top_p=ev.top_p,
    )
    _mode(run, training=False)
    t0 = time.perf_counter()
    examples = [p.example for p in run.eval_set.prompts]
    harness = ev.harness(
        sampling, system_prompt=cfg.data.system_prompt, scoring=run.scorer.config
    )  # the scorer's time limit recorded, as rlvr eval --against compares them
    with forward_context(cfg.model):
        report = evaluate_examples(
            run.policy,
            run.tokenizer,
            examples,
            run.scorer.verifier,
            harness,
            scorer=functools.partial(_checked, run.scorer, cfg.reward),
            sampler=run.generator,
            prompt_ids=[p.ids for p in run.eval_set.prompts],
        )
    scores = {k: float(v) for k, v in report.metrics.items()}
    metrics = {f"eval/{k}": v for k, v in scores.items()}
    metrics["time/eval"] = time.perf_counter() - t0
    headline = {k: v for k, v in scores.items() if "@" in k}
    document = _document(run, report, step) if ev.reports else None  # eval.reports=false: none
    return EvalRecord(metrics, headline, report, document)


def _document(run: RLRun, report: EvalReport, step: int | None) -> dict[str, Any]:
    """The evaluation's JSON report in ``rlvr eval``'s format (completions are not kept), so
    ``rlvr eval --against`` pairs a model's report with it: with the fingerprint of the
    policy's weights (merged as its checkpoint holds them; one pass over them) and how it
    computes (``loading``), which ``--against`` compares."""
    from rlvr.models.fingerprint import weights_sha256

    cfg = run.cfg
    return report_document(
        report,
        model=cfg.model.name,
        data=[cfg.data.eval],
        verifier=run.scorer.verifier.spec,
        verifier_options=verifier_options(cfg.reward),
        loading={
            "template": cfg.data.template,
            "dtype": cfg.model.dtype,
            "autocast": cfg.model.autocast,
        },
        weights={"sha256": weights_sha256(run.policy)},
        sampler={"name": cfg.rollout.sampler, "options": cfg.rollout.sampler_options},
        run=str(run.run_dir),
        step=step,
    )


def _checked(scorer: Scorer, reward: RewardConfig, texts, references) -> Scores:
    """The scorer's scores, refused outside the reward's range (:func:`check_scores`)."""
    scores = scorer(texts, references)
    check_scores(scores.values, reward)
    return scores


def _eval_due(run: RLRun, step: int) -> bool:
    ev = run.cfg.eval
    if run.eval_set is None:
        return False
    if step == 0:  # a multiple of every N, but only `at_start` evaluates before training
        return ev.at_start
    return bool((ev.every and step % ev.every == 0) or (step == run.cfg.steps and ev.at_end))


def _mode(run: RLRun, *, training: bool) -> None:
    """Train mode only where gradient checkpointing needs it (dropout is disabled at load)."""
    if run.cfg.model.gradient_checkpointing:
        run.policy.train(training)


def train(
    cfg: TrainConfig, *, resume: bool = False, callbacks: Sequence[Callback] = ()
) -> TrainResult:
    """Run RL training; ``resume`` continues from the latest checkpoint in ``log.output_dir``."""
    preflight(cfg)
    cfg, run = start_run(cfg, resume=resume)
    return run_job(cfg, run, build_run(cfg, run.path, run.checkpoint), callbacks=callbacks)
