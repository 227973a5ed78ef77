import math

import pytest

from rlvr.generation import SamplingConfig
from rlvr.objectives import AbcConfig, DapoConfig, GrpoConfig, ObjectiveConfig
from rlvr.train.config import RolloutConfig, SFTConfig, TrainConfig
from rlvr.train.overrides import (
    apply_overrides,
    deep_merge,
    dump_yaml,
    embedded_configs,
    from_dict,
    load_config,
    read_yaml,
)

BASE = {"data": {"train": "prompts.jsonl"}}


def test_overrides_set_nested_values_with_yaml_types():
    data = apply_overrides(
        BASE,
        [
            "rollout.group_size=16",
            "optim.lr=1e-6",
            "optim.betas=[0.9, 0.95]",
            "data.eval=null",
            "steps=7",
        ],
    )
    cfg = from_dict(TrainConfig, data)
    assert cfg.rollout.group_size == 16 and cfg.steps == 7
    assert cfg.optim.lr == 1e-6  # PyYAML reads "1e-6" as a string: converted for float fields
    assert cfg.optim.betas == (0.9, 0.95) and cfg.data.eval is None


def test_objective_hyperparameters_and_section_shorthand():
    data = apply_overrides(
        BASE,
        [
            "objective.eps3=0.3",
            "objective.name=abc_grpo",
            "model=smollm2-135m",
            "model.dtype=bfloat16",
        ],
    )
    cfg = from_dict(TrainConfig, data)
    assert cfg.objective == ObjectiveConfig(name="abc_grpo", params=AbcConfig(eps3=0.3))
    assert cfg.model.name == "smollm2-135m" and cfg.model.dtype == "bfloat16"


def test_a_model_name_keeps_the_models_other_keys_in_any_order():
    base = {**BASE, "model": {"name": "tiny", "dtype": "bfloat16"}}
    for overrides in (
        ["model.lora.rank=4", "model=smollm2-135m"],
        ["model=smollm2-135m", "model.lora.rank=4"],
    ):
        model = from_dict(TrainConfig, apply_overrides(base, overrides)).model
        assert (model.name, model.lora.rank, model.dtype) == ("smollm2-135m", 4, "bfloat16")


