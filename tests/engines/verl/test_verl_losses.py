"""The registered ``rlvr_<name>`` losses against verl's own losses, and verl's global batch info."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")

import torch  # noqa: E402
from verl.trainer.ppo.core_algos import get_policy_loss_fn  # noqa: E402

from rlvr.advantages import group_stats  # noqa: E402
from rlvr.engines.verl import EXACT_ROUTE, objective_config, row_stats  # noqa: E402
from rlvr.objectives import OBJECTIVES, group_stats_for, policy_loss  # noqa: E402

from .helpers import VERL_AGG_MODES, B, G, actor, batch  # noqa: E402

TOL = {"rtol": 1e-7, "atol": 1e-10}


def loss_and_grad(loss_mode, config, *, weights=None, rows=slice(None), logp_batch=None):
    old, logp, adv, mask, _ = logp_batch or batch()
    fn = get_policy_loss_fn(loss_mode)
    loss, metrics = fn(
        old_log_prob=old[rows],
        log_prob=logp[rows],
        advantages=adv[rows],
        response_mask=mask[rows],
        loss_agg_mode=config.loss_agg_mode,
        config=config,
        rollout_is_weights=None if weights is None else weights[rows],
    )
    (grad,) = torch.autograd.grad(loss, logp)
    return loss.detach(), grad, metrics


@pytest.mark.parametrize("agg", VERL_AGG_MODES)
@pytest.mark.parametrize("with_weights", [False, True])
def test_rlvr_grpo_equals_verl_vanilla(agg, with_weights):
    weights = torch.rand(B, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    weights = weights * 2 if with_weights else None
    config = actor("vanilla", agg, clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0)
    ours = actor("rlvr_grpo", agg, clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0)
    ref_loss, ref_grad, theirs = loss_and_grad("vanilla", config, weights=weights)
    loss, grad, metrics = loss_and_grad("rlvr_grpo", ours, weights=weights)
    torch.testing.assert_close(loss, ref_loss, **TOL)
    torch.testing.assert_close(grad, ref_grad, **TOL)
    assert ref_grad.abs().sum() > 0
    assert metrics["rlvr/clip/dual_frac"] > 0  # the batch reaches verl's dual clip (ratio > 3)
    # clip/frac counts the tokens verl's pg_clipfrac counts, and those of its dual clip
    clipped = float(theirs["actor/pg_clipfrac"]) + float(theirs["actor/pg_clipfrac_lower"])
    assert float(theirs["actor/pg_clipfrac"]) > 0
    assert metrics["rlvr/clip/frac"] == pytest.approx(clipped, rel=1e-8)  # verl: count + 1e-8


@pytest.mark.parametrize("agg", VERL_AGG_MODES)
@pytest.mark.parametrize(("ours", "theirs"), [("rlvr_gspo", "gspo"), ("rlvr_cispo", "cispo")])
def test_gspo_and_cispo_equal_verl(ours, theirs, agg):
    fields = {"clip_ratio_low": 0.05, "clip_ratio_high": 0.1}
    ref_loss, ref_grad, _ = loss_and_grad(theirs, actor(theirs, agg, **fields))
    loss, grad, _ = loss_and_grad(ours, actor(ours, agg, **fields))
    torch.testing.assert_close(loss, ref_loss, **TOL)
    torch.testing.assert_close(grad, ref_grad, **TOL)


def test_gmpo_equals_verl_geo_mean_on_one_micro_batch():
    """verl's geo_mean is a plain mean over the call's rows (it ignores loss_agg_mode and the
    global batch info), i.e. rlvr's gmpo under seq-mean-token-mean on a whole batch."""
    fields = {"clip_ratio_low": 0.4, "clip_ratio_high": 0.4}
    ref_loss, ref_grad, _ = loss_and_grad("geo_mean", actor("geo_mean", "token-mean", **fields))
    ours = actor("rlvr_gmpo", "seq-mean-token-mean", **fields)
    loss, grad, _ = loss_and_grad("rlvr_gmpo", ours)
    torch.testing.assert_close(loss, ref_loss, **TOL)
    torch.testing.assert_close(grad, ref_grad, **TOL)


