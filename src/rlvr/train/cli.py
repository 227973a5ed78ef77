"""``rlvr train``: RL training from a YAML config and ``key=value`` overrides.

With no arguments it runs the embedded ``demo`` config. ``--resume DIR`` continues the
run in ``DIR`` from its latest checkpoint, with the configuration saved there (overrides
given on the command line still apply, e.g. ``steps=200`` to extend a run).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from pathlib import Path

from rlvr.train.overrides import embedded_configs, load_config, read_yaml


def parse_run_args(
    parser: argparse.ArgumentParser, cls, argv: list[str], *, default_config: str | None
):
    """``(config, resume)`` from ``--config``, ``--resume [DIR]`` and ``key=value`` overrides."""
    parser.add_argument(
        "--config", help=f"YAML file or embedded config ({', '.join(embedded_configs())})"
    )
    parser.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=None,
        metavar="DIR",
        help="continue from the latest checkpoint (of DIR, or of log.output_dir)",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="e.g. objective.name=abc_grpo rollout.group_size=8",
    )
    args = parser.parse_args(argv)
    source = args.config
    overrides = list(args.overrides)
    if isinstance(args.resume, str) and "=" in args.resume and not Path(args.resume).exists():
        overrides.insert(0, args.resume)  # `--resume steps=200`: an override, not a directory
        args.resume = True
    if isinstance(args.resume, str):
        saved = Path(args.resume) / "config.yaml"
        if source is None:
            if not saved.is_file():
                raise ValueError(
                    f"--resume {args.resume}: no config.yaml there (pass --config as well)"
                )
            source = str(saved)
        overrides.append(f"log.output_dir={args.resume}")
    if source is None:
        source = default_config
    if source is not None:
        read_yaml(source)  # a clear error for a missing file before anything else
    return load_config(cls, source, overrides), args.resume is not None


@contextlib.contextmanager
def plain_warnings():
    """Within the block, warnings print as one ``warning: ...`` line each (no source line)."""
    original = warnings.formatwarning
    warnings.formatwarning = lambda message, category, *args, **kwargs: f"warning: {message}\n"
    try:
        yield
    finally:
        warnings.formatwarning = original


def print_config_error(err: ValueError) -> int:
    """Report a configuration error on stderr; returns the exit status 2."""
    print(f"rlvr: configuration error: {err}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    """``rlvr train [--config FILE] [key=value ...] [--resume [DIR]]``."""
    from rlvr.train.config import TrainConfig
    from rlvr.train.integrations import validate_objective
    from rlvr.train.loop import train

    parser = argparse.ArgumentParser(
        prog="rlvr train",
        description="RL with verifiable rewards. With no config, runs the embedded demo.",
        epilog="example: rlvr train --config demo objective.name=abc_grpo objective.eps3=0.3 model=smollm2-135m",
    )
    try:
        cfg, resume = parse_run_args(
            parser, TrainConfig, sys.argv[1:] if argv is None else argv, default_config="demo"
        )
        validate_objective(cfg.objective, cfg.reward)
    except ValueError as err:
        return print_config_error(err)
    with plain_warnings():
        result = train(cfg, resume=resume)
    for line in result.summary_lines():
        print(line)
    return 0
