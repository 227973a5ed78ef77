"""The ``tiny`` preset: a small Qwen2 with its own tokenizer, warm-started on worked chain sums.

The build, run once and cached under a key hashed from :class:`TinyPresetSettings`:

1. reasoning-gym ``chain_sum`` problems, minus the held-out evaluation problems, as
   worked solutions (:mod:`rlvr.data.worked`); a share of them give the bare answer
   without steps, so the warm-started model sometimes guesses and RL has something to
   teach (working through the steps is what earns the reward);
2. a BPE tokenizer trained on that corpus (:func:`rlvr.models.tiny.build_task_tokenizer`)
   and a randomly initialised 2-layer Qwen2;
3. supervised fine-tuning with the library's :func:`rlvr.train.supervised.sft`, which
   checkpoints: a build that is killed resumes from its last checkpoint on the next use.

The finished directory is a plain Hugging Face model with ``sft.jsonl`` (the warm-start
data), ``sft-run/`` (its metrics) and ``tiny_preset.json`` (settings, timings).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from filelock import FileLock, Timeout

from rlvr.data.worked import WorkedPair, worked_pairs, write_jsonl
from rlvr.generation.base import thread_count
from rlvr.models import register_preset
from rlvr.models.tiny import TinySize, build_task_tokenizer, random_model, tiny_config
from rlvr.train.checkpoint import STATE_FILE, latest_checkpoint
from rlvr.train.config import (
    CheckpointConfig,
    LogConfig,
    ModelConfig,
    OptimConfig,
    SFTConfig,
    SFTDataConfig,
)
from rlvr.train.supervised import sft as run_sft

TINY_BUILD_VERSION = 2
"""Bump when the build changes in a way the settings do not show (the cache key uses it)."""

BUILD_THREADS = 1
"""torch CPU threads of the warm start, whatever the calling process uses: the weights depend
on the thread count (float sums), so a fixed count builds the same preset from every command
(``rlvr train`` of the demo, ``threads: 1``, ``rlvr eval --model tiny``, a test)."""


@dataclass(frozen=True)
class SftSettings:
    """How the tiny model is warm-started (mapped onto :class:`rlvr.train.config.SFTConfig`)."""

    steps: int = 800
    """Optimiser steps."""
    batch_size: int = 64
    """Prompt/response pairs per step."""
    lr: float = 3e-3
    """Peak learning rate (linear warm-up, then cosine decay to 0)."""
    warmup_steps: int = 20
    """Steps of linear warm-up."""
    adam_beta2: float = 0.95
    """AdamW second-moment decay (``beta1`` is 0.9)."""
    seed: int = 0
    """Seed of the batch order."""
    checkpoint_every: int = 100
    """Steps between checkpoints of the build (a killed build resumes from the last)."""


@dataclass(frozen=True)
class TinyPresetSettings:
    """Everything that decides the ``tiny`` preset's weights; hashed into its cache key."""

    task: str = "chain_sum"
    """reasoning-gym task of the warm-start data (one with worked solutions)."""
    task_config: dict[str, int] = field(
        default_factory=lambda: {"min_terms": 2, "max_terms": 5, "min_digits": 1, "max_digits": 1}
    )
    """Difficulty keywords passed to ``reasoning_gym.create_dataset``."""
    num_pairs: int = 20_000
    """Problems generated for the warm start (before held-out ones are removed)."""
    bare_fraction: float = 0.5
    """Share of warm-start answers given without the worked steps."""
    data_seed: int = 1_000_000
    """reasoning-gym seed of the warm-start problems (item ``i`` uses seed ``data_seed + i``)."""
    held_out_seed: int = 3_000_000
    """Seed of the held-out evaluation problems, whose questions never appear in the warm start."""
    held_out_size: int = 1_000
    """How many held-out problems (from ``held_out_seed``) are kept out of the warm start."""
    vocab_size: int = 512
    """Upper bound on the BPE vocabulary (the corpus may give fewer merges)."""
    size: TinySize = field(default_factory=lambda: TinySize(hidden_size=128, intermediate_size=512))
    """Model shape."""
    init_seed: int = 0
    """Seed of the random initialisation."""
    sft: SftSettings = field(default_factory=SftSettings)
    """The supervised warm start."""


TINY = TinyPresetSettings()
"""The settings ``load_model("tiny")`` builds with."""


