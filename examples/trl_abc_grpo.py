"""ABC-GRPO in TRL: ``RlvrGRPOTrainer`` drops in for ``GRPOTrainer``.

    pip install "rlvr[trl]"
    python examples/trl_abc_grpo.py                                   # CPU, rlvr's tiny preset
    torchrun --nproc_per_node 2 examples/trl_abc_grpo.py              # CPU, two processes (gloo)
    accelerate launch examples/trl_abc_grpo.py --model Qwen/Qwen2.5-0.5B-Instruct --vllm  # GPU
    python examples/trl_abc_grpo.py --objective grpo --advantage group_mean  # the baseline

It trains on the task, prompts and reward of ``rlvr train``'s demo
(``src/rlvr/configs/demo.yaml``: reasoning-gym chain sums, the bare question as the prompt,
the ``reasoning_gym:chain_sum`` verifier), the one the ``tiny`` preset was warm-started on,
and shapes each rollout batch as the demo does: 16 prompts x 8 completions, split into 4
optimiser steps (the later ones off-policy, so ABC's clips act). It prints the held-out
score (the demo's 200 problems, 4 samples each) before and after training and the reward of
every rollout batch; rlvr's metrics (``clip/q1_share``... ``docs/metrics.md``) are in TRL's
log next to its own and in TensorBoard under ``--out``. Its default,
``runs/trl-<model>-<objective>`` (with ``--advantage`` and ``--eps3`` when given), keeps each
run apart: the baseline does not overwrite ABC-GRPO's checkpoint and logs.

Where a GPU is visible it trains there (bf16 where supported), with or without ``--vllm``.
``--model`` is a hub name, a local directory or an rlvr preset (``tiny``, ``smollm2-135m``).
``--objective`` runs another of rlvr's objectives with its defaults (GRPO with
``--advantage group_mean`` is the baseline ABC-GRPO's paper compares against, its eq. 3
advantages); ``--lr`` defaults to the demo's 5e-5 for ``tiny`` and 1e-5 for other models.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections.abc import Callable

import torch
from datasets import Dataset
from trl import GRPOConfig

from rlvr.data import format_prompt, load_examples
from rlvr.data.chat import bos_prefix
from rlvr.engines.trl import RlvrGRPOTrainer, verifier_reward
from rlvr.evaluation import evaluate
from rlvr.generation import SamplingConfig
from rlvr.models import load_tokenizer, resolve_model_path
from rlvr.objectives import ObjectiveConfig, make_config
from rlvr.rewards import get_verifier
from rlvr.train.config import TrainConfig
from rlvr.train.overrides import load_config
from rlvr.train.prompts import gym_files

DEMO = load_config(TrainConfig, "demo")
"""The task, prompt format, reward and batch shape this example shares with ``rlvr train``."""


def demo_examples(role: str) -> list:
    """The demo's ``train`` or ``eval`` problems (``rlvr.data.Example``), as ``rlvr train`` loads them."""
    return load_examples(str(gym_files(DEMO.data)[role]), fields="reasoning_gym")


def prompt_dataset(examples: list, tokenizer) -> Dataset:
    """TRL rows: the demo's prompt text (chat template applied by rlvr) and the reference as JSON.

    TRL tokenises text prompts with the tokenizer's special tokens, so the BOS text rlvr puts
    first is left to it: the prompt ids are those of ``rlvr train``.
    """
    bos = bos_prefix(tokenizer)
    rows = []
    for example in examples:
        text = format_prompt(tokenizer, example.prompt, DEMO.data.system_prompt)
        rows.append({"prompt": text[len(bos) :], "reference": json.dumps(example.reference)})
    return Dataset.from_list(rows)


def held_out_score(model, tokenizer, examples: list) -> float:
    """Mean accuracy of the demo's held-out evaluation (its sampling, ``eval/avg@1``)."""
    sampling = SamplingConfig(
        max_new_tokens=DEMO.rollout.max_new_tokens, temperature=DEMO.eval.temperature
    )
    config = DEMO.eval.harness(sampling, system_prompt=DEMO.data.system_prompt)
    config = dataclasses.replace(config, batch_size=50)  # 200 sequences per call: as fast
    return evaluate(model, tokenizer, examples, DEMO.reward.verifier, config).metrics["avg@1"]


