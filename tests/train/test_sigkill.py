"""A run killed with SIGKILL and resumed writes the same metrics as an uninterrupted run."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlvr.train.metrics import read_metrics
from rlvr.train.overrides import dump_yaml

SCRIPT = """
import sys
from rlvr.rewards import register
from rlvr.train.config import TrainConfig
from rlvr.train.loop import train
from rlvr.train.overrides import load_config

@register("even_len_sigkill")
def even_len(completion, reference, *, correct=1.0, wrong=0.0):
    return correct if len(completion) % 2 == 0 else wrong

train(load_config(TrainConfig, sys.argv[1], sys.argv[3:]), resume=sys.argv[2] == "resume")
"""


def _launch(config: Path, mode: str, *overrides: str) -> subprocess.Popen:
    src = Path(__file__).resolve().parents[2] / "src"
    env = {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(config), mode, *overrides],
        env=env,
        stderr=subprocess.PIPE,
    )


def _rows_stable(path: Path) -> list[str]:
    rows = read_metrics(path)
    return [
        json.dumps(
            {k: v for k, v in r.items() if not k.startswith(("time/", "perf/"))}, sort_keys=True
        )
        for r in rows
    ]


@pytest.mark.slow
def test_sigkill_then_resume_matches_uninterrupted_run(train_config, tmp_path):
    cfg = train_config(
        "steps=8",
        "threads=1",
        "reward.verifier=even_len_sigkill",
        "checkpoint.every=2",
        "checkpoint.keep_last=1",
        out="full",
    )
    config = tmp_path / "run.yaml"
    config.write_text(dump_yaml(cfg))
    full = _launch(config, "fresh")
    assert full.wait(timeout=300) == 0, full.stderr.read().decode()[-2000:]

    killed_dir = tmp_path / "killed"
    victim = _launch(config, "fresh", f"log.output_dir={killed_dir}")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and victim.poll() is None:
        metrics = killed_dir / "metrics.jsonl"
        if metrics.exists() and any(r["step"] >= 3 for r in read_metrics(metrics)):
            victim.send_signal(signal.SIGKILL)
            break
        time.sleep(0.01)
    assert victim.wait(timeout=60) == -signal.SIGKILL, "the run finished before it could be killed"
    assert max(r["step"] for r in read_metrics(killed_dir / "metrics.jsonl")) < 8

    resumed = _launch(config, "resume", f"log.output_dir={killed_dir}")
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read().decode()[-2000:]
    assert _rows_stable(killed_dir / "metrics.jsonl") == _rows_stable(
        tmp_path / "full" / "metrics.jsonl"
    )
