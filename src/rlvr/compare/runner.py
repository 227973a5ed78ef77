"""Run every arm x seed of a study, each in its own process, reusing and resuming runs.

Each run is ``python -m rlvr.compare.worker RUN_DIR`` (the trainer with a recording
callback), at most ``jobs`` at a time. A run whose ``final.json`` exists is finished and
not run again; a run directory without it is resumed from its latest checkpoint (or
started over if it has none). Progress is a live table on a terminal and one line per
event otherwise. A failed run is reported with its log and the others go on. Ctrl-C stops
each running worker as ``rlvr train`` stops (after the step in flight, with a checkpoint);
a second Ctrl-C terminates them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import rlvr
from rlvr.compare.study import RunSpec
from rlvr.compare.worker import (
    FINAL_FILE,
    LOG_FILE,
    PROGRESS_FILE,
    RUN_FILE,
    RUNNER_ENV,
    STOP_AFTER_STEP,
    STOP_NOW,
)
from rlvr.locks import refuse_if_held
from rlvr.train.checkpoint import CHECKPOINTS_DIR
from rlvr.train.interrupt import signal_name, sigterm_as_ctrl_c
from rlvr.train.overrides import dump_yaml
from rlvr.train.run_dir import LOCK_FILE as RUN_LOCK

POLL_S = 0.5
PLAIN_EVERY_S = 60.0


def default_jobs(threads: int | None, cores: int | None = None) -> int:
    """Parallel runs that fit the machine: ``cores // threads`` (at least 1)."""
    if cores is None:
        affinity = getattr(os, "sched_getaffinity", None)
        cores = len(affinity(0)) if affinity else (os.cpu_count() or 1)
    return max(1, cores // max(1, threads or 1))


@dataclass
class RunState:
    """What the runner knows about one run."""

    spec: RunSpec
    status: str = "queued"
    """``done`` (finished earlier), ``queued``, ``running``, ``finished``, ``failed``."""
    resumed: bool = False
    step: int = 0
    started: float = 0.0
    elapsed: float = 0.0
    returncode: int | None = None
    process: subprocess.Popen | None = None

    @property
    def total(self) -> int:
        return self.spec.config.steps

    @property
    def log(self) -> Path:
        return self.spec.run_dir / LOG_FILE

    @property
    def last_log_line(self) -> str:
        """The last non-blank line of the run's log (a failed run's error); ``""`` if none."""
        with contextlib.suppress(OSError):
            lines = self.log.read_text(errors="replace").splitlines()
            return next((line.strip() for line in reversed(lines) if line.strip()), "")
        return ""

    def read_progress(self) -> None:
        with contextlib.suppress(OSError, ValueError, KeyError):
            self.step = int(json.loads((self.spec.run_dir / PROGRESS_FILE).read_text())["step"])


def is_finished(spec: RunSpec) -> bool:
    """The run wrote ``final.json`` (its last step, evaluation and checkpoint are done)."""
    return (spec.run_dir / FINAL_FILE).is_file()


def initial_states(specs: list[RunSpec], *, fresh: bool = False) -> list[RunState]:
    """A state per run: finished runs are ``done``; ``fresh`` deletes every run directory first
    (none when one of them is being written: another ``rlvr compare`` runs it)."""
    for spec in specs if fresh else ():
        refuse_if_held(
            spec.run_dir / RUN_LOCK,
            f"--fresh: {spec.run_dir} is being written by another run (another rlvr compare "
            "with this --out?); nothing deleted: wait for it to end",
        )
    states = []
    for spec in specs:
        if fresh and spec.run_dir.exists():
            shutil.rmtree(spec.run_dir)
        state = RunState(spec)
        if is_finished(spec):
            state.status, state.step = "done", spec.config.steps
        elif spec.run_dir.exists():
            state.resumed = True
            state.read_progress()
        states.append(state)
    return states


def worker_env() -> dict[str, str]:
    """The environment of a worker: this process's, with this copy of ``rlvr`` importable first
    and this process's id (the worker stops when it is no longer its parent)."""
    src = str(Path(rlvr.__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH", "")
    return {
        **os.environ,
        "PYTHONPATH": src + (os.pathsep + path if path else ""),
        "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"),
        "TOKENIZERS_PARALLELISM": "false",
        RUNNER_ENV: str(os.getpid()),
    }


def launch(state: RunState, imports: tuple[str, ...] = ()) -> None:
    """Start the worker of ``state`` (its config written to ``run.yaml``, output to ``worker.log``)."""
    run_dir = state.spec.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / RUN_FILE).write_text(dump_yaml(state.spec.config))
    with state.log.open("a") as log:
        log.write(
            f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {'resume' if state.resumed else 'start'}\n"
        )
        log.flush()
        state.process = subprocess.Popen(
            [sys.executable, "-m", "rlvr.compare.worker", str(run_dir), *imports],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=worker_env(),
            start_new_session=True,  # Ctrl-C reaches the runner only, which stops each once
        )
    state.status, state.started = "running", time.monotonic()


def _reap(state: RunState, keep_checkpoints: bool = False) -> bool:
    """True when the worker of a running state has exited (status updated). A finished run's
    checkpoints go unless ``keep_checkpoints``: the report reads ``metrics.jsonl``,
    ``evals/`` and ``final.json``, and a finished run is never resumed (on SmolLM2-135M a
    checkpoint with its optimiser state is 1.6 GB)."""
    code = state.process.poll()
    if code is None:
        state.elapsed = time.monotonic() - state.started
        state.read_progress()
        return False
    state.returncode, state.process = code, None
    state.elapsed = time.monotonic() - state.started
    state.read_progress()
    state.status = "finished" if code == 0 and is_finished(state.spec) else "failed"
    if state.status == "finished" and not keep_checkpoints:
        shutil.rmtree(state.spec.run_dir / CHECKPOINTS_DIR, ignore_errors=True)
    return True


def execute(
    states: list[RunState],
    jobs: int,
    display,
    imports: tuple[str, ...] = (),
    keep_checkpoints: bool = False,
    on_finished: Callable[[RunSpec], None] | None = None,
) -> list[RunState]:
    """Run the queued states, ``jobs`` at a time, telling ``display`` what happens and
    ``on_finished`` each run that finishes: an error it raises starts no more runs and stops
    each running one after its step in flight, with a checkpoint (:func:`_terminate`)."""
    queue = [s for s in states if s.status == "queued"]
    running: list[RunState] = []
    with sigterm_as_ctrl_c():  # kept while the runs stop: a second SIGTERM stops them at once
        try:
            while queue or running:
                while queue and len(running) < jobs:
                    state = queue.pop(0)
                    launch(state, imports)
                    running.append(state)
                    display.event(state, "resumed" if state.resumed else "started")
                time.sleep(POLL_S)
                for state in list(running):
                    if _reap(state, keep_checkpoints):
                        running.remove(state)
                        display.event(state, state.status)
                        if on_finished is not None and state.status == "finished":
                            on_finished(state.spec)
                display.refresh(states)
        except KeyboardInterrupt as stop:
            _stop(running, keep_checkpoints, getattr(stop, "signum", signal.SIGINT))
            raise
        except BaseException:
            _terminate(running, keep_checkpoints)
            raise
    return states


STOPPING = (
    "{name}: each running run stops after its step in flight with a checkpoint "
    "(Ctrl-C or SIGTERM again stops them at once, without one)"
)


def _stop(
    running: list[RunState], keep_checkpoints: bool = False, signum: int = signal.SIGINT
) -> None:
    """Ask each running worker to stop as ``rlvr train`` does on Ctrl-C (after the step in
    flight, with a checkpoint) and wait for it; a second Ctrl-C or SIGTERM terminates them at
    once. A run whose step in flight was its last finishes, and its checkpoints go
    (:func:`_reap`). ``signum``: the signal that asked."""
    print(STOPPING.format(name=signal_name(signum)), file=sys.stderr, flush=True)
    try:
        for state in running:
            if state.process is not None:  # after its step, unless already stopping
                state.process.send_signal(STOP_AFTER_STEP)
        for state in running:
            if state.process is not None:
                state.process.wait()
                _reap(state, keep_checkpoints)
    except KeyboardInterrupt:
        _terminate(running, keep_checkpoints)
        raise


def _terminate(running: list[RunState], keep_checkpoints: bool = False) -> None:
    """Send each running worker the runner's second stop (:data:`STOP_NOW`) and wait for it:
    a killed study leaves resumable runs, not orphans. A worker already asked stops at once,
    else after its step in flight, with a checkpoint."""
    for state in running:
        if state.process is not None:
            state.process.send_signal(STOP_NOW)
            state.process.wait()
            _reap(state, keep_checkpoints)
