"""The run directory: where ``log.output_dir`` points, what a fresh or resumed run may find
there, and the ``config.yaml`` written into it."""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import sys
import time
import warnings
from pathlib import Path
from typing import NamedTuple, TypeVar

from rlvr.atomic import why_not_creatable, write_text
from rlvr.dotted import changed_keys, flatten
from rlvr.locks import holding, refuse_if_held
from rlvr.train.checkpoint import CHECKPOINTS_DIR, latest_checkpoint
from rlvr.train.config import LogConfig, LoraConfig, RunConfig
from rlvr.train.metrics import METRICS_FILE, SAMPLES_FILE, read_metrics, truncate_after
from rlvr.train.overrides import dump_yaml, paths_beside, read_yaml, to_dict

CONFIG_FILE = "config.yaml"
LOCK_FILE = ".run.lock"
"""Held in the run directory while a run writes there (:func:`only_run`)."""


TIME_FORMAT = "%Y%m%d-%H%M%S"
"""How ``{time}`` in ``log.output_dir`` expands (so the names sort by start time)."""
_TIME_GLOB = "[0-9]" * 8 + "-" + "[0-9]" * 6

C = TypeVar("C", bound=RunConfig)


def expand_output_dir(config: C, *, resume: bool = False) -> C:
    """``config`` with ``{time}`` in ``log.output_dir`` replaced by the current time, or, when
    resuming, by the time of the newest existing run it names (``rlvr train --resume`` on
    the demo continues the last demo run instead of starting a new one)."""
    out = config.log.output_dir
    if "{time}" not in out:
        return config
    newest = newest_run(out) if resume else None
    if newest:
        print(f"--resume: continuing {newest}", file=sys.stderr)
    elif resume:
        print(f"--resume: no earlier run matches {out}; starting a new one", file=sys.stderr)
    expanded = newest or out.replace("{time}", time.strftime(TIME_FORMAT))
    return dataclasses.replace(config, log=dataclasses.replace(config.log, output_dir=expanded))


def newest_run(output_dir: str) -> str | None:
    """The newest existing directory the ``{time}`` pattern ``output_dir`` names, else ``None``."""
    runs = sorted(glob.glob(glob.escape(output_dir).replace("{time}", _TIME_GLOB)))
    return runs[-1] if runs else None


class RunDir(NamedTuple):
    """A run's directory and the checkpoint it resumes from."""

    path: Path
    """The run directory (``log.output_dir``)."""
    checkpoint: Path | None
    """Latest complete checkpoint when resuming, else ``None``."""
    resume: bool = False
    """Whether the run continues what the directory holds (``--resume``)."""


def locate_run_dir(config: RunConfig, *, resume: bool) -> RunDir:
    """The run directory and the checkpoint to resume from (or None); writes nothing.

    A fresh run refuses a directory that already holds metrics or checkpoints; a resumed
    run with no checkpoint yet starts from scratch.
    """
    log: LogConfig = config.log
    run_dir = Path(log.output_dir)
    problem = why_not_creatable(run_dir)
    if problem:  # refused before anything loads
        raise ValueError(f"log.output_dir={str(run_dir)!r}: {problem}")
    refuse_if_held(run_dir / LOCK_FILE, _busy(run_dir))
    checkpoint = latest_checkpoint(run_dir) if resume else None
    if not resume and ((run_dir / METRICS_FILE).exists() or (run_dir / CHECKPOINTS_DIR).exists()):
        raise ValueError(
            f"log.output_dir={str(run_dir)!r} already holds a run: continue it with --resume, "
            "or choose another directory (log.output_dir=...; '{time}' in it expands to the start time)"
        )
    if resume and checkpoint is None:
        _refuse_starting_over(run_dir)
        why = "no checkpoint in" if run_dir.exists() else "no run yet in"
        warnings.warn(f"--resume: {why} {run_dir}; starting from scratch", stacklevel=2)
    if checkpoint is not None:
        _check_same_model(config, run_dir, checkpoint)
        print(f"--resume: {run_dir} from {checkpoint.name}", file=sys.stderr)
    return RunDir(run_dir, checkpoint, resume)


def only_run(run_dir: Path) -> contextlib.AbstractContextManager[None]:
    """Hold ``run_dir/.run.lock`` (``run_dir`` made) while a run writes there: a second run in
    the directory (a fresh one started before the first wrote metrics, two ``--resume``) is
    refused, instead of the two writing over each other's metrics and checkpoints."""
    return holding(run_dir / LOCK_FILE, _busy(run_dir))


