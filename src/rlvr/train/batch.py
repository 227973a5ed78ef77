"""Typed batches: sequences laid out as left-padded prompts followed by right-padded responses.

``B`` sequences, ``P`` prompt columns, ``T`` response columns. The log-prob kernels read
the last ``T`` columns, so every batch here keeps that layout, also after rows from
different generation rounds are merged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from rlvr.generation import Generation, left_pad
from rlvr.ops.packing import prompt_groups


@dataclass(frozen=True)
class SequenceBatch:
    """Token ids of ``B`` prompt + response sequences."""

    input_ids: torch.Tensor
    """[B, P + T] prompt tokens (left-padded) then response tokens (right-padded)."""
    attention_mask: torch.Tensor
    """[B, P + T] 1 on real tokens (prompt and response up to its EOS)."""
    response_mask: torch.Tensor
    """[B, T] 1 on response tokens (generated or target), EOS included."""

    @property
    def size(self) -> int:
        """B."""
        return self.input_ids.shape[0]

    @property
    def response_width(self) -> int:
        """T."""
        return self.response_mask.shape[1]

    @property
    def prompt_width(self) -> int:
        """P."""
        return self.input_ids.shape[1] - self.response_width

    def rows(self, index: torch.Tensor) -> SequenceBatch:
        """The rows ``index`` [b], with prompt columns that are padding in every row dropped."""
        ids, attn = self.input_ids[index], self.attention_mask[index]
        prompt_attn = attn[:, : self.prompt_width]
        first = (
            int((prompt_attn.sum(0) > 0).nonzero()[0]) if prompt_attn.any() else self.prompt_width
        )
        return SequenceBatch(
            input_ids=ids[:, first:],
            attention_mask=attn[:, first:],
            response_mask=self.response_mask[index],
        )

    def to(self, device: torch.device | str) -> SequenceBatch:
        """The batch on ``device``."""
        return SequenceBatch(
            input_ids=self.input_ids.to(device),
            attention_mask=self.attention_mask.to(device),
            response_mask=self.response_mask.to(device),
        )

    def trim_responses(self) -> SequenceBatch:
        """The batch without trailing response columns that are padding in every row."""
        width = int(self.response_mask.sum(1).max()) if self.size else 0
        cut = self.response_width - width
        if cut == 0:
            return self
        return SequenceBatch(
            input_ids=self.input_ids[:, :-cut],
            attention_mask=self.attention_mask[:, :-cut],
            response_mask=self.response_mask[:, :width],
        )


def from_generation(gen: Generation) -> SequenceBatch:
    """A generation round as one batch on the CPU (tensors detached from inference mode).

    Rollout batches live on the CPU; each micro-batch moves to the model's device.
    """
    return SequenceBatch(
        input_ids=torch.cat([gen.prompt_ids, gen.response_ids], dim=1).cpu().clone(),
        attention_mask=torch.cat([gen.prompt_mask, gen.response_mask], dim=1).cpu().clone(),
        response_mask=gen.response_mask.cpu().clone(),
    )


def pack(
    prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]], pad_id: int
) -> SequenceBatch:
    """Token lists as one batch; each response must be non-empty."""
    p_ids, p_mask = left_pad(prompts, pad_id)
    width = max(len(r) for r in responses)
    r_ids = torch.full((len(responses), width), pad_id, dtype=torch.long)
    r_mask = torch.zeros((len(responses), width), dtype=torch.long)
    for i, row in enumerate(responses):
        r_ids[i, : len(row)] = torch.as_tensor(list(row), dtype=torch.long)
        r_mask[i, : len(row)] = 1
    return SequenceBatch(
        input_ids=torch.cat([p_ids, r_ids], dim=1),
        attention_mask=torch.cat([p_mask, r_mask], dim=1),
        response_mask=r_mask,
    )


def concat(batches: Sequence[SequenceBatch], pad_id: int) -> SequenceBatch:
    """Stack batches of different widths, re-padding prompts on the left and responses on the right."""
    if len(batches) == 1:
        return batches[0]
    p_width = max(b.prompt_width for b in batches)
    t_width = max(b.response_width for b in batches)
    ids, attn, resp = [], [], []
    for b in batches:
        left, right = p_width - b.prompt_width, t_width - b.response_width
        ids.append(torch.nn.functional.pad(b.input_ids, (left, right), value=pad_id))
        attn.append(torch.nn.functional.pad(b.attention_mask, (left, right), value=0))
        resp.append(torch.nn.functional.pad(b.response_mask, (0, right), value=0))
    return SequenceBatch(
        input_ids=torch.cat(ids), attention_mask=torch.cat(attn), response_mask=torch.cat(resp)
    )


@dataclass(frozen=True)
class RolloutBatch:
    """What the update consumes: sequences with rewards, advantages and behaviour log-probs."""

    seqs: SequenceBatch
    """The sampled sequences."""
    rewards: torch.Tensor
    """[B] verifier rewards."""
    advantages: torch.Tensor
    """[B] sequence advantages (computed over whole groups before any filtering)."""
    group_stats: Any
    """Per-row group statistics (``rlvr.advantages.GroupStats``) over whole groups."""
    old_logp: torch.Tensor | None = None
    """[B, T] behaviour-policy log-probs; ``None`` when the batch is used for one update only
    and was sampled from the current weights."""
    prox_logp: torch.Tensor | None = None
    """[B, T] proximal-policy log-probs (the weights at the start of the step) of the decoupled
    objective; ``None``: the current ones, detached (one optimiser step per batch)."""
    ref_logp: torch.Tensor | None = None
    """[B, T] reference-model log-probs; ``None`` when ``kl_coef = 0``."""
    rollout_logp: torch.Tensor | None = None
    """[B, T] the sampler's own log-probs of the sampled tokens; ``None`` when it reports none."""
    contrast_stats: dict[str, Any] = field(default_factory=dict)
    """Group statistics over whole groups of each ``log.contrast`` objective that reads them."""

    @property
    def size(self) -> int:
        """B."""
        return self.seqs.size

    def rows(self, index: torch.Tensor) -> RolloutBatch:
        """The rows ``index`` [b] of every field."""
        return replace(
            self,
            seqs=self.seqs.rows(index),
            rewards=self.rewards[index],
            advantages=self.advantages[index],
            group_stats=None if self.group_stats is None else self.group_stats.rows(index),
            old_logp=None if self.old_logp is None else self.old_logp[index],
            prox_logp=None if self.prox_logp is None else self.prox_logp[index],
            ref_logp=None if self.ref_logp is None else self.ref_logp[index],
            rollout_logp=None if self.rollout_logp is None else self.rollout_logp[index],
            contrast_stats={k: v.rows(index) for k, v in self.contrast_stats.items()},
        )

    def to(self, device: torch.device | str) -> RolloutBatch:
        """Every tensor of the batch on ``device``."""
        return replace(
            self,
            seqs=self.seqs.to(device),
            rewards=self.rewards.to(device),
            advantages=self.advantages.to(device),
            group_stats=None if self.group_stats is None else self.group_stats.to(device),
            old_logp=None if self.old_logp is None else self.old_logp.to(device),
            prox_logp=None if self.prox_logp is None else self.prox_logp.to(device),
            ref_logp=None if self.ref_logp is None else self.ref_logp.to(device),
            rollout_logp=None if self.rollout_logp is None else self.rollout_logp.to(device),
            contrast_stats={k: v.to(device) for k, v in self.contrast_stats.items()},
        )

    def trim_responses(self) -> RolloutBatch:
        """The batch without trailing response columns that are padding in every row."""
        seqs = self.seqs.trim_responses()
        width = seqs.response_width
        if width == self.seqs.response_width:
            return self
        return replace(
            self,
            seqs=seqs,
            old_logp=None if self.old_logp is None else self.old_logp[:, :width],
            prox_logp=None if self.prox_logp is None else self.prox_logp[:, :width],
            ref_logp=None if self.ref_logp is None else self.ref_logp[:, :width],
            rollout_logp=None if self.rollout_logp is None else self.rollout_logp[:, :width],
        )


