import dataclasses

import pytest

from rlvr.objectives import (
    OBJECTIVES,
    AbcConfig,
    ApmpoConfig,
    DapoConfig,
    GrpoConfig,
    make_config,
    objective_spec,
)

NAMES = [
    "grpo",
    "dapo",
    "dr_grpo",
    "abc_grpo",
    "etr",
    "gppo",
    "cispo",
    "gspo",
    "gmpo",
    "pmpo",
    "apmpo",
]


def test_every_named_objective_is_registered():
    assert sorted(OBJECTIVES) == sorted(NAMES)


@pytest.mark.parametrize(
    ("name", "advantage", "agg", "stats"),
    [
        ("grpo", "group_std", "seq-mean-token-mean", False),
        ("dapo", "group_std", "token-mean", False),
        ("dr_grpo", "group_mean", "seq-mean-token-sum-norm", False),
        ("abc_grpo", "group_mean", "seq-mean-token-mean", False),
        ("etr", "group_std", "seq-mean-token-mean", True),
        ("gppo", "group_std", "token-mean", False),
        ("cispo", "group_std", "token-mean", False),
        ("gspo", "group_std", "seq-mean-token-mean", False),
        ("gmpo", "group_std", "seq-mean-token-mean", False),
        ("pmpo", "group_std", "seq-mean-token-mean", True),
        ("apmpo", "group_std", "seq-mean-token-mean", True),
    ],
)
def test_spec_defaults(name, advantage, agg, stats):
    spec = objective_spec(name)
    assert (spec.advantage_mode, spec.loss_agg, spec.needs_group_stats, spec.needs_rewards) == (
        advantage,
        agg,
        stats,
        stats,
    )
    assert dataclasses.is_dataclass(spec.config_cls)
    assert spec.config_cls.__dataclass_params__.frozen


def test_defaults_from_the_spec():
    assert make_config("grpo") == GrpoConfig(eps_low=0.2, eps_high=0.2, clip_c=None)
    assert make_config("dapo") == DapoConfig(eps_low=0.2, eps_high=0.28)
    assert make_config("abc_grpo") == AbcConfig(0.2, 0.2, 0.2, 0.2)
    etr = make_config("etr")
    assert (etr.eps_base, etr.lam1, etr.lam2, etr.pass_threshold, etr.eps_floor, etr.eps_ceil) == (
        0.2,
        0.1,
        0.1,
        0.0,
        0.01,
        0.95,
    )
    gppo = make_config("gppo")
    assert (gppo.eps_low, gppo.eps_high, gppo.b1, gppo.b2, gppo.clip_c) == (
        0.2,
        0.28,
        1.0,
        1.0,
        None,
    )
    cispo = make_config("cispo")
    assert (cispo.eps_low, cispo.eps_high) == (0.2, 0.28)
    gspo = make_config("gspo")
    assert (gspo.eps_low, gspo.eps_high) == (3e-4, 4e-4)
    gmpo = make_config("gmpo")
    assert (gmpo.eps_low, gmpo.eps_high) == (0.4, 0.4)
    pmpo = make_config("pmpo")
    assert (pmpo.gamma, pmpo.eps_low, pmpo.eps_high, pmpo.p_schedule, pmpo.p_min) == (
        0.8,
        0.2,
        0.2,
        "exp",
        0.05,
    )
    assert (pmpo.reward_range, pmpo.stats_scope) == ((0.0, 1.0), "batch")
    apmpo = make_config("apmpo")
    assert (apmpo.eps_min, apmpo.eps_max, apmpo.eps_low, apmpo.delta, apmpo.gamma) == (
        0.2,
        0.4,
        0.2,
        1e-6,
        0.8,
    )


