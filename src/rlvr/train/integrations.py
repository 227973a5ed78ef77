"""The trainer's only contact points with the layers it drives.

One thin adapter per outside call (objectives, advantages, log-prob kernels, verifiers,
data loading, evaluation), so the loop reads in the trainer's own terms and a change in
another layer's signature touches one function here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rlvr.train.config import EvalConfig, ObjectiveConfig, RewardConfig

# ---------------------------------------------------------------- objectives / advantages


@dataclass(frozen=True)
class ObjectiveDefaults:
    """What an objective uses when the config leaves a choice open."""

    advantage: str
    """Advantage mode."""
    loss_agg: str
    """Aggregation mode."""


def objective_defaults(name: str) -> ObjectiveDefaults:
    """The objective's default advantage mode and aggregation (unknown name: error listing valid ones)."""
    from rlvr.objectives import objective_spec

    spec = objective_spec(name)
    return ObjectiveDefaults(advantage=spec.advantage_mode, loss_agg=spec.loss_agg)


def validate_objective(cfg: ObjectiveConfig, reward: RewardConfig | None = None) -> None:
    """Raise ``ValueError`` naming the key when the objective, a hyperparameter or a mode is invalid.

    With ``reward``, an objective that maps rewards through ``reward_range`` (``pmpo``,
    ``apmpo``) must have a range holding ``reward.wrong`` and ``reward.correct``.
    """
    from rlvr.advantages import ADVANTAGE_MODES
    from rlvr.objectives import LOSS_AGG_MODES, make_config

    try:
        objective = make_config(cfg.name, **cfg.hparams)
    except (TypeError, ValueError) as err:
        raise ValueError(f"objective: {err}") from err
    span = getattr(objective, "reward_range", None)
    if (
        reward is not None
        and span is not None
        and not span[0] <= reward.wrong < reward.correct <= span[1]
    ):
        raise ValueError(
            f"objective.reward_range={list(span)} must hold reward.wrong={reward.wrong} and "
            f"reward.correct={reward.correct} (e.g. objective.reward_range=[{reward.wrong}, {reward.correct}])"
        )
    if cfg.advantage is not None and cfg.advantage not in ADVANTAGE_MODES:
        raise ValueError(
            f"objective.advantage must be one of {list(ADVANTAGE_MODES)}, got {cfg.advantage!r}"
        )
    if cfg.loss_agg is not None and cfg.loss_agg not in LOSS_AGG_MODES:
        raise ValueError(
            f"objective.loss_agg must be one of {list(LOSS_AGG_MODES)}, got {cfg.loss_agg!r}"
        )


@dataclass(frozen=True)
class StepCounts:
    """Denominators of one optimiser step, passed to every micro-batch's loss."""

    num_tokens: int
    """Response tokens in the step."""
    num_seqs: int
    """Sequences with at least one response token."""
    num_sft_tokens: int | None
    """Response tokens of the positive responses (the SFT-on-positives term)."""


def step_counts(mask: torch.Tensor, rewards: torch.Tensor, sft_threshold: float) -> StepCounts:
    """Counts over the whole optimiser step's ``mask [B, T]`` and ``rewards [B]``."""
    from rlvr.objectives import step_counts as _counts

    c = _counts(mask, rewards, sft_threshold)
    return StepCounts(num_tokens=c.num_tokens, num_seqs=c.num_seqs, num_sft_tokens=c.num_sft_tokens)


def policy_loss(
    cfg: ObjectiveConfig, *, sft_threshold: float, counts: StepCounts, max_len: int, **tensors: Any
) -> tuple[torch.Tensor, dict[str, Any]]:
    """``rlvr.objectives.policy_loss`` with the config's hyperparameters, regularisers and the step's counts."""
    from rlvr.objectives import policy_loss as _policy_loss

    return _policy_loss(
        cfg.name,
        loss_agg=cfg.loss_agg,
        num_tokens=counts.num_tokens,
        num_seqs=counts.num_seqs,
        num_sft_tokens=counts.num_sft_tokens,
        max_len=max_len,
        kl_coef=cfg.kl_coef,
        kl_estimator=cfg.kl_estimator,
        sft_coef=cfg.sft_coef,
        sft_threshold=sft_threshold,
        entropy_coef=cfg.entropy_coef,
        **tensors,
        **cfg.hparams,
    )


def compute_advantages(rewards: torch.Tensor, group_size: int, mode: str) -> torch.Tensor:
    """[B] advantages of [B] rewards in contiguous groups."""
    from rlvr.advantages import compute_advantages as _compute

    return _compute(rewards, group_size, mode)


def zero_advantage_groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """[B / group_size] bool: groups whose rewards are all equal (every advantage zero)."""
    from rlvr.advantages import zero_advantage_groups as _zero

    return _zero(rewards, group_size)


