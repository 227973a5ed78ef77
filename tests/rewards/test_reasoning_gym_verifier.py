"""reasoning-gym verifiers on generated task sets: gold answers score 1, wrong ones 0."""

from __future__ import annotations

import json
import time

import pytest

from rlvr.data import gym_rows, load_examples, write_jsonl
from rlvr.rewards import Scorer, ScoringConfig, get_verifier
from rlvr.rewards.reasoning_gym import reasoning_gym_verifier

TASKS = ["chain_sum", "basic_arithmetic", "gsm_symbolic", "countdown", "leg_counting"]


@pytest.fixture(scope="module")
def task_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("gym")
    paths = {}
    for task in TASKS:
        paths[task] = root / f"{task}.jsonl"
        write_jsonl(gym_rows(task, size=4, seed=11), paths[task])
    return paths


@pytest.mark.parametrize("task", TASKS)
def test_gold_scores_one_and_wrong_scores_zero(task, task_files):
    examples = load_examples(str(task_files[task]), fields="reasoning_gym")
    for spec in (f"reasoning_gym:{task}", "reasoning_gym"):
        verifier = get_verifier(spec)
        for ex in examples:
            gold = ex.reference["answer"]
            assert verifier(f"<answer>{gold}</answer>", ex.reference) == 1.0
            assert verifier(f"<think>work</think>\\boxed{{{gold}}}", ex.reference) == 1.0
            assert verifier("<answer>99999999</answer>", ex.reference) == 0.0
            assert verifier("", ex.reference) == 0.0


def test_reward_pair_and_partial_credit():
    entry = gym_rows("gsm_symbolic", size=1, seed=3)[0]
    wrong = str(int(entry["answer"]) + 1)
    assert reasoning_gym_verifier(f"<answer>{wrong}</answer>", entry, wrong=-1.0) == -1.0
    partial = reasoning_gym_verifier(f"<answer>{wrong}</answer>", entry, binary=False)
    assert 0.0 < partial < 1.0  # gsm_symbolic's near-miss credit, passed through
    assert reasoning_gym_verifier(entry["answer"], entry, binary=False) == 1.0


def test_missing_task_is_a_counted_failure():
    with Scorer("reasoning_gym") as scorer:  # one worker process by default
        scores = scorer(["<answer>3</answer>"], ["3"])  # bare answer, no task
    assert scores.status == ["error"] and "no task" in scores.errors[0]
    with pytest.raises(ValueError, match="unknown reasoning-gym task"):
        get_verifier("reasoning_gym:no_such_task")("x", "1")


BIG = "1" + "0" * 400  # a count of days past float range: 0.1.25's scorers divide by it


@pytest.mark.parametrize(
    ("task", "kind", "answer"),
    [
        ("boxnet", None, "5"),  # TypeError: 'int' object is not iterable
        ("prime_factorization", None, "abc"),  # ValueError: int('abc')
        ("calendar_arithmetic", ("task", "count_days"), BIG),  # OverflowError
        ("time_intervals", ("task_type", "date"), f"{BIG} days"),  # OverflowError
    ],
)
def test_an_answer_the_scorer_raises_on_is_wrong_not_a_verifier_failure(task, kind, answer):
    """reasoning-gym's scorer raising on the policy's answer was counted in verifier/failures
    (and warned about as the verifier failing); the entry's own answer scores, so the answer
    is at fault: it scores wrong, counted as verifier/reasoning_gym_unreadable."""
    rows = gym_rows(task, size=30, seed=1)
    entry = next(r for r in rows if kind is None or r["metadata"][kind[0]] == kind[1])
    scores = Scorer(get_verifier("reasoning_gym", wrong=-1.0), ScoringConfig(workers=0))(
        [f"<answer>{answer}</answer>"], [entry]
    )
    assert (scores.values, scores.status) == ([-1.0], ["ok"]), scores.errors
    metrics = scores.metrics()
    assert (metrics["verifier/failures"], metrics["verifier/reasoning_gym_unreadable"]) == (0, 1)
    bare = Scorer("reasoning_gym:calendar_arithmetic", ScoringConfig(workers=0))(["12"], ["12"])
    assert bare.errors == ["KeyError: 'task'"]  # the reference is at fault: still a failure


