"""The generation worker (``rollout.staleness >= 1``) in a process of its own: Ctrl-C ends
the trainer and the worker; the worker runs more than one torch thread."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from rlvr.train.checkpoint import list_checkpoints
from rlvr.train.metrics import read_metrics
from rlvr.train.overrides import dump_yaml

SCRIPT = """
import signal
import sys
import torch
from rlvr.rewards import register
from rlvr.train.config import TrainConfig
from rlvr.train.loop import train
from rlvr.train.overrides import load_config

@register("even_len")
def even_len(completion, reference, *, correct=1.0, wrong=0.0):
    return correct if len(completion) % 2 == 0 else wrong

# As a terminal's foreground job: a job a shell started in the background (pytest run with
# `&`) passes SIGINT on ignored, and Python then installs no KeyboardInterrupt handler.
signal.signal(signal.SIGINT, signal.default_int_handler)
torch.set_num_threads(2)
torch.ones(1 << 22).sum()  # a parallel region: the trainer's OpenMP pool has a thread at the fork
train(load_config(TrainConfig, sys.argv[1], []))
"""


def _first_step_logged(run: subprocess.Popen, metrics: Path) -> None:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and run.poll() is None:
        if metrics.exists() and read_metrics(metrics):
            return
        time.sleep(0.05)
    pytest.fail(f"no step logged (exit code {run.poll()})")


def _start(cfg, tmp_path: Path) -> subprocess.Popen:
    """The training script on ``cfg`` in a new session (its own process group)."""
    config = tmp_path / "run.yaml"
    config.write_text(dump_yaml(cfg))
    src = Path(__file__).resolve().parents[2] / "src"
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(config)],
        env={**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1"},
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def test_worker_runs_two_threads(train_config, tmp_path):
    """Forked from a trainer whose OpenMP pool has threads, the worker still runs a parallel
    region on two threads (on its main thread, libgomp would wait for the trainer's threads)."""
    overrides = ("steps=2", "threads=2", "rollout.staleness=1", "rollout.generation_threads=2")
    cfg = train_config(*overrides, "reward.verifier=even_len", out="run")
    run = _start(cfg, tmp_path)
    try:
        _, err = run.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        pytest.fail("the run with a two-thread generation worker did not finish in 180 s")
    assert run.returncode == 0, err.decode()[-2000:]
    assert [r["step"] for r in read_metrics(Path(cfg.log.output_dir) / "metrics.jsonl")] == [1, 2]


@pytest.mark.slow
@pytest.mark.parametrize("group", [True, False], ids=["terminal", "trainer-only"])
def test_ctrl_c_ends_both_processes(train_config, tmp_path, group):
    """SIGINT to the process group (Ctrl-C in a terminal) or to the trainer alone: the
    worker ignores it and keeps serving the step in flight, which ends with a checkpoint."""
    cfg = train_config("steps=10000", "rollout.staleness=1", "reward.verifier=even_len", out="run")
    run = _start(cfg, tmp_path)
    try:
        _first_step_logged(run, Path(cfg.log.output_dir) / "metrics.jsonl")
        children = psutil.Process(run.pid).children(recursive=True)
        assert children  # the generation worker
        if group:
            os.killpg(run.pid, signal.SIGINT)
        else:
            run.send_signal(signal.SIGINT)
        assert run.wait(timeout=60) != 0
        _, alive = psutil.wait_procs(children, timeout=30)
        assert alive == []
        err = run.stderr.read().decode()
        assert "Stopped: SIGINT" in err and "stopping after the step in flight" in err
        assert list_checkpoints(cfg.log.output_dir)  # the step in flight finished and was kept
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)


@pytest.mark.slow
def test_sigterm_to_the_group_ends_both_processes_with_a_checkpoint(train_config, tmp_path):
    """A cluster's pre-emption sends SIGTERM to every process of the job: the worker ignores
    it and serves the step in flight, the trainer writes its checkpoint, both end."""
    cfg = train_config("steps=10000", "rollout.staleness=1", "reward.verifier=even_len", out="run")
    run = _start(cfg, tmp_path)
    try:
        _first_step_logged(run, Path(cfg.log.output_dir) / "metrics.jsonl")
        children = psutil.Process(run.pid).children(recursive=True)
        assert children  # the generation worker
        os.killpg(run.pid, signal.SIGTERM)
        assert run.wait(timeout=60) != 0
        _, alive = psutil.wait_procs(children, timeout=30)
        assert alive == []
        assert "SIGTERM: stopping after the step in flight" in run.stderr.read().decode()
        assert list_checkpoints(cfg.log.output_dir)  # the step in flight finished and was kept
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)


@pytest.mark.slow
def test_the_worker_ignores_ctrl_c_the_trainer_answers_it(train_config, tmp_path):
    """SIGINT that reaches the generation worker alone leaves it serving: the trainer decides
    when to stop (after its step in flight, which may still need a batch)."""
    cfg = train_config("steps=4", "rollout.staleness=1", "reward.verifier=even_len", out="run")
    run = _start(cfg, tmp_path)
    try:
        _first_step_logged(run, Path(cfg.log.output_dir) / "metrics.jsonl")
        (worker,) = psutil.Process(run.pid).children(recursive=True)
        worker.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=120)
        assert run.returncode == 0, err.decode()[-2000:]
        rows = read_metrics(Path(cfg.log.output_dir) / "metrics.jsonl")
        assert [r["step"] for r in rows if r["step"] > 0] == [1, 2, 3, 4]
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
