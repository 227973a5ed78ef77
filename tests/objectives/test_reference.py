"""Every objective against an independent reference written from ``ALGORITHMS.md`` alone.

``reference.py`` computes the loss, its gradient (derived by hand, no autograd) and the
metrics with per-token loops in float64. Here ``policy_loss`` must match it on random
batches (every objective, its hyperparameter variants, the KL/SFT/entropy terms, token
weights, every ``loss_agg`` mode, step counts, per-token advantages, 0/1 and +1/-1
rewards), on ratios at, one ulp from and just off each clip bound, on edge batches
(zero advantages, empty rows, one token, extreme ratios, NaN padding) and summed over
micro-batches; the advantage estimators and group statistics as well.
"""

from __future__ import annotations

import math
import random

import pytest
import torch

from rlvr.advantages import compute_advantages, group_stats
from rlvr.objectives import LOSS_AGG_MODES, OBJECTIVES, group_stats_for, policy_loss, step_counts

from . import reference as ref

INF = math.inf
VARIANTS = {
    "grpo": [
        {},
        dict(eps_low=0.1, eps_high=0.35),
        dict(clip_c=3.0),
        dict(clip_c=1.5, eps_high=0.28),
    ],
    "dapo": [{}, dict(clip_c=2.0)],
    "dr_grpo": [{}],
    "abc_grpo": [
        {},
        dict(eps1=0.1, eps2=0.3, eps3=0.25, eps4=0.15),
        dict(eps2=INF, eps3=INF),
        dict(eps2=INF),
    ],
    "etr": [
        {},
        dict(lam1=-0.1),
        dict(lam2=0.0),
        dict(eps_base=0.05, lam1=0.3),
        dict(eps_base=0.9, lam1=0.3, lam2=0.3),
        dict(pass_threshold=0.5),
    ],
    "gppo": [{}, dict(b1=0.5, b2=0.75), dict(clip_c=3.0), dict(b1=0.25, clip_c=1.2)],
    "cispo": [{}, dict(eps_low=INF), dict(eps_low=0.1, eps_high=0.1)],
    "gspo": [{}, dict(eps_low=0.05, eps_high=0.08)],
    "gmpo": [{}, dict(eps_low=0.1, eps_high=0.2)],
    "pmpo": [
        {},
        dict(gamma=0.0),
        dict(p_schedule="linear", gamma=3.0),
        dict(gamma=30.0),
        dict(stats_scope="group"),
        dict(eps_low=0.1, eps_high=0.3),
    ],
    "apmpo": [
        {},
        dict(fss_form="mean"),
        dict(fss_form="inv_std"),
        dict(adaptive_lower=True),
        dict(gamma=0.0),
        dict(stats_scope="group"),
        dict(p_schedule="linear", gamma=2.0),
        dict(gamma=30.0),
        dict(eps_min=0.1, eps_max=0.6, eps_low=0.3, delta=0.1),
    ],
}
CASES = [(name, hp) for name, hps in VARIANTS.items() for hp in hps]


def test_variants_cover_every_objective():
    assert set(VARIANTS) == set(OBJECTIVES)


def make_batch(seed, B=8, G=4, T=7, spread=0.3, per_token=False, rewards=(0.0, 1.0)):
    """Random tensors (float64) with garbage in the padding; advantages from the reference."""
    gen, rnd = torch.Generator().manual_seed(seed), random.Random(seed)
    mask = torch.zeros(B, T, dtype=torch.float64)
    for i in range(B):
        start = rnd.randint(0, 2)
        mask[i, start : start + rnd.randint(1, T - start)] = 1
    logp = -torch.rand(B, T, generator=gen, dtype=torch.float64) * 3 - 0.01
    old = logp + torch.randn(B, T, generator=gen, dtype=torch.float64) * spread
    reward = torch.tensor([rnd.choice(rewards) for _ in range(B)], dtype=torch.float64)
    adv = torch.tensor(ref.advantages(reward.tolist(), G, "group_std"), dtype=torch.float64)
    if per_token:
        adv = adv[:, None] * (0.5 + torch.rand(B, T, generator=gen, dtype=torch.float64))
    pad = ~mask.bool()
    noise = torch.rand(4, B, T, generator=gen, dtype=torch.float64)
    return dict(
        logp=logp.masked_fill(pad, 50.0),
        old_logp=old.masked_fill(pad, -50.0),
        advantages=adv,
        mask=mask,
        rewards=reward,
        group_size=G,
        ref_logp=logp + 0.4 * noise[0] - 0.2,
        entropy=2 * noise[1],
        token_weights=2 * noise[2],
    )


