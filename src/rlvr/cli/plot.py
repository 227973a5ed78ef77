"""``rlvr plot``: PNG curves of one or more runs' ``metrics.jsonl``."""

from __future__ import annotations

import argparse
from pathlib import Path

from rlvr.cli.common import command


@command
def main(argv: list[str]) -> int:
    """``rlvr plot RUN [RUN ...] [--out DIR]``."""
    from rlvr.train.plots import load_runs, plot_runs

    parser = argparse.ArgumentParser(
        prog="rlvr plot", description="Plot metrics.jsonl of one or more runs as PNG files."
    )
    parser.add_argument("runs", nargs="+", help="run directories or metrics.jsonl files")
    parser.add_argument("--out", help="output directory (default: <first run>/plots)")
    args = parser.parse_args(argv)
    runs = load_runs(args.runs)
    first = Path(args.runs[0])
    out = Path(args.out) if args.out else (first if first.is_dir() else first.parent) / "plots"
    if out.exists() and not out.is_dir():
        raise ValueError(f"{'--out ' if args.out else ''}{out} is a file, not a folder")
    written = plot_runs(runs, out)
    if not written:
        raise ValueError(
            f"nothing to plot: {', '.join(args.runs)} log none of the plotted metrics "
            "(reward/mean, policy/entropy, eval/avg@k, sft/loss, ...: docs/metrics.md)"
        )
    for path in written:
        print(path)
    return 0
