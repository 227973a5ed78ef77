"""A sampler registered by name drives rollouts and evaluation; old config keys still read."""

from dataclasses import dataclass

import pytest

from rlvr.generation import SAMPLERS, register_sampler
from rlvr.generation.lean import LeanOptions, LeanSampler


@dataclass(frozen=True)
class CountingOptions:
    """Options of the test sampler."""

    label: str = "x"
    """A tag."""


class CountingSampler(LeanSampler):
    """The lean sampler, counting the weight pushes and generate calls."""

    syncs = 0
    calls = 0

    def sync_weights(self):
        type(self).syncs += 1

    def generate(self, prompt_ids, *, n, sampling):
        type(self).calls += 1
        return super().generate(prompt_ids, n=n, sampling=sampling)


def test_a_registered_backend_drives_training(train_config):
    from rlvr.train.loop import train

    register_sampler("counting", options=CountingOptions)(
        lambda model, tok, opts: CountingSampler(model, tok, LeanOptions())
    )
    try:
        cfg = train_config(
            "steps=2",
            "rollout.sampler=counting",
            "rollout.sampler_options={label: y}",
            "eval.at_end=true",
        )
        train(cfg)
        assert CountingSampler.syncs == 2  # once before each step's rollout
        assert CountingSampler.calls == 3  # two rollouts and the held-out evaluation
        with pytest.raises(ValueError, match="rollout.sampler_options: unknown option.*colour"):
            train_config("rollout.sampler=counting", "rollout.sampler_options={colour: 1}")
    finally:
        SAMPLERS.pop("counting")


def test_old_engine_key_is_read_as_sampler(train_config):
    with pytest.warns(UserWarning, match="rollout.engine is now rollout.sampler"):
        cfg = train_config("rollout.engine=hf")
    assert cfg.rollout.sampler == "hf"
