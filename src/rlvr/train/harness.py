"""The run harness shared by RL (``rlvr train``) and SFT (``rlvr sft``).

A run is three calls, each visible in ``train`` and ``sft``::

    cfg, run = start_run(cfg, resume=resume)   # run directory, threads, seeds; writes nothing
    job = build_run(cfg, run.path, run.checkpoint)   # the job: models, data, optimiser
    return run_job(cfg, run, job, callbacks=callbacks)

:func:`start_run` finds the run directory (and the checkpoint to resume from) and sets
threads and seeds; :func:`run_job` owns everything a run does around its steps: the
directory's ``config.yaml``, restoring a checkpoint (optimiser, schedule, RNG, data order,
held-out scores; the job loaded the weights), the step loop with evaluation and checkpoints
on schedule, metrics (JSONL, TensorBoard, W&B), each evaluation's report (``eval_reports/``),
the progress bar, the plots at the end, the held-out change with its paired interval, and
the :class:`Callback` hooks. What differs between RL and SFT is a :class:`Job`: how it is
built, what one step does, and what its evaluation measures. The harness reads only the
:class:`~rlvr.train.config.RunConfig` part of a configuration.

Callbacks let tools observe a run without touching its code::

    class Timer(Callback):
        def on_step(self, job, step, record):
            print(step, record.metrics["time/step"])

    train(cfg, callbacks=[Timer()])
"""

from __future__ import annotations

import contextlib
import math
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch

from rlvr.evaluation.paired import Difference
from rlvr.train.checkpoint import (
    TrainerState,
    due,
    latest_checkpoint,
    load_trainer_state,
    save_checkpoint,
    seed_everything,
)
from rlvr.train.config import RunConfig
from rlvr.train.eval_reports import drop_reports_after, paired_change, write_report
from rlvr.train.interrupt import (
    ASKED,
    ASKED_BEFORE_TRAINING,
    ResumableError,
    Stopped,
    StopRequest,
)
from rlvr.train.metrics import METRICS_FILE, MetricsWriter, read_metrics
from rlvr.train.overrides import to_dict
from rlvr.train.plots import plot_runs
from rlvr.train.progress import Headline, ProgressReporter
from rlvr.train.prompts import IndexSampler
from rlvr.train.run_dir import (
    RunDir,
    expand_output_dir,
    locate_run_dir,
    only_run,
    open_run_dir,
)


@dataclass(frozen=True)
class StepRecord:
    """What one step produced."""

    metrics: dict[str, Any]
    """Metric name -> value (``docs/metrics.md``)."""
    samples: list[dict[str, Any]] = field(default_factory=list)
    """A few completions for ``samples.jsonl``."""
    prompts: list[Any] = field(default_factory=list)
    """RL: the prompts (``rlvr.train.prompts.Prompt``) the step sampled from, in order."""


@dataclass(frozen=True)
class EvalRecord:
    """What one evaluation produced."""

    metrics: dict[str, float]
    """Written into the step's row (``eval/avg@4``, ``time/eval``, ...)."""
    scores: dict[str, float]
    """The headline scores kept by step in :attr:`RunResult.evals` (``avg@4``, ``pass@4``)."""
    report: Any = None
    """The full evaluation report with per-problem results (RL: an ``EvalReport``), for callbacks."""
    document: dict[str, Any] | None = None
    """Its JSON report as ``rlvr eval`` writes it (RL), written to
    ``<run>/eval_reports/step_N.json`` (:mod:`rlvr.train.eval_reports`); ``None``: none is."""


