"""Running a pipeline (:func:`run_pipeline`): the checks before any stage runs, then each stage
in order, skipped when finished and resumed when interrupted, one run at a time in an output
directory (``.pipeline.lock``)."""

from __future__ import annotations

import contextlib
import re
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from rlvr.data.rowfiles import StepReport
from rlvr.dotted import flatten
from rlvr.evaluation.data_steps import run_step
from rlvr.evaluation.filtering import passrates_file
from rlvr.evaluation.harness import progress_lines
from rlvr.locks import holding
from rlvr.pipeline.checks import _check_finished, check_pipeline
from rlvr.pipeline.configs import _data_made_from, data_step, stage_config
from rlvr.pipeline.overrides import _first_model, _split_overrides
from rlvr.pipeline.record import _finished, _record, _record_data, _skipped, _write_summary
from rlvr.pipeline.spec import DATA_FILE, Pipeline, Stage, StageResult, _model_of
from rlvr.train.config import SFTConfig, TrainConfig
from rlvr.train.harness import Callback
from rlvr.train.overrides import to_dict
from rlvr.train.run_dir import TIME_FORMAT

LOCK_FILE = ".pipeline.lock"
"""Held in the output directory while a pipeline runs there (:func:`_only_run`)."""


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


def _check_before_running(
    pipeline: Pipeline, overrides: Sequence[str]
) -> list[warnings.WarningMessage]:
    """:func:`~rlvr.pipeline.checks.check_pipeline` with this machine's device; its warnings are
    shown (also when it refuses the pipeline) and returned, for the stages not to give them
    again."""
    said: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as said:
            check_pipeline(pipeline, overrides, device=True)
    finally:
        for w in said:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return said


def _only_run(out: Path) -> contextlib.AbstractContextManager[None]:
    """Hold ``out/.pipeline.lock`` (``out`` made) while the stages run; a second pipeline run
    in ``out`` is refused (it ran the same stages at once, the two writing over each other's
    checkpoints and metrics). The lock goes with the process, also when it is killed."""
    return holding(
        out / LOCK_FILE,
        f"{out}: another rlvr pipeline is running there (it holds {out / LOCK_FILE}); "
        "wait for it to end, or choose another output directory with -o",
    )


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


def _run_stage(cfg: TrainConfig | SFTConfig, resume: bool, callbacks: Sequence[Callback]):
    """Run (or with ``resume``, continue) a model stage: ``rlvr sft``'s job for an SFT
    configuration, else ``rlvr train``'s."""
    if isinstance(cfg, SFTConfig):
        from rlvr.train.supervised import sft

        return sft(cfg, resume=resume, callbacks=callbacks)
    from rlvr.train.loop import train

    return train(cfg, resume=resume, callbacks=callbacks)


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
    status = "resumed" if resumed else "ran"
    return _record_data(stage, report, status, made, run_dir=run_dir, source=source, model=model)
