"""The typed configuration of a policy loss: an objective, its own hyperparameters, the regularisers.

:class:`ObjectiveConfig` is what the ``objective:`` section of a YAML config becomes and what
:func:`rlvr.objectives.objective_loss` takes: it is built and validated once, and carries
the objective's own config dataclass (``AbcConfig``, ``EtrConfig``...) in ``params``, so
nothing is rebuilt from a dictionary per micro-batch.

>>> cfg = ObjectiveConfig("abc_grpo", params=make_config("abc_grpo", eps3=0.3))
>>> cfg.params.eps3, cfg.agg_mode, cfg.advantage_mode
(0.3, 'seq-mean-token-mean', 'group_mean')
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import torch

from rlvr.advantages import ADVANTAGE_MODES, GroupStats, group_stats
from rlvr.objectives.aggregation import LOSS_AGG_MODES
from rlvr.objectives.registry import ObjectiveSpec, make_config, objective_spec, resolve_config
from rlvr.objectives.regularizers import RegularizerConfig


@dataclass(frozen=True)
class ObjectiveConfig:
    """The policy objective by name, its hyperparameters, and the regularisers."""

    EXTRA_KEYS: ClassVar[str] = "params"
    """In YAML the hyperparameters sit directly in the section (``objective.eps3=0.3``)."""

    name: str = "grpo"
    """Registered objective, e.g. ``grpo``, ``abc_grpo``, ``etr``, ``gppo``, ``apmpo``; ``my_module.name`` for one your module registers."""
    params: Any = field(default=None)
    """The objective's own config (``AbcConfig``, ...), by its ALGORITHMS.md names; ``None``: its defaults."""
    advantage: str | None = None
    """Advantage mode (``group_std``, ``group_mean``, ``batch_std``); ``None``: the objective's default."""
    loss_agg: str | None = None
    """Aggregation mode; ``None``: the objective's default."""
    kl_coef: float = 0.0
    """Weight of the KL to the reference model (0: no reference model is loaded)."""
    kl_estimator: str = "k3"
    """KL estimator: ``k1``, ``k2`` or ``k3``."""
    sft_coef: float = 0.0
    """Weight of the NLL on positive responses (Klear's SFT term; 0.1 in Klear)."""
    sft_threshold: float | None = None
    """Reward a response must reach to count as positive (``None``: the verifier's correct reward, 1.0 outside the trainer)."""
    entropy_coef: float = 0.0
    """Entropy bonus weight."""

    def __post_init__(self) -> None:
        spec = self.spec
        if clash := [n for n in spec.hyperparameters if n in _OWN_KEYS]:
            raise ValueError(
                f"objective {self.name!r}: hyperparameter(s) {', '.join(clash)} of "
                f"{spec.config_cls.__name__} share a name with the objective section's own keys "
                f"({', '.join(_OWN_KEYS)}): rename them"
            )
        if self.params is None:
            object.__setattr__(self, "params", spec.config_cls())
        elif type(self.params) is not spec.config_cls:
            raise ValueError(
                f"params is a {type(self.params).__name__}; objective {spec.name!r} needs "
                f"{spec.config_cls.__name__}"
            )
        if self.advantage is not None and self.advantage not in ADVANTAGE_MODES:
            raise ValueError(
                f"unknown advantage mode {self.advantage!r}; valid: {', '.join(ADVANTAGE_MODES)}"
            )
        if self.loss_agg is not None and self.loss_agg not in LOSS_AGG_MODES:
            raise ValueError(
                f"unknown loss_agg {self.loss_agg!r}; valid: {', '.join(LOSS_AGG_MODES)}"
            )
        self.regularizers  # noqa: B018 - validates the coefficients and the estimator

    @classmethod
    def params_class(cls, name: str) -> type:
        """The hyperparameter dataclass of objective ``name`` (unknown name: error listing valid ones)."""
        return objective_spec(name).config_cls

    @classmethod
    def of(cls, name: str, **hparams: Any) -> ObjectiveConfig:
        """Objective ``name`` with these hyperparameters and no regulariser."""
        return cls(name, params=make_config(name, **hparams))

    @property
    def spec(self) -> ObjectiveSpec:
        """The registry entry of the objective."""
        return objective_spec(self.name)

    @property
    def agg_mode(self) -> str:
        """The aggregation mode in use (the config's or the objective's default)."""
        return self.loss_agg or self.spec.loss_agg

    @property
    def advantage_mode(self) -> str:
        """The advantage mode in use (the config's or the objective's default)."""
        return self.advantage or self.spec.advantage_mode

    def at_ratio_one(self) -> str | None:
        """What the objective is when every ratio is exactly 1 (each optimiser step on the
        weights that sampled its batch): ``None`` for ``grpo``; for rlvr's own objectives,
        ``grpo``'s gradient under the same advantages and aggregation (each checked at ratio 1
        in tests/objectives/test_config.py); for one registered elsewhere, that no clip or other
        ratio-dependent term acts."""
        if self.name == "grpo":
            return None
        if not self.spec.loss_fn.__module__.startswith("rlvr.objectives."):
            return f"no clip or other ratio-dependent term of {self.name} acts"
        return (
            f"{self.name}'s clipping never acts and its gradient is grpo's with advantage "
            f"{self.advantage_mode!r} and aggregation {self.agg_mode!r}"
        )

    @property
    def regularizers(self) -> RegularizerConfig:
        """The KL, SFT-on-positives and entropy terms."""
        threshold = 1.0 if self.sft_threshold is None else self.sft_threshold
        return RegularizerConfig(
            self.kl_coef, self.kl_estimator, self.sft_coef, threshold, self.entropy_coef
        )

    def group_stats(
        self, rewards: torch.Tensor, group_size: int, *, validate: bool = True
    ) -> GroupStats | None:
        """Per-sample group statistics over the whole rollout batch ``rewards [B]`` (``None`` when
        unused); ``validate``: check the rewards' values too (finite, inside ``reward_range``)."""
        if not self.spec.needs_group_stats:
            return None
        options = self.params.stats_options()
        return group_stats(
            rewards,
            group_size,
            pass_threshold=options.pass_threshold,
            reward_range=options.reward_range,
            scope=options.scope,
            validate=validate,
        )


_OWN_KEYS = tuple(f.name for f in fields(ObjectiveConfig))
"""Keys of the ``objective`` section itself; an objective's hyperparameter may not take one."""


def group_stats_for(
    name: str, rewards: torch.Tensor, group_size: int, config: Any = None, **hparams: Any
) -> GroupStats | None:
    """Group statistics for objective ``name`` over the whole rollout batch, or None.

    The objective's own hyperparameters (``pass_threshold`` for ``etr``; ``reward_range``
    and ``stats_scope`` for ``pmpo``/``apmpo``) choose the options, so the caller passes
    the same ``hparams`` (or ``config``) it gives ``policy_loss``. None for objectives
    that read no statistics.
    """
    spec = objective_spec(name)
    return ObjectiveConfig(name, params=resolve_config(spec, config, hparams)).group_stats(
        rewards, group_size
    )
