"""``rlvr eval`` on a run's checkpoint: the run's sampling, held-out set, prompts and verifier.

``--model <run>/checkpoints/step_N`` (or its ``adapter/``) finds the run's ``config.yaml``;
sampling options not given come from its ``eval`` section, and without ``--data`` the
problems, prompts and verifier are the run's own, so the run's last held-out numbers come
out again (docs/evaluation.md).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, NoReturn

from rlvr.cli.eval_args import (
    RUN_SAMPLING,
    check_scores,
    check_template,
    named_fields,
    not_read,
    sampler_settings,
    sampling_args,
)
from rlvr.data.fields import DATASETS

if TYPE_CHECKING:
    from rlvr.train.config import DataConfig, RewardConfig, TrainConfig
    from rlvr.train.prompts import PromptSet


def run_of(model: str) -> Path | None:
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

    run = run_of(model)
    path = None if run is None else run / "config.yaml"
    if path is None or not path.is_file():
        return None
    try:
        return path, read_yaml(str(path))
    except ValueError:  # not a run's configuration
        return None


def warn_other_verifier(model: str, verifier: str) -> None:
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


def _run_sampling(model: str) -> tuple[Path, dict[str, object]] | None:
    """The ``config.yaml`` of the run whose checkpoint ``model`` is, and the sampling options
    its held-out evaluation used (as :func:`rlvr.train.loop.evaluate` builds them, on the
    policy loaded in ``model.dtype``); ``None`` for a model that is no run's checkpoint, or a
    run without an ``eval`` section (SFT)."""
    from rlvr.train.config import EvalConfig as RunEval
    from rlvr.train.config import RolloutConfig
    from rlvr.train.overrides import from_dict

    found = _saved_config(model)
    if found is None or not isinstance(found[1].get("eval"), dict):
        return None
    path, saved = found
    section = saved.get("rollout") or {}
    if not isinstance(section, dict):
        return None
    try:  # the sampler apart: one unknown here (a registered one, an option since renamed)
        ev = from_dict(RunEval, saved["eval"], "eval")  # is said by resolve_sampling
        plain = {k: v for k, v in section.items() if k not in _SAMPLER_KEYS}
        rollout = from_dict(RolloutConfig, plain, "rollout")
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
    model_section = saved.get("model")
    dtype = model_section.get("dtype") if isinstance(model_section, dict) else None
    if dtype in ("bfloat16", "float16"):  # the policy's dtype, when not rlvr eval's float32
        options["dtype"] = dtype
    sampler = section.get("sampler", section.get("engine", "lean"))
    own = section.get("sampler_options") or {}
    if sampler != "lean" or own:  # the run evaluated with its rollouts' sampler and options
        options["sampler"], options["sampler_options"] = sampler, own
    return path, options


_SAMPLER_KEYS = ("sampler", "engine", "sampler_options", "importance_correction")
"""``rollout`` keys :func:`_run_sampling` reads as saved, not through ``RolloutConfig``."""


def resolve_sampling(args: argparse.Namespace) -> None:
    """Fill the sampling options not given: from the run's ``eval`` settings (and sampler)
    when ``--model`` is a run's checkpoint (one line says so), else rlvr eval's defaults;
    ``args.sampler_options``: the sampler's options, checked."""
    defaults = argparse.ArgumentParser(add_help=False)
    sampling_args(defaults)
    missing = [key for key in RUN_SAMPLING if getattr(args, key) is None]
    found = _run_sampling(args.model) if missing else None
    taken = {} if found is None else found[1]
    if "n" not in missing:  # the run's k values belong to its n
        taken.pop("k", None)
    for key in missing:
        setattr(args, key, taken.get(key, defaults.get_default(key)))
    run_options = taken.get("sampler_options") if "sampler" in missing else None
    if run_options is not None:  # a sampler or options this rlvr refuses: the run's, said so
        _check_run_sampler(found[0], args.sampler, run_options)
    args.sampler_options = sampler_settings(args, run_options)  # the run's belong to its sampler
    shown = [key for key in missing if key in taken]
    if found is None or not shown:
        return
    print(
        f"rlvr eval: sampling as the run evaluated ({found[0]}): "
        + ", ".join(_shown(key, taken[key]) for key in shown)
        + f"; give {', '.join(RUN_SAMPLING[key] for key in shown)} to change",
        file=sys.stderr,
    )


def _check_run_sampler(path: Path, name: object, options: object) -> None:
    """One line naming the run's ``config.yaml`` when its ``rollout.sampler`` and
    ``sampler_options`` are refused here, and ``--sampler``, which samples otherwise."""
    from rlvr.generation.registry import sampler_options

    try:
        sampler_options(name, **options)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"the run's rollout.sampler {name} with sampler_options {options} ({path}): {err}; "
            "give --sampler (and --sampler-option) to sample otherwise"
        ) from None


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


def from_run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> FromRun | None:
    """Without ``--data``, the run whose checkpoint ``--model`` is: its configuration with the
    flags given laid over it, ``args`` filled from it (the JSON and a kept partial evaluation
    record them), and one line to stderr naming what came from it; without a run,
    argparse's error that ``--data`` is required. ``None`` when ``--data`` is given."""
    if args.data is not None:
        return None
    found = _saved_config(args.model)
    if found is None:
        _no_run(args.model, parser)
    check_template(args.template)
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


