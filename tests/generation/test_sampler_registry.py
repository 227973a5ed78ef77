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


def test_options_of_the_wrong_type_are_one_clear_error():
    """A quoted ``"false"`` would be truthy: no option is taken with a value its field cannot hold."""
    from rlvr.train.config import RolloutConfig

    with pytest.raises(
        ValueError, match=r"^option fast of sampler 'lean' must be bool, got 'false'$"
    ):
        sampler_options("lean", fast="false")
    with pytest.raises(ValueError, match=r"option share_prefill .* must be bool, got 0"):
        sampler_options("hf", share_prefill=0)
    with pytest.raises(
        ValueError,
        match=r"^rollout.sampler_options: option gpu_memory_utilization of sampler 'vllm' must be float, got 'half'$",
    ):
        RolloutConfig(sampler="vllm", sampler_options={"gpu_memory_utilization": "half"})
    with pytest.raises(ValueError, match=r"option max_model_len .* must be int or None, got 512.0"):
        sampler_options("vllm", max_model_len=512.0)
    opts = sampler_options("vllm", gpu_memory_utilization=1, kv_cache_gib=None, dtype="float16")
    assert (opts.gpu_memory_utilization, opts.dtype) == (1, "float16")  # an int is a float


def test_a_missing_package_is_said_before_a_model_loads():
    """A sampler declaring the package it imports is checked without importing it: the line
    it registered, or one naming the package; ``None`` when the package is there."""
    from rlvr.generation import SAMPLERS, register_sampler
    from rlvr.generation.registry import missing_package

    make = lambda model, tokenizer, options: None  # noqa: E731 (never made here)
    register_sampler("needs_nothing_here", requires="no_such_package_rlvr")(make)
    register_sampler("needs_it_said", requires="no_such_package_rlvr", missing="install it")(make)
    register_sampler("needs_torch", requires="torch")(make)
    try:
        said = missing_package("needs_nothing_here")
        assert said == "sampler 'needs_nothing_here' needs the no_such_package_rlvr package"
        assert missing_package("needs_it_said") == "install it"
        assert missing_package("needs_torch") is None and missing_package("lean") is None
    finally:
        for name in ("needs_nothing_here", "needs_it_said", "needs_torch"):
            SAMPLERS.pop(name)


def test_a_float_option_written_with_an_exponent_reads_as_its_number():
    """PyYAML reads `5e-1` as text: `--sampler-option gpu_memory_utilization=5e-1` (and the
    same in rollout.sampler_options) was refused as not a float, though `optim.lr=5e-5` reads."""
    from rlvr.generation import sampler_options

    assert sampler_options("vllm", gpu_memory_utilization="5e-1").gpu_memory_utilization == 0.5
    assert sampler_options("vllm", kv_cache_gib="2e0").kv_cache_gib == 2.0  # float | None
    assert sampler_options("vllm", dtype="float32").dtype == "float32"  # a text option stays
