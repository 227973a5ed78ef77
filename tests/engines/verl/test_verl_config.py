"""Where the hyperparameters come from: verl's fields, then ``policy_loss.rlvr``."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

pytest.importorskip("verl")

from rlvr.engines.verl import PolicyLossConfig, objective_config  # noqa: E402
from rlvr.engines.verl.check import compose  # noqa: E402  (verl's config, as main_ppo composes it)
from rlvr.objectives import AbcConfig, EtrConfig, GrpoConfig  # noqa: E402

from .helpers import actor  # noqa: E402


def test_verl_fields_set_eps_and_the_dual_clip():
    cfg = objective_config("grpo", actor("rlvr_grpo", clip_ratio_low=0.1, clip_ratio_high=0.3))
    assert cfg.params == GrpoConfig(eps_low=0.1, eps_high=0.3, clip_c=3.0)
    assert objective_config("dapo", actor("rlvr_dapo", clip_ratio_c=5.0)).params.clip_c == 5.0


def test_the_rlvr_section_sets_the_objective_own_hyperparameters():
    cfg = objective_config("abc_grpo", actor("rlvr_abc_grpo", rlvr={"eps3": 0.35, "eps2": 0.1}))
    assert cfg.params == AbcConfig(eps1=0.2, eps2=0.1, eps3=0.35, eps4=0.2)
    etr = objective_config("etr", actor("rlvr_etr", rlvr={"lam1": 0.3, "pass_threshold": 0.5}))
    assert etr.params == EtrConfig(lam1=0.3, pass_threshold=0.5)
    apmpo = objective_config("apmpo", actor("rlvr_apmpo", rlvr={"reward_range": [-1, 1]}))
    assert apmpo.params.reward_range == (-1.0, 1.0)


def test_a_verl_field_set_in_the_rlvr_section_is_an_error():
    with pytest.raises(ValueError, match="policy_loss.rlvr.eps_high.*clip_ratio_high"):
        objective_config("gppo", actor("rlvr_gppo", rlvr={"eps_high": 0.3}))


def test_a_clip_ratio_the_objective_cannot_use_is_an_error():
    with pytest.raises(ValueError, match="rlvr_abc_grpo has no clip_ratio_low/clip_ratio_high"):
        objective_config("abc_grpo", actor("rlvr_abc_grpo", clip_ratio_high=0.28))


@pytest.mark.parametrize("name", ["grpo", "abc_grpo"])
def test_a_clip_ratio_no_objective_reads_is_an_error(name):
    """verl's config sets clip_ratio_low and clip_ratio_high (0.2), so clip_ratio, their
    fallback, is read by no loss, verl's own included: setting it changed nothing."""
    with pytest.raises(ValueError, match="actor.clip_ratio=0.3 is not read"):
        objective_config(name, actor(f"rlvr_{name}", clip_ratio=0.3))
    unset = actor("rlvr_grpo", clip_ratio=0.3, clip_ratio_low=None, clip_ratio_high=0.28)
    assert objective_config("grpo", unset).params.eps_low == 0.3  # the fallback, when it is one
    assert objective_config(name, actor(f"rlvr_{name}", clip_ratio=0.2)).name == name


def test_a_clip_ratio_apmpo_does_not_read_is_an_error():
    """apmpo's upper width is eps_ada (eps_min..eps_max), so verl's clip_ratio_high would be
    ignored; with adaptive_lower so would clip_ratio_low."""
    with pytest.raises(ValueError, match="rlvr_apmpo does not read actor.clip_ratio_high.*eps_max"):
        objective_config("apmpo", actor("rlvr_apmpo", clip_ratio_high=0.28))
    lower = actor("rlvr_apmpo", clip_ratio_low=0.1, rlvr={"adaptive_lower": True})
    with pytest.raises(ValueError, match="does not read actor.clip_ratio_low"):
        objective_config("apmpo", lower)
    assert objective_config("apmpo", actor("rlvr_apmpo", clip_ratio_low=0.1)).params.eps_low == 0.1
    assert (
        objective_config("pmpo", actor("rlvr_pmpo", clip_ratio_high=0.28)).params.eps_high == 0.28
    )


@pytest.mark.parametrize("name", ["abc_grpo", "etr", "gspo", "cispo", "gmpo", "pmpo", "apmpo"])
def test_a_dual_clip_for_an_objective_without_one_is_an_error(name):
    """verl's clip_ratio_c reaches only the objectives with a dual clip (grpo, dapo, dr_grpo,
    gppo); for the others a value the user set would be ignored. verl's default 3 and inf
    (off) pass."""
    with pytest.raises(ValueError, match=rf"rlvr_{name} has no dual clip.*clip_ratio_c=10.0"):
        objective_config(name, actor(f"rlvr_{name}", clip_ratio_c=10.0))
    for clip_c in (3.0, float("inf")):
        assert objective_config(name, actor(f"rlvr_{name}", clip_ratio_c=clip_c)).name == name
    assert objective_config("gppo", actor("rlvr_gppo", clip_ratio_c=10.0)).params.clip_c == 10.0