def group_stats(cfg: ObjectiveConfig, rewards: torch.Tensor, group_size: int):
    """The objective's per-sample group statistics over the whole batch (``None`` if it needs none)."""
    from rlvr.objectives import group_stats_for

    return group_stats_for(cfg.name, rewards, group_size, **cfg.hparams)


def select_stats(stats, index: torch.Tensor):
    """The rows ``index`` of a ``GroupStats``."""
    return stats.rows(index)


# ---------------------------------------------------------------- log-probs


@dataclass
class TokenStats:
    """Per-token statistics of the sampled response tokens."""

    logp: torch.Tensor
    """[B, T] log-probability of each response token (with gradient when enabled)."""
    entropy: torch.Tensor | None
    """[B, T] entropy of the policy at each response position, or ``None``."""


def token_stats(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    num_response_tokens: int,
    *,
    temperature: float,
    chunk_size: int,
    compute_entropy: bool,
) -> TokenStats:
    """Log-probs (and entropy) of the last ``num_response_tokens`` columns, in memory chunks."""
    from rlvr.ops import sequence_token_stats

    out = sequence_token_stats(
        model,
        input_ids,
        attention_mask,
        num_response_tokens,
        temperature=temperature,
        chunk_size=chunk_size,
        compute_entropy=compute_entropy,
    )
    return TokenStats(logp=out.logp, entropy=out.entropy)


# ---------------------------------------------------------------- rewards / data / evaluation


@dataclass(frozen=True)
class Scores:
    """Rewards of a batch of completions and what went wrong while scoring them."""

    rewards: list[float]
    """One reward per completion (``reward.wrong`` where verification failed)."""
    failures: int
    """Completions whose verifier raised or returned a non-finite value."""
    timeouts: int
    """Completions whose verifier ran out of time."""


def open_scorer(cfg: RewardConfig):
    """A scorer for the run (a context manager; owns worker processes when ``workers >= 1``)."""
    from rlvr.rewards import Scorer, ScoringConfig, get_verifier

    verifier = get_verifier(cfg.verifier, correct=cfg.correct, wrong=cfg.wrong, **cfg.options)
    return Scorer(verifier, ScoringConfig(timeout_s=cfg.timeout_s, workers=cfg.workers))


def score(scorer, completions: Sequence[str], references: Sequence[Any]) -> Scores:
    """Score completions; failures and timeouts are counted, never raised."""
    result = scorer(list(completions), list(references))
    return Scores(
        rewards=[float(v) for v in result.values],
        failures=result.failures,
        timeouts=result.timeouts,
    )


def load_examples(
    source: str,
    *,
    fields: Any,
    split: str | None = None,
    template: str | None = None,
    limit: int | None = None,
) -> list:
    """Examples (``.prompt``, ``.reference``) of a file, directory, named or hub dataset."""
    from rlvr.data import load_examples as _load

    return _load(source, fields=fields, split=split, template=template, limit=limit)


def write_gym_set(
    path, task: str, *, size: int, seed: int, config: dict[str, Any], exclude: Sequence[str] = ()
) -> None:
    """Generate ``size`` reasoning-gym problems of ``task`` into the JSONL file ``path``."""
    from rlvr.data import gym_rows, questions_in, write_jsonl

    rows = gym_rows(task, size=size, seed=seed, config=config, exclude=questions_in(exclude))
    write_jsonl(rows, path)


def field_map(name: str | None, *, prompt: str, answer: str):
    """A named field mapping, or the mapping ``prompt``/``answer`` when ``name`` is ``None``."""
    from rlvr.data import FieldMap

    return name if name is not None else FieldMap(prompt=prompt, answer=answer)


def format_prompt(tokenizer, prompt: Any, system_prompt: str | None) -> str:
    """The prompt as the model sees it (chat template applied when the tokenizer has one)."""
    from rlvr.data import format_prompt as _format

    return _format(tokenizer, prompt, system_prompt)


def evaluate(
    model,
    tokenizer,
    examples: Sequence[Any],
    scorer,
    cfg: EvalConfig,
    *,
    sampling,
    system_prompt: str | None,
) -> dict[str, float]:
    """Held-out ``avg@k``, ``pass@k`` (and the harness's other metrics) through the evaluation harness."""
    from rlvr.evaluation import EvalConfig as HarnessConfig
    from rlvr.evaluation import evaluate as _evaluate

    harness = HarnessConfig(
        n=cfg.n,
        ks=tuple(cfg.ks),
        sampling=sampling,
        batch_size=cfg.batch_size,
        seed=cfg.seed,
        system_prompt=system_prompt,
        keep_completions=False,
    )
    report = _evaluate(model, tokenizer, list(examples), scorer.verifier, harness, scorer=scorer)
    return {k: float(v) for k, v in report.metrics.items()}
