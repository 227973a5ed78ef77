"""maj@k's groups follow the verifier's judgement: hand-worked votes where answer keys alone
give the wrong maj@k, both ways."""

from __future__ import annotations

import pytest

from rlvr.evaluation import grouping
from rlvr.evaluation.grouping import merge_wrong_votes
from rlvr.evaluation.majority import maj_at_k
from rlvr.rewards import get_verifier
from rlvr.rewards.math import answers_match, canonical_answer, gold_answer

MATH = get_verifier("math")


def votes(verifier, completions, reference):
    """``(keys, votes, correct)`` of one problem's completions, as ``rlvr eval`` gives them."""
    keys = [verifier.answer_key(c, reference) for c in completions]
    correct = [verifier(c, reference) >= verifier.correct_value for c in completions]
    return keys, merge_wrong_votes(verifier, completions, keys, correct), correct


def test_right_answers_under_split_keys_are_not_outvoted():
    # 0.333333 and 1/3 are both right for 1/3 (within the verifier's tolerance), keys apart:
    # 2 + 2 votes lost to 3 votes for 2; as one answer, 4 beat 3
    completions = [r"\boxed{0.333333}"] * 2 + [r"\boxed{\frac13}"] * 2 + [r"\boxed{2}"] * 3
    keys, merged, correct = votes(MATH, completions, r"\frac13")
    assert correct == [True] * 4 + [False] * 3 and len(set(keys)) == 3
    assert maj_at_k(keys, [False] * 7, 7) == 0.0  # the keys' groups: 3 beats 2, 2
    assert maj_at_k(merged, correct, 7) == 1.0
    # k = 6: of C(7, 6) = 7 subsets, those dropping a right one tie 3-3 (1/2), those dropping
    # a 2 win (1): (4 * 1/2 + 3) / 7
    assert maj_at_k(merged, correct, 6) == pytest.approx(5 / 7, abs=1e-15)


def test_wrong_answers_under_split_keys_outvote_the_right_one():
    # 0.333333 and 1/3 are one wrong answer for 1/2: 4 votes beat 3, not 2 + 2
    completions = [r"\boxed{\frac12}"] * 3 + [r"\boxed{0.333333}"] * 2 + [r"\boxed{1/3}"] * 2
    keys, merged, correct = votes(MATH, completions, "0.5")
    assert maj_at_k(keys, correct, 7) == 1.0  # the keys' groups: 3 beats 2, 2
    assert merged[3:] == [merged[3]] * 4 and merged[:3] == keys[:3]
    assert maj_at_k(merged, correct, 7) == 0.0
    # k = 6: dropping a right one, 2 against 4 (0); dropping a wrong one, 3 against 3 (1/2)
    assert maj_at_k(merged, correct, 6) == pytest.approx(2 / 7, abs=1e-15)


def test_percentages_expressions_and_named_values_join_under_format_too():
    verifier = get_verifier("math+format")
    pairs = [(r"3\%", "3"), ("(x+1)^2", "x^2+2x+1"), ("(5, 6)", "x = 5, y = 6")]
    for a, b in pairs:
        completions = [f"<think>.</think> \\boxed{{{x}}}" for x in (a, b, "7")]
        keys, merged, _ = votes(verifier, completions, "100")
        assert keys[0] != keys[1] and merged[0] == merged[1] != merged[2], (a, b)
    # a malformed completion has no key and stays out
    keys, merged, _ = votes(verifier, [r"\boxed{3}", "<think>.</think> \\boxed{3}"], "1")
    assert merged == [None, "3"]


def test_the_verifiers_equivalences_join_as_wrong_answers():
    """Of the verifier's own equivalence tests whose keys split, the merge joins each pair
    as two wrong answers (the count docs/evaluation.md gives)."""
    from tests.rewards.test_math_verifier import EQUIVALENT

    split = joined = 0
    for completion, gold in EQUIVALENT:
        other = rf"\boxed{{{gold_answer(gold)}}}"
        keys = [MATH.answer_key(c, "1") for c in (completion, other)]
        if keys[0] == keys[1]:
            continue
        split += 1
        merged = merge_wrong_votes(MATH, [completion, other], keys, [False, False])
        joined += merged[0] == merged[1]
    assert (split, joined) == (16, 16)


def test_only_wrong_answers_join_and_never_the_right_one():
    # 0.50001 is wrong for 1/2 (math-verify compares 6 decimal places); it stays its own answer
    completions = [r"\boxed{0.5}", r"\boxed{1/2}", r"\boxed{0.50001}", r"\boxed{0.3}"]
    keys, merged, correct = votes(MATH, completions, "0.5")
    assert correct == [True, True, False, False] and merged == keys


def test_numbers_far_apart_are_not_compared_and_the_cap_holds(monkeypatch):
    calls = []
    monkeypatch.setattr(grouping, "comparison", _counting(calls))
    completions = [rf"\boxed{{{x}}}" for x in ("10", "20", "30", "x^2", "x \\cdot x", "1/3")]
    keys = [MATH.answer_key(c, "1") for c in completions]
    merged = merge_wrong_votes(MATH, completions, keys, [False] * 6)
    assert merged[3] == merged[4] and len(set(merged)) == 5
    # 15 pairs: the 6 of two numbers skipped; of the 9 others, 1/3 against x * x is not asked
    # (x * x joined x^2: only a group's leader is compared)
    assert len(calls) == 8
    calls.clear()
    monkeypatch.setattr(grouping, "MAX_COMPARISONS", 2)
    assert merge_wrong_votes(MATH, completions, keys, [False] * 6) == keys
    assert len(calls) == 2


def _counting(calls):
    """A :func:`grouping.comparison` that records each pair it is asked about."""
    real = grouping.comparison

    def comparison(verifier):
        same = real(verifier)
        return lambda a, b: calls.append((a, b)) or same(a, b)

    return comparison


def test_a_verifier_without_a_comparison_keeps_its_keys():
    gym = get_verifier("reasoning_gym:chain_sum")
    assert merge_wrong_votes(gym, ["a", "A", "b"], ["a", "A", "b"], [False] * 3) == ["a", "A", "b"]


@pytest.mark.parametrize(
    ("a", "b"),
    [("0.666667", r"\frac23"), (r"50\%", "50"), ("50", r"50\%"), (r"0.001\%", "0.00001")],
)
def test_numbers_the_verifier_calls_equal_are_never_skipped(a, b):
    assert answers_match(a, b)
    assert not grouping._numbers_apart(canonical_answer(a), canonical_answer(b))
