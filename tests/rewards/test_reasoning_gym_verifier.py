"""reasoning-gym verifiers on generated task sets: gold answers score 1, wrong ones 0."""

from __future__ import annotations

import json
import time

import pytest

from rlvr.data import gym_rows, load_examples, write_jsonl
from rlvr.rewards import Scorer, get_verifier
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
    for answer in ("0", "0.1", "0.10", "banana", ""):
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
