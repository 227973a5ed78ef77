"""The rollout and optimiser metrics of ``metrics.jsonl`` recomputed from what each step sampled.

Each step's rounds are captured as the trainer got them; every number is then computed
again from the completions' token ids and texts (lengths up to the first EOS, rewards from
the verifier, DAPO's overlong penalties from the lengths, groups from the prompt order), the
learning rates from the schedule's formula
and the gradient norms from the gradients, and compared with the row the run wrote, with
``samples.jsonl`` and with what TensorBoard received. The model's EOS row is pushed toward
its hidden states, so completions both stop and run out of tokens.
"""

import math

import pytest
import torch
from transformers import AutoTokenizer

from rlvr.train import loop, update
from rlvr.train.metrics import read_metrics

G, MAX_NEW = 4, 6


def _even(text: str) -> float:
    """The score of the test verifier ``even`` (tests/conftest.py): 1 for even lengths."""
    return 1.0 if len(text) % 2 == 0 else 0.0


def _captured_run(train_config, monkeypatch, eos_model_dir, *overrides):
    """Run 3 steps; returns (run dir, {step: Rounds}, [(step, grad norm, lr)], eos id)."""
    rounds, steps, now = {}, [], {}

    def rollout(run, step):
        now["step"] = step
        rounds[step], lag = real_rollout(run, step)
        return rounds[step], lag

    def clip_and_step(model, optimizer, scheduler, cfg):
        grads = [p.grad.double().pow(2).sum() for p in model.parameters() if p.grad is not None]
        norm = float(torch.stack(grads).sum().sqrt())
        steps.append((now["step"], norm, optimizer.param_groups[0]["lr"]))
        return real_step(model, optimizer, scheduler, cfg)

    real_rollout, real_step = loop._rollout, update.clip_and_step
    monkeypatch.setattr(loop, "_rollout", rollout)
    monkeypatch.setattr(update, "clip_and_step", clip_and_step)
    cfg = train_config(
        f"model.name={eos_model_dir}",
        "steps=3",
        f"rollout.group_size={G}",
        f"rollout.max_new_tokens={MAX_NEW}",
        "log.samples_per_step=5",
        "log.tensorboard=true",
        *overrides,
    )
    result = loop.train(cfg)
    return result.run_dir, rounds, steps, cfg


def _penalty(length, reward_cfg):
    """DAPO eq. 13 of a completion of ``length`` tokens, scaled by ``reward.overlong_penalty``."""
    buffer = reward_cfg.overlong_buffer
    if not buffer:
        return 0.0
    over = min(max(length - (MAX_NEW - buffer), 0), buffer)
    return 0.0 - reward_cfg.overlong_penalty * over / buffer


