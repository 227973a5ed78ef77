"""The runnable files of ``examples/`` and ``bench/gpu/`` (CPU parts only)."""

from __future__ import annotations

import argparse
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


def test_trl_example_prompts_are_the_demos(tiny_model_dir, tmp_path):
    """TRL tokenises the example's prompts into the ids ``rlvr train`` gives the demo's."""
    pytest.importorskip("trl")
    from rlvr.data import gym_rows, load_examples, write_jsonl
    from rlvr.models import load_tokenizer
    from rlvr.train.prompts import build_prompt_set

    example = load(ROOT / "examples/trl_abc_grpo.py")
    data = example.DEMO.data
    write_jsonl(gym_rows("chain_sum", size=3, seed=0, config=data.gym.config), tmp_path / "g.jsonl")
    examples = load_examples(str(tmp_path / "g.jsonl"), fields="reasoning_gym")
    tokenizer = load_tokenizer(str(tiny_model_dir))
    rows = example.prompt_dataset(examples, tokenizer)
    rlvr_ids = [
        list(p.ids) for p in build_prompt_set(examples, tokenizer, data, source="g").prompts
    ]
    assert [tokenizer(text)["input_ids"] for text in rows["prompt"]] == rlvr_ids
    assert [json.loads(r) for r in rows["reference"]] == [e.reference for e in examples]


@pytest.mark.slow
@pytest.mark.parametrize(
    "objective", [[], ["--objective", "grpo", "--advantage", "group_mean"]], ids=["abc", "grpo"]
)
def test_trl_example_runs_one_rollout_on_the_tiny_preset(tmp_path, objective):
    pytest.importorskip("trl")
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples/trl_abc_grpo.py"),
            "--model",
            "tiny",
            "--steps",
            "4",
            "--no-eval",
            "--out",
            str(tmp_path / "run"),
            *objective,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env=ENV,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "'clip/q1_share'" in run.stdout and "reward per rollout batch: " in run.stdout


def test_trl_example_refuses_vllm_without_a_gpu(monkeypatch, capsys):
    pytest.importorskip("trl")
    example = load(ROOT / "examples/trl_abc_grpo.py")
    monkeypatch.setattr(example.torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(sys, "argv", ["trl_abc_grpo.py", "--vllm"])
    with pytest.raises(SystemExit) as exit_:
        example.main()
    assert exit_.value.code == 2
    assert "--vllm needs a GPU" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--steps", "-3"], "argument --steps: must be above 0, got -3"),
        (["--steps", "0"], "argument --steps: must be above 0, got 0"),
        (["--lr", "0"], "argument --lr: must be above 0, got 0"),
        (["--advantage", "group-mean"], "unknown advantage mode 'group-mean'; valid: group_std"),
        (["--objective", "abc-grpo"], "unknown objective 'abc-grpo'; valid: grpo"),
        (["--eps3", "-0.1"], "eps3 must be >= 0, got -0.1"),
    ],
)
def test_trl_example_refuses_bad_arguments_before_loading(monkeypatch, capsys, argv, message):
    """One line, before the tokenizer, data and model load. ``--steps -3`` trained TRL's
    default 3 epochs (3000 steps: ``max_steps <= 0`` means "use the epochs"); a misspelt
    objective or advantage mode was a traceback after the tokenizer and data loaded."""
    pytest.importorskip("trl")
    example = load(ROOT / "examples/trl_abc_grpo.py")

    def never(*_):
        raise AssertionError("loaded a model")

    monkeypatch.setattr(example, "resolve_model_path", never)
    monkeypatch.setattr(sys, "argv", ["trl_abc_grpo.py", *argv])
    with pytest.raises(SystemExit) as exit_:
        example.main()
    assert exit_.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert message in err[-1] and err[-1].startswith("trl_abc_grpo.py: error: ")


def test_trl_example_runs_of_the_docs_get_their_own_folders():
    """The documented ABC-GRPO run and its GRPO baseline wrote to one default folder
    (runs/trl-abc-grpo): the baseline's checkpoint-80 replaced ABC-GRPO's."""
    pytest.importorskip("trl")
    example = load(ROOT / "examples/trl_abc_grpo.py")
    commands = {
        (): "runs/trl-tiny-abc_grpo",
        ("--objective", "grpo", "--advantage", "group_mean"): "runs/trl-tiny-grpo-group_mean",
        ("--eps3", "0.3"): "runs/trl-tiny-abc_grpo-eps3-0.3",
        ("--model", "/models/Qwen2.5-0.5B-Instruct/"): "runs/trl-Qwen2.5-0.5B-Instruct-abc_grpo",
        ("--out", "mine"): "mine",
    }
    for argv, out in commands.items():
        assert example.parse_args(list(argv)).out == out


@pytest.mark.parametrize(("eps3", "expected"), [(None, 0.2), (0.3, 0.3), (0.0, 0.0)])
def test_trl_example_passes_eps3_as_given(eps3, expected):
    """``--eps3 0`` is a width like any other: it reaches ABC-GRPO, not the default 0.2."""
    pytest.importorskip("trl")
    example = load(ROOT / "examples/trl_abc_grpo.py")
    widths = example.objective_kwargs(argparse.Namespace(objective="abc_grpo", eps3=eps3))
    assert widths == {"eps1": 0.2, "eps2": 0.2, "eps3": expected, "eps4": 0.2}
    assert example.objective_kwargs(argparse.Namespace(objective="grpo", eps3=None)) is None


def test_verl_example_refuses_a_machine_without_a_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    run = subprocess.run(
        ["bash", str(ROOT / "examples/verl_abc_grpo.sh")],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**ENV, "PATH": path},
    )
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and "needs a GPU" in run.stderr


@pytest.mark.parametrize("script", ["examples/verl_abc_grpo.sh", "bench/gpu/engines_smollm2.sh"])
def test_shell_scripts_parse(script):
    assert subprocess.run(["bash", "-n", str(ROOT / script)], check=False).returncode == 0
