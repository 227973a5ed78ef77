"""The registry of objectives: name -> :class:`ObjectiveSpec` (config, defaults, loss)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from rlvr.objectives.abc import AbcConfig, abc_loss
from rlvr.objectives.base import ObjectiveOutput, PolicyBatch
from rlvr.objectives.cispo import CispoConfig, cispo_loss
from rlvr.objectives.etr import EtrConfig, etr_loss
from rlvr.objectives.gmpo import GmpoConfig, gmpo_loss
from rlvr.objectives.gppo import GppoConfig, gppo_loss
from rlvr.objectives.gspo import GspoConfig, gspo_loss
from rlvr.objectives.pmpo import ApmpoConfig, PmpoConfig, apmpo_loss, pmpo_loss
from rlvr.objectives.ppo_clip import DapoConfig, DrGrpoConfig, GrpoConfig, grpo_loss


@dataclass(frozen=True)
class ObjectiveSpec:
    """Everything a trainer needs to know about one objective."""

    name: str
    """Registry name (``grpo``, ``abc_grpo``, ...)."""
    config_cls: type
    """Frozen dataclass of its hyperparameters (defaults from ``ALGORITHMS.md``)."""
    loss_fn: Callable[[PolicyBatch, Any], ObjectiveOutput]
    """``(batch, config) -> ObjectiveOutput``, a pure function."""
    advantage_mode: str
    """Default advantage mode for :func:`rlvr.advantages.compute_advantages`."""
    loss_agg: str
    """Default aggregation mode."""
    needs_group_stats: bool
    """True when it reads per-sample group statistics (so needs rewards or ``group_stats``)."""
    sequence_level: bool
    """True when its loss is per sequence (repeated on the row's tokens)."""
    paper: str
    """Source and equations."""

    @property
    def needs_rewards(self) -> bool:
        """Rewards (or precomputed ``group_stats``) must be passed to ``policy_loss``."""
        return self.needs_group_stats

    @property
    def hyperparameters(self) -> tuple[str, ...]:
        """Valid hyperparameter names."""
        return tuple(f.name for f in fields(self.config_cls))


def _spec(name, config_cls, loss_fn, advantage_mode, loss_agg, paper, stats=False, seq=False):
    return ObjectiveSpec(name, config_cls, loss_fn, advantage_mode, loss_agg, stats, seq, paper)


STD, MEAN = "group_std", "group_mean"
SEQ_TOKEN_MEAN, TOKEN_MEAN = "seq-mean-token-mean", "token-mean"

_SPECS = (
    _spec("grpo", GrpoConfig, grpo_loss, STD, SEQ_TOKEN_MEAN, "GRPO (ABC-GRPO eq. 4; Klear eq. 3)"),
    _spec("dapo", DapoConfig, grpo_loss, STD, TOKEN_MEAN, "DAPO clip-higher (Klear eq. 6-7)"),
    _spec("dr_grpo", DrGrpoConfig, grpo_loss, MEAN, "seq-mean-token-sum-norm", "Dr.GRPO"),
    _spec("abc_grpo", AbcConfig, abc_loss, MEAN, SEQ_TOKEN_MEAN, "ABC-GRPO eq. 3, 5-6, Alg. 1"),
    _spec("etr", EtrConfig, etr_loss, STD, SEQ_TOKEN_MEAN, "ETR eq. 6-9, Alg. 1", stats=True),
    _spec("gppo", GppoConfig, gppo_loss, STD, TOKEN_MEAN, "Klear GPPO eq. 11-12, 17-18"),
    _spec("cispo", CispoConfig, cispo_loss, STD, TOKEN_MEAN, "CISPO (Klear app. A.1 eq. 15-16)"),
    _spec("gspo", GspoConfig, gspo_loss, STD, SEQ_TOKEN_MEAN, "GSPO-token (Zheng et al. 2025)"),
    _spec(
        "gmpo",
        GmpoConfig,
        gmpo_loss,
        STD,
        SEQ_TOKEN_MEAN,
        "GMPO (APMPO eq. 14, app. C.3)",
        seq=True,
    ),
    _spec(
        "pmpo",
        PmpoConfig,
        pmpo_loss,
        STD,
        SEQ_TOKEN_MEAN,
        "PMPO (APMPO eq. 4, 7-10)",
        stats=True,
        seq=True,
    ),
    _spec(
        "apmpo",
        ApmpoConfig,
        apmpo_loss,
        STD,
        SEQ_TOKEN_MEAN,
        "APMPO eq. 4-10, app. H, J",
        stats=True,
        seq=True,
    ),
)

OBJECTIVES: dict[str, ObjectiveSpec] = {spec.name: spec for spec in _SPECS}
"""Every registered objective by name."""


def objective_spec(name: str) -> ObjectiveSpec:
    """The spec of objective ``name``; an unknown name lists the valid ones."""
    try:
        return OBJECTIVES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown objective {name!r}; valid: {', '.join(OBJECTIVES)}") from None


def make_config(name: str, **hparams: Any) -> Any:
    """Objective ``name``'s config from ``hparams`` (validated; unknown names listed)."""
    spec = objective_spec(name)
    valid = spec.hyperparameters
    unknown = sorted(set(hparams) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown hyperparameter(s) {', '.join(unknown)} for objective {name!r}; "
            f"valid: {', '.join(valid)}"
        )
    return spec.config_cls(**hparams)


def resolve_config(spec: ObjectiveSpec, config: Any, hparams: dict[str, Any]) -> Any:
    """``config`` (checked to be ``spec``'s class) or a new one built from ``hparams``."""
    if config is None:
        return make_config(spec.name, **hparams)
    if hparams:
        raise ValueError(
            f"pass either config or hyperparameters, not both (got {', '.join(hparams)})"
        )
    if type(config) is not spec.config_cls:
        raise ValueError(
            f"config is a {type(config).__name__}; objective {spec.name!r} needs {spec.config_cls.__name__}"
        )
    return config
