"""Regimes, the contrast plan, untestable claims and the detectable effect."""

from __future__ import annotations

import dataclasses
import math

import pytest
import yaml

from rlvr.compare import load_study, plan
from rlvr.compare.claims import INCONCLUSIVE, UNTESTABLE, Claim, judge
from rlvr.compare.evidence import assess, objective_only, same_run
from rlvr.compare.results import ArmData, RunData
from rlvr.compare.stats import (
    Interval,
    detectable,
    paired_interval,
    seeds_needed,
    seeds_to_detect,
)
from rlvr.compare.study import arm_config, objective_name

CLAIM = Claim("c", "p", "fig. 1", "a beats b", "direction", metric="m", arm="a", baseline="b")


def _study(tmp_path, arms, regimes=None, claims=None):
    data = {"steps": 3, "seeds": [0, 1], "arms": arms, "claims": claims or []}
    if regimes:
        data["regimes"] = regimes
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_study(str(path))


def test_regimes_run_every_arm_seed_by_seed_with_their_settings(tmp_path):
    study = _study(
        tmp_path,
        ["abc/grpo", "abc/abc_grpo"],
        {"paper": {}, "off": {"rollout": {"minibatches": 16, "epochs": 2}}},
    )
    specs = plan(study, tmp_path / "runs")
    assert [(s.seed, s.regime, s.arm.name) for s in specs[:4]] == [
        (0, "paper", "abc/grpo"), (0, "paper", "abc/abc_grpo"),
        (0, "off", "abc/grpo"), (0, "off", "abc/abc_grpo"),
    ]  # fmt: skip
    assert len(specs) == 8 and len({s.run_dir for s in specs}) == 8
    off = [s.config.rollout for s in specs if s.regime == "off"]
    assert all((r.minibatches, r.epochs) == (16, 2) for r in off)
    assert all(s.config.rollout.minibatches == 4 for s in specs if s.regime == "paper")
    assert "[off]" in next(s.key for s in specs if s.regime == "off")
    # a regime's own seeds
    study = _study(
        tmp_path, ["abc/grpo"], {"paper": {"seeds": [0]}, "off": {"rollout": {"epochs": 2}}}
    )
    specs = plan(study, tmp_path / "runs")
    assert [(s.seed, s.regime) for s in specs] == [(0, "paper"), (0, "off"), (1, "off")]


def test_each_compared_pair_logs_its_contrast_in_one_run(tmp_path):
    study = load_study("apmpo")
    specs = {s.arm.name: s.config for s in plan(study, tmp_path) if s.seed == 0}
    assert objective_name(specs["apmpo/fss_mean"]) == "apmpo:fss_form=mean"
    assert objective_name(specs["apmpo/dapo"]) == "dapo"  # token-mean is dapo's own default
    logged = {(arm, c) for arm, cfg in specs.items() for c in cfg.log.contrast}
    names = {arm: objective_name(cfg) for arm, cfg in specs.items()}
    # every compared pair with different objectives, in exactly one of its two runs
    for a, b in [
        ("apmpo/apmpo", "apmpo/grpo"),
        ("apmpo/fac", "apmpo/grpo"),
        ("apmpo/apmpo", "apmpo/fss_mean"),
    ]:
        assert ((a, names[b]) in logged) != ((b, names[a]) in logged)
    assert max(len(cfg.log.contrast) for cfg in specs.values()) <= 2


def _arm(name, values, extra=None):
    arm = ArmData(name)
    for seed, value in enumerate(values):
        rows = [{"step": s, "m": value, **(extra or {})} for s in (1, 2)]
        arm.runs[seed] = RunData(seed, rows, {})
    return arm


def _configs(tmp_path, a="abc/grpo", b="abc/abc_grpo"):
    study = _study(tmp_path, [a, b])
    return {"a": arm_config(study, study.arms[0], 0), "b": arm_config(study, study.arms[1], 0)}


def test_identical_arms_are_untestable_not_inconclusive(tmp_path):
    data = {"a": _arm("a", [0.5, 0.6, 0.7]), "b": _arm("b", [0.5, 0.6, 0.7])}
    assert same_run(data["a"].runs[0], data["b"].runs[0])
    verdict = judge(CLAIM, data)
    assert verdict.status == INCONCLUSIVE
    configs = _configs(tmp_path)
    names = {k: objective_name(c) for k, c in configs.items()}
    judged = assess(verdict, data, configs, names)
    assert judged.status == UNTESTABLE and "bit-identical runs" in judged.numbers
    assert "detectable" not in judged.evidence  # no spread: 0 would read as exquisite power


