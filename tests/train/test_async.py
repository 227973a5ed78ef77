"""Asynchronous rollouts (``rollout.staleness = k``): bounded staleness, the schedule's stale
weights, k = 0 unchanged, exact resume, worker failure, Ctrl-C."""

import json

import pytest
import torch

from rlvr.generation import make_sampler, register_sampler
from rlvr.train.async_rollout import WorkerError, batch_seed
from rlvr.train.checkpoint import checkpoint_dir, list_checkpoints, seed_everything
from rlvr.train.harness import Callback
from rlvr.train.loop import build_run, train
from rlvr.train.metrics import read_metrics
from rlvr.train.rollout import collect_rounds


def _stable(run_dir, drop=()):
    """Metric rows without timings (and without the names in ``drop``)."""
    return [
        {k: v for k, v in r.items() if not k.startswith(("time/", "perf/")) and k not in drop}
        for r in read_metrics(run_dir / "metrics.jsonl")
    ]


def test_staleness_zero_equals_the_synchronous_run(train_config):
    default = train(train_config("steps=3", out="default")).run_dir
    zero = train(train_config("steps=3", "rollout.staleness=0", out="zero")).run_dir
    rows = _stable(default)
    assert rows == _stable(zero)
    assert not any(k.startswith("rollout/staleness") for k in rows[0])


@pytest.mark.parametrize("k", [1, 2])
def test_staleness_never_exceeds_k(train_config, k):
    cfg = train_config("steps=5", f"rollout.staleness={k}", out=f"k{k}")
    rows = read_metrics(train(cfg).run_dir / "metrics.jsonl")
    staleness = [r["rollout/staleness_max"] for r in rows]
    assert staleness == [float(min(s - 1, k)) for s in range(1, 6)]
    assert all(r["rollout/staleness_mean"] <= k for r in rows)
    assert all(r["time/wait_generation"] >= 0 and r["time/wait_update"] >= 0 for r in rows)


def _sampled_texts(cfg, checkpoint, step):
    """The completions of batch ``step`` sampled from ``checkpoint``'s weights on the worker's
    seed and prompt position (``prompts_per_step`` prompts per earlier batch)."""
    run = build_run(cfg, checkpoint.parent.parent, checkpoint)
    try:
        run.order.take(cfg.rollout.prompts_per_step * (step - 1))
        seed_everything(batch_seed(cfg.seed, step))
        rounds = collect_rounds(
            run.generator, run.tokenizer, run.scorer, run.train_set.prompts, run.order, cfg
        )
        return rounds.sampled[0].texts
    finally:
        run.close()


@pytest.mark.parametrize("extra", [(), ("model.lora.rank=4",)], ids=["full-weights", "lora"])
def test_batch_comes_from_the_weights_k_steps_back(train_config, extra):
    """The worker samples from the weights it was sent (with LoRA: the adapters too)."""
    if extra:
        pytest.importorskip("peft")
    cfg = train_config(
        *extra,
        "steps=3",
        "rollout.staleness=1",
        "optim.lr=0.05",
        "checkpoint.every=1",
        "checkpoint.keep_last=0",
        "log.samples_per_step=8",
        out="stale",
    )
    run_dir = train(cfg).run_dir
    logged = [
        json.loads(line)["completion"]
        for line in (run_dir / "samples.jsonl").read_text().splitlines()
        if json.loads(line)["step"] == 3
    ]
    sync = train_config(*extra, "steps=3", "optim.lr=0.05")
    assert _sampled_texts(sync, checkpoint_dir(run_dir, 1), 3) == logged  # step 3 <- weights of 1
    assert _sampled_texts(sync, checkpoint_dir(run_dir, 2), 3) != logged  # not the newest


class _StopAfter(Callback):
    """Ends the run with an exception once the checkpoint of ``step`` is written."""

    def __init__(self, step):
        self.step = step

    def on_checkpoint(self, job, step, path):
        if step == self.step:
            raise KeyboardInterrupt


@pytest.mark.parametrize("k", [1, 2])
def test_resume_mid_run_equals_the_uninterrupted_run(train_config, k):
    overrides = ("steps=5", f"rollout.staleness={k}", "checkpoint.every=2", "optim.lr=0.02")
    full = train(train_config(*overrides, out=f"full{k}")).run_dir
    cut = train_config(*overrides, out=f"cut{k}")
    with pytest.raises(KeyboardInterrupt):
        train(cut, callbacks=[_StopAfter(2)])
    resumed = train(cut, resume=True).run_dir
    assert _stable(resumed) == _stable(full)


def _prompts_by_step(run_dir):
    rows = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    return {s: sorted({r["prompt"] for r in rows if r["step"] == s}) for s in range(1, 6)}


@pytest.mark.parametrize(("before", "after"), [(1, 0), (2, 1)])
def test_resume_with_a_lower_staleness_draws_again_what_it_may_not_train(
    train_config, before, after
):
    """Batches the checkpoint sampled ahead that the new bound forbids are not trained and
    their prompts are not skipped: the prompt order is the uninterrupted run's."""
    overrides = ("steps=5", "checkpoint.every=2", "log.samples_per_step=1000")
    full = train(train_config(*overrides, f"rollout.staleness={before}", out="full")).run_dir
    cut = train_config(*overrides, f"rollout.staleness={before}", out="cut")
    with pytest.raises(KeyboardInterrupt):
        train(cut, callbacks=[_StopAfter(2)])
    lowered = train_config(*overrides, f"rollout.staleness={after}", out="cut")
    resumed = train(lowered, resume=True).run_dir
    assert _prompts_by_step(resumed) == _prompts_by_step(full)
    staleness = [
        r.get("rollout/staleness_max", 0.0) for r in read_metrics(resumed / "metrics.jsonl")
    ]
    assert all(s <= after for s in staleness[2:]), staleness


