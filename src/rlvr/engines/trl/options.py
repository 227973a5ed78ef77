"""Which ``GRPOConfig`` options :class:`~rlvr.engines.trl.RlvrGRPOTrainer` takes, and which it refuses.

The loss is the rlvr objective; TRL options that would change it behind the user's back are
refused with an error naming the option (:data:`REFUSED`), instead of being ignored:
TRL's own ``loss_type``, its clip widths (``epsilon``, ``epsilon_high``: the objective's widths
are ``objective_kwargs``), entropy masking, off-policy sequence masking, two-sided clipping,
sequence-level ratios, the adaptive entropy coefficient, TRL's advantage scaling and the KL's
ratio correction. Options TRL already has for a regulariser set it: ``beta`` is the KL
weight (``kl_coef``) and ``entropy_coef`` the entropy bonus. ``vllm_importance_sampling_correction``
is honoured: the ratios become the objective's per-token weights.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

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


def check_reward_funcs(reward_funcs: Any) -> None:
    """Raise ValueError for an rlvr :class:`~rlvr.rewards.Verifier` given as a TRL reward
    function: TRL would call it with the wrong arguments at the first step."""
    funcs = reward_funcs if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
    for index, func in enumerate(funcs):
        if isinstance(func, Verifier):
            raise ValueError(
                f"reward_funcs[{index}] is rlvr's verifier {func.spec!r}, called as (completion, "
                "reference); TRL calls a reward function as (prompts, completions, **dataset "
                "columns): wrap it, e.g. lambda completions, reference, **_: "
                "[verifier(c, r) for c, r in zip(completions, reference)]"
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
