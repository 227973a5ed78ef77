"""``RlvrGRPOTrainer``: TRL's GRPOTrainer with rlvr's objectives (CPU, the tiny models)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from rlvr.advantages import compute_advantages  # noqa: E402
from rlvr.engines.trl import REFUSED, RlvrGRPOTrainer, verifier_reward  # noqa: E402
from rlvr.engines.trl.options import (  # noqa: E402
    check_reward_funcs,
    objective_config,
    on_policy_note,
    reward_keywords,
)
from rlvr.engines.trl.trainer import HOOKS, STATS_KEYS, batch_rewards, check_trl  # noqa: E402
from rlvr.objectives import OBJECTIVES, group_stats_for, policy_loss  # noqa: E402

PROMPTS = ["What is 3 + 4 + 5?", "Calculate 7 - 2 + 1.", "What is 9 + 9?", "Sum 1 + 2 + 3."]


def length_reward(completions, **_):
    """A cheap reward with variance: 1 when the completion's length is a multiple of 3."""
    return [float(len(c) % 3 == 0) for c in completions]


def grpo_args(tmp_path, **overrides):
    kwargs = {
        "output_dir": str(tmp_path / "out"),
        "use_cpu": True,
        "report_to": "none",
        "seed": 0,
        "max_steps": 2,
        "logging_steps": 1,
        "save_strategy": "no",
        "per_device_train_batch_size": 4,
        "num_generations": 4,
        "max_completion_length": 12,
        "learning_rate": 1e-4,
        "model_init_kwargs": {"dtype": "float32"},
        "dataloader_num_workers": 0,
    }
    return GRPOConfig(**{**kwargs, **overrides})


def dataset():
    return Dataset.from_dict({"prompt": PROMPTS * 4})


# ---------------------------------------------------------------- options


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("loss_type", "grpo"),
        ("epsilon", 0.3),
        ("epsilon_high", 0.28),
        ("delta", 2.0),
        ("importance_sampling_level", "sequence"),
        ("top_entropy_quantile", 0.2),
        ("off_policy_mask_threshold", 0.5),
        ("use_adaptive_entropy", True),
        ("scale_rewards", "batch"),
        ("multi_objective_aggregation", "normalize_then_sum"),
    ],
)
def test_options_that_change_the_objective_are_refused(tmp_path, field, value):
    args = grpo_args(tmp_path, **{field: value})
    with pytest.raises(ValueError, match=f"GRPOConfig.{field}="):
        RlvrGRPOTrainer("never-loaded", length_reward, args, objective="abc_grpo")
    assert field in {refusal.field for refusal in REFUSED}


def test_kl_ratio_correction_and_misaligned_steps_are_refused(tmp_path):
    with pytest.raises(ValueError, match="use_bias_correction_kl"):
        RlvrGRPOTrainer("never-loaded", length_reward, grpo_args(tmp_path, beta=0.01))
    args = grpo_args(tmp_path, gradient_accumulation_steps=2, steps_per_generation=3)
    with pytest.raises(ValueError, match="steps_per_generation=3 must be a multiple"):
        RlvrGRPOTrainer("never-loaded", length_reward, args)


@pytest.mark.parametrize("value", [-0.1, "0.1", None])
@pytest.mark.parametrize("field", ["beta", "entropy_coef"])
def test_a_bad_regulariser_weight_names_the_grpo_config_field(tmp_path, field, value):
    """The weights are set through ``GRPOConfig``: the error names its field, not rlvr's,
    also for a value that is not a number (a string was a bare TypeError)."""
    args = grpo_args(tmp_path, **{field: value}, use_bias_correction_kl=False)
    with pytest.raises(
        ValueError,
        match=rf"^GRPOConfig.{field}={re.escape(repr(value))} .*must be a finite number >= 0",
    ):
        RlvrGRPOTrainer("never-loaded", length_reward, args)


@pytest.mark.parametrize("wrap", [lambda v: v, lambda v: [length_reward, v]])
def test_an_rlvr_verifier_as_reward_function_is_refused_naming_the_wrapper(tmp_path, wrap):
    """TRL calls reward functions as ``(prompts, completions, **columns)``, a verifier is
    ``(completion, reference)``: refused before the model loads, not at the first step."""
    from rlvr.rewards import get_verifier

    with pytest.raises(
        ValueError, match=r"reward_funcs\[\d\] is rlvr's verifier 'math'.*verifier_reward\(verifier"
    ):
        RlvrGRPOTrainer("never-loaded", wrap(get_verifier("math")), grpo_args(tmp_path))


def own_signature(completion, reference):
    return 1.0


def without_kwargs(prompts, completions):
    return [1.0 for _ in completions]


def needs_reference(completions, reference, **_):
    return [1.0 for _ in completions]


def by_position(completions, /, **_):
    return [1.0 for _ in completions]


@pytest.mark.parametrize(
    ("func", "problem"),
    [
        (
            own_signature,
            "it takes no argument answer, completion_ids, completions, .*and no \\*\\*kwargs",
        ),
        (
            without_kwargs,
            "it takes no argument answer, completion_ids, log_extra, .*and no \\*\\*kwargs",
        ),
        (needs_reference, "it needs reference, which TRL does not pass"),
        (by_position, "it takes completions only by position"),
    ],
)
def test_a_reward_function_trl_cannot_call_is_refused_before_the_model_loads(
    tmp_path, func, problem
):
    """TRL calls ``func(prompts=, completions=, completion_ids=, ..., **columns)``: a function
    of another signature was a TypeError at the first step, after the model loaded and the
    first batch was generated."""
    name = func.__name__
    with pytest.raises(
        ValueError, match=rf"^reward_funcs\[1\] {name}\(.*cannot be called by TRL.*{problem}"
    ):
        RlvrGRPOTrainer(
            "never-loaded",
            [length_reward, func],
            grpo_args(tmp_path),
            train_dataset=Dataset.from_dict({"prompt": PROMPTS, "answer": PROMPTS}),
        )


