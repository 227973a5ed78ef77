"""Where one optimiser step of our update spends its time: ``torch.profiler``'s operator table.

    PYTHONPATH=src python bench/profile_update.py                  # smollm2-135m, 1 thread
    PYTHONPATH=src python bench/profile_update.py --threads 2 --rows 20
    PYTHONPATH=src python bench/profile_update.py --shapes         # split by input shape

The configuration is ``bench/vs_trl.py``'s (4 prompts x G=4, 64 new tokens, micro-batches
of 8, ``grpo``, float32). One rollout batch is sampled and scored, one optimiser step on it
warms up, one more is timed, and a third runs under the profiler; the table is sorted by
each operator's own time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vs_trl import PRESETS  # noqa: E402
from vs_trl_config import BenchSpec, model_dir_for, rlvr_config  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    from torch.profiler import ProfilerActivity, profile

    from rlvr.train.loop import build_run
    from rlvr.train.metrics import StepMetrics
    from rlvr.train.rollout import assemble, collect_rounds
    from rlvr.train.run_dir import prepare_run_dir
    from rlvr.train.update import optimizer_step

    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--preset", choices=PRESETS, default="smollm2-135m")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rows", type=int, default=14, help="operators in the table")
    p.add_argument("--shapes", action="store_true", help="one row per operator and input shape")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    spec = BenchSpec(
        preset=args.preset, model_dir=model_dir_for(args.preset), steps=1, warmup=0,
        threads=args.threads,
    )  # fmt: skip
    cfg = rlvr_config(spec, f"/tmp/rlvr-profile-{time.strftime('%H%M%S')}")
    run = build_run(cfg, prepare_run_dir(cfg, resume=False)[0], None)
    try:
        rounds = collect_rounds(
            run.generator, run.tokenizer, run.scorer, run.train_set.prompts, run.order, cfg
        )
        batch, _ = assemble(rounds.kept, run.tokenizer.pad_token_id, cfg)

        def step() -> None:
            optimizer_step(
                run.policy, run.optimizer, run.scheduler, batch, cfg, run.objective, StepMetrics()
            )

        step()  # warm-up
        start = time.perf_counter()
        step()
        print(f"{args.preset}, {args.threads} thread(s): one optimiser step "
              f"{time.perf_counter() - start:.2f} s")  # fmt: skip
        with profile(activities=[ProfilerActivity.CPU], record_shapes=args.shapes) as prof:
            step()
    finally:
        run.close()
    table = prof.key_averages(group_by_input_shape=args.shapes)
    print(table.table(sort_by="self_cpu_time_total", row_limit=args.rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
