"""What a finished stage leaves in its run directory (``stage.json``: its final model or kept
rows, and what it was made from) and a run in the output directory (``pipeline.json``), and a
``stage.json`` read back (:func:`_finished`, :func:`_skipped`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlvr.atomic import write_json
from rlvr.data.rowfiles import StepReport
from rlvr.pipeline.spec import STAGE_FILE, SUMMARY_FILE, Pipeline, Stage, StageResult
from rlvr.train.checkpoint import latest_checkpoint
from rlvr.train.harness import RunResult


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


def _evals(done: dict[str, Any]) -> dict[int, dict[str, float]]:
    """Held-out scores by step, as a ``stage.json`` records them (JSON keys are strings)."""
    return {int(k): v for k, v in done.get("evals", {}).items()}


def _record(stage: Stage, ran: RunResult, status: str, options: dict[str, Any]) -> StageResult:
    """Mark the stage finished (``stage.json``, written atomically, with ``options``: what
    :func:`~rlvr.pipeline.configs.stage_options` gives) and return its result.

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


def _record_data(
    stage: Stage,
    report: StepReport,
    status: str,
    options: dict[str, Any],
    *,
    run_dir: Path,
    source: str,
    model: str | None,
) -> StageResult:
    """Mark a data stage finished (``run_dir/stage.json``, written atomically: its input
    ``source``, its kept rows and counts from ``report``, and ``options``: what
    :func:`~rlvr.pipeline.configs.stage_options` gives) and return its result, which passes
    ``model`` on."""
    counts = {"kept": report.kept, **report.dropped}
    output = report.output.absolute()  # as recorded: pipeline.json the same when it is skipped
    done = {
        "name": stage.name,
        "kind": stage.kind,
        "config": stage.config,
        "input": source,
        "output": str(output),
        "counts": counts,
        "options": options,
    }
    write_json(run_dir / STAGE_FILE, done)
    model_dir = Path(model) if model else None
    return StageResult(stage.name, run_dir, model_dir, status, output=output, counts=counts)


def _write_summary(pipeline: Pipeline, results: list[StageResult]) -> None:
    """Write ``pipeline.json`` in the output directory: the file the pipeline was read from,
    each stage's result so far, and whether every stage is finished."""
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
