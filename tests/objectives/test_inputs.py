"""Bad input to policy_loss is a ValueError naming the argument: always for types and shapes,
with ``validate=True`` for what only the values show."""

import pytest
import torch

from rlvr.advantages import group_stats
from rlvr.objectives import make_config, policy_loss


def args(**over):
    logp = torch.zeros(4, 3, requires_grad=True)
    base = {
        "logp": logp,
        "old_logp": torch.zeros(4, 3),
        "advantages": torch.tensor([1.0, -1.0, 0.5, -0.5]),
        "mask": torch.ones(4, 3),
    }
    base.update(over)
    return base


def nan_at(pos, value=float("nan")):
    t = torch.zeros(4, 3)
    t[pos] = value
    return t


BAD = [
    ({"logp": nan_at((0, 0))}, "logp contains NaN"),
    ({"logp": nan_at((1, 2), float("inf"))}, "logp contains NaN or inf"),
    ({"old_logp": nan_at((0, 1))}, "old_logp contains NaN"),
    ({"logp": torch.zeros(4, 2)}, "logp must be a tensor of shape"),
    ({"old_logp": torch.zeros(3, 3)}, "old_logp must be a tensor of shape"),
    ({"advantages": torch.zeros(5)}, "advantages must have shape"),
    ({"advantages": torch.zeros(4, 2)}, "advantages must have shape"),
    ({"advantages": torch.tensor([1.0, float("nan"), 0.0, 0.0])}, "advantages contain NaN"),
    ({"mask": torch.zeros(4, 3)}, "mask has no response tokens"),
    ({"mask": torch.full((4, 3), 2.0)}, "mask must hold only 0 and 1"),
    ({"mask": torch.ones(4)}, "mask must be a 2-D tensor"),
    ({"logp": torch.zeros(4, 3, dtype=torch.long)}, "logp must be a floating tensor"),
]


@pytest.mark.parametrize(("over", "match"), BAD)
def test_bad_tensors(over, match):
    with pytest.raises(ValueError, match=match):
        policy_loss("grpo", **args(**over), validate=True)


VALUE_ONLY = ("contains NaN", "contain NaN", "no response tokens", "only 0 and 1")


@pytest.mark.parametrize(
    ("over", "match"), [case for case in BAD if not any(m in case[1] for m in VALUE_ONLY)]
)
def test_types_and_shapes_are_checked_without_validate(over, match):
    with pytest.raises(ValueError, match=match):
        policy_loss("grpo", **args(**over))


def test_bad_values_pass_unnoticed_without_validate():
    loss, _ = policy_loss("grpo", **args(logp=nan_at((0, 0))))
    assert torch.isnan(loss)


def test_nan_on_padding_is_allowed():
    mask = torch.ones(4, 3)
    mask[0, 2] = 0
    loss, _ = policy_loss("grpo", **args(logp=nan_at((0, 2)), mask=mask))
    assert torch.isfinite(loss)


@pytest.mark.parametrize("name", ["etr", "pmpo", "apmpo"])
def test_group_objectives_need_rewards(name):
    with pytest.raises(ValueError, match="rewards and group_size"):
        policy_loss(name, **args())
    with pytest.raises(ValueError, match="rewards and group_size"):
        policy_loss(name, **args(), rewards=torch.tensor([1.0, 0.0, 1.0, 0.0]))


def test_group_size_must_divide_batch():
    with pytest.raises(ValueError, match="group_size=3 does not divide"):
        policy_loss("etr", **args(), rewards=torch.tensor([1.0, 0.0, 1.0, 0.0]), group_size=3)


def test_rewards_shape_is_checked():
    with pytest.raises(ValueError, match=r"rewards must be a tensor of shape \[B\]"):
        policy_loss("etr", **args(), rewards=torch.ones(3), group_size=1)


def test_group_stats_rows_and_options_are_checked():
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="group_stats must be GroupStats with 4 rows"):
        policy_loss("etr", **args(), group_stats=group_stats(rewards, 2))
    wrong = group_stats(rewards, 2, pass_threshold=0.5).rows(slice(0, 4))
    with pytest.raises(ValueError, match="pass_threshold"):
        policy_loss("etr", **args(), group_stats=wrong)
    raw = group_stats(rewards, 2).rows(slice(0, 4))  # reward_range None, apmpo wants (0, 1)
    with pytest.raises(ValueError, match="reward_range"):
        policy_loss("apmpo", **args(), group_stats=raw)


