"""Asynchronous rollouts (``rollout.staleness = k``) checked from outside: every weight version
the trainer publishes is snapshotted, and each batch's behaviour log-probs, proximal
log-probs, ratio, clip metrics and loss are recomputed from the snapshots with a plain
forward pass of their own."""

import contextlib
import copy
import multiprocessing
import threading

import pytest
import torch

import rlvr.train.loop as loop_module
import rlvr.train.update as update_module
from rlvr.generation import register_sampler
from rlvr.train.async_rollout import WorkerError
from rlvr.train.harness import Callback
from rlvr.train.loop import train
from rlvr.train.metrics import read_metrics
from rlvr.train.policy import load_policy


class _Versions(Callback):
    """The policy's weights by version: ``weights[v]``, after step ``v`` (0: the start)."""

    def __init__(self):
        self.weights = {}

    def on_start(self, job, start_step):
        self.weights[start_step] = copy.deepcopy(job.policy.state_dict())

    def on_step(self, job, step, record):
        self.weights[step] = copy.deepcopy(job.policy.state_dict())


def _record(monkeypatch, versions, name, module, calls):
    """Wrap ``module.name`` to record (step, model weights before the call, the call's batch,
    its result); the step is the next version not yet snapshotted."""
    inner = getattr(module, name)

    def wrapped(model, optimizer, scheduler, batch, *args, **kwargs):
        weights = copy.deepcopy(model.state_dict())
        out = inner(model, optimizer, scheduler, batch, *args, **kwargs)
        calls.append((max(versions.weights) + 1, weights, batch, out))
        return out

    monkeypatch.setattr(module, name, wrapped)


def _logp(model, seqs, temperature=1.0):
    """[B, T] log-probs of the response tokens, 0 on padding: one plain forward pass."""
    ids, attn, mask = seqs.input_ids, seqs.attention_mask, seqs.response_mask
    positions = (attn.cumsum(1) - 1).clamp_min(0)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=attn, position_ids=positions).logits
    t = mask.shape[1]
    logp = (logits[:, -t - 1 : -1].float() / temperature).log_softmax(-1)
    return logp.gather(-1, ids[:, -t:, None]).squeeze(-1) * mask


class _Scorer:
    """Log-probs under any snapshot, on one model reloaded per call."""

    def __init__(self, cfg):
        self.model, _ = load_policy(cfg.model)
        self.model.eval()

    def __call__(self, weights, seqs):
        self.model.load_state_dict(weights)
        return _logp(self.model, seqs)


@pytest.mark.parametrize(
    ("k", "extra"),
    [
        (1, ()),
        (2, ()),
        (1, ("rollout.dynamic_sampling=true", "optim.micro_batch_size=3")),
        *[(1, (f"objective.name={name}",)) for name in ("abc_grpo", "etr", "gppo", "apmpo")],
    ],
    ids=["k1", "k2", "dynamic-micro", "abc_grpo", "etr", "gppo", "apmpo"],
)
def test_old_logp_are_the_sampling_weights_and_the_ratio_is_against_them(
    train_config, monkeypatch, k, extra
):
    """Batch s has old_logp under the weights of step s - 1 - d (d: its logged staleness,
    min(s - 1, k)), not the current ones; the logged ratio (and GRPO's clip quadrants) are
    exp(logp_current - logp_sampling) on its first (only) optimiser step."""
    versions, calls = _Versions(), []
    _record(monkeypatch, versions, "update_policy", loop_module, calls)
    overrides = ("steps=4", f"rollout.staleness={k}", "optim.lr=0.05", *extra)
    cfg = train_config(*overrides, out="run")
    rows = read_metrics(train(cfg, callbacks=[versions]).run_dir / "metrics.jsonl")
    assert sorted(versions.weights) == [0, 1, 2, 3, 4]
    score = _Scorer(cfg)
    assert [step for step, *_ in calls] == [1, 2, 3, 4]
    for (step, weights, batch, _), row in zip(calls, rows, strict=True):
        d = int(row["rollout/staleness_max"])
        assert d == min(step - 1, k)
        mask = batch.seqs.response_mask.bool()
        sampling = score(versions.weights[step - 1 - d], batch.seqs)
        torch.testing.assert_close(batch.old_logp * mask, sampling, atol=2e-5, rtol=0)
        current = score(weights, batch.seqs)
        ratio = (current - sampling).exp()[mask]
        assert row["ratio/mean"] == pytest.approx(float(ratio.mean()), abs=1e-5)
        if d == 0:
            assert row["ratio/max"] == pytest.approx(1.0, abs=1e-5)
            continue
        assert (current - sampling)[mask].abs().max() > 1e-3  # the current weights differ
        assert row["ratio/max"] == pytest.approx(float(ratio.max()), abs=1e-4)
        if extra:  # the quadrants below are GRPO's band on one micro-batch
            continue
        adv = batch.advantages[:, None].expand_as(mask)[mask]
        q1 = ((adv > 0) & (ratio > 1.2)).float().mean()
        q3 = ((adv < 0) & (ratio < 0.8)).float().mean()
        assert row["clip/q1_frac"] == pytest.approx(float(q1), abs=1e-6)
        assert row["clip/q3_frac"] == pytest.approx(float(q3), abs=1e-6)


