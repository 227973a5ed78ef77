"""Verdict rules on synthetic metrics: each rule gives each of the three outcomes."""

import math

import pytest
import yaml

from rlvr.compare import load_study
from rlvr.compare.claims import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Claim,
    bundled_claim_files,
    judge,
    load_claims,
)
from rlvr.compare.results import ArmData, RunData


def arm(name, per_seed, metric="m", steps=4):
    """An arm whose runs log ``metric`` = the seed's value at every step."""
    data = ArmData(name)
    for seed, value in enumerate(per_seed):
        rows = [{"step": s, metric: value} for s in range(1, steps + 1)]
        data.runs[seed] = RunData(seed, rows, {})
    return data


def direction(arm_values, base_values, want="higher"):
    claim = Claim(
        "c",
        "p",
        "fig. 1",
        "a beats b",
        "direction",
        metric="m",
        arm="a",
        baseline="b",
        direction=want,
    )
    return judge(claim, {"a": arm("a", arm_values), "b": arm("b", base_values)})


def test_direction_three_outcomes():
    assert direction([0.5, 0.6, 0.7], [0.4, 0.5, 0.6]).status == REPRODUCED
    assert direction([0.3, 0.4, 0.5], [0.4, 0.5, 0.6]).status == NOT_REPRODUCED
    assert direction([0.5, 0.4, 0.7], [0.4, 0.5, 0.6]).status == INCONCLUSIVE
    assert direction([0.3, 0.4, 0.5], [0.4, 0.5, 0.6], want="lower").status == REPRODUCED
    verdict = direction([0.5, 0.6, 0.7], [0.4, 0.5, 0.6])
    assert "+0.1000 [+0.1000, +0.1000]" in verdict.numbers and "3 seeds" in verdict.numbers
    assert verdict.intervals["a - b"].excludes_zero() == 1


def test_a_metric_no_run_logged_is_named_with_the_nearest_logged_name():
    """``policy/entropi`` read as 'undefined in some run (never logged or, for late, ...)',
    one of five reasons, with nothing to say which name the runs did log."""
    arms = {name: arm(name, [0.5, 0.6, 0.7], metric="policy/entropy") for name in "ab"}
    typo = Claim("c", text="a beats b", rule="direction", metric="policy/entropi", arm="a",
                 baseline="b")  # fmt: skip
    verdict = judge(typo, arms)
    assert verdict.status == INCONCLUSIVE
    assert verdict.numbers == "no run of a logged policy/entropi; did you mean policy/entropy?"
    both = Claim("i", text="t", rule="interaction", metric="clip/fraq", arms=("a", "b", "c", "d"))
    assert judge(both, {n: arm(n, [0.1, 0.2], metric="clip/frac") for n in "abcd"}).numbers == (
        "no run of a logged clip/fraq; did you mean clip/frac?"
    )
    far = Claim("c", text="t", rule="direction", metric="zzz", arm="a", baseline="b")
    assert judge(far, arms).numbers == "no run of a logged zzz (docs/metrics.md lists the names)"


def test_summaries_mean_late_final():
    rows = [{"step": s, "m": float(s)} for s in range(1, 9)]
    run = RunData(0, rows, {})
    assert run.summary("m", "mean") == pytest.approx(4.5)
    assert run.summary("m", "late") == pytest.approx(7.5)  # steps 7 and 8 (> 0.75 * 8)
    assert run.summary("m", "final") == 8.0
    timed = RunData(
        0, [{"step": 0, "time/eval": 2.0}, {"step": 1, "time/step": 1.5, "time/eval": None}], {}
    )
    assert timed.seconds == 3.5


def test_a_non_finite_value_makes_the_summary_undefined_not_an_earlier_step():
    """A metric written as null (not finite) at steps 7-8 gave final = late = step 6's value."""
    rows = [{"step": s, "m": float(s)} for s in range(1, 9)]
    rows[6]["m"] = rows[7]["m"] = None
    diverged = RunData(0, rows, {})
    for how in ("final", "late", "mean"):
        assert math.isnan(diverged.summary("m", how)), how
    steps, values = diverged.curve("m")  # the figures leave the null steps out
    assert steps.tolist() == [1, 2, 3, 4, 5, 6] and values.tolist() == steps.tolist()
    skipped = RunData(0, [*rows[:6], {"step": 7}, {"step": 8}], {})  # not logged: left out
    assert skipped.summary("m", "final") == 6.0 and skipped.summary("m", "mean") == 3.5
    data = {"a": arm("a", [1.0, 2.0, 3.0]), "b": arm("b", [0.0, 1.0, 2.0])}
    data["a"].runs[1].rows[-1]["m"] = None
    verdict = direction_on(data)
    assert verdict.status == INCONCLUSIVE and "not finite" in verdict.numbers


