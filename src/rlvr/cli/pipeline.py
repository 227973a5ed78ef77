"""``rlvr pipeline``: run the stages of a pipeline file in order (data, SFT and RL), resumably.

::

    rlvr pipeline klear                              # the bundled SFT -> math RL -> code RL
    rlvr pipeline my.yaml threads=1 math:steps=40    # all stages / one stage
    rlvr pipeline klear -o runs/klear-1              # run it again to continue after a stop

Running the same command again skips finished stages and resumes an interrupted one from
its last checkpoint; a finished stage whose options have changed since is refused, naming
the folders to delete to rerun it. See ``rlvr.pipeline`` for the file format.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
import time
from pathlib import Path

from rlvr.cli.common import DRY_RUN_HELP, command, warn_repeated_keys


@command
def main(argv: list[str]) -> int:
    """``rlvr pipeline FILE [-o DIR] [key=value | STAGE:key=value ...]``."""
    from rlvr.pipeline import check_pipeline, read_pipeline
    from rlvr.train.run_dir import TIME_FORMAT

    args = _parser().parse_intermixed_args(argv)
    warn_repeated_keys(args.overrides)
    if args.output_dir == "":  # -o "$OUT" with OUT unset: not the file's output_dir
        raise ValueError(
            "-o/--output-dir is empty: give a directory, or leave -o out for the file's output_dir"
        )

    def note(line: str) -> None:  # what the dry run could not check, as rlvr train's says it
        print(f"--dry-run: {line}", file=sys.stderr)

    pipeline = read_pipeline(args.pipeline)
    given = args.output_dir or pipeline.output_dir  # -o, or the file's: '{time}' expands
    out = given.replace("{time}", time.strftime(TIME_FORMAT))
    pipeline = dataclasses.replace(pipeline, output_dir=out)
    if args.dry_run:
        configs = check_pipeline(pipeline, args.overrides, note=note)
        for line in _stage_lines(pipeline, configs):
            print(line)
        return 0
    # a timestamped directory the command chose: running it again would start a new one
    again = _continue_command(args, out) if out != given else None
    for r in _run(pipeline, args.overrides, again):
        scores = r.evals[max(r.evals)] if r.evals else {}
        shown = "  ".join(f"{k} {v:.3f}" for k, v in scores.items())
        if r.output is not None:
            shown = "  ".join(f"{k} {v}" for k, v in r.counts.items())
        where = r.output if r.output is not None else r.model_dir
        print(f"{r.name:<12} {r.status:<8} {where}  {shown}".rstrip())
    print(f"pipeline:    {out}/pipeline.json  (every stage finished)")
    return 0


def _parser() -> argparse.ArgumentParser:
    """The command's arguments."""
    from rlvr.pipeline import embedded_pipelines

    parser = argparse.ArgumentParser(
        prog="rlvr pipeline",
        description="Run data, SFT and RL stages in order, each model stage from the previous "
        "one's final model; rerun to continue.",
        epilog="example: rlvr pipeline klear threads=2 code:steps=10",
    )
    parser.add_argument(
        "pipeline", help=f"pipeline YAML file or embedded name ({', '.join(embedded_pipelines())})"
    )
    parser.add_argument(
        "-o", "--output-dir", help="output directory (default: the file's output_dir)"
    )
    parser.add_argument("--dry-run", action="store_true", help=DRY_RUN_HELP)
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="applied to every SFT and RL stage; STAGE:key=value applies to one",
    )
    return parser


def _run(pipeline, overrides: list[str], again: str | None) -> list:
    """:func:`~rlvr.pipeline.run_pipeline`; with ``again`` (the command that continues a
    timestamped output directory), the directory and ``again`` are said before the first
    stage, and after a stop or an error once the directory exists."""
    from rlvr.pipeline import run_pipeline

    out = Path(pipeline.output_dir)

    def announce(line: str) -> None:
        if again and line.startswith("stage 1/"):  # the checks passed: stages start
            print(f"pipeline:    {out}  (to continue after a stop: {again})")
        print(line)

    try:
        return run_pipeline(pipeline, overrides=overrides, announce=announce)
    except KeyboardInterrupt:
        if again and out.is_dir():
            print(f"to continue: {again}", file=sys.stderr)
        raise
    except (ValueError, OSError) as err:
        if again and out.is_dir():
            raise ValueError(f"{err}; to continue: {again}") from err
        raise


def _continue_command(args: argparse.Namespace, out: str) -> str:
    """The command that continues this run of the pipeline in ``out`` (``-o`` naming it)."""
    # the pipeline argument stays as given; its -o gives way to this one
    return shlex.join(["rlvr", "pipeline", args.pipeline, "-o", out, *args.overrides])


def _stage_lines(pipeline, configs: list) -> list[str]:
    """The dry run's line for each stage: name, kind, config, run directory and, for a model
    stage, the model it starts from (a later one's: the previous model stage's final model,
    which the run makes, so that the dry run reads nothing of it)."""
    lines, before = [], None
    name_w = max(len(s.name) for s in pipeline.stages)
    config_w = max(len(str(s.config)) for s in pipeline.stages)
    for stage, cfg in zip(pipeline.stages, configs, strict=True):
        where = Path(pipeline.output_dir) / stage.name if cfg is None else cfg.log.output_dir
        line = f"{stage.name:<{name_w}}  {stage.kind:<5}  {stage.config!s:<{config_w}}  {where}"
        if cfg is not None:
            start = cfg.model.name if before is None else f"the final model of stage {before!r}"
            line, before = f"{line}  from {start}", stage.name
        lines.append(line)
    return lines
