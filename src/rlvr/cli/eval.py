"""``rlvr eval``: sample, verify, print avg@k / pass@k, and write JSON.

::

    rlvr eval --model tiny --data src/rlvr/assets/math-mini.jsonl -n 8 -k 1 4 8
    rlvr eval --model HuggingFaceTB/SmolLM2-135M-Instruct --data math500 --data aime2024 \\
        -n 4 --temperature 0.6 --max-tokens 1024 --output runs/eval/smollm2.json
    rlvr eval --model ./ckpt --data heldout.jsonl --verifier reasoning_gym --wrong -1
    rlvr eval --model tiny --data math.jsonl --data gym.jsonl::reasoning_gym --verifier math

The JSON holds the metrics, the per-dataset metrics, the configuration, and every
problem's completions, scores and verifier status.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import shlex
import sys
import time
import warnings
from pathlib import Path

from rlvr.atomic import write_json
from rlvr.cli.common import DRY_RUN_HELP, command, note_device, positive, print_prompt
from rlvr.data.fields import DATASETS, FIELD_MAPS, FieldMap
from rlvr.evaluation.harness import EvalConfig, EvalReport
from rlvr.evaluation.partial import PartialSamples, partial_path
from rlvr.generation import SamplingConfig
from rlvr.rewards.scoring import ScoringConfig


def _data_args(p: argparse.ArgumentParser) -> None:
    sets = ", ".join(DATASETS)
    p.add_argument("--model", required=True, help="preset name, local directory or hub name")
    p.add_argument(
        "--data",
        action="append",
        required=True,
        metavar="SOURCE[::FIELDS]",
        help=f"prompt set, repeatable: {sets}, a .jsonl/.json/.parquet file, a directory or a hub name",
    )
    p.add_argument("--fields", help=f"field mapping: {', '.join(sorted(FIELD_MAPS))}")
    p.add_argument(
        "--prompt-field", help="a file's prompt field, instead of --fields (default prompt)"
    )
    p.add_argument(
        "--answer-field", help="a file's answer field, instead of --fields (default answer)"
    )
    p.add_argument(
        "--split",
        help="split for datasets sources (default: the named set's, else train; a local folder "
        "of several splits needs one)",
    )
    p.add_argument("--template", help="prompt template with {prompt}")
    p.add_argument("--system-prompt", help="system message before every prompt")
    p.add_argument("--limit", type=int, help="first LIMIT problems of each set")


def _reward_args(p: argparse.ArgumentParser) -> None:
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
        "--timeout", type=float, default=10.0, help="verifier limit per completion, s (default 10)"
    )
    p.add_argument(
        "--workers", type=int, default=1, help="verifier worker processes (default 1; 0: inline)"
    )


def _sampling_args(p: argparse.ArgumentParser, *, ks: bool = True) -> None:
    """Sampling flags; ``ks``: with ``-k`` (the k of avg@k / pass@k)."""
    p.add_argument("-n", type=int, default=4, help="completions per problem (default 4)")
    if ks:
        p.add_argument(
            "-k", type=int, nargs="+", help="k values for avg@k / pass@k (default: 1 and n)"
        )
    p.add_argument("--temperature", type=float, default=0.6, help="default 0.6; 0 = greedy")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus mass (default 1.0)")
    p.add_argument("--max-tokens", type=int, default=256, help="max new tokens (default 256)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.add_argument(
        "--batch-size", type=int, default=8, help="problems per generate call (default 8)"
    )
    p.add_argument("--dtype", default="float32", help="float32, bfloat16 or float16")
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlvr eval", description="Sample, verify, report avg@k / pass@k."
    )
    _data_args(p)
    _reward_args(p)
    p.set_defaults(verifier=None)  # main() takes math, warning when the run trained with another
    _sampling_args(p)
    p.set_defaults(**dict.fromkeys(_RUN_SAMPLING))  # main() takes the run's, else the defaults
    p.add_argument("--output", help="JSON file (default runs/eval/<model>-<time>.json)")
    p.add_argument(
        "--no-completions", action="store_true", help="leave completion texts out of the JSON"
    )
    p.add_argument("--dry-run", action="store_true", help=DRY_RUN_HELP)
    p.add_argument(
        "--show-prompts",
        type=positive,
        metavar="N",
        help="print the first N prompts of each --data exactly as the model gets them (chat "
        "template, --system-prompt, --template, tokenised and decoded); loads the tokenizer, "
        "not the weights, and samples nothing",
    )
    return p


def _config(args: argparse.Namespace) -> EvalConfig:
    wrong = [k for k in args.k or [] if not 1 <= k <= args.n]
    if wrong and args.n >= 1:  # EvalConfig would name ks=(...), not the flags
        raise ValueError(f"-k {wrong[0]}: k must be between 1 and -n ({args.n})")
    if args.template is not None and "{prompt}" not in args.template:
        raise ValueError(f"--template must contain '{{prompt}}', got {args.template!r}")
    sampling = SamplingConfig(
        max_new_tokens=args.max_tokens, temperature=args.temperature, top_p=args.top_p
    )
    return EvalConfig(
        n=args.n,
        ks=tuple(sorted(set(args.k or [1, args.n]))),
        sampling=sampling,
        batch_size=args.batch_size,
        seed=args.seed,
        system_prompt=args.system_prompt,
        scoring=ScoringConfig(timeout_s=args.timeout, workers=args.workers),
        keep_completions=not args.no_completions,
    )


def _reward_options(args: argparse.Namespace) -> dict[str, object]:
    """``correct`` / ``wrong`` / ``extract`` options, passed only when given or not the defaults."""
    if args.correct <= args.wrong:
        raise ValueError(
            f"--correct ({args.correct}) must exceed --wrong ({args.wrong}); otherwise every "
            "wrong completion counts as correct"
        )
    options = {"correct": args.correct} if args.correct != 1.0 else {}
    options |= {"extract": args.extract} if args.extract else {}
    return options | ({"wrong": args.wrong} if args.wrong != 0.0 else {})


def _load(args: argparse.Namespace) -> list:
    """Examples of every ``--data SOURCE[::FIELDS]`` (a per-source mapping beats ``--fields``).

    Sources whose default names coincide (two ``test.jsonl``) are labelled by the ``--data``
    value itself, so each keeps its own column and problem ids.
    """
    _check_sources(args.data)
    loaded = {item: _load_one(args, item) for item in args.data}
    names = [part[0].dataset for part in loaded.values()]
    return [
        example
        for item, part in loaded.items()
        for example in (
            _load_one(args, item, name=item) if names.count(part[0].dataset) > 1 else part
        )
    ]


def _check_sources(data: list[str]) -> None:
    """Refuse a training config's generated source (``reasoning_gym:<task>``), which would be
    looked up on the hub, and a source given twice (its problems would be evaluated twice),
    also when one local file is spelt two ways (``test.jsonl``, ``./test.jsonl``)."""
    for item in data:
        source = item.partition("::")[0]
        if source.startswith(("reasoning_gym:", "code_tasks:")) and not Path(source).exists():
            task = source.removeprefix("reasoning_gym:")
            code = source.startswith("code_tasks:")
            use = "heldout.jsonl::code_tasks --verifier code" if code else "heldout.jsonl"
            raise ValueError(
                f"--data {item}: a generated set is a training source; write it as a file "
                f"(rlvr data gen {task} --size 200 -o heldout.jsonl) and give the file with its "
                f"verifier (--data {use}{'' if code else ' --verifier reasoning_gym'})"
            )
    keys = [_source_key(item) for item in data]
    repeated = [item for item, key in zip(data, keys, strict=True) if keys.count(key) > 1]
    if repeated:
        raise ValueError(f"--data {repeated[0]} is given twice")


def _source_key(item: str) -> str:
    """``SOURCE[::FIELDS]`` with a local source as its resolved path."""
    source, sep, fields = item.partition("::")
    path = Path(source).expanduser()
    return f"{path.resolve() if path.exists() else source}{sep}{fields}"


def _load_one(args: argparse.Namespace, item: str, name: str | None = None) -> list:
    """The examples of one ``--data SOURCE[::FIELDS]`` (labelled ``name`` when given)."""
    from rlvr.data.loading import MissingField, MissingSplit, NoRows, folder_splits, load_examples

    default = _named_fields(args) or _fields(args)
    source, _, own = item.partition("::")
    fields = own or (None if source in DATASETS and args.fields is None else default)
    splits = folder_splits(source) if args.split is None else []
    if len(splits) > 1:  # without --split its train split would be evaluated
        raise ValueError(f"{source}: holds the splits {', '.join(splits)}; name one with --split")
    try:
        return load_examples(
            source,
            fields=fields,
            split=args.split,
            template=args.template,
            limit=args.limit,
            name=name,
        )
    except MissingSplit as err:
        raise MissingSplit(f"{err}; name one with --split") from None
    except NoRows as err:
        raise NoRows(f"--data {err}") from None
    except MissingField as err:
        if fields is not None and not isinstance(fields, FieldMap):
            raise
        raise MissingField(
            f"{err}; name the file's fields with --prompt-field / --answer-field "
            "(or a named mapping with --fields)"
        ) from None


def _fields(args: argparse.Namespace) -> str | None:
    """The named mapping of sources without their own: ``--fields``, else ``reasoning_gym``
    for a reasoning-gym verifier unless ``--prompt-field`` / ``--answer-field`` name fields."""
    named = args.prompt_field is not None or args.answer_field is not None
    if args.fields is None and not named and args.verifier.startswith("reasoning_gym"):
        return "reasoning_gym"
    return args.fields


def _named_fields(args: argparse.Namespace) -> FieldMap | None:
    """The mapping ``--prompt-field`` / ``--answer-field`` name (``None``: neither given)."""
    if args.prompt_field is None and args.answer_field is None:
        return None
    if args.fields is not None:
        raise ValueError("give --fields or --prompt-field / --answer-field, not both")
    return FieldMap(prompt=args.prompt_field or "prompt", answer=args.answer_field or "answer")


def _dry_run(args: argparse.Namespace, config: EvalConfig) -> None:
    """Local ``--data`` files read (a missing file or field fails here), named and hub sets
    only named; the model is not loaded (a local directory must exist)."""
    from rlvr.data.loading import check_source, is_local

    _check_model(args.model)
    _check_sources(args.data)
    for item in args.data:
        source = item.partition("::")[0]
        check_source(source)
        local = is_local(source)
        print(f"{item}: {len(_load_one(args, item))} problems" if local else _not_read(item))
    print(f"{args.model}: not loaded; {_per_problem(config.n)}, k {list(config.ks)}")


def _per_problem(n: int) -> str:
    """``"4 samples per problem"``, ``"1 sample per problem"``."""
    return f"{n} sample{'' if n == 1 else 's'} per problem"


def _not_read(item: str) -> str:
    """What the dry run says of a named or hub set: not read, and whether the run can fetch it."""
    from huggingface_hub import constants

    offline = (
        "; HF_HUB_OFFLINE is set: the run needs a cached copy" if constants.HF_HUB_OFFLINE else ""
    )
    return f"{item}: not read (fetched by the run{offline})"


def print_table(report: EvalReport, title: str) -> None:
    """avg@k / pass@k (in %) per dataset as a rich table, one column per dataset (+ 'all')."""
    from rich.console import Console
    from rich.table import Table

    columns = [(n, m, report.per_dataset_stderr[n]) for n, m in report.per_dataset.items()]
    if len(columns) > 1:
        columns.append(("all", report.metrics, report.stderr))
    table = Table(caption="%, ± standard error over problems")
    table.add_column("metric")
    for name, _, _ in columns:
        table.add_column(name, justify="right")
    table.add_row("problems", *[f"{m['num_problems']:.0f}" for _, m, _ in columns])
    for key in (k for k in report.metrics if k.startswith(("avg@", "pass@"))):
        table.add_row(key, *[_with_stderr(m[key], se[key]) for _, m, se in columns])
    table.add_row("mean length", *[f"{m['response/length_mean']:.0f}" for _, m, _ in columns])
    table.add_row("verifier failures", *[f"{m['verifier/failures']:.0f}" for _, m, _ in columns])
    table.add_row("verifier timeouts", *[f"{m['verifier/timeouts']:.0f}" for _, m, _ in columns])
    console = Console()
    console.print(title, highlight=False, soft_wrap=True)  # a path in it stays whole
    console.print(table)


def _with_stderr(value: float, stderr: float) -> str:
    """``61.3 ± 2.1`` in %, or the value alone when one problem leaves no standard error; a
    tie rounds as its exact value would (pass@2 0.6874999999999999 shows 68.8, not 68.7).

    >>> _with_stderr(0.6874999999999999, float("nan")), _with_stderr(0.5, 0.0125)
    ('68.8', '50.0 ± 1.2')
    """
    text = f"{round(value * 100, 9):.1f}"
    return text if math.isnan(stderr) else f"{text} ± {round(stderr * 100, 9):.1f}"


def warn_unverified(report: EvalReport) -> None:
    """One warning line when the verifier failed or timed out on some completions (scored wrong)."""
    failed = int(report.metrics["verifier/failures"] + report.metrics["verifier/timeouts"])
    if not failed:
        return
    total = sum(p.n for p in report.problems)
    first = next((e for p in report.problems for e in p.errors if e), None)
    warnings.warn(
        f"{failed} of {total} completions could not be verified (verifier error or timeout) and "
        f"count as wrong; per completion: problems[].status and .errors in the JSON"
        + (f"; first error: {first}" if first else ""),
        stacklevel=2,
    )


def _loading(args: argparse.Namespace) -> dict[str, object]:
    """How the problems and the model were loaded (what ``config`` does not hold); ``fields``
    is the mapping used, ``reasoning_gym`` too when the verifier chose it."""
    keys = ("prompt_field", "answer_field", "split", "template", "limit", "dtype", "device")
    return {"fields": _fields(args)} | {key: getattr(args, key) for key in keys}


def _versions() -> dict[str, str]:
    """The versions that decide the numbers: rlvr, torch, transformers, and the scorers'
    math-verify and reasoning-gym (as installed: ``reasoning_gym.__version__`` can lag)."""
    import importlib.metadata

    import torch
    import transformers

    from rlvr import __version__

    scorers = {}
    for name in ("math-verify", "reasoning-gym"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            scorers[name] = importlib.metadata.version(name)
    return {
        "rlvr": __version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    } | scorers


def check_writable(path: Path) -> None:
    """Refuse an output file that could not be written, before the evaluation it would hold
    (nothing is created: :func:`write_json` makes the folder)."""
    from rlvr.train.run_dir import why_not_creatable

    if path.is_dir():
        raise ValueError(f"--output {path}: is a directory; name a JSON file")
    problem = why_not_creatable(path.parent)
    if problem:
        raise ValueError(f"--output {path}: {problem}")


def _check_model(name: str) -> None:
    """Refuse a local model path that holds no model (a run's ``load_model`` does too, once
    the data are read), as training's preflight does."""
    from rlvr.models import check_model_dir

    try:
        check_model_dir(name)
    except ValueError as err:
        raise ValueError(f"--model {err}") from None