def _busy(run_dir: Path) -> str:
    """The one-line refusal of a second run in ``run_dir``."""
    return (
        f"log.output_dir={str(run_dir)!r}: another rlvr run is writing there (it holds "
        f"{run_dir / LOCK_FILE}); wait for it to end, or choose another directory"
    )


def _refuse_starting_over(run_dir: Path) -> None:
    """Refuse to start over a run with no checkpoint left whose metrics say it had one to
    continue from, since starting over drops the metrics and samples of its steps: one that
    ran all its steps with ``checkpoint.save_final: false`` (and none due before), and one
    that logged a step after its first ``checkpoint.every`` (a step is logged only once the
    checkpoint before it is written: its checkpoints were deleted since, as ``rlvr compare``
    deletes a finished run's). A run killed before or while writing its first checkpoint
    starts over."""
    saved, metrics = run_dir / CONFIG_FILE, run_dir / METRICS_FILE
    if not saved.is_file() or not metrics.is_file():
        return
    config = read_yaml(str(saved))
    steps, checkpoint = config.get("steps"), config.get("checkpoint") or {}
    last = max((row.get("step", 0) for row in read_metrics(metrics)), default=0)
    every = checkpoint.get("every", 0)
    if isinstance(every, int) and 0 < every < last:
        raise ValueError(
            f"--resume {run_dir}: its metrics reach step {last} but no checkpoint is left in "
            f"{run_dir / CHECKPOINTS_DIR} (deleted since: rlvr compare deletes a finished run's "
            "unless --keep-checkpoints); starting over would drop those steps' metrics and "
            "samples: start a new run in another directory"
        )
    if checkpoint.get("save_final", True) or not isinstance(steps, int):
        return
    if last >= steps:
        raise ValueError(
            f"--resume {run_dir}: the run finished its {steps} steps without a checkpoint "
            "(checkpoint.save_final=false): nothing to continue from, and starting over would "
            "drop its metrics; start a new run in another directory"
        )


def _check_same_model(config: RunConfig, run_dir: Path, checkpoint: Path) -> None:
    """A resumed run's weights come from its checkpoint: refuse a ``model.name`` other than
    the one the run started from (its tokenizer and reference model would come from it), and
    a ``model.lora`` other than the run's (:func:`_check_same_adapters`)."""
    model, saved = getattr(config, "model", None), run_dir / CONFIG_FILE
    if model is None or not saved.is_file():
        return
    saved_model = read_yaml(str(saved)).get("model") or {}
    started = saved_model.get("name")
    if started is not None and not _same_model(started, model.name):
        raise ValueError(
            f"model.name={model.name!r}: the run in {run_dir} started from {started!r} and "
            "resumes from its checkpoint; to train another model, start a new run"
        )
    _check_same_adapters(model.lora, saved_model.get("lora") or {}, run_dir, checkpoint)


def _check_same_adapters(lora: LoraConfig, saved: dict, run_dir: Path, checkpoint: Path) -> None:
    """What a resumed run trains is what its checkpoint holds: LoRA adapters of the run's rank,
    scale and targets, or every weight. Another ``model.lora`` is refused before anything
    loads: a rank of 0 would meet the adapters' optimiser state, another rank or targets the
    saved adapters' shapes, and another alpha would rescale them into another model."""
    now, was = _lora_fields(lora), _lora_fields(LoraConfig())
    was.update({k: v for k, v in saved.items() if k in was})
    if now["rank"] == was["rank"] == 0:
        return
    changed = [key for key in now if now[key] != was[key]]
    if not changed:
        return
    asked = ", ".join(f"model.lora.{key}={_shown(now[key])}" for key in changed)
    trained = (
        f"LoRA adapters (rank {was['rank']}, alpha {was['alpha']}, targets "
        f"{_shown(was['targets'])})"
        if was["rank"]
        else "every weight (model.lora.rank=0)"
    )
    raise ValueError(
        f"{asked}: the run in {run_dir} trained {trained}, and its checkpoint holds them; "
        f"resume with the run's model.lora (--resume {run_dir} reads the run's configuration), "
        f"or start a new run from the checkpoint (model.name={checkpoint})"
    )


def _lora_fields(lora: LoraConfig) -> dict:
    """The ``model.lora`` keys a checkpoint depends on, as ``config.yaml`` writes them."""
    return {"rank": lora.rank, "alpha": lora.alpha, "targets": list(lora.targets)}


