"""The ``rlvr`` command: a thin dispatcher to one module per sub-command.

Each sub-command lives in its own module with a ``main(argv: list[str]) -> int``; the
dispatcher imports it only when asked, so ``rlvr --help`` stays instant.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS: dict[str, tuple[str, str]] = {
    "train": (
        "rlvr.train.cli",
        "RL training (GRPO and the trust-region objectives); no config runs the demo",
    ),
    "sft": ("rlvr.train.sft_cli", "supervised fine-tuning on prompt/response JSONL"),
    "eval": ("rlvr.evaluation.cli", "sample, verify and report avg@k / pass@k"),
    "data": ("rlvr.data.cli", "write reasoning-gym task sets to JSONL"),
    "plot": ("rlvr.train.plots", "plot metrics.jsonl of one or more runs"),
}


def _usage() -> str:
    width = max(len(name) for name in COMMANDS)
    rows = "\n".join(f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items())
    return f"usage: rlvr <command> [options]\n\ncommands:\n{rows}\n\n'rlvr <command> --help' for options."


def main(argv: list[str] | None = None) -> int:
    """Run ``rlvr <command> ...``; returns the process exit status."""
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in {"-h", "--help", "help"}:
        print(_usage())
        return 0
    if args[0] in {"-V", "--version"}:
        from rlvr import __version__

        print(f"rlvr {__version__}")
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"rlvr: unknown command {name!r}; valid: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)