def test_the_comparisons_can_fail():
    """A different clip width changes the loss, so the equalities above are not vacuous."""
    ref_loss, _, _ = loss_and_grad("vanilla", actor("vanilla", clip_ratio_high=0.28))
    loss, _, _ = loss_and_grad("rlvr_grpo", actor("rlvr_grpo", clip_ratio_high=0.2))
    assert not torch.allclose(loss, ref_loss, **TOL)


def _set_info(config, dp_size, tokens, seqs):
    config.global_batch_info.update(
        {"dp_size": dp_size, "batch_num_tokens": tokens, "global_batch_size": seqs}
    )


def data_parallel(loss_mode, agg, stats=None):
    """``(whole, split)``: (loss, grad) of the whole batch on one rank, and of two ranks of two
    micro-batches each (rows reordered first, as balance_batch does), averaged like DDP."""
    data = batch(seed=1)
    old, logp, adv, mask, _ = data
    config = actor(loss_mode, agg)
    tokens, seqs = int(mask.sum()), B

    def run(rows, dp_size):
        _set_info(config, dp_size, tokens, seqs)
        if stats is None:
            return loss_and_grad(loss_mode, config, rows=rows, logp_batch=data)[:2]
        with row_stats(stats.rows(rows)):
            return loss_and_grad(loss_mode, config, rows=rows, logp_batch=data)[:2]

    whole = run(torch.arange(B), 1)
    order = torch.randperm(B, generator=torch.Generator().manual_seed(5))
    ranks = [order[: B // 2], order[B // 2 :]]
    parts = [run(micro, 2) for rank in ranks for micro in rank.chunk(2)]
    loss = sum(p[0] for p in parts) / 2  # micro-batches summed, ranks averaged
    grad = sum(p[1] for p in parts) / 2
    return whole, (loss, grad)


@pytest.mark.parametrize("agg", VERL_AGG_MODES)
@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_data_parallel_halves_equal_the_whole_batch(name, agg):
    _, _, _, _, rewards = batch(seed=1)
    stats = group_stats_for(name, rewards, G)
    (loss, grad), (split_loss, split_grad) = data_parallel(f"rlvr_{name}", agg, stats)
    torch.testing.assert_close(split_loss, loss, **TOL)
    torch.testing.assert_close(split_grad, grad, **TOL)
    assert grad.abs().sum() > 0


def test_verl_vanilla_split_agrees_with_ours():
    """The split rule is verl's: its own vanilla loss gives the same whole/split equality."""
    (loss, grad), (split_loss, split_grad) = data_parallel("vanilla", "seq-mean-token-mean")
    torch.testing.assert_close(split_loss, loss, **TOL)
    torch.testing.assert_close(split_grad, grad, **TOL)


@pytest.mark.parametrize("name", ["etr", "pmpo", "apmpo"])
def test_statistics_objectives_need_the_exact_route(name):
    with pytest.raises(ValueError, match=rf"trainer.use_v1=True.*{EXACT_ROUTE}"):
        loss_and_grad(f"rlvr_{name}", actor(f"rlvr_{name}"))


@pytest.mark.parametrize("name", ["etr", "apmpo"])
def test_with_row_statistics_the_loss_is_policy_loss(name):
    old, logp, adv, mask, rewards = batch()
    config = actor(
        f"rlvr_{name}", "seq-mean-token-mean", rlvr={"lam1": 0.3} if name == "etr" else {}
    )
    cfg = objective_config(name, config)
    stats = group_stats(rewards, G, **_options(cfg.params.stats_options()))
    with row_stats(stats):
        loss, grad, metrics = loss_and_grad(f"rlvr_{name}", config)
    ref, _ = policy_loss(
        name,
        logp=logp,
        old_logp=old,
        advantages=adv,
        mask=mask,
        group_stats=stats,
        config=cfg.params,
        loss_agg="seq-mean-token-mean",
    )
    (ref_grad,) = torch.autograd.grad(ref, logp)
    torch.testing.assert_close(loss, ref.detach(), rtol=0, atol=0)
    torch.testing.assert_close(grad, ref_grad, rtol=0, atol=0)
    assert {"rlvr/clip/q1_frac", "rlvr/clip/q4_frac", "rlvr/ratio/mean"} <= set(metrics)


def _options(options):
    return {
        "pass_threshold": options.pass_threshold,
        "reward_range": options.reward_range,
        "scope": options.scope,
    }


def test_metrics_are_rlvr_names_as_floats():
    _, _, metrics = loss_and_grad("rlvr_abc_grpo", actor("rlvr_abc_grpo"))
    fracs = [metrics[f"rlvr/clip/q{i}_frac"] for i in range(1, 5)]
    assert all(isinstance(v, float) for v in metrics.values())
    assert sum(fracs) == pytest.approx(metrics["rlvr/clip/frac"]) and sum(fracs) > 0


@pytest.mark.parametrize("name", ["abc_grpo", "gppo", "etr", "apmpo"])
def test_logged_metrics_survive_verls_mean_over_micro_batches(name):
    """verl averages each metric over micro-batches (``Metric.from_dict(..., MEAN)``): on two
    micro-batches of equal size and tokens, every metric logged equals the whole batch's.
    Shares and extremes, which a mean would change, are not logged."""
    from verl.utils.metric.utils import AggregationType, Metric

    old, logp, adv, mask, rewards = batch()
    mask = torch.ones_like(mask)
    config = actor(f"rlvr_{name}", "token-mean")
    cfg = objective_config(name, config).params
    stats = group_stats_for(name, rewards, G, config=cfg)
    halves = [slice(0, B // 2), slice(B // 2, B)]
    with row_stats(stats):
        *_, whole = loss_and_grad(f"rlvr_{name}", config, logp_batch=(old, logp, adv, mask, None))
    parts = []
    for rows in halves:
        with row_stats(None if stats is None else stats.rows(rows)):
            *_, part = loss_and_grad(
                f"rlvr_{name}", config, rows=rows, logp_batch=(old, logp, adv, mask, None)
            )
        parts.append(part)
    assert not any(k.endswith(("_share", "/max", "_max", "/min", "_min")) for k in whole)
    for key, value in whole.items():
        reduced = Metric(AggregationType.MEAN)
        for part in parts:
            reduced.append(part[key])
        assert reduced.aggregate() == pytest.approx(value, rel=1e-9, abs=1e-12), key


def test_another_verl_version_is_a_warning():
    from rlvr.engines.verl import check_verl

    check_verl("0.9.4")
    with pytest.warns(UserWarning, match="tested with verl 0.9.x, not 0.10.0"):
        check_verl("0.10.0")


def test_rollout_is_weights_are_per_token_weights():
    old, logp, adv, mask, _ = batch()
    weights = torch.rand(B, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    config = actor("rlvr_abc_grpo", "token-mean")
    loss, _, _ = loss_and_grad("rlvr_abc_grpo", config, weights=weights)
    ref, _ = policy_loss(
        "abc_grpo",
        logp=logp,
        old_logp=old,
        advantages=adv,
        mask=mask,
        token_weights=weights,
        loss_agg="token-mean",
    )
    torch.testing.assert_close(loss, ref.detach(), rtol=0, atol=0)
    unweighted, _, _ = loss_and_grad("rlvr_abc_grpo", config)
    assert not torch.allclose(loss, unweighted)


def test_padding_only_micro_batch_is_a_zero_loss():
    old, logp, adv, mask, _ = batch()
    loss, metrics = get_policy_loss_fn("rlvr_grpo")(
        old, logp, adv, torch.zeros_like(mask), "token-mean", actor("rlvr_grpo"), None
    )
    assert loss.item() == 0.0 and metrics == {}
    (grad,) = torch.autograd.grad(loss, logp)
    assert grad.abs().sum() == 0


@pytest.mark.parametrize("name", ["grpo", "gmpo", "apmpo"])
def test_one_host_copy_per_micro_batch(name, count_syncs):
    """The metrics verl wants as numbers and the empty-batch flag reach the host in one copy;
    the loss and its backward make no other host-device synchronisation."""
    old, logp, adv, mask, rewards = batch()
    config = actor(f"rlvr_{name}", "seq-mean-token-mean")
    _set_info(config, 2, int(mask.sum()), 2 * B)
    stats = group_stats_for(name, rewards, G, config=objective_config(name, config).params)
    fn = get_policy_loss_fn(f"rlvr_{name}")
    with count_syncs() as calls, row_stats(stats):
        loss, metrics = fn(old, logp, adv, mask, config.loss_agg_mode, config, None)
        loss.backward()
    assert dict(calls) == {"tolist": 1}
    assert metrics and all(isinstance(v, float) for v in metrics.values())


@pytest.mark.parametrize("scale", [None, 7])
def test_dr_grpo_split_over_micro_batches_of_their_own_width(scale):
    """verl pads each micro-batch to its own longest response. Under ``seq-mean-token-sum-norm``
    the micro-batches add up to the whole batch only with a constant ``loss_scale_factor``;
    without it each divides by its own width (verl's ``agg_loss`` does the same)."""
    old, logp, adv, mask, _ = batch(seed=1)
    config = actor("rlvr_dr_grpo", "seq-mean-token-sum-norm", loss_scale_factor=scale)
    info = {"dp_size": 1, "global_batch_size": B, "loss_scale_factor": scale}
    config.global_batch_info.update(info)
    fn = get_policy_loss_fn("rlvr_dr_grpo")
    whole, _ = fn(old, logp, adv, mask, config.loss_agg_mode, config, None)
    order = torch.argsort(mask.sum(dim=1))  # short responses first: the widths differ
    total = torch.zeros((), dtype=logp.dtype)
    widths = []
    for rows in order.chunk(2):
        width = int(mask[rows].sum(dim=1).max())
        widths.append(width)
        cols = slice(0, width)
        part, _ = fn(
            old[rows, cols], logp[rows, cols], adv[rows, cols], mask[rows, cols],
            config.loss_agg_mode, config, None,
        )  # fmt: skip
        total = total + part
    assert widths[0] < widths[1] == 7
    if scale is None:
        assert not torch.allclose(total, whole, **TOL)
    else:
        torch.testing.assert_close(total, whole, **TOL)


OWN_OBJECTIVE = """
from rlvr.objectives import register_objective
from rlvr.objectives.ppo_clip import GrpoConfig, grpo_loss

register_objective(
    "own_grpo", config=GrpoConfig, advantage="group_std", loss_agg="seq-mean-token-mean",
    paper="GRPO under another name",
)(grpo_loss)
"""


def test_an_objective_of_your_own_is_a_verl_loss_mode(tmp_path, monkeypatch):
    # verl registers rlvr's loss modes when it imports the plugin, before a module of yours is
    # imported; the worker then looked up rlvr_my_module.name in vain after the driver's check
    # passed. Building the policy_loss section (driver and worker alike) registers it.
    from verl.trainer.ppo import core_algos

    from rlvr.engines.verl import losses
    from rlvr.objectives import registry

    for module, name in (
        (registry, "OBJECTIVES"),
        (core_algos, "POLICY_LOSS_REGISTRY"),
        (losses, "LOSSES"),
    ):
        monkeypatch.setattr(module, name, dict(getattr(module, name)))  # other tests see none of it
    (tmp_path / "verl_own_objectives.py").write_text(OWN_OBJECTIVE)
    monkeypatch.syspath_prepend(str(tmp_path))
    mode = "rlvr_verl_own_objectives.own_grpo"
    ours = actor(mode, "seq-mean-token-mean", clip_ratio_high=0.28)
    theirs = actor("rlvr_grpo", "seq-mean-token-mean", clip_ratio_high=0.28)
    loss, grad, metrics = loss_and_grad(mode, ours)
    want_loss, want_grad, want_metrics = loss_and_grad("rlvr_grpo", theirs)
    torch.testing.assert_close(loss, want_loss, **TOL)
    torch.testing.assert_close(grad, want_grad, **TOL)
    assert metrics == want_metrics
