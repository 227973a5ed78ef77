"""Objective contrast: the difference of two objectives' per-token gradients on one batch."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from rlvr.objectives import OBJECTIVES, LossInputs, ObjectiveConfig, policy_loss
from rlvr.objectives.contrast import contrast_metrics, finish, parse_contrast
from rlvr.objectives.metrics import QUADRANTS

from .helpers import OLD


def _inputs(ratios, adv, rewards=None):
    ratios = torch.tensor(ratios, dtype=torch.float64)
    old = torch.full_like(ratios, OLD)
    return LossInputs(
        logp=old + torch.log(ratios),
        old_logp=old,
        advantages=torch.tensor(adv, dtype=torch.float64),
        mask=torch.ones_like(ratios),
        rewards=None if rewards is None else torch.tensor(rewards, dtype=torch.float64),
    )


def _reduced(inputs, run, specs):
    contrasts = tuple(parse_contrast(s, run) for s in specs)
    raw = contrast_metrics(inputs, run, contrasts, None)
    return finish({k: float(v) for k, v in raw.items()})


def test_abc_against_grpo_hand_worked():
    # A = -1, eps 0.2 everywhere. GRPO clips Q3 (r = 0.5: gradient 0) and leaves Q4 (r = 1.5)
    # unclipped; ABC-GRPO clips both. Per-token weights (seq-mean-token-mean of 4 tokens):
    # GRPO w = -A r / 4 = [0.375, 0, 0.25, 0.275]; ABC w = [0, 0, 0.25, 0.275].
    inputs = _inputs([[1.5, 0.5, 1.0, 1.1]], [-1.0])
    m = _reduced(inputs, ObjectiveConfig("grpo"), ["abc_grpo"])
    assert m["contrast/abc_grpo/token_frac"] == 0.25
    assert m["contrast/abc_grpo/q4_frac"] == 0.25
    assert m["contrast/abc_grpo/q1_frac"] == m["contrast/abc_grpo/q3_frac"] == 0.0
    expected = 0.375 / math.sqrt(0.375**2 + 0.25**2 + 0.275**2)
    assert m["contrast/abc_grpo/rel_l2"] == pytest.approx(expected, abs=1e-12)


def test_an_objective_against_itself_is_exactly_zero():
    inputs = _inputs([[1.5, 0.5, 1.0, 1.1], [0.7, 1.3, 1.0, 2.0]], [-1.0, 0.5])
    m = _reduced(inputs, ObjectiveConfig.of("abc_grpo"), ["abc_grpo"])
    assert m["contrast/abc_grpo/token_frac"] == 0.0
    assert m["contrast/abc_grpo/rel_l2"] == 0.0


GROUPED = {"etr", "pmpo", "apmpo"}


@pytest.mark.parametrize("other", sorted(OBJECTIVES))
def test_contrast_equals_the_difference_of_direct_per_token_gradients(other):
    g = torch.Generator().manual_seed(3)
    ratios = torch.exp((torch.rand(8, 5, generator=g, dtype=torch.float64) - 0.5) * 1.5)
    rewards = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    adv = (rewards.view(2, 4) - rewards.view(2, 4).mean(1, keepdim=True)).flatten()
    inputs = _inputs(ratios.tolist(), adv.tolist(), rewards.tolist())
    run = ObjectiveConfig("grpo")
    contrast = parse_contrast(other, run)
    stats = contrast.objective.group_stats(inputs.rewards, 4)
    raw = contrast_metrics(inputs, run, (contrast,), None, {other: stats})
    m = finish({k: float(v) for k, v in raw.items()})

    def direct(name):
        logp = inputs.logp.clone().requires_grad_()
        kw = {"rewards": inputs.rewards, "group_size": 4} if name in GROUPED else {}
        loss, _ = policy_loss(
            name, logp=logp, old_logp=inputs.old_logp, advantages=inputs.advantages,
            mask=inputs.mask, **kw,
        )  # fmt: skip
        return torch.autograd.grad(loss, logp)[0]

    w, w2 = direct("grpo"), direct(other)
    differs = (w - w2).abs() > 1e-6 * torch.maximum(w.abs(), w2.abs())
    assert m[f"contrast/{other}/token_frac"] == pytest.approx(float(differs.double().mean()))
    rel = float((w - w2).norm() / w.norm())
    assert m[f"contrast/{other}/rel_l2"] == pytest.approx(rel, rel=1e-9, abs=1e-15)
    quads = sum(m[f"contrast/{other}/{q}_frac"] for q in QUADRANTS)
    assert quads <= m[f"contrast/{other}/token_frac"] + 1e-12


def test_parse_contrast_settings_and_errors():
    run = ObjectiveConfig("grpo", kl_coef=0.01)
    c = parse_contrast("apmpo:fss_form=mean,gamma=0,loss_agg=token-mean", run)
    assert (c.label, c.objective.name) == (
        "apmpo:fss_form=mean,gamma=0,loss_agg=token-mean",
        "apmpo",
    )
    assert (c.objective.params.fss_form, c.objective.params.gamma) == ("mean", 0)
    assert c.objective.loss_agg == "token-mean" and c.objective.kl_coef == 0.01
    for text in ("inf", "Infinity"):  # an override's spelling, and objective_name's
        assert parse_contrast(f"abc_grpo:eps3={text}", run).objective.params.eps3 == float("inf")
    assert parse_contrast("grpo:eps_low=1e-5", run).objective.params.eps_low == 1e-5
    with pytest.raises(ValueError, match="log.contrast 'nope'.*unknown objective"):
        parse_contrast("nope", run)
    with pytest.raises(ValueError, match="log.contrast 'grpo:eps3=1'.*unknown hyperparameter"):
        parse_contrast("grpo:eps3=1", run)
    with pytest.raises(ValueError, match="expected name:key=value"):
        parse_contrast("grpo:eps", run)


def test_the_runs_entropy_bonus_is_kept_and_adds_nothing_to_the_weights():
    """docs/metrics.md: the run's entropy term is kept in both objectives. With
    ``objective.entropy_coef > 0`` the trainer's entropy carries a gradient (to the model, not
    to the log-probs), so the weights ``dL/dlogp`` are those of the run without the bonus
    (the contrast once refused the detached entropy it made: 'entropy must carry a gradient')."""
    inputs = _inputs([[1.5, 0.5, 1.0, 1.1], [0.7, 1.3, 1.0, 2.0]], [-1.0, 0.5])
    scale = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)  # stands for the model
    entropy = scale * torch.full_like(inputs.logp, 0.7)
    with_entropy = dataclasses.replace(inputs, entropy=entropy)
    plain = _reduced(inputs, ObjectiveConfig("grpo"), ["abc_grpo"])
    bonus = _reduced(with_entropy, ObjectiveConfig("grpo", entropy_coef=0.01), ["abc_grpo"])
    assert bonus == plain and plain["contrast/abc_grpo/token_frac"] == 0.25
