"""The ``hf`` sampler: Hugging Face ``model.generate`` with the run's sampling settings."""

from __future__ import annotations

import torch

from rlvr.generation.policy import PolicySampler
from rlvr.generation.registry import register_sampler


@register_sampler("hf")
class HFSampler(PolicySampler):
    """``model.generate`` (works for any causal LM; slower than ``lean`` on a CPU)."""

    def sample_tokens(self, prompt_ids, prompt_mask, sampling, eos, padding, *, group):
        greedy = sampling.temperature == 0
        out = self.model.generate(
            input_ids=prompt_ids,
            attention_mask=prompt_mask,
            max_new_tokens=sampling.max_new_tokens,
            do_sample=not greedy,
            # Explicit values: a model's generation_config may carry its own (e.g. top_k=50).
            temperature=1.0 if greedy else sampling.temperature,
            top_p=1.0 if greedy else sampling.top_p,
            top_k=0 if greedy else sampling.top_k,
            eos_token_id=eos,
            pad_token_id=padding,
        )
        return torch.as_tensor(out)[:, prompt_ids.shape[1] :]
