"""What the sub-commands share: user errors as one line, warnings as one line, run arguments."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import math
import os
import signal
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from rlvr.atomic import why_not_creatable

USER_ERRORS = (ValueError, OSError)
"""Exceptions that report a user's mistake (bad value, missing or unreadable file)."""


def command(body: Callable[[list[str]], int | None]) -> Callable[[list[str] | None], int]:
    """Wrap a sub-command's ``body(argv)``: user errors print ``rlvr: error: ...`` and return 2.

    ``--debug`` anywhere in ``argv`` (or ``RLVR_DEBUG=1``) lets the exception through with its
    traceback. Ctrl-C returns 130 with one line (a run stopped by SIGTERM 143); a reader that closed the pipe
    (``rlvr data tasks | head``) ends the command quietly with 141, as SIGPIPE would.
    """

    @functools.wraps(body)
    def main(argv: list[str] | None = None) -> int:
        args = sys.argv[1:] if argv is None else list(argv)
        debug = "--debug" in args or os.environ.get("RLVR_DEBUG", "") not in ("", "0")
        args = [a for a in args if a != "--debug"]
        try:
            with plain_warnings():
                return int(body(args) or 0)
        except BrokenPipeError:
            return _closed_pipe()
        except USER_ERRORS as err:
            if debug:
                raise
            print(f"rlvr: error: {one_line(err)}", file=sys.stderr)
            return 2
        except KeyboardInterrupt as err:
            if debug:
                raise
            print("rlvr: interrupted", file=sys.stderr)
            return 128 + getattr(err, "signum", signal.SIGINT)  # a run stopped by SIGTERM: 143

    return main


def _closed_pipe() -> int:
    """Stdout's reader went away: point stdout at the null device so the interpreter's
    final flush does not fail again, and return SIGPIPE's shell status."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + 13


def one_line(err: BaseException) -> str:
    """The error's message on one line."""
    text = str(err) or type(err).__name__
    if isinstance(err, OSError) and err.filename is not None and str(err.filename) not in text:
        text = f"{err.filename}: {text}"
    return " | ".join(part.strip() for part in text.splitlines() if part.strip())


@contextlib.contextmanager
def plain_warnings():
    """Within the block, warnings print as one ``warning: ...`` line each (no source line).

    A ``SyntaxWarning`` is dropped: Python raises it while compiling a module's source on its
    first import (a dependency installed without byte-code, say), where it speaks of code the
    user cannot change, and as one bare line it would read as rlvr's own warning.
    """
    original = warnings.formatwarning
    warnings.formatwarning = lambda message, category, *args, **kwargs: f"warning: {message}\n"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            yield
    finally:
        warnings.formatwarning = original


class RunArgs(NamedTuple):
    """A run's configuration and whether to resume it."""

    config: Any
    """The ``TrainConfig`` / ``SFTConfig``."""
    resume: bool
    """``--resume`` was given."""
    dry_run: bool
    """``--dry-run`` was given: check and print the configuration, run nothing."""
    show_prompts: int | None = None
    """``--show-prompts N``: print the first ``N`` training (and held-out) prompts as the model
    gets them."""


DRY_RUN_HELP = "check the configuration (keys, values, files it names) and print it; run nothing"


def dry_run(config: Any, *, resume: bool = False) -> int:
    """``--dry-run``: the checks a run makes before loading anything (the run directory too;
    a device missing here is only noted), then those of
    :func:`~rlvr.train.dry_run.dry_run_checks` (the local data files read, the run's warnings,
    a ``--dry-run: ...`` line for each thing not checked), then the resolved configuration
    as YAML."""
    from rlvr.train.dry_run import dry_run_checks
    from rlvr.train.overrides import dump_yaml
    from rlvr.train.preflight import preflight
    from rlvr.train.run_dir import expand_output_dir, locate_run_dir

    preflight(config, device=False)
    locate_run_dir(expand_output_dir(config, resume=resume), resume=resume)
    dry_run_checks(config, lambda line: print(f"--dry-run: {line}", file=sys.stderr))
    print(dump_yaml(config), end="")
    return 0


