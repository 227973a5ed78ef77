"""Multi-stage runs: data, SFT and RL stages in order, each model stage starting from the
previous one's model.

A pipeline file is YAML (a path, or the name of one shipped in ``rlvr/configs/pipelines``)::

    output_dir: runs/klear            # each stage runs in output_dir/<stage name>
    model: smollm2-135m               # the first stage's model (default: its config's)
    stages:
      - {name: sft,  kind: sft,   config: sft,  overrides: [data.train=./worked.jsonl]}
      - {name: math, kind: train, config: gppo, overrides: [steps=20]}
      - {name: code, kind: train, config: code}

``config`` is an embedded config name or a YAML file; ``overrides`` are ``key=value``
strings as on the command line. Each stage's ``model.name`` is set to the previous
stage's final model directory (the first stage's: the file's ``model``, or a command-line
``model=`` in its place) and its ``log.output_dir`` to its own directory; relative
paths (``./``, ``../``) in ``config`` and in the file's ``data.train`` / ``data.eval``
overrides are read from the pipeline file's folder (command-line overrides: from the
current folder).

A ``kind: data`` stage runs a data step (``config``: ``dedup``, ``decontaminate`` or
``filter``, :mod:`rlvr.evaluation.data_steps`) with ``overrides`` as its options; it reads
``input=`` (a file, a relative one read from the pipeline file's folder; ``@NAME``: data
stage NAME's output; default: the previous data stage's output) and writes ``output_dir/<stage name>/data.jsonl``, which a later stage's
``data.train=@NAME`` / ``data.eval=@NAME`` trains on. A data stage passes the model on
unchanged (``filter`` samples with it); the command line's overrides for every stage skip
data stages (``NAME:key=value`` reaches one).

Running a pipeline again continues it: a stage whose ``stage.json`` exists is finished
and skipped (its final model is read from there; a finished stage that this run would make
otherwise, :func:`stage_options`, is refused, naming the folders to delete), a stage with a
run directory but no ``stage.json`` was interrupted and resumes from its last checkpoint
(the ``--resume`` machinery of ``rlvr train`` / ``rlvr sft``), the rest start fresh (an
interrupted ``filter`` keeps the prompts it scored). ``pipeline.json`` in the output
directory lists each stage's run directory, final model and held-out scores. One run at a
time holds the output directory (``.pipeline.lock`` there).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import yaml

from rlvr.atomic import write_json
from rlvr.bundled import bundled_names, read_source
from rlvr.data.rowfiles import StepReport
from rlvr.dotted import changed_keys, flatten
from rlvr.evaluation.data_steps import STEPS, check_files, run_step, step_options
from rlvr.evaluation.filtering import passrates_file
from rlvr.evaluation.harness import progress_lines
from rlvr.generation.registry import missing_package
from rlvr.train.checkpoint import latest_checkpoint
from rlvr.train.config import SFTConfig, TrainConfig
from rlvr.train.dry_run import dry_run_checks, sampler_note
from rlvr.train.harness import Callback, RunResult
from rlvr.train.overrides import NOT_A_KEY, from_file, load_config, read_beside, to_dict
from rlvr.train.preflight import preflight
from rlvr.train.run_dir import TIME_FORMAT

KINDS = ("sft", "train", "data")
STAGE_FILE = "stage.json"
DATA_FILE = "data.jsonl"
"""What a data stage writes in its directory."""
SUMMARY_FILE = "pipeline.json"
LOCK_FILE = ".pipeline.lock"
"""Held in the output directory while a pipeline runs there (:func:`_only_run`)."""
MODEL_KEYS = ("model", "model.name")
"""Override keys that name a stage's model."""
RUN_KEYS = ("threads", "log.", "checkpoint.", "model.device", "reward.workers", "workers")
"""Options (dotted-key prefixes) that say how a stage runs, not what it makes: a finished
stage's may differ on a rerun."""
KEEP_HINT = (
    "filter needs keep=RULE, e.g. keep=mean>0.5 (a majority of its n samples correct; with "
    "n=16, pass@16>0.5 keeps every prompt solved once: docs/data.md)"
)
"""What a filter stage without ``keep`` is told."""
PRODUCED = "<an earlier stage's model>"
"""Stands for a model an earlier stage makes, in the checks before the first stage runs."""
PATH_KEYS = ("data.train", "data.eval")
"""Override keys whose relative values are read from the pipeline's folder (:func:`_local`)."""


@dataclass(frozen=True)
class Stage:
    """One stage of a pipeline."""

    name: str
    """Unique name (no ``/``, ``:`` or ``=``, not starting with ``.``); also the stage's run
    directory under the pipeline's output directory."""
    kind: str
    """``sft`` (``rlvr sft``), ``train`` (``rlvr train``) or ``data`` (a data step)."""
    config: str
    """Embedded config name or YAML file of the stage; for ``data``, the step's name."""
    overrides: tuple[str, ...] = ()
    """``key=value`` overrides applied to the config; for ``data``, the step's options."""

    def __post_init__(self) -> None:
        name = self.name
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"name must be a plain directory name, got {name!r}")
        if ":" in name or "=" in name:  # NAME:key=value on the command line names the stage
            raise ValueError(
                f"name must be without ':' or '=' (NAME:key=value gives a stage an option), "
                f"got {name!r}"
            )
        if self.kind not in KINDS:
            raise ValueError(
                f"stage {name!r}: kind must be one of {list(KINDS)}, got {self.kind!r}"
            )
        if not self.config:
            raise ValueError(f"stage {name!r}: config must name a config or YAML file")
        if self.kind == "data" and self.config not in STEPS:
            raise ValueError(f"stage {name!r}: a data stage's config is one of {list(STEPS)}")
        if not all("=" in o for o in self.overrides):
            raise ValueError(f"stage {name!r}: overrides must be a list of 'key=value' strings")


