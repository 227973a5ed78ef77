"""Every paper recipe updates off-policy: the ratio leaves 1 and out-of-band events are counted."""

import math

import pytest

from rlvr.train.config import TrainConfig
from rlvr.train.loop import train
from rlvr.train.metrics import read_metrics
from rlvr.train.overrides import configs_of, load_config

PAPER_RECIPES = [n for n in configs_of(TrainConfig) if "/" in n]


def test_paper_recipes_are_found_by_name():
    assert {
        "abc/grpo",
        "abc/abc_grpo",
        "etr/grpo",
        "etr/clip_high",
        "etr/etr",
        "etr/inverse",
    } <= set(PAPER_RECIPES)
    assert {"klear/gppo", "klear/clip_higher", "klear/cispo"} <= set(PAPER_RECIPES)
    assert {
        "apmpo/grpo",
        "apmpo/dapo",
        "apmpo/gmpo",
        "apmpo/apmpo",
        "apmpo/fac",
        "apmpo/pmpo",
    } <= set(PAPER_RECIPES)
    assert {"apmpo/fss_mean", "apmpo/fss_inv_std", "apmpo/adaptive_lower", "apmpo/linear_p"} <= set(
        PAPER_RECIPES
    )
    # the older names still load, as the paper recipes
    for old, new in [
        ("abc_grpo", "abc/abc_grpo"),
        ("etr", "etr/etr"),
        ("gppo", "klear/gppo"),
        ("apmpo", "apmpo/apmpo"),
    ]:
        a, b = load_config(TrainConfig, old), load_config(TrainConfig, new)
        assert (a.objective, a.rollout, a.reward) == (b.objective, b.rollout, b.reward)


def test_paper_settings():
    abc_base = load_config(TrainConfig, "abc/grpo")
    assert abc_base.objective.advantage_mode == "group_mean" and abc_base.rollout.minibatches == 4
    etr = load_config(TrainConfig, "etr/etr")
    assert (etr.objective.kl_coef, etr.reward.wrong, etr.objective.params.lam1) == (
        0.001,
        -1.0,
        0.1,
    )
    assert load_config(TrainConfig, "etr/clip_high").objective.params.eps_high == 0.28
    klear = load_config(TrainConfig, "klear/gppo")
    assert (klear.rollout.minibatches, klear.objective.sft_coef, klear.objective.kl_coef) == (
        8,
        0.1,
        0.0,
    )
    assert klear.rollout.filter_zero_advantage and klear.objective.agg_mode == "token-mean"
    apmpo = load_config(TrainConfig, "apmpo/apmpo")
    assert (apmpo.objective.kl_coef, apmpo.reward.wrong, apmpo.eval.temperature) == (
        0.001,
        0.0,
        0.6,
    )
    assert load_config(TrainConfig, "apmpo/fac").objective.params.gamma == 0.0
    assert load_config(TrainConfig, "demo").rollout.minibatches == 4


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["demo", *PAPER_RECIPES])
def test_recipe_updates_off_policy(recipe, tiny_model_dir, prompt_file, tmp_path):
    cfg = load_config(
        TrainConfig,
        recipe,
        [
            f"model.name={tiny_model_dir}",
            f"data.train={prompt_file}",
            "data.eval=null",
            "data.max_prompt_tokens=64",
            "reward.verifier=even",
            "rollout.prompts_per_step=2",
            "rollout.max_new_tokens=8",
            "steps=2",
            "threads=1",
            "optim.lr=0.05",
            "optim.micro_batch_size=null",
            "eval.at_start=false",
            "eval.at_end=false",
            "checkpoint.save_final=false",
            f"log.output_dir={tmp_path / 'run'}",
            "log.tensorboard=false",
            "log.progress=off",
            "log.plots=false",
            "log.samples_per_step=0",
        ],
    )
    assert cfg.rollout.minibatches > 1
    rows = [
        r
        for r in read_metrics(train(cfg).run_dir / "metrics.jsonl")
        if r.get("update/skipped") == 0
    ]
    assert rows, "no update happened"
    assert max(abs(r["ratio/max"] - 1) + abs(r["ratio/min"] - 1) for r in rows) > 1e-3
    events = sum(r[f"clip/q{k}_frac"] for r in rows for k in range(1, 5))
    assert events > 0 and all(math.isfinite(r["loss/policy"]) for r in rows)
    for r in rows:
        assert r["update/optimizer_steps"] == cfg.rollout.minibatches