class Job(Protocol):
    """One run's state and its step, as :func:`run_job` drives it."""

    title: str
    """Progress-bar title (``train``, ``sft``)."""
    shown: Sequence[tuple[str, str] | Headline]
    """What the progress bar shows: :class:`~rlvr.train.progress.Headline` entries or
    ``(metric, label)`` pairs."""
    total_steps: int
    """Last step of the run."""
    model: torch.nn.Module
    """The model being trained (saved in every checkpoint)."""
    tokenizer: Any
    """Its tokenizer (saved beside it)."""
    optimizer: torch.optim.Optimizer
    """Restored from and saved to checkpoints."""
    scheduler: Any
    """Learning-rate schedule, likewise."""
    order: IndexSampler
    """Data order, likewise."""

    def step(self, step: int) -> StepRecord:
        """Run step ``step`` (1-based)."""
        ...

    def evaluate(self, step: int) -> EvalRecord | None:
        """The evaluation after ``step`` (0: before training), or ``None`` when none is due."""
        ...

    def close(self) -> None:
        """Release what the job holds (verifier workers, sampler engines)."""
        ...


class Callback:
    """Hooks of a run; override the ones you need (each default does nothing)."""

    def on_start(self, job: Job, start_step: int) -> None:
        """After the job is built (and restored), before the first step of this process."""

    def on_step(self, job: Job, step: int, record: StepRecord) -> None:
        """After step ``step``'s metrics are written."""

    def on_eval(self, job: Job, step: int, record: EvalRecord) -> None:
        """After an evaluation (step 0: before training)."""

    def on_checkpoint(self, job: Job, step: int, path: Path) -> None:
        """After a checkpoint is written to ``path``."""

    def on_end(self, job: Job, result: RunResult) -> None:
        """After the last step, the plots and the result."""


@dataclass(frozen=True)
class RunResult:
    """Where a run wrote its outputs, and its held-out scores."""

    run_dir: Path
    """Run directory (config, metrics.jsonl, samples.jsonl, eval_reports/, tb/, checkpoints/)."""
    model_dir: Path | None
    """Final checkpoint (a plain HF model directory), if saved."""
    metrics: dict[str, float | None]
    """Metrics of the last step."""
    evals: dict[int, dict[str, float]] = field(default_factory=dict)
    """Held-out scores by step (step 0: before training)."""
    plots: list[Path] = field(default_factory=list)
    """PNG files written at the end."""
    change_intervals: dict[str, Difference] = field(default_factory=dict)
    """The held-out change of :meth:`change_points` paired by problem (fractions, not points;
    :mod:`rlvr.evaluation.paired`) from the reports in ``<run>/eval_reports/``; empty when
    there is no change or no reports to pair."""

    def summary_lines(self) -> list[str]:
        """What the command line prints at the end."""
        lines = [
            f"{name:<18}" + "  ".join(f"{k} {v:.3f}" for k, v in shown_scores(m).items())
            for name, m in self._eval_rows()
        ]
        change = shown_scores(self.change_points())
        if change or self.change_values():
            lines.append(f"{'held-out change:':<18}" + self._change_text(change))
        lines.append(f"metrics:          {self.run_dir / METRICS_FILE}")
        if self.plots:
            lines.append(f"plots:            {self.plots[0].parent}")
        if self.model_dir is not None:
            lines.append(f"model:            {self.model_dir}")
        return lines

    def _eval_rows(self):
        for step in sorted(self.evals):
            yield (f"held-out @ {step}:" if step else "held-out before:"), self.evals[step]

    def _change_text(self, change: Mapping[str, float]) -> str:
        """``avg@4 +25.4 pts [+21.0, +29.8]  ...``, with how many problems the intervals pair;
        a score that is no share as ``eval_loss 2.310 -> 1.870 (-0.440)``."""
        parts, problems = [], None
        for name, points in change.items():
            d = self.change_intervals.get(name)
            if d is None or math.isnan(d.low):
                parts.append(f"{name} {points:+.1f} pts")
                continue
            parts.append(f"{name} {points:+.1f} pts [{100 * d.low:+.1f}, {100 * d.high:+.1f}]")
            problems = d.problems
        for name, (before, after) in self.change_values().items():
            parts.append(f"{name} {before:.3f} -> {after:.3f} ({after - before:+.3f})")
        said = "" if problems is None else f"  (95%, paired over {problems} problems)"
        return "  ".join(parts) + said

    def _first_and_last(self) -> tuple[dict[str, float], dict[str, float]] | None:
        """The scores before training and of the last evaluation (``None``: not both)."""
        steps = sorted(self.evals)
        if len(steps) < 2 or steps[0] != 0:
            return None
        return self.evals[0], self.evals[steps[-1]]

    def change_points(self) -> dict[str, float]:
        """Held-out gain of the run's shares (``avg@k``, ``pass@k``, ``maj@k``) in points: last
        evaluation minus the one before training."""
        ends = self._first_and_last()
        if ends is None:
            return {}
        first, last = ends
        return {k: 100 * (last[k] - first[k]) for k in first if k in last and is_share(k)}

    def change_values(self) -> dict[str, tuple[float, float]]:
        """The run's other held-out scores (SFT's ``eval_loss``, in nats) before training and
        at the last evaluation, as they are: ``{name: (before, after)}``."""
        ends = self._first_and_last()
        if ends is None:
            return {}
        first, last = ends
        return {k: (first[k], last[k]) for k in first if k in last and not is_share(k)}


