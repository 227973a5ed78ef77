"""Sampling groups of completions from a causal LM, through a registry of samplers.

One entry point, shared by the trainer's rollouts and by the evaluation harness, so that
training reward and evaluation score come from the same sampler:

>>> # sampler = make_sampler("lean", model, tokenizer)
>>> # out = sampler.generate(prompt_ids, n=8, sampling=SamplingConfig(max_new_tokens=64))

:func:`generate` (prompts as formatted strings) and :func:`generate_ids` (token ids) build
a sampler by name for one call. Samplers: ``lean`` (default, :mod:`rlvr.generation.lean`),
``hf`` (``model.generate``) and any registered with :func:`register_sampler`.
"""

from __future__ import annotations

from collections.abc import Sequence

from rlvr.generation.base import (
    Generation,
    SamplingConfig,
    left_pad,
    position_ids_from_mask,
    response_mask_from_ids,
)
from rlvr.generation.registry import (
    SAMPLERS,
    Sampler,
    available_samplers,
    make_sampler,
    register_sampler,
    sampler_options,
)
from rlvr.generation.warp import next_tokens, warp_logits

DEFAULT_SAMPLING = SamplingConfig()
"""256 new tokens at temperature 1, no top-p or top-k."""

__all__ = [
    "SAMPLERS",
    "Generation",
    "Sampler",
    "SamplingConfig",
    "available_samplers",
    "generate",
    "generate_ids",
    "left_pad",
    "make_sampler",
    "next_tokens",
    "position_ids_from_mask",
    "register_sampler",
    "response_mask_from_ids",
    "sampler_options",
    "warp_logits",
]


def generate(
    model,
    tokenizer,
    prompts: Sequence[str],
    *,
    n: int = 1,
    sampling: SamplingConfig = DEFAULT_SAMPLING,
    sampler: str | Sampler = "lean",
) -> Generation:
    """Sample ``n`` completions for each formatted prompt string (uses the global torch RNG)."""
    if not prompts:
        raise ValueError("prompts is empty")
    enc = tokenizer(list(prompts), add_special_tokens=False)
    return generate_ids(model, tokenizer, enc["input_ids"], n=n, sampling=sampling, sampler=sampler)


def generate_ids(
    model,
    tokenizer,
    prompt_ids: Sequence[Sequence[int]],
    *,
    n: int = 1,
    sampling: SamplingConfig = DEFAULT_SAMPLING,
    sampler: str | Sampler = "lean",
) -> Generation:
    """Like :func:`generate` for prompts given as token ids (each non-empty)."""
    if isinstance(sampler, str):
        sampler = make_sampler(sampler, model, tokenizer)
    return sampler.generate(prompt_ids, n=n, sampling=sampling)