def note_device(name: str, key: str = "model.device") -> None:
    """Say when the device is missing here: not an error, the dry run may be for another machine."""
    from rlvr.train.dry_run import device_note

    if line := device_note(name, key):
        print(f"--dry-run: {line}", file=sys.stderr)


def _config_help(cls, argv: list[str]) -> str:
    """``--config``'s help: the embedded configs of ``cls``, read only when help is asked for."""
    from rlvr.train.overrides import configs_of

    if not {"-h", "--help"} & set(argv):
        return "YAML file or embedded config"
    return f"YAML file or embedded config ({', '.join(configs_of(cls))})"


def _config_for_help(cls, argv: list[str], default_config: str | None) -> tuple[Any, str]:
    """The configuration ``argv`` would run (``--config`` or the default, and the overrides)
    and how it was named, for ``--help``; ``(None, why)`` when what the command line names
    does not load (``(None, "")`` for a command with no default and nothing named)."""
    from rlvr.train.overrides import load_config

    parser = argparse.ArgumentParser(add_help=False)  # as the real parser reads these two
    parser.add_argument("--config")
    parser.add_argument("--resume", nargs="?", const=True)
    known, rest = parser.parse_known_args(argv)
    given = [a for a in rest if "=" in a and not a.startswith("-")]
    try:
        source, overrides, _ = _run_source(known.config, known.resume, given, cls, default_config)
        config = load_config(cls, source, overrides)
    except Exception as err:  # noqa: BLE001 - --help still lists the keys with the class defaults
        named = known.config or known.resume or given or default_config
        return None, one_line(err) if named else ""
    named = f"--config {source}" if source else "the defaults"
    return config, named + (" + " + " ".join(given) if given else "")


def _run_source(
    config: str | None,
    resume: str | bool | None,
    given: list[str],
    cls,
    default_config: str | None,
) -> tuple[str | None, list[str], bool]:
    """``(config source, overrides, resuming)`` of ``--config``, ``--resume [DIR]`` and the
    ``key=value`` overrides ``given``: ``--resume DIR`` reads the run's saved configuration
    and writes into DIR, as does a ``--resume`` with no DIR nor ``--config`` of the run it
    continues (:func:`_run_continued`); ``--resume steps=200`` is an override, not a directory."""
    overrides = list(given)
    if isinstance(resume, str) and "=" in resume and not Path(resume).exists():
        overrides.insert(0, resume)
        resume = True
    warn_repeated_keys(overrides)  # the command line's own, before --resume DIR adds its own
    if resume is True and config is None:
        resume = _run_continued(overrides, cls, default_config) or True
    if isinstance(resume, str):
        config = config or _saved_config(resume, cls)
        overrides.append(f"log.output_dir={resume}")
    named = any(o.startswith("log.output_dir=") for o in overrides)
    if resume is True and not (config or default_config or named):  # rlvr sft: no run named
        raise ValueError(
            "--resume needs the run directory (--resume runs/sft-20261128-101500), or --config "
            "with the log.output_dir the run was started with"
        )
    return config or default_config, overrides, resume is not None


def warn_repeated_keys(overrides: list[str]) -> None:
    """Warn, in one line a key, of a ``key=value`` given more than once on one command line,
    naming the value kept (the last: overrides are applied in order). Only for a command
    line: a pipeline stage or a study run appends overrides to its config on purpose."""
    given: dict[str, list[str]] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if sep and key.strip():
            given.setdefault(key.strip(), []).append(value)
    for key, values in given.items():
        if len(values) > 1:
            times = "twice" if len(values) == 2 else f"{len(values)} times"
            warnings.warn(
                f"{key} is given {times} on the command line ({', then '.join(values)}); the "
                f"last is kept: {key}={values[-1]}",
                stacklevel=2,
            )


def _run_continued(overrides: list[str], cls, default_config: str | None) -> str | None:
    """The run a ``--resume`` with no DIR nor ``--config`` continues, when it has a saved
    ``config.yaml``: the ``log.output_dir`` of ``overrides``, else the default config's (one
    with ``{time}``: the newest run it names); ``None`` when there is none yet."""
    from rlvr.train.overrides import load_config
    from rlvr.train.run_dir import CONFIG_FILE, newest_run

    named = [o.split("=", 1)[1] for o in overrides if o.startswith("log.output_dir=")]
    if named:
        out = named[-1]
    elif default_config is not None:
        out = load_config(cls, default_config).log.output_dir
    else:
        return None
    run = newest_run(out) if "{time}" in out else out
    return run if run and (Path(run) / CONFIG_FILE).is_file() else None