def _check_placement(dtype: str, device: str, *, dry_run: bool) -> None:
    """A bad ``--dtype`` or a ``--device`` this machine lacks stops before any data are read;
    a dry run (perhaps for another machine) only notes the device."""
    from rlvr.models import torch_device, torch_dtype

    try:
        torch_dtype(dtype)
    except ValueError as err:
        raise ValueError(f"--dtype: {err}") from None
    if dry_run:
        note_device(device, key="--device")
        return
    try:
        torch_device(device)
    except ValueError as err:
        raise ValueError(f"--device: {err}") from None


def _run_of(model: str) -> Path | None:
    """The run directory whose checkpoint ``model`` is (``<run>/checkpoints/step_N``, or its
    ``adapter/``), else ``None``."""
    from rlvr.models.adapters import ADAPTER_CONFIG

    path = Path(model.rstrip("/"))
    if (path / ADAPTER_CONFIG).is_file():
        path = path.parent
    return path.parent.parent if path.parent.name == "checkpoints" else None


def _saved_config(model: str) -> tuple[Path, dict] | None:
    """The ``config.yaml`` of the run whose checkpoint ``model`` is, and its mapping; ``None``
    for a model that is no run's checkpoint, or a file that is not a run's configuration."""
    from rlvr.train.overrides import read_yaml

    run = _run_of(model)
    path = None if run is None else run / "config.yaml"
    if path is None or not path.is_file():
        return None
    try:
        return path, read_yaml(str(path))
    except ValueError:  # not a run's configuration
        return None