@dataclass(frozen=True)
class Pipeline:
    """Stages run in order, each from the previous stage's final model (a pipeline file's keys:
    ``stages``, ``output_dir``, ``model``)."""

    LABEL: ClassVar[str] = "a pipeline"

    stages: tuple[Stage, ...]
    """The stages, in order."""
    output_dir: str = "runs/pipeline"
    """Where the stages' run directories and ``pipeline.json`` go."""
    model: str | None = None
    """The first stage's model (``None``: the one its config names)."""
    source: str = field(default="<pipeline>", metadata=NOT_A_KEY)
    """Where the pipeline was read from (for messages)."""
    folder: Path = field(default_factory=Path.cwd, metadata=NOT_A_KEY)
    """Folder relative paths are read from."""

    def __post_init__(self) -> None:
        if not self.stages:
            raise ValueError("'stages' must be a non-empty list")
        names = [s.name for s in self.stages]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"stage names must be unique, repeated: {repeated}")
        if not self.output_dir:
            raise ValueError("output_dir must be a non-empty string")


@dataclass(frozen=True)
class StageResult:
    """What a stage left behind."""

    name: str
    """Stage name."""
    run_dir: Path
    """Its run directory."""
    model_dir: Path | None
    """Its final model (the next stage's starting point); a data stage's: the model it was
    given (``None`` when none was)."""
    status: str
    """``ran``, ``resumed`` or ``skipped`` (finished in an earlier invocation)."""
    evals: dict[int, dict[str, float]] = field(default_factory=dict)
    """Held-out scores by step (RL stages)."""
    output: Path | None = None
    """A data stage's kept rows."""
    counts: dict[str, int] = field(default_factory=dict)
    """A data stage's ``kept`` count and dropped counts by reason."""


def embedded_pipelines() -> list[str]:
    """Names of the pipelines shipped in ``rlvr/configs/pipelines``."""
    return bundled_names("rlvr", "configs/pipelines")


def read_pipeline(name_or_path: str) -> Pipeline:
    """Parse a pipeline file (or an embedded pipeline by name); errors name the file and stage.
    A folder is refused, one holding ``pipeline.json`` (a pipeline's output directory, given
    to continue it) with the command that does."""
    if Path(name_or_path).is_dir():
        raise ValueError(_not_a_file(Path(name_or_path)))
    source = read_source(
        name_or_path,
        package="rlvr",
        folder="configs/pipelines",
        kind="an embedded pipeline",
        choices=embedded_pipelines,
    )
    return parse_pipeline(source.data, source=source.where, folder=source.folder)


def _not_a_file(folder: Path) -> str:
    """Why ``folder`` is no pipeline file; for an output directory (its ``pipeline.json`` names
    the file it was made from), the command that continues it."""
    summary = folder / SUMMARY_FILE
    try:
        made = json.loads(summary.read_text()).get("source") if summary.is_file() else None
    except (OSError, ValueError, AttributeError):
        made = None
    if not isinstance(made, str):
        return f"pipeline file {folder}: is a directory, not a YAML file"
    embedded = "rlvr/configs/pipelines/"
    name = Path(made).stem if made.startswith(embedded) else made
    return (
        f"pipeline file {folder}: is a pipeline's output directory, not its file; to continue "
        f"it: rlvr pipeline {name} -o {folder}"
    )


def parse_pipeline(
    data: Any, *, source: str = "<pipeline>", folder: Path | None = None
) -> Pipeline:
    """A :class:`Pipeline` from its YAML mapping (errors start with ``source``)."""
    pipeline = from_file(Pipeline, data, source)
    folder = folder or Path.cwd()
    model = pipeline.model and _local(pipeline.model, folder, model=True)
    return replace(pipeline, source=source, folder=folder, model=model)


def _local(value: str, folder: Path, *, model: bool = False) -> str:
    """``value`` read from ``folder`` as a run configuration's YAML file reads its paths
    (:func:`~rlvr.train.overrides.read_beside`); ``./`` and ``../`` ones made absolute."""
    return read_beside(folder, value, model=model, absolute=value.startswith(("./", "../")))


def _file(value: str, folder: Path) -> str:
    """The file ``value`` (``~`` expanded), a relative path read from ``folder``: a data stage's
    ``input`` is always a file, never a dataset name, so a bare ``raw.jsonl`` is one too."""
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else (folder / path).resolve())