_CALLS = {"generate": 0}


@register_sampler("test_fails_third_call")
class _FailsThirdCall:
    """The lean sampler, except that its third ``generate`` call raises."""

    def __init__(self, model, tokenizer, options):
        self.inner = make_sampler("lean", model, tokenizer)

    def generate(self, prompt_ids, *, n, sampling):
        _CALLS["generate"] += 1
        if _CALLS["generate"] == 3:
            raise RuntimeError("sampler exploded")
        return self.inner.generate(prompt_ids, n=n, sampling=sampling)

    def sync_weights(self):
        self.inner.sync_weights()

    def close(self):
        self.inner.close()


def test_worker_failure_stops_the_run_and_keeps_its_checkpoints(train_config):
    _CALLS["generate"] = 0
    overrides = ("steps=4", "rollout.staleness=1", "checkpoint.every=1")
    cfg = train_config(*overrides, "rollout.sampler=test_fails_third_call", out="fail")
    with pytest.raises(
        WorkerError, match="generation worker failed: RuntimeError: sampler exploded"
    ) as failed:
        train(cfg)
    # the error says how the run continues (it did not)
    assert str(failed.value).endswith(
        f"--resume {cfg.log.output_dir} (in a pipeline or a study: running it again) continues from step_000002"
    )
    # batch 3 never came: the checkpoint of step 2 holds what arrived, and the run resumes
    assert [p.name for p in list_checkpoints(cfg.log.output_dir)][-1] == "step_000002"
    resumed = train(train_config(*overrides, out="fail"), resume=True)
    assert [r["step"] for r in read_metrics(resumed.run_dir / "metrics.jsonl")] == [1, 2, 3, 4]


def test_hf_sampler_and_decoupled_objective(train_config):
    cfg = train_config(
        "steps=3",
        "rollout.staleness=1",
        "rollout.sampler=hf",
        "rollout.decoupled=true",
        "rollout.minibatches=2",
        out="hf",
    )
    rows = read_metrics(train(cfg).run_dir / "metrics.jsonl")
    assert [r["rollout/staleness_max"] for r in rows] == [0.0, 1.0, 1.0]
    assert all(0 < r["decoupled/weight_mean"] < 10 for r in rows)


def test_decoupled_without_staleness_is_the_standard_objective(train_config):
    plain = train(train_config("steps=2", out="plain")).run_dir
    decoupled = train(train_config("steps=2", "rollout.decoupled=true", out="dec")).run_dir
    names = ("decoupled/weight_mean", "decoupled/weight_max", "decoupled/capped_frac")
    assert _stable(decoupled, drop=names) == _stable(plain)
    assert all(r["decoupled/weight_mean"] == 1.0 for r in read_metrics(decoupled / "metrics.jsonl"))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("rollout.sampler=vllm", "rollout.sampler='vllm'"),
        ("model.device=cuda", "model.device='cuda'"),
        ("rollout.generation_threads=0", "generation_threads must be >= 1"),
    ],
)
def test_refused_settings(train_config, override, message):
    with pytest.raises(ValueError, match=message):
        train_config("rollout.staleness=1", override)


def test_the_auto_device_is_read_as_this_machine_has_it(train_config, monkeypatch):
    """``model.device=auto`` (the default) is the CPU without a GPU, a GPU where torch sees one."""
    monkeypatch.delenv("RLVR_AUTO_DEVICE")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert train_config("rollout.staleness=1", "model.device=auto").rollout.staleness == 1
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(ValueError, match=r"model.device='auto' \(cuda here\)"):
        train_config("rollout.staleness=1", "model.device=auto")


def test_a_cpu_device_with_an_index_is_a_cpu(train_config):
    """``model.device=cpu:0`` is the CPU torch names with an index; staleness refused it."""
    assert train_config("rollout.staleness=1", "model.device=cpu:0").rollout.staleness == 1


def test_negative_staleness_is_refused(train_config):
    with pytest.raises(ValueError, match="rollout.staleness must be >= 0"):
        train_config("rollout.staleness=-1")


def test_thread_split():
    from rlvr.train.config import RolloutConfig

    assert RolloutConfig(staleness=1).thread_split(2) == (1, 1)
    assert RolloutConfig(staleness=1).thread_split(1) == (1, 1)
    assert RolloutConfig(staleness=1, generation_threads=3).thread_split(4) == (3, 1)
    assert torch.get_num_threads() >= 1


def test_a_study_regime_sets_the_staleness(tmp_path):
    import yaml

    from rlvr.compare import load_study, plan

    study = {
        "steps": 2,
        "seeds": [0],
        "arms": ["abc/grpo"],
        "claims": [],
        "regimes": {"sync": {}, "one-step-off": {"rollout": {"staleness": 1}}},
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(study))
    specs = plan(load_study(str(path)), tmp_path / "runs")
    assert {s.regime: s.config.rollout.staleness for s in specs} == {"sync": 0, "one-step-off": 1}
