import json
import re

import pytest
import reasoning_gym

from rlvr.data.worked import (
    WORKED_TASKS,
    boxed_answer,
    chain_sum_steps,
    format_response,
    leg_counting_steps,
    worked_pair,
    worked_pairs,
    write_jsonl,
)

STEP = re.compile(r"^(-?\d+) ([+-]) (-?\d+) = (-?\d+)$")
LEG_STEP = re.compile(r"^([a-z ]+): (\d+) \* (\d+) = (\d+)$")

CHAIN_SUM_CONFIGS = [
    {"min_digits": 1, "max_digits": 1, "min_terms": 2, "max_terms": 5},
    {"min_digits": 1, "max_digits": 4, "min_terms": 2, "max_terms": 6, "allow_negation": True},
]


def _think_lines(response: str) -> list[str]:
    match = re.fullmatch(r"<think>\n(.*)\n</think>\n\\boxed\{(-?\d+)\}", response, flags=re.DOTALL)
    assert match, response
    return match.group(1).split("\n")


@pytest.mark.parametrize("config", CHAIN_SUM_CONFIGS)
def test_chain_sum_answers_score_one_and_steps_are_correct(config):
    dataset = reasoning_gym.create_dataset("chain_sum", size=300, seed=5, **config)
    for entry, pair in zip(dataset, worked_pairs(dataset), strict=True):
        assert dataset.score_answer(boxed_answer(pair.response), entry) == 1.0
        lines = _think_lines(pair.response)
        terms = entry["metadata"]["expression"].split()
        assert len(lines) == len(terms) // 2
        running = int(terms[0])
        for line, op, term in zip(lines, terms[1::2], terms[2::2], strict=True):
            a, line_op, b, c = STEP.match(line).groups()
            assert (int(a), line_op, b) == (running, op, term)
            assert int(c) == (int(a) + int(b) if op == "+" else int(a) - int(b))
            running = int(c)
        assert str(running) == entry["answer"]


def test_leg_counting_answers_score_one_and_steps_are_correct():
    from reasoning_gym.arithmetic.leg_counting import ANIMALS

    dataset = reasoning_gym.create_dataset("leg_counting", size=200, seed=3)
    for entry, pair in zip(dataset, worked_pairs(dataset), strict=True):
        assert dataset.score_answer(boxed_answer(pair.response), entry) == 1.0
        lines = _think_lines(pair.response)
        animals = entry["metadata"]["animals"]
        subtotals = []
        for line, (name, count) in zip(lines, animals.items(), strict=False):
            got_name, got_count, legs, sub = LEG_STEP.match(line).groups()
            assert (got_name, int(got_count), int(legs)) == (name, count, ANIMALS[name])
            assert int(sub) == count * ANIMALS[name]
            subtotals.append(int(sub))
        running = subtotals[0]
        for line, sub in zip(lines[len(animals) :], subtotals[1:], strict=True):
            a, op, b, c = STEP.match(line).groups()
            assert (int(a), op, int(b), int(c)) == (running, "+", sub, running + sub)
            running += sub
        assert len(lines) == 2 * len(animals) - 1
        assert str(running) == entry["answer"]


def test_chain_sum_hand_worked():
    entry = {"metadata": {"expression": "12 - 30 + 5"}}
    assert chain_sum_steps(entry) == ["12 - 30 = -18", "-18 + 5 = -13"]
    assert format_response(chain_sum_steps(entry), "-13") == (
        "<think>\n12 - 30 = -18\n-18 + 5 = -13\n</think>\n\\boxed{-13}"
    )


def test_leg_counting_hand_worked():
    entry = {"metadata": {"animals": {"spider": 3, "snake": 2, "human": 1}}}
    assert leg_counting_steps(entry) == [
        "spider: 3 * 8 = 24",
        "snake: 2 * 0 = 0",
        "human: 1 * 2 = 2",
        "24 + 0 = 24",
        "24 + 2 = 26",
    ]


def test_boxed_answer_takes_the_last_box():
    assert boxed_answer("\\boxed{1} then \\boxed{ -7 }") == "-7"
    assert boxed_answer("no box here") is None


def test_unknown_task_lists_supported_ones():
    with pytest.raises(ValueError, match="chain_sum"):
        worked_pair({"question": "q", "answer": "1", "metadata": {"source_dataset": "gcd"}})


def test_malformed_expression_is_rejected():
    with pytest.raises(ValueError, match="not a chain_sum expression"):
        chain_sum_steps({"metadata": {"expression": "3 * 4"}})


def test_wrong_reference_answer_is_rejected():
    entry = {
        "question": "1 + 1 =",
        "answer": "3",
        "metadata": {"source_dataset": "chain_sum", "expression": "1 + 1"},
    }
    with pytest.raises(ValueError, match="ends in 2, answer is 3"):
        worked_pair(entry)


def test_write_jsonl_round_trips(tmp_path):
    dataset = reasoning_gym.create_dataset("chain_sum", size=5, seed=1)
    pairs = worked_pairs(dataset)
    path = write_jsonl(pairs, tmp_path / "sub" / "sft.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [set(row) for row in rows] == [{"prompt", "response", "answer", "metadata"}] * 5
    assert [row["response"] for row in rows] == [p.response for p in pairs]
    assert [row["answer"] for row in rows] == [e["answer"] for e in dataset]
    assert rows[0]["metadata"]["expression"] == dataset[0]["metadata"]["expression"]


def test_every_registered_task_has_a_generator():
    assert set(WORKED_TASKS) == {"chain_sum", "leg_counting"}