def test_new_objective_name_drops_the_old_objectives_hyperparameters():
    base = {**BASE, "objective": {"name": "grpo", "eps_high": 0.28, "kl_coef": 0.01}}
    cfg = from_dict(
        TrainConfig, apply_overrides(base, ["objective=abc_grpo", "objective.eps1=0.3"])
    )
    assert cfg.objective.name == "abc_grpo" and cfg.objective.params == AbcConfig(eps1=0.3)
    assert cfg.objective.kl_coef == 0.01  # a regulariser is not the objective's own
    same = from_dict(TrainConfig, apply_overrides(base, ["objective.name=grpo"]))
    assert same.objective.params == GrpoConfig(eps_high=0.28)
    merged = deep_merge(base, {"objective": {"name": "etr", "lam1": 0.2}})
    assert merged["objective"] == {"name": "etr", "kl_coef": 0.01, "lam1": 0.2}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["rollout.gruop_size=8"],
            r"unknown key 'rollout.gruop_size'; valid keys of rollout: prompts_per_step, group_size",
        ),
        (["rollout.group_size=eight"], r"rollout.group_size must be int, got 'eight'"),
        # YAML reads these templates as mappings: the error says to quote them
        (["data.template={prompt}"], r"data.template must be str, .*quote the text"),
        (["data.template=Solve: {prompt}"], r"got \{'Solve': \{'prompt': None\}\}: YAML reads"),
        (
            ["data.template=Q: {prompt} A:"],
            r"not valid YAML \(quote a text value: \"data.template='...'\"\)",
        ),
        (["rollout.group_size=0"], r"rollout.group_size must be >= 1"),
        (["rollout.group_size=1"], r"rollout.group_size=1: .* no gradient"),
        (["model.autocast=fp8"], r"model.autocast must be one of \['none', 'bf16'\]"),
        (["log.tensorboard=1"], r"log.tensorboard must be bool"),
        (["reward.correct=0", "reward.wrong=0"], r"reward.correct \(0.0\) must exceed"),
        (["optim.micro_batch_size=0"], r"optim.micro_batch_size must be >= 1"),
        (["rollout"], r"must look like section.key=value"),
        (["eval.ks=[1, 8]"], r"eval.ks must be in \[1, eval.n=4\]"),
        (["rollout.temperature=0"], r"rollout.temperature must be > 0"),
        (["model.lora.rank=-1"], r"model.lora.rank must be >= 0"),
        (["model.lora.rank=4", "model.lora.alpha=0"], r"model.lora.alpha must be > 0"),
        (["reward.overlong_buffer=-1"], r"reward.overlong_buffer must be >= 0 \(0: off\), got -1$"),
        (["reward.overlong_buffer=4.5"], r"reward.overlong_buffer must be int, got 4.5"),
        (["reward.overlong_penalty=-0.5"], r"reward.overlong_penalty must be >= 0 and finite"),
        (
            ["rollout.max_new_tokens=64", "reward.overlong_buffer=65"],
            r"^reward.overlong_buffer \(65\) must not exceed rollout.max_new_tokens \(64\)",
        ),
        # torch's "Overflow when unpacking long long" after loading the model and evaluating
        (["seed=99999999999999999999"], r"^seed must be a whole number from 0 to 4294967295"),
        (["eval.seed=-1"], r"^eval.seed must be a whole number from 0 to 4294967295 .*got -1$"),
        (["data.gym.seed=4294967296"], r"^data.gym.seed must be a whole number from 0 to"),
        (["data.gym.eval_seed=-5"], r"^data.gym.eval_seed must be a whole number from 0 to"),
        # 1e38: the group's float32 rewards overflowed, a NaN advantage at the first update
        (
            ["reward.overlong_buffer=16", "reward.overlong_penalty=1e38"],
            r"^reward.overlong_penalty=1e\+38 is too large for float32 rewards: .* under 2.13e\+37 "
            r"\(half float32's largest number over rollout.group_size=8\)",
        ),
        # a call generates whole groups: 4 or 12 with G=8 silently meant 8 per call
        (
            ["rollout.generation_batch_size=4"],
            r"rollout.generation_batch_size \(4\) must be a multiple of rollout.group_size \(8\)",
        ),
        (
            ["rollout.generation_batch_size=12"],
            r"rollout.generation_batch_size \(12\) must be a multiple of rollout.group_size \(8\)",
        ),
    ],
)
def test_bad_values_name_the_key(overrides, message):
    with pytest.raises(ValueError, match=message):
        from_dict(TrainConfig, apply_overrides(BASE, overrides))


def test_missing_required_section_is_named():
    with pytest.raises(ValueError, match="missing required key"):
        from_dict(TrainConfig, {})
    with pytest.raises(ValueError, match=r"data: missing required key\(s\) data.train"):
        from_dict(TrainConfig, {"data": {}})


def test_dump_and_reload_round_trip(tmp_path):
    cfg = from_dict(
        TrainConfig,
        apply_overrides(BASE, ["objective.name=etr", "objective.lam1=0.3", "eval.ks=[1,2]"]),
    )
    path = tmp_path / "c.yaml"
    path.write_text(dump_yaml(cfg))
    assert load_config(TrainConfig, str(path)) == cfg


def test_yaml_base_inheritance(tmp_path):
    (tmp_path / "a.yaml").write_text(
        "steps: 5\ndata: {train: x.jsonl}\nrollout: {group_size: 4}\nobjective: {name: grpo, eps_high: 0.28}\n"
    )
    (tmp_path / "b.yaml").write_text(
        f"base: {tmp_path / 'a.yaml'}\nrollout: {{prompts_per_step: 3}}\nobjective: abc_grpo\n"
    )
    cfg = load_config(TrainConfig, str(tmp_path / "b.yaml"), ["steps=6"])
    assert (cfg.steps, cfg.rollout.group_size, cfg.rollout.prompts_per_step) == (6, 4, 3)
    assert cfg.objective.name == "abc_grpo" and cfg.objective.params == AbcConfig()
    (tmp_path / "c.yaml").write_text(f"base: {tmp_path / 'c.yaml'}\n")
    with pytest.raises(ValueError, match="circular base"):
        read_yaml(str(tmp_path / "c.yaml"))