def _warn_other_verifier(model: str, verifier: str) -> None:
    """Warn when ``--model`` is a checkpoint of a run whose ``config.yaml`` trained with another
    verifier than ``verifier``, the default this evaluation scores with."""
    found = _saved_config(model)
    if found is None:
        return
    trained = (found[1].get("reward") or {}).get("verifier")
    if isinstance(trained, str) and trained != verifier:
        warnings.warn(
            f"--model is a checkpoint of {found[0].parent}, which trained with "
            f"reward.verifier={trained}; "
            f"this scores with --verifier {verifier} (the default): give --verifier {trained} "
            "to score as the run did",
            stacklevel=2,
        )


def _default_output(model: str) -> Path:
    from rlvr.models.adapters import ADAPTER_CONFIG

    path = Path(model.rstrip("/"))
    stem = path.name or "model"
    if (path / ADAPTER_CONFIG).is_file():  # a LoRA checkpoint's adapter/: named by its step too
        stem = f"{path.parent.name}-{stem}"
    run = _run_of(model)
    if run is not None:  # <run>/checkpoints/step_N: named by its run too
        stem = f"{run.name}-{stem}"
    return Path("runs") / "eval" / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}.json"


_RUN_SAMPLING = {
    "n": "-n",
    "k": "-k",
    "temperature": "--temperature",
    "top_p": "--top-p",
    "max_tokens": "--max-tokens",
    "seed": "--seed",
    "batch_size": "--batch-size",
}
"""The sampling options a run's checkpoint takes from its run's ``eval`` settings when not given."""