def _data_path(pipeline: Pipeline, stage: Stage, value: str, folder: Path) -> str:
    """A data path of ``stage``: ``@NAME`` is data stage NAME's output (NAME before ``stage``),
    a relative path is read from ``folder``."""
    if not value.startswith("@"):
        return _local(value, folder)
    names = [s.name for s in pipeline.stages]
    earlier = pipeline.stages[: names.index(stage.name)]
    if value[1:] not in [s.name for s in earlier if s.kind == "data"]:
        raise ValueError(
            f"{pipeline.source}: stage {stage.name!r}: {value}: no earlier data stage {value[1:]!r}"
        )
    return str((Path(pipeline.output_dir) / value[1:] / DATA_FILE).absolute())


def stage_config(
    pipeline: Pipeline, stage: Stage, model: str | None, extra: Sequence[str] = ()
) -> TrainConfig | SFTConfig:
    """The stage's configuration: its config and overrides, then ``extra``, model and run directory.

    Relative data paths in the stage's own overrides are read from the pipeline file's
    folder; those in ``extra`` (the command line's) from the current folder, as in ``rlvr train``.
    """
    overrides = []
    for item in stage.overrides:
        key, _, value = item.partition("=")
        if _names_model(key, value):
            item = f"{key}={_local(value, pipeline.folder, model=True)}"
        elif key in PATH_KEYS:
            item = f"{key}={_data_path(pipeline, stage, value, pipeline.folder)}"
        overrides.append(item)
    for item in extra:
        key, _, value = item.partition("=")
        at = key in PATH_KEYS and value.startswith("@")
        overrides.append(f"{key}={_data_path(pipeline, stage, value, Path.cwd())}" if at else item)
    _refuse_replaced(pipeline, stage, overrides)
    if model is not None:
        overrides.append(f"model.name={model}")
    overrides.append(f"log.output_dir={Path(pipeline.output_dir) / stage.name}")
    cls = SFTConfig if stage.kind == "sft" else TrainConfig
    try:
        return load_config(cls, _local(stage.config, pipeline.folder), overrides)
    except (TypeError, ValueError) as err:
        hint = _other_kind(pipeline, stage)
        raise ValueError(f"{pipeline.source}: stage {stage.name!r}: {err}{hint}") from None


def _other_kind(pipeline: Pipeline, stage: Stage) -> str:
    """`` (config X is a kind: OTHER config)`` when the model stage's config, without overrides,
    loads as the other kind's but not as its own (``kind: train`` with ``config: sft`` was only
    ``unknown key 'epochs'``), else ``""``."""
    own, other = (SFTConfig, TrainConfig) if stage.kind == "sft" else (TrainConfig, SFTConfig)

    def loads(cls: type) -> bool:  # a placeholder data file: an SFT config names none
        try:
            load_config(cls, _local(stage.config, pipeline.folder), ["data.train=x.jsonl"])
        except (TypeError, ValueError, OSError):
            return False
        return True

    if loads(own) or not loads(other):
        return ""
    return (
        f" (config {stage.config!r} is a kind: {'sft' if other is SFTConfig else 'train'} config)"
    )


def _refuse_replaced(pipeline: Pipeline, stage: Stage, overrides: Sequence[str]) -> None:
    """Refuse overrides the pipeline would replace: ``log.output_dir`` (always
    ``output_dir/<stage name>``) and, in the file, the model of a stage that starts from the
    previous stage's model (or, the first, from the file's ``model``)."""
    where = f"{pipeline.source}: stage {stage.name!r}"
    for item in overrides:
        if item.partition("=")[0].strip() == "log.output_dir":
            raise ValueError(
                f"{where}: {item!r}: a stage runs in output_dir/<stage name>; choose the "
                "pipeline's directory with -o or output_dir"
            )
    if stage.name == pipeline.stages[0].name and pipeline.model is None:
        return
    for item in stage.overrides:
        key, _, value = item.partition("=")
        if _names_model(key, value):
            raise ValueError(
                f"{where}: {item!r}: the stage's model is the previous stage's final model "
                "(the first stage's: the file's model)"
            )


def data_step(pipeline: Pipeline, stage: Stage, extra: Sequence[str] = ()) -> tuple[Any, str]:
    """A data stage's typed options and input file.

    Its ``overrides`` (then ``extra``, the command line's) are the step's options, values read
    as YAML; ``input=`` names the file (``@NAME``: data stage NAME's output; default: the
    previous data stage's output). A relative ``input`` is read from the pipeline file's
    folder, as are ``./`` and ``../`` paths in ``against`` (whose other values are set or Hub
    names); those in ``extra`` are read from the current folder.
    """
    where = f"{pipeline.source}: stage {stage.name!r}"
    options: dict[str, Any] = {}
    names = [s.name for s in pipeline.stages]
    before = [s.name for s in pipeline.stages[: names.index(stage.name)] if s.kind == "data"]
    source = f"@{before[-1]}" if before else None
    given = [(o, pipeline.folder) for o in stage.overrides] + [(o, Path.cwd()) for o in extra]
    for item, folder in given:
        key, _, value = (part.strip() for part in item.partition("="))
        if key == "input":
            source = value if value.startswith("@") else _file(value, folder)
        elif key == "against":
            sets = _yaml_value(where, item, value)
            sets = [sets] if isinstance(sets, str) else sets if isinstance(sets, list) else []
            options[key] = [_local(v, folder) if isinstance(v, str) else v for v in sets]
        else:
            options[key] = _yaml_value(where, item, value)
    if source is None:
        raise ValueError(f"{where}: the first data stage needs input=FILE")
    if stage.config == "filter" and not options.get("keep"):
        raise ValueError(f"{where}: {KEEP_HINT}")
    try:
        return step_options(stage.config, options), _data_path(
            pipeline, stage, source, pipeline.folder
        )
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: {err}") from None


