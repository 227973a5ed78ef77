"""Ctrl-C ends the trainer and its generation worker (``rollout.staleness >= 1``)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from rlvr.train.metrics import read_metrics
from rlvr.train.overrides import dump_yaml

SCRIPT = """
import sys
from rlvr.rewards import register
from rlvr.train.config import TrainConfig
from rlvr.train.loop import train
from rlvr.train.overrides import load_config

@register("even_len")
def even_len(completion, reference, *, correct=1.0, wrong=0.0):
    return correct if len(completion) % 2 == 0 else wrong

train(load_config(TrainConfig, sys.argv[1], []))
"""


def _first_step_logged(run: subprocess.Popen, metrics: Path) -> None:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and run.poll() is None:
        if metrics.exists() and read_metrics(metrics):
            return
        time.sleep(0.05)
    pytest.fail(f"no step logged (exit code {run.poll()})")


@pytest.mark.slow
@pytest.mark.parametrize("group", [True, False], ids=["terminal", "trainer-only"])
def test_ctrl_c_ends_both_processes(train_config, tmp_path, group):
    """SIGINT to the process group (Ctrl-C in a terminal) or to the trainer alone."""
    cfg = train_config("steps=10000", "rollout.staleness=1", "reward.verifier=even_len", out="run")
    config = tmp_path / "run.yaml"
    config.write_text(dump_yaml(cfg))
    src = Path(__file__).resolve().parents[2] / "src"
    run = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(config)],
        env={**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1"},
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
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
        assert "KeyboardInterrupt" in run.stderr.read().decode()
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