def test_flexible_extract_scores_the_last_number_and_strict_stays_default():
    from rlvr.rewards import get_verifier

    entry = {"question": "4 - 1 - 7 =", "answer": "-4", "metadata": {"source_dataset": "chain_sum"}}
    strict = get_verifier("reasoning_gym:chain_sum")
    flexible = get_verifier("reasoning_gym:chain_sum", extract="flexible")
    assert strict("4 - 1 = 3, 3 - 7 = -4", entry) == 0.0  # no answer by the strict rules
    assert flexible("4 - 1 = 3, 3 - 7 = -4", entry) == 1.0
    assert flexible("The answer is -4. Check: 4 - 1 - 7 = -3", entry) == 0.0  # last number wins
    assert strict("The answer is -4. Check: 4 - 1 - 7 = -3", entry) == 1.0
    assert flexible("<think>-4</think> no number here", entry) == 0.0
    with pytest.raises(ValueError, match="extract must be one of"):
        get_verifier("reasoning_gym:chain_sum", extract="loose")("-4", entry)


def test_flexible_extract_without_a_number_scores_wrong_even_on_text_tasks():
    """Strict falls back to the whole text; flexible means "the last number" and nothing else."""
    from rlvr.rewards import get_verifier

    entry = {
        "question": "Spell backward: sun",
        "answer": "nus",
        "metadata": {"source_dataset": "spell_backward"},
    }
    assert get_verifier("reasoning_gym")("nus", entry) == 1.0
    assert get_verifier("reasoning_gym", extract="flexible", wrong=-1.0)("nus", entry) == -1.0


def test_answer_search_takes_linear_time():
    # 20,000 unclosed <answer> tags after the answer took about 20 s to search (test_math_verifier).
    completion = "<answer>-4</answer>" + "<answer>" * 20_000
    started = time.monotonic()
    assert reasoning_gym_verifier(completion, "-4", task="chain_sum") == 1.0
    assert time.monotonic() - started < 2.0


def test_game_of_life_halting_pays_only_the_right_verdict():
    # reasoning-gym's own scorer compares bool(answer) == bool(entry["answer"]): any text paid.
    verifier = get_verifier("reasoning_gym:game_of_life_halting")
    for row in gym_rows("game_of_life_halting", size=4, seed=3):
        right = row["answer"]
        other = "False" if right == "True" else "True"
        assert verifier(f"<answer>{right}</answer>", row) == 1.0
        assert verifier(f"<answer>{right.lower()}</answer>", row) == 1.0
        assert verifier(f"<answer>{other}</answer>", row) == 0.0
        assert verifier("<answer>banana</answer>", row) == 0.0


def test_coin_flip_does_not_pay_a_prefix_of_the_probability():
    # reasoning-gym's own scorer divides the matching prefix by the shorter string: "0" and
    # "0.1" both got full credit for 0.109375.
    entry = {"question": "?", "answer": "0.109375", "metadata": {"source_dataset": "coin_flip"}}
    verifier = get_verifier("reasoning_gym")
    for answer in ("0.109375", "7/64", "0.1094"):  # within reasoning-gym's 1e-4
        assert verifier(f"<answer>{answer}</answer>", entry) == 1.0
    for answer in ("0", "0.1", "0.10", "banana", "", "1e309", "1/0"):  # 1e309: no OverflowError
        assert verifier(f"<answer>{answer}</answer>", entry) == 0.0
    partial = get_verifier("reasoning_gym", binary=False)
    assert partial("<answer>0</answer>", entry) == pytest.approx(
        1 / 8, abs=1e-12
    )  # "0" of "0.109375"
    assert partial("<answer>0.1</answer>", entry) == pytest.approx(3 / 8, abs=1e-12)


