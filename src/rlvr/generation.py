"""Sampling groups of completions from a causal LM.

One function, :func:`generate`, shared by the trainer's rollouts and by the evaluation
harness, so that training reward and evaluation score come from the same sampler.
Prompts are fully formatted strings (the data layer applies chat templates); they are
tokenised without extra special tokens and left-padded, completions are right-padded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingConfig:
    """How completions are sampled."""

    max_new_tokens: int = 256
    """Longest completion; a completion that reaches it without EOS is ``truncated``."""
    temperature: float = 1.0
    """Softmax temperature; 0 means greedy decoding."""
    top_p: float = 1.0
    """Nucleus sampling mass (1.0 disables it)."""
    top_k: int = 0
    """Keep only the ``top_k`` most likely tokens (0 disables it)."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")


@dataclass
class Generation:
    """``N = len(prompts) * n`` completions, grouped contiguously by prompt."""

    prompt_ids: torch.Tensor
    """[N, P] prompt tokens, left-padded with the pad token."""
    prompt_mask: torch.Tensor
    """[N, P] 1 on real prompt tokens."""
    response_ids: torch.Tensor
    """[N, T] sampled tokens, right-padded; T <= max_new_tokens."""
    response_mask: torch.Tensor
    """[N, T] 1 on generated tokens up to and including the EOS token."""
    truncated: torch.Tensor
    """[N] bool: the completion hit ``max_new_tokens`` without an EOS."""
    texts: list[str]
    """N decoded completions, special tokens removed."""
    prompt_index: list[int]
    """N indices into ``prompts``: completion j answers ``prompts[prompt_index[j]]``."""

    @property
    def response_lengths(self) -> torch.Tensor:
        """[N] number of generated tokens (EOS included)."""
        return self.response_mask.sum(dim=1)


def _eos_ids(model, tokenizer) -> list[int]:
    """Every token id that ends a completion (model's generation config and tokenizer)."""
    ids = model.generation_config.eos_token_id
    ids = [] if ids is None else ([ids] if isinstance(ids, int) else list(ids))
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    if not ids:
        raise ValueError("the model and tokenizer define no EOS token; completions could never end")
    return ids


def response_mask_from_ids(response_ids: torch.Tensor, eos_ids: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mask [N, T], truncated [N])``: mask covers tokens up to and including the first EOS."""
    is_eos = torch.isin(response_ids, torch.tensor(list(eos_ids), device=response_ids.device))
    seen_before = torch.cumsum(is_eos.long(), dim=1) - is_eos.long()  # EOS tokens strictly before t
    mask = (seen_before == 0).long()
    truncated = ~is_eos.any(dim=1)
    return mask, truncated


@torch.no_grad()
def generate(model, tokenizer, prompts: Sequence[str], *, n: int = 1, sampling: SamplingConfig = SamplingConfig()) -> Generation:
    """Sample ``n`` completions for each prompt (uses the global torch RNG)."""
    if not prompts:
        raise ValueError("prompts is empty")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    eos_ids = _eos_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        enc = tokenizer(list(prompts), return_tensors="pt", padding=True, add_special_tokens=False)
    finally:
        tokenizer.padding_side = side
    device = next(model.parameters()).device
    prompt_ids = enc["input_ids"].repeat_interleave(n, dim=0).to(device)
    prompt_mask = enc["attention_mask"].repeat_interleave(n, dim=0).to(device)
    greedy = sampling.temperature == 0
    out = model.generate(
        input_ids=prompt_ids,
        attention_mask=prompt_mask,
        max_new_tokens=sampling.max_new_tokens,
        do_sample=not greedy,
        # Explicit values: a model's generation_config may carry its own (e.g. top_k=50).
        temperature=1.0 if greedy else sampling.temperature,
        top_p=1.0 if greedy else sampling.top_p,
        top_k=0 if greedy else sampling.top_k,
        eos_token_id=eos_ids,
        pad_token_id=pad_id,
    )
    response_ids = out[:, prompt_ids.shape[1] :]
    mask, truncated = response_mask_from_ids(response_ids, eos_ids)
    response_ids = torch.where(mask.bool(), response_ids, torch.full_like(response_ids, pad_id))
    texts = tokenizer.batch_decode(response_ids, skip_special_tokens=True)
    return Generation(
        prompt_ids=prompt_ids,
        prompt_mask=prompt_mask,
        response_ids=response_ids,
        response_mask=mask,
        truncated=truncated,
        texts=texts,
        prompt_index=[i for i in range(len(prompts)) for _ in range(n)],
    )
