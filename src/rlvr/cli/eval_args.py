"""``rlvr eval``'s command line: its arguments (shared by ``rlvr data filter``) and the checks
of their values that need no model."""

from __future__ import annotations

import argparse
import sys

from rlvr.cli.common import DRY_RUN_HELP, key_values, positive, seconds, seed
from rlvr.data.fields import DATASETS, FIELD_MAPS, FieldMap


def data_args(p: argparse.ArgumentParser) -> None:
    """The model and prompt-set arguments: ``--model``, ``--data`` and how a set is read."""
    sets = ", ".join(DATASETS)
    p.add_argument("--model", required=True, help="preset name, local directory or hub name")
    p.add_argument(
        "--data",
        action="append",
        metavar="SOURCE[::FIELDS]",
        help=f"prompt set, repeatable: {sets}, a .jsonl/.json/.parquet file, a directory or a hub "
        "name; required unless --model is a checkpoint of an rlvr train run, whose held-out set "
        "(data.eval) it then evaluates with the run's prompt options and verifier",
    )
    field_args(p, "a file's")
    p.add_argument(
        "--split",
        help="split for datasets sources (default: the named set's, else train; a local folder "
        "or hub dataset of several splits needs one)",
    )
    p.add_argument("--template", help="prompt template with {prompt}")
    p.add_argument("--system-prompt", help="system message before every prompt")
    p.add_argument("--limit", type=positive, help="first LIMIT problems of each set")


def field_args(p: argparse.ArgumentParser, whose: str) -> None:
    """``--fields`` (a named mapping) or ``--prompt-field`` / ``--answer-field`` of ``whose``
    rows (``rlvr data filter`` reads one file: "the file's")."""
    p.add_argument("--fields", help=f"field mapping: {', '.join(sorted(FIELD_MAPS))}")
    for field in ("prompt", "answer"):
        p.add_argument(
            f"--{field}-field",
            help=f"{whose} {field} field, instead of --fields (default {field})",
        )


def reward_args(p: argparse.ArgumentParser) -> None:
    """The verifier and scoring arguments (``rlvr data filter`` takes them too)."""
    p.add_argument(
        "--verifier",
        default="math",
        help="spec: math, math+format, reasoning_gym[:task], code, or module.name of your own",
    )
    p.add_argument(
        "--correct", type=float, default=1.0, help="score of a correct completion (default 1)"
    )
    p.add_argument(
        "--wrong", type=float, default=0.0, help="score of a wrong one (default 0; ETR: -1)"
    )
    p.add_argument(
        "--extract",
        choices=("strict", "flexible"),
        help="answer extraction of math / reasoning_gym (default strict; flexible: the last number)",
    )
    p.add_argument(
        "--timeout",
        type=seconds,
        default=10.0,
        help="verifier limit per completion, s (default 10)",
    )
    p.add_argument(
        "--workers", type=int, default=1, help="verifier worker processes (default 1; 0: inline)"
    )


def sampling_args(p: argparse.ArgumentParser, *, ks: bool = True) -> None:
    """Sampling flags; ``ks``: with ``-k`` (the k of avg@k / pass@k / maj@k)."""
    p.add_argument("-n", type=positive, default=4, help="completions per problem (default 4)")
    if ks:
        p.add_argument(
            "-k", type=int, nargs="+", help="k values for avg@k / pass@k / maj@k (default: 1 and n)"
        )
    p.add_argument("--temperature", type=float, default=0.6, help="default 0.6; 0 = greedy")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus mass (default 1.0)")
    p.add_argument("--max-tokens", type=positive, default=256, help="max new tokens (default 256)")
    p.add_argument("--seed", type=seed, default=0, help="sampling seed (default 0)")
    p.add_argument(
        "--batch-size", type=positive, default=8, help="problems per generate call (default 8)"
    )
    p.add_argument("--dtype", default="float32", help="float32, bfloat16 or float16")
    p.add_argument(
        "--device",
        default="auto",
        help="torch device: auto (default: the first CUDA GPU torch sees, else cpu), cpu, cuda:1, ...",
    )
    p.add_argument(
        "--sampler",
        default="lean",
        help="lean (default), hf, or vllm (needs vLLM: make setup-vllm, or rlvr[vllm] on a GPU "
        "machine)",
    )
    p.add_argument(
        "--sampler-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the sampler, repeatable (vllm: gpu_memory_utilization=0.9, "
        "max_model_len=4096, ...: docs/training.md)",
    )


def sampler_settings(args: argparse.Namespace, base: dict | None = None) -> dict[str, object]:
    """The options of ``--sampler``: ``base`` (a run's) with each ``--sampler-option`` laid
    over it, checked against the sampler (an unknown sampler or option, or a value of the
    wrong type, is one line before anything loads)."""
    from rlvr.generation.registry import named_options

    options = dict(base or {}) | key_values(args.sampler_option, "--sampler-option")
    named_options(args.sampler, options, ("--sampler", "--sampler-option"))
    return options