def test_make_config_sets_and_validates():
    assert make_config("abc_grpo", eps3=0.3).eps3 == 0.3
    assert make_config("apmpo", reward_range=[-1, 1]).reward_range == (-1.0, 1.0)
    with pytest.raises(
        ValueError, match=r"unknown hyperparameter\(s\) eps5 .*valid: eps1, eps2, eps3, eps4"
    ):
        make_config("abc_grpo", eps5=0.1)
    with pytest.raises(ValueError, match="eps1 must be >= 0"):
        make_config("abc_grpo", eps1=-0.1)
    with pytest.raises(ValueError, match="clip_c"):
        make_config("grpo", clip_c=0.5)
    with pytest.raises(ValueError, match="p_schedule"):
        make_config("pmpo", p_schedule="cosine")
    with pytest.raises(ValueError, match="eps_min <= eps_max"):
        make_config("apmpo", eps_min=0.5, eps_max=0.3)
    with pytest.raises(ValueError, match="eps_floor"):
        make_config("etr", eps_floor=0.0)
    with pytest.raises(ValueError, match="stats_scope"):
        make_config("apmpo", stats_scope="micro")
    with pytest.raises(ValueError, match="eps3 must be a number, got '0.3'"):
        make_config("abc_grpo", eps3="0.3")
    with pytest.raises(ValueError, match="lam1 must be a number"):
        make_config("etr", lam1=None)


@pytest.mark.parametrize("name", ["grpo", "dapo", "dr_grpo", "gppo"])
def test_a_dual_clip_that_is_not_a_number_is_named(name):
    """``clip_c="3"`` (a string from a dict of hyperparameters) names the field, as eps does."""
    with pytest.raises(ValueError, match="clip_c must be a number, got '3'"):
        make_config(name, clip_c="3")


@pytest.mark.parametrize("value", ["[-1,1]", "01", 1.0, (0.0, 0.5, 1.0), ("a", "b"), None])
def test_a_reward_range_that_is_not_a_pair_of_numbers_is_named(value):
    with pytest.raises(ValueError, match=r"reward_range must be \(lo, hi\) with lo < hi, got"):
        make_config("apmpo", reward_range=value)


def test_unknown_objective_lists_valid_names():
    with pytest.raises(ValueError, match="unknown objective 'ppo'; valid: grpo, dapo, dr_grpo"):
        objective_spec("ppo")


def test_apmpo_config_is_frozen():
    cfg = ApmpoConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.eps_max = 1.0


def test_every_config_field_has_a_docstring():
    import ast
    import inspect

    for spec in OBJECTIVES.values():
        for cls in spec.config_cls.__mro__:
            if not dataclasses.is_dataclass(cls):
                continue
            tree = ast.parse(inspect.getsource(cls))
            body = tree.body[0].body
            for i, node in enumerate(body):
                if isinstance(node, ast.AnnAssign):
                    after = body[i + 1] if i + 1 < len(body) else None
                    assert isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant), (
                        f"{cls.__name__}.{node.target.id} has no docstring"
                    )


def test_register_objective_adds_a_spec_and_refuses_a_config_that_is_no_dataclass(monkeypatch):
    from rlvr.objectives import registry

    monkeypatch.setattr(registry, "OBJECTIVES", dict(registry.OBJECTIVES))

    @registry.register_objective(
        "mine", config=GrpoConfig, advantage="group_mean", loss_agg="token-mean", paper="p"
    )
    def mine_loss(batch, cfg):
        raise AssertionError("not called")

    spec = registry.objective_spec("mine")
    assert (spec.loss_fn, spec.advantage_mode, spec.loss_agg) == (
        mine_loss,
        "group_mean",
        "token-mean",
    )
    assert not spec.needs_group_stats and not spec.sequence_level
    with pytest.raises(ValueError, match="objective 'bad': config must be a dataclass"):
        registry.register_objective(
            "bad", config=dict, advantage="group_std", loss_agg="token-mean", paper="p"
        )
    with pytest.raises(ValueError, match="objective 'bad': unknown loss_agg 'mean'"):
        registry.register_objective(
            "bad", config=GrpoConfig, advantage="group_std", loss_agg="mean", paper="p"
        )


OWN_OBJECTIVE = """
from dataclasses import dataclass

from rlvr.objectives import ClipInfo, ObjectiveOutput, register_objective


@dataclass(frozen=True)
class MineConfig:
    mine_eps: float = 0.2
    \"\"\"Clip width.\"\"\"


@register_objective("mine_{tag}", config=MineConfig, advantage="group_mean",
                    loss_agg="token-mean", paper="mine")
def mine_loss(batch, cfg):
    ratio = batch.ratio.clamp(1 - cfg.mine_eps, 1 + cfg.mine_eps)
    none = batch.ratio < 0
    return ObjectiveOutput(-ratio * batch.advantages, ClipInfo(batch.ratio, 0.8, 1.2, none, none), {{}})
"""