def test_a_train_dataset_given_by_position_is_read_for_its_columns(tmp_path):
    rows = Dataset.from_dict({"prompt": PROMPTS, "answer": PROMPTS})
    with pytest.raises(ValueError, match="it needs reference, which TRL does not pass"):
        RlvrGRPOTrainer("never-loaded", needs_reference, grpo_args(tmp_path), rows)


class CallableReward:
    def __call__(self, completions, answer, **_):
        return [1.0 for _ in completions]


@pytest.mark.parametrize(
    "func",
    [
        length_reward,
        CallableReward(),
        lambda prompts, completions, completion_ids, trainer_state, log_extra, log_metric, answer: [],
        "a/reward-model",
    ],
)
def test_reward_functions_trl_can_call_pass_the_check(tmp_path, func):
    keywords, complete = reward_keywords(
        grpo_args(tmp_path), Dataset.from_dict({"prompt": PROMPTS, "answer": PROMPTS})
    )
    assert complete and "answer" in keywords and "prompt" not in keywords
    check_reward_funcs(func, keywords, complete)


def test_an_argument_a_rollout_func_may_pass_is_not_refused(tmp_path):
    """A ``rollout_func``'s extra fields reach the reward functions: their names are unknown."""
    rows = Dataset.from_dict({"prompt": PROMPTS})
    keywords, complete = reward_keywords(grpo_args(tmp_path), rows, rollout_func=lambda *a: {})
    assert not complete
    check_reward_funcs(needs_reference, keywords, complete)
    with pytest.raises(ValueError, match="it needs reference"):
        check_reward_funcs(needs_reference, *reward_keywords(grpo_args(tmp_path), rows))


def test_an_unscored_or_infinite_reward_names_the_cause():
    """TRL turns ``None`` into NaN: a NaN is unscored too; an inf names its function."""
    weights, names = torch.ones(2), ["first", "second"]
    nan = torch.tensor([[1.0, torch.nan], [torch.nan, torch.nan]])
    with pytest.raises(ValueError, match=r"^1 completion\(s\) got no reward .*None or NaN"):
        batch_rewards(nan, weights, names)
    inf = torch.tensor([[1.0, torch.inf], [0.0, -torch.inf]])
    with pytest.raises(ValueError, match=r"returned inf \('second' for 2 completion\(s\)\)"):
        batch_rewards(inf, weights, names)
    scored = torch.tensor([[1.0, torch.nan], [0.5, 2.0]])
    assert batch_rewards(scored, weights, names).tolist() == [1.0, 2.5]


def test_verifier_reward_scores_plain_and_conversational_completions():
    """TRL hands a conversational dataset's completions as lists of messages; a verifier given
    the list raised AttributeError ('list' object has no attribute 'rpartition')."""
    import doctest

    import rlvr.engines.trl.rewards
    from rlvr.rewards import get_verifier

    assert doctest.testmod(rlvr.engines.trl.rewards).failed == 0
    reward = verifier_reward(get_verifier("math"), column="answer")
    texts = ["The answer is \\boxed{4}", "The answer is \\boxed{5}"]
    messages = [[{"role": "assistant", "content": text}] for text in texts]
    for completions in (texts, messages):
        assert reward(prompts=["p", "p"], completions=completions, answer=["4", "4"]) == [1.0, 0.0]
    assert reward.__name__ == "math"


def test_verifier_reward_on_a_dataset_without_its_column_is_refused(tmp_path):
    from rlvr.rewards import get_verifier

    with pytest.raises(ValueError, match=r"^reward_funcs\[0\] math\(.*it needs reference,"):
        RlvrGRPOTrainer(
            "never-loaded",
            verifier_reward(get_verifier("math")),
            grpo_args(tmp_path),
            train_dataset=Dataset.from_dict({"prompt": PROMPTS, "answer": PROMPTS}),
        )


def test_a_conversational_dataset_trains_with_verifier_reward(tmp_path, tiny_model_dir):
    from rlvr.rewards import get_verifier

    rows = [{"prompt": [{"role": "user", "content": p}], "reference": "12"} for p in PROMPTS]
    trainer = RlvrGRPOTrainer(
        str(tiny_model_dir),
        verifier_reward(get_verifier("math")),
        grpo_args(tmp_path, max_steps=1),
        train_dataset=Dataset.from_list(rows * 4),
        objective="abc_grpo",
    )
    trainer.train()
    assert trainer.state.log_history[0]["rewards/math/mean"] == 0.0  # a random model


def score_as_one_float(completions, **_):
    return 0.5  # one number for the batch: TRL said "'float' object is not iterable"


def score_as_strings(completions, **_):
    return ["1.0" for _ in completions]  # TRL said "too many dimensions 'str'"