def test_zero_contrast_between_objective_only_arms_is_untestable(tmp_path):
    configs = _configs(tmp_path)
    assert objective_only(configs["a"], configs["b"])
    names = {k: objective_name(c) for k, c in configs.items()}
    key = f"contrast/{names['a']}/"
    for frac, want in [(0.0, UNTESTABLE), (0.01, INCONCLUSIVE)]:
        logged = {key + "token_frac": frac, key + "rel_l2": frac}
        data = {"a": _arm("a", [0.5, 0.6, 0.7]), "b": _arm("b", [0.5, 0.65, 0.7], logged)}
        judged = assess(judge(CLAIM, data), data, configs, names)
        assert judged.status == want
        assert f"contrast {frac:.2%} of tokens" in judged.evidence
        assert "detectable at 80% power" in judged.evidence
        projected = "seeds to detect the observed difference" in judged.evidence
        assert projected == (want == INCONCLUSIVE)  # an untestable claim has nothing to project
        cautious = "if the spread is at its 80% upper bound)" in judged.evidence
        assert cautious == projected


def test_differences_without_spread_give_no_detectable_effect_of_0(tmp_path):
    """Two arms that trained differently but both score 0 at every seed (both collapsed):
    the interval is [0, 0] with a standard error of 0, which read 'detectable at 80% power:
    0' beside 'seeds to detect: over 1000'."""
    configs = _configs(tmp_path)
    names = {k: objective_name(c) for k, c in configs.items()}
    key = f"contrast/{names['a']}/"
    logged = {key + "token_frac": 0.01, key + "rel_l2": 0.01}
    data = {"a": _arm("a", [0.0, 0.0, 0.0], {"x": 1.0}), "b": _arm("b", [0.0, 0.0, 0.0], logged)}
    judged = assess(judge(CLAIM, data), data, configs, names)
    assert judged.status == INCONCLUSIVE
    assert "detectable at 80% power: not estimable (the differences have no spread)" in (
        judged.evidence
    )


def test_a_claim_that_compares_no_pair_of_arms_keeps_its_detectable_effect():
    """An interaction (like a largest or a one-arm order claim) compares no pair of arms, so
    no pair of identical runs takes its detectable effect away."""
    claim = Claim(
        "i", "p", "", "together lower", "interaction", metric="m",
        arms=("n", "a", "b", "ab"), direction="lower",
    )  # fmt: skip
    values = {"n": [0.5, 0.6, 0.7], "a": [0.5, 0.62, 0.7], "b": [0.52, 0.6, 0.71]}
    data = {k: _arm(k, v) for k, v in {**values, "ab": [0.4, 0.55, 0.6]}.items()}
    judged = assess(judge(claim, data), data, {}, {})
    assert "detectable at 80% power" in judged.evidence


def test_a_difference_past_1000_seeds_gets_no_cautious_count(tmp_path):
    """Per-seed differences +0.0005, -0.02, +0.02: mean 0.00017 against an sd of 0.02 needs
    about 80,000 seeds, reported as "over 1000" alone."""
    configs = _configs(tmp_path)
    names = {k: objective_name(c) for k, c in configs.items()}
    logged = {f"contrast/{names['a']}/token_frac": 0.01, f"contrast/{names['a']}/rel_l2": 0.01}
    data = {"a": _arm("a", [0.5, 0.6, 0.7]), "b": _arm("b", [0.5005, 0.58, 0.72], logged)}
    judged = assess(judge(CLAIM, data), data, configs, names)
    assert "seeds to detect the observed difference: over 1000" in judged.evidence
    assert "upper bound" not in judged.evidence


def test_arms_differing_beyond_the_objective_stay_testable_at_zero_contrast(tmp_path):
    study = _study(
        tmp_path, ["abc/grpo", {"recipe": "abc/abc_grpo", "overrides": ["optim.lr=1e-3"]}]
    )
    configs = {"a": arm_config(study, study.arms[0], 0), "b": arm_config(study, study.arms[1], 0)}
    assert not objective_only(configs["a"], configs["b"])
    names = {k: objective_name(c) for k, c in configs.items()}
    key = f"contrast/{names['a']}/"
    data = {
        "a": _arm("a", [0.5, 0.6, 0.7]),
        "b": _arm("b", [0.5, 0.65, 0.7], {key + "token_frac": 0.0, key + "rel_l2": 0.0}),
    }
    assert assess(judge(CLAIM, data), data, configs, names).status == INCONCLUSIVE


