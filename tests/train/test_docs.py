"""docs/training.md lists every configuration key."""

import dataclasses
from pathlib import Path

from rlvr.train import config as C

DOC = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text()
SECTIONS = [
    (C.TrainConfig, ""),
    (C.ModelConfig, "model."),
    (C.DataConfig, "data."),
    (C.GymConfig, "data.gym."),
    (C.RewardConfig, "reward."),
    (C.RolloutConfig, "rollout."),
    (C.ObjectiveConfig, "objective."),
    (C.OptimConfig, "optim."),
    (C.LogConfig, "log."),
    (C.EvalConfig, "eval."),
    (C.CheckpointConfig, "checkpoint."),
    (C.SFTConfig, "(sft) "),
    (C.SFTDataConfig, "(sft) data."),
]


def test_every_config_key_is_in_the_reference():
    missing = [
        f"{prefix}{f.name}"
        for cls, prefix in SECTIONS
        for f in dataclasses.fields(cls)
        if f"| `{prefix}{f.name}` |" not in DOC
    ]
    assert missing == []
