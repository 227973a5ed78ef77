"""Each prompt once: the rows of a batch that share a prompt, packed into one sequence.

The ``G`` completions of a group share their prompt, yet the padded layout
(``[B, P + T]``: left-padded prompt, right-padded response, one row per completion)
runs the prompt through the model ``G`` times, and every row up to the longest response.
:func:`pack_by_prompt` lays the same tokens out as one sequence per distinct prompt::

    [prompt] [response 1] [response 2] ... [response k]    (real tokens only)

with a block mask: a prompt token attends causally to the prompt; a response token
attends to the whole prompt and causally to its own response, never to another
response. Positions are those of the padded layout (the prompt counts ``0..P_u - 1``,
each response continues from ``P_u``). Every response token therefore sees exactly the
keys, values and position it sees in the padded layout, so its log-prob is the same
function of the parameters: the prompt's activations are computed once and their
gradient is the sum of what each completion sends back, the gradient of the padded
layout. No padding is computed either (only the end of shorter packed rows).

Attention in a packed row is dense over ``L = P_u + sum of its response lengths``
positions, so a prompt's responses go into one row only up to ``max_tokens`` positions
and start another row (with the prompt again) beyond that.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

PACK_TOKENS = 2048
"""Positions per packed row before a prompt's responses start another row."""


@dataclass(frozen=True)
class PackedRows:
    """A ``[B, P + T]`` batch laid out as ``R`` packed rows of ``L`` positions."""

    input_ids: torch.Tensor
    """[R, L] prompt tokens then each response's tokens; padding at the end of a row."""
    position_ids: torch.Tensor
    """[R, L] positions of the padded layout (0 on padding)."""
    allowed: torch.Tensor
    """[R, L, L] bool: query ``i`` may attend key ``j`` (padding queries attend themselves)."""
    source: torch.Tensor
    """[N] flat index into ``R * L`` of the position whose output predicts each response token."""
    labels: torch.Tensor
    """[N] the response tokens (those with ``attention_mask`` 1)."""
    target: torch.Tensor
    """[N] flat index into ``B * T`` of each response token."""
    shape: tuple[int, int]
    """``(B, T)`` of the padded layout."""

    def unpack(self, values: torch.Tensor) -> torch.Tensor:
        """[N] per-token values -> [B, T], 0 on padding (differentiable)."""
        b, t = self.shape
        flat = values.new_zeros(b * t)
        return flat.index_copy(0, self.target, values).view(b, t)


def _is_prefix(mask: torch.Tensor) -> bool:
    """Every row of ``mask`` [B, T] bool is ones then zeros."""
    return bool((mask.cumprod(dim=1).bool() == mask).all())


def packable(attention_mask: torch.Tensor, num_response_tokens: int) -> bool:
    """Whether the batch has the rollout layout :func:`pack_by_prompt` reproduces exactly.

    Prompts must be left-padded with a real last column, responses right-padded (a
    token that is masked inside a row would change what the padded layout predicts).
    """
    mask = attention_mask.detach().to("cpu", torch.bool)  # one copy; the checks read the host
    prompt, response = mask[:, :-num_response_tokens], mask[:, -num_response_tokens:]
    return (
        bool(prompt[:, -1].all())
        and _is_prefix(prompt.flip(1))
        and _is_prefix(response)
        and bool(response.any(dim=1).all())
    )


def prompt_groups(input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_width: int):
    """[B] index of each row's distinct prompt (real tokens compared, padding ignored).

    Numbered by first appearance, so rows of the same group share a number.
    """
    keys = input_ids[:, :prompt_width].masked_fill(attention_mask[:, :prompt_width] == 0, -1)
    _, inverse = torch.unique(keys, dim=0, return_inverse=True)
    first = {}
    for u in inverse.tolist():
        first.setdefault(u, len(first))
    return torch.tensor([first[u] for u in inverse.tolist()], dtype=torch.long)