@pytest.mark.parametrize(
    ("func", "said"),
    [
        (score_as_one_float, r"a float \(0\.5\)"),
        (score_as_strings, r"a str \('1\.0'\) at position 0"),
    ],
)
def test_a_reward_function_returning_no_list_of_numbers_is_named(
    tmp_path, tiny_model_dir, func, said
):
    """TRL failed inside its reward loop with an error that named no function; the output is
    checked and the error names the function and what it returned. Reward models, async
    functions and well-formed outputs (lists, tensors, None) pass as they are."""
    trainer = RlvrGRPOTrainer(
        str(tiny_model_dir),
        [length_reward, func],
        grpo_args(tmp_path, max_steps=1),
        train_dataset=dataset(),
    )
    with pytest.raises(ValueError, match=rf"^reward function '{func.__name__}' returned {said}; "):
        trainer.train()
    checked = trainer.reward_funcs[0]
    assert checked(prompts=["p", "p"], completions=["abc", "ab"]) == [1.0, 0.0]  # as it was
    assert trainer.reward_func_names == ["length_reward", func.__name__]
    import pickle

    assert pickle.loads(pickle.dumps(checked)).name == "length_reward"


def test_an_async_reward_function_s_output_is_checked_too():
    """TRL awaits async reward functions with the others; the wrapper stays async for it."""
    import asyncio

    from trl.trainer.utils import is_async_callable

    from rlvr.engines.trl.rewards import checked_rewards

    async def judge(completions, **_):
        return 0.5

    async def judged(completions, **_):
        return [1.0 for _ in completions]

    wrapped = checked_rewards([judge, judged, length_reward], ["judge", "judged", "length"], 3)
    assert [is_async_callable(f) for f in wrapped] == [True, True, False]
    with pytest.raises(ValueError, match=r"^reward function 'judge' returned a float \(0\.5\)"):
        asyncio.run(wrapped[0](completions=["a"]))
    assert asyncio.run(wrapped[1](completions=["a", "b"])) == [1.0, 1.0]


@pytest.mark.parametrize(
    "out", [[1.0, None, 0], (1, 2), torch.tensor([0.5, 1.0]), [torch.tensor(1.0), None], []]
)
def test_reward_outputs_trl_reads_pass_the_check(out):
    from rlvr.engines.trl.rewards import reward_output_problem

    assert reward_output_problem(out) is None


def test_unknown_objective_or_hyperparameter(tmp_path):
    with pytest.raises(ValueError, match="unknown objective 'abc'; valid: grpo"):
        RlvrGRPOTrainer("never-loaded", length_reward, grpo_args(tmp_path), objective="abc")
    with pytest.raises(ValueError, match="unknown hyperparameter.*eps9"):
        RlvrGRPOTrainer(
            "never-loaded",
            length_reward,
            grpo_args(tmp_path),
            objective="abc_grpo",
            objective_kwargs={"eps9": 0.1},
        )


@pytest.mark.parametrize("kwargs", ["eps3=0.3", [("eps3", 0.3)], {3: 0.3}])
def test_objective_kwargs_that_are_not_a_dict_of_names_are_refused(tmp_path, kwargs):
    """One line naming ``objective_kwargs``; a string was 'dictionary update sequence
    element #0 has length 1; 2 is required'."""
    with pytest.raises(ValueError, match=r"^objective_kwargs must be a dict .*'eps3': 0.3"):
        RlvrGRPOTrainer(
            "never-loaded",
            length_reward,
            grpo_args(tmp_path),
            objective="abc_grpo",
            objective_kwargs=kwargs,
        )


def test_a_trl_without_a_hook_the_trainer_overrides_is_refused():
    """Another TRL that renamed ``_compute_loss`` would train with its own loss under rlvr's
    name: refused; a version other than the tested one only warns."""
    check_trl()  # the installed TRL has every hook
    for hook in HOOKS:
        base = type("OtherGRPOTrainer", (), {n: lambda self: None for n in HOOKS if n != hook})
        with pytest.raises(RuntimeError, match=f"TRL 9.0's GRPOTrainer has no {hook}, which"):
            check_trl(base, "9.0")
    with pytest.warns(UserWarning, match="tested with TRL 1.16.x, not 1.17.0"):
        check_trl(GRPOTrainer, "1.17.0")


def test_without_trl_the_import_names_the_extra(import_without):
    """``import rlvr.engines.trl`` without TRL says what to install, in one line."""
    with pytest.raises(ImportError, match=r'needs TRL: pip install "rlvr\[trl\]"'):
        import_without("trl")


# ---------------------------------------------------------------- against GRPOTrainer


def loss_inputs(trainer, seed, rows=4, prompt=3, width=6):
    """Identical inputs for both trainers: ragged completions, off-policy old log-probs."""
    gen = torch.Generator().manual_seed(seed)
    vocab = trainer.model.config.vocab_size
    lengths = torch.randint(1, width + 1, (rows,), generator=gen)
    completion_mask = (torch.arange(width)[None, :] < lengths[:, None]).long()
    inputs = {
        "prompt_ids": torch.randint(3, vocab, (rows, prompt), generator=gen),
        "prompt_mask": torch.ones(rows, prompt, dtype=torch.long),
        "completion_ids": torch.randint(3, vocab, (rows, width), generator=gen),
        "completion_mask": completion_mask,
        "advantages": torch.randn(rows, generator=gen),
        "rlvr_rewards": torch.zeros(rows, dtype=torch.float64),
    }
    with torch.no_grad():
        ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)
        mask = torch.cat([inputs["prompt_mask"], completion_mask], 1)
        logps, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, width)
    inputs["old_per_token_logps"] = logps + 0.5 * torch.randn(logps.shape, generator=gen)
    return inputs


