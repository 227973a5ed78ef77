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

from rlvr.train.config import ObjectiveConfig, RewardConfig

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
    return ObjectiveDefaults(advantage=spec.advantage, loss_agg=spec.loss_agg)


def validate_objective(cfg: ObjectiveConfig) -> None:
    """Raise ``ValueError`` naming the key when the objective or a hyperparameter is unknown or invalid."""
    from rlvr.objectives import validate_hparams

    validate_hparams(cfg.name, dict(cfg.hparams))


def policy_loss(
    cfg: ObjectiveConfig, *, sft_threshold: float, **tensors: Any
) -> tuple[torch.Tensor, dict[str, Any]]:
    """``rlvr.objectives.policy_loss`` with the config's hyperparameters and regularisers."""
    from rlvr.objectives import policy_loss as _policy_loss

    return _policy_loss(
        cfg.name,
        loss_agg=cfg.loss_agg,
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


def zero_advantage_groups(advantages: torch.Tensor, group_size: int) -> torch.Tensor:
    """[B / group_size] bool: groups whose advantages are all zero."""
    from rlvr.advantages import zero_advantage_groups as _zero

    return _zero(advantages, group_size)


def group_stats(rewards: torch.Tensor, group_size: int):
    """Per-sample group statistics (pass rate, reward mean/std) over whole groups and the batch."""
    from rlvr.advantages import group_stats as _group_stats

    return _group_stats(rewards, group_size)


def select_stats(stats, index: torch.Tensor):
    """The rows ``index`` of a ``GroupStats``."""
    return stats.select(index)


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
    """One reward per completion, already mapped to ``(wrong, correct)``."""
    failures: int
    """Completions whose verifier raised (scored ``wrong``)."""
    timeouts: int
    """Completions whose verifier timed out (scored ``wrong``)."""


def build_verifier(cfg: RewardConfig):
    """The verifier named by ``cfg.verifier``."""
    from rlvr.rewards import get_verifier

    return get_verifier(cfg.verifier)


def score(
    verifier, cfg: RewardConfig, completions: Sequence[str], references: Sequence[Any]
) -> Scores:
    """Score completions; a verifier score ``s`` in ``[0, 1]`` becomes ``wrong + s * (correct - wrong)``."""
    from rlvr.rewards import score_batch

    result = score_batch(verifier, list(completions), list(references))
    span = cfg.correct - cfg.wrong
    rewards = [cfg.wrong + float(s) * span for s in result.values]
    return Scores(rewards=rewards, failures=int(result.failures), timeouts=int(result.timeouts))


@dataclass(frozen=True)
class Row:
    """One dataset row in the trainer's terms."""

    prompt: str
    """The question, before any chat template."""
    target: Any
    """The reference answer (RL) or the target response (SFT)."""


def load_rows(source: str, *, prompt_field: str, target_field: str, limit: int | None) -> list[Row]:
    """Rows of a JSONL/Parquet file or dataset, with the given field mapping."""
    from rlvr.data import load_examples

    examples = load_examples(
        source, prompt_field=prompt_field, answer_field=target_field, limit=limit
    )
    return [Row(prompt=e.prompt, target=e.answer) for e in examples]


def format_prompt(tokenizer, prompt: str, system_prompt: str | None) -> str:
    """The prompt as the model sees it (chat template applied when the tokenizer has one)."""
    from rlvr.data import format_prompt as _format

    return _format(tokenizer, prompt, system_prompt)


def evaluate(model, tokenizer, prompts: Sequence[Any], verifier, *, n: int, ks: Sequence[int], sampling, reward: RewardConfig, system_prompt: str | None = None) -> dict[str, float]:
    """Held-out ``avg@k``/``pass@k`` of ``prompts`` (``rlvr.train.prompts.Prompt``) through the evaluation harness."""
    from rlvr.evaluation import evaluate as _evaluate

    rows = [p.row for p in prompts]
    report = _evaluate(model, tokenizer, rows, verifier, n=n, ks=list(ks), sampling=sampling, system_prompt=system_prompt)
    return {k: float(v) for k, v in report.metrics.items()}