@pytest.mark.parametrize(
    ("key", "where"),
    [
        ("kl_coef", "actor.use_kl_loss=True and actor.kl_loss_coef"),
        ("entropy_coef", "actor.entropy_coeff"),
        ("loss_agg", "actor.loss_agg_mode"),
        ("sft_coef", "not available on verl"),
    ],
)
def test_rlvrs_regularisers_and_modes_name_verls_field(key, where):
    """rlvr's KL, entropy and SFT terms, aggregation and advantages are not an objective's
    hyperparameters; under verl they are verl's fields (or unavailable), said in one line."""
    with pytest.raises(
        ValueError, match=rf"policy_loss.rlvr.{key} is not an objective's: .*{where}"
    ):
        PolicyLossConfig(loss_mode="rlvr_grpo", rlvr={key: 0.1})
    with pytest.raises(ValueError, match=rf"policy_loss has no key '{key}': .*{where}"):
        PolicyLossConfig(loss_mode="rlvr_grpo", **{key: 0.1})


def test_unknown_hyperparameter_lists_the_valid_ones():
    with pytest.raises(ValueError, match="unknown hyperparameter.*eps5.*valid: eps1, eps2"):
        objective_config("abc_grpo", actor("rlvr_abc_grpo", rlvr={"eps5": 0.1}))


def test_the_policy_loss_section_is_checked_where_verl_builds_it():
    """verl builds the actor config on the driver (``validate_config``) before any worker
    starts: a misspelt objective or hyperparameter, or an rlvr section verl's own loss would
    ignore, fails there with one line instead of on a worker at the first loss call."""
    from hydra.errors import InstantiationException
    from verl.utils.config import omega_conf_to_dataclass

    with pytest.raises(ValueError, match="unknown hyperparameter.*eps5.*valid: eps1"):
        PolicyLossConfig(loss_mode="rlvr_abc_grpo", rlvr={"eps5": 0.1})
    with pytest.raises(ValueError, match="unknown objective 'abcgrpo'; valid: grpo"):
        PolicyLossConfig(loss_mode="rlvr_abcgrpo")
    with pytest.raises(ValueError, match="loss_mode='vanilla' is not an rlvr loss"):
        PolicyLossConfig(loss_mode="vanilla", rlvr={"eps3": 0.3})
    with pytest.raises(ValueError, match="policy_loss.rlvr.eps_high.*clip_ratio_high"):
        PolicyLossConfig(loss_mode="rlvr_gppo", rlvr={"eps_high": 0.3})
    assert PolicyLossConfig(loss_mode="vanilla").rlvr == {}
    overrides = [
        "actor_rollout_ref.actor.policy_loss.loss_mode=rlvr_abc_grpo",
        "actor_rollout_ref.actor.policy_loss._target_=rlvr.engines.verl.PolicyLossConfig",
        "+actor_rollout_ref.actor.policy_loss.rlvr.eps5=0.3",
    ]
    config = compose(overrides)
    with pytest.raises(InstantiationException, match="unknown hyperparameter.*eps5"):
        omega_conf_to_dataclass(config.actor_rollout_ref.actor.policy_loss)


def test_a_hyperparameter_outside_the_rlvr_section_says_where_it_goes():
    """``+actor_rollout_ref.actor.policy_loss.eps3=0.3`` (``rlvr.`` left out) fails on the
    driver with one line naming ``policy_loss.rlvr``, not the dataclass's ``unexpected keyword
    argument``; a width verl has a field for names that field."""
    from hydra.errors import InstantiationException
    from verl.utils.config import omega_conf_to_dataclass

    overrides = [
        "actor_rollout_ref.actor.policy_loss.loss_mode=rlvr_abc_grpo",
        "actor_rollout_ref.actor.policy_loss._target_=rlvr.engines.verl.PolicyLossConfig",
        "+actor_rollout_ref.actor.policy_loss.eps3=0.3",
    ]
    config = compose(overrides)
    where = r"policy_loss has no key 'eps3': .* go in policy_loss.rlvr \(\+actor_rollout_ref"
    with pytest.raises(InstantiationException, match=where):
        omega_conf_to_dataclass(config.actor_rollout_ref.actor.policy_loss)
    with pytest.raises(ValueError, match="no key 'eps_high': set actor.clip_ratio_high"):
        PolicyLossConfig(loss_mode="rlvr_gppo", eps_high=0.3)
    assert PolicyLossConfig(loss_mode="rlvr_abc_grpo", clip_cov_lb=2.0).clip_cov_lb == 2.0


