"""DAPO's soft overlong punishment (eq. 13): the penalty's numbers, what the trainer learns
from (the shaped reward) and what keeps the verifier's score (accuracy, group statistics,
dynamic sampling, held-out evaluation)."""

import math
from types import SimpleNamespace

import pytest
import torch

from rlvr.train import loop, rollout
from rlvr.train.batch import pack
from rlvr.train.metrics import read_metrics
from rlvr.train.overlong import overlong_penalty
from rlvr.train.prompts import Prompt


@pytest.mark.parametrize(
    ("lengths", "buffer", "factor", "expected"),
    [
        # L_max 16, L_cache 4: free up to 12, then -1/4 a token, -1 at the cap and past it
        ([0, 11, 12, 13, 14, 15, 16, 17], 4, 1.0, [0, 0, 0, -0.25, -0.5, -0.75, -1, -1]),
        ([12, 14, 16], 4, 0.5, [0, -0.25, -0.5]),  # scaled (verl's penalty_factor)
        ([0, 4, 8, 16], 16, 1.0, [0, -0.25, -0.5, -1]),  # the buffer the whole cap
        ([0, 12, 16, 17], 0, 1.0, [0, 0, 0, 0]),  # off
    ],
)
def test_the_penalty_is_dapos_eq_13(lengths, buffer, factor, expected):
    got = overlong_penalty(torch.tensor(lengths), max_len=16, buffer=buffer, factor=factor)
    assert got.dtype == torch.float32
    assert got.tolist() == expected
    assert not torch.signbit(got[got == 0]).any()  # 0, not -0.0


G, MAX_NEW, BUFFER = 4, 8, 4
# Hand-worked: free up to 8 - 4 = 4 tokens, then -1/4 a token.
LENGTHS = [2, 5, 6, 8, 3, 4, 7, 8]
SCORES = [1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0]  # group A all correct, group B half
PENALTIES = [0.0, -0.25, -0.5, -1.0, 0.0, 0.0, -0.75, -1.0]
# shaped A [1, .75, .5, 0] (mean .5625), B [0, 1, .25, -1] (mean .0625), minus the group mean
SHAPED_ADV = [0.4375, 0.1875, -0.0625, -0.5625, -0.0625, 0.9375, 0.1875, -1.0625]
SCORE_ADV = [0.0, 0.0, 0.0, 0.0, -0.5, 0.5, 0.5, -0.5]  # what the scores alone give


def _round(lengths, scores) -> rollout.Round:
    n = len(lengths) // G
    prompts = [Prompt(ids=(1,), reference="r", example=SimpleNamespace(prompt="p"))] * n
    seqs = pack([[1]] * len(lengths), [[2] * k for k in lengths], 0)
    texts = [f"t{i}" for i in range(len(lengths))]
    truncated = torch.tensor(lengths) == MAX_NEW  # as if none of them ended with EOS there
    rnd = rollout.Round(prompts, seqs, texts, torch.tensor(scores), truncated)
    rnd.seconds = {"generate": 0.0, "score": 0.0}
    return rnd


def _config(train_config, *overrides, out="run"):
    return train_config(
        f"rollout.group_size={G}",
        f"rollout.max_new_tokens={MAX_NEW}",
        f"reward.overlong_buffer={BUFFER}",
        *overrides,
        out=out,
    )


def test_advantages_are_of_the_shaped_reward_and_statistics_of_the_scores(train_config):
    """ETR's pass rate p_g (ALGORITHMS.md: the share of the group whose reward exceeds 0)
    counts correct completions, and the batch's rewards (the SFT term's positives) stay
    the verifier's: group A is all correct however long its completions."""
    cfg = _config(
        train_config,
        "objective.name=etr",
        "objective.advantage=group_mean",
        "rollout.filter_zero_advantage=true",
    )
    batch, counts = rollout.assemble([_round(LENGTHS, SCORES)], 0, cfg)
    assert batch.advantages.tolist() == pytest.approx(SHAPED_ADV, abs=1e-6)
    assert batch.rewards.tolist() == SCORES
    assert batch.group_stats.pass_rate.tolist() == [1.0] * 4 + [0.5] * 4
    assert counts["groups/filtered_zero_adv"] == 0  # group A's shaped rewards differ

    off = train_config("objective.advantage=group_mean", f"rollout.max_new_tokens={MAX_NEW}")
    assert rollout.assemble([_round(LENGTHS, SCORES)], 0, off).batch.advantages.tolist() == (
        SCORE_ADV
    )


