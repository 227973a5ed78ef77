"""What ``log.contrast`` costs: one micro-batch's contrast metrics against its model pass.

    PYTHONPATH=src python bench/contrast.py                 # tiny preset, 32 x (128 + 64) tokens
    PYTHONPATH=src python bench/contrast.py --contrast grpo etr apmpo

Times, round-robin in one run (so drift on a shared machine hits all alike), the pieces of
one micro-batch of the update: the model's forward and backward through the response
log-probs (``sequence_token_stats``), the run objective's loss and backward
(``objective_loss``, ``abc_grpo``), and ``contrast_metrics`` against each ``--contrast``
objective (two loss evaluations and their backward to the log-probs per name). Prints the
median of each and the contrast's share of the micro-batch without it.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from rlvr.models import load_model
from rlvr.objectives import LossInputs, ObjectiveConfig, objective_loss
from rlvr.objectives.contrast import contrast_metrics, parse_contrast
from rlvr.ops import sequence_token_stats


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", default="tiny")
    p.add_argument("--rows", type=int, default=32, help="sequences per micro-batch (groups of 8)")
    p.add_argument("--prompt", type=int, default=128, help="prompt tokens")
    p.add_argument("--response", type=int, default=64, help="response tokens T")
    p.add_argument("--contrast", nargs="+", default=["grpo"])
    p.add_argument("--repeats", type=int, default=20)
    return p.parse_args(argv)


def main() -> None:
    args = parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model, tokenizer = load_model(args.model)
    vocab = len(tokenizer)
    ids = torch.randint(3, vocab, (args.rows, args.prompt + args.response))
    attn = torch.ones_like(ids)
    run = ObjectiveConfig.of("abc_grpo")
    contrasts = tuple(parse_contrast(name, run) for name in args.contrast)
    rewards = (torch.rand(args.rows) < 0.5).float()
    adv = torch.randn(args.rows)
    stats = {c.label: c.objective.group_stats(rewards, 8) for c in contrasts}  # groups of 8

    def model_pass() -> torch.Tensor:
        stats = sequence_token_stats(model, ids, attn, args.response)
        stats.logp.sum().backward()
        return stats.logp.detach()

    logp = model_pass()
    inputs = LossInputs(
        logp=logp + 0.05 * torch.randn_like(logp), old_logp=logp, advantages=adv,
        mask=torch.ones_like(logp), rewards=rewards,
    )  # fmt: skip

    def objective() -> None:
        leaf = inputs.logp.clone().requires_grad_()
        objective_loss(LossInputs(leaf, inputs.old_logp, adv, inputs.mask), run)[0].backward()

    parts = {
        "model forward + backward": model_pass,
        "objective + backward": objective,
        f"contrast ({', '.join(args.contrast)})": lambda: contrast_metrics(
            inputs, run, contrasts, None, stats
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in parts}
    for _ in range(args.repeats):
        for name, fn in parts.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    medians = {name: statistics.median(v) for name, v in times.items()}
    base = medians["model forward + backward"] + medians["objective + backward"]
    for name, value in medians.items():
        print(f"{name:<40} {value * 1e3:8.2f} ms")
    contrast = list(medians.values())[-1]
    print(f"contrast / (model + objective): {contrast / base:.2f}")


if __name__ == "__main__":
    main()
