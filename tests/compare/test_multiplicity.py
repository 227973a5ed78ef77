"""p-values of verdicts and their correction across a study's claims, against hand-worked
numbers and a simulation under no difference."""

import dataclasses
import math

import numpy as np
import pytest
from tests.compare.test_claims import arm, direction, order_claim

from rlvr.compare.claims import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    UNTESTABLE,
    Claim,
    Verdict,
    judge,
)
from rlvr.compare.multiplicity import adjust, holding, holm, verdict_p
from rlvr.compare.report import _family_note
from rlvr.compare.stats import Interval, p_value, paired_interval


def test_p_value_by_hand():
    # df = 1 is Cauchy: P(|T| > 1) = 1 - 2 atan(1) / pi = 0.5
    assert p_value(Interval(1.0, 0, 0, 2, se=1.0, df=1)) == pytest.approx(0.5, abs=1e-12)
    # df = 2: P(|T| > t) = 1 - t / sqrt(t^2 + 2); t = 2: 1 - 2 / sqrt(6)
    expected = 1 - 2 / math.sqrt(6)
    assert p_value(Interval(-0.6, 0, 0, 3, se=0.3, df=2)) == pytest.approx(expected, abs=1e-12)
    assert p_value(Interval(0.1, 0.1, 0.1, 3, se=0.0, df=2)) == 0.0  # agreeing seeds
    assert p_value(Interval(0.0, 0.0, 0.0, 3, se=0.0, df=2)) == 1.0
    assert math.isnan(p_value(Interval(0.1, 0, 0, 3)))  # no standard error


def test_p_value_is_below_5_percent_exactly_when_the_interval_excludes_0():
    rng = np.random.default_rng(0)
    checked = {True: 0, False: 0}
    for _ in range(400):
        seeds, problems = int(rng.integers(2, 9)), int(rng.choice([1, 1, 5, 40]))
        shift = rng.normal(0, 1.5)
        a = rng.normal(shift, 1.0, (seeds, problems)) + rng.normal(0, 1.0, (seeds, 1))
        ci = paired_interval(a, np.zeros_like(a))
        excludes = ci.excludes_zero() != 0
        assert (p_value(ci) < 0.05) == excludes
        checked[excludes] += 1
    assert min(checked.values()) > 50  # both outcomes were exercised


def test_holm_and_benjamini_hochberg_by_hand():
    raw = [0.01, 0.04, 0.03, 0.005]
    # Holm, sorted 0.005 x4, 0.01 x3, 0.03 x2, 0.04 x1, each at least the one before
    assert holm(raw) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BH, sorted 0.005 x4/1, 0.01 x4/2, 0.03 x4/3, 0.04 x4/4, each at most the one after
    verdicts = [_verdict_with_p(p) for p in raw]
    assert [v.q_bh for v in adjust(verdicts)] == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert holm([0.3, 0.9]) == pytest.approx([0.6, 0.9]) and holm([]) == []


def _holm_reference(p):
    """Holm (1979) from its definition: the k-th smallest p times (m - k + 1), running max."""
    order = np.argsort(p, kind="stable")
    steps = np.maximum.accumulate((len(p) - np.arange(len(p))) * np.asarray(p)[order])
    out = np.empty(len(p))
    out[order] = np.minimum(steps, 1.0)
    return out


def _bh_reference(p):
    """Benjamini-Hochberg (1995) from its definition: p * m / rank, running min from the top."""
    order = np.argsort(p)[::-1]
    m = len(p)
    steps = np.minimum.accumulate(np.asarray(p)[order] * m / (m - np.arange(m)))
    out = np.empty(m)
    out[order] = np.minimum(steps, 1.0)
    return out