def _run_sampling(model: str) -> tuple[Path, dict[str, object]] | None:
    """The ``config.yaml`` of the run whose checkpoint ``model`` is, and the sampling options
    its held-out evaluation used (as :func:`rlvr.train.loop.evaluate` builds them); ``None``
    for a model that is no run's checkpoint, or a run without an ``eval`` section (SFT)."""
    from rlvr.train.config import EvalConfig as RunEval
    from rlvr.train.config import RolloutConfig
    from rlvr.train.overrides import from_dict

    found = _saved_config(model)
    if found is None or not isinstance(found[1].get("eval"), dict):
        return None
    path, saved = found
    try:
        ev = from_dict(RunEval, saved["eval"], "eval")
        rollout = from_dict(RolloutConfig, saved.get("rollout") or {}, "rollout")
    except (ValueError, TypeError):  # not a run's configuration: keep rlvr eval's defaults
        return None
    options = {
        "n": ev.n,
        "k": list(ev.ks),
        "temperature": ev.temperature,
        "top_p": ev.top_p,
        "max_tokens": ev.max_new_tokens or rollout.max_new_tokens,
        "seed": ev.seed,
        "batch_size": ev.batch_size,
    }
    return path, options


def _resolve_sampling(args: argparse.Namespace) -> None:
    """Fill the sampling options not given: from the run's ``eval`` settings when ``--model``
    is a run's checkpoint (one line says so), else rlvr eval's defaults."""
    defaults = argparse.ArgumentParser(add_help=False)
    _sampling_args(defaults)
    missing = [key for key in _RUN_SAMPLING if getattr(args, key) is None]
    found = _run_sampling(args.model) if missing else None
    taken = {} if found is None else found[1]
    if "n" not in missing:  # the run's k values belong to its n
        taken.pop("k", None)
    for key in missing:
        setattr(args, key, taken.get(key, defaults.get_default(key)))
    shown = [key for key in missing if key in taken]
    if found is None or not shown:
        return
    print(
        f"rlvr eval: sampling as the run evaluated ({found[0]}): "
        + ", ".join(_shown(key, taken[key]) for key in shown)
        + f"; give {', '.join(_RUN_SAMPLING[key] for key in shown)} to change"
    )


