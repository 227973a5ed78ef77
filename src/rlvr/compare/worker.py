"""One study run in its own process: ``python -m rlvr.compare.worker RUN_DIR [MODULE ...]``.

The runner writes ``RUN_DIR/run.yaml`` (the run's resolved configuration); the worker trains
it exactly as ``rlvr train --config RUN_DIR/run.yaml`` would (after importing the study's
``imports``, e.g. a module registering a custom verifier), resuming from the latest
checkpoint when the directory already holds one, with a :class:`StudyRecorder` callback
that writes what the report needs and the trainer does not keep:

- ``progress.json`` after every step (``step``, ``total``) for the runner's live table;
- ``evals/step_NNNNNN.json`` after every evaluation: each held-out problem's ``n``, ``c``
  and answer diversity (the paired interval counts the problems' variance);
- ``final.json`` at the end (written last, atomically): the run is finished when it exists;
  it names the rlvr source that made the run (:func:`code_hash`) and the source of your
  modules it imported (:func:`module_hashes`), since a finished run is reused whatever the
  code does now.

A worker started by the runner stops when the runner is gone (:func:`stop_with_runner`), as it
does when the runner stops it: a runner killed with SIGKILL cannot stop its workers, and a
second ``rlvr compare`` would then resume a run directory the orphan still writes.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlvr.atomic import write_json
from rlvr.train.harness import Callback
from rlvr.train.interrupt import Stopped, ask_to_stop, stop_asked

RUN_FILE = "run.yaml"
PROGRESS_FILE = "progress.json"
FINAL_FILE = "final.json"
EVALS_DIR = "evals"
LOG_FILE = "worker.log"
RUNNER_ENV = "RLVR_STUDY_RUNNER"
"""The environment variable in which the runner gives its workers its process id."""


def read_final(run_dir: Path) -> dict[str, Any]:
    """The ``final.json`` of a finished run; a damaged one (edited, or a disk fault) is refused
    in one line naming it and the run folder to delete to make that run again."""
    path = run_dir / FINAL_FILE
    try:
        final = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        final, why = None, str(err)
    else:
        why = "not a JSON object"
    if not isinstance(final, dict):
        raise ValueError(f"{path}: damaged ({why}); delete {run_dir} to run that run again")
    return final


def code_hash() -> str:
    """12 hex digits of the rlvr source this process runs (the package's ``.py`` files)."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def own_modules(config: Any, imports: Sequence[str] = ()) -> tuple[str, ...]:
    """The modules of yours a run of ``config`` imports: the study's ``imports`` and the module
    of a dotted objective, verifier or contrast name (``objective.name=my_module.mine``)."""
    names = (
        config.objective.name,
        config.reward.verifier.split("+")[0].split(":")[0],
        *(str(c).split(":")[0] for c in config.log.contrast),
    )
    return tuple(dict.fromkeys([*imports, *(n.rpartition(".")[0] for n in names if "." in n)]))


def module_hashes(modules: Sequence[str]) -> dict[str, str]:
    """12 hex digits of each module's source file as it is now (``""``: not found)."""
    hashes = {}
    for module in modules:
        try:  # as the worker (python -m) finds it: on sys.path or in the working folder
            spec = importlib.util.find_spec(module)
            if spec is None and "." not in module:
                spec = importlib.machinery.PathFinder.find_spec(module, [os.getcwd()])
        except (ImportError, ValueError):
            spec = None
        origin = Path(spec.origin) if spec is not None and spec.origin else None
        found = origin is not None and origin.is_file()
        hashes[module] = hashlib.sha256(origin.read_bytes()).hexdigest()[:12] if found else ""
    return hashes


def problem_rows(report: Any) -> list[dict[str, Any]]:
    """Per-problem ``id``, ``n``, ``c`` and diversity of an evaluation report."""
    return [
        {
            "id": p.id,
            "n": p.n,
            "c": p.c,
            "diversity": p.diversity._asdict() if p.diversity is not None else {},
        }
        for p in report.problems
    ]


class StudyRecorder(Callback):
    """Writes progress, per-problem held-out results and the final marker of a study run."""

    def __init__(self, run_dir: Path, modules: Sequence[str] = ()) -> None:
        self.run_dir = Path(run_dir)
        self.modules = tuple(modules)
        """Modules of yours the run imports, whose source ``final.json`` records."""

    def on_start(self, job, start_step: int) -> None:
        (self.run_dir / EVALS_DIR).mkdir(exist_ok=True)
        self._progress(start_step, job.total_steps)

    def on_step(self, job, step: int, record) -> None:
        self._progress(step, job.total_steps)

    def on_eval(self, job, step: int, record) -> None:
        if record.report is None:
            return
        data = {"step": step, "scores": record.scores, "problems": problem_rows(record.report)}
        write_json(self.run_dir / EVALS_DIR / f"step_{step:06d}.json", data)

    def on_end(self, job, result) -> None:
        evals = sorted((self.run_dir / EVALS_DIR).glob("step_*.json"))
        last = json.loads(evals[-1].read_text()) if evals else None
        final = {
            "step": job.total_steps,
            "evals": {str(k): v for k, v in result.evals.items()},
            "final_eval": last,
            "code": code_hash(),
            "modules": module_hashes(self.modules),
        }
        write_json(self.run_dir / FINAL_FILE, final)

    def _progress(self, step: int, total: int) -> None:
        write_json(self.run_dir / PROGRESS_FILE, {"step": step, "total": total})


def run(run_dir: Path, imports: Sequence[str] = ()) -> None:
    """Train the configuration in ``run_dir/run.yaml`` there, resuming if it was started."""
    from rlvr.train.checkpoint import CHECKPOINTS_DIR
    from rlvr.train.config import TrainConfig
    from rlvr.train.loop import train
    from rlvr.train.overrides import load_config

    cfg = load_config(TrainConfig, str(run_dir / RUN_FILE), [f"log.output_dir={run_dir}"])
    started = (run_dir / "metrics.jsonl").exists() or (run_dir / CHECKPOINTS_DIR).exists()
    train(cfg, resume=started, callbacks=[StudyRecorder(run_dir, own_modules(cfg, imports))])


STOP_AFTER_STEP = signal.SIGUSR1
"""The runner's first stop (it got Ctrl-C or SIGTERM, or is gone): after the step in flight."""
STOP_NOW = signal.SIGUSR2
"""The runner's second stop: at once when the run was asked already, else after its step."""


def _asked_by_runner(signum: int, frame: object) -> None:
    """Stop after the step in flight, unless already asked: a scheduler that signals every
    process of a job (Slurm's ``scancel``) reaches this run and its runner both, and a second
    signal would stop it at once, without the step-in-flight checkpoint. Before the run's
    steps begin (loading) it stops at once: nothing is in flight."""
    if not ask_to_stop(signal.SIGINT):
        raise Stopped(signal.SIGINT)


def _asked_again_by_runner(signum: int, frame: object) -> None:
    """The runner's second stop (Ctrl-C again, or an error in the runner)."""
    if stop_asked() or not ask_to_stop(signal.SIGTERM):
        raise Stopped(signal.SIGTERM)


def stop_with_runner(runner_pid: int, poll_s: float = 1.0) -> threading.Thread:
    """Send this process :data:`STOP_AFTER_STEP` (the runner's own first stop) once
    ``runner_pid`` is no longer its parent; checked every ``poll_s`` seconds by a daemon
    thread."""

    def watch() -> None:
        while os.getppid() == runner_pid:
            time.sleep(poll_s)
        os.kill(os.getpid(), STOP_AFTER_STEP)  # met on the main thread

    thread = threading.Thread(target=watch, name="stop-with-runner", daemon=True)
    thread.start()
    return thread


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m rlvr.compare.worker RUN_DIR [MODULE ...]", file=sys.stderr)
        return 2
    if runner := os.environ.get(RUNNER_ENV):
        signal.signal(STOP_AFTER_STEP, _asked_by_runner)
        signal.signal(STOP_NOW, _asked_again_by_runner)
        stop_with_runner(int(runner))
    for module in args[1:]:
        importlib.import_module(module)
    try:
        run(Path(args[0]), args[1:])
    except KeyboardInterrupt as stop:  # after its step, with a checkpoint
        print(
            "rlvr: interrupted; the same `rlvr compare` command resumes this run", file=sys.stderr
        )
        return 128 + getattr(stop, "signum", signal.SIGINT)  # SIGTERM (runner gone): 143
    return 0


if __name__ == "__main__":
    sys.exit(main())
