"""The ``hf`` sampler: Hugging Face ``model.generate`` with the run's sampling settings.

Only those settings: the model's own ``generation_config`` (a checkpoint's file may carry
``repetition_penalty``, ``no_repeat_ngram_size``, ``suppress_tokens``, ...) is set aside
for the call, so ``hf`` samples the distribution ``lean`` and ``vllm`` sample, the one
the trainer's log-probs are computed under.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from rlvr.generation.base import position_ids_from_mask
from rlvr.generation.lean import accepts_logits_to_keep, cache_keyword, new_cache
from rlvr.generation.policy import PolicySampler
from rlvr.generation.registry import register_sampler


@dataclass(frozen=True)
class HFOptions:
    """Switches of the ``hf`` sampler."""

    share_prefill: bool = True
    """Run each distinct prompt (all but its last token) once and copy its KV cache to its
    ``n`` rows; ``generate`` continues from that cache and draws the same tokens."""


@register_sampler("hf", options=HFOptions, logprobs=False)
class HFSampler(PolicySampler):
    """``model.generate`` (works for any causal LM; slower than ``lean`` on a CPU)."""

    def sample_tokens(self, prompt_ids, prompt_mask, sampling, eos, padding, *, group):
        greedy = sampling.temperature == 0
        share = self.options.share_prefill and group > 1 and prompt_ids.shape[1] > 1
        cache = shared_prefix(self.model, prompt_ids, prompt_mask, group) if share else None
        with own_settings_only(self.model):
            out = self.model.generate(
                input_ids=prompt_ids,
                attention_mask=prompt_mask,
                max_new_tokens=sampling.max_new_tokens,
                do_sample=not greedy,
                # Explicit values: without a generation_config, generate defaults to top_k=50.
                temperature=1.0 if greedy else sampling.temperature,
                top_p=1.0 if greedy else sampling.top_p,
                top_k=0 if greedy else sampling.top_k,
                eos_token_id=eos,
                pad_token_id=padding,
                **({} if cache is None else {cache_keyword(self.model): cache}),
            )
        return torch.as_tensor(out)[:, prompt_ids.shape[1] :]


def shared_prefix(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, group: int):
    """A ``DynamicCache`` of every prompt column but the last, each distinct prompt run once.

    The rows come in contiguous runs of ``group`` copies of one prompt; the cache of each
    run's first row is repeated ``group`` times.
    """
    n = prompt_ids.shape[0]
    if n % group:
        raise ValueError(f"{n} prompt rows do not come in groups of {group}")
    ids, mask = prompt_ids[::group, :-1], prompt_mask[::group, :-1]
    cache = new_cache(model)
    model(
        input_ids=ids,
        attention_mask=mask,
        position_ids=position_ids_from_mask(mask),
        **{cache_keyword(model): cache},
        use_cache=True,
        **({"logits_to_keep": 1} if accepts_logits_to_keep(model) else {}),
    )
    cache.batch_repeat_interleave(group)
    return cache


@contextlib.contextmanager
def own_settings_only(model) -> Iterator[None]:
    """``model.generation_config`` is an empty one inside the block, so ``generate`` applies
    no logits processor of the model's files; the model's own is put back after it."""
    from transformers import GenerationConfig

    saved = model.generation_config
    model.generation_config = GenerationConfig()
    try:
        yield
    finally:
        model.generation_config = saved
