"""The math verifier on real answer formats, plus thread safety and time limits."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from rlvr.rewards import Scorer, ScoringConfig, get_verifier, score_completions
from rlvr.rewards.math import answers_match, math_verifier, screen_answer

ETR = {"correct": 1.0, "wrong": -1.0}

# (completion, gold): equivalent answers written differently.
EQUIVALENT = [
    # fractions
    (r"\boxed{3/4}", r"\frac{3}{4}"),
    (r"\boxed{\dfrac{3}{4}}", "3/4"),
    (r"\boxed{\tfrac34}", "0.75"),
    (r"The answer is 0.75.", r"\frac{3}{4}"),
    # intervals
    (r"\boxed{\left(0, 1\right]}", "(0, 1]"),
    (r"\boxed{[-2,\infty)}", r"[-2, \infty)"),
    # units
    (r"\boxed{5 \text{ cm}}", "5"),
    (r"\boxed{18^\circ}", "18"),
    (r"\boxed{50\%}", r"50\%"),
    # LaTeX vs plain
    (r"\boxed{\frac{\sqrt{2}}{2}}", "sqrt(2)/2"),
    (r"\boxed{(x+1)^2}", "x^2+2x+1"),
    (r"\boxed{\pi}", r"\pi"),
    # negative numbers
    (r"\boxed{-4}", "-4"),
    ("Answer: \N{MINUS SIGN}4", "-4"),
    (r"\boxed{- 4}", "-4"),
    # nested braces inside \boxed
    (r"so \boxed{\frac{\sqrt{3}}{2}} is it", r"\frac{\sqrt3}{2}"),
    (r"\boxed{\{1, \{2\}\}}", r"\{1, \{2\}\}"),
    # sets and lists of solutions
    (r"\boxed{\{2, 1\}}", r"\{1, 2\}"),
    (r"\boxed{x = 2 \text{ or } x = 3}", "2, 3"),
    # thousands separators
    (r"\boxed{10,000}", "10000"),
    (r"\boxed{10{,}000}", "10000"),
    (r"\boxed{10\,000}", "10000"),
    ("Answer: 1,234,567", "1234567"),
    (r"\boxed{x = 1,000}", "1000"),  # math-verify read this one as x = {0, 1}
    (r"\boxed{x = -12{,}500.5}", "-12500.5"),
    # multiple choice
    (r"\boxed{B}", r"\text{(B)}"),
    # numbers: decimals within 1% of a small reference, exact large integers, percentages
    (r"\boxed{0.00003052}", r"\frac{1}{2^{15}}"),  # 6 places: 0.000031 both
    (r"\boxed{0.333333}", r"\frac{1}{3}"),
    (r"\boxed{18446744073709551616}", "2^{64}"),
    (r"\boxed{4503599627370496.0}", "4503599627370496"),
    (r"\boxed{3\%}", "3"),
    (r"\boxed{3\%}", "0.03"),
    (r"\boxed{12.5\%}", r"\frac18"),
    (r"\boxed{50}", r"50\%"),
    (r"\boxed{0.5}", r"50\%"),
    (r"\boxed{0.0001\%}", r"\frac{1}{10^6}"),
    (r"\boxed{\infty}", r"\infty"),
    (r"\boxed{x = 3\%}", "3"),
    (r"\boxed{\left(0.333333, 1\right)}", r"\left(\frac13, 1\right)"),
    (
        r"\boxed{\begin{pmatrix} 0.5 \\ 1 \end{pmatrix}}",
        r"\begin{pmatrix} \frac12 \\ 1 \end{pmatrix}",
    ),
    # values listed in the order the gold names its unknowns; roots of one unknown in any order
    (r"\boxed{(5, 6)}", "x = 5, y = 6"),
    (r"\boxed{\{5, 6\}}", "x = 5, y = 6"),
    (r"\boxed{y = 6, x = 5}", "x = 5, y = 6"),
    (r"\boxed{\{3, 2\}}", "x = 2, x = 3"),
    # a declared order, (x, y) = ...: named answers in any order, plain values in that order
    (r"\boxed{y = 6, x = 5}", "(x, y) = (5, 6)"),
    (r"\boxed{(5, 6)}", "(x, y) = (5, 6)"),
    (r"\boxed{(y, x) = (6, 5)}", "(x, y) = (5, 6)"),
    (r"\boxed{(x, y) = (5, 6)}", "y = 6, x = 5"),
    (r"\boxed{x = 5, y = 6}", "(5, 6)"),
    # roots with multiplicity: each value as many times, in any order
    (r"\boxed{3, 2, 2}", "2, 2, 3"),
    (r"\boxed{x = 2, x = 3, x = 2}", r"\{2, 2, 3\}"),
    (r"\boxed{\left(-\infty, 2\right)}", r"(-\infty, 2)"),
    (r"\boxed{1, k}", "(1, k)"),  # (1, k) may be a point: its ends are finite
    (r"\boxed{\approx 2.5}", "2.5"),  # a leading \approx or \sim is dropped
    (r"\boxed{\sim 5}", "5"),
]

WRONG = [
    (r"\boxed{0.7}", "3/4"),
    (r"\boxed{(0,1)}", "(0, 1]"),
    (r"\boxed{[0,1]}", "(0, 1]"),
    (r"\boxed{\{1,2,3\}}", r"\{1, 2\}"),
    (r"\boxed{4}", "-4"),
    (r"\boxed{x^2+2x}", "x^2+2x+1"),
    (r"\boxed{1000}", "10000"),
    (r"\boxed{0.707}", r"\frac{\sqrt{2}}{2}"),
    # math-verify rounds decimals to 6 places and keeps 15 digits of them
    (r"\boxed{0.0}", r"\frac{1}{2^{30}}"),
    (r"\boxed{-0.0000004}", r"\frac{3}{10^7}"),
    (r"\boxed{0.000001}", r"\frac{1}{1024^2}"),
    (r"\boxed{18446744073709551615 + 0.0}", "18446744073709551616"),
    (r"\boxed{2^{64} + 1000 + 0.0}", "2^{64}"),
    (r"\boxed{20! + 1.0}", "2432902008176640000"),
    # ... a percentage sign skipped the check that closes those two (it is read both ways now)
    (r"\boxed{18446744073709551615 + 0.0 + 0\%}", "18446744073709551616"),
    (r"\boxed{0.00001\%}", r"\frac{1}{2^{30}}"),
    # ... and inside an equation, a set, an interval or a matrix (math-verify compares each pair)
    (r"\boxed{p = 0.0}", r"\frac{1}{2^{30}}"),
    (r"\boxed{\{0.0\}}", r"\frac{1}{2^{30}}"),
    (r"\boxed{(0.0, 1)}", r"\left(\frac{1}{2^{30}}, 1\right)"),
    (
        r"\boxed{\begin{pmatrix} 0.0 \\ 1 \end{pmatrix}}",
        r"\begin{pmatrix} 2^{-30} \\ 1 \end{pmatrix}",
    ),
    (r"\boxed{x = 18446744073709551615 + 0.0}", "18446744073709551616"),
    (r"\boxed{\{2^{64} - 1 + 0.0\}}", r"\{2^{64}\}"),  # SymPy's set equality rounded too
    (r"\boxed{\{2^{64} - 1 + 0.0, 1\}}", "2^{64}, 1"),
    (r"\boxed{\{2^{64} - 1 + 0.0\}}", "2^{64}"),
    # swapped coordinates: math-verify sorted both lists before pairing them
    (r"\boxed{(6, 5)}", "x = 5, y = 6"),
    (r"\boxed{6, 5}", "x = 5, y = 6"),
    (r"\boxed{x = 6, y = 5}", "x = 5, y = 6"),
    (r"\boxed{(1, 3, 2)}", "a = 1, b = 2, c = 3"),
    # ... and (x, y) = (5, 6) was an equation whose sides were compared in written order
    (r"\boxed{y = 5, x = 6}", "(x, y) = (5, 6)"),
    (r"\boxed{(6, 5)}", "y = 6, x = 5"),  # y = 6, x = 5 listed as the gold writes it, or x, y?
    (r"\boxed{(5, 6)}", "y = 6, x = 5"),
    (r"\boxed{x = 6, y = 5}", "(5, 6)"),
    # a gold list that repeats a root: a set drops repeats, so math-verify paid these
    (r"\boxed{2, 3}", "2, 2, 3"),
    (r"\boxed{\{2, 3\}}", "2, 2, 3"),
    (r"\boxed{2, 3, 3}", "2, 2, 3"),
    (r"\boxed{2}", "2, 2"),
    # an interval with an infinite end read as the pair of its ends
    (r"\boxed{-\infty, 2}", r"(-\infty, 2)"),
    (r"\boxed{\{-\infty, 2\}}", r"(-\infty, 2)"),
    (r"\boxed{2, \infty}", r"(2, \infty)"),
    (r"\boxed{(-\infty, 2)}", r"-\infty, 2"),
    (r"\boxed{x = 1,000}", "1, 0"),  # thousands commas in an assignment read as a list
    # LaTeX math-verify cannot parse: its fallback took the last number in it (negations too)
    (r"\boxed{x \not= 5}", "x = 5"),
    (r"\boxed{\neg (x = 5)}", "5"),
    (r"\boxed{x \not< 5}", "5"),
    (r"\boxed{\ne 5}", "5"),
    (r"\boxed{\therefore 5}", "5"),
    (r"\boxed{\textminus 3}", "3"),
    (r"\boxed{\lbrace 1, 2\rbrace}", "2"),
    (r"\boxed{x**2 + 1}", "1"),
]

NO_ANSWER = [
    "",
    "I am not sure.",
    "Let me think about 3/4 for a while",
    r"\boxed{3/4",
    "<think>\\boxed{3/4}</think>",
    "<think>maybe \\boxed{3/4}? let me check 5/6 and",  # reasoning that never ended
    "<think>a</think> <think>so \\boxed{3/4}",
]


@pytest.mark.parametrize(("completion", "gold"), EQUIVALENT)
def test_equivalent_answers_score_correct(completion, gold):
    assert math_verifier(completion, gold, **ETR) == 1.0


@pytest.mark.parametrize(("completion", "gold"), WRONG)
def test_wrong_answers_score_wrong(completion, gold):
    assert math_verifier(completion, gold, **ETR) == -1.0
    assert math_verifier(completion, gold) == 0.0


@pytest.mark.parametrize("completion", NO_ANSWER)
def test_no_answer_scores_wrong(completion):
    assert math_verifier(completion, "3/4", **ETR) == -1.0


GOLD_FORMATS = {
    r"\frac{3}{4}": ["3/4", r"\dfrac{3}{4}", "0.75", r"\frac34"],
    "-12": ["-12", "-12.0", r"-\frac{24}{2}"],
    "(0, 1]": [r"\left(0,1\right]", "(0,1]"],
    r"\{1, 2\}": [r"\{2,1\}", "1, 2"],
    r"2\sqrt{3}": [r"\sqrt{12}", r"2 \sqrt 3"],
    "10000": ["10,000", "10{,}000", "10^4", "10^{4}"],
}


@pytest.mark.parametrize("gold", sorted(GOLD_FORMATS))
def test_gold_verifies_against_itself_in_other_formats(gold):
    for other in [gold, *GOLD_FORMATS[gold]]:
        for completion in (rf"\boxed{{{other}}}", f"The answer is ${other}$.", f"Answer: {other}"):
            assert math_verifier(completion, gold) == 1.0, (completion, gold)
        assert answers_match(gold, other), (gold, other)


def test_reference_may_be_a_number_a_boxed_solution_or_an_entry():
    assert math_verifier(r"\boxed{27}", 27.0) == 1.0
    assert math_verifier(r"\boxed{27}", r"so the total is $\boxed{27}$.") == 1.0
    assert math_verifier(r"\boxed{27}", {"answer": "27", "metadata": {}}) == 1.0


def test_answer_after_think_wins_over_the_reasoning():
    assert math_verifier(r"<think>maybe \boxed{5}</think> so \boxed{6}", "6") == 1.0
    assert math_verifier(r"<think>maybe \boxed{6}</think> so \boxed{5}", "6") == 0.0


def test_math_verifier_runs_on_worker_threads():
    cases = [(c, g, 1.0) for c, g in EQUIVALENT[:8]] + [(c, g, 0.0) for c, g in WRONG[:4]]
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda case: math_verifier(case[0], case[1]), cases))
    assert got == [expected for *_, expected in cases]


def test_scorer_on_a_worker_thread_enforces_its_limit():
    from verifier_helpers import spin

    from rlvr.rewards.registry import Verifier

    verifier = Verifier(spec="spin", fn=spin, failure_value=-1.0)
    with ThreadPoolExecutor(max_workers=1) as pool:
        scores = pool.submit(
            score_completions, verifier, ["x", "y"], ["1", "1"], timeout_s=0.2
        ).result()
    assert scores.values == [-1.0, -1.0]
    assert scores.timeouts == 2 and scores.failures == 0
    with ThreadPoolExecutor(max_workers=1) as pool:
        scores = pool.submit(score_completions, "math", [r"\boxed{1/2}"], ["0.5"]).result()
    assert scores.values == [1.0] and scores.status == ["ok"]


def test_pathological_input_is_rejected_at_once_and_counted():
    # 9^(9^9) has ~370 million digits: the verifier cuts it off before SymPy sees it, in
    # the worker as anywhere else, and counts it; the worker is not killed.
    verifier = get_verifier("math", **ETR)
    completions = [r"\boxed{9^{9^{9}}}", r"\boxed{2}", r"\boxed{3}"]
    with Scorer(verifier, ScoringConfig(timeout_s=1.0, workers=1, kill_grace_s=0.5)) as scorer:
        scores = scorer(completions, ["2", "2", "2"])
        assert scores.status == ["ok", "ok", "ok"]
        assert scores.values == [-1.0, 1.0, -1.0]
        assert scores.event_count("math_rejected") == 1
        assert scores.timeouts == 0 and scores.failures == 0


def test_long_c_call_in_a_worker_is_killed_and_counted_as_a_timeout():
    # One C call that no in-thread limit interrupts: the worker process is killed instead.
    from verifier_helpers import huge_power

    from rlvr.rewards.registry import Verifier

    verifier = Verifier(spec="huge_power", fn=huge_power, failure_value=-1.0)
    with Scorer(verifier, ScoringConfig(timeout_s=1.0, workers=1, kill_grace_s=0.5)) as scorer:
        scores = scorer(["9", "small", "small"], ["", "", ""])
        assert scores.status == ["timeout", "ok", "ok"]
        assert scores.values == [-1.0, 1.0, 1.0]
        assert scores.timeouts == 1 and scores.failures == 0
        assert scorer(["small"], [""]).values == [1.0]  # the replacement worker works


# --- one final answer; pathological answers cut off by the verifier itself -----------------
def test_different_boxed_answers_are_a_hedge_and_counted():
    completions = [
        r"\boxed{3} or maybe \boxed{4}",  # hedges: wrong although 4 is right
        r"first \boxed{4}, and to be sure \boxed{ 4 }",  # the same answer twice
        r"\boxed{\dfrac{1}{2}} i.e. \boxed{\frac12}",  # a different spelling is a hedge
        r"<answer>4</answer> <answer>5</answer>",
        r"\boxed{\left(1, 2\right)} so \boxed{(1,2)}",  # same up to \left/\right and spaces
    ]
    scores = score_completions(
        get_verifier("math", **ETR), completions, ["4", "4", "1/2", "4", "(1, 2)"]
    )
    assert scores.values == [-1.0, 1.0, -1.0, -1.0, 1.0]
    assert scores.event_count("math_hedged") == 3
    assert scores.metrics()["verifier/math_hedged"] == 3.0
    assert scores.status == ["ok"] * 5


ONE_BOX_HEDGES = [
    r"{a}, {b}",
    r"{a}; {b}",
    r"{a} \\ {b}",
    r"\begin{{cases}} {a} \\ {b} \end{{cases}}",
    r"\begin{{aligned}} {a} \\ {b} \end{{aligned}}",
    r"{a} = {b}",
    r"{a} \text{{ or }} {b}",
    r"\{{{a}, {b}\}}",
    r"{a} \lor {b}",
    r"{a} \cup {b}",
    r"[{a}, {b}]",
    r"{a} \vee {b}",
    r"{a} \approx {b}",
    r"{a} \Rightarrow {b}",
    r"{a} \text{{ (or }} {b})",
    r"x = {a} \text{{ or }} {b}",
    r"\{{{a}\}} \cup \{{{b}\}}",
    # red team 2026-11-29: each read as one value at most (or as text, paid for neither)
    r"{a} < x < {b}",
    r"x \in \{{{a}, {b}\}}",
    r"\text{{either {a} or {b}}}",
    r"{a} \quad {b}",
    r"{a}~{b}",
    r"{a} \mid {b}",
    r"{a} \mbox{{ or }} {b}",
    r"\color{{red}}{a} \color{{blue}}{b}",
    r"\overset{{{a}}}{{{b}}}",
    r"{a}_{b}",
    r"{b} \text{{{a}}}",
    r"\boxed{{{a}}}, \boxed{{{b}}}",
    r"{a} \boxed{{{b}}}",
]


@pytest.mark.parametrize("form", ONE_BOX_HEDGES)
def test_two_answers_in_one_box_are_paid_for_one_of_them_at_most(form):
    """A list, set, system or equation of two candidates in one box never pays for both: a
    policy cannot hedge inside the box either (math-verify grades a list or an equation by
    its last value, and sets and intervals as wholes)."""
    boxed = "\\boxed{" + form.format(a=5, b=6) + "}"
    paid = [math_verifier(boxed, gold) for gold in ("5", "6")]
    assert sum(paid) <= 1.0, (boxed, paid)


TWO_ANSWERS_WITHOUT_A_BOX = [
    "The answer is $5$ or $6$.",
    r"The answer is \(5\) or \(6\)",
    "Answer: **5** or **6**",
    "<answer>5 or 6</answer>",
    "<answer>$5$, so $6$</answer>",
    "<answer>5\n6</answer>",
    "The answer is 5} \\boxed{6",  # an unclosed box: the phrase is the answer
]


@pytest.mark.parametrize("completion", TWO_ANSWERS_WITHOUT_A_BOX)
def test_two_answers_after_a_phrase_or_in_a_tag_are_paid_for_neither(completion):
    assert [math_verifier(completion, gold) for gold in ("5", "6")] == [0.0, 0.0]


PATHOLOGICAL = [
    r"\boxed{10^{10^{10^{10}}}}",  # a tower: SymPy would never return
    r"\boxed{9^{9^{9}}}",
    r"\boxed{2^{2^{20}}}",  # 315,653 digits
    r"\boxed{9^{123456789}}",
    r"\boxed{0.5^{100000000}}",
    r"\boxed{1000000!}",
    r"\boxed{" + "9" * 500 + "}",  # a 500-digit number
    r"\boxed{" + "x+" * 1000 + "1}",  # thousands of characters
    r"\boxed{" + "(" * 40 + "1" + ")" * 40 + "}",  # deep nesting
    r"The answer is 2**3**4**5",
]


@pytest.mark.parametrize("completion", PATHOLOGICAL)
def test_pathological_answer_is_cut_off_by_a_plain_call(completion):
    # Called as TRL calls a reward function: on a worker thread, no Scorer around it. Timed
    # on the clock too: a call that holds the GIL would keep the timeout from firing.
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(math_verifier, completion, "8", wrong=-1.0)
        assert future.result(timeout=2.0) == -1.0
    assert time.monotonic() - started < 2.0


# Text after an answer that made finding it quadratic: 20,000 unclosed <answer> tags (about
# 20 s), "The answer is" then 40,000 newlines (about 13 s). The answer before it still counts.
SLOW_TO_SEARCH = ["<answer>" * 20_000, "The answer is" + "\n" * 40_000]


@pytest.mark.parametrize("junk", SLOW_TO_SEARCH, ids=["unclosed-tags", "newlines"])
@pytest.mark.parametrize("answer", ["<answer>8</answer>", "The answer is 8.", "I give up."])
def test_answer_search_takes_linear_time(answer, junk):
    # Timed on the clock: a regex holds the GIL, so a future's timeout would not fire.
    started = time.monotonic()
    score = math_verifier(answer + "\n" + junk, "8", wrong=-1.0)
    assert time.monotonic() - started < 2.0
    assert score == (-1.0 if answer == "I give up." else 1.0)


def test_pathological_answers_are_counted_as_rejected():
    completions = [*PATHOLOGICAL[:3], r"\boxed{8}"]
    scores = score_completions("math", completions, ["8"] * 4, timeout_s=None)
    assert scores.values == [0.0, 0.0, 0.0, 1.0]
    assert scores.event_count("math_rejected") == 3
    assert scores.failures == 0 and scores.timeouts == 0


def test_slow_comparison_is_cut_off_inside_the_verifier():
    # Passes the screen, but expanding the power takes SymPy far longer than the limit.
    started = time.monotonic()
    scores = score_completions(
        get_verifier("math", compare_timeout_s=1.0),
        [r"\boxed{(x+1)^{3000}}"],
        ["3"],
        timeout_s=None,
    )
    assert time.monotonic() - started < 4.0
    assert scores.values == [0.0] and scores.event_count("math_rejected") == 1
    assert math_verifier(r"\boxed{3}", "3", compare_timeout_s=1.0) == 1.0  # the next call works


@pytest.mark.parametrize(
    ("answer", "allowed"),
    [
        (r"\frac{3}{4}", True),
        (r"2^{10}", True),
        (r"2^{2^{2}}", True),
        (r"(2^3)^4", True),
        (r"x^{2}+y^{2}", True),
        (r"e^{i\pi}", True),
        (r"10^{100}", True),
        (r"2**3**4", True),
        ("1" * 200, True),
        ("1" * 201, False),
        (r"2^{2^{2^{2}}}", False),
        (r"x^{y^{z}}", True),
        (r"x^{y^{z^{w}}}", False),
        (r"10^{1000000}", False),
        (r"20000!", False),
        ("1+" * 600, False),
    ],
)
def test_screen_answer(answer, allowed):
    assert (screen_answer(answer) is None) is allowed


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("3 + 4 = 7", "7"),
        ("It costs $1,234.50 in total.", "1234.50"),
        ("1,2,3", "3"),
        ("x = -12.", "-12"),
        (r"so \boxed{42}", "42"),
        ("1,2500", "2500"),
        ("<think>7</think>none", None),
        ("", None),
    ],
)
def test_last_number(text, number):
    from rlvr.rewards.extract import last_number

    assert last_number(text) == number


def test_math_flexible_extract():
    from rlvr.rewards import get_verifier

    flexible = get_verifier("math", extract="flexible")
    assert flexible("Total: 1,000 + 250 = 1,250", "1250") == 1.0
    assert get_verifier("math")("Total: 1,000 + 250 = 1,250", "1250") == 0.0
    assert flexible("no digits", "3") == 0.0


@pytest.mark.parametrize(
    "reference",
    [
        ["2"],
        ("2", "two"),
        True,
        {"value": "2"},
        None,
        {"answer": None},
        {"answer": ["2"]},
        float("nan"),  # a gap in a pandas column
        {"answer": float("nan")},
        " NaN ",
    ],
)
def test_a_reference_that_is_not_one_answer_is_an_error(reference):
    """A list answer column (`["2"]`) was compared as its text, "['2']", so every completion
    scored wrong and a run trained on zero rewards without a word; it is now a verifier
    error, which `rlvr eval` and training report. A missing answer read as NaN paid
    `\\boxed{nan}` (its text) on every such row."""
    with pytest.raises(ValueError, match="is not one answer"):
        math_verifier(r"\boxed{nan}", reference)
    with pytest.raises(ValueError, match="is not one answer"):
        math_verifier(r"\boxed{2}", reference)
    with pytest.raises(ValueError, match="is not one answer"):  # str(None) paid \boxed{None}
        math_verifier(r"\boxed{None}", reference)
    assert math_verifier(r"\boxed{2}", {"answer": "2"}) == 1.0


def test_a_solution_boxing_different_answers_is_no_reference():
    """A MATH-style solution with two different boxes took its last one as the gold, so a
    completion was paid or not by which box came last; it is now a verifier error (no gold)."""
    solution = r"First $\boxed{3}$; on checking, the answer is $\boxed{5}$."
    for completion in (r"\boxed{5}", r"\boxed{3}"):
        with pytest.raises(ValueError, match="boxes different answers"):
            math_verifier(completion, solution)
    scores = score_completions("math", [r"\boxed{5}"], [solution], timeout_s=None)
    assert scores.values == [0.0] and scores.failures == 1
    assert math_verifier(r"\boxed{5}", r"$\boxed{5}$, i.e. \boxed{ 5 }") == 1.0  # one answer


@pytest.mark.parametrize(
    ("number", "written", "misread"),
    [
        (1e-05, "0.00001", "e - 5"),
        (1e20, "100000000000000000000", "e + 20"),
        (2.5e-07, "0.00000025", "2.5 e - 7"),
    ],
)
def test_a_float_reference_is_its_decimal_not_eulers_e(number, written, misread):
    """``str(1e-05)`` is ``1e-05`` (as a float column written as text holds it), which
    math-verify reads as Euler's e minus 5: ``e - 5`` was paid for 0.00001, ``0.00001`` not."""
    import numpy as np

    for reference in (number, np.float64(number), str(number), {"answer": str(number)}):
        assert math_verifier(rf"\boxed{{{written}}}", reference) == 1.0
        assert math_verifier(rf"\boxed{{{misread}}}", reference) == 0.0