def test_a_dotted_name_imports_your_objective_module(tmp_path, monkeypatch):
    """`objective.name=my_objectives.mine` reaches an objective your own module registers
    (a file in the working directory, not on sys.path), as `reward.verifier=module.name`
    does: `rlvr train` and study runs had no way to import it ("unknown objective")."""
    import sys

    from rlvr.objectives import registry
    from rlvr.train.config import TrainConfig
    from rlvr.train.overrides import load_config

    monkeypatch.setattr(registry, "OBJECTIVES", dict(registry.OBJECTIVES))
    tag = tmp_path.name.replace("-", "_")
    (tmp_path / f"objs_{tag}.py").write_text(OWN_OBJECTIVE.format(tag=tag))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in sys.path if p not in ("", ".")])
    name = f"objs_{tag}.mine_{tag}"
    cfg = load_config(TrainConfig, "demo", [f"objective.name={name}", "objective.mine_eps=0.3"])
    assert cfg.objective.name == name and cfg.objective.params.mine_eps == 0.3
    assert cfg.objective.advantage_mode == "group_mean" and cfg.objective.agg_mode == "token-mean"
    with pytest.raises(
        ValueError,
        match=rf"registers no 'mine_{tag[:-1]}'; registered: .*\(did you mean mine_{tag}\?\)",
    ):
        objective_spec(f"objs_{tag}.mine_{tag[:-1]}")
    with pytest.raises(ValueError, match="no module 'not_here_at_all' to import"):
        objective_spec("not_here_at_all.mine")
    with pytest.raises(
        ValueError, match=r"unknown objective 'abc_grp'; .* registers \(did you mean abc_grpo\?\)$"
    ):
        objective_spec("abc_grp")


def test_a_taken_objective_name_is_refused(monkeypatch):
    """A second objective under a taken name replaced it silently: a module of yours that
    registered `grpo` changed what every `grpo` run trains."""
    from rlvr.objectives import registry

    monkeypatch.setattr(registry, "OBJECTIVES", dict(registry.OBJECTIVES))
    with pytest.raises(ValueError, match=r"objective 'grpo' is already registered \(rlvr.obj"):
        registry.register_objective(
            "grpo", config=GrpoConfig, advantage="group_std", loss_agg="token-mean", paper="p"
        )(lambda batch, cfg: None)
    assert registry.OBJECTIVES["grpo"].config_cls is GrpoConfig
    same = registry.OBJECTIVES["grpo"].loss_fn  # the same function again (a reload): allowed
    registry.register_objective(
        "grpo", config=GrpoConfig, advantage="group_std", loss_agg="seq-mean-token-mean", paper="p"
    )(same)
    register = registry.register_objective(
        "lam", config=GrpoConfig, advantage="group_std", loss_agg="token-mean", paper="p"
    )
    register(lambda batch, cfg: None)
    with pytest.raises(ValueError, match=r"'lam' is already registered \(.*<lambda>:\d+\)"):
        register(lambda batch, cfg: 0)  # another lambda: every one is named <lambda>
    with pytest.raises(ValueError, match="objective name must be non-empty without '.'"):
        registry.register_objective(
            "my.mine", config=GrpoConfig, advantage="group_std", loss_agg="token-mean", paper="p"
        )


def test_a_loss_that_cannot_take_batch_and_config_is_refused_when_registered(monkeypatch):
    """`def mine(batch)` registered, and `rlvr train` ran a whole held-out evaluation before
    its first step ended in a traceback: TypeError: mine() takes 1 positional argument."""
    from rlvr.objectives import registry

    monkeypatch.setattr(registry, "OBJECTIVES", dict(registry.OBJECTIVES))
    register = registry.register_objective(
        "mine", config=GrpoConfig, advantage="group_std", loss_agg="token-mean", paper="p"
    )

    def one(batch):
        return None

    def three(batch, cfg, extra):
        return None

    for loss_fn, shown in ((one, r"\(batch\)"), (three, r"\(batch, cfg, extra\)")):
        with pytest.raises(
            ValueError, match=rf"objective 'mine': .*\.{loss_fn.__name__} takes {shown}; "
        ):
            register(loss_fn)
    assert "mine" not in registry.OBJECTIVES
    register(lambda batch, cfg, extra=None: None)  # a defaulted third argument is fine
    register_star = registry.register_objective(
        "star", config=GrpoConfig, advantage="group_std", loss_agg="token-mean", paper="p"
    )
    register_star(lambda *args: None)


