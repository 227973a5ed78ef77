import json
import math

from rlvr.train.loop import train
from rlvr.train.metrics import read_metrics

ALWAYS = [
    "reward/mean",
    "reward/std",
    "reward/accuracy",
    "response/length_mean",
    "response/length_max",
    "response/clipped_frac",
    "groups/identical_frac",
    "time/generate",
    "time/score",
    "time/step",
    "perf/tokens_per_s",
]
UPDATE = [
    "loss/policy",
    "policy/entropy",
    "optim/grad_norm",
    "optim/lr",
    "time/update",
    "clip/frac",
    "kl/old_approx",
]


def test_train_writes_finite_metrics_every_step(train_config):
    cfg = train_config("steps=3", "eval.at_end=true")
    result = train(cfg)
    rows = read_metrics(result.run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3]
    for row in rows:
        for name in ALWAYS:
            assert math.isfinite(row[name]), name
        if row["update/skipped"] == 0:
            for name in UPDATE:
                assert math.isfinite(row[name]), name
    assert "eval/avg@1" in rows[-1] and 3 in result.evals
    samples = [
        json.loads(line) for line in (result.run_dir / "samples.jsonl").read_text().splitlines()
    ]
    assert [s["step"] for s in samples] == [1, 1, 2, 2, 3, 3]
    assert result.model_dir is not None and (result.model_dir / "trainer_state.pt").exists()
