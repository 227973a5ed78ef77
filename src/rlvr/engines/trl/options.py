"""Which ``GRPOConfig`` options :class:`~rlvr.engines.trl.RlvrGRPOTrainer` takes, and which it refuses.

The loss is the rlvr objective; TRL options that would change it behind the user's back are
refused with an error naming the option (:data:`REFUSED`), instead of being ignored:
TRL's own ``loss_type``, its clip widths (``epsilon``, ``epsilon_high``: the objective's widths
are ``objective_kwargs``), entropy masking, off-policy sequence masking, two-sided clipping,
sequence-level ratios, the adaptive entropy coefficient, TRL's advantage scaling and the KL's
ratio correction. Options TRL already has for a regulariser set it: ``beta`` is the KL
weight (``kl_coef``) and ``entropy_coef`` the entropy bonus. ``vllm_importance_sampling_correction``
is honoured: the ratios become the objective's per-token weights.

Reward functions TRL could not call (:func:`check_reward_funcs`) are refused before the model
loads, and a run whose every step is on-policy, where no objective's clip can act, is named
(:func:`on_policy_note`).
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import torch

from rlvr.objectives import ObjectiveConfig, make_config
from rlvr.rewards import Verifier


class Refusal(NamedTuple):
    """A ``GRPOConfig`` field whose non-default value would change the objective."""

    field: str
    """The ``GRPOConfig`` field."""
    refused: Callable[[Any], bool]
    """True for the values that are refused."""
    why: str
    """What the value would do, and what to use instead."""


REFUSED = (
    Refusal(
        "loss_type", lambda v: v != "dapo", "it selects TRL's own loss; the loss is objective="
    ),
    Refusal(
        "epsilon", lambda v: v != 0.2, "the clip widths are objective_kwargs (eps_low, eps1...)"
    ),
    Refusal("epsilon_high", lambda v: v is not None, "the clip widths are objective_kwargs"),
    Refusal(
        "delta", lambda v: v is not None, "two-sided clipping changes the ratio the objective sees"
    ),
    Refusal(
        "importance_sampling_level",
        lambda v: v != "token",
        "sequence-level ratios replace the token ratios (objective='gspo' is the sequence ratio)",
    ),
    Refusal(
        "top_entropy_quantile",
        lambda v: v < 1.0,
        "entropy masking drops low-entropy tokens from the objective",
    ),
    Refusal(
        "off_policy_mask_threshold",
        lambda v: v is not None,
        "off-policy sequence masking drops sequences from the objective",
    ),
    Refusal(
        "use_adaptive_entropy",
        bool,
        "the entropy weight would move during training; entropy_coef is rlvr's fixed bonus",
    ),
    Refusal(
        "scale_rewards",
        lambda v: v != "group",
        "advantages follow advantage= (group_std, group_mean, batch_std)",
    ),
    Refusal(
        "multi_objective_aggregation",
        lambda v: v != "sum_then_normalize",
        "the reward is the weighted sum of the reward functions",
    ),
)
"""The refused ``GRPOConfig`` values (TRL 1.16 names)."""


def check_args(args: Any) -> None:
    """Raise ValueError naming the first ``GRPOConfig`` option that would change the objective,
    or a regulariser weight (``beta``, ``entropy_coef``) that is not a finite number >= 0."""
    for refusal in REFUSED:
        value = getattr(args, refusal.field)
        if refusal.refused(value):
            raise ValueError(
                f"GRPOConfig.{refusal.field}={value!r} is not supported by RlvrGRPOTrainer: "
                f"{refusal.why}"
            )
    for field, weight in (("beta", "the KL weight"), ("entropy_coef", "the entropy bonus")):
        value = getattr(args, field)
        number = isinstance(value, numbers.Real) and not isinstance(value, bool)
        if not (number and math.isfinite(value) and value >= 0):
            raise ValueError(
                f"GRPOConfig.{field}={value!r} ({weight}) must be a finite number >= 0"
            )
    if args.beta != 0 and args.use_bias_correction_kl:
        raise ValueError(
            "GRPOConfig.use_bias_correction_kl=True is not supported by RlvrGRPOTrainer: the KL "
            "term is ALGORITHMS.md's estimator without TRL's ratio factor; set it to False"
        )
    if args.steps_per_generation % args.gradient_accumulation_steps:
        raise ValueError(
            f"GRPOConfig.steps_per_generation={args.steps_per_generation} must be a multiple of "
            f"gradient_accumulation_steps={args.gradient_accumulation_steps} so each optimiser "
            "step's token and sequence counts are known when the batch is generated"
        )


TRL_REWARD_KEYWORDS = (
    "prompts",
    "completions",
    "completion_ids",
    "trainer_state",
    "log_extra",
    "log_metric",
)
"""The keywords TRL 1.16 passes every reward function, besides the dataset's columns."""


def reward_keywords(args: Any, dataset: Any, **trainer_kwargs: Any) -> tuple[frozenset[str], bool]:
    """``(keywords, complete)``: the keywords TRL passes each reward function (its own and the
    train dataset's columns), and whether no others can come (False for a dataset whose columns
    are not known, ``remove_unused_columns=True`` or a ``rollout_func``'s extra fields)."""
    keywords = set(TRL_REWARD_KEYWORDS)
    if trainer_kwargs.get("environment_factory") is not None:
        keywords.add("environments")
    columns = getattr(dataset, "column_names", None)
    known = isinstance(columns, list) and not args.remove_unused_columns
    if known:
        keywords |= set(columns) - {"prompt", "completion", "completion_ids"}
    return frozenset(keywords), known and trainer_kwargs.get("rollout_func") is None