def test_detectable_effect_hand_worked():
    # per-seed differences 0.01, 0.03, 0.02: mean 0.02, sd 0.01, se 0.01/sqrt(3), df 2;
    # the noncentral t with df 2 gives 80% power at nc 5.653489 (scipy's nct: 0.800000), so
    # 5.653489 * 0.005774 = 0.032640; (t(0.975, 2) + t(0.8, 2)) * se = 0.030966 found 77%
    ci = paired_interval([[0.51], [0.53], [0.52]], [[0.5], [0.5], [0.5]])
    assert (ci.se, ci.df) == (pytest.approx(0.01 / math.sqrt(3)), 2)
    assert detectable(ci) == pytest.approx(0.032640, abs=2e-6)
    assert math.isnan(detectable(Interval(0.0, 0.0, 0.0, 3)))  # no standard error recorded
    # the seeds the issue's measured spread needs: 7 for 0.02, 19 for 0.01
    assert seeds_needed(0.0145, 0.02) == 7 and seeds_needed(0.0145, 0.01) == 19
    assert seeds_needed(0.0145, 0.018) == 8  # 7 seeds detect 0.0184


def test_seeds_to_detect_projects_the_interval_with_more_seeds():
    # 14 seeds at se 0.005: the standard error at n seeds is 0.005 * sqrt(14 / n)
    ci = Interval(0.004, -0.006, 0.014, 14, se=0.005, df=13)
    n = seeds_to_detect(ci, 0.004)
    assert detectable(Interval(0, 0, 0, n, se=0.005 * math.sqrt(14 / n), df=n - 1)) <= 0.004
    assert (
        detectable(Interval(0, 0, 0, n - 1, se=0.005 * math.sqrt(14 / (n - 1)), df=n - 2)) > 0.004
    )
    # a per-seed interval's projection is the per-seed test's: the issue's 19 seeds for 0.01
    per_seed = paired_interval([[0.01], [0.03], [0.02]], [[0.0]] * 3)
    assert seeds_to_detect(per_seed, 0.01) == seeds_needed(0.01, 0.01)
    assert seeds_to_detect(Interval(0.0, 0, 0, 3, se=0.0145 / math.sqrt(3)), 0.01) == 19
    assert seeds_to_detect(Interval(0.0, 0, 0, 3, se=0.01), 0.0) is None  # no effect to find
    assert seeds_to_detect(Interval(0.0, 0, 0, 3), 0.01) is None  # no standard error recorded
    assert seeds_to_detect(ci, 1e-5) is None  # beyond 1000 seeds
    # planned from the spread at its 80% upper bound: sd 0.0145 * sqrt(2 / chi2(0.2, 2)),
    # chi2(0.2, 2) = -2 ln 0.8 = 0.4463, so sd 0.03070 and seeds_needed(0.03070, 0.01)
    three = Interval(0.0, 0, 0, 3, se=0.0145 / math.sqrt(3), df=2)
    assert seeds_to_detect(three, 0.01, spread_bound=0.8) == 76
    assert seeds_needed(0.0145 * math.sqrt(2 / (-2 * math.log(0.8))), 0.01) == 76
    assert seeds_to_detect(Interval(0.0, 0, 0, 3, se=0.01), 0.01, spread_bound=0.8) is None
    # each added seed lowers the projected detectable effect: 8 seeds detect what 7 cannot
    # (7 seeds find 0.01845 at exactly 80% power; the approximation alone said 0.0184)
    assert seeds_needed(0.0145, 0.0185) == 7 and seeds_needed(0.0145, 0.0184) == 8


def test_seeds_to_detect_a_claim_finds_all_its_undecided_intervals_at_once():
    """The count is the seeds at which a claim's undecided intervals would *all* exclude 0
    four times out of five. Each of two projected at 80% power found both only about 64% of
    the time (independent); each is now projected at 1 - 0.2 / 2 = 90% (Bonferroni)."""
    import re

    import numpy as np

    from rlvr.compare.claims import Verdict
    from rlvr.compare.evidence import _seeds_to_decide

    claim = Claim(
        "o", text="t", rule="order", metric="m", arms=("a", "b", "c"), direction="increasing"
    )
    ci = Interval(0.01, -0.01, 0.03, 3, se=0.01, df=2)  # per-seed sd 0.01 * sqrt(3)
    text = _seeds_to_decide(Verdict(claim, INCONCLUSIVE, "", "", {"b - a": ci, "c - b": ci}))[0]
    n = int(re.search(r"observed difference: (\d+)", text).group(1))
    assert n == seeds_to_detect(ci, 0.01, power=0.9) > seeds_to_detect(ci, 0.01)
    rng = np.random.default_rng(0)
    diffs = rng.normal(0.01, 0.01 * math.sqrt(3), (3000, 2, n, 1))
    both = sum(
        all(paired_interval(d, np.zeros_like(d)).excludes_zero() == 1 for d in pair)
        for pair in diffs
    )
    assert both / 3000 > 0.78  # sd of the estimate 0.7%; each at 80%: about 0.64
    one = Verdict(claim, INCONCLUSIVE, "", "", {"b - a": ci})  # one interval: 80%, as before
    assert f"difference: {seeds_to_detect(ci, 0.01)} " in _seeds_to_decide(one)[0]


