"""The batch scorer: failures and timeouts score the failure value, are counted, never raise."""

from __future__ import annotations

import pickle

import pytest
from verifier_helpers import boom, echo

from rlvr.rewards import Scorer, Scores, ScoringConfig, VerifierTimeout, get_verifier, time_limit
from rlvr.rewards.events import record
from rlvr.rewards.registry import Verifier

BOOM = Verifier(spec="boom", fn=boom, failure_value=-1.0)


def test_inline_errors_and_non_finite_scores_are_counted():
    scores = Scorer(BOOM, ScoringConfig(workers=0))(["ok", "boom", "nan", "ok"], [0, 0, 0, 0])
    assert scores.values == [1.0, -1.0, -1.0, 1.0]
    assert scores.status == ["ok", "error", "error", "ok"]
    assert scores.failures == 2 and scores.timeouts == 0
    assert "verifier exploded" in scores.errors[1]
    assert scores.metrics() == {
        "verifier/failures": 2.0,
        "verifier/timeouts": 0.0,
        "verifier/math_rejected": 0.0,
        "verifier/math_hedged": 0.0,
        "verifier/reasoning_gym_hedged": 0.0,
        "verifier/reasoning_gym_unreadable": 0.0,
        "verifier/asserts_judged": 0.0,
        "verifier/asserts_in_process": 0.0,
        "verifier/asserts_unsupported": 0.0,
        "verifier/sandbox_errors": 0.0,
    }


def test_worker_processes_match_inline_and_survive_crashes():
    completions = ["ok", "boom", "die", "nan", "ok"]
    with Scorer(BOOM, ScoringConfig(workers=2, timeout_s=30)) as scorer:
        scores = scorer(completions, [0] * 5)
        assert scores.values == [1.0, -1.0, -1.0, -1.0, 1.0]
        assert scores.status == ["ok", "error", "error", "error", "ok"]
        assert "died" in scores.errors[2]
        assert scorer(["ok"] * 3, [0] * 3).values == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("workers", [0, 1])
def test_a_verifier_that_exits_or_returns_text_fails_that_completion(workers):
    """``sys.exit`` inside a verifier ended an inline-scored training run (a worker's death
    was already counted), and a score of "1" (a string) was paid as 1.0."""
    with Scorer(BOOM, ScoringConfig(workers=workers, timeout_s=30)) as scorer:
        scores = scorer(["exit", "text", "ok"], [0] * 3)
    assert scores.values == [-1.0, -1.0, 1.0]
    assert scores.status == ["error", "error", "ok"] and scores.failures == 2
    assert "number" in scores.errors[1]


def test_pool_scores_in_input_order():
    verifier = Verifier(spec="echo", fn=echo, options={"wrong": -1.0}, failure_value=-1.0)
    completions = [str(i % 3) for i in range(12)]
    with Scorer(verifier, ScoringConfig(workers=2)) as scorer:
        scores = scorer(completions, ["1"] * 12)
    assert scores.values == [1.0 if c == "1" else -1.0 for c in completions]


def test_unpicklable_verifier_needs_inline_scoring():
    local = Verifier(spec="local", fn=lambda completion, reference: 1.0)
    with pytest.raises(ValueError, match="cannot be sent to worker processes"):
        Scorer(local, ScoringConfig(workers=1))(["x"], ["y"])
    assert Scorer(local, ScoringConfig(workers=0))(["x"], ["y"]).values == [1.0]


def test_mismatched_lengths_raise():
    with pytest.raises(ValueError, match="2 completions but 1 references"):
        Scorer("math", ScoringConfig(workers=0))(["a", "b"], ["1"])


def test_empty_batch():
    for workers in (0, 1):
        scorer = Scorer("math", ScoringConfig(workers=workers))
        assert scorer([], []) == Scores(values=[], status=[], errors=[])
        assert scorer._pool is None  # no worker started for nothing


def test_config_validation():
    for bad in (0, float("nan")):  # nan passed and failed at the first completion scored
        with pytest.raises(ValueError, match="timeout_s"):
            ScoringConfig(timeout_s=bad)
    with pytest.raises(ValueError, match="workers"):
        ScoringConfig(workers=-1)
    with pytest.raises(ValueError, match="kill_grace_s"):
        ScoringConfig(kill_grace_s=-1.0)


def test_unknown_event_names_are_refused_with_the_valid_ones():
    with pytest.raises(
        ValueError, match="unknown verifier event 'math_rejectd'; valid: .*math_rejected"
    ):
        Scores(values=[], status=[]).event_count("math_rejectd")
    with pytest.raises(ValueError, match="unknown verifier event 'typo'"):
        record("typo")


def test_options_cannot_rebind_a_built_verifier():
    with pytest.raises(ValueError, match="already-built Verifier"):
        get_verifier(get_verifier("math"), wrong=-1.0)


def test_time_limit_raises_and_leaves_nothing_pending():
    with pytest.raises(VerifierTimeout), time_limit(0.05):
        while True:
            pass
    total = sum(range(10_000))  # no stray exception arrives afterwards
    assert total == 49_995_000


def test_verifiers_pickle():
    verifier = get_verifier("math+format", wrong=-1.0, format_penalty=-2.0)
    clone = pickle.loads(pickle.dumps(verifier))
    assert clone("<think>x</think> \\boxed{2}", "2") == 1.0
    assert clone("\\boxed{2}", "2") == -2.0


def test_scorer_warms_the_verifier_up_once_outside_the_time_limit():
    import time

    from rlvr.rewards.format import with_format

    calls = []

    def slow_to_start(completion, reference):
        return 1.0

    slow_to_start.warm_up = lambda: (calls.append(1), time.sleep(0.3))
    verifier = with_format(Verifier(spec="slow", fn=slow_to_start))  # warmed through the wrapper
    scorer = Scorer(verifier, ScoringConfig(timeout_s=0.2, workers=0))
    assert scorer(["<think>a</think> b"], [0]).status == ["ok"]
    assert scorer(["<think>a</think> b"], [0]).values == [1.0]
    assert calls == [1]