def grads_of(trainer, micro_batches, accumulation):
    trainer.model.train()
    trainer.model.zero_grad()
    trainer.current_gradient_accumulation_steps = accumulation
    total = 0.0
    for inputs in micro_batches:
        loss = trainer._compute_loss(trainer.model, inputs)
        loss.backward()
        total += loss.item()
    return total, {n: p.grad.clone() for n, p in trainer.model.named_parameters()}


def trainer_pair(tmp_path, model_dir, objective, **args):
    """TRL's ``GRPOTrainer`` (``loss_type="grpo"``) and ours with ``objective`` and the same
    aggregation, on the same model, reward, data and ``GRPOConfig`` overrides ``args``."""
    theirs = GRPOTrainer(
        str(model_dir),
        length_reward,
        grpo_args(tmp_path, loss_type="grpo", **args),
        train_dataset=dataset(),
    )
    ours = RlvrGRPOTrainer(
        str(model_dir),
        length_reward,
        grpo_args(tmp_path, **args),
        train_dataset=dataset(),
        objective=objective,
        loss_agg="seq-mean-token-mean",
    )
    return theirs, ours


@pytest.mark.parametrize("accumulation", [1, 2])
def test_grpo_loss_and_gradient_equal_trl_grpo(tmp_path, tiny_model_dir, accumulation):
    common = {"gradient_accumulation_steps": accumulation, "steps_per_generation": accumulation}
    theirs, ours = trainer_pair(tmp_path, tiny_model_dir, "grpo", **common)
    micro = [loss_inputs(ours, seed) for seed in range(accumulation)]
    totals = torch.stack(
        [
            torch.stack([response_rows(m).sum(), (response_rows(m) > 0).sum(), torch.tensor(0.0)])
            for m in micro
        ]
    ).sum(0)
    ours_inputs = [{**m, "rlvr_step_counts": totals.double()} for m in micro]
    trl_inputs = [{k: v for k, v in m.items() if not k.startswith("rlvr_")} for m in micro]
    trl_loss, trl_grads = grads_of(theirs, trl_inputs, accumulation)
    loss, grads = grads_of(ours, ours_inputs, accumulation)
    assert loss == pytest.approx(trl_loss, rel=1e-5, abs=1e-7)
    for name, grad in trl_grads.items():
        torch.testing.assert_close(grads[name], grad, rtol=1e-4, atol=1e-7)
    assert sum(float(g.abs().sum()) for g in trl_grads.values()) > 0
    ours.log({})
    assert ours.state.log_history[-1]["clip/frac"] > 0  # off-policy enough to clip


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_vllm_importance_weights_match_trl(tmp_path, tiny_model_dir, level):
    """TRL multiplies its per-token loss by vLLM's importance-sampling ratio; rlvr's token
    weights do the same (the ratio is [B, T] for token modes, [B, 1] for sequence modes)."""
    theirs, ours = trainer_pair(tmp_path, tiny_model_dir, "grpo")
    for trainer in (theirs, ours):  # as after generating with vLLM, without starting one
        trainer.use_vllm, trainer.vllm_importance_sampling_correction = True, True
    inputs = loss_inputs(ours, 0)
    shape = inputs["completion_mask"].shape if level == "token" else (shape_rows(inputs), 1)
    gen = torch.Generator().manual_seed(1)
    inputs["importance_sampling_ratio"] = torch.rand(shape, generator=gen) * 2
    trl_loss, trl_grads = grads_of(
        theirs, [{k: v for k, v in inputs.items() if k[:5] != "rlvr_"}], 1
    )
    loss, grads = grads_of(ours, [inputs], 1)
    assert loss == pytest.approx(trl_loss, rel=1e-5, abs=1e-7)
    for name, grad in trl_grads.items():
        torch.testing.assert_close(grads[name], grad, rtol=1e-4, atol=1e-7)
    plain, _ = grads_of(ours, [{**inputs, "importance_sampling_ratio": torch.ones(shape)}], 1)
    assert plain != pytest.approx(loss, rel=1e-5)


def shape_rows(inputs):
    return inputs["completion_mask"].shape[0]


def response_rows(inputs):
    return inputs["completion_mask"].sum(dim=1).double()


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_micro_batches_add_up_to_policy_loss_on_the_whole_batch(tmp_path, tiny_model_dir, name):
    """Every objective with the KL, entropy and SFT terms, on an 8-row batch shuffled into
    micro-batches of 3 and 5 rows (groups split across them), sums to the loss and gradient of
    ``policy_loss`` on the whole batch with its whole-batch advantages and statistics."""
    args = grpo_args(
        tmp_path,
        bf16=False,
        beta=0.05,
        use_bias_correction_kl=False,
        entropy_coef=0.01,
        gradient_accumulation_steps=2,
        steps_per_generation=2,
    )
    trainer = RlvrGRPOTrainer(
        str(tiny_model_dir),
        length_reward,
        args,
        objective=name,
        sft_coef=0.1,
        train_dataset=dataset(),
    )
    cfg = trainer.rlvr_objective
    whole = loss_inputs(trainer, 4, rows=8)
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0], dtype=torch.float64)
    whole["rlvr_rewards"] = rewards
    whole["advantages"] = compute_advantages(rewards, 4, cfg.advantage_mode).float()
    gen = torch.Generator().manual_seed(5)
    whole["ref_per_token_logps"] = whole["old_per_token_logps"] + torch.randn(8, 6, generator=gen)
    stats = cfg.group_stats(rewards, 4)
    if stats is not None:
        values = (stats.pass_rate, stats.reward_mean, stats.reward_std)
        whole.update(zip(STATS_KEYS, values, strict=True))
    order = torch.randperm(8, generator=gen)
    micro = [{k: v[rows] for k, v in whole.items()} for rows in (order[:3], order[3:])]
    trainer._attach_step_counts(micro)
    loss, grads = grads_of(trainer, micro, 2)

    trainer.model.zero_grad()
    ids = torch.cat([whole["prompt_ids"], whole["completion_ids"]], 1)
    mask = torch.cat([whole["prompt_mask"], whole["completion_mask"]], 1)
    logp, entropy, _ = trainer._get_per_token_logps_and_entropies(
        trainer.model, ids, mask, 6, compute_entropy=True
    )
    expected, _ = policy_loss(
        name,
        logp=logp,
        old_logp=whole["old_per_token_logps"],
        advantages=whole["advantages"],
        mask=whole["completion_mask"],
        rewards=rewards,
        group_stats=stats,
        ref_logp=whole["ref_per_token_logps"],
        entropy=entropy,
        max_len=args.max_completion_length,
        config=cfg.params,
        kl_coef=0.05,
        sft_coef=0.1,
        entropy_coef=0.01,
    )
    expected.backward()
    assert loss == pytest.approx(expected.item(), rel=1e-5, abs=1e-7)
    for param_name, param in trainer.model.named_parameters():
        torch.testing.assert_close(grads[param_name], param.grad, rtol=1e-4, atol=1e-7)