def _refuse_option_style_keys(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """``--steps 3`` (a key written as an option): the one-line error shows it as ``steps=3``."""
    known = {s for action in parser._actions for s in action.option_strings}
    for i, arg in enumerate(argv):
        name = arg.split("=", 1)[0]
        abbreviated = any(option.startswith(name) for option in known)  # argparse takes those
        if name.startswith("--") and not abbreviated and not {"-h", "--help"} & set(argv):
            value = arg.split("=", 1)[1] if "=" in arg else (argv[i + 1 : i + 2] or ["VALUE"])[0]
            parser.error(
                f"unrecognized option {name}; configuration keys are key=value: {name[2:]}={value}"
            )


def parse_run_args(
    parser: argparse.ArgumentParser,
    cls,
    argv: list[str],
    *,
    default_config: str | None,
    example: str = "objective.name=abc_grpo rollout.group_size=8",
    show_prompts: str = "",
) -> RunArgs:
    """The configuration from ``--config``, ``--resume [DIR]`` and ``key=value`` overrides.

    ``example`` shows overrides of ``cls`` in ``--help``; ``show_prompts``: what
    ``--show-prompts N`` prints, when the command takes it.
    """
    from rlvr.train.overrides import load_config, read_yaml

    if {"-h", "--help"} & set(argv):  # the keys are read from the source only when asked for
        from rlvr.train.config_keys import keys_help

        config, source = _config_for_help(cls, argv, default_config)
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        keys = keys_help(cls, config=config, source=source) if config else keys_help(cls)
        why = f"the configuration of this command line does not load: {source}"
        note = textwrap.fill(why, 100, subsequent_indent="  ") if config is None and source else ""
        parser.epilog = "\n\n".join(filter(None, (parser.epilog, keys, note)))
    parser.add_argument("--config", help=_config_help(cls, argv))
    parser.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=None,
        metavar="DIR",
        help="continue from the latest checkpoint (of DIR, or of log.output_dir)",
    )
    parser.add_argument("--dry-run", action="store_true", help=DRY_RUN_HELP)
    if show_prompts:
        parser.add_argument(
            "--show-prompts",
            type=positive,
            metavar="N",
            help=f"print the first N {show_prompts} of data.train (then data.eval) exactly as the "
            "model gets them, tokenised and decoded; loads the tokenizer, not the weights, and "
            "starts no run (a preset not built yet is built first)",
        )
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help=f"e.g. {example}",
    )
    _refuse_option_style_keys(parser, argv)
    args = parser.parse_intermixed_args(argv)  # overrides may sit on both sides of an option
    source, overrides, resume = _run_source(
        args.config, args.resume, args.overrides, cls, default_config
    )
    if source is not None:
        read_yaml(source)  # a clear error for a missing file before anything else
    shown = getattr(args, "show_prompts", None)
    return RunArgs(load_config(cls, source, overrides), resume, args.dry_run, shown)


def print_tokens(tokenizer, head: str, ids: list[int]) -> None:
    """``--show-prompts``' block: ``=== head ===``, then the text decoded from ``ids`` exactly,
    special tokens included."""
    text = tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    print(f"=== {head} ===")
    sys.stdout.write(text + "\n")


def print_prompt(tokenizer, label: str, ids: list[int], example_id: str, reference) -> None:
    """One prompt as ``--show-prompts`` prints it: :func:`print_tokens` with ``label``, the id,
    token count and reference in the head: of a reasoning-gym entry (the whole entry is the
    verifier's reference) its answer, which the entry's first 60 characters do not reach. A
    longer reference shows its start and its end, where a worked solution's answer (its
    ``\\boxed{}``) is."""
    if isinstance(reference, dict) and "answer" in reference:
        reference = reference["answer"]
    shown = repr(reference)
    shown = shown if len(shown) <= 60 else shown[:28] + "..." + shown[-29:]
    print_tokens(tokenizer, f"{label} (id {example_id}, {len(ids)} tokens, reference {shown})", ids)