def test_without_rlvrs_target_the_mistakes_surface_as_the_docs_say():
    """docs/engines.md: without ``_target_=rlvr.engines.verl.PolicyLossConfig`` verl's own
    ``policy_loss`` passes a misspelt rlvr loss mode (found only at the worker's first update)
    and refuses an ``rlvr`` section with its ``unexpected keyword argument``; a misspelt
    estimator is found at the first advantages, and ``gae`` (verl's default) starts a critic."""
    from hydra.errors import InstantiationException
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn, get_policy_loss_fn
    from verl.trainer.ppo.utils import need_critic
    from verl.utils.config import omega_conf_to_dataclass

    config = compose(["actor_rollout_ref.actor.policy_loss.loss_mode=rlvr_abcgrpo"])
    policy_loss = omega_conf_to_dataclass(config.actor_rollout_ref.actor.policy_loss)
    with pytest.raises(ValueError, match=r"Unsupported loss mode: rlvr_abcgrpo\. Supported"):
        get_policy_loss_fn(policy_loss.loss_mode)
    config = compose(["+actor_rollout_ref.actor.policy_loss.rlvr.eps3=0.3"])
    with pytest.raises(InstantiationException, match="unexpected keyword argument 'rlvr'"):
        omega_conf_to_dataclass(config.actor_rollout_ref.actor.policy_loss)
    with pytest.raises(ValueError, match="Unknown advantage estimator simply: rlvr_group_means"):
        get_adv_estimator_fn("rlvr_group_means")
    assert need_critic(compose([])) and compose([]).algorithm.adv_estimator == "gae"
    docs = (ROOT / "docs/engines.md").read_text()
    for quoted in (
        "Unsupported loss mode: rlvr_abcgrpo",
        "unexpected keyword",
        "simply: rlvr_group",
    ):
        assert quoted in docs


def test_hydra_overrides_reach_the_actor_config():
    """The documented overrides compose with verl's own config file into the actor config
    the workers build (verl instantiates it from ``_target_``)."""
    from omegaconf import OmegaConf
    from verl.utils.config import omega_conf_to_dataclass

    overrides = [
        "actor_rollout_ref.actor.policy_loss.loss_mode=rlvr_abc_grpo",
        "actor_rollout_ref.actor.policy_loss._target_=rlvr.engines.verl.PolicyLossConfig",
        "+actor_rollout_ref.actor.policy_loss.rlvr.eps3=0.3",
        "+actor_rollout_ref.actor.policy_loss.rlvr.eps2=0.1",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        "actor_rollout_ref.rollout.n=4",
    ]
    config = compose(overrides)
    OmegaConf.resolve(config)
    actor_config = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
    assert actor_config.policy_loss.loss_mode == "rlvr_abc_grpo"
    cfg = objective_config("abc_grpo", actor_config)
    assert cfg.params == AbcConfig(eps2=0.1, eps3=0.3)


ROOT = Path(__file__).resolve().parents[3]
SHELL_VALUES = {"$DATA": "data/chain_sum", "$MODEL": "/models/m", "$HERE": "examples", "$GPUS": "1"}


def command_overrides(text: str) -> list[str]:
    """The ``key=value`` overrides of the ``python -m verl.trainer.main_ppo`` command in ``text``
    (a script's ``overrides=( ... )`` array, which it hands to that command)."""
    if "\noverrides=(\n" in text:
        command = text.split("\noverrides=(\n", 1)[1].split("\n)\n", 1)[0]
    else:
        start = text.index("python -m verl.trainer.main_ppo")
        lines = []
        for line in text[start:].splitlines():
            lines.append(line.rstrip("\\").strip())
            if not line.rstrip().endswith("\\"):
                break
        command = " ".join(lines).removeprefix("python -m verl.trainer.main_ppo")
    for name, value in SHELL_VALUES.items():
        command = command.replace(name, value)
    return [word for word in shlex.split(command, comments=True) if word not in ("$@", "...")]


@pytest.mark.parametrize("source", ["docs/engines.md", "examples/verl_abc_grpo.sh", "README.md"])
def test_documented_command_lines_compose_with_verl_config(source):
    """Every override of the documented verl command is a key of verl's config, and the actor
    config it gives builds rlvr's objective on the worker side."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    from rlvr.engines.verl import ESTIMATORS

    overrides = command_overrides((ROOT / source).read_text())
    assert "actor_rollout_ref.actor.policy_loss.loss_mode=rlvr_abc_grpo" in overrides
    if source == "README.md":  # its "..." stands for the batch sizes too
        overrides.append("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2")
    config = compose(overrides)
    OmegaConf.resolve(config)
    actor_config = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
    cfg = objective_config("abc_grpo", actor_config, loss_agg=actor_config.loss_agg_mode)
    assert cfg.agg_mode == "seq-mean-token-mean"
    assert config.algorithm.adv_estimator in ESTIMATORS
    assert type(actor_config.policy_loss).__module__.startswith("rlvr.")  # the driver checks it
    if source != "README.md":  # the README's line leaves the data and reward out ("...")
        assert config.reward.custom_reward_function.path.endswith("verl_reward.py")
        # what main_ppo's driver checks before Ray starts (batch sizes, micro-batches)
        validate_config(config, need_reference_policy(config), need_critic(config))
    if source.startswith("docs"):
        assert cfg.params == AbcConfig(eps3=0.3)
