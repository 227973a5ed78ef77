"""The log-prob pass: per-token log-probs (and entropy) of a batch's responses under the
model's autocast."""

from __future__ import annotations

import contextlib

import torch

from rlvr.ops import TokenStats, sequence_token_stats
from rlvr.train.config import ModelConfig


def autocast(cfg: ModelConfig):
    """The forward-pass autocast context of ``cfg`` (a no-op unless ``autocast=bf16``)."""
    if cfg.autocast == "bf16":
        return torch.autocast(device_type=torch.device(cfg.device).type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def response_stats(
    model, seqs, cfg: ModelConfig, *, temperature: float, entropy: bool
) -> TokenStats:
    """Chunked log-probs (and entropy) of the response columns of ``seqs`` (a
    :class:`rlvr.train.batch.SequenceBatch` on the model's device), under ``cfg``'s autocast."""
    with autocast(cfg):
        return sequence_token_stats(
            model,
            seqs.input_ids,
            seqs.attention_mask,
            seqs.response_width,
            temperature=temperature,
            chunk_size=cfg.chunk_size,
            compute_entropy=entropy,
            share_prompt=cfg.share_prompt,
        )
