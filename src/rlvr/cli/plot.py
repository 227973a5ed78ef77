"""``rlvr plot``: PNG curves of one or more runs' ``metrics.jsonl``."""

from __future__ import annotations

import argparse
from pathlib import Path

from rlvr.cli.common import check_folder, command


@command
def main(argv: list[str]) -> int:
    """``rlvr plot RUN [RUN ...] [--out DIR]``."""
    from rlvr.train.plots import load_runs, plot_runs

    parser = argparse.ArgumentParser(
        prog="rlvr plot", description="Plot metrics.jsonl of one or more runs as PNG files."
    )
    parser.add_argument("runs", nargs="+", help="run directories or metrics.jsonl files")
    parser.add_argument(
        "--out",
        help="output directory (default: <run>/plots for one run; <first run>/plots/compare for "
        "several, beside the run's own plots)",
    )
    args = parser.parse_args(argv)
    runs = load_runs(args.runs)
    out = Path(args.out) if args.out else _default_out(args.runs)
    check_folder(out, "--out" if args.out else "")
    written = plot_runs(runs, out)
    if not written:
        raise ValueError(
            f"nothing to plot: {', '.join(args.runs)} log none of the plotted metrics "
            "(reward/mean, policy/entropy, eval/avg@k, sft/loss, ...: docs/metrics.md)"
        )
    for path in written:
        print(path)
    return 0


def _default_out(runs: list[str]) -> Path:
    """The run's own ``plots`` folder, or with several runs a ``compare`` folder inside the first
    one's (the trainer's plots of that run stay as they are)."""
    first = Path(runs[0])
    plots = (first if first.is_dir() else first.parent) / "plots"
    return plots / "compare" if len(runs) > 1 else plots