def test_group_stats_needs_a_config_that_says_which(monkeypatch):
    """`group_stats=True` with a config lacking `stats_options()` registered, and the first
    step failed with AttributeError: 'MineConfig' object has no attribute 'stats_options'."""
    from rlvr.objectives import registry

    monkeypatch.setattr(registry, "OBJECTIVES", dict(registry.OBJECTIVES))
    with pytest.raises(ValueError, match=r"group_stats=True needs a method GrpoConfig.stats_opt"):
        registry.register_objective(
            "mine", config=GrpoConfig, advantage="group_std", loss_agg="token-mean", paper="p",
            group_stats=True,
        )  # fmt: skip
    registry.register_objective(
        "mine", config=type(make_config("etr")), advantage="group_std", loss_agg="token-mean",
        paper="p", group_stats=True,
    )(lambda batch, cfg: None)  # fmt: skip


def test_a_hyperparameter_named_as_a_section_key_is_refused(monkeypatch):
    """A config field `kl_coef` was shadowed: `objective.kl_coef=0.3` set the KL weight (and
    loaded a reference model) while the objective kept its own 0.5, without a word."""
    import torch

    from rlvr.objectives import ObjectiveConfig, policy_loss, registry

    @dataclasses.dataclass(frozen=True)
    class Clash:
        kl_coef: float = 0.5
        """Clashes with the section's own key."""

    monkeypatch.setattr(registry, "OBJECTIVES", dict(registry.OBJECTIVES))
    registry.register_objective(
        "clash", config=Clash, advantage="group_std", loss_agg="token-mean", paper="p"
    )(lambda batch, cfg: None)
    with pytest.raises(ValueError, match=r"hyperparameter\(s\) kl_coef of Clash share a name"):
        ObjectiveConfig("clash")
    ones = torch.ones(2, 3)
    with pytest.raises(ValueError, match="share a name with the objective section's own keys"):
        policy_loss("clash", logp=ones, old_logp=ones, advantages=ones[:, 0], mask=ones)


def test_a_hyperparameter_named_as_a_policy_loss_argument_is_refused_as_a_keyword(monkeypatch):
    """`policy_loss("x", ..., validate=0.3)` for a hyperparameter `validate` took the 0.3 as
    policy_loss's own `validate` and ran the objective with its default, without a word."""
    import torch

    from rlvr.objectives import policy_loss, registry

    @dataclasses.dataclass(frozen=True)
    class Scaled:
        validate: float = 0.5
        """Clashes with policy_loss's `validate`."""

    def scaled(batch, cfg):
        from rlvr.objectives import ClipInfo, ObjectiveOutput

        none = torch.zeros_like(batch.mask)
        clip = ClipInfo(batch.ratio, 0.8, 1.2, none, none)
        return ObjectiveOutput(-batch.ratio * batch.advantages * cfg.validate, clip, {})

    monkeypatch.setattr(registry, "OBJECTIVES", dict(registry.OBJECTIVES))
    registry.register_objective(
        "scaled", config=Scaled, advantage="group_std", loss_agg="token-mean", paper="p"
    )(scaled)
    zeros = torch.zeros(2, 3)
    tensors = {"logp": zeros, "old_logp": zeros, "advantages": torch.ones(2), "mask": zeros + 1}
    with pytest.raises(ValueError, match=r"hyperparameter\(s\) validate share a name with poli"):
        policy_loss("scaled", **tensors, validate=0.3)
    loss, _ = policy_loss("scaled", **tensors, config=Scaled(0.3))
    assert float(loss) == pytest.approx(-0.3)