def test_late_is_undefined_when_the_last_quarter_logged_nothing():
    """With no value in the last quarter, 'late' was the last logged value, from earlier on."""
    rows = [{"step": s, "m": float(s)} for s in range(1, 7)] + [{"step": 7}, {"step": 8}]
    assert math.isnan(RunData(0, rows, {}).summary("m", "late"))
    rows[6]["m"] = 7.0
    assert RunData(0, rows, {}).summary("m", "late") == 7.0


def direction_on(data):
    claim = Claim("c", "p", "", "a beats b", "direction", metric="m", arm="a", baseline="b")
    return judge(claim, data)


def test_run_share_of_a_step_with_non_finite_fractions_is_undefined():
    row = {"step": 1, "batch/tokens": 10.0, **{f"clip/q{k}_frac": 0.1 for k in range(1, 5)}}
    assert RunData(0, [row], {}).summary("clip/q1_share", "run-share") == pytest.approx(0.25)
    broken = RunData(0, [row, {**row, "step": 2, "clip/q4_frac": None}], {})
    assert math.isnan(broken.summary("clip/q1_share", "run-share"))
    skipped = RunData(0, [row, {"step": 2, "update/skipped": 1.0}], {})  # no update: left out
    assert skipped.summary("clip/q1_share", "run-share") == pytest.approx(0.25)


def order_claim(**kw):
    return Claim(
        "o",
        "p",
        "tab. 6",
        "a < b < c",
        "order",
        metric="m",
        arms=("a", "b", "c"),
        direction="increasing",
        **kw,
    )


def test_order_three_outcomes():
    claim = order_claim()
    good = {
        "a": arm("a", [0.1, 0.2, 0.3]),
        "b": arm("b", [0.2, 0.3, 0.4]),
        "c": arm("c", [0.3, 0.4, 0.5]),
    }
    assert judge(claim, good).status == REPRODUCED
    swapped = {**good, "c": arm("c", [0.0, 0.1, 0.2])}  # c clearly below b
    assert judge(claim, swapped).status == NOT_REPRODUCED
    mixed = {**good, "c": arm("c", [0.3, 0.2, 0.5])}  # c - b: +0.1, -0.1, +0.1
    verdict = judge(claim, mixed)
    assert verdict.status == INCONCLUSIVE and set(verdict.intervals) == {"b - a", "c - b"}


def test_interaction_three_outcomes_with_hand_worked_numbers():
    claim = Claim("i", text="together worse than the sum", rule="interaction", metric="m",
                  arms=("n", "a", "b", "ab"), direction="lower")  # fmt: skip
    arms = {
        "n": arm("n", [0.70, 0.72, 0.74]),
        "a": arm("a", [0.50, 0.52, 0.54]),  # a alone: -0.20
        "b": arm("b", [0.75, 0.77, 0.79]),  # b alone: +0.05
        "ab": arm("ab", [0.25, 0.30, 0.25]),  # additive would be 0.55, 0.57, 0.59
    }
    verdict = judge(claim, arms)
    # contrasts -0.30, -0.27, -0.34: mean -0.30333, sd 0.035119, se 0.020276, t(2) 4.3027
    assert verdict.status == REPRODUCED
    assert "-0.3033 [-0.3906, -0.2161]" in verdict.numbers and "3 seeds" in verdict.numbers
    assert set(verdict.intervals) == {"interaction"}
    # main effects: a (-0.20 + both - b) / 2 = -0.3517; b (+0.05 + both - a) / 2 = -0.1017
    assert "main effects (not judged) a -0.3517 [" in verdict.numbers
    assert ", b -0.1017 [" in verdict.numbers
    additive = {**arms, "ab": arm("ab", [0.56, 0.56, 0.60])}  # contrasts +0.01, -0.01, +0.01
    assert judge(claim, additive).status == INCONCLUSIVE
    more = {**arms, "ab": arm("ab", [0.75, 0.78, 0.80])}  # contrasts +0.20, +0.21, +0.21
    assert judge(claim, more).status == NOT_REPRODUCED
    assert claim.pairs == []  # no contrast is logged for it, so adding one reruns nothing


def quadrant_arm(fracs_per_seed):
    """Runs logging quadrant fractions (constant per step) and token counts."""
    data = ArmData("g")
    for seed, fracs in enumerate(fracs_per_seed):
        rows = [
            {
                "step": s,
                "batch/tokens": 100.0,
                **{f"clip/q{k + 1}_frac": f for k, f in enumerate(fracs)},
            }
            for s in (1, 2)
        ]
        data.runs[seed] = RunData(seed, rows, {})
    return data


