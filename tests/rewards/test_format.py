"""Klear's <think>...</think> format rule and its composition with verifiers."""

from __future__ import annotations

import pytest

from rlvr.rewards import get_verifier
from rlvr.rewards.format import think_format_ok, with_format

WELL_FORMED = [
    "<think>3 * 4 = 12</think> \\boxed{12}",
    "  <think>\nstep\n</think>\nThe answer is 12.",
]
MALFORMED = [
    "\\boxed{12}",  # no reasoning block
    "<think>12</think>",  # nothing after it
    "<think> </think> \\boxed{12}",  # empty reasoning
    "The answer: <think>x</think> \\boxed{12}",  # does not open the completion
    "<think>a</think><think>b</think> \\boxed{12}",  # two blocks
    "<think>a \\boxed{12}",  # never closed
    "</think> \\boxed{12}",  # closed, never opened
]


@pytest.mark.parametrize("text", WELL_FORMED)
def test_well_formed(text):
    assert think_format_ok(text)


@pytest.mark.parametrize("text", MALFORMED)
def test_malformed(text):
    assert not think_format_ok(text)


def test_think_opened_by_the_prompt():
    assert think_format_ok("reasoning</think> \\boxed{12}", think_in_prompt=True)
    assert not think_format_ok("<think>reasoning</think> \\boxed{12}", think_in_prompt=True)
    assert not think_format_ok("\\boxed{12}", think_in_prompt=True)


def test_penalty_defaults_to_the_wrong_score():
    verifier = get_verifier("math+format", correct=1.0, wrong=-1.0)
    assert verifier.spec == "math+format"
    assert verifier("<think>4*3</think> \\boxed{12}", "12") == 1.0
    assert verifier("<think>4*3</think> \\boxed{13}", "12") == -1.0
    assert verifier("\\boxed{12}", "12") == -1.0  # right answer, wrong format


def test_explicit_penalty_and_answer_only_after_think():
    verifier = get_verifier("math+format", wrong=0.0, format_penalty=-0.5)
    assert verifier("\\boxed{12}", "12") == -0.5
    assert (
        verifier("<think>so \\boxed{12}</think> I forgot", "12") == 0.0
    )  # answer only inside think
    assert verifier.failure_value == 0.0


def test_composes_with_any_verifier():
    entry = {"answer": "-4", "metadata": {"source_dataset": "chain_sum"}}
    verifier = with_format(get_verifier("reasoning_gym"), penalty=-1.0)
    assert verifier("<think>5-3-6</think><answer>-4</answer>", entry) == 1.0
    assert verifier("<answer>-4</answer>", entry) == -1.0


def test_format_options_need_the_modifier():
    with pytest.raises(ValueError, match=r"\+format"):
        get_verifier("math", format_penalty=-1.0)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"format_penalty": "high"}, "format penalty must be a number"),
        ({"format_penalty": 1.0}, "below the correct score"),  # malformed would count as correct
        ({"format_penalty": 2.0}, "below the correct score"),
        ({"format_penalty": 0.5}, "at most the wrong score 0.0"),  # malformed paid over wrong
        ({"format_penalty": 0.5, "wrong": -1.0}, "at most the wrong score -1.0"),
        ({"format_think_in_prompt": "false"}, "think_in_prompt must be True or False"),
    ],
)
def test_bad_format_options_are_refused_when_built(options, message):
    with pytest.raises(ValueError, match=message):
        get_verifier("math+format", **options)


def test_a_malformed_completion_does_not_vote_and_a_formed_one_votes_its_answer():
    v = get_verifier("math+format")
    assert v.votes and v.answer_key(r"<think>6/8</think> \boxed{3/4}", "1") == "0.750000000000"
    assert v.answer_key(r"\boxed{3/4}", "1") is None  # no <think>: scored as malformed
    inside = get_verifier("math+format", format_think_in_prompt=True)
    assert inside.answer_key(r"6/8</think> \boxed{3/4}", "1") == "0.750000000000"
    assert not get_verifier("code+format").votes  # the inner verifier gives no key