def set_threads(threads: int | None) -> None:
    """Limit torch's CPU threads (``None`` leaves torch's default)."""
    if threads is not None:
        torch.set_num_threads(threads)


C = TypeVar("C", bound=RunConfig)


def start_run(config: C, *, resume: bool = False) -> tuple[C, RunDir]:
    """``config`` with ``{time}`` in ``log.output_dir`` expanded, and its run directory (the
    checkpoint to resume from, if any); threads and seeds set, nothing written yet.

    ``resume`` continues from the latest checkpoint in ``config.log.output_dir``.
    """
    config = expand_output_dir(config, resume=resume)
    run = locate_run_dir(config, resume=resume)
    set_threads(config.threads)
    seed_everything(config.seed)
    return config, run


def run_job(
    config: RunConfig, run: RunDir, job: Job, *, callbacks: Sequence[Callback] = ()
) -> RunResult:
    """Drive ``job``, built under ``config`` in ``run`` (both from :func:`start_run`), to its
    last step; ``run.checkpoint`` restores the rest of its state (the job loaded the weights)."""
    loop, held = _Loop(config, job, run, list(callbacks)), contextlib.ExitStack()
    try:
        if run.checkpoint is not None:  # a damaged checkpoint stops it here, as a failed build
            loop.restore(run.checkpoint)
        held.enter_context(only_run(run.path))  # one run at a time writes in the directory
        finished = loop.restored is not None and loop.start_step >= job.total_steps
        # only now: a failed build or restore leaves no trace; a finished run, no new record
        open_run_dir(config, run, finished=finished)
        row, model_dir = loop.run()
    except KeyboardInterrupt:
        _say_how_to_resume(run.path)
        raise
    except OSError as err:  # a full disk, a folder made read-only: say how the run continues
        raise OSError(f"{err}; once fixed, {_how_to_resume(run.path)}") from err
    except ResumableError as err:  # a generation worker failed: the steps before it stand
        raise type(err)(f"{err}; {_how_to_resume(run.path)}") from err
    finally:
        loop.close()
        held.close()
    plots = _plot(run.path) if config.log.plots else []
    intervals = _change_intervals(run.path, loop.evals)
    result = RunResult(run.path, model_dir, row, dict(loop.evals), plots, intervals)
    loop.notify("on_end", result)
    return result


def _change_intervals(
    run_dir: Path, evals: Mapping[int, Mapping[str, float]]
) -> dict[str, Difference]:
    """The paired intervals of the held-out change (:func:`paired_change`) for the ``avg@k``
    and ``pass@k`` of the run's held-out scores."""
    names = {name for scores in evals.values() for name in scores}
    ks = sorted({int(k) for name in names for k in [name.partition("@")[2]] if k.isdigit()})
    return paired_change(run_dir, list(evals), ks)


