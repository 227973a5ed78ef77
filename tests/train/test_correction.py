"""Rollout/training log-prob mismatch metrics and truncated importance sampling."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr.generation import register_sampler
from rlvr.generation.lean import LeanOptions, LeanSampler
from rlvr.objectives import step_counts
from rlvr.ops import sequence_token_stats
from rlvr.train.batch import RolloutBatch, from_generation, pack, pad_logp
from rlvr.train.config import RolloutConfig
from rlvr.train.correction import rollout_correction
from rlvr.train.loop import train
from rlvr.train.metrics import read_metrics
from rlvr.train.update import micro_loss

OFFSET = 0.25
"""What the test sampler adds to every log-prob it reports."""


@register_sampler("offset_logprobs", options=LeanOptions, logprobs=True)
class OffsetLogprobs(LeanSampler):
    """``lean``, reporting the exact log-probs plus ``OFFSET`` (a sampler with a known mismatch)."""

    def generate(self, prompt_ids, *, n, sampling):
        gen = super().generate(prompt_ids, n=n, sampling=sampling)
        seqs = from_generation(gen)
        with torch.no_grad():
            stats = sequence_token_stats(
                self.model,
                seqs.input_ids,
                seqs.attention_mask,
                seqs.response_width,
                temperature=sampling.temperature,
            )
        gen.logprobs = (stats.logp.float() + OFFSET) * seqs.response_mask
        return gen


register_sampler("undeclared", options=LeanOptions)(LeanSampler)  # says nothing of log-probs


def test_hand_worked_mismatch_and_weights():
    train_logp = torch.tensor([[-1.0, -2.0, -0.5, -9.0]])
    rollout_logp = torch.tensor([[-1.5, -1.9, -0.5, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])  # diffs 0.5, -0.1, 0 on the real tokens
    cfg = RolloutConfig(importance_correction="tis", importance_cap=1.5, sampler="offset_logprobs")
    weights, metrics = rollout_correction(train_logp, rollout_logp, mask, cfg)
    assert float(metrics["rollout/logp_diff_mean"]) == pytest.approx(0.6 / 3, abs=1e-7)
    assert float(metrics["rollout/logp_diff_max"]) == pytest.approx(0.5, abs=1e-7)
    expected = [1.5, math.exp(-0.1), 1.0, 0.0]  # e^0.5 = 1.65 is capped at 1.5; padding 0
    assert weights[0].tolist() == pytest.approx(expected, abs=1e-6)
    assert float(metrics["rollout/is_weight_mean"]) == pytest.approx(sum(expected) / 3, abs=1e-6)
    assert float(metrics["rollout/is_capped_frac"]) == pytest.approx(1 / 3, abs=1e-7)


def test_no_correction_keeps_metrics_only():
    logp, mask = torch.tensor([[-1.0, -2.0]]), torch.ones(1, 2)
    weights, metrics = rollout_correction(logp, logp - 0.3, mask, RolloutConfig())
    assert weights is None
    assert sorted(metrics) == ["rollout/logp_diff_max", "rollout/logp_diff_mean"]
    assert float(metrics["rollout/logp_diff_mean"]) == pytest.approx(0.3, abs=1e-6)


def test_a_sampler_without_logprobs():
    """A sampler that does not declare whether it reports log-probs is found at the update."""
    logp, mask = torch.tensor([[-1.0]]), torch.ones(1, 1)
    assert rollout_correction(logp, None, mask, RolloutConfig()) == (None, {})
    cfg = RolloutConfig(importance_correction="tis", sampler="undeclared")
    with pytest.raises(ValueError, match="rollout.importance_correction=tis needs a sampler"):
        rollout_correction(logp, None, mask, cfg)


@pytest.mark.parametrize("sampler", ["lean", "hf"])
def test_tis_with_a_sampler_that_reports_no_logprobs_is_refused_by_the_config(sampler):
    """It passed rlvr train --dry-run and stopped the run at its first update."""
    with pytest.raises(ValueError) as err:
        RolloutConfig(importance_correction="tis", sampler=sampler)
    assert str(err.value) == (
        "rollout.importance_correction=tis needs a sampler that reports log-probs "
        f"(rollout.sampler=vllm); {sampler!r} reports none"
    )
    for other in ("vllm", "offset_logprobs", "undeclared"):
        assert RolloutConfig(importance_correction="tis", sampler=other).sampler == other


@pytest.mark.parametrize(
    ("overrides", "keys"),
    [
        ({"top_p": 0.9}, "rollout.top_p=0.9"),
        ({"top_k": 20}, "rollout.top_k=20"),
        ({"top_p": 0.9, "top_k": 20, "temperature": 0.7}, "rollout.top_p=0.9 and rollout.top_k=20"),
    ],
)
def test_tis_with_truncated_sampling_is_refused_by_the_config(overrides, keys):
    """A sampler's log-probs are the truncated distribution's, the trainer's the whole
    softmax's: each weight was the mass kept at its position (vLLM measured: 0.90 on average
    at top_p=0.9, 0.10 at temperature 0.7, top_k=20, top_p=0.9; docs/training.md)."""
    for sampler in ("vllm", "offset_logprobs", "undeclared"):
        with pytest.raises(ValueError) as err:
            RolloutConfig(importance_correction="tis", sampler=sampler, **overrides)
        assert str(err.value).startswith(
            f"rollout.importance_correction=tis with {keys}: the sampler reports the log-probs "
            "of the truncated distribution it drew from"
        )
        assert "set rollout.top_p=1 and rollout.top_k=0, or rollout.importance_correction=none" in (
            str(err.value)
        )
        assert RolloutConfig(sampler=sampler, **overrides).top_p == overrides.get("top_p", 1.0)
    untruncated = RolloutConfig(importance_correction="tis", sampler="vllm", temperature=0.7)
    assert untruncated.truncating_keys == []


def test_config_checks():
    with pytest.raises(ValueError, match="rollout.importance_correction must be one of"):
        RolloutConfig(importance_correction="is")
    with pytest.raises(ValueError, match="rollout.importance_cap must be > 0"):
        RolloutConfig(importance_cap=0)


def _batch(rollout_logp=None) -> RolloutBatch:
    seqs = pack([[5, 6, 7], [8]], [[9, 10, 11], [12]], pad_id=0)
    return RolloutBatch(
        seqs=seqs,
        rewards=torch.tensor([1.0, 0.0]),
        advantages=torch.tensor([1.0, -0.5]),
        group_stats=None,
        rollout_logp=rollout_logp,
    )


def test_rollout_logp_follows_rows_and_trimming():
    logp = torch.tensor([[-1.0, -2.0, -3.0], [-4.0, 0.0, 0.0]])
    batch = _batch(logp)
    assert batch.rows(torch.tensor([1])).trim_responses().rollout_logp.tolist() == [[-4.0]]
    assert batch.rows(torch.tensor([1, 0])).rollout_logp.tolist() == [
        logp[1].tolist(),
        logp[0].tolist(),
    ]
    padded = pad_logp([logp[:1, :2], logp[1:, :1]], 3)
    assert padded.tolist() == [[-1.0, -2.0, 0.0], [-4.0, 0.0, 0.0]]
    assert pad_logp([logp, None], 3) is None


@pytest.mark.parametrize(("shift", "cap", "factor"), [(0.5, 2.0, math.exp(-0.5)), (-0.5, 1.2, 1.2)])
def test_tis_scales_the_on_policy_loss(tiny_model, train_config, shift, cap, factor):
    """With ratio 1 the GRPO token loss is -A; a constant token weight w scales the loss by w."""
    model, _ = tiny_model
    base = _batch()
    with torch.no_grad():
        logp = sequence_token_stats(
            model, base.seqs.input_ids, base.seqs.attention_mask, base.seqs.response_width
        ).logp.float()
    mask = base.seqs.response_mask
    counts = step_counts(mask, base.rewards, 1.0, max_len=3)
    plain_cfg = train_config()
    tis_cfg = train_config(
        "rollout.sampler=offset_logprobs",
        "rollout.importance_correction=tis",
        f"rollout.importance_cap={cap}",
    )
    objective = plain_cfg.loss_config
    plain = micro_loss(model, base, plain_cfg, objective, counts)
    shifted = _batch((logp + shift) * mask)  # train - rollout = -shift on every token
    weighted = micro_loss(model, shifted, tis_cfg, objective, counts)
    assert float(plain.loss.detach()) != 0
    assert float(weighted.loss.detach()) == pytest.approx(
        factor * float(plain.loss.detach()), rel=1e-5
    )
    assert float(weighted.metrics["rollout/logp_diff_mean"]) == pytest.approx(abs(shift), abs=1e-5)
    assert float(weighted.metrics["rollout/is_capped_frac"]) == (1.0 if shift < 0 else 0.0)
    unweighted = micro_loss(model, shifted, plain_cfg, objective, counts)
    assert float(unweighted.loss.detach()) == pytest.approx(float(plain.loss.detach()), rel=1e-6)
    assert "rollout/is_weight_mean" not in unweighted.metrics


RUNS = {
    "one_step": [],
    "two_minibatches": ["rollout.minibatches=2"],  # train_logp = old_logp from a forward pass
    "rounds_and_calls": [  # log-probs of several generation calls and rounds, re-padded, filtered
        "rollout.dynamic_sampling=true",
        "rollout.filter_zero_advantage=true",
        "rollout.generation_batch_size=4",
    ],
    # train_logp = the generation worker's, under the weights that sampled (step 2: one
    # update behind): the staleness is not part of the mismatch
    "staleness": ["rollout.staleness=1", "optim.lr=0.05"],
}


@pytest.mark.filterwarnings("ignore:a step whose every group")  # dynamic sampling drops them
@pytest.mark.parametrize("run", sorted(RUNS))
def test_training_reports_the_mismatch(train_config, run):
    from test_metric_names import _undocumented, documented

    cfg = train_config(
        "rollout.sampler=offset_logprobs",
        "rollout.importance_correction=tis",
        *RUNS[run],
        out=run,
    )
    rows = read_metrics(train(cfg).run_dir / "metrics.jsonl")
    assert len(rows) == 2
    for row in rows:
        assert row["rollout/logp_diff_mean"] == pytest.approx(OFFSET, abs=1e-5)
        assert row["rollout/logp_diff_max"] == pytest.approx(OFFSET, abs=1e-5)
        assert row["rollout/is_weight_mean"] == pytest.approx(math.exp(-OFFSET), abs=1e-5)
        assert row["rollout/is_capped_frac"] == 0
    assert _undocumented(rows[0], documented()) == []