def _shown(value) -> str:
    """A ``model.lora`` value as it is written on the command line (``[q_proj, v_proj]``)."""
    return f"[{', '.join(value)}]" if isinstance(value, list) else str(value)


def _same_model(started: str, name: str) -> bool:
    """The same name, or two spellings of one local directory (``./m``, ``m``, ``/abs/m``)."""
    if started == name:
        return True
    a, b = Path(started).expanduser(), Path(name).expanduser()
    return a.is_dir() and b.is_dir() and a.resolve() == b.resolve()


def open_run_dir(config: RunConfig, run: RunDir, *, finished: bool = False) -> None:
    """Create the run directory and write ``config.yaml``; a resume with no checkpoint drops
    the rows of a run killed before its first one. Called once the job is built, so a start
    that fails (bad data, a model that does not load) leaves an earlier run as it was.

    ``finished``: the run resumes from the checkpoint of its last step, so no step runs and
    ``config.yaml`` is left as it was (a change of how steps train is refused)."""
    if run.resume and run.checkpoint is None:
        for name in (METRICS_FILE, SAMPLES_FILE):
            truncate_after(run.path / name, -1)
    run.path.mkdir(parents=True, exist_ok=True)
    if run.checkpoint is not None:
        _keep_changed_config(config, run, finished=finished)
    if not finished:  # a full disk leaves the old one
        write_text(run.path / CONFIG_FILE, dump_yaml(saved_form(config)))


def saved_form(config: RunConfig | dict) -> dict:
    """``config`` as ``config.yaml`` records it: its local data files and model directory as
    absolute paths, so that ``--resume DIR`` from any folder reads the files the run read
    (a relative path would be looked for beside ``config.yaml``, then in that folder)."""
    data = config if isinstance(config, dict) else to_dict(config)
    return paths_beside(data, Path.cwd(), absolute=True)


_BOOKKEEPING = ("log.", "eval.", "checkpoint.", "threads")
"""Keys a resume may change without changing how the steps so far were trained (``steps``
is not one: it stretches the learning-rate schedule)."""


def _keep_changed_config(config: RunConfig, run: RunDir, *, finished: bool = False) -> None:
    """A resume whose configuration differs from the saved one in how steps train (another
    objective, learning rate, data) keeps the saved ``config.yaml`` as
    ``config.<checkpoint>.yaml``, the record of the steps run so far, and warns with the keys
    that changed; a change of :data:`_BOOKKEEPING` keys only (``eval.every``) is printed.
    Of a ``finished`` run (no step left to run with it) such a change is refused."""
    saved_file = run.path / CONFIG_FILE
    if not saved_file.is_file() or run.checkpoint is None:
        return
    saved = flatten(saved_form(read_yaml(str(saved_file))))  # one written relative: as it was
    now = flatten(saved_form(config))
    changed = changed_keys(saved, now, ignore=("log.output_dir",))
    shown = ", ".join(f"{k} {saved.get(k, '-')!r} -> {now.get(k, '-')!r}" for k in changed[:4])
    more = f" and {len(changed) - 4} more" if len(changed) > 4 else ""
    if all(k.startswith(_BOOKKEEPING) for k in changed):  # the steps so far are unaffected
        if changed:
            left = f" (the run is finished: {CONFIG_FILE} is left as it was)" if finished else ""
            print(f"--resume: {shown}{more}{left}", file=sys.stderr)
        return
    if finished:
        raise ValueError(
            f"--resume {run.path}: the run is finished ({run.checkpoint.name} is its last "
            f"step), so {shown}{more} would train no step: resume with more steps (steps=... "
            "/ epochs=...) to train on with it, or start a new run"
        )
    kept = run.path / f"config.{run.checkpoint.name}.yaml"
    if not kept.exists():  # a second changed resume from this checkpoint keeps the first record
        write_text(kept, saved_file.read_text())  # copied: config.yaml stays until replaced
    warnings.warn(
        f"--resume: {shown}{more}; the configuration that made {run.checkpoint.name} is kept "
        f"in {kept.name}",
        stacklevel=3,
    )


def prepare_run_dir(config: RunConfig, *, resume: bool) -> RunDir:
    """:func:`locate_run_dir`, then :func:`open_run_dir`."""
    run = locate_run_dir(config, resume=resume)
    open_run_dir(config, run)
    return run