def _decoupled_loss(current, prox, behaviour, advantages, mask, cap=None, eps=0.2):
    """GRPO's decoupled loss (AReaL, Fu et al. 2025), ``seq-mean-token-mean``:
    mean over rows of the token mean of -pi_prox/pi_behav * min(u A, clip(u, 1 -+ eps) A),
    u = pi_theta / pi_prox; a weight above ``cap`` is 0 (the token stays in the mean)."""
    u, w = (current - prox).exp(), (prox - behaviour).exp()
    if cap is not None:
        w = torch.where(w > cap, 0.0, w)
    a = advantages[:, None]
    per_token = -w * torch.minimum(u * a, u.clamp(1 - eps, 1 + eps) * a) * mask
    return float((per_token.sum(1) / mask.sum(1)).mean())


@pytest.mark.parametrize("cap", [None, 1.1])
def test_decoupled_proximal_policy_and_loss(train_config, monkeypatch, cap):
    """Under staleness 1 with two mini-batches, pi_prox is the weights at the start of the step
    (version s - 1), pi_behav the sampling weights (version s - 1 - d), and each optimiser
    step's loss is the decoupled objective on the weights it starts from."""
    versions, batches, steps = _Versions(), [], []
    _record(monkeypatch, versions, "update_policy", loop_module, batches)
    _record(monkeypatch, versions, "optimizer_step", update_module, steps)
    overrides = ("steps=3", "rollout.staleness=1", "rollout.decoupled=true", "optim.lr=0.05")
    cap_override = () if cap is None else (f"rollout.decoupled_cap={cap}",)
    cfg = train_config(*overrides, "rollout.minibatches=2", *cap_override)
    rows = read_metrics(train(cfg, callbacks=[versions]).run_dir / "metrics.jsonl")
    score = _Scorer(cfg)
    for (step, _, batch, _), row in zip(batches, rows, strict=True):
        d = int(row["rollout/staleness_max"])
        mask = batch.seqs.response_mask.bool()
        prox = score(versions.weights[step - 1], batch.seqs)
        torch.testing.assert_close(batch.prox_logp * mask, prox, atol=2e-5, rtol=0)
        behaviour = score(versions.weights[step - 1 - d], batch.seqs)
        torch.testing.assert_close(batch.old_logp * mask, behaviour, atol=2e-5, rtol=0)
    assert [step for step, *_ in steps] == [1, 1, 2, 2, 3, 3]
    for step, weights, minibatch, out in steps:
        mask = minibatch.seqs.response_mask.float()
        current = score(weights, minibatch.seqs)
        expected = _decoupled_loss(
            current, minibatch.prox_logp, minibatch.old_logp, minibatch.advantages, mask, cap
        )
        assert out["loss/policy"] == pytest.approx(expected, abs=1e-5), step
    if cap is not None:
        assert max(r["decoupled/capped_frac"] for r in rows) > 0


