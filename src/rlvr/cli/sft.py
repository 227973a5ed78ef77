"""``rlvr sft``: supervised fine-tuning on prompt/response JSONL."""

from __future__ import annotations

import argparse

from rlvr.cli.common import command, dry_run, parse_run_args


@command
def main(argv: list[str]) -> int:
    """``rlvr sft --config FILE [key=value ...] [--resume [DIR]]``."""
    from rlvr.train.config import SFTConfig
    from rlvr.train.supervised import sft

    parser = argparse.ArgumentParser(
        prog="rlvr sft",
        description="Supervised fine-tuning: token-mean NLL of responses, prompt tokens masked.",
        epilog="example: rlvr sft data.train=pairs.jsonl model=tiny optim.lr=3e-4 epochs=2",
    )
    cfg, resume, dry, _ = parse_run_args(
        parser, SFTConfig, argv, default_config=None, example="data.train=pairs.jsonl epochs=2"
    )
    if dry:
        return dry_run(cfg, resume=resume)
    result = sft(cfg, resume=resume)
    print(f"metrics: {result.run_dir / 'metrics.jsonl'}")
    if result.model_dir is not None:
        print(f"model:   {result.model_dir}")
    return 0