def tiny_cache_key(settings: TinyPresetSettings) -> str:
    """12 hex digits of the hash of the settings and :data:`TINY_BUILD_VERSION`."""
    blob = json.dumps({"version": TINY_BUILD_VERSION, "settings": asdict(settings)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def tiny_dir(cache: Path, settings: TinyPresetSettings = TINY) -> Path:
    """Where the model built with ``settings`` is cached under ``cache``."""
    return cache / f"tiny-{tiny_cache_key(settings)}"


def tiny_held_out(settings: TinyPresetSettings = TINY) -> list[dict]:
    """The held-out problems (reasoning-gym entries) the warm start never sees."""
    import reasoning_gym

    size, seed = settings.held_out_size, settings.held_out_seed
    return list(
        reasoning_gym.create_dataset(settings.task, size=size, seed=seed, **settings.task_config)
    )


def tiny_sft_pairs(settings: TinyPresetSettings = TINY) -> list[WorkedPair]:
    """The warm-start data: worked solutions of problems whose question is not held out."""
    import reasoning_gym

    held_out = {entry["question"] for entry in tiny_held_out(settings)}
    problems = reasoning_gym.create_dataset(
        settings.task, size=settings.num_pairs, seed=settings.data_seed, **settings.task_config
    )
    entries = [entry for entry in problems if entry["question"] not in held_out]
    return worked_pairs(entries, bare_fraction=settings.bare_fraction, seed=settings.data_seed)


def cached_tiny(cache: Path, settings: TinyPresetSettings = TINY) -> Path:
    """The cached tiny model for ``settings``, built first when missing.

    The build works in ``cache/.tiny-<key>.build`` and renames its result into place, so
    a finished directory is always whole; a killed build leaves its work directory
    behind and the next call resumes the warm start from its last checkpoint. One process
    builds at a time (a file lock; the others wait and take its result): two runs of a
    study started together on a fresh machine each built into the same work directory.
    """
    target = tiny_dir(cache, settings)
    if (target / "config.json").exists():
        return target
    with _one_builder(cache / f".{target.name}.lock", target.name):
        if not (target / "config.json").exists():  # else built while this one waited
            work = cache / f".{target.name}.build"
            build_tiny_into(work, settings).rename(target)
            shutil.rmtree(work, ignore_errors=True)
    return target


@contextlib.contextmanager
def _one_builder(path: Path, what: str) -> Iterator[None]:
    """Hold the file lock ``path`` (its folder made), saying on stderr when this process
    waits for another that builds ``what``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(path)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        print(f"waiting for another process building {what}", file=sys.stderr)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def build_tiny_into(work: Path, settings: TinyPresetSettings) -> Path:
    """Build in ``work`` (resuming what a killed build left there); returns ``work / "model"``."""
    start = time.time()
    init_dir = work / "init"
    data_file = work / "sft.jsonl"
    if not (init_dir / "config.json").exists():
        _write_initial_model(init_dir, data_file, settings)
    checkpoint = _warm_start(init_dir, data_file, work / "sft-run", settings.sft)
    final = work / "model"
    shutil.rmtree(final, ignore_errors=True)
    final.mkdir()
    for source in checkpoint.iterdir():
        if source.name != STATE_FILE:  # model, tokenizer and chat template files
            shutil.copy2(source, final / source.name)
    shutil.copy2(data_file, final / "sft.jsonl")
    shutil.copytree(
        work / "sft-run", final / "sft-run", ignore=shutil.ignore_patterns("checkpoints")
    )
    summary = {
        "cache_key": tiny_cache_key(settings),
        "settings": asdict(settings),
        "sft_pairs": sum(1 for _ in data_file.open()),
        "build_seconds_last_session": round(time.time() - start, 1),
    }
    (final / "tiny_preset.json").write_text(json.dumps(summary, indent=2) + "\n")
    return final


def _write_initial_model(init_dir: Path, data_file: Path, settings: TinyPresetSettings) -> None:
    """Warm-start data, tokenizer and random model, written atomically into ``init_dir``."""
    pairs = tiny_sft_pairs(settings)
    write_jsonl(pairs, data_file)
    tokenizer = build_task_tokenizer([(p.prompt, p.response) for p in pairs], settings.vocab_size)
    model = random_model(tokenizer, settings.size, seed=settings.init_seed)
    tmp = init_dir.with_name(init_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    tmp.rename(init_dir)


def _warm_start(init_dir: Path, data_file: Path, run_dir: Path, sft: SftSettings) -> Path:
    """Run (or resume) the library SFT on the worked solutions; returns its final checkpoint."""
    config = SFTConfig(
        steps=sft.steps,
        batch_size=sft.batch_size,
        seed=sft.seed,
        model=ModelConfig(name=str(init_dir)),
        data=SFTDataConfig(train=str(data_file), max_tokens=256),
        optim=OptimConfig(
            lr=sft.lr,
            betas=(0.9, sft.adam_beta2),
            warmup_steps=sft.warmup_steps,
            schedule="cosine",
            max_grad_norm=1.0,
        ),
        log=LogConfig(output_dir=str(run_dir), tensorboard=False, samples_per_step=0, plots=False),
        checkpoint=CheckpointConfig(every=sft.checkpoint_every, keep_last=1),
    )
    resume = (run_dir / "checkpoints").exists()
    if not resume:  # killed before its first checkpoint: start over
        shutil.rmtree(run_dir, ignore_errors=True)
    try:
        with thread_count(BUILD_THREADS):
            result = run_sft(config, resume=resume)
    except KeyboardInterrupt:  # the line above it names the build's own run: not for the user
        print(
            "tiny preset: build interrupted; the next command that uses tiny continues it "
            "(no --resume needed)",
            file=sys.stderr,
        )
        raise
    return result.model_dir or latest_checkpoint(run_dir)


@register_preset("tiny", config=lambda cache: tiny_config(TINY.vocab_size, TINY.size))
def build_tiny(cache: Path) -> Path:
    """The ``tiny`` preset: built on first use (a few minutes on 2 CPU cores), then cached."""
    target = tiny_dir(cache, TINY)
    if not (target / "config.json").exists():
        print(
            f"tiny preset: building once into {target} (SFT warm start, ~4 min on 2 CPU cores)",
            file=sys.stderr,
            flush=True,
        )
    return cached_tiny(cache, TINY)