def test_a_different_objective_gives_a_different_gradient(tmp_path, tiny_model_dir):
    """Guard that the equality above can fail."""
    theirs, ours = trainer_pair(tmp_path, tiny_model_dir, "abc_grpo")
    inputs = loss_inputs(ours, 0)
    trl_loss, _ = grads_of(theirs, [{k: v for k, v in inputs.items() if k[:5] != "rlvr_"}], 1)
    loss, _ = grads_of(ours, [inputs], 1)
    assert loss != pytest.approx(trl_loss, rel=1e-5)


# ---------------------------------------------------------------- training


@pytest.mark.parametrize(
    ("objective", "args", "warned"),
    [
        ("abc_grpo", {}, True),
        ("etr", {"gradient_accumulation_steps": 2, "steps_per_generation": 2}, True),
        ("grpo", {}, False),
        ("abc_grpo", {"num_iterations": 2}, False),
        ("abc_grpo", {"gradient_accumulation_steps": 2, "steps_per_generation": 4}, False),
    ],
)
def test_an_on_policy_run_warns_that_the_objective_cannot_act(tmp_path, objective, args, warned):
    """With TRL's defaults (one optimiser step per generation batch, num_iterations=1) the
    ratio is 1: ABC-GRPO's run was identical to GRPO's with group_mean advantages, silently."""
    cfg = objective_config(grpo_args(tmp_path, **args), objective)
    note = on_policy_note(grpo_args(tmp_path, **args), cfg)
    assert (note is not None) == warned
    if warned:
        assert (
            f"{objective}'s clipping never acts and its gradient is grpo's with advantage" in note
        )


def test_the_on_policy_note_claims_grpo_equality_only_for_rlvrs_objectives(tmp_path, monkeypatch):
    from rlvr.objectives import GrpoConfig, ObjectiveConfig, registry

    monkeypatch.setattr(registry, "OBJECTIVES", dict(registry.OBJECTIVES))

    @registry.register_objective(
        "mine_wide_q4", config=GrpoConfig, advantage="group_mean", loss_agg="token-mean", paper="p"
    )
    def wide_q4(batch, config):  # an objective of the user's own
        raise AssertionError

    note = on_policy_note(grpo_args(tmp_path), ObjectiveConfig("mine_wide_q4"))
    assert "so no clip or other ratio-dependent term of mine_wide_q4 acts." in note
    assert "grpo's" not in note