def check_sampler(name: str, *, dry_run: bool) -> None:
    """Refuse a sampler whose package is not installed, before any model loads; a dry run
    (perhaps for another machine) only notes it."""
    from rlvr.generation.registry import missing_package
    from rlvr.train.dry_run import sampler_note

    if dry_run:
        if line := sampler_note(name, f"--sampler {name}"):
            print(f"--dry-run: {line}", file=sys.stderr)
    elif missing := missing_package(name):
        raise ValueError(f"--sampler {name}: {missing}")


def eval_parser() -> argparse.ArgumentParser:
    """``rlvr eval``'s parser; the sampling options the run may give default to ``None``."""
    p = argparse.ArgumentParser(
        prog="rlvr eval", description="Sample, verify, report avg@k / pass@k / maj@k."
    )
    data_args(p)
    reward_args(p)
    # main() takes the run's without --data, else math (a warning when the run trained with
    # another), the scores 1 and 0 and a 10 s limit
    p.set_defaults(verifier=None, correct=None, wrong=None, timeout=None)
    sampling_args(p)
    p.set_defaults(**dict.fromkeys(RUN_SAMPLING))  # main() takes the run's, else the defaults
    p.add_argument("--output", help="JSON file (default runs/eval/<model>-<time>.json)")
    p.add_argument(
        "--no-completions", action="store_true", help="leave completion texts out of the JSON"
    )
    p.add_argument(
        "--against",
        metavar="BASE.json",
        help="an earlier rlvr eval report of the same problems and verifier (another model): "
        "print and record the paired differences of avg@k, pass@k and maj@k, with 95%% intervals "
        "over problems",
    )
    p.add_argument("--dry-run", action="store_true", help=DRY_RUN_HELP)
    p.add_argument(
        "--show-prompts",
        type=positive,
        metavar="N",
        help="print the first N prompts of each --data (or of the run's held-out set) exactly "
        "as the model gets them (chat template, --system-prompt, --template, tokenised and "
        "decoded); loads the tokenizer, not the weights, and samples nothing",
    )
    return p


def check_template(template: str | None) -> None:
    """Refuse a ``--template`` without ``{prompt}`` (every problem would read the same)."""
    if template is not None and "{prompt}" not in template:
        raise ValueError(f"--template must contain '{{prompt}}', got {template!r}")


def check_scores(correct: float, wrong: float) -> None:
    """Refuse a correct score not above the wrong one."""
    if correct <= wrong:
        raise ValueError(
            f"--correct ({correct}) must exceed --wrong ({wrong}); otherwise every "
            "wrong completion counts as correct"
        )


def reward_options(args: argparse.Namespace) -> dict[str, object]:
    """``correct`` / ``wrong`` / ``extract`` options, passed only when given or not the defaults."""
    check_scores(args.correct, args.wrong)
    options = {"correct": args.correct} if args.correct != 1.0 else {}
    options |= {"extract": args.extract} if args.extract else {}
    return options | ({"wrong": args.wrong} if args.wrong != 0.0 else {})


def field_mapping(args: argparse.Namespace) -> str | None:
    """The named mapping of sources without their own: ``--fields``, else ``reasoning_gym``
    for a reasoning-gym verifier unless ``--prompt-field`` / ``--answer-field`` name fields."""
    named = args.prompt_field is not None or args.answer_field is not None
    if args.fields is None and not named and args.verifier.startswith("reasoning_gym"):
        return "reasoning_gym"
    return args.fields


def named_fields(args: argparse.Namespace) -> FieldMap | None:
    """The mapping ``--prompt-field`` / ``--answer-field`` name (``None``: neither given)."""
    if args.prompt_field is None and args.answer_field is None:
        return None
    if args.fields is not None:
        raise ValueError("give --fields or --prompt-field / --answer-field, not both")
    return FieldMap(prompt=args.prompt_field or "prompt", answer=args.answer_field or "answer")


def not_read(item: str) -> str:
    """What the dry run says of a named or hub set (``SOURCE[::FIELDS]``): not read, and
    whether the evaluation can fetch it or, offline, has it cached."""
    from rlvr.train.dry_run import hub_note

    source = item.partition("::")[0]
    return f"{item}: not read ({hub_note(source, model=False, by='the evaluation')})"


RUN_SAMPLING = {
    "n": "-n",
    "k": "-k",
    "temperature": "--temperature",
    "top_p": "--top-p",
    "max_tokens": "--max-tokens",
    "seed": "--seed",
    "batch_size": "--batch-size",
    "dtype": "--dtype",
    "sampler": "--sampler",
}
"""The options (and their flags) a run's checkpoint takes from its run when not given: its
``eval`` sampling settings, a half-precision ``model.dtype`` and a ``rollout.sampler`` other
than ``lean`` (its evaluations sample with the run's sampler), with its options."""
