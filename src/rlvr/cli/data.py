"""``rlvr data``: generate, list, preview and clean prompt sets.

::

    rlvr data gen chain_sum --size 500 --seed 0 -o data/train.jsonl --set max_terms=3
    rlvr data gen chain_sum --size 100 --seed 1 -o data/test.jsonl --exclude data/train.jsonl
    rlvr data gen code_tasks:all --size 200 --seed 0 -o data/code.jsonl --set max_level=2
    rlvr data tasks
    rlvr data show data/test.jsonl --fields reasoning_gym --limit 2
    rlvr data dedup raw.jsonl -o unique.jsonl
    rlvr data decontaminate unique.jsonl --against math500 aime2024 test.jsonl -o clean.jsonl
    rlvr data filter code.jsonl --fields code_tasks --verifier code --model smollm2-135m \\
        -n 16 --keep "mean>0.5" --min-tests 16 -o code-kept.jsonl

Cleaning steps write the kept rows unchanged to ``-o`` and the dropped rows, each with why,
to ``<stem>.dropped.jsonl`` beside it (docs/data.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path

from rlvr.cli.common import command, key_values, progress_bar, seed
from rlvr.cli.eval_args import (
    check_sampler,
    field_args,
    named_fields,
    reward_args,
    reward_options,
    sampler_settings,
    sampling_args,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlvr data", description="Prompt-set utilities.")
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("gen", help="write a reasoning-gym or code task set to JSONL")
    gen.add_argument(
        "task",
        help="reasoning-gym task name (see 'rlvr data tasks') or code_tasks:<family|all>",
    )
    gen.add_argument("-o", "--output", required=True, help="JSONL file to write")
    gen.add_argument("--size", type=int, default=100, help="number of problems (default 100)")
    gen.add_argument("--seed", type=seed, default=0, help="generator seed (default 0)")
    gen.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="task config field"
    )
    gen.add_argument(
        "--exclude", action="append", default=[], metavar="FILE", help="skip questions in FILE"
    )
    sub.add_parser("tasks", help="list reasoning-gym tasks and code task families")
    show = sub.add_parser(
        "show",
        help="print the first examples of a prompt set as JSON, as loaded (the prompt a run "
        "feeds the model: rlvr train ... --show-prompts N)",
    )
    show.add_argument("source", help="named dataset, .jsonl/.parquet file, directory or hub name")
    field_args(show, "the file's")
    show.add_argument("--split", default=None, help="split for datasets sources")
    show.add_argument("--limit", type=int, default=3, help="examples to print (default 3)")
    _clean_parsers(sub)
    return parser


def _clean_parsers(sub) -> None:
    """``dedup`` and ``decontaminate``: a JSONL/Parquet file in, the kept rows out."""
    dedup = sub.add_parser(
        "dedup", help="drop prompts whose normalised text repeats an earlier one"
    )
    decon = sub.add_parser(
        "decontaminate", help="drop prompts sharing an n-gram with an evaluation set"
    )
    for p in (dedup, decon):
        p.add_argument("input", help="JSONL or Parquet file of prompts")
        p.add_argument("-o", "--output", required=True, help="file for the kept rows")
        p.add_argument(
            "--field",
            help="prompt field or field mapping (default: prompt, question, problem, text, messages)",
        )
    decon.add_argument(
        "--against",
        nargs="+",
        required=True,
        metavar="SET",
        help="named evaluation set (math500, ...), .jsonl/.parquet file (FILE::FIELD), "
        "reasoning_gym:<task> or code_tasks:<family>",
    )
    decon.add_argument(
        "--split",
        default="test",
        help="split of the sets that are dataset directories or hub names (default test)",
    )
    decon.add_argument("--ngram", type=int, default=9, help="n-gram length (default 9, Klear's)")
    decon.add_argument(
        "--common",
        type=int,
        default=0,
        metavar="K",
        help="ignore n-grams found in K or more evaluation problems (templates; default 0: none)",
    )
    _filter_parser(sub)


def _filter_parser(sub) -> None:
    """``filter``: sample and verify each prompt (as ``rlvr eval``), keep by a pass-rate rule."""

    p = sub.add_parser("filter", help="keep prompts whose measured pass rate meets a rule")
    p.add_argument("input", help="JSONL or Parquet file of prompts")
    p.add_argument("-o", "--output", required=True, help="file for the kept rows")
    p.add_argument("--model", required=True, help="preset name, local directory or hub name")
    p.add_argument(
        "--keep",
        required=True,
        help="rule on mean (pass rate), score or pass@k: 'mean>0.5' (Klear's), '0<mean<1'",
    )
    field_args(p, "the file's")
    p.add_argument(
        "--min-tests", type=int, default=0, help="drop code problems with fewer tests (Klear: 16)"
    )
    p.add_argument("--system-prompt", help="system message before every prompt")
    reward_args(p)
    sampling_args(p, ks=False)


def _gen(args: argparse.Namespace) -> None:
    from rlvr.data.code_tasks import code_task_rows, keys_in
    from rlvr.data.gym import gym_rows, questions_in, write_jsonl
    from rlvr.data.loading import JSON_SUFFIXES
    from rlvr.data.rowfiles import check_output_file

    kind, _, name = args.task.rpartition(":")
    if kind not in ("", "reasoning_gym", "code_tasks"):
        raise ValueError(
            f"task {args.task!r}: expected <task>, reasoning_gym:<task> or code_tasks:<family>"
        )
    output = check_output_file(
        args.output, JSON_SUFFIXES, "JSON lines", ".jsonl"
    ).resolve()  # before the rows are generated
    for path in args.exclude:
        if not Path(path).expanduser().is_file():
            what = "is a directory" if Path(path).expanduser().is_dir() else "no such file"
            raise ValueError(f"--exclude {path}: {what}; name a file rlvr data gen wrote")
        if Path(path).expanduser().resolve() == output:
            raise ValueError(
                f"-o {args.output}: it would overwrite --exclude {path}; name another output file"
            )
    if kind == "code_tasks":
        generate, exclude = code_task_rows, keys_in(args.exclude)
    else:
        generate, exclude = gym_rows, questions_in(args.exclude)
    rows = generate(
        name, size=args.size, seed=args.seed, config=key_values(args.set, "--set"), exclude=exclude
    )
    count = write_jsonl(rows, args.output)
    print(f"wrote {count} {args.task} problems (seed {args.seed}) to {args.output}")


def _show(args: argparse.Namespace) -> None:
    from dataclasses import asdict

    from rlvr.data.loading import load_examples

    fields = named_fields(args) or args.fields
    with _field_hint():
        examples = load_examples(args.source, fields=fields, split=args.split, limit=args.limit)
    for example in examples:
        print(json.dumps(asdict(example), ensure_ascii=False, default=_shown))


def _shown(value: object) -> object:
    """A value JSON has no type for, as the data steps write it (bytes as base64, timestamps
    as ISO 8601, :func:`~rlvr.data.rowfiles.json_value`), else as its text."""
    from rlvr.data.rowfiles import json_value

    try:
        return json_value(value)
    except TypeError:
        return str(value)


@command
def main(argv: list[str]) -> int:
    """Run ``rlvr data ...``; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.command == "gen":
        _gen(args)
    elif args.command == "tasks":
        from rlvr.data.code_tasks import FAMILIES
        from rlvr.rewards.reasoning_gym import task_names

        print("\n".join(task_names()))
        print("\n".join(f"code_tasks:{name}  (level {f.level})" for name, f in FAMILIES.items()))
    elif args.command == "show":
        _show(args)
    elif args.command == "filter":
        _filter(args)
    else:
        _clean(args)
    return 0


