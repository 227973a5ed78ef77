"""A few RL steps of every registered objective on the tiny random model."""

import math

import pytest

from rlvr.objectives import OBJECTIVES
from rlvr.train.loop import train
from rlvr.train.metrics import read_metrics


@pytest.mark.parametrize("name", sorted(OBJECTIVES))  # tests/objectives checks the names
def test_every_objective_trains_with_finite_metrics(train_config, name):
    # two mini-batches: the second update sees ratios != 1, so clipping can act
    cfg = train_config(
        f"objective.name={name}", "rollout.minibatches=2", "steps=2", "optim.lr=1e-2", out=name
    )
    result = train(cfg)
    rows = read_metrics(result.run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2]
    for row in rows:
        assert "log/nonfinite_metrics" not in row
        assert all(v is None or math.isfinite(v) for v in row.values())
        if not row["update/skipped"]:
            assert row["update/optimizer_steps"] == 2
            for metric in (
                "loss/policy",
                "clip/frac",
                "ratio/max",
                "kl/old_approx",
                "policy/entropy",
            ):
                assert math.isfinite(row[metric]), metric


def test_log_contrast_is_positive_against_another_objective_and_zero_against_itself(train_config):
    cfg = train_config(
        "objective.name=abc_grpo", "rollout.minibatches=4", "rollout.epochs=2", "steps=2",
        "optim.lr=5e-2", "log.contrast=[grpo, abc_grpo]", out="contrast",
    )  # fmt: skip
    rows = read_metrics(train(cfg).run_dir / "metrics.jsonl")
    updated = [r for r in rows if not r["update/skipped"]]
    assert updated and all(r["contrast/abc_grpo/token_frac"] == 0.0 for r in updated)
    assert all(r["contrast/abc_grpo/rel_l2"] == 0.0 for r in updated)
    assert max(r["contrast/grpo/token_frac"] for r in updated) > 0
    assert all(0 <= r["contrast/grpo/token_frac"] <= 1 for r in updated)


def test_an_unknown_contrast_objective_is_a_one_line_error(train_config):
    with pytest.raises(ValueError, match="log.contrast 'nope'.*unknown objective"):
        train_config("log.contrast=[nope]")