@contextlib.contextmanager
def progress_bar(title: str, unit: str = "prompts") -> Iterator[Callable[[int, int], None]]:
    """Progress over prompts (``unit``) on stderr; yields ``progress(done, total)``. On a terminal a
    ``rich`` bar that starts at the first call (when sampling starts, so an input refused
    before then prints only its error); elsewhere (a log, CI) a plain line at each tenth."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from rlvr.evaluation.harness import progress_lines

    console = Console(file=sys.stderr)
    if not console.is_terminal:
        yield progress_lines(lambda line: print(line, file=sys.stderr, flush=True), title, unit)
        return
    columns = ("{task.description}", BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    bar = Progress(*columns, console=console)
    tasks = []

    def progress(done: int, total: int) -> None:
        if not tasks:
            bar.start()
            tasks.append(bar.add_task(title, total=total))
        bar.update(tasks[0], completed=done, total=total)

    try:
        yield progress
    finally:
        if tasks:
            bar.stop()


def key_values(pairs: list[str], flag: str) -> dict[str, Any]:
    """``["key=value", ...]`` given as ``flag`` -> dict, each value read as YAML (numbers,
    booleans, lists, ``null``); one line naming a pair that is not ``key=value`` or a key
    given twice."""
    import yaml

    found: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{flag} expects key=value, got {pair!r}")
        if key.strip() in found:  # which of the two was meant is not for this to guess
            raise ValueError(f"{flag} {key.strip()} is given twice; give it once")
        try:
            found[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise ValueError(f"{flag} {pair!r}: value is not valid YAML: {err}") from None
    return found


def check_folder(path: str | Path, flag: str = "") -> None:
    """Refuse, before any work, a folder the command will write into that cannot be one
    (:func:`rlvr.atomic.why_not_creatable`). ``flag`` (``--out``) names the option."""
    named = f"{flag} {path}" if flag else str(path)
    if problem := why_not_creatable(Path(path)):
        raise ValueError(f"{named}: {problem}")


def seconds(text: str) -> float:
    """An argparse type: a number of seconds > 0 (``nan`` is not one)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


def positive(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def seed(text: str) -> int:
    """An argparse type: a seed, a whole number from 0 to 2**32 - 1 (:mod:`rlvr.seeds`)."""
    from rlvr.seeds import seed_problem

    try:
        value: int | str = int(text)
    except ValueError:
        value = text
    if (problem := seed_problem(value)) is not None:
        raise argparse.ArgumentTypeError(problem.replace("must be", "expected", 1))
    return int(value)


def _saved_config(run_dir: str, cls) -> str:
    """The ``config.yaml`` of the run ``--resume`` names; a checkpoint directory, or a run of
    the other command (``rlvr sft`` / ``rlvr train``), is refused naming what to resume."""
    from rlvr.train.checkpoint import STATE_FILE
    from rlvr.train.config import SFTConfig, TrainConfig
    from rlvr.train.overrides import read_yaml

    path = Path(run_dir)
    if (path / STATE_FILE).is_file():
        run = path.parent.parent
        raise ValueError(
            f"--resume {run_dir}: a checkpoint of the run {run}; resume the run: --resume {run}"
        )
    if not path.is_dir():  # a mistyped run: --config would start a new run there
        raise ValueError(f"--resume {run_dir}: no such directory")
    saved = path / "config.yaml"
    if not saved.is_file():
        raise ValueError(f"--resume {run_dir}: no config.yaml there (pass --config as well)")
    keys = set(read_yaml(str(saved))) - {f.name for f in dataclasses.fields(cls)}
    for other, name in ((TrainConfig, "rlvr train"), (SFTConfig, "rlvr sft")):
        if keys and keys <= {f.name for f in dataclasses.fields(other)}:
            raise ValueError(
                f"--resume {run_dir}: is an {name} run: resume it with {name} --resume {run_dir}"
            )
    return str(saved)