def test_accuracy_reads_the_scores_and_identical_groups_the_shaped_rewards(train_config):
    cfg = _config(train_config)
    rnd = _round(LENGTHS, SCORES)
    metrics = rollout.rollout_metrics([rnd], cfg)
    assert metrics["reward/accuracy"] == 0.75 and metrics["reward/mean"] == 0.75
    assert metrics["reward/overlong_penalty_mean"] == pytest.approx(-3.5 / 8)
    assert metrics["reward/overlong_frac"] == 5 / 8
    assert metrics["groups/identical_frac"] == 0.0  # group A: all correct, not all alike
    assert rnd.informative(G).tolist() == [False, True]  # dynamic sampling: DAPO eq. 11
    rows = rollout.samples([rnd], 8, cfg)
    assert [r["reward"] for r in rows] == SCORES
    assert [r["overlong_penalty"] for r in rows] == PENALTIES


def test_a_run_without_the_punishment_logs_zeros_and_samples_without_it(train_config):
    cfg = train_config(f"rollout.max_new_tokens={MAX_NEW}")
    rnd = _round(LENGTHS, SCORES)
    metrics = rollout.rollout_metrics([rnd], cfg)
    assert metrics["reward/overlong_penalty_mean"] == 0.0 == metrics["reward/overlong_frac"]
    assert metrics["groups/identical_frac"] == 0.5
    assert "overlong_penalty" not in rollout.samples([rnd], 8, cfg)[0]


def _hand_advantages(rounds, eos, buffer):
    """Group-std advantages of verifier score + eq. 13 penalty, from the sampled tokens."""
    out, penalties = [], []
    for rnd in rounds.sampled:
        width = rnd.seqs.prompt_width
        for start in range(0, len(rnd.texts), G):
            shaped = []
            for i in range(start, start + G):
                tokens = rnd.seqs.input_ids[i, width:].tolist()
                length = tokens.index(eos) + 1 if eos in tokens else MAX_NEW
                over = min(max(length - (MAX_NEW - buffer), 0), buffer)
                penalties.append(-over / buffer if buffer else 0.0)
                score = 1.0 if len(rnd.texts[i]) % 2 == 0 else 0.0  # the `even` verifier
                shaped.append(score + penalties[-1])
            mean = sum(shaped) / G
            std = math.sqrt(sum((r - mean) ** 2 for r in shaped) / G)
            out += [0.0 if std == 0 else (r - mean) / (std + 1e-6) for r in shaped]
    return out, penalties


def _run(train_config, monkeypatch, model_dir, buffer, *overrides):
    """One step on the tiny model; its rounds, the update's batch and the metrics rows."""
    seen = {}

    def rollout_(run, step):
        seen["rounds"], lag = real_rollout(run, step)
        return seen["rounds"], lag

    def update(policy, optimizer, scheduler, batch, cfg, objective):
        seen["batch"] = batch
        return real_update(policy, optimizer, scheduler, batch, cfg, objective)

    real_rollout, real_update = loop._rollout, loop.update_policy
    monkeypatch.setattr(loop, "_rollout", rollout_)
    monkeypatch.setattr(loop, "update_policy", update)
    cfg = _config(
        train_config,
        f"model.name={model_dir}",
        f"reward.overlong_buffer={buffer}",
        "steps=1",
        "eval.at_start=true",
        "eval.at_end=true",
        *overrides,
        out=f"buffer{buffer}",
    )
    rows = read_metrics(loop.train(cfg).run_dir / "metrics.jsonl")
    return seen["rounds"], seen["batch"], {r["step"]: r for r in rows}


