"""The log-prob pass: per-token log-probs (and entropy) of a batch's responses under the
model's autocast."""

from __future__ import annotations

import contextlib

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from rlvr.ops import TokenStats, sequence_token_stats
from rlvr.train.config import ModelConfig

VARYING_SHAPE_ATTENTION = (
    SDPBackend.FLASH_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION,
    SDPBackend.MATH,
)
"""The attention kernels a bf16 forward may use: all but cuDNN's, which builds an execution
plan for each new shape, and a run's shapes change at every decoding step and every batch
(the KV cache grows, finished rows leave the batch, batches pad to their longest row)."""


@contextlib.contextmanager
def autocast(cfg: ModelConfig):
    """The forward-pass context of ``cfg``: nothing unless ``autocast=bf16``; then bfloat16
    autocast, with attention kept off cuDNN (:data:`VARYING_SHAPE_ATTENTION`)."""
    if cfg.autocast != "bf16":
        yield
        return
    device = torch.device(cfg.device).type
    with (
        torch.autocast(device_type=device, dtype=torch.bfloat16),
        sdpa_kernel(list(VARYING_SHAPE_ATTENTION)),
    ):
        yield


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