def test_decoupled_metrics_on_one_minibatch(train_config, monkeypatch):
    """With one optimiser step per batch the decoupled ratio is to the current weights (1, no
    clip) and the weight pi_prox / pi_behav carries the staleness, as docs/metrics.md says."""
    versions, batches = _Versions(), []
    _record(monkeypatch, versions, "update_policy", loop_module, batches)
    overrides = ("steps=3", "rollout.staleness=1", "rollout.decoupled=true", "optim.lr=0.05")
    rows = read_metrics(
        train(train_config(*overrides), callbacks=[versions]).run_dir / "metrics.jsonl"
    )
    score = _Scorer(train_config())
    for (step, _, batch, _), row in zip(batches, rows, strict=True):
        d = int(row["rollout/staleness_max"])
        assert row["ratio/min"] == pytest.approx(1.0, abs=1e-6)
        assert row["ratio/max"] == pytest.approx(1.0, abs=1e-6)
        assert row["clip/frac"] == 0
        mask = batch.seqs.response_mask.bool()
        prox = score(versions.weights[step - 1], batch.seqs)
        weight = (prox - score(versions.weights[step - 1 - d], batch.seqs)).exp()[mask]
        assert row["decoupled/weight_mean"] == pytest.approx(float(weight.mean()), abs=1e-5)
        assert row["decoupled/weight_max"] == pytest.approx(float(weight.max()), abs=1e-4)
        assert (float(weight.max()) > 1.001) == (d > 0)


def _stable(run_dir):
    """Metric rows without timings."""
    rows = read_metrics(run_dir / "metrics.jsonl")
    return [{k: v for k, v in r.items() if not k.startswith(("time/", "perf/"))} for r in rows]


def test_staleness_one_is_reproducible(train_config):
    overrides = ("steps=3", "rollout.staleness=1", "optim.lr=0.05")
    first = train(train_config(*overrides, out="a")).run_dir
    second = train(train_config(*overrides, out="b")).run_dir
    assert _stable(first) == _stable(second)


def test_extending_a_finished_run_starts_the_schedule_again(train_config):
    """A finished run holds no batches sampled ahead: resumed with more steps, its staleness
    ramps up from 0 again, as docs/training.md says."""
    train(train_config("steps=2", "rollout.staleness=2", out="extend"))
    resumed = train(train_config("steps=6", "rollout.staleness=2", out="extend"), resume=True)
    rows = read_metrics(resumed.run_dir / "metrics.jsonl")
    assert [r["rollout/staleness_max"] for r in rows] == [0, 1, 0, 1, 2, 2]


@register_sampler("test_always_fails")
class _AlwaysFails:
    """A sampler whose every ``generate`` call raises."""

    def __init__(self, model, tokenizer, options):
        pass

    def generate(self, prompt_ids, *, n, sampling):
        raise RuntimeError("sampler exploded")

    def sync_weights(self):
        pass

    def close(self):
        pass


class _Keep(Callback):
    """Keeps the job (as a caller's callback may), so nothing is left to garbage collection;
    with ``interrupt``, Ctrl-C after the first step."""

    def __init__(self, interrupt=False):
        self.job, self.interrupt = None, interrupt

    def on_start(self, job, start_step):
        self.job = job

    def on_step(self, job, step, record):
        if self.interrupt:
            raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("extra", "interrupt", "error"),
    [
        ((), False, None),
        (("rollout.sampler=test_always_fails",), False, WorkerError),
        ((), True, KeyboardInterrupt),
    ],
    ids=["finished", "worker-failed", "interrupted"],
)
def test_no_thread_or_process_outlives_the_run(train_config, extra, interrupt, error):
    """After train() returns or raises, the generation worker and every thread the run
    started are gone, also while the run's objects are still referenced."""
    before = set(threading.enumerate())
    cfg = train_config("steps=2", "rollout.staleness=1", *extra, out="leak")
    with pytest.raises(error) if error else contextlib.nullcontext():
        train(cfg, callbacks=[keep := _Keep(interrupt)])
    assert keep.job is not None
    assert multiprocessing.active_children() == []
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == [], [t.name for t in left]
