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

# ------------------------------------------------------------------ stand-ins (tests only)


def _standin_ops() -> types.ModuleType:
    mod = types.ModuleType("rlvr.ops")

    @dataclass
    class TokenStats:
        logp: torch.Tensor
        entropy: torch.Tensor | None

    def sequence_token_stats(
        model,
        input_ids,
        attention_mask,
        num_response_tokens,
        *,
        temperature=1.0,
        chunk_size=1024,
        compute_entropy=False,
    ):
        positions = (attention_mask.cumsum(-1) - 1).clamp_min(0)
        logits = model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=positions,
            use_cache=False,
        ).logits
        logits = logits[:, -num_response_tokens - 1 : -1].float() / temperature
        logprobs = logits.log_softmax(-1)
        logp = logprobs.gather(-1, input_ids[:, -num_response_tokens:, None]).squeeze(-1)
        entropy = -(logprobs.exp() * logprobs).sum(-1) if compute_entropy else None
        return TokenStats(logp=logp, entropy=entropy)

    mod.TokenStats = TokenStats
    mod.sequence_token_stats = sequence_token_stats
    return mod


def _standin_data() -> types.ModuleType:
    mod = types.ModuleType("rlvr.data")

    @dataclass
    class Example:
        prompt: str
        answer: object

    def load_examples(source, *, prompt_field="prompt", answer_field="answer", limit=None):
        with open(source) as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
        rows = rows[:limit] if limit else rows
        return [Example(prompt=r[prompt_field], answer=r[answer_field]) for r in rows]

    def format_prompt(tokenizer, prompt, system_prompt=None):
        messages = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [
            {"role": "user", "content": prompt}
        ]
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    mod.Example, mod.load_examples, mod.format_prompt = Example, load_examples, format_prompt
    return mod


def _standin_objectives() -> types.ModuleType:
    """PPO-clip only, token-mean or seq-mean-token-mean, with the KL and SFT terms."""
    mod = types.ModuleType("rlvr.objectives")

    @dataclass
    class Spec:
        advantage: str
        loss_agg: str

    specs = {"grpo": Spec("group_std", "seq-mean-token-mean"), "dapo": Spec("group_std", "token-mean")}

    def objective_spec(name):
        if name not in specs:
            raise ValueError(f"unknown objective {name!r}; valid: {', '.join(specs)}")
        return specs[name]

    def validate_hparams(name, hparams):
        objective_spec(name)
        for key in hparams:
            if key not in ("eps_low", "eps_high"):
                raise ValueError(f"unknown hyperparameter {key!r} of {name}; valid: eps_low, eps_high")

    def policy_loss(name, *, logp, old_logp, advantages, mask, rewards=None, group_size=None, group_stats=None, ref_logp=None, entropy=None, loss_agg=None, num_tokens=None, num_seqs=None, eps_low=0.2, eps_high=0.2, kl_coef=0.0, kl_estimator="k3", sft_coef=0.0, sft_threshold=1.0, entropy_coef=0.0):
        agg = loss_agg or objective_spec(name).loss_agg
        ratio = torch.exp(logp - old_logp)
        adv = advantages[:, None]
        per_token = -torch.minimum(ratio * adv, ratio.clamp(1 - eps_low, 1 + eps_high) * adv)
        if kl_coef:
            d = ref_logp - logp
            per_token = per_token + kl_coef * (d.exp() - d - 1)
        if sft_coef:
            positive = (rewards >= sft_threshold).float()[:, None]
            per_token = per_token - sft_coef * logp * positive
        if agg == "token-mean":
            loss = (per_token * mask).sum() / (num_tokens or mask.sum())
        else:
            loss = ((per_token * mask).sum(1) / mask.sum(1).clamp_min(1)).sum() / (num_seqs or mask.shape[0])
        clipped = ((ratio - 1).abs() > eps_high).float()
        metrics = {"clip/frac": (clipped * mask).sum() / mask.sum(), "ratio/max": ratio.detach().max(), "kl/old_approx": ((old_logp - logp).detach() * mask).sum() / mask.sum()}
        return loss, metrics

    mod.objective_spec, mod.validate_hparams, mod.policy_loss = objective_spec, validate_hparams, policy_loss
    return mod