def test_holm_and_bh_match_their_definitions_with_ties_and_caps():
    rng = np.random.default_rng(2)
    for _ in range(300):
        m = int(rng.integers(1, 40))
        raw = rng.choice([0.001, 0.01, 0.02, 0.04, 0.3, 1.0], m).tolist()  # ties
        raw = [p if rng.random() < 0.5 else float(rng.random()) for p in raw]
        h = holm(raw)
        q = [v.q_bh for v in adjust([_verdict_with_p(p) for p in raw])]
        assert h == pytest.approx(_holm_reference(raw), abs=1e-12)
        assert q == pytest.approx(_bh_reference(raw), abs=1e-12)
        assert all(p <= a <= 1 for p, a in zip(raw, h, strict=True))
        assert all(
            p - 1e-12 <= b <= a + 1e-12 for p, b, a in zip(raw, q, h, strict=True)
        )  # BH: laxer
        order = np.argsort(raw, kind="stable")  # monotone in the raw p-values
        assert np.all(np.diff(np.asarray(h)[order]) >= 0)


def _verdict_with_p(p, status=REPRODUCED):
    """A direction verdict whose interval has two-sided p-value ``p`` (df = 1: t = tan)."""
    t = math.tan(math.pi / 2 * (1 - p))
    claim = Claim("c", text="a > b", rule="direction", metric="m", arm="a", baseline="b")
    ci = Interval(t, 0.0, 0.0, 2, se=1.0, df=1)
    return Verdict(claim, status, "", "", {"a - b": ci})


def test_a_direction_verdict_has_its_interval_p_value():
    for values, status in (
        ([0.5, 0.62, 0.7], REPRODUCED),
        ([0.31, 0.4, 0.5], NOT_REPRODUCED),
        ([0.5, 0.4, 0.7], INCONCLUSIVE),
    ):
        verdict = direction(values, [0.4, 0.5, 0.6])
        assert verdict.status == status
        p = verdict_p(verdict)
        assert p == pytest.approx(p_value(verdict.intervals["a - b"]))
        assert (p < 0.05) == (status != INCONCLUSIVE)


def test_order_p_values_intersection_union_and_bonferroni():
    claim = order_claim()
    base = {"a": arm("a", [0.1, 0.2, 0.3]), "b": arm("b", [0.21, 0.3, 0.42])}
    good = judge(claim, {**base, "c": arm("c", [0.33, 0.4, 0.5])})
    assert good.status == REPRODUCED
    assert verdict_p(good) == pytest.approx(max(p_value(ci) for ci in good.intervals.values()))
    swapped = judge(claim, {**base, "c": arm("c", [0.0, 0.1, 0.22])})
    assert swapped.status == NOT_REPRODUCED
    below = p_value(swapped.intervals["c - b"])
    assert verdict_p(swapped) == pytest.approx(min(1.0, 2 * below))  # 2 intervals
    mixed = judge(claim, {**base, "c": arm("c", [0.3, 0.2, 0.5])})
    assert mixed.status == INCONCLUSIVE and verdict_p(mixed) >= 0.05


def test_lower_and_decreasing_claims_count_the_other_side():
    verdict = direction([0.31, 0.4, 0.5], [0.4, 0.5, 0.6], want="lower")
    assert verdict.status == REPRODUCED and verdict_p(verdict) < 0.05
    wrong_way = direction([0.5, 0.62, 0.7], [0.4, 0.5, 0.6], want="lower")
    assert wrong_way.status == NOT_REPRODUCED
    assert verdict_p(wrong_way) == pytest.approx(p_value(wrong_way.intervals["a - b"]))


def test_the_family_leaves_out_untestable_and_untested_claims():
    tested = [_verdict_with_p(0.01), _verdict_with_p(0.02, NOT_REPRODUCED)]
    untestable = dataclasses.replace(_verdict_with_p(0.001), status=UNTESTABLE)
    untested = dataclasses.replace(_verdict_with_p(0.5, INCONCLUSIVE), intervals={})
    out = adjust([tested[0], untestable, untested, tested[1]])
    assert [v.p_holm for v in out] == pytest.approx([0.02, None, None, 0.02])
    assert out[1].p is None and out[2].p is None
    assert holding(out) == [out[0], out[3]]
    assert adjust([untestable]) == [untestable]
    no_se = dataclasses.replace(untested, intervals={"a - b": Interval(0.1, 0, 0, 3)})
    assert adjust([no_se, tested[0]])[0].p is None  # a NaN p-value stays out of the family