def test_unknown_names():
    with pytest.raises(ValueError, match="unknown objective 'ppo2'; valid: grpo"):
        policy_loss("ppo2", **args())
    with pytest.raises(
        ValueError, match="unknown hyperparameter.*eps3.*valid: eps_low, eps_high, clip_c"
    ):
        policy_loss("grpo", **args(), eps3=0.3)
    with pytest.raises(ValueError, match="unknown loss_agg 'mean'; valid: token-mean"):
        policy_loss("grpo", **args(), loss_agg="mean")
    with pytest.raises(ValueError, match="unknown kl_estimator 'k4'; valid: k1, k2, k3"):
        policy_loss("grpo", **args(), kl_estimator="k4")


def test_config_object_is_accepted_and_checked():
    cfg = make_config("abc_grpo", eps3=0.5)
    a, _ = policy_loss("abc_grpo", **args(), config=cfg)
    b, _ = policy_loss("abc_grpo", **args(), eps3=0.5)
    assert torch.equal(a, b)
    with pytest.raises(ValueError, match="needs AbcConfig"):
        policy_loss("abc_grpo", **args(), config=make_config("grpo"))
    with pytest.raises(ValueError, match="not both"):
        policy_loss("abc_grpo", **args(), config=cfg, eps1=0.1)


def test_regulariser_inputs_are_required():
    with pytest.raises(ValueError, match="ref_logp is required"):
        policy_loss("grpo", **args(), kl_coef=0.1)
    with pytest.raises(ValueError, match="ref_logp must be a tensor of shape"):
        policy_loss("grpo", **args(), kl_coef=0.1, ref_logp=torch.zeros(4, 2))
    with pytest.raises(ValueError, match="rewards are required when sft_coef"):
        policy_loss("grpo", **args(), sft_coef=0.1)
    with pytest.raises(ValueError, match="entropy is required"):
        policy_loss("grpo", **args(), entropy_coef=0.01)
    with pytest.raises(ValueError, match="entropy must carry a gradient"):
        policy_loss("grpo", **args(), entropy_coef=0.01, entropy=torch.ones(4, 3))
    with pytest.raises(ValueError, match="kl_coef must be a finite number >= 0"):
        policy_loss("grpo", **args(), kl_coef=-1.0, ref_logp=torch.zeros(4, 3))


def test_sequence_objectives_reject_sign_changes_within_a_row():
    adv = torch.tensor([[1.0, -1.0, 1.0]] * 4)
    with pytest.raises(ValueError, match="advantages: gmpo is a sequence-level objective"):
        policy_loss("gmpo", **args(advantages=adv), validate=True)


def _returning(make):
    """An objective (GRPO's config) whose loss function returns ``make(batch)``."""

    def loss_fn(batch, cfg):
        return make(batch)

    return loss_fn


def _output(loss=None, metrics=None):
    from rlvr.objectives import ClipInfo, ObjectiveOutput

    def make(batch):
        none = torch.zeros_like(batch.mask)
        per_token = -batch.ratio * batch.advantages if loss is None else loss(batch)
        clip = ClipInfo(batch.ratio, 0.8, 1.2, none, none)
        return ObjectiveOutput(per_token, clip, {} if metrics is None else metrics(batch))

    return make


BAD_OUTPUTS = [
    (lambda b: -b.ratio * b.advantages, "a Tensor, not an ObjectiveOutput", False),
    (_output(loss=lambda b: (b.ratio * b.advantages).sum(-1)), r"of shape \(4,\); needs", False),
    (_output(loss=lambda b: b.mask.long()), "dtype torch.int64; needs a float one", False),
    (_output(metrics=lambda b: {"mine/x": 0.5}), "metric 'mine/x' as float; needs a 0-dim", False),
    (_output(metrics=lambda b: {"mine/r": b.ratio}), r"'mine/r' as shape \(4, 3\)", False),
    (_output(loss=lambda b: b.ratio * float("nan")), "NaN or inf on response tokens", True),
    (_output(metrics=lambda b: {"clip/frac": b.ratio.sum()}), "metric.s. clip/frac, which", False),
]


@pytest.mark.parametrize(("make", "match", "validate"), BAD_OUTPUTS)
def test_an_objective_returning_the_wrong_thing_is_named(monkeypatch, make, match, validate):
    """An objective of your own that returned a bare tensor, a [B] loss, a float metric or a
    [B, T] one failed deep in the trainer with a traceback (AttributeError, a reshape
    error); a NaN loss was left out of every update with a warning, training nothing."""
    from rlvr.objectives import GrpoConfig, registry

    monkeypatch.setattr(registry, "OBJECTIVES", dict(registry.OBJECTIVES))
    registry.register_objective(
        "bad_out", config=GrpoConfig, advantage="group_std", loss_agg="token-mean", paper="p"
    )(_returning(make))
    with pytest.raises(ValueError, match=f"objective 'bad_out' returned .*{match}"):
        policy_loss("bad_out", **args(), validate=validate)
    if validate:  # a value check: without validate the NaN is the trainer's to count
        policy_loss("bad_out", **args())