def test_abc_grpo_on_policy_is_grpo_with_group_mean(tmp_path, tiny_model_dir):
    """What the warning says, on two steps of the tiny model."""
    norms = {}
    for objective, advantage in (("grpo", "group_mean"), ("abc_grpo", None)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trainer = RlvrGRPOTrainer(
                str(tiny_model_dir),
                length_reward,
                grpo_args(tmp_path / objective, learning_rate=1e-2),
                train_dataset=dataset(),
                objective=objective,
                advantage=advantage,
            )
        notes = [w for w in caught if "on-policy" in str(w.message)]
        assert len(notes) == (objective == "abc_grpo")
        trainer.train()
        norms[objective] = [row["grad_norm"] for row in trainer.state.log_history[:-1]]
    assert norms["grpo"] == norms["abc_grpo"] and len(norms["grpo"]) == 2
    assert max(norms["grpo"]) > 0  # a gradient, not two zero-advantage steps


def test_the_model_card_names_the_objective_not_grpo(tmp_path, tiny_model_dir):
    """TRL writes README.md in output_dir on every save; it said an ABC-GRPO run was trained
    "with GRPO" and cited DeepSeekMath."""
    trainer = RlvrGRPOTrainer(
        str(tiny_model_dir),
        length_reward,
        grpo_args(tmp_path),
        train_dataset=dataset(),
        objective="abc_grpo",
        objective_kwargs={"eps3": 0.3},
    )
    trainer.create_model_card()
    card = (tmp_path / "out" / "README.md").read_text()
    assert (
        "trained with rlvr's abc_grpo objective (ABC-GRPO eq. 3, 5-6, Alg. 1) in TRL's "
        "GRPOTrainer (RlvrGRPOTrainer): AbcConfig(eps1=0.2, eps2=0.2, eps3=0.3, eps4=0.2), "
        "advantages group_mean, aggregation seq-mean-token-mean" in card
    )
    assert "DeepSeekMath" not in card and "- abc_grpo" in card


def test_two_objectives_with_one_seed_generate_the_same_first_batch(tmp_path, tiny_model_dir):
    """docs/engines.md: ABC-GRPO and its GRPO baseline on the same data and seed see the same
    first rollout batch (prompts and completions), so their runs part only by the objective."""
    logs = {}
    for objective, advantage in (("grpo", "group_mean"), ("abc_grpo", None)):
        trainer = RlvrGRPOTrainer(
            str(tiny_model_dir),
            length_reward,
            grpo_args(tmp_path / objective, max_steps=1, seed=3),
            train_dataset=dataset(),
            objective=objective,
            advantage=advantage,
        )
        trainer.train()
        logs[objective] = [list(trainer._logs[key]) for key in ("prompt", "completion")]
    assert logs["grpo"] == logs["abc_grpo"]
    assert len(logs["grpo"][1]) == 4


class Recording(RlvrGRPOTrainer):
    """Keeps every generation batch's rewards and every micro-batch the loss saw."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.generated, self.seen = [], []

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        rewards = (self._rlvr_rewards_per_func * self.reward_weights[None, :]).nansum(1)
        self.generated.append(rewards.double())
        return output

    def _compute_loss(self, model, inputs):
        self.seen.append({k: v for k, v in inputs.items() if k.startswith("rlvr_")})
        self.seen[-1]["mask"] = inputs["completion_mask"]
        self.seen[-1]["advantages"] = inputs["advantages"]
        return super()._compute_loss(model, inputs)


@pytest.mark.parametrize("name", ["etr", "apmpo"])
def test_micro_batches_smaller_than_a_group_see_whole_batch_statistics(
    tmp_path, tiny_model_dir, name
):
    args = grpo_args(
        tmp_path,
        max_steps=1,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=4,
        steps_per_generation=4,
    )
    trainer = Recording(
        str(tiny_model_dir), length_reward, args, train_dataset=dataset(), objective=name
    )
    trainer.train()
    (rewards,) = trainer.generated  # 8 completions: 2 prompts x 4
    assert len(trainer.seen) == 4 and all(len(s["rlvr_rewards"]) == 2 for s in trainer.seen)
    stats = group_stats_for(name, rewards, 4)
    expected = sorted(
        zip(rewards.tolist(), stats.pass_rate.tolist(), stats.reward_mean.tolist(), strict=True)
    )
    seen = sorted(
        (r, p, m)
        for s in trainer.seen
        for r, p, m in zip(
            s["rlvr_rewards"].tolist(),
            s["rlvr_pass_rate"].tolist(),
            s["rlvr_reward_mean"].tolist(),
            strict=True,
        )
    )
    torch.testing.assert_close(torch.tensor(seen), torch.tensor(expected), rtol=0, atol=1e-12)
    advantages = compute_advantages(rewards, 4, "group_std").tolist()
    assert list(trainer._logs["advantages"]) == pytest.approx(advantages)  # completions table
    tokens = sum(float(s["mask"].sum()) for s in trainer.seen)
    for s in trainer.seen:  # every micro-batch divides by the whole step's tokens
        assert float(s["rlvr_step_counts"][0]) == tokens


@pytest.mark.parametrize("name", ["grpo", "abc_grpo"])
def test_the_loss_sees_the_objectives_advantages_not_trls(tmp_path, tiny_model_dir, name):
    """The micro-batches the loss reads carry rlvr's advantages of the whole generation batch
    (``abc_grpo``: ``group_mean``, not divided by a std; ``grpo``: the population std), not
    the ones TRL computed for its own loss (``scale_rewards="group"``: the unbiased std)."""
    args = grpo_args(tmp_path, max_steps=1, gradient_accumulation_steps=2, steps_per_generation=2)
    trainer = Recording(
        str(tiny_model_dir), length_reward, args, train_dataset=dataset(), objective=name
    )
    trainer.train()
    (rewards,) = trainer.generated  # 8 completions: 2 prompts x 4
    groups = rewards.view(-1, 4)
    assert bool((groups.std(dim=1) > 0).any())  # a group whose advantages are not all 0
    expected = compute_advantages(rewards, 4, trainer.rlvr_objective.advantage_mode)
    trls = (groups - groups.mean(dim=1, keepdim=True)) / (groups.std(dim=1, keepdim=True) + 1e-4)
    assert not torch.allclose(expected, trls.reshape(-1), atol=1e-3)  # the check can fail
    seen = sorted(
        (r, a)
        for s in trainer.seen
        for r, a in zip(s["rlvr_rewards"].tolist(), s["advantages"].tolist(), strict=True)
    )
    want = sorted(zip(rewards.tolist(), expected.tolist(), strict=True))
    torch.testing.assert_close(torch.tensor(seen), torch.tensor(want), rtol=1e-6, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_two_steps_on_the_tiny_preset_log_rlvr_metrics(tmp_path, name):
    from rlvr.data import format_prompt
    from rlvr.models import load_tokenizer, resolve_model_path

    path = resolve_model_path("tiny")
    tokenizer = load_tokenizer(path)
    prompts = [format_prompt(tokenizer, p, None) for p in PROMPTS]
    torch.set_num_threads(1)
    trainer = RlvrGRPOTrainer(
        path,
        length_reward,
        grpo_args(tmp_path, num_iterations=2),
        train_dataset=Dataset.from_dict({"prompt": prompts * 4}),
        processing_class=tokenizer,
        objective=name,
    )
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "clip/q1_share" in entry]
    assert len(logged) == 2
    for key in ("clip/frac", "ratio/mean", "kl/old_approx", "policy/entropy"):
        assert all(key in entry for entry in logged), key
    assert logged[1]["ratio/mean"] != 1.0  # the second pass over the batch is off-policy


def test_regularisers_come_from_trl_and_rlvr_arguments(tmp_path, tiny_model_dir):
    """``beta`` is the KL weight (TRL then computes the reference log-probs), ``entropy_coef``
    the entropy bonus, ``sft_coef`` Klear's SFT term; each reports its metric."""
    args = grpo_args(
        tmp_path, beta=0.01, use_bias_correction_kl=False, entropy_coef=0.01, num_iterations=2
    )
    trainer = RlvrGRPOTrainer(
        str(tiny_model_dir),
        length_reward,
        args,
        train_dataset=dataset(),
        objective="gppo",
        sft_coef=0.1,
        sft_threshold=1.0,
    )
    cfg = trainer.rlvr_objective
    assert (cfg.kl_coef, cfg.entropy_coef, cfg.sft_coef) == (0.01, 0.01, 0.1)
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "kl/ref_k3" in entry]
    assert len(logged) == 2 and all("gppo/preserved_frac" in entry for entry in logged)
    assert any("sft/loss" in entry for entry in logged)
    # TRL's own loss metrics are gone, as docs/engines.md says
    trls = {"entropy", "kl", "clip_ratio/low_mean", "clip_ratio/high_mean"}
    assert not trls & {key for entry in logged for key in entry}
    docs = (Path(__file__).parents[2] / "docs" / "engines.md").read_text()
    assert "TRL's own `entropy`, `kl` and `clip_ratio/*` are not logged" in docs