def _plot(run_dir: Path) -> list[Path]:
    """The run's plots; one that cannot be written is a warning: the run itself is done."""
    try:
        return plot_runs({run_dir.name: read_metrics(run_dir / METRICS_FILE)}, run_dir / "plots")
    except OSError as err:
        warnings.warn(f"plots not written ({err}); rlvr plot {run_dir} draws them", stacklevel=3)
        return []


def is_share(name: str) -> bool:
    """Whether held-out score ``name`` is a share of problems (``avg@4``, ``pass@4``, ``maj@4``:
    its change is in percentage points), not a value such as SFT's ``eval_loss``.

    >>> is_share("pass@4"), is_share("eval_loss")
    (True, False)
    """
    return "@" in name


def shown_scores(scores: Mapping[str, float]) -> dict[str, float]:
    """The held-out scores a printed line gives, each number once: ``avg@k`` of the largest k
    only (every k's is the same estimate, the share correct), ``pass@k`` and ``maj@k`` for
    k > 1 (``pass@1`` and ``maj@1`` are ``avg@1``); other scores as they are. ``metrics.jsonl`` and ``eval_reports/`` keep them all.

    >>> shown_scores({"avg@1": 0.6, "pass@1": 0.6, "maj@1": 0.6, "avg@4": 0.6, "pass@4": 0.9})
    {'avg@4': 0.6, 'pass@4': 0.9}
    """

    def k_of(name: str) -> int:
        return int(name.partition("@")[2])

    avgs = [name for name in scores if name.startswith("avg@")]
    top = max(avgs, key=k_of, default=None)
    return {
        name: value
        for name, value in scores.items()
        if not (name.startswith("avg@") and name != top)
        and not (name.startswith(("pass@", "maj@")) and k_of(name) == 1 and top is not None)
    }


def _held_out(when: str, scores: Mapping[str, float]) -> str:
    """The progress line of one held-out evaluation."""
    shown = shown_scores(scores)
    return f"held-out {when}: " + "  ".join(f"{k} {v:.3f}" for k, v in shown.items())


def _say_how_to_resume(run_dir: Path) -> None:
    """After Ctrl-C: where the run can continue from (its checkpoints stay)."""
    print(f"interrupted: {_how_to_resume(run_dir)}", file=sys.stderr)


def _how_to_resume(run_dir: Path) -> str:
    """The command that continues the run in ``run_dir``, and from where."""
    checkpoint = latest_checkpoint(run_dir)
    where = f"from {checkpoint.name}" if checkpoint else "from the start (no checkpoint yet)"
    return f"--resume {run_dir} (in a pipeline or a study: running it again) continues {where}"