def grpo_config(args: argparse.Namespace, gpu: bool) -> GRPOConfig:
    """TRL's settings for the demo's batch shape, split over ``WORLD_SIZE`` processes."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rollout = DEMO.rollout
    completions = rollout.prompts_per_step * rollout.group_size // rollout.minibatches
    if completions % world:
        raise SystemExit(f"{completions} completions per optimiser step do not split over {world}")
    return GRPOConfig(
        output_dir=args.out,
        max_steps=args.steps,
        per_device_train_batch_size=completions // world,
        steps_per_generation=rollout.minibatches,  # one rollout batch, 4 optimiser steps
        num_generations=rollout.group_size,
        max_completion_length=rollout.max_new_tokens,
        temperature=rollout.temperature,
        learning_rate=args.lr
        if args.lr is not None
        else (DEMO.optim.lr if args.model == "tiny" else 1e-5),
        adam_beta1=DEMO.optim.betas[0],
        adam_beta2=DEMO.optim.betas[1],
        max_grad_norm=DEMO.optim.max_grad_norm,
        lr_scheduler_type="constant",
        seed=DEMO.seed,
        logging_steps=rollout.minibatches,  # one log row per rollout batch
        report_to="tensorboard",
        use_cpu=not gpu,
        bf16=gpu and torch.cuda.is_bf16_supported(),
        use_vllm=args.vllm,
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=0.3,
    )


def objective_kwargs(args: argparse.Namespace) -> dict | None:
    """ABC-GRPO's widths, the paper's 0.2 with ``--eps3`` (0 included) for the upper one of
    ``A <= 0``; ``None`` (its defaults) for another objective."""
    if args.objective != "abc_grpo":
        return None
    eps3 = 0.2 if args.eps3 is None else args.eps3
    return {"eps1": 0.2, "eps2": 0.2, "eps3": eps3, "eps4": 0.2}


def positive(kind: type) -> Callable[[str], int | float]:
    """An argparse type: a number of ``kind`` above 0 (TRL reads ``max_steps <= 0`` as
    "train for the epochs instead", 3 passes over the data)."""

    def parse(text: str) -> int | float:
        value = kind(text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in "invalid int value"
    return parse


def default_out(args: argparse.Namespace) -> str:
    """``runs/trl-<model>-<objective>``, with ``--advantage`` and ``--eps3`` when given: the
    baseline and the ABC-GRPO run of the docs each get their own folder (checkpoints,
    TensorBoard); ``<model>`` is the last part of ``--model``."""
    parts = [args.model.rstrip("/").split("/")[-1], args.objective]
    if args.advantage is not None:
        parts.append(args.advantage)
    if args.eps3 is not None:
        parts.append(f"eps3-{args.eps3:g}")
    return "runs/trl-" + "-".join(parts)


def check_objective(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse an unknown objective or advantage mode, or a bad width, in one line before
    anything loads (``RlvrGRPOTrainer`` would raise the same after the tokenizer and data)."""
    try:
        params = make_config(args.objective, **(objective_kwargs(args) or {}))
        ObjectiveConfig(args.objective, params=params, advantage=args.advantage)
    except ValueError as err:
        parser.error(str(err))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked (one line and exit 2 for a bad value), ``--out`` filled in."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument(
        "--steps", type=positive(int), default=80, help="optimiser steps (4 per rollout)"
    )
    parser.add_argument(
        "--out",
        help="output folder (default: runs/trl-<model>-<objective>[-<advantage>][-eps3-<eps3>])",
    )
    parser.add_argument("--vllm", action="store_true", help="vLLM rollouts, colocated (GPU)")
    parser.add_argument("--objective", default="abc_grpo", help="an rlvr objective (grpo, etr...)")
    parser.add_argument(
        "--advantage", help="group_std, group_mean or batch_std (default: the objective's)"
    )
    parser.add_argument("--eps3", type=float, help="ABC-GRPO's upper width for A <= 0 (0.2)")
    parser.add_argument(
        "--lr", type=positive(float), help="learning rate (default: 5e-5 for tiny, else 1e-5)"
    )
    parser.add_argument("--no-eval", action="store_true", help="skip the held-out scores")
    args = parser.parse_args(argv)
    if args.eps3 is not None and args.objective != "abc_grpo":
        parser.error(f"--eps3 is ABC-GRPO's; --objective {args.objective} has no eps3")
    check_objective(parser, args)
    args.out = args.out or default_out(args)
    if args.vllm and not torch.cuda.is_available():
        parser.error("--vllm needs a GPU (TRL's colocated vLLM); run without it on a CPU")
    return args


def main() -> None:
    args = parse_args()
    gpu = torch.cuda.is_available()
    if not gpu:
        torch.set_num_threads(DEMO.threads)  # the demo's 1 thread a process: 2 cores, 2 processes

    model = resolve_model_path(args.model)
    tokenizer = load_tokenizer(model)
    verifier = get_verifier(DEMO.reward.verifier, **DEMO.reward.options)

    trainer = RlvrGRPOTrainer(
        model,
        verifier_reward(verifier, column="reference"),  # the JSON text is a reference too
        grpo_config(args, gpu),
        train_dataset=prompt_dataset(demo_examples("train"), tokenizer),
        processing_class=tokenizer,
        objective=args.objective,
        objective_kwargs=objective_kwargs(args),
        advantage=args.advantage,
    )
    main_process = trainer.accelerator.is_main_process
    held_out = demo_examples("eval") if main_process and not args.no_eval else None
    before = held_out and held_out_score(trainer.model, tokenizer, held_out)
    trainer.train()
    if not main_process:
        return
    rewards = [row["reward"] for row in trainer.state.log_history if "reward" in row]
    print("reward per rollout batch:", " ".join(f"{r:.3f}" for r in rewards))
    if held_out:
        after = held_out_score(trainer.model, tokenizer, held_out)
        print(f"held-out avg@1 ({len(held_out)} problems): {before:.3f} before, {after:.3f} after")
    print(f"processes: {trainer.accelerator.num_processes}")
    print(f"rlvr's metrics (clip/q1_share...): in the log above and TensorBoard under {args.out}")


if __name__ == "__main__":
    main()