def pad_logp(parts: Sequence[torch.Tensor | None], width: int) -> torch.Tensor | None:
    """[B, width] rows of ``parts`` ([b, T <= width] each) right-padded with 0; ``None`` if any part is."""
    if any(p is None for p in parts):
        return None
    return torch.cat([torch.nn.functional.pad(p.cpu(), (0, width - p.shape[1])) for p in parts])


def split_rows(size: int, parts: int) -> list[torch.Tensor]:
    """``parts`` contiguous row ranges of (almost) equal size covering ``range(size)``."""
    return [chunk for chunk in torch.arange(size).tensor_split(parts) if len(chunk)]


def micro_batches(seqs: SequenceBatch, chunk: int | None, *, by_prompt: bool) -> list[torch.Tensor]:
    """Row indices of the micro-batches: :func:`prompt_chunks` when ``by_prompt`` (the
    log-prob passes compute each prompt once per micro-batch), else :func:`length_sorted_chunks`."""
    return prompt_chunks(seqs, chunk) if by_prompt else length_sorted_chunks(seqs, chunk)


def prompt_chunks(seqs: SequenceBatch, chunk: int | None) -> list[torch.Tensor]:
    """Row indices in chunks of at most ``chunk``, the rows of one prompt next to each other.

    Prompts come in decreasing order of their rows' total length, and each prompt's rows
    longest first, so a micro-batch holds few prompts (each computed once, see
    :mod:`rlvr.ops.packing`) of similar total length (little padding between them).
    """
    if chunk is None or chunk >= seqs.size:
        return [torch.arange(seqs.size)]
    groups = prompt_groups(seqs.input_ids, seqs.attention_mask, seqs.prompt_width)  # [B]
    lengths = seqs.attention_mask.sum(1)  # [B] real tokens (prompt + response)
    totals = torch.zeros(int(groups.max()) + 1, dtype=lengths.dtype).index_add_(0, groups, lengths)
    rank = torch.empty_like(totals)
    rank[torch.argsort(totals, descending=True, stable=True)] = torch.arange(len(totals))
    key = rank[groups] * (int(lengths.max()) + 1) + (int(lengths.max()) - lengths)
    order = torch.argsort(key, stable=True)
    return list(order.split(chunk))


def length_sorted_chunks(seqs: SequenceBatch, chunk: int | None) -> list[torch.Tensor]:
    """Row indices in chunks of at most ``chunk``, longest sequences together (``None``: one chunk).

    Micro-batches of similar lengths carry less padding, so less compute; the losses are
    sums over rows, so the grouping does not change the result.
    """
    if chunk is None or chunk >= seqs.size:
        return [torch.arange(seqs.size)]
    lengths = seqs.attention_mask.sum(1)  # [B] real tokens (prompt + response)
    order = torch.argsort(lengths, descending=True, stable=True)
    return list(order.split(chunk))