def reward_call_problem(func: Callable, keywords: frozenset[str], complete: bool) -> str | None:
    """Why TRL, calling ``func`` with the keyword arguments ``keywords`` (``complete``: and no
    others), would fail: a keyword it does not take, or an argument TRL does not pass; None when
    the call works or the signature cannot be read."""
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return None
    named = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    unexpected = sorted(keywords - named)
    if unexpected and not any(p.kind is p.VAR_KEYWORD for p in params):
        return f"it takes no argument {', '.join(unexpected)} and no **kwargs"
    required = [p for p in params if p.default is p.empty and p.kind is not p.VAR_POSITIONAL]
    by_position = [p.name for p in required if p.kind is p.POSITIONAL_ONLY]
    if by_position:
        return f"it takes {', '.join(by_position)} only by position; TRL passes keywords"
    missing = [p.name for p in required if p.kind is not p.VAR_KEYWORD and p.name not in keywords]
    if complete and missing:
        return f"it needs {', '.join(missing)}, which TRL does not pass (no such dataset column)"
    return None


def on_policy_note(args: Any, cfg: ObjectiveConfig) -> str | None:
    """The warning for a run of an objective other than ``grpo`` whose every optimiser step is
    on-policy (one per generation batch, ``num_iterations=1``, TRL's defaults): the ratio is
    then exactly 1, no clip acts, and every rlvr objective has ``grpo``'s gradient under the
    same advantages and aggregation (ALGORITHMS.md, "Recipes"); None otherwise."""
    steps = args.steps_per_generation // args.gradient_accumulation_steps
    if steps > 1 or args.num_iterations > 1:
        return None
    effect = cfg.at_ratio_one()
    if effect is None:
        return None
    return (
        f"RlvrGRPOTrainer: every optimiser step is on-policy (num_iterations=1, "
        f"steps_per_generation={args.steps_per_generation} = gradient_accumulation_steps): the "
        f"ratio is exactly 1, so {effect}. For the objective "
        "to act, take several optimiser steps per generation batch: steps_per_generation a "
        "multiple > 1 of gradient_accumulation_steps, or num_iterations > 1"
    )


def check_reward_funcs(
    reward_funcs: Any,
    keywords: frozenset[str] = frozenset(TRL_REWARD_KEYWORDS),
    complete: bool = False,
) -> None:
    """Raise ValueError, before the model loads, for a reward function TRL cannot call with the
    keyword arguments ``keywords`` (:func:`reward_keywords`): an rlvr
    :class:`~rlvr.rewards.Verifier`, or a function of another signature. TRL would raise a
    TypeError at the first step, after the model loaded and the first batch was generated."""
    funcs = reward_funcs if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
    for index, func in enumerate(funcs):
        if isinstance(func, Verifier):
            raise ValueError(
                f"reward_funcs[{index}] is rlvr's verifier {func.spec!r}, called as (completion, "
                "reference); TRL calls a reward function as (prompts, completions, **dataset "
                "columns): pass rlvr.engines.trl.verifier_reward(verifier, column='reference') "
                "(plain and conversational completions)"
            )
        if isinstance(func, (str, torch.nn.Module)) or not callable(func):
            continue  # a reward model: TRL loads and calls it itself
        problem = reward_call_problem(func, keywords, complete)
        if problem is not None:
            name = getattr(func, "__name__", type(func).__name__)
            raise ValueError(
                f"reward_funcs[{index}] {name}{inspect.signature(func)} cannot be called by TRL, "
                f"which passes the keywords {', '.join(sorted(keywords))}: {problem}; take the "
                "ones you need by name and **kwargs, e.g. (completions, **kwargs)"
            )


def objective_config(
    args: Any,
    objective: str,
    objective_kwargs: dict[str, Any] | None = None,
    *,
    advantage: str | None = None,
    loss_agg: str | None = None,
    kl_estimator: str = "k3",
    sft_coef: float = 0.0,
    sft_threshold: float | None = None,
) -> ObjectiveConfig:
    """The :class:`ObjectiveConfig` of the trainer: the objective, its advantage mode and
    aggregation (``None``: its defaults) and the regularisers (``beta`` -> ``kl_coef``,
    ``entropy_coef`` from ``args``)."""
    kwargs = {} if objective_kwargs is None else objective_kwargs
    if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
        raise ValueError(
            f"objective_kwargs must be a dict of the objective's hyperparameters by name, "
            f"e.g. {{'eps3': 0.3}}; got {objective_kwargs!r}"
        )
    return ObjectiveConfig(
        objective,
        params=make_config(objective, **kwargs),
        advantage=advantage,
        loss_agg=loss_agg,
        kl_coef=float(args.beta),
        kl_estimator=kl_estimator,
        sft_coef=sft_coef,
        sft_threshold=sft_threshold,
        entropy_coef=float(args.entropy_coef),
    )
