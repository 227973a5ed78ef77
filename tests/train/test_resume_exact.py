"""A run stopped after step k and resumed equals the uninterrupted run, for every feature that
carries state from step to step: each objective, the rollout's filters and reuse, the KL
reference, adapters, the learning-rate schedule, contrast metrics and the data order across
an epoch. Metric rows (timings aside) are equal and the final weights bit-identical."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rlvr.train.harness import Callback
from rlvr.train.loop import train
from rlvr.train.metrics import read_metrics
from rlvr.train.overrides import dump_yaml

VOLATILE = ("time/", "perf/")

CASES = {
    "apmpo": ("objective.name=apmpo",),
    "apmpo-fss-mean": ("objective.name=apmpo", "objective.fss_form=mean"),
    "apmpo-fss-inv-std": ("objective.name=apmpo", "objective.fss_form=inv_std"),
    "pmpo": ("objective.name=pmpo",),
    "etr": ("objective.name=etr", "reward.wrong=-1"),
    "abc_grpo": ("objective.name=abc_grpo",),
    "gppo-sft": ("objective.name=gppo", "objective.sft_coef=0.1"),
    "cispo": ("objective.name=cispo",),
    "gspo": ("objective.name=gspo",),
    "gmpo": ("objective.name=gmpo",),
    "dapo": ("objective.name=dapo",),
    "dr_grpo": ("objective.name=dr_grpo",),
    "minibatches-epochs": ("rollout.minibatches=2", "rollout.epochs=2"),
    "dynamic-sampling": ("rollout.dynamic_sampling=true",),
    "filter-zero-advantage": ("rollout.filter_zero_advantage=true",),
    "kl-reference": ("objective.kl_coef=0.1",),
    "lora": ("model.lora.rank=4", "optim.lr=0.05"),
    # resumed in the warm-up (checkpoint of step 1), then the cosine decays over steps 3 and 4
    "cosine-warmup": ("optim.schedule=cosine", "optim.warmup_steps=2", "steps=4"),
    "contrast": ("log.contrast=[grpo]", "objective.name=abc_grpo", "rollout.minibatches=2"),
    "epoch-boundary": ("rollout.prompts_per_step=4",),  # 6 prompts: step 2 wraps into epoch 1
    "staleness-1": ("rollout.staleness=1",),
    "staleness-1-decoupled": (
        "rollout.staleness=1",
        "rollout.decoupled=true",
        "rollout.minibatches=2",
    ),
    "staleness-1-epoch": ("rollout.staleness=1", "rollout.prompts_per_step=4"),
    "held-out-eval": ("eval.every=1", "eval.at_start=true"),
    "hf-sampler": ("rollout.sampler=hf",),
    "micro-batches": ("optim.micro_batch_size=3", "rollout.mask_truncated=true"),
    "generation-batches": ("rollout.generation_batch_size=4",),
    "no-shuffle": ("data.shuffle=false", "rollout.prompts_per_step=4"),
    "overlong": (
        "reward.overlong_buffer=4",
        "rollout.mask_truncated=true",
        "rollout.dynamic_sampling=true",
        "objective.name=gppo",
        "objective.sft_coef=0.1",
    ),
    "overlong-staleness-1": ("reward.overlong_buffer=8", "rollout.staleness=1"),
}


class _Crash(Callback):
    """Ends the run with an exception once step ``at``'s row is written, before its checkpoint:
    the resumed run drops that row and runs the step again from the checkpoint before it."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_step(self, job, step, record):
        if step == self.at:
            raise KeyboardInterrupt


def _rows(run_dir):
    """The run's metric rows without wall-clock metrics (the only ones a resume may change)."""
    return [
        {k: v for k, v in r.items() if not k.startswith(VOLATILE)}
        for r in read_metrics(run_dir / "metrics.jsonl")
    ]


def _samples(run_dir):
    """The completions the run logged, by step."""
    return (run_dir / "samples.jsonl").read_text()


def _max_diff(a, b):
    """Largest absolute difference between two lists of metric rows (inf where keys differ)."""
    worst = 0.0
    for ra, rb in zip(a, b, strict=True):
        if ra.keys() != rb.keys():
            return float("inf")
        for k in ra:
            x, y = ra[k], rb[k]
            if x != y:
                worst = max(worst, abs(x - y) if None not in (x, y) else float("inf"))
    return worst


def _weights(model_dir):
    """A checkpoint's tensors by name."""
    return load_file(str(model_dir / "model.safetensors"))


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_run_stopped_after_step_2_resumes_exactly(train_config, case):
    """Stopped once step 2 is logged, resumed from step 1's checkpoint: the same rows and weights."""
    if case == "lora":
        pytest.importorskip("peft")
    overrides = ("steps=3", "checkpoint.every=1", "optim.lr=0.02", *CASES[case])
    full = train(train_config(*overrides, out="full"))
    cut = train_config(*overrides, out="cut")
    with pytest.raises(KeyboardInterrupt):
        train(cut, callbacks=[_Crash(at=2)])
    resumed = train(cut, resume=True)
    a, b = _rows(full.run_dir), _rows(resumed.run_dir)
    assert b == a, f"max metric difference {_max_diff(a, b)}"
    assert _samples(resumed.run_dir) == _samples(full.run_dir)
    wa, wb = _weights(full.model_dir), _weights(resumed.model_dir)
    assert wa.keys() == wb.keys()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


RESUME_SCRIPT = """
import sys
from rlvr.rewards import register
from rlvr.train.config import TrainConfig
from rlvr.train.loop import train
from rlvr.train.overrides import load_config

@register("even")
def even(completion, reference, *, correct=1.0, wrong=0.0):
    return correct if len(completion) % 2 == 0 else wrong

train(load_config(TrainConfig, sys.argv[1], []), resume=True)
"""

COMBINED = (
    "objective.name=apmpo", "objective.kl_coef=0.1", "rollout.minibatches=2",
    "rollout.epochs=2", "rollout.dynamic_sampling=true", "rollout.prompts_per_step=4",
    "optim.schedule=cosine", "optim.warmup_steps=2", "log.contrast=[grpo]",
)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("extra", [(), ("model.lora.rank=4",)], ids=["full-weights", "lora"])
def test_a_resume_in_a_new_process_equals_the_uninterrupted_run(train_config, tmp_path, extra):
    """The in-process resumes above share the process's state with the run they continue;
    here the stateful features together resume in a fresh interpreter, as ``--resume`` does."""
    if extra:
        pytest.importorskip("peft")
    overrides = ("steps=4", "threads=1", "checkpoint.every=1", "optim.lr=0.02", *COMBINED, *extra)
    full = train(train_config(*overrides, out="full"))
    cut = train_config(*overrides, out="cut")
    with pytest.raises(KeyboardInterrupt):
        train(cut, callbacks=[_Crash(at=2)])
    config = tmp_path / "cut.yaml"
    config.write_text(dump_yaml(cut))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    done = subprocess.run(
        [sys.executable, "-c", RESUME_SCRIPT, str(config)],
        env=env,
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    resumed = Path(cut.log.output_dir)
    a, b = _rows(full.run_dir), _rows(resumed)
    assert b == a, f"max metric difference {_max_diff(a, b)}"
    assert _samples(resumed) == _samples(full.run_dir)
    wa, wb = _weights(full.model_dir), _weights(resumed / "checkpoints" / "step_000004")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
