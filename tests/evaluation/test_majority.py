"""maj@k against hand-worked numbers and brute-force enumeration of the k-subsets."""

from __future__ import annotations

import itertools
from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlvr.evaluation.majority import maj_at_k, majority_summary, majority_values, vote_groups


def brute(answers, correct, k):
    """The mean over every k-subset of the vote's score: the top group's share correct (over
    all n), a tie split evenly, no vote 0. Completions scored correct, and those sharing a key
    with one, vote "right"; a wrong one without a key does not vote."""
    right = {a for a, c in zip(answers, correct, strict=True) if c}
    votes = [
        "right" if c or (a is not None and a in right) else a
        for a, c in zip(answers, correct, strict=True)
    ]
    share = {
        key: Fraction(
            sum(c for v, c in zip(votes, correct, strict=True) if v == key), votes.count(key)
        )
        for key in set(votes) - {None}
    }
    total = Fraction(0)
    subsets = list(itertools.combinations(range(len(votes)), k))
    for subset in subsets:
        counts = Counter(votes[i] for i in subset if votes[i] is not None)
        if counts:
            top = max(counts.values())
            winners = [key for key, count in counts.items() if count == top]
            total += sum(share[key] for key in winners) / len(winners)
    return float(total / len(subsets))


def test_hand_worked_votes_ties_and_a_completion_without_an_answer():
    # a, a (both right), b (wrong), and one completion without an answer (no vote)
    answers, correct = ["a", "a", "b", None], [True, True, False, False]
    assert maj_at_k(answers, correct, 1) == pytest.approx(2 / 4, abs=1e-15)
    # 6 pairs: {a,a} 1; {a,b} twice, a tie: 1/2 each; {a,-} twice: 1; {b,-} 0  -> 4/6
    assert maj_at_k(answers, correct, 2) == pytest.approx(4 / 6, abs=1e-15)
    # 4 triples: {a,a,b} 1; {a,a,-} 1; {a,b,-} twice, a tie: 1/2 each  -> 3/4
    assert maj_at_k(answers, correct, 3) == pytest.approx(3 / 4, abs=1e-15)
    assert maj_at_k(answers, correct, 4) == 1.0


def test_no_vote_scores_zero_and_a_three_way_tie_a_third():
    assert [maj_at_k([None] * 3, [False] * 3, k) for k in (1, 2, 3)] == [0.0, 0.0, 0.0]
    assert maj_at_k(["a", "b", "c"], [True, False, False], 3) == pytest.approx(1 / 3, abs=1e-15)
    # the right answer outvoted: b b beats a
    assert maj_at_k(["a", "b", "b"], [True, False, False], 3) == 0.0


def test_a_group_the_verifier_scored_both_ways_earns_its_share_correct():
    # one answer, scored right once and wrong once (a timeout, say): credit 1/2
    assert [maj_at_k(["a", "a"], [True, False], k) for k in (1, 2)] == [0.5, 0.5]
    # a completion scored correct votes for the right answer even without a key
    assert vote_groups(["a", None, "a", "b"], [True, True, False, False]) == [(3, 2), (1, 0)]


def test_right_answers_with_different_keys_vote_as_one():
    """Keys a and b both scored correct (0.333333 and 1/3 against 1/3): one right answer, not
    two split votes that c c (wrong) outvotes."""
    answers, correct = ["a", "b", "c", "c"], [True, True, False, False]
    assert vote_groups(answers, correct) == [(2, 2), (2, 0)]
    # 4 triples: {a,b,c} twice: right 2 beats c 1 -> 1 (split keys: a three-way tie, 2/3);
    # {a,c,c}, {b,c,c}: c wins -> 0.  1/2 (split keys: 1/3)
    assert maj_at_k(answers, correct, 3) == pytest.approx(1 / 2, abs=1e-15)
    # all four: right 2 ties c 2 -> 1/2 (split keys: c's 2 beat 1 and 1 -> 0)
    assert maj_at_k(answers, correct, 4) == pytest.approx(1 / 2, abs=1e-15)
    # a wrong completion sharing a right key (its check timed out) joins the right answer
    assert vote_groups(["a", "b", "a", "c"], [True, True, False, False]) == [(3, 2), (1, 0)]


@given(
    st.integers(1, 7).flatmap(
        lambda n: st.tuples(
            st.lists(st.sampled_from([None, "a", "b", "c"]), min_size=n, max_size=n),
            st.lists(st.booleans(), min_size=n, max_size=n),
            st.integers(1, n),
        )
    )
)
def test_equals_the_mean_over_every_k_subset(case):
    answers, correct, k = case
    assert maj_at_k(answers, correct, k) == pytest.approx(brute(answers, correct, k), abs=1e-12)


@given(
    st.lists(st.tuples(st.sampled_from([None, "a", "b"]), st.booleans()), min_size=1, max_size=20)
)
def test_maj_at_1_is_avg_at_1(rows):
    # every completion scored correct votes (for the right answer), whatever its key
    answers, correct = [a for a, _ in rows], [c for _, c in rows]
    assert maj_at_k(answers, correct, 1) == pytest.approx(sum(correct) / len(rows), abs=1e-12)


def test_large_n_is_exact_without_overflow():
    # C(1000, 500) overflows a float; the counts are whole numbers
    answers = ["a"] * 600 + ["b"] * 400
    correct = [True] * 600 + [False] * 400
    assert maj_at_k(answers, correct, 1) == pytest.approx(0.6, abs=1e-12)
    assert maj_at_k(answers, correct, 1000) == 1.0
    assert maj_at_k(["a"] * 1000, [True] * 1000, 500) == 1.0


def test_summary_and_bad_input():
    values = majority_values([(["a", "a", "b", None], [True, True, False, False])] * 2, [2, 4])
    assert values == {"maj@2": [pytest.approx(4 / 6)] * 2, "maj@4": [1.0, 1.0]}
    means, stderr = majority_summary({"maj@2": [1.0, 0.5, 0.0]})
    assert means == {"maj@2": 0.5} and stderr["maj@2"] == pytest.approx(0.5 / 3**0.5, abs=1e-12)
    with pytest.raises(ValueError, match=r"k must be in \[1, n=2\], got 3"):
        maj_at_k(["a", "b"], [True, False], 3)
    with pytest.raises(ValueError, match="2 answer keys for 1 completions"):
        maj_at_k(["a", "b"], [True], 1)
