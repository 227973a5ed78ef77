"""The trainer: ``rlvr train`` (RL with verifiable rewards) and ``rlvr sft``, as library functions.

::

    from rlvr.train import TrainConfig, load_config, train

    cfg = load_config(TrainConfig, "demo", ["objective.name=abc_grpo", "rollout.minibatches=4"])
    result = train(cfg)                  # TrainResult(run_dir, model_dir, metrics, evals, plots)

``train`` and ``sft`` (and their results, and the harness's :class:`Callback`) are imported
on first use, so importing the configuration classes stays cheap. See ``docs/training.md`` and ``docs/metrics.md``.
"""

from __future__ import annotations

from typing import Any

from rlvr.train.config import (
    CheckpointConfig,
    DataConfig,
    EvalConfig,
    GymConfig,
    LogConfig,
    ModelConfig,
    ObjectiveConfig,
    OptimConfig,
    RewardConfig,
    RolloutConfig,
    SFTConfig,
    SFTDataConfig,
    SFTEvalConfig,
    TrainConfig,
)
from rlvr.train.overrides import dump_yaml, from_dict, load_config

_LAZY = {
    "train": "rlvr.train.loop",
    "TrainResult": "rlvr.train.loop",
    "sft": "rlvr.train.supervised",
    "SFTResult": "rlvr.train.supervised",
    "Callback": "rlvr.train.harness",
    "RunResult": "rlvr.train.harness",
    "StepRecord": "rlvr.train.harness",
    "EvalRecord": "rlvr.train.harness",
}

__all__ = [
    "Callback",
    "CheckpointConfig",
    "DataConfig",
    "EvalConfig",
    "EvalRecord",
    "GymConfig",
    "LogConfig",
    "ModelConfig",
    "ObjectiveConfig",
    "OptimConfig",
    "RewardConfig",
    "RolloutConfig",
    "RunResult",
    "SFTConfig",
    "SFTDataConfig",
    "SFTEvalConfig",
    "SFTResult",
    "StepRecord",
    "TrainConfig",
    "TrainResult",
    "dump_yaml",
    "from_dict",
    "load_config",
    "sft",
    "train",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rlvr.train' has no attribute {name!r}")