def test_coin_flip_does_not_pay_zero_for_a_small_probability():
    # within 1e-4 alone, "0" (and twice the probability) was paid for 15 heads in 15 flips
    entry = {"question": "?", "answer": str(0.5**15), "metadata": {"source_dataset": "coin_flip"}}
    verifier = get_verifier("reasoning_gym")
    for answer in (str(0.5**15), "1/32768", "0.0000305"):  # exact, or 0.06% off
        assert verifier(f"<answer>{answer}</answer>", entry) == 1.0
    for answer in ("0", "0.00005", "1/16384", "0.00003"):  # 1.7% off and worse
        assert verifier(f"<answer>{answer}</answer>", entry) == 0.0


def test_an_entry_stored_as_json_text_is_read_not_scored_as_the_answer():
    # A dataset column holding the entry as text (a Parquet string column, a TRL reward's
    # ``reference``) scored every answer 0, the whole text taken as the gold answer.
    entry = {"question": "4 - 1 - 7 =", "answer": "-4", "metadata": {"source_dataset": "chain_sum"}}
    text = json.dumps(entry)
    verifier = get_verifier("reasoning_gym")  # the task from the entry's metadata
    assert verifier("<answer>-4</answer>", text) == 1.0
    assert verifier("<answer>4</answer>", text) == 0.0
    # Text that is not an entry's JSON stays a bare answer (and pays the same answer).
    assert reasoning_gym_verifier("<answer>{1}</answer>", "{1}", task="chain_sum") == 1.0
    assert reasoning_gym_verifier('<answer>{"a": 1}</answer>', '{"a": 1}', task="chain_sum") == 1.0


def _arithmetic_entry(task: str, numbers: list[int], target: int) -> dict:
    metadata = {"source_dataset": task, "numbers": numbers, "target": target}
    return {"question": "?", "answer": "?", "metadata": metadata}


@pytest.mark.parametrize(
    ("task", "numbers", "target", "answer"),
    [
        ("countdown", [6, 61, 94, 4], 309, "94*4 - 61 - 6*len('a')"),  # Python functions
        ("countdown", [6, 61, 94, 4], 309, "6*61*94*4*(E-E) + len('" + "a" * 309 + "')"),
        ("countdown", [2, 3, 10], 80, "10*2**3"),  # a power, not among + - * /
        ("countdown", [999, 999, 1000], 1000, "999 + 999/1000"),  # within np.isclose's rtol
        ("puzzle24", [8, 5, 10, 6], 24, "6*4*1*1"),  # any four numbers from 1 to 10 were paid
        ("puzzle24", [3, 4, 7, 9], 24, "(3+(4/9))*7"),  # 217/9, truncated to 24 by int()
        ("puzzle24", [3, 4, 7, 9], 24, "3*(9-7//4)"),  # floor division
    ],
)
def test_arithmetic_games_pay_only_an_exact_expression_of_the_given_numbers(
    task, numbers, target, answer
):
    """reasoning-gym's countdown and puzzle24 scorers run the answer through sympy's
    parse_expr (any Python call), compare within a tolerance or after int(), and puzzle24 never
    checks which numbers were used: each answer here scored 1.0."""
    entry = _arithmetic_entry(task, numbers, target)
    assert get_verifier(f"reasoning_gym:{task}")(f"<answer>{answer}</answer>", entry) == 0.0


@pytest.mark.parametrize(
    ("task", "numbers", "answer"),
    [
        ("puzzle24", [6, 4, 1, 1], "(6)(4)(1)(1)"),  # calls a Fraction
        ("countdown", [6, 61], "6 + 61 + " + "9" * 5000),  # beyond int()'s 4300 digits
    ],
)
def test_arithmetic_games_score_an_unreadable_expression_zero(task, numbers, answer):
    # rlvr's own scorer raised (TypeError, ValueError): a verifier failure, not a score
    entry = _arithmetic_entry(task, numbers, 24 if task == "puzzle24" else 67)
    assert get_verifier(f"reasoning_gym:{task}")(f"<answer>{answer}</answer>", entry) == 0.0