def _shown(key: str, value: object) -> str:
    """One taken option as the line shows it: ``T=1.0``, ``max tokens 64``, ``k 1 4``."""
    if key == "temperature":
        return f"T={value}"
    if key == "n":
        return f"n={value}"
    if key == "k":
        return "k " + " ".join(map(str, value))
    return f"{key.replace('_', ' ')} {value}"


@command
def main(argv: list[str]) -> int:
    """Run ``rlvr eval ...``; returns the exit status."""
    from rlvr.evaluation.harness import evaluate
    from rlvr.models import load_model
    from rlvr.rewards.registry import get_verifier

    args = _parser().parse_args(argv)
    _resolve_sampling(args)
    if args.verifier is None:  # the default: say so when the model's run trained with another
        args.verifier = "math"
        _warn_other_verifier(args.model, args.verifier)
    config = _config(args)
    options = _reward_options(args)
    verifier = get_verifier(args.verifier, **options)
    output = Path(args.output) if args.output else _default_output(args.model)
    check_writable(output)
    _check_placement(args.dtype, args.device, dry_run=args.dry_run)
    if args.dry_run:
        _dry_run(args, config)
        return 0
    if args.show_prompts:
        return _show_prompts(args, config)
    keep = PartialSamples(partial_path(output), _settings(args))
    keep.load()  # made with other settings, or damaged: one line before anything loads
    examples = _load(args)
    model, tokenizer = load_model(args.model, dtype=args.dtype, device=args.device)
    try:
        report = evaluate(model, tokenizer, examples, verifier, config, keep=keep)
    except KeyboardInterrupt:
        _say_how_to_continue(keep, output, len(examples), config.n)
        raise
    write_json(
        output,
        {
            "model": args.model,
            "data": args.data,
            "verifier": verifier.spec,
            "verifier_options": options,  # as given: a +format verifier's own hold its inner one
            "loading": _loading(args),
            "command": "rlvr eval " + shlex.join(argv),
            "versions": _versions(),
            **report.to_dict(),
        },
    )
    print_table(report, f"{args.model}: {_per_problem(config.n)}, T={config.sampling.temperature}")
    warn_unverified(report)
    keep.remove()
    print(f"wrote {output}")
    return 0