def _yaml_value(where: str, item: str, value: str) -> Any:
    """A data stage option's value read as YAML; one that is not YAML names the override."""
    try:
        return yaml.safe_load(value)
    except yaml.YAMLError as err:
        raise ValueError(f"{where}: override {item!r}: value is not valid YAML: {err}") from None


def _run_data(
    pipeline: Pipeline,
    stage: Stage,
    extra: Sequence[str],
    model: str | None,
    run_dir: Path,
    announce: Callable[[str], None],
) -> StageResult:
    """Run a data stage into ``run_dir/data.jsonl``, announce what it kept, and mark it finished
    (``stage.json``); one that keeps no rows is refused, unmarked."""
    options, source = data_step(pipeline, stage, extra)
    made = _data_made_from(stage, options, source, model)  # before the step: its input's digest
    # an interrupted filter goes on from the scores it recorded
    resumed = stage.config == "filter" and passrates_file(run_dir / DATA_FILE).is_file()
    progress = progress_lines(announce, f"  {stage.config}")  # a filter's sampling, by tenths
    report: StepReport = run_step(
        options, source, run_dir / DATA_FILE, model=model, progress=progress
    )
    if report.kept == 0:  # not marked finished: rerun with other options, it runs again
        raise ValueError(
            f"{report.summary()}: a stage that keeps no rows leaves nothing to train on "
            f"(the dropped rows, with why: {report.dropped_file})"
        )
    announce(f"  {report.summary()}")
    counts = {"kept": report.kept, **report.dropped}
    output = report.output.absolute()  # as recorded: pipeline.json the same when it is skipped
    done = {
        "name": stage.name,
        "kind": stage.kind,
        "config": stage.config,
        "input": source,
        "output": str(output),
        "counts": counts,
        "options": made,
    }
    write_json(run_dir / STAGE_FILE, done)
    model_dir = Path(model) if model else None
    status = "resumed" if resumed else "ran"
    return StageResult(stage.name, run_dir, model_dir, status, output=output, counts=counts)


def _run_stage(cfg: TrainConfig | SFTConfig, resume: bool, callbacks: Sequence[Callback]):
    if isinstance(cfg, SFTConfig):
        from rlvr.train.supervised import sft

        return sft(cfg, resume=resume, callbacks=callbacks)
    from rlvr.train.loop import train

    return train(cfg, resume=resume, callbacks=callbacks)


def run_pipeline(
    pipeline: Pipeline,
    *,
    overrides: Sequence[str] = (),
    callbacks: Callable[[Stage], Sequence[Callback]] | None = None,
    announce: Callable[[str], None] = print,
) -> list[StageResult]:
    """Run (or continue) every stage in order; returns each stage's result.

    ``overrides`` apply to every stage (``key=value``) or to one (``NAME:key=value``); every
    stage's configuration is checked before the first runs (or is skipped as finished), and
    a warning that check gives is not given again as a stage starts;
    ``callbacks(stage)`` gives the callbacks of a stage's run. ``{time}`` in the output
    directory becomes the start time (continue such a pipeline by passing the expanded
    directory: ``dataclasses.replace(pipeline, output_dir=...)``).
    """
    if "{time}" in pipeline.output_dir:
        stamp = time.strftime(TIME_FORMAT)
        pipeline = replace(pipeline, output_dir=pipeline.output_dir.replace("{time}", stamp))
    said = _check_before_running(pipeline, overrides)  # every stage, before any stage runs
    names = [s.name for s in pipeline.stages]
    first_model, overrides = _first_model(pipeline.model, overrides, names)
    data = {s.name for s in pipeline.stages if s.kind == "data"}
    by_stage = _split_overrides(overrides, names, skip=data)
    results: list[StageResult] = []
    model = first_model
    with _only_run(Path(pipeline.output_dir)):
        _check_finished(pipeline, by_stage, first_model)  # again: as it is now, locked
        for index, stage in enumerate(pipeline.stages, 1):
            label = f"stage {index}/{len(pipeline.stages)} {stage.name}"
            try:
                with _not_again(said, stage):  # said once: not as the stage checks itself
                    result = _run_one(
                        pipeline, stage, label, by_stage[stage.name], model, callbacks, announce
                    )
            except (ValueError, OSError) as err:
                raise ValueError(f"{label}: {err}") from err
            results.append(result)
            _write_summary(pipeline, results)
            model = _model_of(result)
    return results


@contextlib.contextmanager
def _only_run(out: Path) -> Iterator[None]:
    """Hold ``out/.pipeline.lock`` (``out`` made) while the stages run; a second pipeline run
    in ``out`` is refused (it ran the same stages at once, the two writing over each other's
    checkpoints and metrics). The lock goes with the process, also when it is killed."""
    from filelock import FileLock, Timeout

    out.mkdir(parents=True, exist_ok=True)
    lock = FileLock(out / LOCK_FILE)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise ValueError(
            f"{out}: another rlvr pipeline is running there (it holds {out / LOCK_FILE}); "
            "wait for it to end, or choose another output directory with -o"
        ) from None
    try:
        yield
    finally:
        lock.release()