def _standin_advantages() -> types.ModuleType:
    mod = types.ModuleType("rlvr.advantages")

    @dataclass
    class GroupStats:
        pass_rate: torch.Tensor

        def select(self, index):
            return GroupStats(self.pass_rate[index])

    def compute_advantages(rewards, group_size, mode):
        r = rewards.view(-1, group_size)
        centred = r - r.mean(1, keepdim=True)
        if mode == "group_std":
            centred = centred / (r.std(1, unbiased=False, keepdim=True) + 1e-6)
        return centred.reshape(-1)

    def zero_advantage_groups(advantages, group_size):
        return (advantages.view(-1, group_size).abs() < 1e-8).all(1)

    def group_stats(rewards, group_size):
        rate = (rewards.view(-1, group_size) > 0).float().mean(1)
        return GroupStats(rate.repeat_interleave(group_size))

    mod.GroupStats, mod.compute_advantages, mod.group_stats = GroupStats, compute_advantages, group_stats
    mod.zero_advantage_groups = zero_advantage_groups
    return mod


def _standin_rewards() -> types.ModuleType:
    """``contains``: 1 when the completion contains the reference string."""
    mod = types.ModuleType("rlvr.rewards")

    @dataclass
    class BatchScores:
        values: list
        failures: int
        timeouts: int

    def get_verifier(spec):
        if spec == "contains":
            return lambda completion, reference: float(str(reference) in completion)
        if spec == "raises":
            return lambda completion, reference: 1 / 0
        raise ValueError(f"unknown verifier {spec!r}; valid: contains, raises")

    def score_batch(verifier, completions, references):
        values, failures = [], 0
        for c, r in zip(completions, references, strict=True):
            try:
                values.append(verifier(c, r))
            except Exception:
                values.append(0.0)
                failures += 1
        return BatchScores(values, failures, 0)

    mod.get_verifier, mod.score_batch = get_verifier, score_batch
    return mod


def _standin_evaluation() -> types.ModuleType:
    mod = types.ModuleType("rlvr.evaluation")

    @dataclass
    class EvalReport:
        metrics: dict

    def evaluate(model, tokenizer, examples, verifier, *, n, ks, sampling, system_prompt=None):
        from rlvr.data import format_prompt
        from rlvr.generation import generate

        prompts = [format_prompt(tokenizer, e.prompt, system_prompt) for e in examples]
        gen = generate(model, tokenizer, prompts, n=n, sampling=sampling)
        correct = torch.tensor([verifier(t, examples[i].prompt) for t, i in zip(gen.texts, gen.prompt_index, strict=True)]).view(-1, n)
        return EvalReport({f"avg@{k}": float(correct[:, :k].mean()) for k in ks})

    mod.EvalReport, mod.evaluate = EvalReport, evaluate
    return mod


_STANDINS = {
    "rlvr.ops": _standin_ops,
    "rlvr.data": _standin_data,
    "rlvr.objectives": _standin_objectives,
    "rlvr.advantages": _standin_advantages,
    "rlvr.rewards": _standin_rewards,
    "rlvr.evaluation": _standin_evaluation,
}


def _install_standins() -> None:
    for name, build in _STANDINS.items():
        if importlib.util.find_spec(name) is None and name not in sys.modules:
            sys.modules[name] = build()


_install_standins()

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


PROMPTS = [{"prompt": f"What is {a} + {b}?", "answer": str(d)} for a, b, d in [(12, 7, 1), (5, 3, 2), (40, 2, 4), (3, 4, 7), (7, 7, 1), (9, 1, 0)]]


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
            "reward": {"verifier": "contains"},
            "rollout": {"prompts_per_step": 2, "group_size": 4, "max_new_tokens": 8},
            "objective": {"name": "grpo"},
            "optim": {"lr": 1e-3},
            "log": {"output_dir": str(tmp_path / out), "tensorboard": False, "progress": "off", "samples_per_step": 2},
            "eval": {"n": 2, "ks": [1], "at_start": False, "at_end": False},
        }
        return from_dict(TrainConfig, apply_overrides(base, list(overrides)))

    return make