def test_arithmetic_games_still_pay_right_expressions():
    verifier = get_verifier("reasoning_gym")
    assert (
        verifier(
            "<answer>94*4 - 61 - 6</answer>", _arithmetic_entry("countdown", [6, 61, 94, 4], 309)
        )
        == 1.0
    )
    assert (
        verifier(
            "<answer>(8 - 5) * 10 - 6</answer>", _arithmetic_entry("puzzle24", [8, 5, 10, 6], 24)
        )
        == 1.0
    )
    assert (
        verifier("<answer>6 / (1 - 3/4)</answer>", _arithmetic_entry("puzzle24", [3, 4, 6, 1], 24))
        == 1.0
    )
    for task in ("countdown", "puzzle24"):
        for row in gym_rows(task, size=20, seed=5):
            assert verifier(f"<think>ok</think><answer>{row['answer']}</answer>", row) == 1.0


EVALUATING_TASKS = [
    "binary_matrix",
    "countdown",
    "intermediate_integration",
    "n_queens",
    "polynomial_multiplication",
    "puzzle24",
    "simple_integration",
    "spiral_matrix",
    "string_insertion",
]


@pytest.mark.parametrize("task", EVALUATING_TASKS)
def test_a_completion_is_never_run_as_python(task, tmp_path):
    """These tasks' reasoning-gym scorers hand the answer to eval() or sympy's parse_expr:
    the code in a completion ran in the verifier's process."""
    flag = tmp_path / "ran"
    row = gym_rows(task, size=1, seed=1)[0]
    completion = f"<answer>__import__('pathlib').Path({str(flag)!r}).touch()</answer>"
    assert get_verifier("reasoning_gym", binary=False)(completion, row) <= 0.01
    assert not flag.exists()
    assert get_verifier("reasoning_gym")(f"<answer>{row['answer']}</answer>", row) == 1.0


def test_an_eval_scorer_does_not_read_its_own_answer():
    # spiral_matrix's eval() saw its locals: "oracle_answer.split()" earned 0.1 under binary=False
    row = gym_rows("spiral_matrix", size=1, seed=1)[0]
    partial = get_verifier("reasoning_gym", binary=False)
    assert partial("<answer>oracle_answer.split()</answer>", row) == 0.0
    as_list = "[" + ", ".join(row["answer"].split()) + "]"  # the answer as a Python list
    assert partial(f"<answer>{as_list}</answer>", row) == pytest.approx(0.1)


@pytest.mark.parametrize("task", ["simple_integration", "intermediate_integration"])
def test_integration_does_not_pay_the_question_restated(task):
    verifier = get_verifier(f"reasoning_gym:{task}")
    for row in gym_rows(task, size=5, seed=2):
        integrand, x = row["metadata"]["integrand"], row["metadata"]["variable"]
        for answer in (f"Integral({integrand}, {x}) + C", f"integrate({integrand}, {x}) + C"):
            assert verifier(f"<answer>{answer}</answer>", row) == 0.0
        if "Integral" not in row["answer"]:  # some gold answers are sympy's unevaluated Integral
            assert verifier(f"<answer>{row['answer']}</answer>", row) == 1.0


def test_polynomial_multiplication_does_not_pay_expand():
    verifier = get_verifier("reasoning_gym:polynomial_multiplication")
    for row in gym_rows("polynomial_multiplication", size=5, seed=2):
        product = row["metadata"]["polynomial_expr"]
        assert verifier(f"<answer>expand({product})</answer>", row) == 0.0
        assert verifier(f"<answer>{row['answer']}</answer>", row) == 1.0


@pytest.mark.parametrize(
    "completion",
    [r"\boxed{-127} or \boxed{-128}", "<answer>-127</answer> <answer>-128</answer>"],
)
def test_several_different_answers_are_a_hedge_as_for_math(completion):
    # the last box or tag was scored, so a wrong answer then the right one was paid
    entry = {"answer": "-128", "metadata": {"source_dataset": "chain_sum"}}
    assert get_verifier("reasoning_gym", binary=False)(completion, entry) == 0.0
    assert get_verifier("reasoning_gym")(completion.replace("127", "128"), entry) == 1.0
    scores = Scorer(get_verifier("reasoning_gym"))(
        [completion, "<answer>-128</answer>"], [entry] * 2
    )
    assert scores.values == [0.0, 1.0]
    assert scores.metrics()["verifier/reasoning_gym_hedged"] == 1.0