@contextlib.contextmanager
def _not_again(said: Sequence[warnings.WarningMessage], stage: Stage) -> Iterator[None]:
    """Within the block (``stage``'s run), the warnings the check before the first stage
    ``said`` of it (``stage 'NAME': ...``: a full-rank LoRA, few prompts) are not given again."""
    prefix = f"stage {stage.name!r}: "
    with warnings.catch_warnings():
        for w in said:
            text = str(w.message)
            text = text[len(prefix) :] if text.startswith(prefix) else text
            warnings.filterwarnings("ignore", re.escape(text) + r"\Z", w.category)
        yield


def _check_before_running(
    pipeline: Pipeline, overrides: Sequence[str]
) -> list[warnings.WarningMessage]:
    """:func:`check_pipeline` with this machine's device; its warnings are shown (also when it
    refuses the pipeline) and returned, for the stages not to give them again."""
    said: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as said:
            check_pipeline(pipeline, overrides, device=True)
    finally:
        for w in said:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return said


def _run_one(
    pipeline: Pipeline,
    stage: Stage,
    label: str,
    extra: Sequence[str],
    model: str | None,
    callbacks: Callable[[Stage], Sequence[Callback]] | None,
    announce: Callable[[str], None],
) -> StageResult:
    """Skip, run or resume one stage (``label``: ``stage 2/5 NAME``, for ``announce``)."""
    run_dir = Path(pipeline.output_dir) / stage.name
    done = _finished(run_dir, stage)
    if done is not None:
        announce(f"{label}: finished, skipped")
        return _skipped(stage, run_dir, done, model)
    if stage.kind == "data":
        announce(f"{label} (data, {stage.config})")
        return _run_data(pipeline, stage, extra, model, run_dir, announce)
    cfg = stage_config(pipeline, stage, model, extra)
    resume = run_dir.is_dir() and any(run_dir.iterdir())
    verb = "resuming" if resume else "starting"
    announce(f"{label} ({stage.kind}, {stage.config}): {verb} from {cfg.model.name} in {run_dir}")
    ran = _run_stage(cfg, resume, callbacks(stage) if callbacks else ())
    return _record(stage, ran, "resumed" if resume else "ran", flatten(to_dict(cfg)))


def check_pipeline(
    pipeline: Pipeline,
    overrides: Sequence[str] = (),
    *,
    device: bool = False,
    note: Callable[[str], None] | None = None,
) -> list[TrainConfig | SFTConfig | None]:
    """Every training stage's configuration with ``overrides`` applied (as :func:`run_pipeline`
    takes them), checked as a run checks it before loading anything (with ``device``, this
    machine's device and code sandbox too, as :func:`~rlvr.train.preflight.preflight` does),
    and every data stage's options, the local files it reads (but not those an earlier stage
    writes) and, for ``filter``, its model (``None`` in its place: a data stage has no run
    configuration); each model stage as ``rlvr train --dry-run`` checks its configuration
    (:func:`~rlvr.train.dry_run.dry_run_checks`: its data files read, the run's warnings on
    its data and verifier, ``model.lora`` on the layers of the first model stage's model, read
    without its weights when it can be: every later stage starts from that model's
    architecture), each warning with ``stage 'NAME': `` before it, and ``note`` given a line
    ``stage 'NAME': ...`` for each thing not checked (a device this machine lacks, the Hub
    data sets and, of the first model stage only, the Hub model the run fetches, adapters on
    layers not read here); and that the stages the output directory holds as finished are
    what this run would make (:func:`stage_options`), in an output directory that can be one
    (not a file). Nothing runs."""
    _check_output_dir(Path(pipeline.output_dir))
    names = [s.name for s in pipeline.stages]
    first, rest = _first_model(pipeline.model, overrides, names)
    data = {s.name for s in pipeline.stages if s.kind == "data"}
    by_stage = _split_overrides(rest, names, skip=data)
    configs, produced = [], set()
    model = first  # a filter stage's model: this, until a model stage makes one
    layers = None  # the first model stage's model: every later one has its layers
    for stage in pipeline.stages:
        if stage.kind == "data":  # a data step's options and files; it has no run configuration
            run_dir = Path(pipeline.output_dir) / stage.name
            if _finished(run_dir, stage) is None:  # else only skipped
                options = _check_data(
                    pipeline, stage, by_stage[stage.name], frozenset(produced), model
                )
                _check_sampler(pipeline, stage, options, device, note)
            else:
                data_step(pipeline, stage, by_stage[stage.name])
            produced.add(str((Path(pipeline.output_dir) / stage.name / DATA_FILE).absolute()))
            configs.append(None)
            continue
        model = PRODUCED
        # the first model stage's model stands in for a later stage's (not its config's own,
        # which its run never reads), made by the stages before it
        cfg = stage_config(pipeline, stage, layers or first, by_stage[stage.name])
        own = layers is None  # the first model stage's model is its own; a later one's is made
        layers = layers or cfg.model.name
        try:
            with _named_warnings(stage):
                preflight(cfg, device=device, produced=frozenset(produced))
                said = _stage_note(note, stage)
                dry_run_checks(cfg, said, produced=frozenset(produced), own_model=own)
        except ValueError as err:
            raise ValueError(f"{pipeline.source}: stage {stage.name!r}: {err}") from None
        configs.append(cfg)
    _check_finished(pipeline, by_stage, first)
    return configs


