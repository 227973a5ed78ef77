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
import dataclasses
import json
import math
import shlex
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from rlvr.atomic import write_json
from rlvr.cli.common import DRY_RUN_HELP, command, note_device, positive, print_prompt
from rlvr.data.fields import DATASETS, FIELD_MAPS, FieldMap
from rlvr.evaluation.harness import EvalConfig, EvalReport
from rlvr.evaluation.partial import PartialSamples, partial_path
from rlvr.generation import SamplingConfig
from rlvr.rewards.scoring import ScoringConfig

if TYPE_CHECKING:
    from rlvr.rewards.verifier import Verifier
    from rlvr.train.config import DataConfig, RewardConfig, TrainConfig
    from rlvr.train.prompts import PromptSet


def _data_args(p: argparse.ArgumentParser) -> None:
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
    # main() takes the run's without --data, else math (a warning when the run trained with
    # another) and the scores 1 and 0
    p.set_defaults(verifier=None, correct=None, wrong=None)
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
    _check_template(args.template)
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


def _check_template(template: str | None) -> None:
    """Refuse a ``--template`` without ``{prompt}`` (every problem would read the same)."""
    if template is not None and "{prompt}" not in template:
        raise ValueError(f"--template must contain '{{prompt}}', got {template!r}")


def _check_scores(correct: float, wrong: float) -> None:
    """Refuse a correct score not above the wrong one."""
    if correct <= wrong:
        raise ValueError(
            f"--correct ({correct}) must exceed --wrong ({wrong}); otherwise every "
            "wrong completion counts as correct"
        )


def _reward_options(args: argparse.Namespace) -> dict[str, object]:
    """``correct`` / ``wrong`` / ``extract`` options, passed only when given or not the defaults."""
    _check_scores(args.correct, args.wrong)
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


def _dry_run(args: argparse.Namespace, config: EvalConfig, run: FromRun | None) -> None:
    """What would be evaluated: each ``--data`` source (:func:`_source_line`), or the run's
    held-out set (:func:`_run_dry_run`); the model is not loaded (a local directory must
    exist)."""
    _check_model(args.model)
    if run is not None:
        print(_run_dry_run(run))
    else:
        _check_sources(args.data)
        for item in args.data:
            print(_source_line(args, item))
    print(f"{args.model}: not loaded; {_per_problem(config.n)}, k {list(config.ks)}")


def _source_line(args: argparse.Namespace, item: str) -> str:
    """The dry run's line of one ``--data`` source: a local one read (a missing file or field
    fails here) with its count of problems, a named or hub set only named."""
    from rlvr.data.loading import check_source, is_local

    source = item.partition("::")[0]
    check_source(source)
    return f"{item}: {len(_load_one(args, item))} problems" if is_local(source) else _not_read(item)


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


class FromRun(NamedTuple):
    """What ``rlvr eval`` without ``--data`` takes from the run whose checkpoint ``--model`` is."""

    path: Path
    """The run's ``config.yaml``."""
    config: TrainConfig
    """The run's configuration, ``data`` with the flags given in place of its held-out keys."""
    reward: RewardConfig
    """The run's ``reward`` section with the flags given (``--verifier``, ``--correct``, ...)."""


def _from_run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> FromRun | None:
    """Without ``--data``, the run whose checkpoint ``--model`` is: its configuration with the
    flags given laid over it, ``args`` filled from it (the JSON and a kept partial evaluation
    record them), and one line to stderr naming what came from it; without a run,
    argparse's error that ``--data`` is required. ``None`` when ``--data`` is given."""
    if args.data is not None:
        return None
    found = _saved_config(args.model)
    if found is None:
        parser.error("the following arguments are required: --data")
    _check_template(args.template)
    path, cfg = found[0], _run_config(args.model, *found)
    taken = _taken(cfg, args)
    data, reward = _given_data(cfg.data, args), _given_reward(cfg.reward, args)
    run = FromRun(path, dataclasses.replace(cfg, data=data), reward)
    _fill_args(args, run)
    flags = ", ".join(dict.fromkeys(flag for _, flag in taken))
    print(
        f"rlvr eval: problems and verifier as the run evaluated ({path}): "
        + ", ".join(text for text, _ in taken)
        + f"; give {flags} to change",
        file=sys.stderr,
    )
    return run


