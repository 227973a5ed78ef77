"""The ``rlvr`` command: a thin dispatcher to one module per sub-command.

Each sub-command lives in its own module of this package with a ``main(argv) -> int``;
the dispatcher imports it only when asked, so ``rlvr --help`` stays instant. Every user
error (missing file, malformed row, bad model path, bad value) prints one line
``rlvr: error: ...`` and exits with status 2; ``--debug`` (anywhere on the line, or
``RLVR_DEBUG=1``) shows the traceback instead.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import signal
import sys

COMMANDS: dict[str, tuple[str, str]] = {
    "train": (
        "rlvr.cli.train",
        "RL training (GRPO and the trust-region objectives); no config runs the demo",
    ),
    "sft": ("rlvr.cli.sft", "supervised fine-tuning on prompt/response JSONL"),
    "pipeline": ("rlvr.cli.pipeline", "SFT and RL stages in order, each from the last one's model"),
    "eval": ("rlvr.cli.eval", "sample, verify and report avg@k / pass@k / maj@k"),
    "data": (
        "rlvr.cli.data",
        "prompt sets: generate, show, dedup, decontaminate, filter by pass rate",
    ),
    "plot": ("rlvr.cli.plot", "plot metrics.jsonl of one or more runs"),
    "compare": (
        "rlvr.cli.compare",
        "run a study of paper recipes x seeds; report the papers' claims",
    ),
}


def _usage() -> str:
    width = max(len(name) for name in COMMANDS)
    rows = "\n".join(f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items())
    return (
        f"usage: rlvr <command> [options] [--debug]\n       rlvr --version\n\n"
        f"commands:\n{rows}\n\n"
        "Start with 'rlvr train': the demo, GRPO on a tiny model (about a minute; 5 the first\n"
        "time, when its model is built). 'rlvr <command> --help' for options; --debug shows\n"
        "tracebacks."
    )


def main(argv: list[str] | None = None) -> int:
    """Run ``rlvr <command> ...``; returns the process exit status.

    With no ``argv`` (the process's own command line: the ``rlvr`` script, ``python -m
    rlvr``) a command stopped by Ctrl-C ends the process by SIGINT, as Python does for an
    uncaught ``KeyboardInterrupt``: a shell script that ran it then stops too, where an exit
    status of 130 would let it go on to its next line.
    """
    if argv is None:  # before any command's imports register theirs: it runs after them
        atexit.register(_exit_by_sigint)
    status = _run(argv)
    if argv is None and status == 128 + signal.SIGINT:
        _end_by_sigint()
    return status


_ENDING_BY_SIGINT: list[bool] = []
"""Holds ``True`` once the command has ended by Ctrl-C (:func:`_end_by_sigint`)."""


def _exit_by_sigint() -> None:
    """The last exit function: when the command ended by Ctrl-C, flush the output and kill the
    process with SIGINT. The interpreter would do so itself after finalising, but CPython 3.11
    forgets it when an exit function evaluates a string (``eval`` resets its flag): torch's
    ``dump_compile_times``, registered once ``torch._dynamo`` is imported (``rlvr sft``
    imports it), builds ``namedtuple`` s as it imports ``tabulate``, and the process then
    exited with status 1."""
    if not _ENDING_BY_SIGINT:
        return
    if "logging" in sys.modules:  # its own exit function, registered earlier, would run after
        sys.modules["logging"].shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)


def _end_by_sigint() -> None:
    """Raise ``KeyboardInterrupt`` out of the process, printing nothing more: the interpreter
    finalises, then kills itself with SIGINT (Python >= 3.8; :func:`_exit_by_sigint` makes
    sure it does)."""
    _ENDING_BY_SIGINT.append(True)
    hook = sys.excepthook

    def quiet(kind, value, traceback) -> None:
        if not issubclass(kind, KeyboardInterrupt):
            hook(kind, value, traceback)

    sys.excepthook = quiet
    raise KeyboardInterrupt


def _run(argv: list[str] | None) -> int:
    """The command's exit status."""
    args = sys.argv[1:] if argv is None else list(argv)
    words = [a for a in args if a != "--debug"]
    if not words or words[0] in {"-h", "--help", "help"}:
        print(_usage())
        return 0
    if words[0] in {"-V", "--version"}:
        from rlvr import __version__

        print(f"rlvr {__version__}")
        return 0
    name = words[0]
    if name not in COMMANDS:
        print(
            f"rlvr: error: unknown command {name!r}; valid: {', '.join(COMMANDS)}", file=sys.stderr
        )
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    rest = list(args)
    rest.remove(name)
    return int(module.main(rest) or 0)
