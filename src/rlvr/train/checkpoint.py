"""Atomic checkpoints that let a killed run continue exactly where it stopped.

A checkpoint is a directory ``<run>/checkpoints/step_000042/`` with the model and
tokenizer (a plain Hugging Face directory, loadable by ``rlvr.models.load_model``) and
``trainer_state.pt``: optimiser, scheduler, RNG states (torch, CUDA, Python, NumPy), the
data position and the step; with LoRA adapters the model is the merged one and
``adapter/`` holds the adapters in PEFT's format (:mod:`rlvr.train.lora`). It is written
under a temporary name and renamed into place, so a run killed at any moment (even by
SIGKILL) leaves only complete checkpoints.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import random
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlvr.models import quiet_hf_progress
from rlvr.train.config import CheckpointConfig
from rlvr.train.lora import has_adapters, heads_apart, merged_state_dict, save_adapters

STATE_FILE = "trainer_state.pt"
CHECKPOINTS_DIR = "checkpoints"
"""The folder of a run directory that holds its ``step_NNNNNN`` checkpoints."""
_STEP_DIR = re.compile(r"^step_(\d{6,})$")
_LEFTOVER = re.compile(r"^\.step_\d{6,}\.(tmp|old)\d+$")
"""A directory a writer renames into place or aside; left behind when it is killed."""


@dataclass
class TrainerState:
    """Everything besides the weights that the next step depends on."""

    step: int
    """Last completed step."""
    data: dict[str, int] = field(default_factory=dict)
    """Position of the prompt sampler (see ``PromptSampler.state_dict``)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Loop-specific counters (e.g. cumulative totals reported in metrics)."""


def rng_state() -> dict[str, Any]:
    """The states of every RNG the run draws from."""
    state = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": np.random.get_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int) -> None:
    """Seed torch, Python and NumPy."""
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)


def due(step: int, total: int, cfg: CheckpointConfig) -> bool:
    """Whether a checkpoint is written after ``step`` of ``total``."""
    return bool((cfg.every and step % cfg.every == 0) or (step == total and cfg.save_final))


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    """Where the checkpoint of ``step`` lives."""
    return Path(run_dir) / CHECKPOINTS_DIR / f"step_{step:06d}"


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    root = Path(run_dir) / CHECKPOINTS_DIR
    if not root.is_dir():
        return []
    found = [
        (int(m.group(1)), p)
        for p in root.iterdir()
        if (m := _STEP_DIR.match(p.name)) and (p / STATE_FILE).is_file()
    ]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The most recent complete checkpoint, or ``None``."""
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def save_checkpoint(
    run_dir: Path,
    model,
    tokenizer,
    optimizer,
    scheduler,
    state: TrainerState,
    *,
    keep_last: int = 0,
) -> Path:
    """Write a checkpoint atomically (first deleting what killed writers left: partial copies
    and directories moved aside), then delete all but the ``keep_last`` newest (0: keep all).

    One that cannot be written (a full disk, a folder made read-only) raises ``OSError`` in
    one line and leaves nothing of itself: the checkpoints before it stay as they were."""
    from safetensors import SafetensorError

    final = checkpoint_dir(run_dir, state.step)
    tmp = final.with_name(f".{final.name}.tmp{os.getpid()}")
    try:
        _remove_leftovers(final.parent)
        tmp.mkdir(parents=True)
        _write_files(tmp, model, tokenizer, optimizer, scheduler, state)
        _replace_dir(tmp, final)
    except (OSError, RuntimeError, SafetensorError) as err:
        shutil.rmtree(tmp, ignore_errors=True)  # a partial copy could fill the disk further
        why = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise OSError(
            f"could not write checkpoint {final} (disk full? not writable?): {why}"
        ) from err
    if keep_last:
        for old in list_checkpoints(run_dir)[:-keep_last]:
            _delete(old)
    return final


def _delete(checkpoint: Path) -> None:
    """Delete a checkpoint, renamed aside first: a kill part way leaves a hidden leftover (the
    next checkpoint removes it), never a ``step_N`` folder holding half its files."""
    aside = checkpoint.with_name(f".{checkpoint.name}.old{os.getpid()}")
    shutil.rmtree(aside, ignore_errors=True)
    try:
        os.replace(checkpoint, aside)
    except OSError:  # kept whole; deleting is housekeeping, never a reason to stop the run
        return
    shutil.rmtree(aside, ignore_errors=True)


def _remove_leftovers(root: Path) -> None:
    """Delete what writers killed mid-checkpoint left (``.step_N.tmpPID``, ``.step_N.oldPID``):
    never a checkpoint, and on a nearly full disk the room this one needs."""
    if root.is_dir():
        for path in root.iterdir():
            if _LEFTOVER.match(path.name):
                shutil.rmtree(path, ignore_errors=True)