def test_evidence_study_has_the_regimes_seeds_and_held_out_size():
    study = load_study("evidence")
    assert [r.name for r in study.regimes] == ["paper", "off-policy"]
    assert len(study.seeds) >= 7 and study.claims == ("abc", "etr", "klear", "apmpo")
    assert study.settings["data"]["gym"]["eval_size"] == 1000
    cfg = arm_config(study, study.arms[0], 0, regime=study.regimes[1])
    assert (cfg.rollout.minibatches, cfg.rollout.epochs) == (16, 2)
    assert dataclasses.replace(cfg.eval, every=0).at_end


def test_figures_fold_arms_that_trained_identically():
    from rlvr.compare.report import _merged_identical

    a = _arm("a", [0.5, 0.6], {"clip/q1_frac": 0.1})
    b = _arm("b", [0.5, 0.6], {"clip/q1_frac": 0.2})  # same training, another band edge
    c = _arm("c", [0.5, 0.6], {"clip/q1_frac": 0.1})  # bit-identical to a
    labels = {"a": "A", "b": "B", "c": "C"}
    kept, shown = _merged_identical([a, b, c], labels, set())
    assert [k.name for k in kept] == ["a", "b"] and shown["a"] == "A = C\n(identical training)"
    kept, shown = _merged_identical([a, b], labels, {frozenset(("a", "b"))})
    assert [k.name for k in kept] == ["a"] and shown["a"] == "A = B\n(identical training)"


def test_a_held_out_score_of_the_last_step_only_is_drawn_as_points(tmp_path, monkeypatch):
    """A metric at one step drew an invisible one-point line and no band: empty panels."""
    from matplotlib.figure import Figure

    from rlvr.compare.figures import curves_figure

    saved = {}
    monkeypatch.setattr(Figure, "savefig", lambda fig, path, **kw: saved.setdefault("fig", fig))
    arms = []
    for name, scores in (("a", [0.5, 0.7]), ("b", [0.4, 0.6])):
        arm = ArmData(name)
        for seed, score in enumerate(scores):
            rows = [{"step": s, "reward/accuracy": 0.1 * s} for s in (1, 2, 3)]
            rows[-1]["eval/avg@4"] = score
            arm.runs[seed] = RunData(seed, rows, {})
        arms.append(arm)
    curves_figure("t", arms, {"a": "A", "b": "B"}, tmp_path / "f.png")
    axes = {ax.get_title().split("\n")[-1]: ax for ax in saved["fig"].axes}
    points = [line for line in axes["eval/avg@4"].get_lines() if line.get_marker() == "o"]
    assert [(line.get_xdata()[0], line.get_ydata()[0]) for line in points] == [
        (2.95, 0.6),
        (3.05, 0.5),
    ]  # each arm's mean, side by side at the last step
    ranges = [c.get_segments()[0] for c in axes["eval/avg@4"].collections]
    assert [(seg[0][1], seg[1][1]) for seg in ranges] == [(0.5, 0.7), (0.4, 0.6)]  # min-max
    lines = axes["reward/accuracy"].get_lines()  # several steps: still a line per arm
    assert [list(line.get_xdata()) for line in lines] == [[1, 2, 3], [1, 2, 3]]


def test_a_short_runs_curves_are_drawn_as_logged_and_a_missing_value_drops_one_seed_only():
    """A trailing mean over 5 steps drew a 6-step study's last training accuracy as the mean of
    steps 2-6 (0.49 where the runs logged 0.74), and one seed without an entropy at a step
    (no update there) removed that step from the arm's curve."""
    from rlvr.compare.figures import band, smooth_window

    assert [smooth_window(n) for n in (6, 39, 40, 100)] == [1, 1, 2, 5]
    arm = ArmData("a")
    for seed, last in enumerate([0.7, 0.9, None]):
        rows = [{"step": s, "reward/accuracy": 0.1 * s, "policy/entropy": 1.0} for s in (1, 2, 3)]
        rows[-1]["policy/entropy"] = last
        arm.runs[seed] = RunData(seed, rows, {})
    steps, mean, low, high = band(arm, "reward/accuracy", smooth_window(3))
    assert steps.tolist() == [1, 2, 3] and mean == pytest.approx([0.1, 0.2, 0.3])
    steps, mean, low, high = band(arm, "policy/entropy")
    assert steps.tolist() == [1, 2, 3]
    assert (mean[-1], low[-1], high[-1]) == (pytest.approx(0.8), 0.7, 0.9)  # the two that logged
    arm.runs[1].rows[-1]["policy/entropy"] = None  # now one of three: the step is left out
    assert band(arm, "policy/entropy")[0].tolist() == [1, 2]
