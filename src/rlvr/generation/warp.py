"""Temperature, top-k and top-p, exactly as Hugging Face's logits warpers apply them."""

from __future__ import annotations

import torch

from rlvr.generation.base import SamplingConfig


def warp_logits(logits: torch.Tensor, sampling: SamplingConfig) -> torch.Tensor:
    """[N, V] float32 logits after temperature, top-k and top-p (HF's warper order and maths).

    At temperature 0 (greedy) only each row's argmax stays finite: the point mass
    :func:`next_tokens` draws from.
    """
    if sampling.temperature == 0:
        keep = torch.zeros_like(logits, dtype=torch.bool)
        keep.scatter_(-1, logits.argmax(dim=-1, keepdim=True), True)
        return logits.masked_fill(~keep, -float("inf"))
    scores = logits / sampling.temperature if sampling.temperature != 1.0 else logits
    if sampling.top_k:
        kth = torch.topk(scores, min(sampling.top_k, scores.shape[-1]))[0][..., -1, None]
        scores = scores.masked_fill(scores < kth, -float("inf"))
    if sampling.top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=False)
        remove = sorted_scores.softmax(dim=-1).cumsum(dim=-1) <= (1 - sampling.top_p)
        remove[..., -1:] = False
        scores = scores.masked_fill(remove.scatter(1, order, remove), -float("inf"))
    return scores


def next_tokens(logits: torch.Tensor, sampling: SamplingConfig) -> torch.Tensor:
    """[N] tokens drawn from [N, V] float32 logits (argmax when temperature is 0)."""
    if sampling.temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(warp_logits(logits, sampling), dim=-1)
    return torch.multinomial(probs, num_samples=1).squeeze(1)
