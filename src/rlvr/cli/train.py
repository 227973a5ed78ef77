"""``rlvr train``: RL training from a YAML config and ``key=value`` overrides.

With no arguments it runs the embedded ``demo`` config. ``--resume DIR`` continues the
run in ``DIR`` from its latest checkpoint, with the configuration saved there (overrides
given on the command line still apply, e.g. ``steps=200`` to extend a run).
"""

from __future__ import annotations

import argparse

from rlvr.cli.common import command, dry_run, parse_run_args


@command
def main(argv: list[str]) -> int:
    """``rlvr train [--config FILE] [key=value ...] [--resume [DIR]]``."""
    from rlvr.train.config import TrainConfig
    from rlvr.train.loop import train

    parser = argparse.ArgumentParser(
        prog="rlvr train",
        description="RL with verifiable rewards. With no config, runs the embedded demo.",
        epilog="example: rlvr train --config demo objective.name=abc_grpo objective.eps3=0.3 model=smollm2-135m",
    )
    cfg, resume, dry = parse_run_args(parser, TrainConfig, argv, default_config="demo")
    if dry:
        return dry_run(cfg, resume=resume)
    result = train(cfg, resume=resume)
    for line in result.summary_lines():
        print(line)
    options = "".join(f", {k}={v}" for k, v in sorted(cfg.reward.options.items()))
    print(f"{'verifier:':<18}{cfg.reward.verifier}{options} (reward section of config.yaml)")
    return 0
