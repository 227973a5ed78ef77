"""The runnable files of ``examples/`` and ``bench/gpu/`` (CPU parts only)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
}
"""The scripts import this checkout's ``rlvr``, installed or not."""


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_verl_data_and_reward(tmp_path):
    pytest.importorskip("datasets")
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples/chain_sum_data.py"),
            "--out",
            str(tmp_path),
            "--train",
            "6",
            "--test",
            "3",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env=ENV,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    from datasets import Dataset

    train = Dataset.from_parquet(str(tmp_path / "train.parquet"))
    test = Dataset.from_parquet(str(tmp_path / "test.parquet"))
    assert (len(train), len(test)) == (6, 3)
    assert not set(train["prompt"][i][0]["content"] for i in range(6)) & set(
        test["prompt"][i][0]["content"] for i in range(3)
    )
    row = train[0]
    assert row["prompt"][0]["role"] == "user" and "\\boxed" in row["prompt"][0]["content"]
    answer = row["reward_model"]["ground_truth"]
    assert answer == str(json.loads(row["extra_info"]["entry"])["answer"])
    reward = load(ROOT / "examples/verl_reward.py")
    args = (row["data_source"],)
    assert reward.compute_score(*args, f"\\boxed{{{answer}}}", answer, row["extra_info"]) == 1.0
    wrong = str(int(answer) + 1)
    assert reward.compute_score(*args, f"\\boxed{{{wrong}}}", answer, row["extra_info"]) == 0.0


def test_trl_example_dataset():
    pytest.importorskip("trl")
    example = load(ROOT / "examples/trl_abc_grpo.py")
    data = example.chain_sum_dataset(3, seed=0)
    assert len(data) == 3 and data[0]["prompt"][0]["role"] == "user"
    assert data[0]["entry"]["answer"] is not None


@pytest.mark.slow
def test_trl_example_runs_one_step_on_the_tiny_preset(tmp_path):
    pytest.importorskip("trl")
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples/trl_abc_grpo.py"),
            "--model",
            "tiny",
            "--steps",
            "1",
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env=ENV,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "'clip/q1_share'" in run.stdout


def test_trl_example_refuses_vllm_without_a_gpu(monkeypatch, capsys):
    pytest.importorskip("trl")
    example = load(ROOT / "examples/trl_abc_grpo.py")
    monkeypatch.setattr(example.torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(sys, "argv", ["trl_abc_grpo.py", "--vllm"])
    with pytest.raises(SystemExit) as exit_:
        example.main()
    assert exit_.value.code == 2
    assert "--vllm needs a GPU" in capsys.readouterr().err


@pytest.mark.parametrize("script", ["examples/verl_abc_grpo.sh", "bench/gpu/engines_smollm2.sh"])
def test_shell_scripts_parse(script):
    assert subprocess.run(["bash", "-n", str(ROOT / script)], check=False).returncode == 0