def test_largest_three_outcomes_on_run_shares():
    metrics = tuple(f"clip/q{k}_share" for k in range(1, 5))
    claim = Claim(
        "q",
        "p",
        "fig. 4f",
        "Q4 largest",
        "largest",
        arm="g",
        metrics=metrics,
        expect="clip/q4_share",
        summary="run-share",
    )
    q4_first = quadrant_arm([[0.1, 0.05, 0.2, 0.4]] * 3)
    verdict = judge(claim, {"g": q4_first})
    assert verdict.status == REPRODUCED
    assert "clip/q4_share 0.533" in verdict.numbers  # 0.4 / 0.75
    q3_first = quadrant_arm([[0.1, 0.05, 0.4, 0.2]] * 3)
    assert judge(claim, {"g": q3_first}).status == NOT_REPRODUCED
    mixed = quadrant_arm([[0.1, 0.05, 0.2, 0.4], [0.1, 0.05, 0.4, 0.2], [0.1, 0.05, 0.2, 0.4]])
    assert judge(claim, {"g": mixed}).status == INCONCLUSIVE


def test_run_share_weights_steps_by_tokens():
    rows = [
        {
            "step": 1,
            "batch/tokens": 300.0,
            "clip/q1_frac": 0.1,
            "clip/q2_frac": 0.0,
            "clip/q3_frac": 0.0,
            "clip/q4_frac": 0.0,
        },
        {
            "step": 2,
            "batch/tokens": 100.0,
            "clip/q1_frac": 0.0,
            "clip/q2_frac": 0.0,
            "clip/q3_frac": 0.0,
            "clip/q4_frac": 0.3,
        },
    ]
    run = RunData(0, rows, {})
    assert run.summary("clip/q1_share", "run-share") == pytest.approx(30 / 60)
    assert run.summary("clip/q4_share", "run-share") == pytest.approx(30 / 60)


def held_out_arm(name, correct_per_seed, n=4, ids=None):
    data = ArmData(name)
    for seed, cs in enumerate(correct_per_seed):
        names = ids or [str(i) for i in range(len(cs))]
        problems = [
            {"id": i, "n": n, "c": c, "diversity": {}} for i, c in zip(names, cs, strict=True)
        ]
        rows = [{"step": 2, "eval/avg@4": sum(cs) / (n * len(cs))}]
        data.runs[seed] = RunData(seed, rows, {"final_eval": {"problems": problems}})
    return data


HELD_OUT = Claim(
    "h",
    "p",
    "tab. 1",
    "a scores higher",
    "direction",
    metric="eval/avg@4",
    summary="final",
    arm="a",
    baseline="b",
)


def test_final_held_out_claims_count_the_problems_variance():
    claim = HELD_OUT
    base = [[2, 2, 2, 2, 2, 2, 2, 2]] * 3
    better = [[3, 3, 3, 3, 3, 3, 3, 3]] * 3
    one_lucky = [[2, 2, 2, 2, 2, 2, 2, 4]] * 3  # +2 on one problem out of 8 in every seed
    assert (
        judge(claim, {"a": held_out_arm("a", better), "b": held_out_arm("b", base)}).status
        == REPRODUCED
    )
    verdict = judge(claim, {"a": held_out_arm("a", one_lucky), "b": held_out_arm("b", base)})
    # per seed the run-level difference is +0.0625 in all seeds, but one problem carries it:
    # the problems' variance, (7 * 0.0625**2 + 0.4375**2) / 7 / 8 = 0.0625**2, puts 0 inside
    # the interval 0.0625 -+ t(0.975, 7) * 0.0625 (the seeds do not vary: df = P - 1 = 7)
    ci = verdict.intervals["a - b"]
    assert verdict.status == INCONCLUSIVE
    assert (ci.low, ci.high) == pytest.approx((0.0625 * (1 - 2.364624), 0.0625 * (1 + 2.364624)))


