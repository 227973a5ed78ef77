"""ABC-GRPO in TRL: ``RlvrGRPOTrainer`` drops in for ``GRPOTrainer``.

    pip install "rlvr[trl]"
    python examples/trl_abc_grpo.py --model tiny --steps 20             # CPU, rlvr's tiny preset
    accelerate launch examples/trl_abc_grpo.py --model Qwen/Qwen2.5-0.5B-Instruct --vllm
    accelerate launch examples/trl_abc_grpo.py --model Qwen/Qwen2.5-0.5B-Instruct  # GPU, HF generate

Where a GPU is visible it trains there (bf16 where supported), with or without ``--vllm``.
``--model`` is a hub name, a local directory or an rlvr preset (``tiny``, ``smollm2-135m``).
The reward is rlvr's ``reasoning_gym:chain_sum`` verifier; rlvr's metrics (``clip/q1_share``...)
appear in TRL's log next to its own, in TensorBoard under ``--out``.
"""

from __future__ import annotations

import argparse

import torch
from datasets import Dataset
from trl import GRPOConfig

from rlvr.data import gym_rows
from rlvr.engines.trl import RlvrGRPOTrainer
from rlvr.models import load_tokenizer, resolve_model_path
from rlvr.rewards import get_verifier

INSTRUCTION = "Solve the problem and give the final answer as \\boxed{{answer}}.\n\n{question}"


def chain_sum_dataset(size: int, seed: int) -> Dataset:
    rows = gym_rows("chain_sum", size=size, seed=seed, config={"max_terms": 4, "max_digits": 2})
    return Dataset.from_list(
        [
            {
                "prompt": [{"role": "user", "content": INSTRUCTION.format(question=r["question"])}],
                "entry": r,
            }
            for r in rows
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", default="runs/trl-abc-grpo")
    parser.add_argument("--vllm", action="store_true", help="vLLM rollouts, colocated (GPU)")
    parser.add_argument("--eps3", type=float, default=0.2, help="ABC's upper width for A <= 0")
    args = parser.parse_args()
    gpu = torch.cuda.is_available()
    if args.vllm and not gpu:
        parser.error("--vllm needs a GPU (TRL's colocated vLLM); run without it on a CPU")

    model = resolve_model_path(args.model)
    verifier = get_verifier("reasoning_gym:chain_sum")

    def chain_sum_reward(completions, entry, **_):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [float(verifier(text, e)) for text, e in zip(texts, entry, strict=True)]

    config = GRPOConfig(
        output_dir=args.out,
        max_steps=args.steps,
        per_device_train_batch_size=8,
        num_generations=8,
        gradient_accumulation_steps=4,
        max_completion_length=128,
        num_iterations=2,  # two passes per batch: the second is off-policy, so the clips act
        learning_rate=1e-5 if gpu else 5e-5,  # a real model on a GPU; the tiny preset on a CPU
        logging_steps=1,
        report_to="tensorboard",
        use_cpu=not gpu,
        bf16=gpu and torch.cuda.is_bf16_supported(),
        use_vllm=args.vllm,
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=0.3,
    )
    trainer = RlvrGRPOTrainer(
        model,
        chain_sum_reward,
        config,
        train_dataset=chain_sum_dataset(1024, seed=0),
        processing_class=load_tokenizer(model),
        objective="abc_grpo",
        objective_kwargs={"eps1": 0.2, "eps2": 0.2, "eps3": args.eps3, "eps4": 0.2},
    )
    trainer.train()


if __name__ == "__main__":
    main()