def _untie_embeddings(config_file: Path) -> None:
    """Set ``tie_word_embeddings`` false in a saved ``config.json`` (its text config's too)."""
    config = json.loads(config_file.read_text())
    config["tie_word_embeddings"] = False
    if isinstance(config.get("text_config"), dict):
        config["text_config"]["tie_word_embeddings"] = False
    config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _write_files(tmp: Path, model, tokenizer, optimizer, scheduler, state: TrainerState) -> None:
    """A checkpoint's files, written into ``tmp`` and flushed to disk."""
    with quiet_hf_progress():
        if has_adapters(model):  # the merged model for any tool, the adapters for --resume
            merged = merged_state_dict(model)
            model.save_pretrained(tmp, state_dict=merged, safe_serialization=True)
            if heads_apart(model, merged):  # else a loader would tie the head to the embedding
                _untie_embeddings(tmp / "config.json")
            save_adapters(model, tmp)
        else:
            model.save_pretrained(tmp, safe_serialization=True)
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp)
    payload = {
        "step": state.step,
        "data": state.data,
        "extra": state.extra,
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "rng": rng_state(),
    }
    torch.save(payload, tmp / STATE_FILE)
    _fsync_tree(tmp)


OPTIMISER_SETTINGS = ("lr", "initial_lr", "betas", "eps", "weight_decay")
"""What a resumed run's optimiser keeps of its own configuration, not the checkpoint's (a
``--resume DIR optim.lr=...`` is warned of and recorded in ``config.yaml``: it applies)."""


def load_trainer_state(path: Path, optimizer, scheduler) -> TrainerState:
    """Restore optimiser, scheduler and RNG states from a checkpoint; returns the rest.

    The AdamW moments and the schedule's position come from the checkpoint; the peak
    learning rate, betas, eps and weight decay stay those ``optimizer`` and ``scheduler``
    were built with (the resumed run's configuration)."""
    payload = _read_state(Path(path))
    own = [{k: g[k] for k in OPTIMISER_SETTINGS if k in g} for g in optimizer.param_groups]
    optimizer.load_state_dict(payload["optimizer"])
    for group, settings in zip(optimizer.param_groups, own, strict=True):
        group.update(settings)
    _load_schedule(scheduler, payload["scheduler"])
    set_rng_state(payload["rng"])
    return TrainerState(
        step=int(payload["step"]), data=dict(payload["data"]), extra=dict(payload["extra"])
    )


def _read_state(path: Path) -> dict[str, Any]:
    """The payload of ``path``'s ``trainer_state.pt``; a damaged file (cut short by a full
    disk or a copy, say) is refused in one line that names the checkpoint to delete and the
    one a resume would then continue from."""
    try:
        return torch.load(path / STATE_FILE, map_location="cpu", weights_only=False)
    except (RuntimeError, EOFError, ValueError, pickle.UnpicklingError) as err:
        why = str(err).split(". ")[0]  # ValueError: text where pickle expects a number
        raise ValueError(
            f"{path / STATE_FILE} is damaged ({why}); {delete_to_resume(path)}"
        ) from None


def delete_to_resume(path: Path) -> str:
    """What to do with a damaged checkpoint ``path``: delete it, and which one a resume then
    continues from."""
    found = [p.name for p in list_checkpoints(path.parent.parent)]
    earlier = found[: found.index(path.name)] if path.name in found else []
    return f"delete {path} to resume from {earlier[-1] if earlier else 'the start'}"


def _load_schedule(scheduler, state: dict[str, Any]) -> None:
    """The schedule's position from ``state``, its shape (warm-up, length, kind) and peak
    from the run being resumed, so ``--resume DIR steps=N`` stretches it to N steps.

    ``LambdaLR`` saves the attributes of a callable schedule and would restore the old
    length (a cosine then gives lr 0 to every step past it).
    """
    state = {**state, "base_lrs": list(scheduler.base_lrs)}  # the peak: this run's optim.lr
    if "lr_lambdas" not in state:
        scheduler.load_state_dict(state)
        return
    scheduler.load_state_dict({**state, "lr_lambdas": [None] * len(state["lr_lambdas"])})
    scheduler.last_epoch -= 1
    scheduler.step()  # the current step again: the optimiser's lr from this run's schedule


def _replace_dir(tmp: Path, final: Path) -> None:
    """Rename ``tmp`` to ``final``; an existing ``final`` is moved aside first, then removed."""
    if final.exists():
        aside = final.with_name(f".{final.name}.old{os.getpid()}")
        shutil.rmtree(aside, ignore_errors=True)
        os.replace(final, aside)
        os.replace(tmp, final)
        shutil.rmtree(aside, ignore_errors=True)
    else:
        os.replace(tmp, final)
    _fsync_dir(final.parent)


def _fsync_tree(root: Path) -> None:
    """Flush every file of ``root`` to disk, each with the mode this process's umask gives a
    new file (safetensors writes its weights 0600: a teammate could read all but the model)."""
    mode = 0o666 & ~_umask()
    for path in root.rglob("*"):
        if path.is_file():
            os.chmod(path, mode)
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
    _fsync_dir(root)


def _umask() -> int:
    """This process's umask, read without changing it (``os.umask`` sets it to read it)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