def _show_prompts(args: argparse.Namespace, config: EvalConfig) -> int:
    """``--show-prompts N``: the first N prompts of each ``--data`` source as sampling gets
    them (:func:`~rlvr.evaluation.harness.encode_prompts`), decoded from their token ids."""
    from rlvr.evaluation.harness import encode_prompts
    from rlvr.models import model_tokenizer_and_config

    tokenizer = model_tokenizer_and_config(args.model)[0]
    examples = _load(args)
    for dataset in dict.fromkeys(ex.dataset for ex in examples):
        own = [ex for ex in examples if ex.dataset == dataset]
        shown = own[: args.show_prompts]
        for i, (ex, ids) in enumerate(
            zip(shown, encode_prompts(tokenizer, shown, config), strict=True)
        ):
            label = f"{dataset} prompt {i + 1} of {len(own)}"
            print_prompt(tokenizer, label, ids, ex.id, ex.reference)
    return 0


_NOT_SAMPLING = (
    *("output", "no_completions", "k", "dry_run", "show_prompts"),
    *("verifier", "correct", "wrong", "extract", "timeout", "workers"),
)
"""Options the completions do not depend on: how they are scored and where the report goes."""


def _settings(args: argparse.Namespace) -> dict[str, object]:
    """What an evaluation's completions depend on (a kept partial evaluation continues only
    under the same): the model, data and sampling options, not how they are scored."""
    kept = {k: v for k, v in vars(args).items() if k not in _NOT_SAMPLING}
    return json.loads(json.dumps(kept, default=str))


def _say_how_to_continue(keep: PartialSamples, output: Path, problems: int, n: int) -> None:
    """After Ctrl-C: how far sampling came, and the option that continues it."""
    done = keep.kept // n
    print(
        f"interrupted after sampling {done} of {problems} problems: the same command with "
        f"--output {output} continues from there",
        file=sys.stderr,
    )
