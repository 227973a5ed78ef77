"""The paired bootstrap: exact cases by hand."""

import numpy as np
import pytest

from rlvr.compare.stats import Interval, mean_std, paired_bootstrap


def test_constant_difference_gives_a_point_interval():
    arm = np.array([[0.5], [0.7], [0.2]])
    ci = paired_bootstrap(arm, arm - 0.1)
    assert ci.mean == pytest.approx(0.1)
    assert (ci.low, ci.high) == pytest.approx((0.1, 0.1))
    assert ci.excludes_zero() == 1 and ci.seeds == 3


def test_three_seeds_give_the_range_of_the_differences():
    # each extreme is a whole resample with probability 1/27 > 2.5%: the 95% interval is [min, max]
    arm, base = np.array([0.3, 0.5, 0.9]), np.array([0.2, 0.6, 0.5])
    ci = paired_bootstrap(arm[:, None], base[:, None])
    assert ci.mean == pytest.approx(np.mean([0.1, -0.1, 0.4]))
    assert (ci.low, ci.high) == pytest.approx((-0.1, 0.4))
    assert ci.excludes_zero() == 0
    lower = paired_bootstrap(base[:, None] - 1.0, base[:, None])
    assert lower.excludes_zero() == -1


def test_pairing_removes_a_shared_seed_effect():
    # seeds differ a lot, the arm is always 0.01 better: paired, the interval excludes 0
    base = np.array([[0.1], [0.5], [0.9]])
    assert paired_bootstrap(base + 0.01, base).low > 0


def test_problems_are_resampled_within_seeds():
    rng = np.random.default_rng(1)
    base = rng.random((3, 200))
    arm = base + rng.normal(0.05, 0.2, size=(3, 200))
    ci = paired_bootstrap(arm, base, resamples=4000)
    diff = arm - base
    assert ci.mean == pytest.approx(diff.mean())
    # the interval's width matches the standard error of a mean over 600 paired values
    se = diff.std() / np.sqrt(diff.size)
    assert 2 * 1.96 * se * 0.7 < ci.high - ci.low < 2 * 1.96 * se * 1.6
    assert ci.low < diff.mean() < ci.high


def test_same_seed_same_interval():
    arm, base = np.random.default_rng(0).random((2, 3, 5))
    assert paired_bootstrap(arm, base) == paired_bootstrap(arm, base)


def test_bad_input():
    with pytest.raises(ValueError, match="shape"):
        paired_bootstrap(np.zeros((3, 2)), np.zeros((3, 1)))
    with pytest.raises(ValueError, match="finite"):
        paired_bootstrap(np.array([[np.nan]]), np.array([[0.0]]))


def test_mean_std_and_text():
    assert mean_std(np.array([1.0, 2.0, 3.0])) == pytest.approx((2.0, 1.0))
    assert mean_std(np.array([4.0])) == (4.0, 0.0)
    assert Interval(0.1, -0.05, 0.25, 3).text(2) == "+0.10 [-0.05, +0.25]"
