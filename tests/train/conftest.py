"""Fixtures of the trainer tests: small prompt files and a config builder.

Until the layers the trainer drives are all importable, the missing ones are replaced
here (and only here) by minimal stand-ins with the same call signatures, so the loop
itself can be tested; each stand-in is used only when the real module is absent.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from dataclasses import dataclass

import pytest
import torch

torch.set_num_threads(1)  # tiny models: one thread is fastest, and immune to a busy machine

# ------------------------------------------------------------------ stand-ins (tests only)


def _standin_objectives() -> types.ModuleType:
    """PPO-clip only, token-mean or seq-mean-token-mean, with the KL and SFT terms."""
    mod = types.ModuleType("rlvr.objectives")

    @dataclass
    class Spec:
        advantage_mode: str
        loss_agg: str

    specs = {
        "grpo": Spec("group_std", "seq-mean-token-mean"),
        "dapo": Spec("group_std", "token-mean"),
    }

    @dataclass(frozen=True)
    class StepCounts:
        num_tokens: int
        num_seqs: int
        num_sft_tokens: int | None

    def objective_spec(name):
        if name not in specs:
            raise ValueError(f"unknown objective {name!r}; valid: {', '.join(specs)}")
        return specs[name]

    def make_config(name, **hparams):
        objective_spec(name)
        unknown = sorted(set(hparams) - {"eps_low", "eps_high"})
        if unknown:
            raise ValueError(
                f"unknown hyperparameter(s) {', '.join(unknown)} for objective {name!r}; valid: eps_low, eps_high"
            )
        return hparams

    def step_counts(mask, rewards=None, sft_threshold=1.0):
        rows = mask.sum(1)
        return StepCounts(
            int(rows.sum()), int((rows > 0).sum()), int(rows[rewards >= sft_threshold].sum())
        )

    def group_stats_for(name, rewards, group_size, **hparams):
        return None

    def policy_loss(
        name,
        *,
        logp,
        old_logp,
        advantages,
        mask,
        rewards=None,
        group_size=None,
        group_stats=None,
        ref_logp=None,
        entropy=None,
        loss_agg=None,
        num_tokens=None,
        num_seqs=None,
        max_len=None,
        num_sft_tokens=None,
        eps_low=0.2,
        eps_high=0.2,
        kl_coef=0.0,
        kl_estimator="k3",
        sft_coef=0.0,
        sft_threshold=1.0,
        entropy_coef=0.0,
    ):
        agg = loss_agg or objective_spec(name).loss_agg
        ratio = torch.exp(logp - old_logp)
        adv = advantages[:, None]
        per_token = -torch.minimum(ratio * adv, ratio.clamp(1 - eps_low, 1 + eps_high) * adv)
        if kl_coef:
            d = ref_logp - logp
            per_token = per_token + kl_coef * (d.exp() - d - 1)
        if agg == "token-mean":
            loss = (per_token * mask).sum() / num_tokens
        else:
            loss = ((per_token * mask).sum(1) / mask.sum(1).clamp_min(1)).sum() / num_seqs
        if sft_coef and num_sft_tokens:
            positive = (rewards >= sft_threshold).float()[:, None]
            loss = loss - sft_coef * (logp * mask * positive).sum() / num_sft_tokens
        clipped = ((ratio - 1).abs() > eps_high).float()
        metrics = {
            "clip/frac": (clipped * mask).sum() / mask.sum(),
            "ratio/max": ratio.detach().max(),
            "kl/old_approx": ((old_logp - logp).detach() * mask).sum() / mask.sum(),
        }
        return loss, metrics

    mod.LOSS_AGG_MODES = (
        "token-mean",
        "seq-mean-token-mean",
        "seq-mean-token-sum",
        "seq-mean-token-sum-norm",
    )
    mod.objective_spec, mod.make_config, mod.policy_loss = objective_spec, make_config, policy_loss
    mod.step_counts, mod.group_stats_for = step_counts, group_stats_for
    return mod


def _standin_advantages() -> types.ModuleType:
    mod = types.ModuleType("rlvr.advantages")

    def compute_advantages(rewards, group_size, mode="group_std"):
        r = rewards.view(-1, group_size)
        centred = r - r.mean(1, keepdim=True)
        if mode == "group_std":
            centred = centred / (r.std(1, unbiased=False, keepdim=True) + 1e-6)
        return centred.reshape(-1)

    def zero_advantage_groups(rewards, group_size):
        r = rewards.view(-1, group_size)
        return (r == r[:, :1]).all(1)

    mod.ADVANTAGE_MODES = ("group_std", "group_mean", "batch_std")
    mod.compute_advantages, mod.zero_advantage_groups = compute_advantages, zero_advantage_groups
    return mod


def _contains(completion, reference, *, correct=1.0, wrong=0.0):
    """Test verifier: ``correct`` when the completion contains the reference string."""
    return correct if str(reference) in completion else wrong


def _even(completion, reference, *, correct=1.0, wrong=0.0):
    """Test verifier: ``correct`` for completions of even length (about half of them)."""
    return correct if len(completion) % 2 == 0 else wrong


def _raises(completion, reference, *, correct=1.0, wrong=0.0):
    """Test verifier that always fails."""
    raise RuntimeError("broken verifier")


_STANDINS = {"rlvr.objectives": _standin_objectives, "rlvr.advantages": _standin_advantages}


def _install_standins() -> None:
    for name, build in _STANDINS.items():
        if importlib.util.find_spec(name) is None and name not in sys.modules:
            sys.modules[name] = build()


_install_standins()


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
