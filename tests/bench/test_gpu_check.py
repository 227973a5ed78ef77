"""bench/gpu/check.sh's no-CUDA path, and how bench/gpu/check.py reads a run's metrics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "gpu"))

import check  # noqa: E402


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_check_without_cuda_says_so_in_one_line_and_exits_0(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path / "out")}
    proc = subprocess.run(
        ["bash", str(ROOT / "bench/gpu/check.sh")], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines() == [
        f"bench/gpu/check.sh: no CUDA device visible to {sys.executable}'s torch; nothing to check here."
    ]
    assert not (tmp_path / "out").exists()


def test_train_numbers_leave_out_the_first_step(tmp_path):
    rows = [
        {"step": 1, "time/step": 9.0, "perf/generated_tokens": 100, "reward/mean": 0.25,
         "time/generate": 8.0, "time/logp": 0.5, "time/update": 0.5},
        {"step": 2, "time/step": 1.0, "perf/generated_tokens": 300, "reward/mean": 0.5,
         "time/generate": 0.5, "time/logp": 0.1, "time/update": 0.3},
        {"step": 3, "time/step": 3.0, "perf/generated_tokens": 500, "reward/mean": 0.75,
         "time/generate": 1.5, "time/logp": 0.3, "time/update": 1.1},
        {"step": 3, "eval/avg@1": 0.5},
    ]  # fmt: skip
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert check.train_numbers(tmp_path) == (
        "2.000 s/step (generate/logp/update 1.00 / 0.20 / 0.70 s), 200 gen tok/s, "
        "reward 0.250 -> 0.750 (3 steps)"
    )
    for row, peak in zip(rows[:3], (900.0, 1500.0, 1200.0), strict=True):  # a run on CUDA
        row["perf/peak_gpu_mb"] = peak
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert check.train_numbers(tmp_path).endswith("(3 steps), peak GPU 1,500 MiB")


def test_the_carried_wheels_are_pinned_once_each():
    lines = (ROOT / "bench/gpu/wheels.txt").read_text().splitlines()
    reqs = [line for line in lines if line and not line.startswith("#")]
    names = [r.split("==")[0].lower().replace("_", "-") for r in reqs]
    assert all("==" in r for r in reqs) and len(names) == len(set(names))


def test_decode_profile_runs_on_the_cpu_and_prints_its_summary(tiny_model_dir):
    cmd = [sys.executable, "bench/gpu/decode_profile.py", "--model", str(tiny_model_dir),
           "--device", "cpu", "--rows", "8", "--group", "4", "--tokens", "4", "--repeats", "1",
           "--samplers", "hf", "lean"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")][2:]
    assert [r.split("|")[1].strip() for r in rows] == ["lean", "hf"]  # the samplers asked for
    assert len(rows[0].split("|")) == 8  # sampler, 3 modes, steps, ops
    assert "bf16-no-cudnn lean, costliest operators:" in proc.stdout
    assert proc.stdout.splitlines()[-1].startswith("ms/step fp32/bf16/bf16-no-cudnn: lean ")


def test_decode_profile_takes_frozen_and_adapted_weights_and_one_mode(tiny_model_dir):
    pytest.importorskip("peft")
    cmd = [sys.executable, "bench/gpu/decode_profile.py", "--model", str(tiny_model_dir),
           "--device", "cpu", "--rows", "4", "--group", "2", "--tokens", "3", "--repeats", "1",
           "--samplers", "lean", "--modes", "bf16-no-cudnn", "--weights", "lora"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "(lora): 4 rows x 3 tokens" in proc.stdout.splitlines()[0]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")][2:]
    assert len(rows) == 1 and len(rows[0].split("|")) == 6  # sampler, 1 mode, steps, ops
    assert proc.stdout.splitlines()[-1].startswith("ms/step bf16-no-cudnn: lean ")


def test_study_numbers_say_where_the_runs_ran(tmp_path):
    for arm, device in (("abc-grpo-1", "cuda"), ("abc-abc_grpo-2", "cpu")):
        run = tmp_path / "runs" / arm / "seed0"
        run.mkdir(parents=True)
        (run / "run.yaml").write_text(f"model:\n  name: tiny\n  device: {device}\nsteps: 3\n")
    (tmp_path / "abc").mkdir()
    results = {
        "arms": {"abc/grpo": {"final": {"eval/avg@4": [0.7]}}, "abc/abc_grpo": {"final": {}}},
        "claims": [{}, {}],
    }
    (tmp_path / "abc" / "results.json").write_text(json.dumps(results))
    numbers = "2 runs on cpu/cuda; held-out avg@4 abc/grpo 0.700; 2 claims judged"
    assert check.study_numbers(tmp_path, "abc", "cuda") == ("failed", numbers)
    (tmp_path / "runs" / "abc-abc_grpo-2" / "seed0" / "run.yaml").write_text(
        "model:\n  device: cuda\n"
    )
    assert check.study_numbers(tmp_path, "abc", "cuda")[0] == "ok"