def _completions(rounds, eos, reward_cfg):
    """Per completion of the step, every round in turn: (length, truncated, reward, text,
    prompt, overlong penalty)."""
    out = []
    for rnd in rounds.sampled:
        width = rnd.seqs.prompt_width
        for i, text in enumerate(rnd.texts):
            tokens = rnd.seqs.input_ids[i, width:].tolist()
            stops = eos in tokens
            length = tokens.index(eos) + 1 if stops else MAX_NEW
            prompt = rnd.prompts[i // G]
            penalty = _penalty(length, reward_cfg)
            out.append((length, not stops, _even(text), text, prompt, penalty))
    return out


def _expected_rollout(done):
    """The rollout metrics of one step's completions, computed here."""
    lengths, truncated, rewards = ([c[k] for c in done] for k in range(3))
    n, mean = len(done), sum(rewards) / len(done)
    shaped = [c[2] + c[5] for c in done]  # what the advantages are of
    groups = [shaped[i : i + G] for i in range(0, n, G)]
    return {
        "reward/mean": mean,
        "reward/std": math.sqrt(sum((r - mean) ** 2 for r in rewards) / n),
        "reward/accuracy": sum(r == 1.0 for r in rewards) / n,
        "reward/overlong_penalty_mean": sum(c[5] for c in done) / n,
        "reward/overlong_frac": sum(c[5] < 0 for c in done) / n,
        "response/length_mean": sum(lengths) / n,
        "response/length_max": max(lengths),
        "response/clipped_frac": sum(truncated) / n,
        "response/empty_frac": sum(not c[3].strip() for c in done) / n,
        "groups/identical_frac": sum(len(set(g)) == 1 for g in groups) / len(groups),
        "perf/generated_tokens": sum(lengths),
        "sampling/rounds": None,  # filled by the caller
    }


def _expected_batch(done, ro):
    """``groups/*``, ``rollout/masked_truncated`` and ``batch/*`` from the step's completions:
    dynamic sampling keeps the first informative groups, then the filters drop rows."""
    counts = dict.fromkeys(("groups/kept", "groups/filtered_zero_adv"), 0)
    counts["rollout/masked_truncated"], rows, taken = 0, [], 0
    for start in range(0, len(done), G):
        group = done[start : start + G]
        informative = len({c[2] for c in group}) > 1  # verifier scores (DAPO eq. 11)
        if ro.dynamic_sampling and (not informative or taken == ro.prompts_per_step):
            continue
        taken += 1
        if ro.filter_zero_advantage and len({c[2] + c[5] for c in group}) == 1:
            counts["groups/filtered_zero_adv"] += 1
            continue
        counts["groups/kept"] += 1
        masked = [c for c in group if ro.mask_truncated and c[1]]
        counts["rollout/masked_truncated"] += len(masked)
        rows += [c for c in group if c not in masked]
    counts["sampling/underfilled"] = float(ro.dynamic_sampling and taken < ro.prompts_per_step)
    counts["update/skipped"] = float(not rows)
    if rows:
        counts["batch/sequences"], counts["batch/tokens"] = len(rows), sum(c[0] for c in rows)
    return counts


def _schedule_lrs(cfg, count):
    """The learning rate of each of the run's first ``count`` optimiser steps, from the
    formula docs/training.md gives (linear warm-up, then constant or cosine to ``min_lr``)."""
    o, total = cfg.optim, cfg.steps * cfg.rollout.minibatches * cfg.rollout.epochs
    lrs = []
    for s in range(count):
        if s < o.warmup_steps:
            lrs.append(o.lr * (s + 1) / o.warmup_steps)
            continue
        if o.schedule == "constant":
            lrs.append(o.lr)
            continue
        cos = 0.5 * (1 + math.cos(math.pi * (s - o.warmup_steps) / (total - o.warmup_steps)))
        lrs.append(o.min_lr + (o.lr - o.min_lr) * cos)
    return lrs


def _tensorboard(run_dir):
    """{(step, name): value} of the run's TensorBoard events."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tb"), size_guidance={"scalars": 0})
    events.Reload()
    tags = events.Tags()["scalars"]
    return {(e.step, tag): e.value for tag in tags for e in events.Scalars(tag)}


SETUPS = {  # overrides, and metrics some step must have above a bound (the paths taken)
    "filters": (
        [
            "rollout.filter_zero_advantage=true",
            "rollout.mask_truncated=true",
            "rollout.minibatches=2",
            "optim.micro_batch_size=3",
            "optim.schedule=cosine",
            "optim.min_lr=1e-4",
        ],
        {"groups/filtered_zero_adv": 0, "rollout/masked_truncated": 0, "update/skipped": 0},
    ),
    "dynamic": (
        [
            "rollout.dynamic_sampling=true",
            "rollout.max_sampling_rounds=3",
            "rollout.filter_zero_advantage=true",
            "rollout.epochs=2",
            "optim.warmup_steps=3",
        ],
        {"sampling/rounds": 1, "groups/identical_frac": 0},
    ),
    "overlong": (
        [
            "reward.overlong_buffer=3",
            "reward.overlong_penalty=0.5",
            "rollout.dynamic_sampling=true",
            "rollout.filter_zero_advantage=true",
        ],
        {"reward/overlong_frac": 0, "groups/identical_frac": 0},
    ),
}


@pytest.mark.parametrize("setup", list(SETUPS))
def test_logged_metrics_match_a_recomputation_from_the_steps_rollouts(
    train_config, monkeypatch, eos_model_dir, setup
):
    overrides, exercised = SETUPS[setup]
    run_dir, rounds, opt_steps, cfg = _captured_run(
        train_config, monkeypatch, eos_model_dir, *overrides
    )
    rows = {r["step"]: r for r in read_metrics(run_dir / "metrics.jsonl")}
    samples = read_metrics(run_dir / "samples.jsonl")
    eos = AutoTokenizer.from_pretrained(eos_model_dir).eos_token_id
    seen = []
    for step, row in rows.items():
        done = _completions(rounds[step], eos, cfg.reward)
        seen += done
        want = _expected_rollout(done) | _expected_batch(done, cfg.rollout)
        want["sampling/rounds"] = len(rounds[step].sampled)
        ours = [(norm, lr) for s, norm, lr in opt_steps if s == step]
        if ours:
            want["update/optimizer_steps"] = len(ours)
            want["optim/grad_norm"] = sum(n for n, _ in ours) / len(ours)
            want["optim/lr"] = sum(lr for _, lr in ours) / len(ours)
        assert {k: row[k] for k in want} == pytest.approx(want, rel=1e-5), step
        assert row["perf/tokens_per_s"] == pytest.approx(
            want["perf/generated_tokens"] / row["time/step"]
        )
        logged = [s for s in samples if s["step"] == step]
        assert [(s["prompt"], s["completion"], s["reward"]) for s in logged] == [
            (c[4].example.prompt, c[3], c[2]) for c in done[:5]
        ]
        if cfg.reward.overlong_buffer:
            assert [s["overlong_penalty"] for s in logged] == [c[5] for c in done[:5]]
    lrs = _schedule_lrs(cfg, len(opt_steps))
    assert [lr for _, _, lr in opt_steps] == pytest.approx(lrs, rel=1e-12)
    assert {c[1] for c in seen} == {True, False}  # completions stopped and ran out
    assert all(max(r[k] for r in rows.values()) > bound for k, bound in exercised.items())
    tb = _tensorboard(run_dir)
    written = {(s, k): v for s, r in rows.items() for k, v in r.items() if k != "step"}
    assert tb == pytest.approx({k: v for k, v in written.items() if v is not None}, rel=1e-6)