def test_yaml_base_is_read_beside_the_file(tmp_path, monkeypatch):
    """``conf/run.yaml`` with ``base: common.yaml`` reads ``conf/common.yaml`` whatever the
    working directory; a base that is not beside the file is read as given."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "common.yaml").write_text("base: demo\nsteps: 7\n")
    (conf / "run.yaml").write_text("base: common.yaml\nseed: 3\n")
    monkeypatch.chdir(tmp_path)
    cfg = load_config(TrainConfig, "conf/run.yaml")
    assert (cfg.steps, cfg.seed, cfg.model.name) == (7, 3, "tiny")
    (tmp_path / "other.yaml").write_text("base: demo\nsteps: 9\n")
    (conf / "cwd.yaml").write_text("base: other.yaml\n")
    assert load_config(TrainConfig, "conf/cwd.yaml").steps == 9


def test_paths_in_a_yaml_file_are_read_beside_it(tmp_path, monkeypatch, tiny_model_dir):
    """``rlvr train --config conf/run.yaml`` read its ``data.train: ./qa.jsonl`` and
    ``model.name: ./m`` from the current folder (``base:`` was already read beside the file);
    command-line overrides stay relative to the current folder."""
    import shutil

    conf, elsewhere = tmp_path / "conf", tmp_path / "elsewhere"
    conf.mkdir()
    elsewhere.mkdir()
    shutil.copytree(tiny_model_dir, conf / "m")
    for name in ("qa.jsonl", "held.jsonl", "base.jsonl"):
        (conf / name).write_text('{"prompt": "1 + 1?", "answer": "2"}\n')
    (conf / "common.yaml").write_text("base: demo\ndata: {eval: ./base.jsonl}\n")
    (conf / "run.yaml").write_text(
        "base: common.yaml\nmodel: {name: ./m}\ndata: {train: ./qa.jsonl}\n"
    )
    (conf / "bare.yaml").write_text(
        "base: demo\nmodel: tiny\ndata: {train: qa.jsonl, eval: math500}\n"
    )
    monkeypatch.chdir(elsewhere)
    cfg = load_config(TrainConfig, "../conf/run.yaml")
    assert (cfg.model.name, cfg.data.train) == (str(conf / "m"), str(conf / "qa.jsonl"))
    assert cfg.data.eval == str(conf / "base.jsonl")  # beside the base file that names it
    bare = load_config(TrainConfig, str(conf / "bare.yaml"))
    assert (bare.model.name, bare.data.train, bare.data.eval) == (
        "tiny",
        str(conf / "qa.jsonl"),
        "math500",
    )
    (elsewhere / "mine.jsonl").write_text('{"prompt": "2 + 2?", "answer": "4"}\n')
    given = load_config(TrainConfig, "../conf/run.yaml", ["data.train=./mine.jsonl"])
    assert given.data.train == "./mine.jsonl"  # the command line's: from the current folder
    monkeypatch.chdir(conf)  # from the file's own folder the values are kept as written
    assert load_config(TrainConfig, "run.yaml").data.train == "./qa.jsonl"
    (conf / "gone.yaml").write_text("base: demo\ndata: {train: ./gone.jsonl}\n")
    monkeypatch.chdir(elsewhere)  # nowhere: the error names where it was looked for
    assert load_config(TrainConfig, "../conf/gone.yaml").data.train == str(conf / "gone.jsonl")
    (conf / "empty.yaml").write_text('base: demo\ndata: {train: ""}\n')  # not the folder
    with pytest.raises(ValueError, match="data.train must name the training prompts"):
        load_config(TrainConfig, "../conf/empty.yaml")


def test_embedded_configs_load():
    names = embedded_configs()
    assert "demo" in names
    for name in names:
        cls = SFTConfig if name.rpartition("/")[2].startswith("sft") else TrainConfig
        data = read_yaml(name)
        if cls is SFTConfig:
            data = apply_overrides(data, ["data.train=x.jsonl"])
        cfg = from_dict(cls, data)
        assert isinstance(cfg, cls)
        if cls is TrainConfig:  # the objective's own config is built and checked with the rest
            assert type(cfg.objective.params) is cfg.objective.spec.config_cls


def test_objective_validation_names_the_bad_hyperparameter():
    def objective(*overrides):
        return from_dict(TrainConfig, apply_overrides(BASE, list(overrides)))

    with pytest.raises(ValueError, match="objective: unknown hyperparameter.*eps_hihg"):
        objective("objective.eps_hihg=0.3")
    with pytest.raises(ValueError, match=r"entropy_coef\) \(did you mean eps_high\?\)$"):
        objective("objective.eps_hihg=0.3")  # the nearest key, a hyperparameter or the section's
    with pytest.raises(ValueError, match=r"\(did you mean kl_coef\?\)$"):
        objective("objective.kl_coeff=0.1")
    with pytest.raises(ValueError, match="unknown objective 'grpp'"):
        objective("objective.name=grpp")
    with pytest.raises(ValueError, match="objective: unknown loss_agg 'mean'; valid: token-mean"):
        objective("objective.loss_agg=mean")
    with pytest.raises(ValueError, match="objective.eps3 must be float, got 'x'"):
        objective("objective=abc_grpo", "objective.eps3=x")
    with pytest.raises(ValueError, match="objective: eps1 must be >= 0"):
        objective("objective=abc_grpo", "objective.eps1=-1")
    assert objective("objective=dapo").objective.params == DapoConfig()


def test_rollout_reuse_flag():
    assert not RolloutConfig().reuses_rollout
    assert RolloutConfig(minibatches=4).reuses_rollout and RolloutConfig(epochs=2).reuses_rollout


def test_one_key_of_a_section_keeps_the_rest_of_that_sections_own_default():
    """`rlvr sft data.train=x optim.micro_batch_size=4` keeps SFT's lr 1e-4 (not OptimConfig's
    1e-6), and `log.progress=off` keeps its runs/sft-{time} directory and no samples."""
    base = load_config(SFTConfig, None, ["data.train=x"])
    cfg = load_config(
        SFTConfig, None, ["data.train=x", "optim.micro_batch_size=4", "log.progress=off"]
    )
    assert (cfg.optim.lr, cfg.optim.micro_batch_size) == (base.optim.lr, 4)
    assert base.optim.lr == 1e-4
    assert (cfg.log.output_dir, cfg.log.samples_per_step, cfg.log.progress) == (
        "runs/sft-{time}",
        0,
        "off",
    )


def test_rlvr_sft_without_a_config_starts_a_new_run_each_time():
    """README's `rlvr sft data.train=pairs.jsonl model=tiny epochs=2`, run a second time (other
    settings, say), stopped with "runs/sft already holds a run": with no --config every run
    wrote runs/sft, where `rlvr train` (runs/demo-{time}) and `--config sft` start a new one."""
    cfg = load_config(SFTConfig, None, ["data.train=pairs.jsonl", "model=tiny", "epochs=2"])
    assert cfg.log.output_dir == "runs/sft-{time}"
    assert cfg.log.output_dir == load_config(SFTConfig, "sft", ["data.train=x"]).log.output_dir


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("eval.temperature=-1", r"eval.temperature must be >= 0"),
        ("eval.top_p=0", r"eval.top_p must be in \(0, 1\]"),
        ("eval.max_new_tokens=0", r"eval.max_new_tokens must be >= 1 or null"),
        ("eval.batch_size=0", r"eval.batch_size must be >= 1"),
    ],
)
def test_bad_eval_sampling_is_refused_when_the_config_is_read(override, message):
    """These were accepted, then failed at the first evaluation without the key's name (with
    eval.at_start=false: after every training step, before the final checkpoint); and
    eval.max_new_tokens=0 silently became the rollout's budget."""
    with pytest.raises(ValueError, match=message):
        from_dict(TrainConfig, apply_overrides(BASE, [override]))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("optim.lr=inf", r"optim.lr must be > 0 and finite, got inf"),
        ("optim.weight_decay=inf", r"optim.weight_decay must be >= 0 and finite, got inf"),
        ("optim.eps=nan", r"optim.eps must be >= 0 and finite, got nan"),
        ("optim.eps=-1", r"optim.eps must be >= 0 and finite, got -1"),
        ("model.lora.alpha=inf", r"model.lora.alpha must be > 0 and finite, got inf"),
        ("rollout.temperature=inf", r"rollout.temperature must be > 0 and finite"),
        ("eval.temperature=inf", r"eval.temperature must be >= 0 and finite"),
        ("reward.correct=inf", r"reward.correct and reward.wrong must be finite, got inf and 0"),
        ("reward.wrong=-inf", r"reward.correct and reward.wrong must be finite, got 1.0 and -inf"),
        ("reward.overlong_penalty=inf", r"reward.overlong_penalty must be >= 0 and finite"),
        ("reward.overlong_penalty=nan", r"reward.overlong_penalty must be >= 0 and finite"),
    ],
)
def test_a_value_that_must_be_finite_is_refused_when_the_config_is_read(override, message):
    """``optim.lr=inf`` passed (inf > 0) and the run trained: its first update left every
    weight NaN and the held-out score fell to 0; ``optim.eps`` was not checked at all."""
    with pytest.raises(ValueError, match=message):
        from_dict(TrainConfig, apply_overrides(BASE, [override]))