def _plan_rows(
    groups: list[int], prompt_len: dict[int, int], lengths: list[int], max_tokens: int
) -> list[tuple[int, list[int]]]:
    """``[(prompt group, [batch rows])]``, one entry per packed row."""
    members: dict[int, list[int]] = {}
    for row, g in enumerate(groups):
        members.setdefault(g, []).append(row)
    plan = []
    for g, rows in members.items():
        current, used = [], prompt_len[g]
        for row in rows:
            if current and used + lengths[row] > max_tokens:
                plan.append((g, current))
                current, used = [], prompt_len[g]
            current.append(row)
            used += lengths[row]
        plan.append((g, current))
    return plan


def pack_by_prompt(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    num_response_tokens: int,
    *,
    max_tokens: int = PACK_TOKENS,
    pad_id: int = 0,
) -> PackedRows:
    """The batch ``[B, P + T]`` (rollout layout, see :func:`packable`) as packed rows.

    Args:
        input_ids: [B, P + T] left-padded prompts then right-padded responses.
        attention_mask: [B, P + T] 1 on real tokens.
        num_response_tokens: T.
        max_tokens: longest packed row before a prompt's responses start another row
            (a single prompt plus response longer than that still gets its row).
        pad_id: token id written at the end of shorter packed rows.
    """
    device = input_ids.device
    ids, mask = input_ids.cpu(), attention_mask.cpu().bool()  # the layout is planned on the host
    if not packable(mask, num_response_tokens):
        raise ValueError("pack_by_prompt needs left-padded prompts and right-padded responses")
    b, width = input_ids.shape
    t = num_response_tokens
    p = width - t
    groups = prompt_groups(ids, mask, p).tolist()
    prompt_lengths = mask[:, :p].sum(1).tolist()
    lengths = mask[:, p:].sum(1).tolist()
    prompt_len = {g: prompt_lengths[row] for row, g in enumerate(groups)}
    plan = _plan_rows(groups, prompt_len, lengths, max_tokens)
    rows_len = [prompt_len[g] + sum(lengths[r] for r in rows) for g, rows in plan]
    n_rows, n_pos = len(plan), max(rows_len)
    packed_ids = torch.full((n_rows, n_pos), pad_id, dtype=ids.dtype)
    positions = torch.zeros((n_rows, n_pos), dtype=torch.long)
    segment = torch.full((n_rows, n_pos), -2, dtype=torch.long)  # -1 prompt, k response, -2 pad
    source, target, labels = [], [], []
    for k, (g, rows) in enumerate(plan):
        first = rows[0]
        plen = prompt_len[g]
        packed_ids[k, :plen] = ids[first, p - plen : p]
        positions[k, :plen] = torch.arange(plen)
        segment[k, :plen] = -1
        start = plen
        for m, row in enumerate(rows):
            n = lengths[row]
            packed_ids[k, start : start + n] = ids[row, p : p + n]
            positions[k, start : start + n] = torch.arange(plen, plen + n)
            segment[k, start : start + n] = m
            before = torch.arange(start - 1, start + n - 1)
            before[0] = plen - 1  # the first response token is predicted by the last prompt token
            source.append(k * n_pos + before)
            target.append(row * t + torch.arange(n))
            labels.append(ids[row, p : p + n])
            start += n
    return PackedRows(
        input_ids=packed_ids.to(device),
        position_ids=positions.to(device),
        allowed=_block_mask(segment).to(device),
        source=torch.cat(source).to(device),
        labels=torch.cat(labels).to(device),
        target=torch.cat(target).to(device),
        shape=(b, t),
    )


def _block_mask(segment: torch.Tensor) -> torch.Tensor:
    """[R, L, L] bool from [R, L] segments (-1 prompt, k >= 0 response k, -2 padding).

    Causal, and a response sees the prompt and itself only; a padding query sees itself.
    """
    n = segment.shape[1]
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    key, query = segment[:, None, :], segment[:, :, None]
    visible = (key == -1) | ((key == query) & (key >= 0))
    return (causal & visible) | torch.eye(n, dtype=torch.bool)