def test_complex_arithmetic_does_not_pay_nan():
    # reasoning-gym scores min(1, exp(-distance)): 1 when the distance is NaN
    verifier = get_verifier("reasoning_gym")
    for row in gym_rows("complex_arithmetic", size=3, seed=7):
        for answer in ("nan", "NaN", "nan + 1i", "inf"):
            assert verifier(f"<answer>{answer}</answer>", row) == 0.0
        assert verifier(f"<answer>{row['answer']}</answer>", row) == 1.0


def test_an_antiderivative_written_with_pi_is_paid():
    # the answer check let only one-letter names and a list of functions through; pi was not one
    row = gym_rows("simple_integration", size=1, seed=2)[0]
    verifier = get_verifier("reasoning_gym:simple_integration")
    assert verifier(f"<answer>{row['answer']} + pi</answer>", row) == 1.0


@pytest.mark.parametrize("task", ["simple_integration", "polynomial_multiplication"])
def test_an_answer_sympy_cannot_finish_is_wrong_not_a_hang(task):
    # x**9**9**9 kept sympy's parse_expr busy past any patience (60 s and counting) in the
    # verifier's own process; math's size screen now applies
    row = gym_rows(task, size=1, seed=2)[0]
    verifier = get_verifier(f"reasoning_gym:{task}")
    started = time.monotonic()
    assert verifier("<answer>x**9**9**9</answer>", row) == 0.0
    assert verifier("<answer>x**99999999</answer>", row) == 0.0
    assert time.monotonic() - started < 5


def test_number_sorting_pays_only_the_given_numbers_in_order():
    # reasoning-gym's scorer let each number be off by 1: numbers rounded, or all alike, were paid
    entry = {
        "question": "Sort these numbers in ascending order: 2.0, 52.2, 1.0, 3.0",
        "answer": "['1.0', '2.0', '3.0', '52.2']",
        "metadata": {"source_dataset": "number_sorting", "direction": "ascending"},
    }
    verifier = get_verifier("reasoning_gym")
    for answer in ("['1.0', '2.0', '3.0', '52.2']", '["1", "2", "3", "52.20"]', "[1, 2, 3, 52.2]"):
        assert verifier(f"<answer>{answer}</answer>", entry) == 1.0
    for answer in (
        "['1', '2', '3', '52']",
        "['2', '2', '2', '52.2']",
        "['1.0', '2.0', '3.0']",
        "x",
        "[1, 2, 3, 1" + "0" * 400 + "]",  # beyond float range: no OverflowError
    ):
        assert verifier(f"<answer>{answer}</answer>", entry) == 0.0
    for row in gym_rows("number_sorting", size=3, seed=1):
        assert verifier(f"<answer>{row['answer']}</answer>", row) == 1.0


def test_a_nan_reference_is_an_error_not_the_answer_nan():
    """A gap in a pandas column (NaN) became the gold answer "nan", which paid ``nan``."""
    with pytest.raises(ValueError, match="NaN"):
        reasoning_gym_verifier("<answer>nan</answer>", float("nan"), task="chain_sum")
    assert reasoning_gym_verifier("<answer>nan</answer>", "nan", task="spell_backward") == 1.0


def test_the_answer_key_is_the_answer_scored_numbers_by_value():
    key = get_verifier("reasoning_gym:chain_sum").answer_key
    entry = {"question": "?", "answer": "1000", "metadata": {"source_dataset": "chain_sum"}}
    same = ["<answer>1000</answer>", "<answer>+01,000.00</answer>", r"\boxed{1000}", "Answer: 1e3"]
    assert [key(c, entry) for c in same[:3]] == ["1000"] * 3
    assert key(same[3], entry) == "1e3"  # not a plain decimal: its text (the scorer pays it too)
    assert key("<answer>1,2</answer>", entry) == "1,2"  # a list, not a number with commas
    assert key("<answer> a   b </answer>", entry) == "a b"
    assert key("<answer></answer>", entry) is None  # an empty answer does not vote
    assert key(r"\boxed{3} and \boxed{4}", entry) is None  # a hedge