def test_lora_trains_only_the_adapters_with_the_base_as_reference(tmp_path, tiny_model_dir):
    """TRL's ``peft_config`` works as with its GRPOTrainer: only the adapters change, and with
    ``beta`` TRL computes the reference log-probs on the base (its adapters switched off)."""
    peft = pytest.importorskip("peft")
    args = grpo_args(
        tmp_path, beta=0.01, use_bias_correction_kl=False, learning_rate=1e-2, num_iterations=2
    )
    trainer = RlvrGRPOTrainer(
        str(tiny_model_dir),
        length_reward,
        args,
        train_dataset=dataset(),
        objective="abc_grpo",
        peft_config=peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"),
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    after = dict(trainer.model.named_parameters())
    changed = {n for n, p in before.items() if not torch.equal(p, after[n])}
    assert changed and all(".lora_" in n for n in changed)
    logged = [entry for entry in trainer.state.log_history if "kl/ref_k3" in entry]
    assert len(logged) == 2 and all("clip/q1_share" in entry for entry in logged)
    assert logged[-1]["kl/ref_k3"] > 0  # the adapters moved the policy away from the base


# ---------------------------------------------------------------- metrics


def metric_pair(tmp_path, model_dir, objective="abc_grpo", rewards=None, **objective_kwargs):
    """Our trainer without autocast (the whole-batch reference must see the same numbers) and
    an 8-row batch (with ``rewards`` when given) split into micro-batches of 2 and 6 rows."""
    trainer = RlvrGRPOTrainer(
        str(model_dir),
        length_reward,
        grpo_args(tmp_path, bf16=False, gradient_accumulation_steps=2, steps_per_generation=2),
        train_dataset=dataset(),
        objective=objective,
        **objective_kwargs,
    )
    whole = loss_inputs(trainer, 3, rows=8)
    if rewards is not None:
        whole["rlvr_rewards"] = rewards
    micro = [{k: v[rows] for k, v in whole.items()} for rows in (slice(0, 2), slice(2, 8))]
    trainer._attach_step_counts(micro)
    return trainer, whole, micro


def test_logged_metrics_are_those_of_the_whole_batch(tmp_path, tiny_model_dir):
    """Micro-batches of 2 and 6 rows: the logged token means, extremes and quadrant shares are
    the whole batch's (rlvr train's reduction), not plain means of micro-batch values."""
    trainer, whole, micro = metric_pair(tmp_path, tiny_model_dir)
    grads_of(trainer, micro, 2)
    trainer.log({})
    logged = trainer.state.log_history[-1]
    ids = torch.cat([whole["prompt_ids"], whole["completion_ids"]], 1)
    mask = torch.cat([whole["prompt_mask"], whole["completion_mask"]], 1)
    with torch.no_grad():
        logp, entropy, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, ids, mask, ids.shape[1] - 3, compute_entropy=True
        )
    _, expected = policy_loss(
        "abc_grpo",
        logp=logp,
        old_logp=whole["old_per_token_logps"],
        advantages=whole["advantages"],
        mask=whole["completion_mask"],
        entropy=entropy,
    )
    names = ["clip/frac", "ratio/mean", "ratio/max", "ratio/min", "kl/old_approx"]
    names += [
        "policy/entropy",
        *(f"clip/q{k}_{kind}" for k in (1, 2, 3, 4) for kind in ("frac", "share")),
    ]
    for name in names:
        assert logged[name] == pytest.approx(float(expected[name]), rel=1e-5, abs=1e-7), name
    assert sum(logged[f"clip/q{k}_share"] for k in (1, 2, 3, 4)) == pytest.approx(1.0)