def test_answers_the_verifier_calls_equal_share_an_answer_key():
    """maj@k's votes: spellings of one value are one key, other values other keys."""
    key = get_verifier("math").answer_key
    spellings = [r"\boxed{3/4}", r"\boxed{\dfrac{3}{4}}", "The answer is 0.75", r"\boxed{75\%}"]
    assert {key(c, "0.75") for c in spellings} == {"0.750000000000"}
    assert key(r"\boxed{10^4}", "1") == key("Answer: 10,000", "1") == key(r"\boxed{x = 10000}", "1")
    assert key(r"\boxed{\{3, 2\}}", "1") == key(r"\boxed{x = 2 \text{ or } x = 3}", "1")
    assert key(r"\boxed{\frac{1}{\sqrt2}}", "1") == key(r"\boxed{\frac{\sqrt{2}}{2}}", "1")
    different = [r"\boxed{2^{64}}", r"\boxed{2^{64} - 1}", r"\boxed{0.5}", r"\boxed{0.6}",
                 r"\boxed{(0, 1]}", r"\boxed{(0, 1)}", r"\boxed{\{1, 2\}}", r"\boxed{\{1, 3\}}"]  # fmt: skip
    assert len({key(c, "1") for c in different}) == len(different)
    # no answer, or several (a hedge): no vote; one cut off unparsed is its spelling
    assert key("no idea", "1") is None and key(r"\boxed{3} or \boxed{4}", "1") is None
    assert key(r"\boxed{9^{9^{9^{9}}}}", "1") == "text:9^{9^{9^{9}}}"
    assert get_verifier("math", extract="flexible").answer_key("3, or maybe 4", "4") == "4"


def test_the_answer_key_splits_answers_equal_only_within_the_verifiers_tolerance():
    """Documented (docs/evaluation.md): the key is exact where the verifier is not."""
    key = get_verifier("math").answer_key
    assert answers_match("0.333333", r"\frac13")
    assert key(r"\boxed{0.333333}", "1") != key(r"\boxed{\frac13}", "1")
    assert answers_match("(x+1)^2", "x^2+2x+1")
    assert key(r"\boxed{(x+1)^2}", "1") != key(r"\boxed{x^2+2x+1}", "1")
    from rlvr.rewards.math import canonical_answer, gold_answer

    shared = [key(c, g) == canonical_answer(gold_answer(g)) for c, g in EQUIVALENT]
    assert (sum(shared), len(shared)) == (39, 55)  # the count docs/evaluation.md gives