def test_held_out_scores_pair_by_problem_id_not_position():
    """Problems were paired by their position in each run's list, whatever their ids."""
    ids = [f"q{i}" for i in range(8)]
    scores = [[0, 1, 2, 3, 4, 4, 4, 4], [1, 1, 2, 3, 4, 4, 4, 3], [0, 2, 2, 3, 4, 4, 3, 4]]
    a = held_out_arm("a", scores, ids=ids)
    # the same per-problem results, listed in reverse order: no difference on any problem
    b = held_out_arm("b", [s[::-1] for s in scores], ids=ids[::-1])
    ci = judge(HELD_OUT, {"a": a, "b": b}).intervals["a - b"]
    assert (ci.mean, ci.low, ci.high) == (0.0, 0.0, 0.0)  # by position: -+0.61
    lucky = held_out_arm("b", [[c - (i == 0) for i, c in enumerate(s)] for s in scores], ids=ids)
    assert judge(HELD_OUT, {"a": a, "b": lucky}).intervals["a - b"].mean == pytest.approx(1 / 32)


def test_held_out_scores_on_different_problems_do_not_pair():
    """Arms evaluated on different problems were compared problem by problem all the same."""
    a = held_out_arm("a", [[3] * 8] * 3, ids=[f"q{i}" for i in range(8)])
    b = held_out_arm("b", [[2] * 8] * 3, ids=[f"other{i}" for i in range(8)])
    verdict = judge(HELD_OUT, {"a": a, "b": b})
    assert verdict.status == INCONCLUSIVE
    assert (
        "a and b evaluated different held-out problems (seed 0: 8 and 8 problems, 0 in common)"
        in (verdict.numbers)
    )


def test_missing_runs_make_a_claim_inconclusive():
    verdict = direction([0.5], [0.4])
    assert verdict.status == INCONCLUSIVE and "fewer than 2 seeds" in verdict.numbers
    claim = Claim("c", "p", "", "x", "direction", metric="m", arm="a", baseline="z")
    assert "no finished runs of z" in judge(claim, {"a": arm("a", [1, 2])}).numbers
    unlogged = Claim("c", "p", "", "x", "direction", metric="other", arm="a", baseline="b")
    verdict = judge(unlogged, {"a": arm("a", [1, 2]), "b": arm("b", [1, 2])})
    assert verdict.status == INCONCLUSIVE and "no run of a logged other" in verdict.numbers


def test_bundled_claims_name_arms_of_the_bundled_studies():
    arms = {a.name for a in load_study("all").arms}
    arms |= {a.name for a in load_study("evidence-smollm2-q2").arms}  # the ablations' arms
    files = bundled_claim_files()
    assert set(files) == {"abc", "etr", "klear", "apmpo", "abc-q4-ablation", "abc-q2-ablation",
                          "apmpo-reward-confirm", "etr-clip-confirm",
                          "abc-bounds-interaction"}  # fmt: skip
    claims = [c for f in files for c in load_claims(f)]
    assert len({c.id for c in claims}) == len(claims)
    for claim in claims:
        assert set(claim.arms_needed) <= arms, claim.id
        assert claim.source and claim.paper
    ids = {c.id for c in claims}
    assert {
        "abc-entropy",
        "abc-q4-largest",
        "etr-clip",
        "etr-entropy",
        "klear-reward",
        "apmpo-ablation-order",
    } <= ids


@pytest.mark.parametrize(
    "change, message",
    [
        ({"rule": "bigger"}, "unknown rule"),
        ({"summary": "median"}, "unknown summary"),
        ({"baseline": None}, "direction needs"),
        ({"direction": "up"}, "higher or lower"),
        ({"rule": "interaction", "arms": ["a", "b", "c"]}, "interaction needs metric and arms"),
        ({"colour": "red"}, "unknown key"),
        # each would compare a thing with itself: every difference 0, as if a finding
        ({"baseline": "a"}, "arm and baseline are both 'a'"),
        ({"rule": "order", "arm": None, "baseline": None, "arms": ["a", "b", "a"],
          "direction": "increasing"}, "arms names a more than once"),
        ({"rule": "interaction", "arm": None, "baseline": None, "arms": ["n", "a", "n", "a"],
          "direction": "lower"}, "arms names a, n more than once"),
        ({"rule": "largest", "metric": None, "baseline": None, "expect": "clip/q4_share",
          "metrics": ["clip/q4_share", "clip/q4_share"], "summary": "run-share"},
         "metrics names clip/q4_share more than once"),
        # undefined for every run: found after every run had finished
        ({"summary": "run-share", "metric": "policy/entropy"}, "run-share applies to .*policy/entropy"),
    ],
)  # fmt: skip
def test_bad_claims_are_named(tmp_path, change, message):
    item = {
        "id": "x",
        "text": "t",
        "rule": "direction",
        "metric": "m",
        "arm": "a",
        "baseline": "b",
        **change,
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"paper": "p", "claims": [item]}))
    with pytest.raises(ValueError, match=message):
        load_claims(str(path))