class _Loop:
    """The step loop of one process: writers, schedule, checkpoints, callbacks."""

    def __init__(self, config: RunConfig, job: Job, run: RunDir, callbacks: list[Callback]) -> None:
        self.config, self.job, self.run_dir, self.callbacks = config, job, run.path, callbacks
        self.resume = run.resume
        self.start_step, self.evals = 0, {}
        self.restored: Path | None = None
        self.writer: MetricsWriter | None = None
        self.progress: ProgressReporter | None = None

    def restore(self, checkpoint: Path) -> None:
        """Optimiser, schedule, RNG, data order and held-out scores from ``checkpoint``."""
        state = load_trainer_state(checkpoint, self.job.optimizer, self.job.scheduler)
        if state.step > self.job.total_steps:  # it would "finish" without a step, unasked
            raise ValueError(
                f"--resume {self.run_dir}: the run is at step {state.step} ({checkpoint.name}), "
                f"past this configuration's last step {self.job.total_steps}: resume with more "
                "steps (steps=... / epochs=...), or start a new run"
            )
        self.job.order.load_state_dict(state.data)
        self.start_step, self.restored = state.step, checkpoint
        self.evals = {int(k): v for k, v in state.extra.get("evals", {}).items()}

    def notify(self, hook: str, *args: Any) -> None:
        for callback in self.callbacks:
            getattr(callback, hook)(self.job, *args)

    def run(self) -> tuple[Mapping[str, Any], Path | None]:
        """Steps ``start + 1 .. total``; returns the last row and the last checkpoint (a resumed
        run with no step left: the checkpoint it was restored from). A first Ctrl-C stops
        after the step in flight, with a checkpoint (:mod:`rlvr.train.interrupt`); one during
        the evaluation before training stops once it ends, before any step, with none."""
        job = self.job
        self._open_sinks()
        row, model_dir = {}, None
        if self.start_step >= job.total_steps:
            model_dir = self.restored
        with StopRequest() as stop:
            if self.start_step == 0:
                stop.said = ASKED_BEFORE_TRAINING
                self._evaluate_before()
                stop.said = ASKED
            if stop.asked:  # during the evaluation before training: no step in flight to save
                raise Stopped(stop.signum)
            for step in range(self.start_step + 1, job.total_steps + 1):
                row = self._record(step, job.step(step))
                stopping = stop.asked and step < job.total_steps
                if stopping or due(step, job.total_steps, self.config.checkpoint):
                    model_dir = self._checkpoint(step)
                if stopping:
                    raise Stopped(stop.signum)
        return row, model_dir

    def _open_sinks(self) -> None:
        """The metric writer and the progress bar; the job's notes; ``on_start``."""
        job, config = self.job, self.config
        # A resume with no checkpoint starts over: whatever was logged before (step >= 0) goes.
        resumed = self.start_step if self.start_step else (-1 if self.resume else None)
        if resumed is not None:  # their steps run again, as the rows of metrics.jsonl
            drop_reports_after(self.run_dir, resumed)
        self.writer = MetricsWriter(
            self.run_dir, config.log, resume_step=resumed, config=to_dict(config)
        )
        self.progress = ProgressReporter(
            config.log,
            total=job.total_steps,
            start=self.start_step,
            title=job.title,
            shown=job.shown,
        )
        for line in getattr(job, "notes", ()):
            self.progress.message(line)
        self.notify("on_start", self.start_step)

    def _evaluate_before(self) -> None:
        record = self.job.evaluate(0)
        if record is None:
            return
        self.writer.write(0, record.metrics)
        self._write_report(0, record)
        self.evals[0] = record.scores
        self.progress.message(_held_out("before training", record.scores))
        self.notify("on_eval", 0, record)

    def _record(self, step: int, record: StepRecord) -> Mapping[str, Any]:
        """Step ``step``'s row with its evaluation (when due) written, shown and announced."""
        metrics = dict(record.metrics)
        evaluation = self.job.evaluate(step)
        if evaluation is not None:
            metrics.update(evaluation.metrics)
            self.evals[step] = evaluation.scores
        row = self.writer.write(step, metrics)
        if evaluation is not None:
            self._write_report(step, evaluation)
        self.writer.write_samples(step, record.samples)
        self.progress.step(step, row)
        if evaluation is not None:
            self.progress.message(_held_out(f"at step {step}", evaluation.scores))
            self.notify("on_eval", step, evaluation)
        self.notify("on_step", step, StepRecord(dict(row), record.samples, record.prompts))
        return row

    def _write_report(self, step: int, record: EvalRecord) -> None:
        """The evaluation's JSON report to ``<run>/eval_reports/`` (a job that gives one)."""
        if record.document is not None:
            write_report(self.run_dir, step, record.document)

    def _checkpoint(self, step: int) -> Path:
        job = self.job
        state = TrainerState(step=step, data=job.order.state_dict(), extra={"evals": self.evals})
        path = save_checkpoint(
            self.run_dir,
            job.model,
            job.tokenizer,
            job.optimizer,
            job.scheduler,
            state,
            keep_last=self.config.checkpoint.keep_last,
        )
        self.notify("on_checkpoint", step, path)
        return path

    def close(self) -> None:
        try:
            self.job.close()
        finally:
            for sink in (self.writer, self.progress):
                if sink is not None:
                    sink.close()
