"""The checks made before any stage runs (:func:`check_pipeline`; ``rlvr pipeline --dry-run``
gives its notes): every stage's configuration or data step, the output directory, and the
stages it holds as finished against what this run would make."""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from rlvr.dotted import changed_keys
from rlvr.evaluation.data_steps import check_files
from rlvr.evaluation.filtering import passrates_file
from rlvr.generation.registry import missing_package
from rlvr.pipeline.configs import data_step, stage_config, stage_options
from rlvr.pipeline.overrides import _first_model, _split_overrides
from rlvr.pipeline.record import _finished, _skipped
from rlvr.pipeline.spec import DATA_FILE, Pipeline, Stage, _model_of
from rlvr.train.config import SFTConfig, TrainConfig
from rlvr.train.dry_run import dry_run_checks, sampler_note
from rlvr.train.preflight import preflight

RUN_KEYS = ("threads", "log.", "checkpoint.", "model.device", "reward.workers", "workers")
"""Options (dotted-key prefixes) that say how a stage runs, not what it makes: a finished
stage's may differ on a rerun."""
PRODUCED = "<an earlier stage's model>"
"""Stands for a model an earlier stage makes, in the checks before the first stage runs."""


def check_pipeline(
    pipeline: Pipeline,
    overrides: Sequence[str] = (),
    *,
    device: bool = False,
    note: Callable[[str], None] | None = None,
) -> list[TrainConfig | SFTConfig | None]:
    """Every training stage's configuration with ``overrides`` applied (as
    :func:`~rlvr.pipeline.run.run_pipeline` takes them), checked as a run checks it before loading
    anything (with ``device``, this machine's device and code sandbox too, as
    :func:`~rlvr.train.preflight.preflight` does), and every data stage's options, the local files
    it reads (but not those an earlier stage writes) and, for ``filter``, its model (``None`` in its
    place: a data stage has no run configuration); each model stage as ``rlvr train --dry-run``
    checks its configuration (:func:`~rlvr.train.dry_run.dry_run_checks`: its data files read, the
    run's warnings on its data and verifier, ``model.lora`` on the layers of the first model stage's
    model, read without its weights when it can be: every later stage starts from that model's
    architecture), each warning with ``stage 'NAME': `` before it, and ``note`` given a line
    ``stage 'NAME': ...`` for each thing not checked (a device this machine lacks, the Hub data sets
    and, of the first model stage only, the Hub model the run fetches, adapters on layers not read
    here); and that the stages the output directory holds as finished are what this run would make
    (:func:`~rlvr.pipeline.configs.stage_options`), in an output directory that can be one (not a
    file). Nothing runs."""
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
            _check_data_stage(pipeline, stage, by_stage[stage.name], produced, model, device, note)
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


def _check_data_stage(
    pipeline: Pipeline,
    stage: Stage,
    overrides: list[str],
    produced: set[str],
    model: str | None,
    device: bool,
    note: Callable[[str], None] | None,
) -> None:
    """A data stage's options, the files it reads and its sampler; a finished one's options only
    (it is skipped)."""
    if _finished(Path(pipeline.output_dir) / stage.name, stage) is None:
        options = _check_data(pipeline, stage, overrides, frozenset(produced), model)
        _check_sampler(pipeline, stage, options, device, note)
    else:
        data_step(pipeline, stage, overrides)


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