def _run_config(model: str, path: Path, saved: dict) -> TrainConfig:
    """The run's ``config.yaml`` as the trainer reads it; one line asks for ``--data`` when
    it is no ``rlvr train`` configuration or holds no held-out set."""
    from rlvr.train.config import TrainConfig
    from rlvr.train.overrides import from_file

    try:
        cfg = from_file(TrainConfig, saved, str(path))
    except (TypeError, ValueError) as err:
        raise ValueError(f"--model {model}: {_not_train(path, saved, err)}; give --data") from None
    if cfg.data.eval is None:
        raise ValueError(
            f"--model {model}: its run ({path.parent}) had no held-out set (data.eval is not "
            "set): give --data"
        )
    return cfg


def _not_train(path: Path, saved: dict, err: Exception) -> str:
    """Why a run's ``config.yaml`` is no ``rlvr train`` configuration: an ``rlvr sft`` run's,
    else ``err``, the error reading it as one."""
    from rlvr.train.config import SFTConfig
    from rlvr.train.overrides import from_file

    try:
        from_file(SFTConfig, saved, str(path))
    except (TypeError, ValueError):
        return str(err)
    return f"{path.parent} is an rlvr sft run, with no problems to verify"


def _taken(cfg: TrainConfig, args: argparse.Namespace) -> list[tuple[str, str]]:
    """What the run gives that no flag does, as the line names it, each with its flag."""
    data, reward, held = cfg.data, cfg.reward, cfg.data.held_out()
    fields = held.fields or (
        None
        if (held.prompt_field, held.answer_field) == ("prompt", "answer")
        else f"{held.prompt_field}/{held.answer_field}"
    )
    no_fields = args.fields is None and args.prompt_field is None and args.answer_field is None
    rows = [
        ("data.eval", data.eval, True, "--data"),
        ("split", data.eval_split or data.split, args.split is None, "--split"),
        ("data.max_eval_examples", data.max_eval_examples, args.limit is None, "--limit"),
        ("fields", fields, no_fields, "--fields"),
        ("data.template", data.template, args.template is None, "--template"),
        ("data.system_prompt", data.system_prompt, args.system_prompt is None, "--system-prompt"),
        ("reward.verifier", reward.verifier, args.verifier is None, "--verifier"),
        ("reward.options", reward.options or None, args.verifier is None, "--verifier"),
        ("reward.correct", reward.correct, args.correct is None, "--correct"),
        ("reward.wrong", reward.wrong, args.wrong is None, "--wrong"),
    ]
    return [
        (f"{key} {_quoted(value)}", flag)
        for key, value, free, flag in rows
        if free and value is not None
    ]


def _quoted(value: object) -> str:
    """A value as the line shows it: text with spaces or escapes quoted (a prompt's text cut
    past 60 characters), a path or number as it is.

    >>> _quoted("math"), _quoted("Think first."), _quoted(-1.0), _quoted("Be brief. " * 9)[-8:]
    ('math', "'Think first.'", '-1.0', "e br...'")
    """
    if not isinstance(value, str) or (" " not in value and value.isprintable()):
        return str(value)
    text = repr(value)
    return text if len(text) <= 60 else text[:56] + "...'"


def _given_data(data: DataConfig, args: argparse.Namespace) -> DataConfig:
    """The run's ``data`` section with the data flags given in place of its held-out keys."""
    given: dict[str, object] = {}
    if args.split is not None:
        given["eval_split"] = args.split
    if args.limit is not None:
        given["max_eval_examples"] = args.limit
    named = _named_fields(args)  # also refuses --fields with --prompt-field / --answer-field
    if args.fields is not None:
        given |= {"eval_fields": args.fields, "eval_prompt_field": None, "eval_answer_field": None}
    elif named is not None:
        given |= {"eval_fields": None, "eval_prompt_field": args.prompt_field}
        given["eval_answer_field"] = args.answer_field
    if args.template is not None:
        given["template"] = args.template
    if args.system_prompt is not None:
        given["system_prompt"] = args.system_prompt
    return dataclasses.replace(data, **given)