def _clean(args: argparse.Namespace) -> None:
    from rlvr.data.contamination import decontaminate_file
    from rlvr.data.dedup import dedup_file

    if args.command == "dedup":
        report = dedup_file(args.input, args.output, field=args.field)
    else:
        with _field_hint("--field (the input's) or SET::FIELD (an --against set's)"):
            report = decontaminate_file(
                args.input,
                args.output,
                args.against,
                n=args.ngram,
                common=args.common,
                field=args.field,
                split=args.split,
            )
    print(f"{args.command}: {report.summary()}; dropped rows in {report.dropped_file}")


def _filter(args: argparse.Namespace) -> None:
    from rlvr.evaluation.data_steps import FilterOptions, filter_step
    from rlvr.evaluation.filtering import passrates_file

    names = ("keep", "n", "fields", "prompt_field", "answer_field", "verifier", "min_tests")
    more = ("max_tokens", "temperature", "top_p", "batch_size", "seed", "system_prompt")
    last = ("timeout", "workers", "sampler")
    options = FilterOptions(
        **{name: getattr(args, name) for name in names + more + last},
        sampler_options=sampler_settings(args),
    )
    check_sampler(args.sampler, dry_run=False)
    verifier_options = reward_options(args)
    with progress_bar("filter") as progress, _field_hint():
        report = filter_step(
            options,
            args.input,
            args.output,
            args.model,
            dtype=args.dtype,
            device=args.device,
            verifier_options=verifier_options,
            progress=progress,
        )
    print(
        f"filter {args.keep!r}: {report.summary()}; dropped rows in {report.dropped_file}; "
        f"scores in {passrates_file(args.output)}"
    )


@contextlib.contextmanager
def _field_hint(flags: str = "--prompt-field / --answer-field (or a named mapping with --fields)"):
    """A row missing a mapped field, or a folder missing the split: the error also names the
    flags that name them (``flags``: the command's flags for fields)."""
    from rlvr.data.loading import MissingField, MissingSplit

    try:
        yield
    except MissingField as err:
        raise MissingField(f"{err}; name the file's fields with {flags}") from None
    except MissingSplit as err:
        raise MissingSplit(f"{err}; name one with --split") from None