def run_rlvr(name, hp, b, **kw):
    """``(loss, d loss/d logp, d loss/d entropy or None, metrics)`` from ``policy_loss``."""
    logp = b["logp"].clone().requires_grad_()
    entropy = kw.pop("entropy", None)
    if entropy is not None:
        entropy = entropy.clone().requires_grad_()
    loss, metrics = policy_loss(
        name,
        logp=logp,
        old_logp=b["old_logp"],
        advantages=b["advantages"],
        mask=b["mask"],
        entropy=entropy,
        **kw,
        **hp,
    )
    loss.backward()
    grad_h = None if entropy is None else entropy.grad
    return loss.item(), logp.grad, grad_h, {k: v.item() for k, v in metrics.items()}


def run_ref(name, hp, b, **kw):
    """The reference on the same inputs (nested lists)."""
    kw = {k: v.tolist() if torch.is_tensor(v) else v for k, v in kw.items()}
    kw.pop("group_stats", None)
    kw.pop("validate", None)
    lists = [b[k].tolist() for k in ("logp", "old_logp", "advantages", "mask")]
    return ref.reference_loss(name, hp, *lists, **kw)


def assert_matches(name, hp, b, **kw):
    """Loss (rel 1e-10), gradients (1e-10 of their scale) and every metric agree."""
    loss, grad, grad_h, metrics = run_rlvr(name, hp, b, **dict(kw))
    want = run_ref(name, hp, b, **kw)
    assert loss == pytest.approx(want.loss, rel=1e-10, abs=1e-13), (name, hp)
    expected = torch.tensor(want.grad, dtype=torch.float64)
    scale = expected.abs().max().item() + 1e-3
    assert (grad - expected).abs().max().item() <= 1e-10 * scale, (name, hp, grad, expected)
    if grad_h is not None:
        torch.testing.assert_close(
            grad_h, torch.tensor(want.grad_entropy, dtype=torch.float64), rtol=1e-12, atol=1e-15
        )
    expected_metrics = want.metrics
    assert set(metrics) == set(expected_metrics), (name, hp)
    for key, value in expected_metrics.items():
        assert metrics[key] == pytest.approx(value, rel=1e-9, abs=1e-12), (name, hp, key)


