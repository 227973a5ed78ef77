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


def _eos_likely(tiny_model_dir, path, boost: float):
    """The tiny model saved to ``path`` with its EOS row pushed ``boost`` toward its hidden
    states, so completions both stop and run out of tokens."""
    from rlvr.models import load_model

    model, tokenizer = load_model(str(tiny_model_dir))
    ids = tokenizer("What is 12 + 7?", return_tensors="pt").input_ids
    with torch.no_grad():
        h = model.model(ids).last_hidden_state[0].mean(0)
        model.lm_head.weight[tokenizer.eos_token_id] += boost * h / h.norm()
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def eos_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model with EOS likely (about one completion in three stops before 6 tokens)."""
    return _eos_likely(tiny_model_dir, tmp_path_factory.mktemp("tiny-eos"), 1.6)


@pytest.fixture(scope="session")
def short_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model with EOS likelier still: completions of 1 to 8 tokens at seed 0."""
    return _eos_likely(tiny_model_dir, tmp_path_factory.mktemp("tiny-short"), 3.0)