def _given_reward(reward: RewardConfig, args: argparse.Namespace) -> RewardConfig:
    """The run's ``reward`` section with ``--verifier``, ``--correct``, ``--wrong`` and
    ``--extract`` given in its place; ``--verifier`` drops the run's verifier options (they
    are its verifier's)."""
    options = {} if args.verifier is not None else dict(reward.options)
    options |= {"extract": args.extract} if args.extract else {}
    given = {k: getattr(args, k) for k in ("verifier", "correct", "wrong")}
    given = {k: v for k, v in given.items() if v is not None}
    _check_scores(given.get("correct", reward.correct), given.get("wrong", reward.wrong))
    return dataclasses.replace(reward, options=options, **given)


def _fill_args(args: argparse.Namespace, run: FromRun) -> None:
    """Set the data and scoring flags to what the run's held-out evaluation reads and scores
    with, for the JSON's ``data``, ``verifier`` and ``loading`` and a kept partial evaluation."""
    from rlvr.train.prompts import GENERATED

    data, held, reward = run.config.data, run.config.data.held_out(), run.reward
    args.data, args.limit = [data.eval], data.max_eval_examples
    args.split = data.eval_split or data.split
    args.template, args.system_prompt = data.template, data.system_prompt
    generated = next((m for p, m in GENERATED.items() if data.eval.startswith(p)), None)
    args.fields = held.fields or generated
    if args.fields is None:
        args.prompt_field, args.answer_field = held.prompt_field, held.answer_field
    args.verifier, args.correct, args.wrong = reward.verifier, reward.correct, reward.wrong


def _held_out(run: FromRun, args: argparse.Namespace) -> PromptSet:
    """The run's held-out prompts as its evaluation read them
    (:func:`rlvr.train.prompts.load_prompt_set`: ``data.eval`` with its split, limit, fields
    and template, a generated set from the run's cache, the system prompt applied, prompts
    over ``data.max_prompt_tokens`` skipped or cut), fitted to the model's context with room
    for ``--max-tokens`` (:func:`rlvr.train.loop.fit_context`)."""
    from rlvr.models import model_tokenizer_and_config
    from rlvr.train.loop import fit_context
    from rlvr.train.prompts import load_prompt_set

    tokenizer, model_config = model_tokenizer_and_config(args.model)
    cfg = run.config
    cfg = dataclasses.replace(
        cfg, eval=dataclasses.replace(cfg.eval, max_new_tokens=args.max_tokens)
    )
    return load_prompt_set(tokenizer, fit_context(cfg, model_config), role="eval")


def _run_dry_run(run: FromRun) -> str:
    """The dry run's line of the run's held-out set: a local one read as the run reads it (a
    missing file or field fails here), a generated one's size and seed, a named or hub set
    only named."""
    from rlvr.data.loading import check_source, is_local
    from rlvr.train.prompts import GENERATED, read_examples

    data = run.config.data
    source, limit = data.eval, data.max_eval_examples
    if source.startswith(tuple(GENERATED)):
        size = min(data.gym.eval_size, limit or data.gym.eval_size)
        return f"{source}: {size} problems, generated as the run's (seed {data.gym.held_out_seed})"
    check_source(source)
    if source in DATASETS or not is_local(source):
        return _not_read(source)
    held = data.held_out()
    rows = read_examples(held, source, limit=limit, fields=held.fields, role="eval")
    return f"{source}: {len(rows)} problems"