def test_a_run_learns_from_the_penalised_reward_and_scores_as_without_it(
    train_config, monkeypatch, short_model_dir
):
    from transformers import AutoTokenizer

    eos = AutoTokenizer.from_pretrained(short_model_dir).eos_token_id
    rounds, batch, rows = _run(train_config, monkeypatch, short_model_dir, BUFFER)
    expected, penalties = _hand_advantages(rounds, eos, BUFFER)
    assert batch.advantages.tolist() == pytest.approx(expected, rel=1e-5, abs=1e-6)
    assert any(-1 < p < 0 for p in penalties) and 0.0 in penalties  # inside and before the buffer
    unshaped, _ = _hand_advantages(rounds, eos, 0)
    assert unshaped != pytest.approx(expected, abs=1e-3)  # the penalty moved the advantages
    assert rows[1]["reward/overlong_penalty_mean"] == pytest.approx(sum(penalties) / 8)

    _, plain, off = _run(train_config, monkeypatch, short_model_dir, 0)
    assert plain.advantages.tolist() == pytest.approx(unshaped, rel=1e-5, abs=1e-6)
    same = ("reward/mean", "reward/accuracy", "response/length_mean")
    assert {k: rows[1][k] for k in same} == {k: off[1][k] for k in same}
    assert 0 < rows[1]["reward/accuracy"] < 1
    assert rows[0]["eval/avg@1"] == off[0]["eval/avg@1"]
    for row in (rows[1], off[1]):  # verifier scores: 0 or 1 for each of 6 x 2 samples
        assert row["eval/avg@1"] * 12 == pytest.approx(round(row["eval/avg@1"] * 12))


def test_the_asynchronous_path_learns_from_the_penalised_reward(
    train_config, monkeypatch, short_model_dir
):
    """Under ``rollout.staleness=1`` the generation worker samples and scores; the trainer
    assembles its rounds as the synchronous path does."""
    from transformers import AutoTokenizer

    eos = AutoTokenizer.from_pretrained(short_model_dir).eos_token_id
    rounds, batch, rows = _run(
        train_config,
        monkeypatch,
        short_model_dir,
        BUFFER,
        "rollout.staleness=1",
        "model.device=cpu",
    )
    expected, penalties = _hand_advantages(rounds, eos, BUFFER)
    assert any(p < 0 for p in penalties)
    assert batch.advantages.tolist() == pytest.approx(expected, rel=1e-5, abs=1e-6)
    assert rows[1]["reward/overlong_frac"] == sum(p < 0 for p in penalties) / 8


def test_a_large_factor_is_reached_without_overflow():
    """``factor * over`` was computed before ``/ buffer``: at DAPO's 20,480-token cap a factor
    of 1e35 overflowed float32 to -inf (and NaN advantages) though the penalty is 1e35."""
    got = overlong_penalty(torch.tensor([20480, 18432]), max_len=20480, buffer=4096, factor=1e35)
    assert got.tolist() == pytest.approx([-1e35, -0.5e35], rel=1e-6)


def test_a_buffer_with_the_penalty_at_its_largest_trains_and_logs_its_mean(train_config):
    """The largest penalty the configuration takes stays finite in the advantages and in
    ``reward/overlong_penalty_mean`` (its float32 mean over the batch overflowed to null)."""
    cfg = _config(train_config, "reward.overlong_penalty=4e37")  # G = 4: at most 4.25e37
    rnd = _round(LENGTHS * 3, SCORES * 3)  # 24 penalties summing to -4.2e38
    batch, _ = rollout.assemble([rnd], 0, cfg)
    assert bool(torch.isfinite(batch.advantages).all())
    mean = rollout.rollout_metrics([rnd], cfg)["reward/overlong_penalty_mean"]
    assert mean == pytest.approx(-3.5 / 8 * 4e37, rel=1e-5)