@pytest.mark.parametrize("temperature", [math.inf, math.nan])
def test_a_sampling_temperature_must_be_finite(temperature):
    """``rlvr eval --temperature nan`` (or ``inf``) passed: NaN fails ``< 0`` as it fails ``>= 0``."""
    with pytest.raises(ValueError, match="temperature must be >= 0 and finite"):
        SamplingConfig(temperature=temperature)


def test_lora_without_peft_is_refused_before_anything_loads(monkeypatch, tmp_path):
    import importlib.util

    from rlvr.train.preflight import preflight

    data = tmp_path / "p.jsonl"
    data.write_text('{"prompt": "1 + 1?", "answer": "2"}\n')
    cfg = from_dict(TrainConfig, {"data": {"train": str(data)}, "model": {"lora": {"rank": 4}}})
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "peft" else real(n, *a)
    )
    with pytest.raises(ValueError, match=r"model.lora.rank: LoRA adapters need peft: pip install"):
        preflight(cfg)


def test_a_plain_verifier_without_correct_and_wrong_options_trains(tmp_path):
    """docs/rewards.md: a verifier is a plain `(completion, reference) -> float`; the trainer
    passed reward.correct and reward.wrong to every verifier, so a plain one was refused
    ("has no option(s) ['correct', 'wrong']"). It now runs on its own 1/0 scale, and
    values the function cannot apply are one line naming the keys."""
    from rlvr.rewards import register
    from rlvr.train.config import RewardConfig
    from rlvr.train.preflight import preflight

    register("plain_last_word")(lambda completion, reference: float(completion.endswith(reference)))
    data = tmp_path / "p.jsonl"
    data.write_text('{"prompt": "1 + 1?", "answer": "2"}\n')
    cfg = from_dict(
        TrainConfig, {"data": {"train": str(data)}, "reward": {"verifier": "plain_last_word"}}
    )
    preflight(cfg, device=False)  # refused here before
    from rlvr.train.preflight import run_verifier  # what the trainer's scorer runs

    verifier = run_verifier(cfg.reward)
    assert (verifier("so 2", "2"), verifier("so 3", "2")) == (1.0, 0.0)
    assert (verifier.correct_value, verifier.failure_value) == (1.0, 0.0)
    with pytest.raises(ValueError, match=r"takes no options correct and wrong, so reward.correct"):
        run_verifier(RewardConfig(verifier="plain_last_word", wrong=-1.0))
    with pytest.raises(ValueError, match=r"has no option\(s\) \['nope'\]"):
        run_verifier(RewardConfig(verifier="plain_last_word", options={"nope": 1}))
    assert run_verifier(RewardConfig(verifier="math", wrong=-1.0)).failure_value == -1.0