def options(name, hp, seed, b):
    """The optional inputs of seed ``seed``: regularisers, weights, modes, step counts."""
    kw = dict(rewards=b["rewards"], group_size=b["group_size"])
    if seed % 3 == 1:
        kw.update(
            ref_logp=b["ref_logp"], kl_coef=0.05, kl_estimator=("k1", "k2", "k3")[(seed // 3) % 3]
        )
    if seed % 4 == 1:
        kw.update(entropy=b["entropy"], entropy_coef=0.01)
    if seed % 5 == 2:
        kw.update(sft_coef=0.1, sft_threshold=0.5)
    if seed % 3 == 2:
        kw.update(token_weights=b["token_weights"])
    if seed % 6 == 5:
        kw.update(loss_agg=LOSS_AGG_MODES[seed % 5])
    if seed % 7 == 6:
        kw.update(num_tokens=100, num_seqs=17, max_len=12)
    return kw


@pytest.mark.parametrize(("name", "hp"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_random_batches_match_reference(name, hp):
    for seed in range(12):
        pm = seed % 2 == 1 and name in ("pmpo", "apmpo", "etr")  # +1/-1 rewards
        hp_seed = dict(hp, reward_range=(-1.0, 1.0)) if pm and name != "etr" else hp
        spread = (
            (0.002 if seed % 3 == 0 else 0.05)
            if name == "gspo"
            else (1.0 if seed % 3 == 0 else 0.3)
        )
        per_token = seed % 4 == 3 and name not in ("gmpo", "pmpo", "apmpo") or seed % 8 == 7
        b = make_batch(
            1000 * CASES.index((name, hp)) + seed,
            spread=spread,
            per_token=per_token,
            rewards=(-1.0, 1.0) if pm else (0.0, 1.0),
            G=4 if seed % 5 else 2,
        )
        assert_matches(name, hp_seed, b, **options(name, hp_seed, seed, b))


def on_and_near(bound):
    """Log ratios (old_logp = 0) on ``bound``: every ``x`` with ``exp(x) == bound``, their
    neighbours one ulp out, and points 1e-12 and 1e-6 inside and outside."""
    x0 = math.log(bound)
    xs, x = [], x0
    for direction in (-INF, INF):
        x = x0
        for _ in range(4):
            xs.append(x)
            x = math.nextafter(x, direction)
    return sorted(set(xs + [x0 + d for d in (-1e-6, -1e-12, 1e-12, 1e-6)]))


def bound_batch(log_ratios, adv, reward=1.0):
    """One row per log ratio and one row holding them all, advantage ``adv`` everywhere."""
    n = len(log_ratios)
    lr = torch.zeros(n + 1, n, dtype=torch.float64)
    mask = torch.zeros_like(lr)
    for i, x in enumerate(log_ratios):
        lr[i, 0], mask[i, 0] = x, 1
    lr[n], mask[n] = torch.tensor(log_ratios), 1
    return dict(
        logp=lr,
        old_logp=torch.zeros_like(lr),
        advantages=torch.full((n + 1,), adv),
        mask=mask,
        rewards=torch.full((n + 1,), reward, dtype=torch.float64),
        group_size=1,
    )


# (objective, hyperparameters, band edges for A > 0, for A < 0); single-sample groups with
# reward 1: etr's p_g = 1 (eps = 0.2 + 0.1*tanh(A)), apmpo's mu = 1, sigma = 0 (eps_ada = 0.4)
BANDS = [
    ("grpo", {}, (0.8, 1.2), (0.8, 1.2)),
    ("dapo", {}, (0.8, 1.28), (0.8, 1.28)),
    ("grpo", dict(clip_c=3.0), (0.8, 3.0), (0.8, 3.0)),
    ("abc_grpo", dict(eps1=0.1, eps2=0.3, eps3=0.25, eps4=0.15), (0.7, 1.1), (0.85, 1.25)),
    ("etr", {}, (0.8 - 0.1 * math.tanh(0.7), 1.2 + 0.1 * math.tanh(0.7)), (0.8, 1.2)),
    ("gppo", {}, (0.8, 1.28), (0.8, 1.28)),
    ("gppo", dict(b1=0.5, b2=0.7, clip_c=3.0), (0.8, 1.28), (0.8, 3.0)),
    ("cispo", {}, (0.8, 1.28), (0.8, 1.28)),
    ("gspo", dict(eps_low=0.05, eps_high=0.08), (0.95, 1.08), (0.95, 1.08)),
    ("gmpo", {}, (math.exp(-0.4), math.exp(0.4)), (math.exp(-0.4), math.exp(0.4))),
    ("pmpo", {}, (0.8, 1.2), (0.8, 1.2)),
    ("apmpo", {}, (0.8, 1.4), (0.8, 1.4)),
    ("apmpo", dict(adaptive_lower=True, gamma=0.0), (0.6, 1.4), (0.6, 1.4)),
]


@pytest.mark.parametrize(
    ("name", "hp", "pos", "neg"), BANDS, ids=[f"{b[0]}-{i}" for i, b in enumerate(BANDS)]
)
def test_clip_bounds_match_reference(name, hp, pos, neg):
    """On the bound the token is inside the band (whole gradient, not clipped); one ulp
    past it, clipped. Includes log ratios whose exp rounds onto the bound."""
    for adv, band in ((0.7, pos), (-0.7, neg), (0.0, neg)):
        if name == "etr" and adv < 0:
            band = (0.8 + 0.1 * math.tanh(0.7), 1.2 - 0.1 * math.tanh(0.7))
        for edge in band:
            b = bound_batch(on_and_near(edge), adv)
            assert_matches(name, hp, b, rewards=b["rewards"], group_size=1)


def test_pmpo_at_p_one_equals_grpo_on_the_bound():
    """p = 1 makes pmpo grpo (ALGORITHMS.md's invariant), also where exp(lr) rounds onto a
    bound: pmpo used to decide the clip on lr < log(1 - eps) and zeroed those gradients."""
    b = bound_batch(on_and_near(0.8) + on_and_near(1.2), -0.7)
    kw = dict(rewards=b["rewards"], group_size=1)
    _, grpo_grad, _, grpo_metrics = run_rlvr("grpo", {}, b, **kw)
    _, pmpo_grad, _, pmpo_metrics = run_rlvr("pmpo", dict(gamma=0.0), b, **kw)
    torch.testing.assert_close(pmpo_grad, grpo_grad, rtol=1e-12, atol=1e-15)
    assert pmpo_metrics["clip/low_frac"] == grpo_metrics["clip/low_frac"]


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_edge_batches_match_reference(name):
    """Zero advantages, empty rows, a one-token batch, extreme ratios, in every mode."""
    regs = dict(kl_coef=0.1, sft_coef=0.1, entropy_coef=0.02)
    b = make_batch(7, B=4, G=4, rewards=(1.0,))  # one group, all rewards equal: A = 0
    assert_matches(
        name,
        {},
        b,
        rewards=b["rewards"],
        group_size=4,
        ref_logp=b["ref_logp"],
        entropy=b["entropy"],
        **regs,
    )
    b = make_batch(11, B=4, G=2, T=5, spread=0.001 if name == "gspo" else 0.5)
    b["mask"][0], b["mask"][1], b["mask"][2] = 0, 0, 0  # row 1 empty, rows 0 and 2 one token
    b["mask"][0, 0], b["mask"][2, 3] = 1, 1
    b["old_logp"][0, 0] = b["old_logp"][2, 3] = -1.0
    for mode in LOSS_AGG_MODES:
        assert_matches(
            name,
            {},
            b,
            rewards=b["rewards"],
            group_size=2,
            loss_agg=mode,
            ref_logp=b["ref_logp"],
            kl_coef=0.1,
        )
    one = {k: v[2:3, 3:4] if torch.is_tensor(v) and v.dim() == 2 else v for k, v in b.items()}
    one.update(advantages=b["advantages"][2:3], rewards=b["rewards"][2:3], group_size=1)
    assert_matches(name, {}, one, rewards=one["rewards"], group_size=1)
    for lr in (30.0, -30.0, 200.0, -200.0):
        for adv in (1.3, -1.3):
            row = [lr] if name == "gspo" else [lr, 0.1, -0.05]
            b = bound_batch(row, adv)
            assert_matches(name, {}, b, rewards=b["rewards"], group_size=1)


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_nan_padding_is_never_read(name):
    b = make_batch(12, B=4, G=2, T=6)
    pad = ~b["mask"].bool()
    nan = float("nan")
    clean = run_rlvr(
        name, {}, b, rewards=b["rewards"], group_size=2, ref_logp=b["ref_logp"], kl_coef=0.1
    )
    for key in ("logp", "old_logp", "ref_logp"):
        b[key] = b[key].masked_fill(pad, nan if key != "old_logp" else -INF)
    dirty = run_rlvr(
        name, {}, b, rewards=b["rewards"], group_size=2, ref_logp=b["ref_logp"], kl_coef=0.1
    )
    assert dirty[0] == clean[0] and torch.equal(dirty[1], clean[1]) and dirty[3] == clean[3]


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_micro_batches_sum_to_reference(name):
    """Three micro-batches (the first split inside a group), each trimmed to its own width,
    with the step's counts and group statistics: their sum is the reference's full batch."""
    b = make_batch(300, B=8, G=4, T=9, spread=0.001 if name == "gspo" else 0.3)
    regs = dict(kl_coef=0.03, sft_coef=0.1, entropy_coef=0.01)
    tensors = ("ref_logp", "entropy", "token_weights")
    stats = group_stats_for(name, b["rewards"], 4)
    counts = step_counts(b["mask"], b["rewards"], max_len=9)._asdict()
    for mode in (None, *LOSS_AGG_MODES):
        want = run_ref(
            name,
            {},
            b,
            rewards=b["rewards"],
            group_size=4,
            max_len=9,
            loss_agg=mode,
            **regs,
            **{k: b[k] for k in tensors},
        )
        total, grad = 0.0, torch.zeros_like(b["logp"])
        for rows in (torch.tensor([0, 1, 2]), torch.tensor([3, 4]), torch.tensor([5, 6, 7])):
            width = int(b["mask"][rows].nonzero()[:, 1].max()) + 1
            part = {
                k: v[rows, :width] if v.dim() == 2 else v[rows]
                for k, v in b.items()
                if torch.is_tensor(v)
            }
            group = None if stats is None else stats.rows(rows)
            out = run_rlvr(
                name,
                {},
                part,
                rewards=part["rewards"],
                group_stats=group,
                loss_agg=mode,
                **regs,
                **{k: part[k] for k in tensors},
                **counts,
            )
            total += out[0]
            grad[rows, :width] += out[1]
        assert total == pytest.approx(want.loss, rel=1e-12, abs=1e-15), mode
        torch.testing.assert_close(
            grad, torch.tensor(want.grad, dtype=torch.float64), rtol=1e-10, atol=1e-15
        )


def test_advantages_and_group_stats_match_reference():
    rnd = random.Random(0)
    draws = [
        lambda: rnd.choice([0.0, 1.0]),
        lambda: rnd.choice([-1.0, 1.0]),
        rnd.random,
        lambda: rnd.choice([0.7, 0.7, 0.1]),
    ]
    for seed in range(120):
        G = rnd.choice([1, 2, 4, 8])
        rewards = [draws[seed % 4]() for _ in range(G * rnd.randint(1, 4))]
        tensor = torch.tensor(rewards, dtype=torch.float64)
        for mode in ("group_std", "group_mean", "batch_std"):
            want = torch.tensor(ref.advantages(rewards, G, mode), dtype=torch.float64)
            got = compute_advantages(tensor, G, mode)
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-15)
            assert torch.equal(got == 0, want == 0)  # all-equal groups exactly 0
        for threshold in (0.0, 0.5):
            got = group_stats(tensor, G, pass_threshold=threshold).pass_rate
            assert got.tolist() == ref.pass_rates(rewards, G, threshold)
        span = (-1.0, 1.0) if seed % 4 == 1 else (0.0, 1.0)
        for scope in ("batch", "group"):
            got = group_stats_for("apmpo", tensor, G, reward_range=span, stats_scope=scope)
            want = torch.tensor(ref.reward_stats(rewards, G, span, scope), dtype=torch.float64)
            torch.testing.assert_close(got.reward_mean, want[:, 0], rtol=1e-12, atol=1e-15)
            torch.testing.assert_close(got.reward_std, want[:, 1], rtol=1e-12, atol=1e-15)