def _no_run(model: str, parser: argparse.ArgumentParser) -> NoReturn:
    """Refuse ``rlvr eval`` without ``--data`` on a model that is no run's checkpoint: a local
    ``--model`` that holds no model in one line (a run directory: naming its latest
    checkpoint, the model a user meant), else argparse's error that ``--data`` is required,
    saying when it is not."""
    from rlvr.models import check_model_dir

    try:
        check_model_dir(model)
    except ValueError as err:
        raise ValueError(f"--model {err}") from None
    parser.error(
        "the following arguments are required: --data (unless --model is a checkpoint of an "
        "rlvr train run, <run>/checkpoints/step_N: then its held-out set)"
    )


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
        ("reward.timeout_s", reward.timeout_s, args.timeout is None, "--timeout"),
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
    named = named_fields(args)  # also refuses --fields with --prompt-field / --answer-field
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
    """The run's ``reward`` section with ``--verifier``, ``--correct``, ``--wrong``,
    ``--extract`` and ``--timeout`` given in its place; ``--verifier`` drops the run's verifier options (they
    are its verifier's)."""
    options = {} if args.verifier is not None else dict(reward.options)
    options |= {"extract": args.extract} if args.extract else {}
    given = {k: getattr(args, k) for k in ("verifier", "correct", "wrong")}
    given = {k: v for k, v in given.items() if v is not None}
    if args.timeout is not None:
        given["timeout_s"] = args.timeout
    check_scores(given.get("correct", reward.correct), given.get("wrong", reward.wrong))
    return dataclasses.replace(reward, options=options, **given)


def _fill_args(args: argparse.Namespace, run: FromRun) -> None:
    """Set the data and scoring flags to what the run's held-out evaluation reads and scores
    with, for the JSON's ``data``, ``verifier`` and ``loading`` and a kept partial evaluation."""
    from rlvr.train.prompts import GENERATED, generated_prefix

    data, held, reward = run.config.data, run.config.data.held_out(), run.reward
    args.data, args.limit = [data.eval], data.max_eval_examples
    args.split = data.eval_split or data.split
    args.template, args.system_prompt = data.template, data.system_prompt
    prefix = generated_prefix(data.eval)
    args.fields = held.fields or (GENERATED[prefix] if prefix else None)
    if args.fields is None:
        args.prompt_field, args.answer_field = held.prompt_field, held.answer_field
    args.verifier, args.correct, args.wrong = reward.verifier, reward.correct, reward.wrong
    args.timeout = reward.timeout_s


def held_out(run: FromRun, args: argparse.Namespace) -> PromptSet:
    """The run's held-out prompts as its evaluation read them
    (:func:`rlvr.train.prompts.load_prompt_set`: ``data.eval`` with its split, limit, fields
    and template, a generated set from the run's cache, the system prompt applied, prompts
    over ``data.max_prompt_tokens`` skipped or cut), fitted to the model's context with room
    for ``--max-tokens`` (:func:`rlvr.train.loop.fit_context`). A generated set's problems
    are named by the run's source (``reasoning_gym:chain_sum``), not by its cache file."""
    from rlvr.models import model_tokenizer_and_config
    from rlvr.train.loop import fit_context
    from rlvr.train.prompts import load_prompt_set, named_by_source

    tokenizer, model_config = model_tokenizer_and_config(args.model)
    cfg = run.config
    cfg = dataclasses.replace(
        cfg, eval=dataclasses.replace(cfg.eval, max_new_tokens=args.max_tokens)
    )
    with _flags_named():
        found = load_prompt_set(tokenizer, fit_context(cfg, model_config), role="eval")
    return named_by_source(found, cfg.data.eval)


_RUN_KEYS = {
    "data.eval_prompt_field / data.eval_answer_field": "--prompt-field / --answer-field",
    "data.eval_fields": "--fields",
}


@contextlib.contextmanager
def _flags_named() -> Iterator[None]:
    """Errors reading the run's held-out set name the flags that change what its config.yaml
    set (``--prompt-field``), not the config keys (``data.eval_prompt_field``)."""
    try:
        yield
    except ValueError as err:
        text = str(err)
        for key, flag in _RUN_KEYS.items():
            text = text.replace(key, flag)
        raise ValueError(text) from None


def run_dry_run(run: FromRun) -> str:
    """The dry run's line of the run's held-out set: a local one read as the run reads it (a
    missing file or field fails here), a generated one's size and seed, a named or hub set
    only named (offline, a split its cached copy lacks is refused: :func:`check_hub_split`)."""
    from rlvr.data.loading import check_hub_split, check_source, is_local
    from rlvr.evaluation.harness import warn_repeated_problems
    from rlvr.train.prompts import generated_prefix, read_examples

    data = run.config.data
    source, limit = data.eval, data.max_eval_examples
    if generated_prefix(source) is not None:
        size = min(data.gym.eval_size, limit or data.gym.eval_size)
        return f"{source}: {size} problems, generated as the run's (seed {data.gym.held_out_seed})"
    check_source(source)
    if source in DATASETS or not is_local(source):
        check_hub_split(source, data.eval_split or data.split)  # offline: from the cache
        return not_read(source)
    held = data.held_out()
    with _flags_named():
        rows = read_examples(held, source, limit=limit, fields=held.fields, role="eval")
    warn_repeated_problems(rows)
    return f"{source}: {len(rows)} problems"


def warn_other_prompts(args: argparse.Namespace) -> None:
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
