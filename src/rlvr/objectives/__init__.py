"""Policy objectives of GRPO, the trust-region papers and their baselines.

Pure functions over tensors, registered by name (``OBJECTIVES``). Two entry points: the
typed core :func:`objective_loss` (``LossInputs``, an ``ObjectiveConfig`` built once, the
step's ``StepCounts``) and the keyword wrapper :func:`policy_loss`. Each module cites its paper's equations and lists its departures;
``docs/objectives.md`` has the table.

>>> import torch
>>> from rlvr.objectives import policy_loss
>>> logp = torch.log(torch.tensor([[0.5, 0.4]])).requires_grad_()
>>> loss, metrics = policy_loss("grpo", logp=logp, old_logp=logp.detach(),
...                             advantages=torch.tensor([1.0]), mask=torch.ones(1, 2))
>>> float(loss.detach()), float(metrics["clip/frac"])
(-1.0, 0.0)
"""

from rlvr.objectives.abc import AbcConfig
from rlvr.objectives.aggregation import LOSS_AGG_MODES, StepCounts, aggregate, step_counts
from rlvr.objectives.base import ClipInfo, ObjectiveOutput, PolicyBatch
from rlvr.objectives.cispo import CispoConfig
from rlvr.objectives.config import ObjectiveConfig, group_stats_for
from rlvr.objectives.etr import EtrConfig
from rlvr.objectives.gmpo import GmpoConfig
from rlvr.objectives.gppo import GppoConfig
from rlvr.objectives.gspo import GspoConfig
from rlvr.objectives.loss import LossInputs, LossOutput, objective_loss, policy_loss
from rlvr.objectives.metrics import metric_weight_tensors, metric_weights
from rlvr.objectives.pmpo import ApmpoConfig, PmpoConfig
from rlvr.objectives.ppo_clip import DapoConfig, DrGrpoConfig, GrpoConfig
from rlvr.objectives.registry import (
    OBJECTIVES,
    ObjectiveSpec,
    make_config,
    objective_spec,
    register_objective,
)
from rlvr.objectives.regularizers import KL_ESTIMATORS, RegularizerConfig, kl_penalty

__all__ = [
    "KL_ESTIMATORS",
    "LOSS_AGG_MODES",
    "OBJECTIVES",
    "AbcConfig",
    "ApmpoConfig",
    "CispoConfig",
    "ClipInfo",
    "DapoConfig",
    "DrGrpoConfig",
    "EtrConfig",
    "GmpoConfig",
    "GppoConfig",
    "GrpoConfig",
    "GspoConfig",
    "LossInputs",
    "LossOutput",
    "ObjectiveConfig",
    "ObjectiveOutput",
    "ObjectiveSpec",
    "PmpoConfig",
    "PolicyBatch",
    "RegularizerConfig",
    "StepCounts",
    "aggregate",
    "group_stats_for",
    "kl_penalty",
    "make_config",
    "metric_weight_tensors",
    "metric_weights",
    "objective_loss",
    "objective_spec",
    "policy_loss",
    "register_objective",
    "step_counts",
]