@pytest.mark.parametrize(
    ("overrides", "inert"),
    [
        (["model.lora.targets=[q_proj, v_proj]"], ["model.lora.targets"]),
        (["model.lora.alpha=8"], ["model.lora.alpha"]),
        (["rollout.generation_threads=2"], ["rollout.generation_threads"]),
        (["model.lora.rank=16", "model.lora.targets=[q_proj]", "model.lora.alpha=8"], []),
        (["rollout.staleness=1", "rollout.generation_threads=2"], []),
        (["reward.overlong_penalty=0.5"], ["reward.overlong_penalty"]),
        (["reward.overlong_penalty=0.5", "reward.overlong_buffer=16"], []),
        (["reward.overlong_penalty=0", "reward.overlong_buffer=16"], ["reward.overlong_buffer"]),
        ([], []),
    ],
)
def test_a_key_whose_switch_is_off_is_warned(overrides, inert, recwarn):
    """``model.lora.targets=[q_proj]`` without a rank trained every weight, and
    ``rollout.generation_threads`` without staleness ran no worker, both without a word."""
    from rlvr.train.preflight import warn_inert_settings

    cfg = from_dict(TrainConfig, apply_overrides(BASE, overrides))
    assert warn_inert_settings(cfg) == inert
    messages = [str(w.message) for w in recwarn]
    assert len(messages) == len(inert)
    assert all(" set, but " in m and "is 0" in m for m in messages)


