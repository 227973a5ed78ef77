"""The base of samplers that draw from the policy model itself (``lean``, ``hf``)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rlvr.generation.base import (
    Generation,
    SamplingConfig,
    check_prompts,
    eos_ids,
    finish,
    left_pad,
    no_gradients,
    pad_id,
    varying_shape_attention,
)


class PolicySampler:
    """Samples with the live model: weights need no syncing, nothing to release.

    Subclasses implement :meth:`sample_tokens`; this class pads the prompts, repeats each
    ``n`` times, and turns the raw tokens into a :class:`Generation`.
    """

    def __init__(self, model, tokenizer, options) -> None:
        self.model, self.tokenizer, self.options = model, tokenizer, options

    def generate(
        self, prompt_ids: Sequence[Sequence[int]], *, n: int, sampling: SamplingConfig
    ) -> Generation:
        """``n`` completions of each prompt, drawn from the global torch RNG."""
        check_prompts(prompt_ids, n)
        eos = eos_ids(self.model, self.tokenizer)
        padding = pad_id(self.tokenizer, eos)
        device = next(self.model.parameters()).device
        ids, mask = left_pad(prompt_ids, padding)
        ids = ids.repeat_interleave(n, dim=0).to(device)
        mask = mask.repeat_interleave(n, dim=0).to(device)
        with no_gradients(device), varying_shape_attention():
            tokens = self.sample_tokens(ids, mask, sampling, eos, padding, group=n)
        return finish(self.tokenizer, ids, mask, tokens, eos, n=n)

    def sample_tokens(
        self,
        prompt_ids: torch.Tensor,
        prompt_mask: torch.Tensor,
        sampling: SamplingConfig,
        eos: list[int],
        padding: int,
        *,
        group: int,
    ) -> torch.Tensor:
        """[N, T] sampled tokens for [N, P] left-padded prompts (runs of ``group`` copies)."""
        raise NotImplementedError

    def sync_weights(self) -> None:
        """Nothing to do: every call reads the model's current weights."""

    def close(self) -> None:
        """Nothing to release."""
