"""Checks of the ``vllm`` sampler, each run in a process of its own by ``test_vllm.py``.

    python tests/generation/vllm_checks.py sampler MODEL_DIR OUT.json
    python tests/generation/vllm_checks.py train MODEL_DIR WORK_DIR OUT.json

The vLLM engine runs in the process that starts it (its engine core is not a separate
process), so every check that starts one runs here, under ``if __name__ == "__main__"``,
and writes what it measured as JSON for the test to assert on.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

PROMPTS = [[5, 6, 7, 8, 9, 10], [11, 12], [11, 12]]  # unequal lengths; two identical prompts


def trainer_logp(model, gen, temperature: float) -> torch.Tensor:
    """[N, T] the trainer's log-probs of ``gen``'s response tokens (0 on padding)."""
    from rlvr.ops import sequence_token_stats
    from rlvr.train.batch import from_generation

    seqs = from_generation(gen)
    with torch.no_grad():
        stats = sequence_token_stats(
            model, seqs.input_ids, seqs.attention_mask, seqs.response_width, temperature=temperature
        )
    return stats.logp.float() * seqs.response_mask


def max_logp_diff(model, gen, temperature: float) -> float:
    """Largest |trainer - sampler| log-prob over the response tokens of ``gen``."""
    diff = (trainer_logp(model, gen, temperature) - gen.logprobs).abs()
    return float(diff[gen.response_mask.bool()].max())


def push_token(model, token: int, lr: float) -> None:
    """One fused AdamW step raising ``token``'s logit at every position of a prompt."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    loss = -model(torch.tensor([PROMPTS[0]])).logits[0, :, token].mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def rows(gen) -> dict:
    """A generation as plain lists."""
    return {
        "ids": gen.response_ids.tolist(),
        "mask": gen.response_mask.tolist(),
        "truncated": gen.truncated.tolist(),
        "texts": gen.texts,
    }


def check_sampler(model_dir: str) -> dict:
    """Log-prob agreement, seeds, greedy agreement with ``lean``, weights pushed after steps."""
    from rlvr.generation import SamplingConfig, make_sampler
    from rlvr.models import load_model

    torch.manual_seed(0)
    model, tokenizer = load_model(model_dir)
    torch.set_num_threads(2)
    rng = torch.get_rng_state()
    sampler = make_sampler("vllm", model, tokenizer)  # starts the engine (it reseeds, sets threads)
    out: dict = {"threads_after_start": torch.get_num_threads()}
    torch.set_num_threads(1)
    out["threads_settable"] = torch.get_num_threads()
    drawn = torch.rand(4)
    torch.set_rng_state(rng)
    out["rng_untouched"] = torch.equal(drawn, torch.rand(4))
    lean = make_sampler("lean", model, tokenizer)
    hot = SamplingConfig(max_new_tokens=16, temperature=0.8)
    greedy = SamplingConfig(max_new_tokens=8, temperature=0)

    torch.manual_seed(1)
    first = sampler.generate(PROMPTS, n=4, sampling=hot)
    torch.manual_seed(1)
    again = sampler.generate(PROMPTS, n=4, sampling=hot)
    torch.manual_seed(2)
    other = sampler.generate(PROMPTS, n=4, sampling=hot)
    out["sampled"] = rows(first)
    out["prompt_index"] = first.prompt_index
    out["logprobs"] = first.logprobs.tolist()
    out["repeat_equal"] = torch.equal(first.response_ids, again.response_ids) and torch.equal(
        first.logprobs, again.logprobs
    )
    out["other_seed_equal"] = torch.equal(first.response_ids, other.response_ids)
    out["logp_diff_hot"] = max_logp_diff(model, first, 0.8)

    out["greedy_before"] = rows(sampler.generate(PROMPTS, n=1, sampling=greedy))
    out["lean_before"] = rows(lean.generate(PROMPTS, n=1, sampling=greedy))

    push_token(model, 42, lr=0.05)  # no explicit sync: the sampler sees the optimiser step
    out["greedy_after"] = rows(sampler.generate(PROMPTS, n=1, sampling=greedy))
    out["lean_after"] = rows(lean.generate(PROMPTS, n=1, sampling=greedy))
    torch.manual_seed(3)
    out["logp_diff_after_step"] = max_logp_diff(
        model, sampler.generate(PROMPTS, n=4, sampling=hot), 0.8
    )

    eos = tokenizer.eos_token_id
    push_token(model, eos, lr=0.5)
    sampler.sync_weights()
    out["eos"], out["pad"] = eos, tokenizer.pad_token_id
    out["greedy_eos"] = rows(sampler.generate(PROMPTS, n=2, sampling=greedy))
    sampler.close()
    return out


def even_length(completion, reference, *, correct=1.0, wrong=0.0):
    """Test verifier: ``correct`` for completions of even length (about half of them)."""
    return correct if len(completion) % 2 == 0 else wrong


def check_train(model_dir: str, work: str) -> dict:
    """A two-step run with ``rollout.sampler=vllm`` and truncated importance sampling."""
    from rlvr.rewards import register
    from rlvr.train.config import TrainConfig
    from rlvr.train.loop import train
    from rlvr.train.metrics import read_metrics
    from rlvr.train.overrides import from_dict

    register("even_length")(even_length)  # rewards that differ within a group, so the policy moves

    prompts = Path(work) / "prompts.jsonl"
    prompts.write_text(
        "".join(
            json.dumps({"prompt": f"What is {a} + {b}?", "answer": str(a + b)}) + "\n"
            for a, b in [(1, 2), (3, 4), (5, 6), (7, 8)]
        )
    )
    cfg = from_dict(
        TrainConfig,
        {
            "steps": 2,
            "seed": 0,
            "threads": 1,
            "model": {"name": model_dir},
            "data": {"train": str(prompts), "eval": str(prompts), "max_prompt_tokens": 64},
            "reward": {"verifier": "even_length"},
            "rollout": {
                "prompts_per_step": 2,
                "group_size": 4,
                "max_new_tokens": 12,
                "minibatches": 2,
                "sampler": "vllm",
                "importance_correction": "tis",
            },
            "objective": {"name": "grpo"},
            "optim": {"lr": 0.02},
            "log": {
                "output_dir": str(Path(work) / "run"),
                "tensorboard": False,
                "progress": "off",
                "plots": False,
            },
            "eval": {"n": 2, "ks": [1], "at_start": False, "at_end": True},
        },
    )
    result = train(cfg)
    return {"rows": read_metrics(result.run_dir / "metrics.jsonl")}


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    what, *args = sys.argv[1:]
    found = check_sampler(args[0]) if what == "sampler" else check_train(args[0], args[1])
    Path(args[-1]).write_text(json.dumps(found))