@pytest.mark.parametrize(
    ("overrides", "warned"),
    [
        (["objective.name=abc_grpo"], True),
        (["objective.name=gppo", "objective.loss_agg=token-mean"], True),
        (["objective.name=abc_grpo", "rollout.minibatches=4"], False),
        (["objective.name=abc_grpo", "rollout.epochs=2"], False),
        (["objective.name=abc_grpo", "rollout.staleness=1"], False),
        (["objective.name=grpo"], False),
    ],
)
def test_an_objective_whose_every_update_is_on_policy_is_warned(overrides, warned, recwarn):
    """With one mini-batch, one epoch and no staleness the ratio is exactly 1: an ABC-GRPO run
    was GRPO's with group_mean advantages, update for update, without a word."""
    from rlvr.train.preflight import warn_inert_settings

    cfg = from_dict(TrainConfig, apply_overrides(BASE, overrides))
    assert warn_inert_settings(cfg) == (["objective.name"] if warned else [])
    messages = [str(w.message) for w in recwarn]
    assert len(messages) == warned
    if warned:
        objective = cfg.objective
        assert messages[0].startswith(f"objective.name={objective.name} with every update")
        assert (
            f"its gradient is grpo's with advantage {objective.advantage_mode!r} and aggregation "
            f"{objective.agg_mode!r}" in messages[0]
        )


@pytest.mark.parametrize(
    ("overrides", "keys"),
    [
        (["rollout.top_p=0.9"], ["rollout.top_p=0.9"]),
        (["rollout.top_k=20"], ["rollout.top_k=20"]),
        (["rollout.top_p=0.95", "rollout.top_k=50"], ["rollout.top_p=0.95", "rollout.top_k=50"]),
        (["eval.top_p=0.95"], []),
        ([], []),
    ],
)
def test_truncated_rollout_sampling_is_warned(overrides, keys, prompt_file, recwarn):
    """With top-p or top-k the tokens come from the truncated distribution while the update's
    log-probs and entropy are the whole softmax's: a run said nothing of it."""
    from rlvr.train.preflight import preflight

    data = apply_overrides({"data": {"train": prompt_file}}, overrides)
    preflight(from_dict(TrainConfig, data), device=False)
    messages = [str(w.message) for w in recwarn if "truncated distribution" in str(w.message)]
    assert len(messages) == (1 if keys else 0)
    if keys:
        assert messages[0].startswith(" and ".join(keys) + ": rollouts are drawn")
        assert "rollout/logp_diff_mean" not in messages[0]  # lean reports no log-probs


def test_truncated_sampling_note_names_the_mismatch_metrics_of_a_sampler_with_logprobs(
    prompt_file,
):
    """With vllm the sampler's log-probs are the truncated distribution's, so the mismatch
    metrics read the truncation (-log of the kept mass): the warning said nothing of them."""
    from rlvr.train.preflight import truncated_sampling_note

    data = {"data": {"train": prompt_file}, "rollout": {"sampler": "vllm", "top_p": 0.9}}
    line = truncated_sampling_note(from_dict(TrainConfig, data))
    assert line.startswith("rollout.top_p=0.9: rollouts are drawn from the truncated distribution")
    assert (
        "; rollout.sampler=vllm reports the truncated distribution's log-probs, so "
        "rollout/logp_diff_mean and rollout/logp_diff_max include that gap as well as the "
        "engine's mismatch (docs/training.md, 'What the update's log-probs are of')"
    ) in line
