"""The update with each prompt computed once equals the padded update."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr.ops import sequence as seq_module
from rlvr.train.batch import micro_batches, pack


def _update(cfg):
    from rlvr.train.loop import build_run
    from rlvr.train.rollout import assemble, behaviour_logp, collect_rounds
    from rlvr.train.run_dir import prepare_run_dir
    from rlvr.train.update import update_policy

    run = build_run(cfg, prepare_run_dir(cfg, resume=False)[0], None)
    torch.manual_seed(5)
    _, kept = collect_rounds(
        run.generator, run.tokenizer, run.scorer, run.train_set.prompts, run.order, cfg
    )
    batch, _ = assemble(kept, run.tokenizer.pad_token_id, cfg)
    batch, _ = behaviour_logp(batch, run.policy, run.reference, cfg)
    assert batch.advantages.abs().sum() > 0  # a real gradient
    metrics = update_policy(run.policy, run.optimizer, run.scheduler, batch, cfg)
    run.close()
    # The packed layout really ran (the one-time check did not fall back to the padded one).
    assert seq_module._VERIFIED.get(run.policy, False) is cfg.model.share_prompt
    return batch, metrics, {k: v.clone() for k, v in run.policy.state_dict().items()}


@pytest.mark.parametrize(
    "extra",
    [
        ("optim.micro_batch_size=3",),  # micro-batches that split the groups of 4
        ("optim.micro_batch_size=null", "rollout.minibatches=2", "objective.kl_coef=0.1"),
    ],
    ids=["split-groups", "minibatches-kl"],
)
def test_shared_prompt_update_equals_padded_update(train_config, extra):
    runs = []
    for share in ("false", "true"):
        cfg = train_config(
            f"model.share_prompt={share}",
            "optim.eps=1.0",
            "optim.lr=1e-2",
            "rollout.prompts_per_step=3",
            *extra,
            out=f"share-{share}",
        )
        runs.append(_update(cfg))
    (b_pad, m_pad, p_pad), (b_share, m_share, p_share) = runs
    assert torch.equal(b_pad.seqs.input_ids, b_share.seqs.input_ids)  # the same rollouts
    assert m_share["loss/policy"] == pytest.approx(m_pad["loss/policy"], rel=1e-5, abs=1e-7)
    assert m_share["optim/grad_norm"] == pytest.approx(m_pad["optim/grad_norm"], rel=1e-4)
    assert m_share["policy/entropy"] == pytest.approx(m_pad["policy/entropy"], rel=1e-5)
    for name, value in p_pad.items():
        torch.testing.assert_close(p_share[name], value, rtol=1e-5, atol=1e-7)


def test_prompt_chunks_keep_groups_together_longest_first():
    prompts = [[1, 2], [1, 2], [3], [3], [1, 2], [3]]
    responses = [[5], [5, 6, 7], [5, 6], [5, 6, 7, 8], [5, 6], [5]]
    seqs = pack(prompts, responses, pad_id=0)
    # real tokens per prompt's rows: [1, 2] 3 + 5 + 4 = 12, [3] 3 + 5 + 2 = 10
    chunks = micro_batches(seqs, 4, by_prompt=True)
    assert [c.tolist() for c in chunks] == [[1, 4, 0, 3], [2, 5]]
    assert [c.tolist() for c in micro_batches(seqs, None, by_prompt=True)] == [list(range(6))]
    sorted_rows = micro_batches(seqs, 4, by_prompt=False)  # the padded layout: by length
    assert [c.tolist() for c in sorted_rows] == [[1, 3, 4, 0], [2, 5]]


def test_trim_heap_releases_before_each_backward_and_changes_nothing(train_config, monkeypatch):
    from rlvr.train import heap

    real, calls = heap.release_free_heap, []
    monkeypatch.setattr(heap, "release_free_heap", lambda: calls.append(1) or real())
    params = {}
    for trim in ("false", "true"):
        cfg = train_config(
            f"model.trim_heap={trim}",
            "optim.micro_batch_size=3",
            "optim.lr=1e-2",
            "rollout.prompts_per_step=3",
            out=f"trim-{trim}",
        )
        batch, _, params[trim] = _update(cfg)
    chunks = micro_batches(batch.seqs, 3, by_prompt=True)
    assert len(calls) == len(chunks) > 1  # once per micro-batch, only when asked
    for name, value in params["false"].items():
        assert torch.equal(params["true"][name], value), name


@pytest.mark.parametrize(("norms", "expected"), [((math.inf, 3.0), 3.0), ((math.nan,) * 2, None)])
def test_grad_norm_leaves_out_skipped_optimiser_steps(train_config, monkeypatch, norms, expected):
    """A non-finite gradient norm (the step skipped) was logged as 0.0 and averaged in, so
    optim/grad_norm read as a small or vanishing gradient instead of a blown-up one."""
    import rlvr.train.update
    from rlvr.train.optim import Stepped

    scripted = iter(norms)

    def clip_and_step(model, optimizer, scheduler, cfg):
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        norm = next(scripted)
        return Stepped(norm, math.isfinite(norm))

    monkeypatch.setattr(rlvr.train.update, "clip_and_step", clip_and_step)
    cfg = train_config("rollout.minibatches=2", "rollout.prompts_per_step=2")
    _, metrics, _ = _update(cfg)
    assert metrics["optim/skipped_steps"] == sum(not math.isfinite(n) for n in norms)
    if expected is None:
        assert math.isnan(metrics["optim/grad_norm"])  # written as null, counted as non-finite
    else:
        assert metrics["optim/grad_norm"] == expected


def test_sft_loss_does_not_depend_on_the_micro_batches(train_config):
    """sft/loss (the NLL of the positive responses' tokens) was averaged over micro-batches
    with all their response tokens as weight, so its value moved with optim.micro_batch_size."""
    logged = {}
    for micro in ("null", "2"):
        cfg = train_config(
            "objective.sft_coef=0.1",
            f"optim.micro_batch_size={micro}",
            "rollout.prompts_per_step=3",
            "rollout.max_new_tokens=12",
            out=f"micro-{micro}",
        )
        batch, logged[micro], _ = _update(cfg)
    assert 0 < int((batch.rewards >= 1).sum()) < batch.size  # micro-batches differ in positives
    assert logged["2"]["sft/loss"] == pytest.approx(logged["null"]["sft/loss"], rel=1e-5)


def test_sft_loss_is_absent_in_a_step_without_positive_responses(train_config):
    """With no response reaching sft_threshold the step's sft/loss (a mean over no token)
    was logged as 0.0, a perfect imitation loss; it is now left out of the row, as the TRL
    adapter's log already did."""
    cfg = train_config("objective.sft_coef=0.1", "objective.sft_threshold=2.0")
    batch, metrics, _ = _update(cfg)
    assert bool((batch.rewards < 2.0).all())
    assert "sft/loss" not in metrics
    assert "policy/entropy" in metrics  # the other update metrics are there


def test_policy_loss_is_null_when_no_micro_batch_loss_was_finite(train_config, monkeypatch):
    """Every micro-batch loss non-finite (all left out of the gradient): loss/policy was the
    sum over no micro-batch, 0.0, a perfectly finite-looking loss; it is now NaN (written as
    null and counted in log/nonfinite_metrics), as optim/grad_norm is for skipped steps."""
    import rlvr.train.update

    real = rlvr.train.update.micro_loss

    def nan_loss(*args, **kwargs):
        out = real(*args, **kwargs)
        return out._replace(loss=out.loss * math.nan)

    monkeypatch.setattr(rlvr.train.update, "micro_loss", nan_loss)
    cfg = train_config("rollout.minibatches=2", "rollout.prompts_per_step=2")
    _, metrics, _ = _update(cfg)
    assert metrics["update/nonfinite_losses"] >= 2
    assert math.isnan(metrics["loss/policy"])