def test_logged_sft_loss_is_that_of_the_whole_batch(tmp_path, tiny_model_dir):
    """Micro-batches of 2 rows (no positive response) and 6: sft/loss was weighted by all
    response tokens, so the first micro-batch's 0 pulled it down; it is the NLL of the
    whole batch's positive tokens."""
    rewards = torch.tensor([0, 0, 1, 0, 1, 1, 0, 1], dtype=torch.float64)
    trainer, whole, micro = metric_pair(
        tmp_path, tiny_model_dir, "grpo", rewards, sft_coef=0.1, sft_threshold=1.0
    )
    grads_of(trainer, micro, 2)
    trainer.log({})
    ids = torch.cat([whole["prompt_ids"], whole["completion_ids"]], 1)
    mask = torch.cat([whole["prompt_mask"], whole["completion_mask"]], 1)
    with torch.no_grad():
        logp, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, ids, mask, ids.shape[1] - 3
        )
    positive = whole["completion_mask"].bool() & (whole["rlvr_rewards"] >= 1)[:, None]
    expected = float(-logp[positive].mean())
    logged = trainer.state.log_history[-1]["sft/loss"]
    assert logged == pytest.approx(expected, rel=1e-5)


class RecordingAccelerator:
    """Wraps the trainer's accelerator and records its collective calls."""

    def __init__(self, accelerator):
        self.inner, self.calls = accelerator, []

    def __getattr__(self, name):
        value = getattr(self.inner, name)
        if name in ("gather", "gather_for_metrics", "reduce", "pad_across_processes"):
            self.calls.append(name)
        return value


def test_an_empty_micro_batch_makes_the_same_collective_calls(tmp_path, tiny_model_dir):
    """A process whose micro-batch has no response token (every completion truncated under
    mask_truncated_completions) must make the same collective calls as the others, or
    multi-GPU training hangs."""
    trainer, _, micro = metric_pair(tmp_path, tiny_model_dir)
    empty = {**micro[0], "completion_mask": torch.zeros_like(micro[0]["completion_mask"])}
    trainer.model.train()
    calls = []
    for inputs in (micro[0], empty):
        trainer.accelerator = RecordingAccelerator(trainer.accelerator)
        trainer._compute_loss(trainer.model, inputs).backward()
        calls.append(trainer.accelerator.calls)
        trainer.accelerator = trainer.accelerator.inner
    assert calls[0] == calls[1]


@pytest.mark.parametrize("name", ["gppo", "apmpo"])
def test_the_loss_makes_no_host_sync_outside_the_model(tmp_path, tiny_model_dir, name, count_syncs):
    """``_compute_loss`` plus backward reads no tensor value on the host besides TRL's own
    forward pass (run beforehand here): metrics stay on the device until ``log``."""
    rewards = torch.tensor([0, 0, 1, 0, 1, 1, 0, 1], dtype=torch.float64)
    trainer, whole, micro = metric_pair(
        tmp_path, tiny_model_dir, name, rewards, sft_coef=0.1, sft_threshold=1.0
    )
    stats = trainer.rlvr_objective.group_stats(rewards, 4)
    inputs = micro[1]
    if stats is not None:
        rows = slice(2, 8)
        values = (stats.pass_rate[rows], stats.reward_mean[rows], stats.reward_std[rows])
        inputs.update(zip(STATS_KEYS, values, strict=True))
    trainer.model.train()
    forward = trainer._get_per_token_logps_and_entropies
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)
    mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1)
    ready = forward(trainer.model, ids, mask, ids.shape[1] - 3, compute_entropy=True)
    trainer._get_per_token_logps_and_entropies = lambda *args, **kwargs: ready
    with count_syncs() as calls:
        trainer._compute_loss(trainer.model, inputs).backward()
    assert dict(calls) == {}
    trainer.log({})  # the window's one transfer to the host
    assert "clip/frac" in trainer.state.log_history[-1]


def test_generation_and_the_step_run_with_attention_off_cudnn(tmp_path, tiny_model_dir):
    seen = []

    def recording_reward(completions, **_):
        seen.append(torch.backends.cuda.cudnn_sdp_enabled())
        return length_reward(completions)

    trainer = RlvrGRPOTrainer(
        str(tiny_model_dir),
        recording_reward,
        grpo_args(tmp_path, max_steps=1),
        train_dataset=dataset(),
        objective="abc_grpo",
    )
    real_loss = trainer._compute_loss

    def recording_loss(model, inputs):
        seen.append(torch.backends.cuda.cudnn_sdp_enabled())
        return real_loss(model, inputs)

    trainer._compute_loss = recording_loss
    trainer.train()
    assert seen and not any(seen)  # rewards (inside generation) and every loss call
    assert torch.backends.cuda.cudnn_sdp_enabled()


@pytest.mark.parametrize(("max_len", "buffer"), [(16, 4), (64, 16), (8, 8), (5, 1)])
def test_the_overlong_penalty_is_trls_soft_overlong_punishment(max_len, buffer):
    """``reward.overlong_buffer``'s penalty (rlvr.train.overlong) equals TRL's own DAPO eq. 13
    reward function at every length a sampler capped at ``max_len`` can give, so a TRL run
    adding ``get_soft_overlong_punishment`` as a reward function shapes as ``rlvr train``."""
    from trl.rewards import get_soft_overlong_punishment

    from rlvr.train.overlong import overlong_penalty

    lengths = list(range(max_len + 1))
    theirs = get_soft_overlong_punishment(max_len, buffer)([[0] * n for n in lengths])
    ours = overlong_penalty(torch.tensor(lengths), max_len=max_len, buffer=buffer)
    assert ours.tolist() == pytest.approx(theirs, abs=1e-6)
