"""Fixtures of the trainer tests: test verifiers, small prompt files and a config builder."""

from __future__ import annotations

import json

import pytest
import torch

torch.set_num_threads(1)  # tiny models: one thread is fastest, and immune to a busy machine

# ------------------------------------------------------------------ test verifiers


def _contains(completion, reference, *, correct=1.0, wrong=0.0):
    """Test verifier: ``correct`` when the completion contains the reference string."""
    return correct if str(reference) in completion else wrong


def _even(completion, reference, *, correct=1.0, wrong=0.0):
    """Test verifier: ``correct`` for completions of even length (about half of them)."""
    return correct if len(completion) % 2 == 0 else wrong


def _raises(completion, reference, *, correct=1.0, wrong=0.0):
    """Test verifier that always fails."""
    raise RuntimeError("broken verifier")


def _register_test_verifiers() -> None:
    from rlvr.rewards import register

    register("contains")(_contains)
    register("raises")(_raises)
    register("even")(_even)


_register_test_verifiers()

# ------------------------------------------------------------------ fixtures

SFT_PAIRS = [
    {"prompt": "What is 12 + 7?", "response": "12 + 7 = 19. Answer: 19"},
    {"prompt": "What is 5 - 3?", "response": "5 - 3 = 2. Answer: 2"},
    {"prompt": "What is 40 + 2?", "response": "40 + 2 = 42. Answer: 42"},
    {"prompt": "What is 3 times 4?", "response": "3 times 4 is 12. Answer: 12"},
    {"prompt": "Calculate 5 - 3 - 6.", "response": "5 - 3 - 6 = -4. Answer: -4"},
    {"prompt": "What is 7 + 7?", "response": "7 + 7 = 14. Answer: 14"},
]


def write_jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture()
def sft_file(tmp_path):
    """Six prompt/response pairs in a JSONL file."""
    return write_jsonl(tmp_path / "sft.jsonl", SFT_PAIRS)


PROMPTS = [
    {"prompt": f"What is {a} + {b}?", "answer": str(d)}
    for a, b, d in [(12, 7, 1), (5, 3, 2), (40, 2, 4), (3, 4, 7), (7, 7, 1), (9, 1, 0)]
]


@pytest.fixture()
def prompt_file(tmp_path):
    """Six prompts whose reference is a digit the completion should contain."""
    return write_jsonl(tmp_path / "prompts.jsonl", PROMPTS)


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