def _check_output_dir(out: Path) -> None:
    """Refuse an output directory that is a file, lies under one, or cannot be made or written
    there (before any stage runs: a stage found it only as it wrote)."""
    existing = next(p for p in (out, *out.absolute().parents) if p.exists())
    if not existing.is_dir():
        raise ValueError(f"output directory {out}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK):
        raise ValueError(f"output directory {out}: {existing} is not writable")


def _stage_note(note: Callable[[str], None] | None, stage: Stage) -> Callable[[str], None]:
    """``note`` of a line with ``stage 'NAME': `` before it; none (the check before a real
    run, which gives no dry run's notes): a ``note`` that says nothing."""

    def said(line: str) -> None:
        if note is not None:
            note(f"stage {stage.name!r}: {line}")

    return said


@contextlib.contextmanager
def _named_warnings(stage: Stage) -> Iterator[None]:
    """Within the block, each warning is given with ``stage 'NAME': `` before its message, for
    the user to know which stage it concerns (also when the block raises)."""
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # the caller's filters see it, as given again below
            yield
    finally:
        for w in caught:
            text = f"stage {stage.name!r}: {w.message}"
            warnings.warn_explicit(text, w.category, w.filename, w.lineno)


def stage_options(
    pipeline: Pipeline, stage: Stage, model: str | None, extra: Sequence[str] = ()
) -> dict[str, Any]:
    """What ``stage`` makes its output from, as its ``stage.json`` records it (dotted keys): a
    model stage's whole configuration (``model.name``: the model it starts from); a data
    stage's step, options, ``input`` file and the file's SHA-256 (``decontaminate``: and
    those of its local ``against`` files and folders; ``filter``: and ``model``)."""
    if stage.kind != "data":
        return flatten(to_dict(stage_config(pipeline, stage, model, extra)))
    return _data_made_from(stage, *data_step(pipeline, stage, extra), model)


def _data_made_from(stage: Stage, options: Any, source: str, model: str | None) -> dict[str, Any]:
    """:func:`stage_options` of a data stage whose step ``options`` and ``source`` are read."""
    made = {"step": stage.config, **dataclasses.asdict(options), "input": source}
    made["input_sha256"] = _sha256(source) if Path(source).is_file() else None
    if stage.config == "decontaminate":  # an edited evaluation file drops other rows
        made["against_sha256"] = [_digest(spec.partition("::")[0]) for spec in options.against]
    if stage.config == "filter":
        made["model"] = model
    return flatten(made)


def _sha256(path: str | Path) -> str:
    """SHA-256 of a file, read in 1 MiB blocks (``hashlib.file_digest`` needs Python 3.11)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _digest(source: str) -> str | None:
    """SHA-256 of a local file, or of a folder's files (their names and digests); ``None`` for
    a named set, a Hub name or a generated set (or a file that is gone)."""
    path = Path(source).expanduser()
    if path.is_file():
        return _sha256(path)
    if not path.is_dir():
        return None
    digest = hashlib.sha256()
    for item in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(f"{item.relative_to(path).as_posix()}\0{_sha256(item)}\n".encode())
    return digest.hexdigest()


def _check_finished(pipeline: Pipeline, by_stage: dict[str, list[str]], model: str | None) -> None:
    """Refuse a finished stage that this run would make otherwise: with other options (those
    of :data:`RUN_KEYS` aside; a ``stage.json`` that records none is taken as it is), or after
    a stage that is not finished (it was made from that stage's earlier output); and a stage
    interrupted after such a stage (:func:`_started`: it would resume from that output). Each
    error names the folders to delete to rerun; nothing is deleted."""
    out, total = Path(pipeline.output_dir), len(pipeline.stages)
    done = [_finished(out / s.name, s) for s in pipeline.stages]
    for index, (stage, record) in enumerate(zip(pipeline.stages, done, strict=True)):
        label = f"stage {index + 1}/{total} {stage.name}"
        after = zip(pipeline.stages[index + 1 :], done[index + 1 :], strict=True)
        later = [out / s.name for s, d in after if d is not None or _started(s, out / s.name)]
        if record is None:
            if later:
                raise ValueError(
                    f"{label} is not finished but later stages are finished or started, made "
                    f"from its earlier output: delete {', '.join(map(str, later))} to rerun them"
                )
            return
        now = stage_options(pipeline, stage, model, by_stage[stage.name])
        changed = _changed(record.get("options"), now)
        if changed:
            folders = ", ".join(map(str, [out / stage.name, *later]))
            raise ValueError(
                f"{label}: finished with other options ({'; '.join(changed)}); to rerun it "
                f"with these, delete {folders}"
            )
        model = _model_of(_skipped(stage, out / stage.name, record, model))


def _started(stage: Stage, run_dir: Path) -> bool:
    """Whether ``stage`` (not finished) left in ``run_dir`` what a rerun continues from: a
    model stage's run (checkpoints, metrics), a ``filter``'s recorded scores. (An interrupted
    ``dedup`` or ``decontaminate`` runs again whole.)"""
    if stage.kind == "data":
        return stage.config == "filter" and passrates_file(run_dir / DATA_FILE).is_file()
    return run_dir.is_dir() and any(run_dir.iterdir())


def _changed(recorded: dict[str, Any] | None, now: dict[str, Any]) -> list[str]:
    """``key: old -> new`` for each option (both record it) that differs, :data:`RUN_KEYS` aside."""
    if recorded is None:  # a stage.json written before options were recorded
        return []
    now = _gone_as_recorded(recorded, now)
    keys = changed_keys(recorded, now, ignore=RUN_KEYS)
    return [f"{k}: {_short(recorded.get(k))} -> {_short(now.get(k))}" for k in keys]


def _gone_as_recorded(recorded: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    """``now`` with the digest of each file a finished data stage read that is gone now
    (``None``) taken as recorded: its output stands, the file may have moved since."""
    now = dict(now)
    if now.get("input_sha256", "") is None:
        now["input_sha256"] = recorded.get("input_sha256")
    old, new = recorded.get("against_sha256"), now.get("against_sha256")
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        now["against_sha256"] = [o if n is None else n for o, n in zip(old, new, strict=True)]
    return now


def _short(value: Any, width: int = 60) -> str:
    """``value`` as JSON, its middle cut to fit ``width`` (a path's end tells paths apart)."""
    text = json.dumps(value)
    half = (width - 3) // 2
    return text if len(text) <= width else f"{text[:half]}...{text[-half:]}"


def _model_of(result: StageResult) -> str | None:
    """The model the stage after ``result``'s starts from."""
    return None if result.model_dir is None else str(result.model_dir)


def _check_data(
    pipeline: Pipeline,
    stage: Stage,
    extra: Sequence[str],
    produced: frozenset[str],
    model: str | None,
) -> Any:
    """A data stage's options, its ``input`` file and the local files in ``against``, read as
    the step reads them (but not those in ``produced``, which earlier stages write:
    :func:`~rlvr.evaluation.data_steps.check_files`), and ``filter``'s model: ``model``
    (:data:`PRODUCED`: an earlier model stage's); returns the options."""
    from rlvr.data import check_source
    from rlvr.models import check_model_dir

    options, source = data_step(pipeline, stage, extra)
    try:
        for spec in getattr(options, "against", ()):
            if spec.partition("::")[0] not in produced:
                _named("against", check_source, spec.partition("::")[0])
        check_files(options, source, produced)
        if stage.config == "filter" and model is None:
            raise ValueError(
                "filter samples with a model: set the pipeline's model (model: in the file, or "
                "model=... on the command line) or put a model stage before it"
            )
        if stage.config == "filter" and model != PRODUCED:
            _named("model", check_model_dir, model)
    except ValueError as err:
        raise ValueError(f"{pipeline.source}: stage {stage.name!r}: {err}") from None
    return options


def _check_sampler(
    pipeline: Pipeline,
    stage: Stage,
    options: Any,
    device: bool,
    note: Callable[[str], None] | None,
) -> None:
    """A ``filter`` stage's sampler (``options``: the stage's) whose package is not installed:
    refused with ``device`` (the check before a real run), else a note (a dry run may be for
    another machine)."""
    if stage.config != "filter":
        return
    key = f"sampler={options.sampler}"
    if not device:
        if line := sampler_note(options.sampler, key):
            _stage_note(note, stage)(line)
    elif missing := missing_package(options.sampler):
        raise ValueError(f"{pipeline.source}: stage {stage.name!r}: {key}: {missing}")


def _named(key: str, check: Callable[[str], None], value: str) -> None:
    """``check(value)``, its error starting with ``key``."""
    try:
        check(value)
    except ValueError as err:
        raise ValueError(f"{key}: {err}") from None


def _skipped(stage: Stage, run_dir: Path, done: dict[str, Any], model: str | None) -> StageResult:
    """The result of a stage finished in an earlier invocation (a data stage passes ``model`` on)."""
    if stage.kind != "data":
        return StageResult(stage.name, run_dir, Path(done["model_dir"]), "skipped", _evals(done))
    return StageResult(
        stage.name,
        run_dir,
        Path(model) if model else None,
        "skipped",
        output=Path(done["output"]),
        counts=done["counts"],
    )


def _first_model(
    model: str | None, overrides: Sequence[str], names: list[str]
) -> tuple[str | None, list[str]]:
    """The first stage's model and the other overrides: ``model=`` / ``model.name=`` on the
    command line (for every stage, or ``FIRST:model=``) replaces the file's ``model``; a later
    stage starts from the previous stage's final model, so a model given to it is refused.
    An override that is not ``key=value`` or ``NAME:key=value`` is refused."""
    _check_syntax(overrides)
    rest = []
    for item in overrides:
        key, _, value = item.partition("=")
        stage, colon, name = key.partition(":")
        stage, name = (stage, name) if colon else (names[0], key)
        if not _names_model(name, value) or stage not in names:
            rest.append(item)  # an unknown stage is named by _split_overrides; model={...} kept
        elif stage != names[0]:
            raise ValueError(
                f"override {item!r}: stage {stage!r} starts from the model the stages before it "
                f"pass on; give the first stage's model instead (model=... or "
                f"{names[0]}:model=...)"
            )
        else:
            model = value
    return model, rest


def _check_syntax(overrides: Sequence[str]) -> None:
    """Refuse a command-line override without ``=`` or without a key (``foo``, ``sft:steps``,
    ``=3``): a data stage would read it as an empty option, the others name no key."""
    for item in overrides:
        key, equals, _ = item.partition("=")
        _, colon, name = key.partition(":")
        if not equals or not (name if colon else key).strip():
            raise ValueError(
                f"override {item!r}: expected key=value (every SFT and RL stage) or NAME:key=value "
                "(stage NAME)"
            )


def _names_model(key: str, value: str) -> bool:
    """Whether ``key=value`` names a stage's model (``model=`` / ``model.name=``; a whole
    ``model={...}`` section is not a model name and passes through)."""
    return key.strip() in MODEL_KEYS and not value.lstrip().startswith("{")


def _split_overrides(
    overrides: Sequence[str], names: list[str], skip: set[str] = frozenset()
) -> dict[str, list[str]]:
    """``key=value`` for every stage but those in ``skip`` (data stages), ``NAME:key=value``
    for stage NAME; one for every stage where every stage is in ``skip`` is refused."""
    out: dict[str, list[str]] = {n: [] for n in names}
    every = [n for n in names if n not in skip]
    for item in overrides:
        key = item.partition("=")[0]
        stage, colon, rest = key.partition(":")
        if not colon and not every:
            raise ValueError(
                f"override {item!r}: reaches no stage (key=value is for every SFT and RL "
                f"stage; give a data stage's option as NAME:key=value: {', '.join(names)})"
            )
        if not colon:
            for name in every:
                out[name].append(item)
            continue
        if stage not in out:
            raise ValueError(f"override {item!r}: no stage {stage!r}; stages: {', '.join(names)}")
        out[stage].append(item[len(stage) + 1 :])
    return out


def _finished(run_dir: Path, stage: Stage) -> dict[str, Any] | None:
    """What ``run_dir/stage.json`` records of ``stage`` finished (``None``: not finished).

    One that records a stage of another kind (the output directory reused by another
    pipeline, or the stage's kind edited), or whose output or final model is gone, is refused,
    naming what to delete; nothing is deleted."""
    path = run_dir / STAGE_FILE
    if not path.is_file():
        return None
    try:
        done = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err}); delete it to rerun the stage") from None
    kind = done.get("kind") if isinstance(done, dict) else None
    if kind != stage.kind:
        raise ValueError(
            f"{path}: records a finished {kind!r} stage, not stage {stage.name!r} of kind "
            f"{stage.kind!r} (another pipeline's output directory?); delete {run_dir} to run "
            "the stage there, or choose another output directory with -o"
        )
    key, what = ("output", "output") if kind == "data" else ("model_dir", "final model")
    made = done.get(key)
    there = isinstance(made, str) and (
        Path(made).is_file() if kind == "data" else Path(made).is_dir()
    )
    if not there:
        raise ValueError(f"{path}: its {what} {made} is gone; delete {path} to rerun the stage")
    return done


def _evals(done: dict[str, Any]) -> dict[int, dict[str, float]]:
    return {int(k): v for k, v in done.get("evals", {}).items()}


def _record(stage: Stage, ran: RunResult, status: str, options: dict[str, Any]) -> StageResult:
    """Mark the stage finished (``stage.json``, written atomically, with ``options``: what
    :func:`stage_options` gives) and return its result.

    A stage stopped after its last checkpoint but before ``stage.json`` was written resumes
    with no step left to run; its final model is then that last checkpoint. The model is
    recorded as an absolute path, so the pipeline continues from any current folder.
    """
    model_dir = ran.model_dir
    if model_dir is None and not ran.metrics:
        model_dir = latest_checkpoint(ran.run_dir)
    if model_dir is None:
        raise ValueError(
            "the stage saved no final model: keep checkpoint.save_final=true in its config"
        )
    model_dir = Path(model_dir).absolute()
    evals = dict(getattr(ran, "evals", {}) or {})
    done = {
        "name": stage.name,
        "kind": stage.kind,
        "config": stage.config,
        "model_dir": str(model_dir),
        "evals": {str(k): v for k, v in evals.items()},
        "options": options,
    }
    write_json(ran.run_dir / STAGE_FILE, done)
    return StageResult(stage.name, ran.run_dir, model_dir, status, evals)


def _write_summary(pipeline: Pipeline, results: list[StageResult]) -> None:
    rows = [
        {
            "name": r.name,
            "run_dir": str(r.run_dir),
            "model_dir": None if r.model_dir is None else str(r.model_dir),
            "status": r.status,
            "evals": {str(k): v for k, v in r.evals.items()},
            **({"output": str(r.output), "counts": r.counts} if r.output else {}),
        }
        for r in results
    ]
    write_json(
        Path(pipeline.output_dir) / SUMMARY_FILE,
        {"source": pipeline.source, "stages": rows, "finished": len(rows) == len(pipeline.stages)},
    )
