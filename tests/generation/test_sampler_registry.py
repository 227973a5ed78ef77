"""The sampler registry: names, options, a new backend as one registration."""

import pytest
import torch

from rlvr.generation import (
    Sampler,
    SamplingConfig,
    available_samplers,
    make_sampler,
    sampler_options,
)
from rlvr.generation.lean import LeanOptions


def test_builtin_names_and_options():
    assert {"hf", "lean"} <= set(available_samplers())
    assert sampler_options("lean", prune=False) == LeanOptions(prune=False)
    with pytest.raises(ValueError, match="unknown option.*prun.*valid: fast, prune, share_prefill"):
        sampler_options("lean", prun=False)
    with pytest.raises(ValueError, match="unknown sampler 'nope'; valid: .*hf.*lean"):
        sampler_options("nope")


def test_samplers_follow_the_protocol(tiny_model):
    model, tokenizer = tiny_model
    for name in ("lean", "hf"):
        sampler = make_sampler(name, model, tokenizer)
        assert isinstance(sampler, Sampler)
        torch.manual_seed(0)
        out = sampler.generate([[5, 6, 7], [8]], n=3, sampling=SamplingConfig(max_new_tokens=4))
        assert out.response_ids.shape[0] == 6 and out.prompt_index == [0, 0, 0, 1, 1, 1]
        assert out.logprobs is None  # these samplers report no log-probs
        sampler.sync_weights()
        sampler.close()
