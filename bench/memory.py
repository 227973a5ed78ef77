"""Resident memory of our RL step, phase by phase, on the configuration of ``bench/vs_trl.py``.

    PYTHONPATH=src python bench/memory.py                      # smollm2-135m, 2 steps
    PYTHONPATH=src python bench/memory.py --preset tiny --steps 3
    PYTHONPATH=src python bench/memory.py --set model.share_prompt=false   # the padded layout
    PYTHONPATH=src python bench/memory.py --set model.trim_heap=false      # glibc keeps free pages

The step is run from the trainer's own functions (``collect_rounds``, ``assemble``,
``micro_loss``, ``clip_and_step``), with the peak resident set (``VmHWM``) reset before
each phase (Linux: writing 5 to ``/proc/self/clear_refs``) and read after it, so each
phase's own peak shows: generation, every micro-batch's forward and backward, the
optimiser step. The fixed parts are printed first: weights, and what gradients and
AdamW's two moments take once allocated.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vs_trl_config import BenchSpec, model_dir_for, rlvr_config  # noqa: E402

MIB = 2**20


def rss_mb(field: str = "VmRSS") -> float:
    """``VmRSS`` or ``VmHWM`` of this process in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def reset_peak() -> None:
    """Start a new peak (``VmHWM`` := current ``VmRSS``)."""
    Path("/proc/self/clear_refs").write_text("5")


class Phases:
    """Rows of ``phase | RSS before | peak during | RSS after`` (MiB)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, float, float, float]] = []

    def run(self, name: str, fn):
        before = rss_mb()
        reset_peak()
        value = fn()
        self.rows.append((name, before, rss_mb("VmHWM"), rss_mb()))
        return value

    def table(self) -> list[str]:
        lines = ["| phase | RSS before | peak during | RSS after |", "| --- | ---: | ---: | ---: |"]
        lines += [f"| {n} | {a:.0f} | {p:.0f} | {b:.0f} |" for n, a, p, b in self.rows]
        return lines


def backward(loss: torch.Tensor, model_cfg) -> None:
    """As the trainer does it: the heap's free pages released first (``model.trim_heap``)."""
    from rlvr.train.heap import before_backward

    before_backward(model_cfg.device, model_cfg.trim_heap)
    loss.backward()


def one_step(run, phases: Phases, step: int) -> None:
    """One RL step of ``run`` (an ``RLRun``), phase by phase."""
    from rlvr.objectives import step_counts
    from rlvr.train.batch import micro_batches
    from rlvr.train.optim import clip_and_step
    from rlvr.train.rollout import assemble, collect_rounds
    from rlvr.train.update import micro_loss

    cfg = run.cfg
    rounds = phases.run(
        f"step {step}: generate + score",
        lambda: collect_rounds(
            run.generator, run.tokenizer, run.scorer, run.train_set.prompts, run.order, cfg
        ),
    )
    batch, _ = assemble(rounds.kept, run.tokenizer.pad_token_id, cfg)
    if batch is None:
        return
    counts = step_counts(
        batch.seqs.response_mask,
        batch.rewards,
        run.objective.regularizers.sft_threshold,
        max_len=cfg.rollout.max_new_tokens,
    )
    chunks = micro_batches(batch.seqs, cfg.optim.micro_batch_size, by_prompt=cfg.model.share_prompt)
    for k, index in enumerate(chunks):
        micro = batch.rows(index)
        out = phases.run(
            f"step {step}: micro-batch {k} forward",
            lambda micro=micro: micro_loss(run.policy, micro, cfg, run.objective, counts),
        )
        phases.run(
            f"step {step}: micro-batch {k} backward",
            lambda loss=out.loss: backward(loss, cfg.model),
        )
        del out
    phases.run(
        f"step {step}: optimiser step",
        lambda: clip_and_step(run.policy, run.optimizer, run.scheduler, cfg.optim),
    )


def main(argv: list[str] | None = None) -> int:
    from rlvr.train.config import TrainConfig
    from rlvr.train.loop import build_run
    from rlvr.train.overrides import apply_overrides, from_dict, to_dict
    from rlvr.train.run_dir import prepare_run_dir

    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--preset", default="smollm2-135m")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--set", nargs="*", default=[], help="config overrides, key=value")
    args = p.parse_args(argv)
    torch.manual_seed(0)
    spec = BenchSpec(
        preset=args.preset,
        model_dir=model_dir_for(args.preset),
        steps=args.steps,
        warmup=0,
        threads=args.threads,
    )
    out = f"/tmp/rlvr-memory-{time.strftime('%H%M%S')}"
    cfg = from_dict(TrainConfig, apply_overrides(to_dict(rlvr_config(spec, out)), list(args.set)))
    torch.set_num_threads(args.threads)
    print(f"start: RSS {rss_mb():.0f} MiB (interpreter and libraries)")
    run = build_run(cfg, prepare_run_dir(cfg, resume=False)[0], None)
    params = sum(p.numel() * p.element_size() for p in run.policy.parameters()) / MIB
    trained = (
        sum(p.numel() * p.element_size() for p in run.policy.parameters() if p.requires_grad) / MIB
    )  # LoRA: the adapters alone
    print(
        f"built: RSS {rss_mb():.0f} MiB; weights {params:.0f} MiB, so gradients {trained:.0f} MiB "
        f"and AdamW's moments {2 * trained:.0f} MiB once allocated; "
        f"model.share_prompt={cfg.model.share_prompt}, micro-batch {cfg.optim.micro_batch_size}"
    )
    phases = Phases()
    try:
        for step in range(args.steps):
            one_step(run, phases, step)
    finally:
        run.close()
    print("\n".join(phases.table()))
    worst = max(phases.rows, key=lambda row: row[2])
    print(f"highest peak: {worst[2]:.0f} MiB ({worst[0]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
