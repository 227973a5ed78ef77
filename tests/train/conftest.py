"""Fixtures of the trainer tests: a config builder (the test verifiers and prompt files are
in tests/conftest.py, shared with the pipeline tests)."""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(1)  # tiny models: one thread is fastest, and immune to a busy machine


@pytest.fixture()
def train_config(tiny_model_dir, prompt_file, tmp_path):
    """``make(**overrides)`` -> a small ``TrainConfig`` for the tiny random model."""
    from rlvr.train.config import TrainConfig
    from rlvr.train.overrides import apply_overrides, from_dict

    def make(*overrides: str, out: str = "run") -> TrainConfig:
        base = {
            "steps": 2,
            "seed": 0,
            "model": {"name": str(tiny_model_dir)},
            "data": {"train": prompt_file, "eval": prompt_file, "max_prompt_tokens": 64},
            "reward": {"verifier": "even"},
            "rollout": {"prompts_per_step": 2, "group_size": 4, "max_new_tokens": 8},
            "objective": {"name": "grpo"},
            "optim": {"lr": 1e-3},
            "log": {
                "output_dir": str(tmp_path / out),
                "tensorboard": False,
                "progress": "off",
                "samples_per_step": 2,
                "plots": False,
            },
            "eval": {"n": 2, "ks": [1], "at_start": False, "at_end": False},
        }
        return from_dict(TrainConfig, apply_overrides(base, list(overrides)))

    return make