def _warn_other_prompts(args: argparse.Namespace) -> None:
    """With ``--data`` on a run's checkpoint: warn when the run prompted with a
    ``data.template`` or ``data.system_prompt`` that no flag gives this evaluation."""
    found = _saved_config(args.model)
    data = (found[1].get("data") if found else None) or {}
    if not isinstance(data, dict):
        return
    keys = [("template", "--template"), ("system_prompt", "--system-prompt")]
    missed = [
        (key, flag)
        for key, flag in keys
        if isinstance(data.get(key), str) and getattr(args, key) is None
    ]
    if not missed:
        return
    warnings.warn(
        f"--model is a checkpoint of {found[0].parent}, which prompted with "
        + ", ".join(f"data.{key}={data[key]!r}" for key, _ in missed)
        + f"; this evaluation's prompts go without: give {', '.join(f for _, f in missed)} to "
        "prompt as the run did (or leave --data out to evaluate the run's held-out set)",
        stacklevel=2,
    )


@command
def main(argv: list[str]) -> int:
    """Run ``rlvr eval ...``; returns the exit status."""
    from rlvr.evaluation.harness import evaluate
    from rlvr.models import load_model

    parser = _parser()
    args = parser.parse_args(argv)
    _resolve_sampling(args)
    run = _from_run(args, parser)
    verifier, options = _scoring(args, run)
    config = _config(args)
    output = Path(args.output) if args.output else _default_output(args.model)
    check_writable(output)
    _check_placement(args.dtype, args.device, dry_run=args.dry_run)
    if args.dry_run:
        _dry_run(args, config, run)
        return 0
    if args.show_prompts:
        return _show_prompts(args, config, run)
    keep = PartialSamples(partial_path(output), _settings(args))
    keep.load()  # made with other settings, or damaged: one line before anything loads
    examples, prompt_ids = _problems(args, run)
    model, tokenizer = load_model(args.model, dtype=args.dtype, device=args.device)
    try:
        report = evaluate(
            model, tokenizer, examples, verifier, config, prompt_ids=prompt_ids, keep=keep
        )
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


def _scoring(args: argparse.Namespace, run: FromRun | None) -> tuple[Verifier, dict]:
    """The verifier and the options it is built with: the run's, as its trainer builds it
    (:func:`rlvr.train.preflight.run_verifier`), when ``run`` is set; else the flags' (``math``
    and the scores 1 and 0 by default, with warnings when the model's run scored or prompted
    otherwise)."""
    from rlvr.rewards.registry import get_verifier
    from rlvr.train.preflight import run_verifier

    if run is not None:
        reward = run.reward
        options = {"correct": reward.correct, "wrong": reward.wrong, **reward.options}
        return run_verifier(reward), options
    if args.verifier is None:  # the default: say so when the model's run trained with another
        args.verifier = "math"
        _warn_other_verifier(args.model, args.verifier)
    _warn_other_prompts(args)
    args.correct = 1.0 if args.correct is None else args.correct
    args.wrong = 0.0 if args.wrong is None else args.wrong
    options = _reward_options(args)
    return get_verifier(args.verifier, **options), options


def _problems(args: argparse.Namespace, run: FromRun | None) -> tuple[list, list | None]:
    """The examples to evaluate, and with ``run`` their prompts tokenised as the run's
    evaluation tokenised them (``None``: the harness formats and tokenises them)."""
    if run is None:
        return _load(args), None
    prompts = _held_out(run, args).prompts
    return [p.example for p in prompts], [list(p.ids) for p in prompts]


def _show_prompts(args: argparse.Namespace, config: EvalConfig, run: FromRun | None) -> int:
    """``--show-prompts N``: the first N prompts of each ``--data`` source (or the run's
    held-out set) as sampling gets them (:func:`~rlvr.evaluation.harness.encode_prompts`, or
    the run's tokenised prompts), decoded from their token ids."""
    from rlvr.evaluation.harness import encode_prompts
    from rlvr.models import model_tokenizer_and_config

    tokenizer = model_tokenizer_and_config(args.model)[0]
    examples, prompt_ids = _problems(args, run)
    if prompt_ids is None:
        prompt_ids = encode_prompts(tokenizer, examples, config)
    for dataset in dict.fromkeys(ex.dataset for ex in examples):
        own = [
            (ex, ids) for ex, ids in zip(examples, prompt_ids, strict=True) if ex.dataset == dataset
        ]
        for i, (ex, ids) in enumerate(own[: args.show_prompts]):
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
