"""The log-prob pass: per-token log-probs (and entropy) of a batch's responses, and the
context every forward pass of the policy runs in."""

from __future__ import annotations

import contextlib

import torch

from rlvr.generation.base import varying_shape_attention
from rlvr.models import resolve_device
from rlvr.ops import TokenStats, sequence_token_stats
from rlvr.train.config import ModelConfig


@contextlib.contextmanager
def forward_context(cfg: ModelConfig):
    """The context of the policy's forward passes (rollout and update): attention off cuDNN
    (:func:`rlvr.generation.base.varying_shape_attention`), and under ``autocast=bf16``
    bfloat16 autocast."""
    device = torch.device(resolve_device(cfg.device)).type
    bf16 = cfg.autocast == "bf16"
    cast = torch.autocast(device, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    with cast, varying_shape_attention():
        yield


def response_stats(
    model, seqs, cfg: ModelConfig, *, temperature: float, entropy: bool
) -> TokenStats:
    """Chunked log-probs (and entropy) of the response columns of ``seqs`` (a
    :class:`rlvr.train.batch.SequenceBatch` on the model's device), in :func:`forward_context`."""
    with forward_context(cfg):
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
