"""A small study on the tiny random model (2 arms x 2 seeds x 2 steps) for the runner and report tests."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

torch.set_num_threads(1)

PROMPTS = [
    {"prompt": f"What is {a} + {b}?", "answer": str(a + b)}
    for a, b in [(1, 2), (3, 4), (2, 2), (5, 1), (4, 4), (6, 2), (7, 1), (3, 3)]
]


VERIFIER = """
from rlvr.rewards import register


@register("parity_test")
def parity_test(completion, reference, *, correct=1.0, wrong=0.0):
    return correct if len(completion) % 2 == 0 else wrong
"""


@pytest.fixture()
def small_study(tiny_model_dir, tmp_path, monkeypatch):
    """``make(**changes) -> path`` of a study YAML: grpo vs abc_grpo, seeds 0 and 1, 2 steps."""
    # a verifier the worker processes import (about half the completions score 1)
    (tmp_path / "parity_verifier.py").write_text(VERIFIER)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path))  # as PYTHONPATH does for rlvr compare itself
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in PROMPTS))
    recipe = {
        "steps": 2,
        "threads": 1,
        "model": {"name": str(tiny_model_dir)},
        "data": {"train": str(prompts), "eval": str(prompts), "max_prompt_tokens": 64},
        "reward": {"verifier": "parity_test"},
        "rollout": {"prompts_per_step": 4, "group_size": 4, "max_new_tokens": 6, "minibatches": 2},
        "objective": {"name": "grpo", "eps_low": 0.02, "eps_high": 0.02},  # narrow: the clip acts
        "optim": {"lr": 1e-2},
        "eval": {"n": 2, "ks": [1, 2], "every": 1},
        "checkpoint": {"every": 1, "keep_last": 1},
        "log": {"samples_per_step": 0},
    }
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(recipe))
    (tmp_path / "abc.yaml").write_text(
        yaml.safe_dump(
            {
                "base": str(tmp_path / "base.yaml"),
                "objective": {"name": "abc_grpo", **{f"eps{i}": 0.02 for i in range(1, 5)}},
            }
        )
    )
    claims = {
        "paper": "test",
        "claims": [
            {
                "id": "entropy",
                "source": "here",
                "text": "abc keeps entropy higher",
                "rule": "direction",
                "metric": "policy/entropy",
                "arm": "abc",
                "baseline": "grpo",
                "direction": "higher",
            },
            {
                "id": "q4",
                "source": "here",
                "text": "Q4 largest",
                "rule": "largest",
                "arm": "grpo",
                "metrics": [f"clip/q{k}_share" for k in range(1, 5)],
                "expect": "clip/q4_share",
                "summary": "run-share",
            },
            {
                "id": "avg",
                "source": "here",
                "text": "abc scores higher",
                "rule": "direction",
                "metric": "eval/avg@2",
                "summary": "final",
                "arm": "abc",
                "baseline": "grpo",
            },
        ],
    }
    (tmp_path / "claims.yaml").write_text(yaml.safe_dump(claims))

    def make(**changes) -> str:
        study = {
            "name": "small",
            "title": "a small study",
            "steps": 2,
            "seeds": [0, 1],
            "settings": {"threads": 1},
            "arms": [
                {"recipe": str(tmp_path / "base.yaml"), "name": "grpo", "label": "GRPO"},
                {"recipe": str(tmp_path / "abc.yaml"), "name": "abc", "baseline": "grpo"},
            ],
            "claims": [str(tmp_path / "claims.yaml")],
            "imports": ["parity_verifier"],
            **changes,
        }
        path = tmp_path / "study.yaml"
        path.write_text(yaml.safe_dump(study))
        return str(path)

    return make