def test_inconclusive_verdicts_count_in_the_family_but_never_hold():
    out = adjust([_verdict_with_p(0.004), _verdict_with_p(0.3, INCONCLUSIVE)])
    assert [v.p_holm for v in out] == pytest.approx([0.008, 0.3])
    assert holding(out) == [out[0]] and holding(out, "q_bh") == [out[0]]


def test_the_report_says_which_verdicts_hold_together():
    verdicts = adjust(
        [
            _verdict_with_p(0.001),
            _verdict_with_p(0.03, NOT_REPRODUCED),
            _verdict_with_p(0.5, INCONCLUSIVE),
        ]
    )
    note = _family_note(verdicts)
    assert "(3 tested claims)" in note and "of the 2 decided verdicts, 1 holds with Holm" in note
    assert "; not `c`" in note  # p 0.03: Holm 0.06
    assert "2 hold with Benjamini-Hochberg's (at most 5% of them wrong, expected)." in note
    assert _family_note([_verdict_with_p(0.5, INCONCLUSIVE)]) == ""
    in_regimes = [
        dataclasses.replace(v, regime=r)
        for v, r in zip(verdicts, ("off-policy", "off-policy", "paper"), strict=True)
    ]
    note = _family_note(in_regimes)
    assert "(3 tested claims x regimes)" in note and "; not `c` (off-policy)" in note


def test_descriptive_verdicts_keep_their_p_and_stay_out_of_the_family():
    """A study's ``confirms`` makes the other claims descriptive: Holm and BH correct across
    the confirmatory ones only (two at p 0.01 and 0.02: Holm 0.02 and 0.02, not 0.03 and
    0.04 as with the descriptive verdict's p 0.3 in the family)."""
    first, second = (
        dataclasses.replace(_verdict_with_p(p), role="confirmatory") for p in (0.01, 0.02)
    )
    other = dataclasses.replace(_verdict_with_p(0.3, INCONCLUSIVE), role="descriptive")
    out = adjust([first, other, second])
    assert [v.p for v in out] == pytest.approx([0.01, 0.3, 0.02])
    assert [v.p_holm for v in out] == pytest.approx([0.02, None, 0.02])
    assert out[1].q_bh is None and holding(out) == [out[0], out[2]]
    everything = adjust([dataclasses.replace(v, role="") for v in (first, other, second)])
    assert [v.p_holm for v in everything] == pytest.approx([0.03, 0.3, 0.04])
    only = adjust([other])
    assert only[0].p == pytest.approx(0.3) and only[0].p_holm is None
    note = _family_note(out)
    assert note.startswith("**2 confirmatory, 1 descriptive**")
    assert "(2 tested claims)" in note and "of the 2 decided verdicts, 2 hold with Holm" in note
    assert _family_note(only).startswith("**0 confirmatory, 1 descriptive**")
    assert "Read together" not in _family_note(only)


def test_holm_keeps_the_family_wise_error_under_no_difference():
    """20 direction claims of 5 seeds each, no true difference: uncorrected, most studies
    decide some claim; with Holm about 5% of them do."""
    rng = np.random.default_rng(1)
    studies, claims, seeds = 1000, 20, 5
    diffs = rng.normal(0, 1, (studies, claims, seeds))
    any_raw = any_holm = 0
    for study in diffs:
        ps = [p_value(paired_interval(d[:, None], np.zeros((seeds, 1)))) for d in study]
        any_raw += min(ps) < 0.05
        any_holm += min(holm(ps)) < 0.05
    assert any_raw / studies > 0.5  # 1 - 0.95^20 = 0.64
    assert any_holm / studies < 0.065  # at most 5%, plus simulation noise (sd 0.7%)
