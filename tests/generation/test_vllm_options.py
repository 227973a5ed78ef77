"""The ``vllm`` sampler's options and its one-line error where vLLM is missing (any environment)."""

from __future__ import annotations

import importlib.util

import pytest

from rlvr.generation import available_samplers, make_sampler, sampler_options
from rlvr.train.config import RolloutConfig

HAS_VLLM = importlib.util.find_spec("vllm") is not None


def test_vllm_is_found_by_name():
    assert "vllm" in available_samplers()


def test_options_are_checked_without_starting_an_engine():
    opts = sampler_options("vllm", gpu_memory_utilization=0.5, dtype="bfloat16", max_model_len=512)
    assert (opts.gpu_memory_utilization, opts.dtype, opts.max_model_len) == (0.5, "bfloat16", 512)
    assert opts.seeded and opts.kv_cache_gib is None and opts.enforce_eager is None
    with pytest.raises(ValueError, match="gpu_memory_utilization must be in"):
        sampler_options("vllm", gpu_memory_utilization=1.5)
    with pytest.raises(ValueError, match="dtype must be one of"):
        sampler_options("vllm", dtype="int8")
    with pytest.raises(ValueError, match="kv_cache_gib"):
        sampler_options("vllm", kv_cache_gib=0)


def test_rollout_config_names_a_bad_option():
    RolloutConfig(sampler="vllm", sampler_options={"kv_cache_gib": 2.0})
    with pytest.raises(
        ValueError,
        match=r"rollout.sampler_options: unknown option\(s\) memory .*gpu_memory_utilization",
    ):
        RolloutConfig(sampler="vllm", sampler_options={"memory": 0.5})


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here")
def test_missing_vllm_is_one_clear_line(tiny_model):
    model, tokenizer = tiny_model
    with pytest.raises(ValueError) as err:
        make_sampler("vllm", model, tokenizer)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith('the vllm sampler needs vLLM: pip install "rlvr[vllm]"')
